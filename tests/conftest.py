"""Shared fixtures and builders: the default config, a copy of the checkout, the user's
environment, the test Slurm; the fake NVML module (the one mock: no GPU on CI machines); and
:func:`build_stage_outputs`, a small study written by the earlier stages' own code (used by the
economics and report tests)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_power.analysis.authority import write_authority
from grpo_power.analysis.evaluate import evaluate_folder
from grpo_power.analysis.fleet import run_fleet
from grpo_power.analysis.fleet.study_mix import run_study_fleet
from grpo_power.analysis.windows import run_windows
from grpo_power.analysis.windows.simulated import run_sim_windows, sim_sample_files
from grpo_power.config import Config, load_config, validate_config
from grpo_power.layout import SIM_RUN_METADATA_KEY
from grpo_power.sim.step_model import Physics
from grpo_power.telemetry.schema import TraceMetadata
from grpo_power.telemetry.steplog import STEP_LOG_SCHEMA
from grpo_power.telemetry.store import write_trace

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
# The public measured traces beside the repository (never copied into it: no license file).
REAL_TRACES = REPO.parent / "shared" / "data" / "real-traces"
# The README's commands on them, as it writes them (relative to a checkout).
_SHARED_README = "../shared/data/real-traces"
REAL_RUNS = {  # run id -> its folder under the shared traces
    "bursty": "arrival_pattern_qwen3-8b_a100_bursty/a100_validate_tp1_r2p5_b0p25_s20260712_"
    "1784415659",
    "smooth": "arrival_pattern_qwen3-8b_a100_smooth/a100_validate_tp1_r2p5_b4p0_s20260712_"
    "1784415439",
    "r2p5": "arrival_rate_qwen3-8b_a100_r2p5/a100_validate_tp1_r2p5_b1p0_s20260712_1784415659",
}
REAL_TRACE_COMMANDS = [
    *(
        f".venv/bin/grpo-power telemetry import {_SHARED_README}/{path}/power.csv --engine "
        f'{_SHARED_README}/{path}/engine.csv --nameplate-w 400 --gpu-name "NVIDIA A100-SXM4-80GB" '
        f'--run-id {name} --origin "grantwilkins/powertrace-sim data/runs/{path.split("/")[0]} '
        f'@96361ef" --out results/traces/{name}.parquet'
        for name, path in REAL_RUNS.items()
    ),
    ".venv/bin/grpo-power identify --trace results/traces/bursty.parquet --trace "
    "results/traces/smooth.parquet --validate results/traces/r2p5.parquet --out "
    "results/identify/traces",
]


@pytest.fixture
def config() -> Config:
    return load_config(REPO / "config" / "config.yaml")


def missing_requirement(reason: str) -> None:
    """A test needs something this machine lacks (Slurm, chromium, snakemake): under CI=true,
    where `.ci/run` installs all of it, that is a failure; elsewhere a skip giving ``reason``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


def readme_commands() -> list[str]:
    """The commands of README.md's ```bash blocks, in order: continuation lines joined,
    comments (a line's ``  # ...`` tail, and whole comment lines) dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S):
        text = block.replace("\\\n", " ")
        for line in text.splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def have_real_traces() -> bool:
    """Whether the public traces lie beside the checkout; their absence fails under CI=true
    (as :func:`missing_requirement`), for a test that runs without them but checks more with."""
    present = (REAL_TRACES / REAL_RUNS["bursty"] / "power.csv").exists()
    if not present and os.environ.get("CI") == "true":
        pytest.fail(f"CI must provide this: the public traces at {REAL_TRACES}")
    return present


def real_traces() -> Path:
    """The public traces' folder; where it is absent, :func:`missing_requirement`."""
    if not have_real_traces():
        missing_requirement(f"the public traces at {REAL_TRACES} (see docs/calibration.md)")
    return REAL_TRACES


def checkout_copy(folder: Path) -> Path:
    """A copy of this checkout in ``folder`` (the files git tracks, and those it does not ignore),
    modification times kept, with ``.venv`` linked to this checkout's: a clean clone, where a
    user types the README's commands."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    if (REPO / ".venv").exists():
        (folder / ".venv").symlink_to(REPO / ".venv")
    return folder


def user_env() -> dict[str, str]:
    """The environment of a user who ran `make test`: this Python's bin folder first on PATH."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")


