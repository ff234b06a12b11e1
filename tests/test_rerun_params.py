"""What a changed setting reruns: a run folder resumes unless a setting its results depend on
changed, and each workflow rule's params hold only the settings its outputs depend on
(src/grpo_power/workflow_params.py); a bad workflow config is reported one line per field,
naming the file that set it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_power.config import Config, deep_merge, validate_config
from grpo_power.workload.manifest import RunManifest
from tests.conftest import REPO, missing_requirement


def _config(**overrides: object) -> Config:
    data = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return validate_config(deep_merge(data, overrides))


def _resumed(folder: Path, arm: str, first: Config, again: Config) -> str | None:
    """What refuses resuming a run of ``arm`` begun under ``first`` (its manifest written and
    read back, as a stopped run leaves it) with ``again`` (None: it resumes)."""
    path = folder / arm / "manifest.json"
    path.parent.mkdir(parents=True)
    RunManifest.create(path, first, arm, 0, {"steps_planned": 30}).write()
    written = RunManifest.read(path)
    assert written is not None and written.data["status"] == "running"
    return written.same_run(RunManifest.create(path, again, arm, 0, {"steps_planned": 30}))


def test_a_run_resumes_after_a_change_to_a_setting_it_does_not_depend_on(tmp_path: Path) -> None:
    base = _config()
    elsewhere = _config(
        report={"dpi": 200},
        economics={"fleet_gpus": 5},
        evaluate={"seeds": [5, 6, 7, 8, 9]},
        arms={"run": ["fixed", "threshold"], "threshold": {"increase_step": 3}},
        workload={"checkpoint_every_steps": 3, "report_to": ["tensorboard"]},
        launch={"poll_s": 1},
    )
    assert _resumed(tmp_path, "fixed", base, elsewhere) is None


def test_a_run_refuses_to_resume_naming_the_setting_it_depends_on(tmp_path: Path) -> None:
    threshold = _config(arms={"threshold": {"increase_step": 3}})
    assert _resumed(tmp_path, "threshold", _config(), threshold) == (
        "config.arms.threshold.increase_step (was 1, now 3)"
    )
    steps = _resumed(tmp_path, "fixed", _config(), _config(workload={"steps": 40}))
    assert steps == "config.workload.steps (was 30, now 40)"


def _snakemake(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The repository's workflow run from ``folder`` (its config/config.yaml, its results)."""
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent))
    if snakemake is None:
        missing_requirement("snakemake is not beside this Python (install the workflow extra)")
    command = [snakemake, "--snakefile", str(REPO / "Snakefile"), *args]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300)


