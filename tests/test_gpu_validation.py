"""The GPU validation: scripts/gpu_validate.sh on the simulated GPU (so GPU time is spent
measuring), and the analysis stages on what it measured on an H100 (tests/data/gpu/README.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from grpo_power.cli import app
from grpo_power.config import load_config
from grpo_power.sim.calibration import calibration_for
from grpo_power.sim.step_model import physics_for
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace
from grpo_power.workload.sweep import read_sweep_index
from tests.conftest import DATA, REPO

GPU = DATA / "gpu"
GRID = ("c4-t16", "c4-t64", "c16-t16", "c16-t64", "c32-t16", "c32-t64")


def _gpu_config(tmp_path: Path, name: str = "config.yaml") -> Path:
    """The validation's config as it ran on the GPU, its results folder moved under tmp_path."""
    data = yaml.safe_load((GPU / name).read_text())
    data["results_dir"] = str(tmp_path / "results")
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_the_h100_energy_counter_agrees_with_integrated_power(tmp_path: Path) -> None:
    trace = read_trace(GPU / "energy_check.parquet")
    assert trace.metadata.source == "nvml" and not trace.metadata.simulated
    assert trace.metadata.gpu_name == "NVIDIA H100 80GB HBM3"
    output = _cli("telemetry", "summary", "--compare-energy", "--config",
                  str(_gpu_config(tmp_path)), str(GPU / "energy_check.parquet"))  # fmt: skip
    assert "SIMULATED" not in output
    difference = re.search(r"difference [-+][\d.]+ J \(([-+][\d.]+) %\)", output)
    assert difference is not None, output
    assert abs(float(difference.group(1))) < 0.5  # the counter and 0.1 s power integrated


def test_identify_fits_the_simulator_from_the_h100_runs(tmp_path: Path) -> None:
    """The identify stage on the measured grid: each run enters the fit once (the sweep names
    c32-t64 for both actuators), its power is measured, the fit is closer to the measured phase
    power than the simulator's prior, and the measured authority rows say what the runs show."""
    config = _gpu_config(tmp_path)
    out = tmp_path / "identify"
    swept = {folder.name for _, _, folder in read_sweep_index(GPU / "grid")}
    others = [
        arg for name in GRID if name not in swept for arg in ("--run", str(GPU / "grid" / name))
    ]
    _cli(
        "identify",
        "--out",
        str(out),
        "--sweep",
        str(GPU / "grid"),
        *others,
        "--config",
        str(config),
    )
    calibration = json.loads((out / "calibration.json").read_text())
    fit = calibration["fits"]["qwen2.5-1.5b-fit"]
    assert fit["power_source"] == "measured"
    assert {f["target"]: f["points"] for f in fit["fits"]}["generate_power_frac"] == 2 * len(GRID)
    assert calibration["power"]["decode_base_frac"]["source"].startswith("identify fit")

    residuals = pd.read_csv(out / "fit_residuals.csv")
    assert (residuals["power_data"] == "measured").all()
    cfg = load_config(config)
    prior = physics_for(calibration_for(cfg), "7b", cfg).model  # the simulator before the fit
    micro_batch = cfg.workload.train_micro_batch  # no run changed it
    batches = {"generate": residuals["concurrency"], "train": [micro_batch] * len(residuals)}
    for phase, batch in batches.items():
        steady = [prior.steady_power_w(phase, int(b)) for b in batch]
        assert np.allclose(residuals[f"{phase}_power_w_prior"], steady)
        measured = residuals[f"{phase}_power_w"]
        fit_error = np.sqrt(np.mean((measured - residuals[f"{phase}_power_w_fit"]) ** 2))
        prior_error = np.sqrt(np.mean((measured - residuals[f"{phase}_power_w_prior"]) ** 2))
        assert fit_error < prior_error

    authority = pd.read_csv(out / "authority.csv")
    measured = authority[authority["data"] == "measured"].set_index("actuator")
    assert set(measured.index) == {"concurrency", "max_new_tokens"}
    for actuator, low, high in (("concurrency", "c4-t64", "c32-t64"),
                                ("max_new_tokens", "c32-t16", "c32-t64")):  # fmt: skip
        powers = []
        for name in (low, high):
            steps = read_step_log(GPU / "grid" / name / "steps.parquet")
            steps = steps[steps["step"] > 1]
            frame = read_trace(GPU / "grid" / name / "trace.parquet").frame
            inside = frame["t"].between(steps["start_s"].min(), steps["end_s"].max())
            powers.append(frame.loc[inside, "power_w"].mean())
        span_w = cfg.gpu.nameplate_w - cfg.gpu.idle_w
        assert measured.loc[actuator, "authority"] == pytest.approx(
            (powers[1] - powers[0]) / span_w
        )


def test_the_decode_power_model_is_fitted_to_the_h100_traces(tmp_path: Path) -> None:
    """identify --trace on the grid: runs of other settings share a run id (SIZE-fixed-seed0)
    and are told apart by their folders; the fit, held out on the c16 runs, is closer to them
    than the simulator's prior."""
    fit, held = ("c4-t16", "c4-t64", "c32-t16", "c32-t64"), ("c16-t16", "c16-t64")
    args = [arg for name in fit for arg in ("--trace", str(GPU / "grid" / name / "trace.parquet"))]
    args += [
        arg for name in held for arg in ("--validate", str(GPU / "grid" / name / "trace.parquet"))
    ]
    out = tmp_path / "fit"
    _cli("identify", "--out", str(out), *args, "--config", str(_gpu_config(tmp_path)))
    result = json.loads((out / "trace_fit.json").read_text())
    assert [r["run_id"] for r in result["held_out_runs"]] == [
        f"qwen2.5-1.5b-fixed-seed0 ({name})" for name in held
    ]
    assert {r["label"] for r in result["fit_runs"] + result["held_out_runs"]} == {"measured"}
    error = result["held_out_error"]
    assert error["mean_pct_nameplate"] < error["prior_mean_pct_nameplate"]