def run_as_user(
    command: str, cwd: Path, timeout_s: float = 1800, exit_codes: tuple[int, ...] = (0,)
) -> str:
    """Run ``command`` through bash in ``cwd`` as a user types it (:func:`user_env`); fail the
    test unless it exits with one of ``exit_codes`` (0 unless the README says the command may
    fail) without a traceback. Returns its stdout and stderr together."""
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    output = done.stdout + done.stderr
    assert done.returncode in exit_codes, f"`{command}` exited {done.returncode}:\n{output[-4000:]}"
    assert "Traceback" not in output, f"`{command}`:\n{output[-4000:]}"
    return output


def _slurm_problem() -> str | None:
    if shutil.which("sbatch") is None:
        return "no Slurm client (sbatch) on PATH"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    if "UP" not in ping.stdout:
        return "no running slurmctld (make test starts one when run as root)"
    if "# grpo-power test cluster" not in Path("/etc/slurm/slurm.conf").read_text():
        return "the running Slurm is not the test cluster of scripts/slurm/start.sh"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    """The test Slurm of scripts/slurm/start.sh (account grpo, partition debug), or a skip."""
    problem = _slurm_problem()
    if problem:
        missing_requirement(f"the test Slurm: {problem}")


# --------------------------------------------------------------------------------------------
# the fake NVML module


class FakeNVMLError(Exception):
    pass


class FakeLibraryNotFound(FakeNVMLError):
    pass


@dataclass
class FakeGpu:
    index: int
    uuid: str
    instant_mw: int
    average_mw: int
    energy_mj: int
    supports_fields: bool = True
    usage_mw: int = 0
    calls: list[str] = field(default_factory=list)
    limit_mw: int = 350_000  # the enforced power limit
    limits_set_mw: list[int] = field(
        default_factory=list
    )  # every nvmlDeviceSetPowerManagementLimit


def fake_nvml(gpus: list[FakeGpu], library_present: bool = True) -> types.SimpleNamespace:
    """A module-like object with the pynvml functions NvmlSource calls, values in NVML's units."""

    def init() -> None:
        if not library_present:
            raise FakeLibraryNotFound("NVML Shared Library Not Found")

    def by_uuid(uuid: str) -> FakeGpu:
        for gpu in gpus:
            if gpu.uuid == uuid:
                return gpu
        raise FakeNVMLError("Not Found")

    def field_values(gpu: FakeGpu, ids: list[int]) -> list[types.SimpleNamespace]:
        gpu.calls.append("fields")
        values = {186: gpu.instant_mw, 185: gpu.average_mw}
        return [
            types.SimpleNamespace(
                nvmlReturn=0 if gpu.supports_fields else 3,  # 3 = NVML_ERROR_NOT_SUPPORTED
                valueType=1,
                value=types.SimpleNamespace(uiVal=values[i]),
            )
            for i in ids
        ]

    def power_usage(gpu: FakeGpu) -> int:
        gpu.calls.append("usage")
        return gpu.usage_mw

    def set_limit(gpu: FakeGpu, limit_mw: int) -> None:
        gpu.limits_set_mw.append(limit_mw)
        gpu.limit_mw = limit_mw

    return types.SimpleNamespace(
        NVMLError=FakeNVMLError,
        NVMLError_LibraryNotFound=FakeLibraryNotFound,
        NVML_FI_DEV_POWER_AVERAGE=185,
        NVML_FI_DEV_POWER_INSTANT=186,
        NVML_CLOCK_SM=1,
        NVML_TEMPERATURE_GPU=0,
        nvmlInit=init,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: gpus[i],
        nvmlDeviceGetHandleByUUID=by_uuid,
        nvmlDeviceGetIndex=lambda g: g.index,
        nvmlDeviceGetName=lambda g: "NVIDIA A100-SXM4-40GB",
        nvmlDeviceGetUUID=lambda g: g.uuid,
        nvmlDeviceGetPowerManagementDefaultLimit=lambda g: 400_000,
        nvmlDeviceGetEnforcedPowerLimit=lambda g: g.limit_mw,
        nvmlDeviceGetPowerManagementLimit=lambda g: g.limit_mw,
        nvmlDeviceGetPowerManagementLimitConstraints=lambda g: (100_000, 400_000),
        nvmlDeviceSetPowerManagementLimit=set_limit,
        nvmlDeviceGetFieldValues=field_values,
        nvmlDeviceGetPowerUsage=power_usage,
        nvmlDeviceGetTotalEnergyConsumption=lambda g: g.energy_mj,
        nvmlDeviceGetUtilizationRates=lambda g: types.SimpleNamespace(gpu=97, memory=45),
        nvmlDeviceGetClockInfo=lambda g, kind: 1410,
        nvmlDeviceGetTemperature=lambda g, kind: 64,
    )


