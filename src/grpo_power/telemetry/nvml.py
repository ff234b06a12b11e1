"""NVML power source (pynvml, from the ``nvidia-ml-py`` package).

Per GPU and sample: instantaneous power (field ``NVML_FI_DEV_POWER_INSTANT`` where the driver
supports it, else ``nvmlDeviceGetPowerUsage``, which is instantaneous on A100 but a 1 s average on
H100 and newer), the 1 s average (``NVML_FI_DEV_POWER_AVERAGE``), the total-energy counter (mJ,
reported as J since the source opened), SM and memory utilisation, SM clock, temperature and the
enforced power limit. Which path gave ``power_w`` is recorded in
:attr:`NvmlSource.power_w_semantics`.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from grpo_power.telemetry.source import GpuInfo, NoNvidiaGpu, Row, TelemetryUnavailable

NVML_SUCCESS = 0


def _import_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError as error:  # pragma: no cover - a dependency of the package
        raise TelemetryUnavailable(
            "pynvml is not installed: `pip install nvidia-ml-py` (a dependency of grpo-power)"
        ) from error
    return pynvml


def visible_gpu_ids(env: dict[str, str] | None = None) -> list[str] | None:
    """Entries of CUDA_VISIBLE_DEVICES (indices or UUIDs), or None when it is unset."""
    value = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def visible_gpu_count() -> int | None:
    """How many GPUs this process sees: the entries of ``CUDA_VISIBLE_DEVICES`` where it is
    set, else NVML's device count; None where neither says (no NVIDIA driver here)."""
    visible = visible_gpu_ids()
    if visible is not None:
        return len(visible)
    try:
        nvml = _import_pynvml()
    except TelemetryUnavailable:
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:  # no driver or library: nothing says
        return None
    try:
        return int(nvml.nvmlDeviceGetCount())
    finally:
        nvml.nvmlShutdown()


def nvml_gpu_ids(cuda_ids: list[str] | None, env: dict[str, str] | None = None) -> list[str] | None:
    """The NVML indices or UUIDs of the GPUs a process asks for by CUDA device index, as torch
    numbers them and Zeus's monitor takes them: ``cuda:0`` is the first entry of
    ``CUDA_VISIBLE_DEVICES`` where it is set (a Slurm job's GPUs on a shared node), else NVML's
    GPU 0. A UUID is a GPU's own name. None asks for every visible GPU
    (:func:`visible_gpu_ids`; None: every GPU).

    Raises:
        TelemetryUnavailable: an index beyond the GPUs ``CUDA_VISIBLE_DEVICES`` makes visible.
    """
    visible = visible_gpu_ids(env)
    if cuda_ids is None or visible is None:
        return visible if cuda_ids is None else cuda_ids
    beyond = [i for i in cuda_ids if i.isdigit() and int(i) >= len(visible)]
    if beyond:
        seen = (
            f"CUDA_VISIBLE_DEVICES={','.join(visible)!r} makes {len(visible)} GPU(s) visible, "
            f"CUDA devices 0 to {len(visible) - 1}"
            if visible
            else "CUDA_VISIBLE_DEVICES is empty"
        )
        raise TelemetryUnavailable(f"gpus: CUDA device {beyond[0]} is not visible: {seen}")
    return [visible[int(i)] if i.isdigit() else i for i in cuda_ids]


