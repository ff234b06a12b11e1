"""Open the power source a config asks for: NVML, simulated, or NVML when available (auto)."""

from __future__ import annotations

from grpo_power.config import Config
from grpo_power.telemetry.nvml import NvmlSource, nvml_gpu_ids
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.simulated import SimulatedGpuSource
from grpo_power.telemetry.source import NoNvidiaGpu, PowerSource


def open_source(config: Config, signal: WorkloadSignal) -> PowerSource:
    """The source ``config.telemetry.source`` names, sampling ``config.telemetry.gpus``: CUDA
    device indices, the GPUs of ``CUDA_VISIBLE_DEVICES`` where it is set, named by their NVML
    index (the simulated A100s too, so a trace names a job's GPUs alike on either).

    ``auto`` falls back to the simulated A100 only when the machine has no NVIDIA GPU (no NVML
    library or driver, or no device), never when NVML is present but failing (that error is
    raised so it is seen).
    """
    telemetry = config.telemetry
    requested = telemetry.gpus
    if telemetry.source in ("nvml", "auto"):
        try:
            ids = None if requested is None else [str(i) for i in requested]
            return NvmlSource(ids)
        except NoNvidiaGpu:
            if telemetry.source == "nvml":
                raise
    # the GPUs NVML would sample, by CUDA_VISIBLE_DEVICES (named by NVML index, UUIDs left out)
    ids = nvml_gpu_ids(None if requested is None else [str(i) for i in requested])
    indices = [int(v) for v in ids if v.isdigit()] if ids else [0]
    return SimulatedGpuSource(
        config.gpu, telemetry.simulated, signal, indices or [0], seed=config.seed
    )