def authority_rows(
    deployment: str, concurrency: bool = True, max_new_tokens: bool = False
) -> list[dict]:
    """Authority rows saying which actuators cleared the threshold."""
    return [
        {
            "deployment": deployment,
            "actuator": "concurrency",
            "data": "simulated",
            "selected": concurrency,
            "authority": 0.2,
            "hold_level": 32,
        },
        {
            "deployment": deployment,
            "actuator": "max_new_tokens",
            "data": "simulated",
            "selected": max_new_tokens,
            "authority": 0.03,
            "hold_level": 64,
        },
    ]


def best_static_tokens(
    physics: Physics,
    config: Config,
    cap_w: float,
    budget_s: float,
    chunks: tuple[int, ...],
    concurrencies: range,
) -> float:
    """The most tokens a setting held through the run makes within the budget on the
    evaluation seeds (simulated): each concurrency x training chunk, the longest completions,
    no pause; 0 where none is within."""
    from grpo_power.analysis.objective import meets_budget, pooled
    from grpo_power.control.controllers import FixedController
    from grpo_power.control.simulate import run_outcome, simulate

    seeds = config.evaluate.seeds
    longest = config.workload.max_new_tokens_bounds.max
    best = 0.0
    for chunk in chunks:
        for concurrency in concurrencies:
            held = FixedController(concurrency, longest, chunk, 0)
            runs = [simulate(physics, config, held, cap_w, budget_s, s) for s in seeds]
            outcome = pooled([run_outcome(r, budget_s, config.objective) for r in runs])
            if meets_budget(outcome.violation_rate, outcome.breaker_excess_w, config.objective):
                best = max(best, outcome.tokens)
    return best


# --------------------------------------------------------------------------------------------
# a small study written by the stages' own code


RUN_ARMS = ("uncontrolled", "fixed", "fixed-half", "threshold")
SIM_ARMS = ("uncontrolled", "fixed", "fixed-half", "fixed-safe", "ppo")
SIM_DEPLOYMENTS = {"7b": (1, 320.0), "72b": (4, 220.0)}  # gpus, cap per GPU


def small_config(root: Path) -> Config:
    """The default config with small windows, fleets and report settings under ``root``."""
    return validate_config(
        {
            "results_dir": str(root),
            "windows": {"windows_s": [0.5, 1.0, 5.0, 10.0]},
            "fleet": {
                "n_gpus": 4,
                "window_s": 5.0,
                "draws": 10,
                "horizon_s": 40.0,
                "scaling_sizes": [4, 16, 64],
                "scaling_draws": 3,
                # the synthetic evaluation's deployments (SIM_DEPLOYMENTS: no 14b)
                "study_mix": [{"deployment": "72b", "jobs": 2}, {"deployment": "7b", "jobs": 4}],
            },
            "economics": {"fleet_gpus": 32},
            "report": {"trace_s": 10.0, "max_points": 400, "dpi": 50},
        }
    )


