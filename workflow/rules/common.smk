# Shared by every stage: the validated config and the input functions.
from pathlib import Path

from grpo_power.config import ARM_NAMES, validate_config, write_resolved_config
from grpo_power.workflow_params import calibration_settings, real_sweep_settings, run_settings

# The same pydantic schema as the CLI: a bad config stops the workflow before any job runs.
CFG = validate_config(config, source="Snakemake config")
RESULTS = Path(CFG.results_dir)
# Rules hand this file to the CLI. It is named by the config's content (so a dry run with another
# config never rewrites the file a running workflow reads) and is no param: each rule's params
# hold the settings its outputs depend on, so a change reruns only the rules it concerns.
RESOLVED_CONFIG = str(write_resolved_config(CFG, RESULTS / "configs"))


def analysis_resources():
    """Slurm account and partition of an analysis (CPU-only) job, from the config's launch
    section, where they are written once; the workflow profile (profiles/default) holds the
    memory, time and CPUs of each rule."""
    resources = {
        "slurm_account": CFG.launch.slurm_account,
        "slurm_partition": CFG.launch.analysis_partition,
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


def run_folder(size, arm, seed):
    """The folder of one GRPO run: trace.parquet, steps.parquet, manifest.json."""
    return RESULTS / "runs" / size / arm / f"seed{seed}"


def seed_outputs(name):
    """One file of every seed's run folder, with {size} and {arm} left as wildcards."""
    return [f"{RESULTS}/runs/{{size}}/{{arm}}/seed{seed}/{name}" for seed in CFG.seeds]


def run_folders():
    """Every run of the study: each run size under each arm and seed."""
    return [
        run_folder(entry.size, arm, seed)
        for entry in CFG.run_sizes
        for arm in CFG.arms.run
        for seed in CFG.seeds
    ]


def trace_files():
    """Every run trace the windows and fleet stages analyse."""
    return [folder / "trace.parquet" for folder in run_folders()]


def run_inputs(wildcards):
    """A run's inputs: the fixed-safe arm needs its calibration first, the ppo arm the trained
    controller of the deployment its size stands for."""
    if wildcards.arm == "fixed-safe":
        return [RESULTS / "calibration" / wildcards.size / "fixed_safe.json"]
    if wildcards.arm == "ppo":
        return [RESULTS / "controller" / deployment_of_size(wildcards.size) / "controller.json"]
    return []


def deployment_names():
    """The simulated deployments (sim.deployments)."""
    return [d.name for d in CFG.sim.deployments]


def deployment_of_size(size):
    """The simulated deployment whose controller a run of ``size`` uses (its ``sizes``)."""
    for deployment in CFG.sim.deployments:
        if size in deployment.sizes:
            return deployment.name
    raise ValueError(f"no sim.deployments entry lists size {size!r} in its sizes")


def sweep_inputs():
    """The real-workload sweep's index, when identify sweeps the real workload."""
    if CFG.authority.real_sweep_steps > 0:
        return [RESULTS / "identify" / "real-sweep" / "sweep.json"]
    return []


def study_calibration_inputs():
    """The calibration file identify starts from, when the config names one."""
    return [CFG.sim.calibration] if CFG.sim.calibration else []


def scenario_calibration_inputs(name):
    """The calibration file an evaluation scenario uses, when it names one."""
    scenario = next(s for s in CFG.evaluate.scenarios if s.name == name)
    return [scenario.calibration] if scenario.calibration else []


def controller_outputs():
    """The trained controller of every deployment."""
    return [RESULTS / "controller" / name / "controller.json" for name in deployment_names()]


EVALUATE_TABLES = ["summary", "ratios", "metrics"]


def evaluate_outputs():
    """The study's evaluation and every scenario's."""
    folders = [RESULTS / "evaluate" / "study"] + [
        RESULTS / "evaluate" / "scenarios" / s.name for s in CFG.evaluate.scenarios
    ]
    return [folder / "table.md" for folder in folders]


def trace_key(trace):
    """A trace's path under RESULTS without suffix: results/runs/7B/x/seed0/trace.parquet ->
    runs/7B/x/seed0/trace; its windows outputs go to RESULTS / "windows" / key."""
    return str(Path(trace).relative_to(RESULTS).with_suffix(""))


def windows_outputs(name):
    """One windows-stage output file (e.g. "bins.parquet") of every trace."""
    return [RESULTS / "windows" / trace_key(trace) / name for trace in trace_files()]


FLEET_OUTPUTS = ["fleet_windows.csv", "scaling.csv", "comparison.csv", "comparison.md"]


def run_files(name):
    """One file (e.g. "manifest.json") of every run folder."""
    return [folder / name for folder in run_folders()]


# The economics stage's outputs (grpo_power.economics.stage.OUTPUTS) and the report's figures
# (grpo_power.report.stage.FIGURES), each a PDF and a PNG under RESULTS / "report" / "figures".
ECONOMICS_OUTPUTS = [
    "constants.csv",
    "runs.csv",
    "arms.csv",
    "savings.csv",
    "oversubscription.csv",
    "pilot.csv",
    "sensitivity.csv",
    "summary.json",
]
REPORT_FIGURES = [
    "power_traces",
    "power_distributions",
    "exceedance_windows",
    "authority",
    "fleet",
    "ppo_learning",
    "throughput_violations",
    "cost_carbon",
]


def controller_folders():
    """The controller folder of every deployment."""
    return [RESULTS / "controller" / name for name in deployment_names()]


def all_outputs():
    """Everything `rule all` builds; each stage adds its final outputs here."""
    return [
        *trace_files(),
        *windows_outputs("exceedance.csv"),
        *[RESULTS / "fleet" / name for name in FLEET_OUTPUTS],
        RESULTS / "identify" / "authority.md",
        *controller_outputs(),
        *evaluate_outputs(),
        RESULTS / "economics" / "summary.json",
        RESULTS / "report" / "index.html",
    ]