def test_the_planner_reads_the_h100_folder(tmp_path: Path) -> None:
    """planner run on tests/data/gpu: every trace imported as measured, one GPU (one UUID in
    every file), each GRPO run's tokens from its step log."""
    out = tmp_path / "planner"
    _cli("planner", "run", str(GPU), "--out", str(out), "--config", str(_gpu_config(tmp_path)))
    index = pd.read_csv(out / "traces" / "index.csv")
    imported = index[index["status"] == "imported"].set_index("key")
    runs = [f"grid/{name}" for name in GRID] + ["arms/threshold", "arms/ppo"]
    assert set(imported.index) == {f"{run}/trace" for run in runs} | {"energy_check"}
    assert (imported["data"] == "nvml").all() and (imported["gpus"] == 1).all()
    for run in runs:
        steps = read_step_log(GPU / run / "steps.parquet")
        assert imported.loc[f"{run}/trace", "tokens"] == steps["completion_tokens"].sum()
    fleet = json.loads((out / "fleet" / "summary.json").read_text())
    assert fleet["n_gpus"] == 1


def test_windows_judges_the_h100_arms_by_the_cap_they_ran_under(tmp_path: Path) -> None:
    config = _gpu_config(tmp_path, "arms.yaml")
    cap_w = json.loads((GPU / "cap.json").read_text())["cap_w"]
    for arm in ("threshold", "ppo"):
        out = tmp_path / arm
        _cli("windows", str(GPU / "arms" / arm / "trace.parquet"), "--out", str(out),
             "--config", str(config))  # fmt: skip
        summary = json.loads((out / "summary.json").read_text())
        assert summary["data"] == "measured (nvml)" and summary["cap_w"] == cap_w
        frame = read_trace(GPU / "arms" / arm / "trace.parquet").frame
        exceedance = pd.read_csv(out / "exceedance.csv")
        run = exceedance[(exceedance["scope"] == "run_total") & (exceedance["window_s"] == 0.5)]
        assert int(run["windows_over"].iloc[0]) > 0  # over the cap: the samples say so
        assert (frame["power_w"] > cap_w).mean() > 0.1


@pytest.mark.slow
def test_gpu_validate_script_runs_every_step_on_the_simulated_gpu(tmp_path: Path) -> None:
    """scripts/gpu_validate.sh is tested here (CPU) so GPU time is spent measuring, not debugging:
    the controller trained in the simulator, the energy check, the grid, the cap, both
    controller arms, the PowerCallback on the stock trainer and the packed files."""
    out = tmp_path / "validate"
    env = {
        "GPU_VALIDATE_BUSY_S": "2",
        "GPU_VALIDATE_IDLE_S": "3",
        "GPU_VALIDATE_ARM_S": "2",
        "GRPO_POWER_PYTHON": sys.executable,
        "PATH": "/usr/bin:/bin",
    }
    result = subprocess.run(
        [str(REPO / "scripts" / "gpu_validate.sh"), str(out)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "SIMULATED H100" in result.stdout
    trained = json.loads((out / "study" / "controller" / "7b" / "controller.json").read_text())
    assert trained["deployment"] == "7b"  # step 0: the ppo arm's controller, for the H100
    assert "energy from counter" in (out / "energy_check.txt").read_text()
    grid = {f"c{c}-t{t}": (c, t) for c in (4, 16, 32) for t in (16, 64)}
    for name, (concurrency, tokens) in grid.items():
        steps = read_step_log(out / "grid" / name / "steps.parquet")
        assert len(steps) == 3 and (steps["concurrency"] == concurrency).all()
        assert (steps["max_completion_tokens"] <= tokens).all()
        assert (steps["generate_calls"] == 32 // concurrency).all()  # 32 completions a step
    for chunk in (1, 8):  # the training chunk's bounds: 32 or 4 forward/backward chunks
        steps = read_step_log(out / "grid" / f"c32-t64-m{chunk}" / "steps.parquet")
        assert len(steps) == 3 and (steps["train_micro_batch"] == chunk).all()
        assert (steps["train_chunks"] == 32 // chunk).all()
    sweep = read_sweep_index(out / "grid")
    assert {(a, lv) for a, lv, _ in sweep} == {
        ("concurrency", 4), ("concurrency", 32), ("max_new_tokens", 16), ("max_new_tokens", 64),
        ("train_micro_batch", 1), ("train_micro_batch", 8),
    }  # fmt: skip
    cap = json.loads((out / "cap.json").read_text())
    assert cap["idle_w"] < cap["cap_w"] < cap["uncontrolled_mean_w"]
    assert yaml.safe_load((out / "arms.yaml").read_text())["cap_w"] == cap["cap_w"]
    for arm in ("threshold", "ppo"):
        manifest = json.loads((out / "arms" / arm / "manifest.json").read_text())
        assert manifest["status"] == "completed" and manifest["arm"] == arm
        assert manifest["steps_completed"] == cap["steps"]
        assert read_trace(out / "arms" / arm / "trace.parquet").metadata.simulated
    callback = read_trace(out / "callback" / "power.parquet")  # step 4: the stock trainer's
    assert callback.metadata.simulated and "power/mean_w" in result.stdout
    with tarfile.open(out / "gpu_validate.tar.gz") as packed:
        names = packed.getnames()
    assert "./grid/c4-t16/trace.parquet" in names and "./arms/ppo/steps.parquet" in names
    assert "./callback/power.parquet" in names
    assert not [n for n in names if "/.completed/" in n or n.startswith("./study")], names
