"""A simulated GPU source with the NVML source's output, driven by the workload's signals.

Power comes from :class:`grpo_power.sim.power_model.GpuPowerModel` for the activity the workload
announced (phase, batch), so a controller that lowers occupancy lowers simulated power. Like the
A100's NVML: ``power_w`` is "instantaneous" (the mean of the last ``sensor_window_s``, 25 ms, so a
phase shorter than that counts in proportion; on parts whose NVML reports a 1 s average,
``gpu.nvml_power: average_1s``, the H100 and newer, it is that average), ``power_avg_w`` a 1 s
average, and ``energy_j`` a cumulative counter (trapezoid of the instantaneous readings between
samples). A 1 s average is the model's power over the whole last second, whatever the sampling
period (as the step simulator's readings of such a part are), with the sensor's noise once: not
the mean of this source's own readings, which would depend on how often it is read.
"""

from __future__ import annotations

import numpy as np

from grpo_power.config import GpuSpec, SimulatedPowerConfig
from grpo_power.config.gpu_models import NVML_AVERAGE_WINDOW_S
from grpo_power.sim.power_model import GpuPowerModel
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.source import GpuInfo, Row


class _GpuState:
    def __init__(self, idle_w: float, temp_c: float) -> None:
        self.last_t_s: float | None = None
        self.last_power_w = idle_w
        self.energy_j = 0.0
        self.temp_c = temp_c


class SimulatedGpuSource:
    """Simulated GPUs that all follow one workload signal, each with its own noise.

    Args:
        gpu: the simulated part (name, nameplate, idle power).
        params: power model parameters.
        signal: where the workload announces its phase and batch.
        gpu_indices: indices reported in the ``gpu`` column.
        seed: seed of the measurement noise.
    """

    kind = "simulated"

    def __init__(
        self,
        gpu: GpuSpec,
        params: SimulatedPowerConfig,
        signal: WorkloadSignal,
        gpu_indices: list[int],
        seed: int = 0,
    ) -> None:
        self.model = GpuPowerModel(gpu, params)
        self.signal = signal
        self.gpus = [GpuInfo(i, gpu.name, gpu.nameplate_w) for i in gpu_indices]
        self._rng = np.random.default_rng(seed)
        self._average_rng = np.random.default_rng([seed, 1])  # the 1 s average's noise
        self._states = {i: _GpuState(gpu.idle_w, params.temp_ambient_c) for i in gpu_indices}
        self.power_w_semantics = (
            f"1 s average, as nvmlDeviceGetPowerUsage gives it on the {gpu.name} (simulated)"
            if gpu.nvml_power == "average_1s"
            else f"instantaneous (simulated {gpu.name})"
        )

    def read(self, now_s: float) -> list[Row]:
        mix = self.signal.mix(self.model.params.sensor_window_s)
        second = self.signal.mix(NVML_AVERAGE_WINDOW_S)
        activity = mix[-1][0]
        rows: list[Row] = []
        for info in self.gpus:
            state = self._states[info.index]
            power_w = self.model.sensed_power_w(mix, self._rng)
            dt_s = 0.0 if state.last_t_s is None else now_s - state.last_t_s
            state.energy_j += 0.5 * (power_w + state.last_power_w) * dt_s
            state.temp_c = self.model.next_temp_c(state.temp_c, power_w, dt_s)
            state.last_t_s, state.last_power_w = now_s, power_w
            average_w = self.model.sensed_power_w(second, self._average_rng)
            rows.append(
                {
                    "gpu": info.index,
                    # nvmlDeviceGetPowerUsage: the reading on the A100, the 1 s average on newer
                    "power_w": average_w if self.model.gpu.nvml_power == "average_1s" else power_w,
                    "power_avg_w": average_w,
                    "energy_j": state.energy_j,
                    "sm_util": self.model.sm_util_pct(activity),
                    "mem_util": 0.5 * self.model.sm_util_pct(activity),
                    "sm_clock_mhz": self.model.sm_clock_mhz(power_w),
                    "temp_c": state.temp_c,
                    "power_limit_w": self.model.gpu.nameplate_w,
                }
            )
        return rows

    def close(self) -> None:
        return None
