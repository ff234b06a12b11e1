"""What every power source provides: a description of its GPUs and one sample per GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

Row = dict[str, Any]


class TelemetryUnavailable(RuntimeError):
    """The requested telemetry source cannot run on this machine; the message says what to do."""


class NoNvidiaGpu(TelemetryUnavailable):
    """This machine has no NVIDIA GPU to sample (no NVML library, no driver, or no device):
    ``telemetry.source: auto`` falls back to the simulated A100 on this error only."""


@dataclass(frozen=True)
class GpuInfo:
    """One sampled GPU: its index (NVML numbering), model name, nameplate power, W, and UUID
    (NVML's; None for a simulated GPU, which is no GPU of its own)."""

    index: int
    name: str
    nameplate_w: float
    uuid: str | None = None


class PowerSource(Protocol):
    """A source of power samples (NVML, simulated)."""

    kind: str  # "nvml" | "simulated"
    gpus: list[GpuInfo]
    power_w_semantics: str  # what power_w is: an instantaneous reading or a 1 s average

    def read(self, now_s: float) -> list[Row]:
        """One row per GPU at monotonic time ``now_s`` (trace columns except ``t``)."""
        ...

    def close(self) -> None:
        """Release the source (NVML shutdown)."""
        ...
