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
    return SimulatedGpuSource(
        config.gpu,
        telemetry.simulated,
        signal,
        simulated_gpu_indices(None if requested is None else [str(i) for i in requested]),
        seed=config.seed,
    )


def simulated_gpu_indices(cuda_ids: list[str] | None) -> list[int]:
    """The GPUs a simulated source stands in for: those NVML would sample for ``cuda_ids``
    (:func:`nvml_gpu_ids`, through ``CUDA_VISIBLE_DEVICES``), named by their NVML index; where
    ``CUDA_VISIBLE_DEVICES`` names them by UUID (no index to read without NVML), by their CUDA
    device number, one GPU each (a job given two by UUID had simulated one). GPU 0 where
    nothing is visible: a run forced onto the CPU (``CUDA_VISIBLE_DEVICES=""``) on a machine
    without a GPU simulates the one GPU it stands in for.

    Raises:
        TelemetryUnavailable: a CUDA device beyond the visible ones.
    """
    ids = nvml_gpu_ids(cuda_ids) or ["0"]
    if all(v.isdigit() for v in ids):
        return [int(v) for v in ids]
    return [int(i) for i in cuda_ids] if cuda_ids is not None else list(range(len(ids)))
