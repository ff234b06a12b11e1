"""The command line's ecosystem habits: --version, the --config default, choices listed in
--help, the power source it says it used, and distinct exit codes (see grpo_power.cli)."""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import get_args

import pytest
import typer
from typer.testing import CliRunner, Result

from grpo_power import cli
from grpo_power.cli import EXIT_DATA, EXIT_JOB_FAILED, EXIT_USAGE, ExitCodeGroup, app
from grpo_power.cli import base as cli_base
from grpo_power.config import (
    ARM_NAMES,
    DEFAULT_CONFIG_PATH,
    Config,
    default_config_path,
    load_config,
    packaged_config_path,
)
from tests.conftest import REPO

CLI = [sys.executable, "-m", "grpo_power.cli"]
WIDE = {"COLUMNS": "250"}  # help tables unwrapped, so each choice list reads in one piece


def invoke(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=WIDE)


def test_version_is_the_installed_distributions() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output == f"grpo-power {version('grpo-power')}\n"


# --------------------------------------------------------------------------------------------
# the --config default


def test_the_packaged_default_config_is_the_repositorys_file() -> None:
    packaged = packaged_config_path()
    repo_file = REPO / "config" / "config.yaml"
    assert packaged.read_bytes() == repo_file.read_bytes()
    if packaged.is_relative_to(REPO / "src"):  # a source checkout: the link, not a copy
        assert packaged.is_symlink() and packaged.samefile(repo_file)
    assert load_config(packaged) == load_config(repo_file)


def test_default_config_path_prefers_the_working_folders(tmp_path: Path) -> None:
    assert default_config_path(tmp_path) == packaged_config_path()
    local = tmp_path / DEFAULT_CONFIG_PATH
    local.parent.mkdir()
    local.write_text("seed: 1\n")
    assert default_config_path(tmp_path) == local


