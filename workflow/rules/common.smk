# Shared by every stage: the validated config and the input functions.
import re
from pathlib import Path

from pydantic import ValidationError
from snakemake.common.configfile import load_configfile
from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

from grpo_power.config import ARM_NAMES, Config, deep_merge, write_resolved_config
from grpo_power.config.base import validation_problems
from grpo_power.config.notes import config_notes
from grpo_power.layout import (
    CONTROLLER,
    CONTROLLER_ARMS,
    ECONOMICS,
    EVALUATE,
    FIXED_SAFE,
    FLEET,
    IDENTIFY,
    REAL_TRACES,
    REAL_TRACES_FIGURE,
    REPORT,
    REPORT_FIGURES,
    RUN,
    SIM_WINDOWS,
    STUDY_FLEET,
    SWEEP,
    TRACE_FIT,
    WINDOWS,
)
from grpo_power.workflow_params import (
    calibration_settings,
    with_yaml_nulls,
    real_sweep_settings,
    run_settings,
    section_settings,
)


def shown_path(path):
    """A config file's path as the user would write it: relative to the working folder when
    it lies inside it."""
    path = Path(path).absolute()
    return str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)


def config_layers():
    """Where the config comes from, as (name, settings) pairs in the order Snakemake merges
    them: the Snakefile's configfile (unless --replace-workflow-config), each --configfile,
    then the --config overrides (named "--config")."""
    given = [shown_path(path) for path in workflow.config_settings.configfiles]
    own = [] if workflow.config_settings.replace_workflow_config else workflow.configfiles
    files = [name for name in map(shown_path, own) if name not in given] + given
    layers = [(name, load_configfile(name) or {}) for name in files]
    if workflow.config_settings.config:
        layers.append(("--config", with_yaml_nulls(dict(workflow.config_settings.config))))
    return layers


def config_problems(data):
    """The schema's one-line problems with a config mapping ("<field>: <reason> (got ...)"),
    none when it is valid."""
    try:
        Config.model_validate(data)
    except ValidationError as error:
        return validation_problems(error)
    return []


def config_errors():
    """One line per bad field of the workflow's config, each starting with the config file that
    set it (or "--config"), as the CLI reports a bad config; none when the config is valid."""
    problems = config_problems(config)
    if not problems:
        return []
    layers = config_layers() or [("Snakemake config", dict(config))]
    merged, present = {}, []  # the problems once each layer is merged in
    for _, settings in layers:
        merged = deep_merge(merged, settings)
        present.append(set(config_problems(merged)))
    lines = []
    for problem in problems:
        layer = len(layers) - 1  # the first layer from which on the problem holds
        while layer > 0 and problem in present[layer - 1]:
            layer -= 1
        lines.append(f"{layers[layer][0]}: {problem}")
    return lines


# `--config` hands nested values over as text, YAML's nulls too ('null'): read as None.
config.update(with_yaml_nulls(dict(config)))
# The same pydantic schema as the CLI: a bad config stops the workflow before any job runs.
# Snakemake reports a WorkflowError raised here by its message and the location of this line
# (no traceback).
if errors := config_errors():
    raise WorkflowError("\n".join(errors))
CFG = Config.model_validate(config)
for note in config_notes(CFG):  # valid, but likely a mistake: said before any job runs
    logger.warning(f"note: {note}")
# The JSON schema generated from the same pydantic schema (`grpo-power config schema`), as the
# Snakemake catalog reads a workflow's parameters. It checks the config as pydantic parsed it:
# pydantic runs first for its one-line errors, and `--config workload='{steps: 60}'` hands
# nested values over as text ('60'), which pydantic reads as the field's type and JSON Schema
# would refuse.
validate(CFG.model_dump(mode="json"), "../schemas/config.schema.json", set_default=False)
# Every setting, defaults included, as the report's captions read them (Jinja2:
# `{{ snakemake.config.evaluate.confidence }}`), whatever the config files leave out.
config.update(CFG.model_dump(mode="json"))
RESULTS = Path(CFG.results_dir)
# What the step simulator reads of the telemetry section (its readings' period, the simulated
# power model): a param of every rule that simulates (identify, controller, evaluate), whose
# results move with it even where no measured run does (authority.real_sweep_steps: 0).
SIM_TELEMETRY = section_settings(CFG, "telemetry", include={"period_s", "simulated"})
LAYOUT = CFG.layout  # every folder and file name: src/grpo_power/layout.py
# Rules hand this file to the CLI. It is named by the config's content (so a dry run with another
# config never rewrites the file a running workflow reads) and is no param: each rule's params
# hold the settings its outputs depend on, so a change reruns only the rules it concerns.
try:
    RESOLVED_CONFIG = str(write_resolved_config(CFG, LAYOUT.configs))
