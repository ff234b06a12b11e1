"""Config sections of how runs are launched: ``launch`` (direct or submitit/Slurm, the job
resources) and ``run_sizes`` (each real model size's processes and job)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    Field,
    field_validator,
)

from grpo_power.config.base import (
    PositiveFloat,
    Strict,
)
from grpo_power.config.workload import ModelSize


# a Slurm name (account, partition, QOS, GPU type): no blanks, commas or colons, as a gres or an
# sbatch option would split it there
def _slurm_name(value: str) -> str:
    if not value or any(c.isspace() or c in ",:" for c in value):
        raise ValueError(
            "expected a Slurm name: not empty, without blanks, commas or colons (null: none)"
        )
    return value


SlurmName = Annotated[str, AfterValidator(_slurm_name)]
# sbatch options that have a key of their own: given in additional_parameters they would
# override it in the job script while messages name the key's value
OWN_KEYS = {
    "account": "launch.slurm_account",
    "partition": "launch.slurm_partition",
    "qos": "qos",
    "constraint": "constraint",
    "time": "timeout_min",
    "mem": "mem_gb",
    "cpus-per-task": "cpus_per_task",
    "gres": "gpus and gpu_type",
    "gpus-per-node": "gpus",
    "job-name": "the run's own job name",
    "array": "the seeds (one array per arm)",
    "open-mode": "the job's logs, appended over requeues",
}


class JobResources(Strict):
    """What one GPU job asks Slurm for (submitit's parameters). ``launch.job`` holds the defaults
    and each ``run_sizes`` entry's ``job`` overrides them; a field left null takes the value
    from the level above (``launch.job``, then submitit's own default)."""

    gpus: Annotated[int, Field(ge=0)] | None = Field(
        None, description="GPUs per job (gpus_per_node); null = the run size's processes."
    )
    gpu_type: SlurmName | None = Field(
        None, description="GPU type for the gres request (gpu:TYPE:N), e.g. a100; null = any."
    )
    cpus_per_task: Annotated[int, Field(ge=1)] | None = None
    mem_gb: PositiveFloat | None = None
    timeout_min: Annotated[int, Field(ge=1)] | None = Field(None, description="Time limit, min.")
    qos: SlurmName | None = Field(None, description="Slurm quality of service (--qos).")
    constraint: str | None = Field(None, description="Slurm node features (--constraint).")
    setup: list[str] | None = Field(
        None,
        description="Shell lines run in the job before the run (module load, environment "
        "variables); one that fails ends the job, naming it. The job runs the submitting "
        "Python (submitit's), so activating another environment here does not change which "
        "Python runs. They replace, not extend, the level above.",
    )
    additional_parameters: dict[str, str | int] | None = Field(
        None,
        description="Other sbatch options, passed through as they are (submitit's "
        "slurm_additional_parameters), e.g. {reservation: study, exclude: node07}.",
    )

    @field_validator("additional_parameters")
    @classmethod
    def _no_own_keys(cls, value: dict[str, str | int] | None) -> dict[str, str | int] | None:
        for key in value or {}:
            option = key.removeprefix("--").replace("_", "-")
            if option in OWN_KEYS:
                raise ValueError(
                    f"{key}: an sbatch option with a key of its own, {OWN_KEYS[option]}; "
                    "expected it there (here it would override that key in the job script)"
                )
        return value

    def over(self, base: JobResources) -> JobResources:
        """These resources with every null field taken from ``base``."""
        return JobResources.model_validate(
            {**base.model_dump(), **self.model_dump(exclude_none=True)}
        )


class RunSize(Strict):
    """A model size the study runs for real, and on how many processes (GPUs) it runs."""

    size: ModelSize
    processes: Annotated[int, Field(ge=1)] = Field(
        1, description="Processes (GPUs) per run, launched with accelerate."
    )
    zero_stage: Literal[0, 3] = Field(
        0, description="DeepSpeed ZeRO stage for multi-process runs (3 = sharded parameters)."
    )
    job: JobResources = Field(
        default_factory=JobResources,
        description="This size's job resources; null fields come from launch.job.",
    )


LauncherName = Literal["direct", "submitit"]


class LaunchConfig(Strict):
    """How runs are launched: directly, or as submitit jobs (Slurm on a cluster). The Slurm
    account and partitions are written here once; the workflow's analysis jobs read them too."""

    launcher: LauncherName = Field(
        "direct",
        description="direct: `grpo-power run` trains in its own process; submitit: it submits a "
        "job (an array for several seeds) and waits for it (a local rule on Slurm).",
    )
    cluster: Literal["auto", "slurm", "local", "debug"] = Field(
        "auto", description="submitit cluster; auto = slurm where sbatch exists, else local."
    )
    slurm_account: SlurmName | None = Field(None, description="Account of every job (GPU and CPU).")
    slurm_partition: SlurmName | None = Field(
        None, description="Partition of the GPU jobs (runs, calibration, sweeps)."
    )
    analysis_partition: SlurmName | None = Field(
        None,
        description="Partition of the workflow's CPU-only analysis jobs (windows, fleet, "
        "identify, controller, evaluate, economics, report); null = the cluster's default.",
    )
    analysis_qos: SlurmName | None = Field(
        None,
        description="Slurm quality of service of the analysis jobs (the GPU jobs': job.qos); "
        "null = the account's default.",
    )
    job: JobResources = Field(
        default_factory=lambda: JobResources(cpus_per_task=2, mem_gb=8.0, timeout_min=60),
        description="Resources of a GPU job, unless its run size overrides them.",
    )
    array_parallelism: Annotated[int, Field(ge=1)] = Field(
        256, description="At most this many tasks of one job array run at once."
    )
    on_interrupt: Literal["cancel", "keep"] = Field(
        "cancel",
        description="When the waiting `grpo-power run` (Snakemake's job) is interrupted "
        "(Ctrl-C, SIGTERM): cancel its Slurm jobs (they checkpoint first), or keep them "
        "running; a restarted workflow reattaches to a job that is still alive either way.",
    )
    poll_s: PositiveFloat = Field(2.0, description="How often a waiting job's state is read, s.")
    checkpoint_grace_s: PositiveFloat = Field(
        60.0,
        description="On preemption or timeout (USR2), how long the job waits for the run to "
        "save a checkpoint at the end of its current step, s; keep it below submitit's 90 s "
        "signal delay.",
    )
    max_timeouts: Annotated[int, Field(ge=0)] = Field(
        3, description="How often a timed-out run is requeued to resume (submitit)."
    )