def test_a_stage_runs_from_another_folder_on_the_packaged_default(tmp_path: Path) -> None:
    """`--source auto` here also says which source it used: NVML where there is a GPU."""
    result = subprocess.run(
        [*CLI, "telemetry", "record", "--source", "auto", "--out", "t.parquet", "--", "true"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "packaged default" in line]
    assert len(notes) == 1 and str(packaged_config_path()) in notes[0]
    sources = [line for line in result.stderr.splitlines() if line.startswith("power source:")]
    assert len(sources) == 1, result.stderr
    assert re.fullmatch(
        r"power source: (nvml \(\d+ GPUs?\)|simulated \(no NVIDIA GPU found\))", sources[0]
    )
    assert (tmp_path / "t.parquet").exists()


def test_the_working_folders_config_is_used_without_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data error (exit 2) that names the config file the default chose."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("telemetry: {period_s: -1}\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("windows", "t.parquet", "--out", "w")
    assert result.exit_code == EXIT_DATA
    assert result.stderr.startswith("error: config/config.yaml: telemetry.period_s: ")
    assert "packaged default" not in result.output


def test_an_explicit_config_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = invoke("windows", "absent.parquet", "--out", str(tmp_path / "w"), "-c", str(missing))
    assert result.exit_code == EXIT_DATA
    assert f"{missing}: cannot read the config file" in result.stderr
    assert "packaged default" not in result.output


def test_a_config_error_names_the_file_or_the_options_that_brought_it(tmp_path: Path) -> None:
    """``workload: 5`` in a file was replaced by the options' own workload mapping and ran a
    whole study's run on the defaults; an option out of the config's bounds was blamed on the
    file, which does not set it. Neither run writes anything."""
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("workload: 5\n")
    out = tmp_path / "run"
    for args, said in (
        (["-c", str(scalar)], f"{scalar}: workload: Input should be a valid dictionary"),
        (
            ["--concurrency", "64", "-c", str(REPO / "config" / "config.yaml")],
            "--concurrency 64 over ",
        ),
        (["--size", "huge", "--steps", "2"], "--size huge --steps 2 over "),
        (
            ["--train-micro-batch", "9", "-c", str(REPO / "config" / "config.yaml")],
            "--train-micro-batch 9 over ",
        ),
    ):
        result = invoke("run", "--arm", "fixed", "--out", str(out), *args)
        assert result.exit_code == EXIT_DATA, result.output
        assert said in result.stderr, result.stderr
        assert not out.exists()
    assert "workload.train_micro_batch: 9 lies outside train_micro_batch_bounds [1, 8]" in (
        result.stderr
    )
    bounds = invoke("calibrate", "--size", "bogus", "-c", str(REPO / "config" / "config.yaml"))
    assert "--size bogus over " in bounds.stderr and "workload.size" in bounds.stderr


def test_a_gpu_only_preset_on_the_cpu_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A random-weight 0.5B run on the CPU is refused in one line before its folder is made
    (it left a failed run's files, and a later tiny run there was refused as another run)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without a GPU
    config = tmp_path / "config.yaml"
    config.write_text(f"results_dir: {tmp_path / 'results'}\n")
    out = tmp_path / "run"
    for args in (
        ["run", "--arm", "fixed", "--size", "qwen2.5-0.5b", "--steps", "1", "--out", str(out)],
        ["calibrate", "--size", "qwen2.5-0.5b"],
    ):
        result = invoke(*args, "-c", str(config))
        assert result.exit_code == EXIT_DATA, result.output
        assert "the random-weight qwen2.5-0.5b preset runs on a GPU only" in result.stderr
    assert not out.exists() and not (tmp_path / "results").exists()


# --------------------------------------------------------------------------------------------
# choices


def test_help_lists_the_choices() -> None:
    run_help = invoke("run", "--help")
    assert run_help.exit_code == 0
    assert f"<{'|'.join(ARM_NAMES)}>" in run_help.output
    assert "<direct|submitit>" in run_help.output
    assert (
        "<auto|nvidia-smi|nvidia-smi-dmon|dcgm|prometheus|grafana>"
        in invoke("telemetry", "import", "--help").output
    )
    assert "<simulated|nvml|auto>" in invoke("telemetry", "record", "--help").output


def test_help_keeps_the_placeholders_of_default_paths() -> None:
    """Help is rendered as Markdown, which took `<stem>` and `<deployment>` for HTML tags and
    dropped them: "the next free -2.parquet", "default results/telemetry/record--.parquet".
    Placeholders are capitals, as the README's OUT and KEY; defaults under the results folder
    say so, whatever results_dir is."""
    record = " ".join(invoke("telemetry", "record", "--help").output.split())
    assert "STEM-2.parquet" in record and "RESULTS_DIR/telemetry/record-TIME-PID.parquet" in (
        record.replace("│ ", "").replace(" │", "")
    )
    train = " ".join(invoke("controller", "train", "--help").output.split())
    assert "RESULTS_DIR/controller/DEPLOYMENT" in train.replace("│ ", "")
    assert "RESULTS_DIR/identify" in train.replace("│ ", "")


def test_the_command_lists_wrap_each_summary_to_the_terminal() -> None:
    """A command's summary is its docstring's first paragraph, whose source lines are not the
    terminal's: on a wide terminal each summary is one line, not broken where the source is."""
    for group in ((), ("telemetry",), ("planner",), ("controller",), ("config",)):
        lines = [line.strip("│ ") for line in invoke(*group, "--help").output.splitlines()]
        commands = typer.main.get_command(app)
        for name in group:
            commands = commands.commands[name]
        for name, command in commands.commands.items():
            summary = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
            summary = summary.replace("`", "")
            assert any(line.startswith(f"{name} ") and line.endswith(summary) for line in lines), (
                name,
                summary,
            )


def test_the_import_formats_are_the_importers() -> None:
    from grpo_power.telemetry.importers import ImportFormat

    assert get_args(cli_base.ImportFormat) == get_args(ImportFormat)
    assert get_args(cli_base.ImportFormatChoice) == ("auto", *get_args(ImportFormat))


@pytest.mark.parametrize(
    ("args", "option", "valid"),
    [
        (["run", "--arm", "pid", "--out", "o"], "--arm", ARM_NAMES),
        (
            ["run", "--arm", "fixed", "--launcher", "slurm", "--out", "o"],
            "--launcher",
            ("direct", "submitit"),
        ),
        (
            ["telemetry", "record", "--source", "rapl", "--", "true"],
            "--source",
            ("simulated", "nvml", "auto"),
        ),
        (
            ["telemetry", "import", "log.csv", "--format", "csv"],
            "--format",
            ("auto", "nvidia-smi", "nvidia-smi-dmon", "dcgm", "prometheus", "grafana"),
        ),
    ],
    ids=["arm", "launcher", "source", "format"],
)
def test_a_bad_choice_is_a_usage_error_naming_the_valid_values(
    args: list[str], option: str, valid: tuple[str, ...]
) -> None:
    result = invoke(*args)
    assert result.exit_code == EXIT_USAGE == 64, result.output
    assert result.stderr.startswith("Usage: ")
    assert f"Invalid value for '{option}'" in result.stderr
    assert all(repr(value) in result.stderr for value in valid), result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["windows", "t.parquet", "--out", "o", "--no-such-option"],
        ["windows", "t.parquet"],  # a required option missing
        ["windows"],  # a required argument missing
        ["no-such-stage"],
    ],
    ids=["unknown-option", "missing-option", "missing-argument", "unknown-command"],
)
def test_other_usage_errors_exit_64(args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == EXIT_USAGE, result.output
    assert "Error: " in result.stderr and "Traceback" not in result.output


def test_no_arguments_prints_the_help() -> None:
    result = invoke()
    assert result.exit_code == EXIT_USAGE
    assert "Usage: " in result.output and "telemetry" in result.output


def test_the_console_entry_point_exits_64_on_a_usage_error(tmp_path: Path) -> None:
    """Through ``python -m grpo_power.cli`` (how the Snakefile runs it): the real exit code."""
    result = subprocess.run(
        [*CLI, "telemetry", "import", "log.csv", "--format", "csv"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 64 and result.stdout == ""
    assert "Invalid value for '--format'" in result.stderr and "'nvidia-smi'" in result.stderr


# --------------------------------------------------------------------------------------------
# the other exit codes


def test_a_failed_job_exits_3() -> None:
    from grpo_power.launch.submit import JobFailed

    @cli.user_errors
    def stage() -> None:
        raise JobFailed("job 42 FAILED")

    with pytest.raises(typer.Exit) as exit_:
        stage()
    assert exit_.value.exit_code == EXIT_JOB_FAILED == 3


def test_exit_codes_pass_through_and_abort_is_130() -> None:
    from grpo_power.workload.resume import EXIT_INTERRUPTED

    tiny = typer.Typer(cls=ExitCodeGroup)

    @tiny.command()
    def interrupted() -> None:
        raise typer.Exit(EXIT_INTERRUPTED)

    @tiny.command()
    def aborted() -> None:
        raise typer.Abort()

    assert CliRunner().invoke(tiny, ["interrupted"]).exit_code == 75
    assert CliRunner().invoke(tiny, ["aborted"]).exit_code == 130


def test_the_exit_codes_are_documented() -> None:
    documented = {int(m) for m in re.findall(r"^(\d+) ", cli.__doc__ or "", re.MULTILINE)}
    assert documented == {0, 2, 3, 64, 75, 130}


# --------------------------------------------------------------------------------------------
# telemetry.source: auto


def test_auto_falls_back_to_simulated_only_without_an_nvidia_gpu(
    monkeypatch: pytest.MonkeyPatch, config: Config
) -> None:
    from grpo_power.telemetry import factory
    from grpo_power.telemetry.signals import WorkloadSignal
    from grpo_power.telemetry.source import NoNvidiaGpu, TelemetryUnavailable

    signal = WorkloadSignal(Path("unused-signal.json"))
    config.telemetry.source = "auto"

    def no_gpu(ids: object) -> None:
        raise NoNvidiaGpu("NVML found no NVIDIA GPU on this machine")

    monkeypatch.setattr(factory, "NvmlSource", no_gpu)
    assert factory.open_source(config, signal).kind == "simulated"
    config.telemetry.source = "nvml"
    with pytest.raises(NoNvidiaGpu):
        factory.open_source(config, signal)

    def failing(ids: object) -> None:
        raise TelemetryUnavailable("NVML failed to initialise: Insufficient Permissions")

    monkeypatch.setattr(factory, "NvmlSource", failing)
    config.telemetry.source = "auto"
    with pytest.raises(TelemetryUnavailable, match="Insufficient Permissions"):
        factory.open_source(config, signal)


def test_nvml_without_devices_is_no_nvidia_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from grpo_power.telemetry.nvml import NvmlSource
    from grpo_power.telemetry.source import NoNvidiaGpu
    from tests.conftest import fake_nvml

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(NoNvidiaGpu, match="no NVIDIA GPU"):
        NvmlSource(nvml=fake_nvml([]))
    with pytest.raises(NoNvidiaGpu, match="not found"):
        NvmlSource(nvml=fake_nvml([], library_present=False))


STOPPED_WHILE_BUILDING = """
import time
from pathlib import Path
import typer
from grpo_power.atomic import write_folder_atomic
from grpo_power.cli.base import ExitCodeGroup

app = typer.Typer(cls=ExitCodeGroup)


@app.command()
def build(folder: Path) -> None:
    def slowly(building: Path) -> None:
        (building / "part.txt").write_text("half")
        print("building", flush=True)
        time.sleep(60)

    write_folder_atomic(folder, slowly)


@app.command()
def other() -> None:
    pass


app()
"""


def test_a_command_stopped_by_sigterm_removes_what_it_built_aside(tmp_path: Path) -> None:
    """Slurm's scancel, or Snakemake stopping its jobs, sends SIGTERM: the default action ended
    the process at once and left the folder being built (``.<name>-<random suffix>``) beside
    its final name. A command of this command line now unwinds, removing it, and exits 143
    (128 + 15)."""
    import signal

    script = tmp_path / "stop.py"
    script.write_text(STOPPED_WHILE_BUILDING)
    out = tmp_path / "out" / "windows"
    out.parent.mkdir()
    process = subprocess.Popen(
        [sys.executable, str(script), "build", str(out)], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None and process.stdout.readline() == "building\n"
    assert [p.name[:9] for p in out.parent.iterdir()] == [".windows-"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 128 + signal.SIGTERM
    assert list(out.parent.iterdir()) == []


def test_a_working_folders_config_of_another_tool_says_why_it_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Hydra project's config/config.yaml broke `telemetry summary` with "defaults: unknown
    key", which did not say the file was picked up only because it was in the working folder."""
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("defaults:\n  - model: small\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.app, ["telemetry", "record", "--", "true"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: config/config.yaml: defaults: unknown key")
    assert "is read as the config when no --config is given, being in the working folder" in line


@pytest.mark.parametrize(
    ("command", "stage"),
    [
        (["controller", "train", "--deployment", "7b"], "train"),
        (["evaluate", "--out", "evaluated"], "evaluate"),
    ],
)
def test_the_stage_commands_take_identifys_calibration_as_the_studys_rules_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], stage: str
) -> None:
    """The README's stage 3 command trained on the config's calibration where the study's rule
    passes identify's (calibration_origin "defaults", unsaid), and its stage 4 command evaluated
    on it, took every study controller for a scenario's and retrained it: both take identify's
    where identify wrote it, and say so."""
    import yaml

    from grpo_power import study

    results = tmp_path / "results"
    (results / "identify").mkdir(parents=True)
    (results / "identify" / "calibration.json").write_text("{}")
    data = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    data["results_dir"] = str(results)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(data))
    given = []

    def stopped(cfg, first, second, calibration, *args, **kwargs):  # the calibration fourth
        given.append(calibration)
        raise ValueError("stopped here")

    monkeypatch.setattr(study, stage, stopped)
    monkeypatch.chdir(tmp_path)
    result = invoke(*command, "--config", str(config))
    assert given == [results / "identify" / "calibration.json"]
    assert f"note: calibration {results}/identify/calibration.json (identify's" in result.output
    invoke(*command, "--config", str(config), "--calibration", "other.json")
    assert given[-1] == Path("other.json")
    (results / "identify" / "calibration.json").unlink()
    invoke(*command, "--config", str(config))
    assert given[-1] is None  # none written: the config's


def test_controller_train_says_a_policy_below_random_and_a_replaced_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller that scored below a random policy was saved without a word, and retraining
    into a folder replaced the controller there silently: both are said (on stderr)."""
    from types import SimpleNamespace

    from grpo_power import study

    out = tmp_path / "controller" / "7b"
    out.mkdir(parents=True)
    meta = {"cap_w": 100.0, "oracle": {"feasible": False}}
    (out / "controller.json").write_text(json.dumps(meta))  # a controller trained there before
    evaluation = {
        "trained_return": -12.5,
        "random_return": -3.25,
        "trained_violation_rate": 0.2,
        "random_violation_rate": 0.1,
    }
    result = SimpleNamespace(
        space=SimpleNamespace(actuators=["concurrency"], fallback=False),
        timesteps=64,
        train_s=1.0,
        power_limit_w=None,
        evaluation=evaluation,
    )
    monkeypatch.setattr(study, "train", lambda *args: result)
    output = invoke("controller", "train", "--deployment", "7b", "--out", str(out)).output
    assert f"note: {out}: the controller trained there before was replaced" in output
    assert (
        "warning: the trained policy's return (-12.50) is not above a random policy's (-3.25)"
        in output
    )
    # a cap no setting keeps (a user's --cap-w 100 on an H200) printed only "violation rate 66 %"
    assert "warning: cap infeasible for 7b with these actuators (SIMULATED)" in output
    assert "keeps the violation budget at 100 W per GPU" in output
    meta["oracle"]["feasible"] = True
    (out / "controller.json").unlink()
    evaluation["trained_return"] = 4.0

    def train(*args: object) -> SimpleNamespace:
        (out / "controller.json").write_text(json.dumps(meta))
        return result

    monkeypatch.setattr(study, "train", train)
    output = invoke("controller", "train", "--deployment", "7b", "--out", str(out)).output
    assert "replaced" not in output and "warning" not in output