except OSError as error:  # results_dir on a read-only or missing mount: one line, not a traceback
    raise WorkflowError(
        f"results_dir: cannot write {LAYOUT.configs} ({error.strerror or error}); expected a "
        f"folder this user can create and write, got {CFG.results_dir}"
    ) from None


def analysis_resources(**job):
    """The resources of an analysis (CPU-only) job: what its rule needs (``mem_mb``, ``runtime``
    in minutes, ``cpus_per_task``, given by the rule) and the Slurm account, partition and QOS
    from the config's launch section, where they are written once. They are the rule's own, so
    ``--set-resources RULE:mem_mb=N`` (command line or site profile) overrides that one value
    of that rule and keeps the rest; a rule made by ``use rule`` inherits them."""
    resources = {
        **job,
        "slurm_account": CFG.launch.slurm_account,
        "slurm_partition": CFG.launch.analysis_partition,
        "qos": CFG.launch.analysis_qos,
    }
    return {name: value for name, value in resources.items() if value}


def submitter_threads():
    """Threads of a rule that runs GRPO: 1 where it only submits GPU jobs and waits for them
    (launch.launcher: submitit); else the whole machine (--cores), so arms never compete for
    cores and their timings stay comparable."""
    if CFG.launch.launcher == "submitit":
        return 1
    return workflow.resource_settings.cores or 1


def option_args(option, values):
    """A repeated CLI option as an argument list, ``[option, value, option, value, ...]``.

    Shell commands interpolate every value with ``{...:q}`` (each argument quoted), so no path
    or name from the config is ever read as shell syntax.
    """
    return [str(arg) for value in values for arg in (option, value)]


def seed_outputs(name):
    """One file of every seed's run folder, with {size} and {arm} left as wildcards."""
    return [LAYOUT.run("{size}", "{arm}", seed) / name for seed in CFG.seeds]


def run_folders():
    """Every run of the study: each run size under each arm and seed."""
    return [
        LAYOUT.run(entry.size, arm, seed)
        for entry in CFG.run_sizes
        for arm in CFG.arms.run
        for seed in CFG.seeds
    ]


def trace_files():
    """Every run trace the windows and fleet stages analyse."""
    return [folder / RUN.trace for folder in run_folders()]


def run_inputs(wildcards):
    """A run's inputs: the fixed-safe arm needs its calibration first, the ppo arm the trained
    controller of the deployment its size stands for."""
    if wildcards.arm == "fixed-safe":
        return [LAYOUT.fixed_safe(wildcards.size)]
    if wildcards.arm in CONTROLLER_ARMS:
        deployment = deployment_of_size(wildcards.size)
        return [LAYOUT.controller(deployment, wildcards.arm) / CONTROLLER.controller]
    return []


def deployment_names():
    """The simulated deployments (sim.deployments)."""
    return [d.name for d in CFG.sim.deployments]


def wildcard_choice(names):
    """A wildcard constraint matching exactly one of ``names`` (each taken literally: a name's
    "." or "+" is no regex), or nothing when there are none."""
    return "|".join(re.escape(name) for name in names) or "(?!)"


def deployment_of_size(size):
    """The simulated deployment whose controller a run of ``size`` uses (its ``sizes``), or
    None."""
    return next((d.name for d in CFG.sim.deployments if size in d.sizes), None)


def controller_runs_without_a_deployment():
    """One line per run of a controller arm (ppo, ppo+hwcap) whose size no deployment lists:
    its run has no controller to load."""
    sources = " + ".join(name for name, _ in config_layers()) or "Snakemake config"
    return [
        f"{sources}: arms.run: {arm} runs size {entry.size!r} (run_sizes) with the controller "
        f"of the sim.deployments entry that lists it in its sizes, and none of "
        f"{deployment_names()} does; add the size to one's sizes, or leave {arm} out of arms.run"
        for arm in CFG.arms.run
        if arm in CONTROLLER_ARMS
        for entry in CFG.run_sizes
        if deployment_of_size(entry.size) is None
    ]


# A run it cannot give a controller stops the workflow before any job, as a bad config does.
if errors := controller_runs_without_a_deployment():
    raise WorkflowError("\n".join(errors))


def sweep_inputs():
    """The real-workload sweep's index, when identify sweeps the real workload."""
    if CFG.authority.real_sweep_steps > 0:
        return [LAYOUT.real_sweep / SWEEP.index]
    return []


def study_calibration_inputs():
    """The calibration file identify starts from, when the config names one."""
    return [CFG.sim.calibration] if CFG.sim.calibration else []


def scenario(name):
    """The entry of evaluate.scenarios named ``name``."""
    return next(s for s in CFG.evaluate.scenarios if s.name == name)


