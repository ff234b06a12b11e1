"""The GPU parts the simulator knows, as parameter sets chosen by ``gpu.name`` (the name NVML
reports): board power variants, idle power, what ``nvmlDeviceGetPowerUsage`` returns, the
energy counter and the SM boost clock, each with its source (docs/calibration.md, 'GPU
models')."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NvmlPower = Literal["instant", "average_1s"]
# What an ``average_1s`` part's NVML power reading averages over, s.
NVML_AVERAGE_WINDOW_S = 1.0


@dataclass(frozen=True)
class GpuModel:
    """One GPU part's parameter set."""

    name: str
    nameplate_w: float  # the default board power, W
    nameplate_variants_w: tuple[float, ...]  # board powers the part ships with, W
    idle_w: float
    idle_range_w: tuple[float, float]
    nvml_power: NvmlPower  # what nvmlDeviceGetPowerUsage reports
    energy_counter: bool  # nvmlDeviceGetTotalEnergyConsumption
    sm_clock_max_mhz: float
    source: str


_A100_IDLE = "docs/calibration.md 'idle': 56-66 W"
_HOPPER_IDLE = (
    "assumption: docs/calibration.md 'CUDA context over idle' (+26-50 W on HBM GPUs) over a "
    "bare Hopper board; no public per-part figure found"
)
GPU_MODELS: dict[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel(
            "NVIDIA A100-SXM4-40GB",
            400.0,
            (400.0,),
            60.0,
            (56.0, 66.0),
            "instant",
            True,
            1410.0,
            f"docs/calibration.md 'A100 datasheet' (400 W SXM4); {_A100_IDLE}",
        ),
        GpuModel(
            "NVIDIA A100-SXM4-80GB",
            400.0,
            (400.0, 500.0),
            60.0,
            (56.0, 66.0),
            "instant",
            True,
            1410.0,
            f"docs/calibration.md 'A100 datasheet' (400 W; some 80 GB boards 500 W); {_A100_IDLE}",
        ),
        GpuModel(
            "NVIDIA H100 80GB HBM3",
            700.0,
            (700.0,),
            75.0,
            (60.0, 100.0),
            "average_1s",
            True,
            1980.0,
            f"docs/calibration.md 'H100 datasheet' (SXM5, up to 700 W); {_HOPPER_IDLE}",
        ),
        GpuModel(
            "NVIDIA H200",
            700.0,
            (700.0,),
            75.0,
            (60.0, 100.0),
            "average_1s",
            True,
            1980.0,
            f"docs/calibration.md 'H200 datasheet' (SXM, up to 700 W); {_HOPPER_IDLE}",
        ),
    )
}


def gpu_model_for(name: str) -> GpuModel:
    """The parameter set of GPU ``name``.

    Raises:
        ValueError: an unknown name, listing the known ones.
    """
    if name not in GPU_MODELS:
        raise ValueError(
            f"gpu.name: expected one of {sorted(GPU_MODELS)} (the parts the simulator has "
            f"parameters for), got {name!r}"
        )
    return GPU_MODELS[name]