def _workflow_folder(folder: Path) -> Path:
    """``folder`` with the default config at config/config.yaml, where the workflow runs."""
    (folder / "config").mkdir(parents=True)
    shutil.copy(REPO / "config" / "config.yaml", folder / "config" / "config.yaml")
    return folder


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A completed study as Snakemake records it, no job run: every output an empty file, marked
    done by `snakemake --touch`, which records each job's params. The default config with
    simulated sweeps only (authority.real_sweep_steps: 0), so that no real run feeds identify
    and a setting reaches the controllers only through their own params."""
    folder = _workflow_folder(tmp_path_factory.mktemp("study"))
    path = folder / "config" / "config.yaml"
    simulated_sweeps = deep_merge(
        yaml.safe_load(path.read_text()), {"authority": {"real_sweep_steps": 0}}
    )
    path.write_text(yaml.safe_dump(simulated_sweeps))
    summary = _snakemake(folder, "--summary")
    assert summary.returncode == 0, summary.stderr[-3000:]
    for line in summary.stdout.splitlines()[1:]:
        output = folder / line.split("\t")[0]
        output.parent.mkdir(parents=True, exist_ok=True)
        output.touch()
    touched = _snakemake(folder, "--cores", "1", "--touch", "--forceall")
    assert touched.returncode == 0, touched.stderr[-3000:]
    assert _planned(folder) == {}
    return folder


def _planned(folder: Path, *args: str) -> dict[str, str]:
    """The jobs a dry run with ``args`` plans (``rule`` or ``rule wildcards``; not ``all``),
    each with Snakemake's reason."""
    done = _snakemake(folder, "-n", "--cores", "2", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", done.stdout + done.stderr):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if head and head[1] != "all":
            wildcards = re.search(r"\n\s+wildcards: (.*)", block)
            reason = re.search(r"\n\s+reason: (.*)", block)
            jobs[head[1] + (f" {wildcards[1]}" if wildcards else "")] = reason[1] if reason else ""
    return jobs


@pytest.mark.slow
def test_result_free_settings_rerun_no_job(study: Path) -> None:
    workload = "{checkpoint_every_steps: 3, cache_dir: elsewhere, report_to: [tensorboard]}"
    changed = _planned(study, "--config", f"workload={workload}", "telemetry={flush_s: 9}")
    assert changed == {}


@pytest.mark.slow
def test_the_arms_a_study_runs_rerun_only_what_reads_the_real_runs(study: Path) -> None:
    planned = _planned(study, "--config", "arms={run: [fixed, threshold]}")
    assert set(planned) == {"fleet", "economics", "report"}  # no evaluate, sim_windows


@pytest.mark.slow
def test_the_study_fleet_mix_reruns_only_the_report(study: Path) -> None:
    assert set(_planned(study, "--config", "fleet={study_mix: []}")) == {"report"}


@pytest.mark.slow
def test_arm_settings_the_simulator_tunes_with_rerun_the_scenarios(study: Path) -> None:
    arms = "arms={fixed_safe: {percentile: 95}, threshold: {increase_step: 2}}"
    planned = _planned(study, "--config", arms)
    assert "Params have changed" in planned["evaluate_scenario scenario=7b-cap-305w"]
    assert "Params have changed" in planned["evaluate"]
    assert not [job for job in planned if job.startswith("controller")]


@pytest.mark.slow
def test_the_observation_window_retrains_the_controllers(study: Path) -> None:
    planned = _planned(study, "--config", "arms={observation_window_s: 4}")
    assert "Params have changed" in planned["controller deployment=7b"]


@pytest.mark.slow
def test_the_simulators_sampling_period_reruns_what_simulates(study: Path) -> None:
    """With no real sweep feeding identify, `telemetry.period_s` reached the simulated stages
    through no param: a dry run said "Nothing to be done" while evaluate's violation rates
    moved (uncontrolled 6.0 % at 0.1 s, 7.7 % at 0.5 s)."""
    planned = _planned(study, "--config", "telemetry={period_s: 0.5}")
    assert "Params have changed" in planned["identify"]
    assert {"controller deployment=7b", "evaluate", "evaluate_scenario scenario=7b-cap-305w"} <= (
        set(planned)
    )


@pytest.mark.slow
def test_a_scenario_copied_with_its_yaml_null_reruns_when_changed(study: Path) -> None:
    """The README's scenario line holds `calibration: null`; Snakemake's --config kept it as the
    text 'null', a calibration file of that name, missing: the changed cap was never run and
    the dry run said "Nothing to be done"."""
    scenarios = (
        "{scenarios: [{name: 7b-cap-305w, calibration: null, cap_w: 300, deployments: [7b], "
        "retrain: true}]}"
    )
    planned = _planned(study, "--config", f"evaluate={scenarios}")
    assert "Params have changed" in planned["evaluate_scenario scenario=7b-cap-305w"]


@pytest.mark.slow
def test_a_new_scenario_runs_alone(study: Path) -> None:
    scenarios = (
        "{scenarios: [{name: 7b-cap-305w, cap_w: 305, deployments: [7b]}, "
        "{name: 72b-cap-200w, cap_w: 200, deployments: [72b], retrain: false}]}"
    )
    planned = _planned(study, "--config", f"evaluate={scenarios}")
    # and the report, which shows every scenario's tables
    assert set(planned) == {"evaluate_scenario scenario=72b-cap-200w", "report"}


@pytest.mark.slow
def test_a_scenario_whose_name_holds_regex_characters_is_planned(study: Path) -> None:
    """A scenario name may hold "+" and "." (config PathName): the rule's wildcard takes them
    literally (a bare "+" would match "72bb-200w" and never "72b+200w")."""
    scenarios = "{scenarios: [{name: 72b+200.5w, cap_w: 200.5, deployments: [72b]}]}"
    planned = _planned(study, "--config", f"evaluate={scenarios}")
    assert "evaluate_scenario scenario=72b+200.5w" in planned


def test_a_bad_workflow_config_names_the_file_that_set_each_field(tmp_path: Path) -> None:
    folder = _workflow_folder(tmp_path)
    (folder / "study.yaml").write_text("telemetry:\n  period_s: -1\n")
    done = _snakemake(folder, "-n", "--configfile", "config/config.yaml", "study.yaml")
    assert done.returncode == 1
    output = done.stdout + done.stderr
    assert "\nstudy.yaml: telemetry.period_s: Input should be greater than 0 (got -1)\n" in output
    assert "grpo_power" not in output and "Traceback" not in output  # no Python traceback
    overridden = _snakemake(folder, "-n", "--config", "workload={steps: 0}")
    assert overridden.returncode == 1
    assert "\n--config: workload.steps: Input should be greater than or equal to 1 (got '0')\n" in (
        overridden.stdout + overridden.stderr
    )
    # a calibration the config names is checked at once (the controllers and evaluation were
    # planned on identify's old output, the missing file never read)
    missing = _snakemake(folder, "-n", "--config", "sim={calibration: nowhere.json}")
    assert missing.returncode == 1
    expected = "\n--config: sim.calibration: expected an existing file, found no such file"
    assert expected in missing.stdout + missing.stderr
    # a results folder that cannot be made (a read-only mount): one line, not a traceback
    unwritable = _snakemake(folder, "-n", "--config", "results_dir=/proc/forbidden")
    output = unwritable.stdout + unwritable.stderr
    assert unwritable.returncode == 1 and "Traceback" not in output
    assert (
        "\nresults_dir: cannot write /proc/forbidden/configs (No such file or directory); "
        "expected a folder this user can create and write, got /proc/forbidden\n"
    ) in output


def test_a_controller_run_of_a_size_no_deployment_lists_stops_the_workflow(
    tmp_path: Path,
) -> None:
    """A study of the 14b deployment alone, whose tiny runs include the ppo arm: no controller
    stands for the tiny size, so the workflow stops before any job, in one line naming the
    config files and the fix (it failed in the run rule's input function, with a traceback)."""
    folder = _workflow_folder(tmp_path)
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    only_14b = [d for d in base["sim"]["deployments"] if d["name"] == "14b"]
    (folder / "study.yaml").write_text(
        yaml.safe_dump(
            {
                "sim": {"deployments": only_14b},
                "authority": {"reference": "14b"},
                "evaluate": {"scenarios": []},
            }
        )
    )
    done = _snakemake(folder, "-n", "--configfile", "config/config.yaml", "study.yaml")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert (
        "\nconfig/config.yaml + study.yaml: arms.run: ppo runs size 'tiny' (run_sizes) with the "
        "controller of the sim.deployments entry that lists it in its sizes, and none of ['14b']"
    ) in output
    assert "Traceback" not in output and "InputFunctionException" not in output


def _resources(dry_run: str) -> dict[str, dict[str, str]]:
    """Each rule's resources as a dry run prints them (the last job of each rule)."""
    resources: dict[str, dict[str, str]] = {}
    rule = None
    for line in dry_run.splitlines():
        if line.startswith("rule ") and line.endswith(":"):
            rule = line[5:-1]
        elif rule and line.strip().startswith("resources: "):
            pairs = line.strip().removeprefix("resources: ").split(", ")
            resources[rule] = dict(pair.split("=", 1) for pair in pairs)
    return resources


def test_a_rules_resources_are_its_own_and_one_override_keeps_the_rest(tmp_path: Path) -> None:
    """The analysis jobs' memory, time and CPUs were set by a workflow profile's
    set-resources: ``controller_hwcap`` (made by ``use rule``) got none of them (1000 MB and
    the partition's time), and ``--set-resources identify:mem_mb=100``, which the README
    offers, replaced the whole table: identify lost its time and CPUs, every other rule all
    three. They are now the rules' own."""
    folder = _workflow_folder(tmp_path)
    profile = str(REPO / "profiles" / "slurm")
    config = str(REPO / "config" / "a100-slurm.yaml")
    done = _snakemake(folder, "-n", "--profile", profile, "--configfile", config)
    assert done.returncode == 0, done.stderr[-3000:]
    plain = _resources(done.stdout)
    for rule in ("controller", "controller_hwcap"):
        assert plain[rule]["mem_mb"] == "2000" and plain[rule]["runtime"] == "120", rule
    assert plain["fleet"]["mem_mb"] == "16000"
    overridden = _snakemake(
        folder, "-n", "--profile", profile, "--configfile", config,
        "--set-resources", "identify:mem_mb=100",
    )  # fmt: skip
    assert overridden.returncode == 0, overridden.stderr[-3000:]
    changed = _resources(overridden.stdout)
    identify = changed["identify"]
    assert identify["mem_mb"] == "100"
    assert identify["runtime"] == "60" and identify["cpus_per_task"] == "2"
    assert identify["slurm_partition"] == plain["identify"]["slurm_partition"]
    for rule in ("controller", "controller_hwcap", "fleet", "report", "economics"):
        assert changed[rule] == plain[rule], rule
    # a site that requires a QOS of every job: the analysis jobs' is launch.analysis_qos (they
    # went with the account's default, and launch.job.qos is the GPU jobs')
    assert "qos" not in plain["identify"]
    qos = _snakemake(
        folder, "-n", "--profile", profile, "--configfile", config,
        "--config", "launch={analysis_qos: lab-normal}",
    )  # fmt: skip
    assert qos.returncode == 0, qos.stderr[-3000:]
    analysis = {rule for rule, resources in plain.items() if "slurm_account" in resources}
    assert {"identify", "evaluate", "report"} <= analysis
    for rule, resources in _resources(qos.stdout).items():
        assert resources.get("qos") == ("lab-normal" if rule in analysis else None), rule
