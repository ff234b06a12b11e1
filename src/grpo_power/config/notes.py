"""What a valid config may still hold by mistake, said before any job runs: the account
placeholder of ``config/a100-slurm.yaml`` left in, caps of the packaged config (set for its
A100) kept for another part, and a part described by its powers whose NVML reading is left at
the default. Read by the workflow (``workflow/rules/common.smk``, a warning
each) and the study's CLI stages that train and evaluate controllers; nothing is refused (a
study of another part under the A100's caps is a study one may want)."""

from __future__ import annotations

from grpo_power.config.gpu_models import GPU_MODELS
from grpo_power.config.loading import load_config, packaged_config_path
from grpo_power.config.schema import Config

PLACEHOLDER_ACCOUNT = "your-account"  # config/a100-slurm.yaml's launch.slurm_account


def _caps_w(config: Config) -> dict[str, float]:
    """Each simulated deployment's cap per GPU, W (:meth:`Config.deployment_cap_w`)."""
    return {d.name: config.deployment_cap_w(d.name) for d in config.sim.deployments}


def config_notes(config: Config) -> list[str]:
    """One line per likely mistake in ``config`` ([] for none)."""
    notes = []
    if config.launch.slurm_account == PLACEHOLDER_ACCOUNT:
        notes.append(
            f"launch.slurm_account is {PLACEHOLDER_ACCOUNT!r}, config/a100-slurm.yaml's "
            "placeholder: edit its launch section (account, partitions) for your cluster before "
            "the jobs are submitted"
        )
    if config.gpu.name not in GPU_MODELS and "nvml_power" not in config.gpu.model_fields_set:
        notes.append(
            f"gpu.name {config.gpu.name!r} is no packaged part, so its NVML power reading is "
            f"taken as {config.gpu.nvml_power!r} (the A100's); Hopper and newer parts read 1 s "
            "averages: give gpu.nvml_power (instant or average_1s)"
        )
    packaged = load_config(packaged_config_path())
    if config.gpu.nameplate_w != packaged.gpu.nameplate_w:
        theirs = _caps_w(packaged)
        same = {name: cap for name, cap in _caps_w(config).items() if theirs.get(name) == cap}
        if same:
            caps = ", ".join(f"{name} {cap:g} W" for name, cap in same.items())
            notes.append(
                f"the caps per GPU of {caps} are the packaged config's, set for its "
                f"{packaged.gpu.name} ({packaged.gpu.nameplate_w:g} W), and this config's gpu is "
                f"{config.gpu.name} ({config.gpu.nameplate_w:g} W): give cap_w and "
                "sim.deployments' caps for it (config/h100.yaml shows how; the evaluation calls "
                "a cap no setting keeps infeasible)"
            )
    return notes