def _square_wave(n: int, low_w: float, high_w: float, period: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    wave = np.where((np.arange(n) // (period // 2)) % 2 == 0, high_w, low_w)
    return wave + rng.normal(0.0, 3.0, n)


def write_run(folder: Path, config: Config, arm: str, high_w: float, tokens: int) -> Path:
    """A completed run folder: 30 s of 0.1 s samples on one GPU, 10 steps of ``tokens``."""
    period_s, n = 0.1, 301
    t = np.arange(n) * period_s
    power = _square_wave(n, 150.0, high_w, 20, len(arm))
    energy = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * period_s)])
    frame = pd.DataFrame(
        {
            "t": t,
            "gpu": 0,
            "power_w": power,
            "power_avg_w": np.nan,
            "energy_j": energy,
            "sm_util": 50.0,
            "mem_util": 20.0,
            "sm_clock_mhz": 1410.0,
            "temp_c": 50.0,
            "power_limit_w": 400.0,
        }
    )
    run_id = f"tiny-{arm}-seed0"
    metadata = TraceMetadata(
        run_id=run_id,
        source="simulated",
        gpu_name="NVIDIA A100-SXM4-40GB",
        nameplate_w=400.0,
        sample_period_s=period_s,
        simulated=True,  # as a tiny run's: simulated power, this machine's timing
        model_size="tiny",
    )
    write_trace(folder / "trace.parquet", frame, metadata)
    steps = 10
    columns: dict[str, list] = {}
    for f in STEP_LOG_SCHEMA:
        default = False if pa.types.is_boolean(f.type) else 0
        columns[f.name] = [default] * steps
    columns["step"] = list(range(1, steps + 1))
    columns["start_s"] = [3.0 * i for i in range(steps)]
    columns["end_s"] = [3.0 * (i + 1) for i in range(steps)]
    columns["completion_tokens"] = [tokens] * steps
    table = pa.Table.from_pydict(
        {
            k: [float(v) if pa.types.is_floating(STEP_LOG_SCHEMA.field(k).type) else v for v in vs]
            for k, vs in columns.items()
        },
        schema=STEP_LOG_SCHEMA,
    )
    pq.write_table(table, folder / "steps.parquet")
    manifest = {
        "status": "completed",
        "arm": arm,
        "size": "tiny",
        "seed": 0,
        "run_id": run_id,
        "host": "test-host",
        "hardware": {"platform": "test-platform", "cpu_count": 2, "cuda_devices": []},
        "packages": {"grpo-power": "0.1.0", "torch": "2.13.0+cpu", "trl": "1.16.0"},
        "python": "3.11.7",
        "config": config.model_dump(mode="json"),
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def _sim_parquet(path: Path, frame: pd.DataFrame, metadata: dict) -> None:
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(
        table.replace_schema_metadata({SIM_RUN_METADATA_KEY: json.dumps(metadata)}), path
    )


def write_evaluation(
    folder: Path, config: Config, deployments: dict[str, tuple[int, float]] = SIM_DEPLOYMENTS
) -> None:
    """Synthetic simulated runs of each arm (60 s, 5 seeds) on ``deployments`` (gpus, cap per
    GPU) scored by the evaluate stage."""
    levels = {
        "uncontrolled": (350.0, 1.2),
        "fixed": (330.0, 1.0),
        "fixed-half": (305.0, 0.7),
        "fixed-safe": (280.0, 0.8),
        "ppo": (300.0, 1.15),
    }
    budget_s, period_s = 60.0, 0.1
    for deployment, (gpus, cap_w) in deployments.items():
        out = folder / deployment
        out.mkdir(parents=True)
        scale = cap_w / 320.0
        arms = {}
        for arm in SIM_ARMS:
            high_w, speed = levels[arm]
            samples, steps = [], []
            for seed in range(5):
                n = int(budget_s / period_s)
                power = _square_wave(n * gpus, 150.0 * scale, high_w * scale, 40, seed)
                samples.append(
                    pd.DataFrame(
                        {
                            "seed": seed,
                            "gpu": np.tile(np.arange(gpus), n),
                            "sample": np.repeat(np.arange(n), gpus),
                            "power_w": power,
                        }
                    )
                )
                starts = np.arange(0.0, budget_s, 2.0)
                steps.append(
                    pd.DataFrame(
                        {
                            "seed": seed,
                            "step": np.arange(1, len(starts) + 1),
                            "start_s": starts,
                            "end_s": starts + 2.0,
                            "concurrency": 16,
                            "max_new_tokens": 32,
                            "tokens": 1000.0 * speed * (1.0 + 0.02 * seed),
                        }
                    )
                )
            metadata = {
                "deployment": deployment,
                "arm": arm,
                "gpus": gpus,
                "cap_w": cap_w,
                "budget_s": budget_s,
                "period_s": period_s,
                "nameplate_w": config.gpu.nameplate_w,
            }
            _sim_parquet(out / f"{arm}.samples.parquet", pd.concat(samples), metadata)
            _sim_parquet(out / f"{arm}.steps.parquet", pd.concat(steps), metadata)
            arms[arm] = (
                {"actuators": ["concurrency"], "holds": {}}
                if arm == "ppo"
                else {"concurrency": 16, "max_new_tokens": 32}
            )
        info = {
            "simulated": True,
            "deployment": deployment,
            "gpus": gpus,
            "cap_w": cap_w,
            "budget_s": budget_s,
            "seeds": list(range(5)),
            "arms": arms,
        }
        (out / "arms.json").write_text(json.dumps(info))
    evaluate_folder(folder, list(deployments), 0.5, config.evaluate.confidence, config.objective)


def write_identify(folder: Path, config: Config) -> None:
    """An authority table from synthetic sweeps (the identify stage's writer)."""
    rows = []
    for data, deployment, gpus, gain in (
        ("simulated", "7b", 1, 1.0),
        ("simulated", "72b", 4, 0.3),
        ("real run (simulated power)", "tiny-run", 1, 0.8),
    ):
        for actuator, span_w in (
            ("concurrency", 70.0),
            ("num_generations", 40.0),
            ("pause_s", -30.0),  # a pause lowers power; max_new_tokens: not swept
        ):
            for level, power in ((1, 200.0), (16, 200.0 + gain * span_w)):
                rows.append(
                    {
                        "data": data,
                        "deployment": deployment,
                        "gpus": gpus,
                        "actuator": actuator,
                        "level": level,
                        "mean_power_w": power,
                        "tokens_per_s": 100.0 + level,
                        "nameplate_w": 400.0,
                        "idle_w": 60.0,
                        "default": level == 16,
                        "violation_rate": 0.0,
                    }
                )
    weights = config.controller.reward.model_dump()
    write_authority(pd.DataFrame(rows), config.authority.threshold, "7b", weights, folder)


def write_controllers(root: Path) -> list[Path]:
    """Controller folders (controller.json) for the simulated deployments; 7b has a curve."""
    folders = []
    for deployment in SIM_DEPLOYMENTS:
        folder = root / deployment
        folder.mkdir(parents=True)
        evaluation = {"trained_return": 30.0, "random_return": -10.0}
        oracle = {"tokens_per_s": 900.0, "violation_rate": 0.01, "feasible": True}
        info = {
            "simulated": True,
            "deployment": deployment,
            "evaluation": evaluation,
            "oracle": oracle,
        }
        if deployment == "7b":  # the snapshot validation chose (older controllers have none)
            candidates = [{"timesteps": t, "final": t == 192} for t in (128, 192)]
            info["selection"] = {"chosen": 0, "candidates": candidates}
        (folder / "controller.json").write_text(json.dumps(info))
        folders.append(folder)
    curve = pd.DataFrame(
        {
            "timesteps": [64, 128, 192],
            "episode_return": [-5.0, 10.0, 25.0],
            "tokens_per_s": [500.0, 700.0, 850.0],
            "violation_rate": [0.2, 0.05, 0.02],
            "multiplier": [18.0, 21.0, 21.0],
        }
    )
    curve.to_csv(root / "7b" / "learning_curve.csv", index=False)
    return folders


def build_stage_outputs(root: Path) -> tuple[Config, dict[str, list[Path] | Path]]:
    """Every input of the economics and report stages, written by the stages' own code."""
    config = small_config(root)
    runs = [
        write_run(root / "runs" / "tiny" / arm / "seed0", config, arm, high, tokens)
        for arm, high, tokens in zip(
            RUN_ARMS, (360.0, 330.0, 300.0, 310.0), (900, 800, 600, 760), strict=True
        )
    ]
    exceedance = []
    for folder in runs:
        out = root / "windows" / folder.relative_to(root) / "trace"
        run_windows(folder / "trace.parquet", out, config)
        exceedance.append(out / "exceedance.csv")
    run_fleet([p.parent / "bins.parquet" for p in exceedance], root / "fleet", config)
    write_evaluation(root / "evaluate" / "study", config)
    for scenario in config.evaluate.scenarios:  # the default's: 7b at 305 W
        scenario_caps = {d: (SIM_DEPLOYMENTS[d][0], scenario.cap_w) for d in scenario.deployments}
        write_evaluation(config.layout.evaluate_scenario(scenario.name), config, scenario_caps)
    for deployment in SIM_DEPLOYMENTS:
        files = sim_sample_files(root / "evaluate" / "study", deployment, SIM_ARMS)
        run_sim_windows(files, config.layout.sim_windows(deployment), config)
    run_study_fleet(
        [config.layout.sim_windows(d) for d in SIM_DEPLOYMENTS], config.layout.study_fleet, config
    )
    write_identify(root / "identify", config)
    controllers = write_controllers(root / "controller")
    paths = {"runs": runs, "exceedance": exceedance, "controllers": controllers}
    return config, paths