def _text(value: str | bytes) -> str:
    """An NVML string (bytes in older pynvml releases) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _field_value(field: Any) -> float | None:
    """The numeric value of an ``nvmlFieldValue_t``, or None when the driver did not give one."""
    if field.nvmlReturn != NVML_SUCCESS:
        return None
    by_type = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}
    return float(getattr(field.value, by_type.get(field.valueType, "uiVal")))


class NvmlSource:
    """Samples real NVIDIA GPUs through NVML.

    Args:
        gpu_ids: CUDA device indices (through ``CUDA_VISIBLE_DEVICES``: :func:`nvml_gpu_ids`)
            or UUIDs to sample; None = CUDA_VISIBLE_DEVICES, else every GPU. Samples name each
            GPU by its NVML index, as nvidia-smi does.
        nvml: the pynvml module (tests pass a fake; this is the only mock in the project).

    Raises:
        TelemetryUnavailable: NVML's library or driver is missing, or no GPU matches.
    """

    kind = "nvml"

    def __init__(self, gpu_ids: list[str] | None = None, nvml: ModuleType | None = None) -> None:
        self.nvml = nvml if nvml is not None else _import_pynvml()
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError_LibraryNotFound:
            raise NoNvidiaGpu(
                "NVML library (libnvidia-ml.so.1) not found: this machine has no NVIDIA driver. "
                "Use `telemetry: {source: simulated}` in the config (--source simulated, "
                "source='simulated' in Python), "
                "or import traces recorded elsewhere with `grpo-power telemetry import`."
            ) from None
        except self.nvml.NVMLError as error:
            # The library without a loaded driver: no NVIDIA GPU here (auto falls back).
            no_driver = isinstance(error, getattr(self.nvml, "NVMLError_DriverNotLoaded", ()))
            unavailable = NoNvidiaGpu if no_driver else TelemetryUnavailable
            raise unavailable(f"NVML failed to initialise: {error}") from None
        try:
            ids = nvml_gpu_ids(gpu_ids)
        except TelemetryUnavailable:
            self.nvml.nvmlShutdown()
            raise
        if ids is None:
            ids = [str(i) for i in range(self.nvml.nvmlDeviceGetCount())]
            if not ids:
                self.nvml.nvmlShutdown()
                raise NoNvidiaGpu("NVML found no NVIDIA GPU on this machine")
        if not ids:
            self.nvml.nvmlShutdown()
            raise TelemetryUnavailable("no GPU to sample: CUDA_VISIBLE_DEVICES is empty")
        self._handles = [self._handle(gpu_id) for gpu_id in ids]
        self.gpus = [
            GpuInfo(
                index=int(self.nvml.nvmlDeviceGetIndex(h)),
                name=_text(self.nvml.nvmlDeviceGetName(h)),
                nameplate_w=self.nvml.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0,
                uuid=_text(self.nvml.nvmlDeviceGetUUID(h)),
            )
            for h in self._handles
        ]
        self._fields = [self.nvml.NVML_FI_DEV_POWER_INSTANT, self.nvml.NVML_FI_DEV_POWER_AVERAGE]
        self._restore_limits_mw: list[tuple[Any, int]] = []
        self._energy0_mj = [self._energy_mj(h) for h in self._handles]
        first = self._read_power_fields(self._handles[0])
        self.power_w_semantics = (
            "instantaneous (NVML_FI_DEV_POWER_INSTANT)"
            if first[0] is not None
            else "nvmlDeviceGetPowerUsage (instantaneous on A100; 1 s average on H100 and newer)"
        )

    def _handle(self, gpu_id: str) -> Any:
        try:
            if gpu_id.isdigit():
                return self.nvml.nvmlDeviceGetHandleByIndex(int(gpu_id))
            return self.nvml.nvmlDeviceGetHandleByUUID(gpu_id)
        except self.nvml.NVMLError as error:
            raise TelemetryUnavailable(
                f"GPU {gpu_id!r} from CUDA_VISIBLE_DEVICES is not known to NVML: {error}"
            ) from None

    def _energy_mj(self, handle: Any) -> float | None:
        try:
            return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
        except self.nvml.NVMLError:
            return None  # pre-Volta parts have no energy counter

    def _read_power_fields(self, handle: Any) -> tuple[float | None, float | None]:
        try:
            values = self.nvml.nvmlDeviceGetFieldValues(handle, self._fields)
        except self.nvml.NVMLError:
            return None, None
        instant_mw, average_mw = (_field_value(v) for v in values)
        return (
            None if instant_mw is None else instant_mw / 1000.0,
            None if average_mw is None else average_mw / 1000.0,
        )

    def read(self, now_s: float) -> list[Row]:
        nvml = self.nvml
        rows: list[Row] = []
        for info, handle, energy0_mj in zip(
            self.gpus, self._handles, self._energy0_mj, strict=True
        ):
            instant_w, average_w = self._read_power_fields(handle)
            if instant_w is None:
                instant_w = nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0
            energy_mj = self._energy_mj(handle)
            util = nvml.nvmlDeviceGetUtilizationRates(handle)
            rows.append(
                {
                    "gpu": info.index,
                    "power_w": instant_w,
                    "power_avg_w": average_w,
                    "energy_j": None
                    if energy_mj is None or energy0_mj is None
                    else (energy_mj - energy0_mj) / 1000.0,
                    "sm_util": float(util.gpu),
                    "mem_util": float(util.memory),
                    "sm_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
                    "temp_c": float(
                        nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
                    ),
                    "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
                }
            )
        return rows

    def set_power_limit_w(self, limit_w: float) -> None:
        """Set every sampled GPU's power limit (the ``hwcap`` and ``ppo+hwcap`` arms); restored
        by :meth:`close`.

        Raises:
            TelemetryUnavailable: the limit is outside the GPU's range or needs root.
        """
        for handle in self._handles:
            low_mw, high_mw = self.nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
            if not low_mw <= limit_w * 1000 <= high_mw:
                raise TelemetryUnavailable(
                    f"power limit {limit_w} W is outside this GPU's range "
                    f"[{low_mw / 1000:.0f}, {high_mw / 1000:.0f}] W"
                )
            previous_mw = self.nvml.nvmlDeviceGetPowerManagementLimit(handle)
            try:
                self.nvml.nvmlDeviceSetPowerManagementLimit(handle, int(limit_w * 1000))
            except self.nvml.NVMLError as error:
                raise TelemetryUnavailable(
                    f"cannot set the GPU power limit ({error}): the hwcap arms need root "
                    "(or `nvidia-smi -pl` rights) on the GPU node"
                ) from None
            self._restore_limits_mw.append((handle, previous_mw))

    def close(self) -> None:
        for handle, limit_mw in self._restore_limits_mw:
            self.nvml.nvmlDeviceSetPowerManagementLimit(handle, limit_mw)
        self._restore_limits_mw.clear()
        self.nvml.nvmlShutdown()
