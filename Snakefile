# grpo-power: the study as a Snakemake workflow. Each stage has one rule file in workflow/rules/.
#   snakemake --cores 2                      the whole study on the embedded default (CPU)
#   snakemake --profile profiles/slurm --configfile config/a100-slurm.yaml   on a Slurm cluster
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/windows.smk"
include: "workflow/rules/fleet.smk"


rule all:
    input:
        all_outputs(),
    default_target: True
