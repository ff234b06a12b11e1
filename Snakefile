# grpo-power: the study as a Snakemake workflow. Each stage has one rule file in workflow/rules/.
#   snakemake --cores 2                      the whole study on the embedded default (CPU)
#   snakemake --profile profiles/slurm --configfile config/a100-slurm.yaml   on a Slurm cluster
import os

from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# Rules call `python -m grpo_power.cli`: this checkout's package, in the local environment or in
# a conda environment from envs/ (--sdm conda, which installs the dependencies only). Jobs inherit
# the environment (Slurm's sbatch exports it by default).
os.environ.update(
    PYTHONPATH=os.pathsep.join(filter(None, [f"{workflow.basedir}/src", os.getenv("PYTHONPATH")]))
)


# GPU work: the run, calibration and sweep rules submit their GPU jobs through submitit
# (launch.launcher: submitit, one job array each) and wait for them, so on Slurm they run where
# Snakemake runs. windows and sim_windows are a few seconds of CPU per trace or deployment: run
# where Snakemake runs too, rather than queueing one tiny Slurm job each. Every other rule is a CPU-only analysis job.
localrules:
    all,
    run,
    calibrate_fixed_safe,
    sweep,
    windows,
    sim_windows,



include: "workflow/rules/common.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/windows.smk"
include: "workflow/rules/fleet.smk"
include: "workflow/rules/identify.smk"
include: "workflow/rules/controller.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/economics.smk"
include: "workflow/rules/real_traces.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/planner.smk"


rule all:
    input:
        all_outputs(),
    default_target: True