def scenario_calibration_inputs(name):
    """The calibration file an evaluation scenario uses, when it names one."""
    calibration = scenario(name).calibration
    return [calibration] if calibration else []


def controller_arms():
    """The arms whose controller the study trains: ppo, and ppo+hwcap when it is evaluated or
    run."""
    used = {*CFG.evaluate.arms, *CFG.arms.run}
    return ["ppo"] + [arm for arm in CONTROLLER_ARMS if arm != "ppo" and arm in used]


def controller_outputs():
    """The trained controller of every deployment, per arm of :func:`controller_arms`."""
    return [folder / CONTROLLER.controller for folder in controller_folders()]


def scenario_folders():
    """The evaluate folder of every scenario of evaluate.scenarios."""
    return [LAYOUT.evaluate_scenario(s.name) for s in CFG.evaluate.scenarios]


def windows_outputs(name):
    """One windows-stage output file (e.g. "bins.parquet") of every trace."""
    return [LAYOUT.windows(trace) / name for trace in trace_files()]


def study_fleet_inputs():
    """The simulated windows the study's fleet mix composes: every file of each deployment's."""
    return [
        path
        for entry in CFG.fleet.study_mix
        for path in SIM_WINDOWS.paths(LAYOUT.sim_windows(entry.deployment)).values()
    ]


def study_fleet_outputs():
    """The study fleet's files the report reads, by name (none when fleet.study_mix is empty)."""
    if not CFG.fleet.study_mix:
        return {}
    root = LAYOUT.study_fleet
    return {"comparison": root / STUDY_FLEET.comparison_csv, "summary": root / STUDY_FLEET.summary}


def run_files(name):
    """One file (e.g. "manifest.json") of every run folder."""
    return [folder / name for folder in run_folders()]


def controller_folders():
    """The controller folder of every deployment, per arm of :func:`controller_arms`."""
    return [
        LAYOUT.controller(name, arm) for arm in controller_arms() for name in deployment_names()
    ]


def real_trace_logs():
    """The measured runs' logs under real_traces.folder (none when it is not set)."""
    folder = CFG.real_traces.folder
    if folder is None:
        return []
    from grpo_power.real_traces import ENGINE_LOG, POWER_LOG, find_runs

    return [run / name for run in find_runs(Path(folder)) for name in (POWER_LOG, ENGINE_LOG)]


def real_trace_outputs():
    """The files the report's real-traces section reads, by name (none when real_traces.folder
    is not set): the run index, the exceedance table and the fit's files."""
    if CFG.real_traces.folder is None:
        return {}
    root = LAYOUT.real_traces
    return {
        "runs": root / REAL_TRACES.runs,
        "exceedance": root / REAL_TRACES.exceedance,
        **TRACE_FIT.paths(root / REAL_TRACES.fit),
    }


def all_outputs():
    """Everything `rule all` builds: every file of every stage the README's table lists, so one
    deleted by hand is made again by the plain command (Snakemake checks only the files asked
    for: a stage's file that no target names stays missing while the files after it are up to
    date). The fixed-safe calibrations and the real-workload sweep are made for the runs and
    identify that read them."""
    evaluations = [LAYOUT.evaluate_study, *scenario_folders()]
    return [
        *(folder / name for folder in run_folders() for name in RUN.names()),
        *(path for trace in trace_files() for path in WINDOWS.paths(LAYOUT.windows(trace)).values()),
        *FLEET.paths(LAYOUT.fleet).values(),
        *(
            path
            for name in deployment_names()
            for path in SIM_WINDOWS.paths(LAYOUT.sim_windows(name)).values()
        ),
        *(STUDY_FLEET.paths(LAYOUT.study_fleet).values() if CFG.fleet.study_mix else []),
        *IDENTIFY.paths(LAYOUT.identify).values(),
        *(path for folder in controller_folders() for path in CONTROLLER.paths(folder).values()),
        *(path for folder in evaluations for path in EVALUATE.paths(folder).values()),
        *ECONOMICS.paths(LAYOUT.economics).values(),
        *real_trace_outputs().values(),
        *report_outputs(),
    ]


def report_outputs():
    """Every file the report rule writes: the page and each figure as PNG and PDF (the real
    traces' figure when real_traces.folder is set). All are in `rule all`, so a figure deleted by
    hand is made again by the plain command (Snakemake checks only the files asked for)."""
    names = [*REPORT_FIGURES, *([REAL_TRACES_FIGURE] if real_trace_outputs() else [])]
    figures = LAYOUT.report / "figures"
    return [LAYOUT.report / REPORT.page] + [
        figures / f"{name}.{suffix}" for name in names for suffix in ("png", "pdf")
    ]
