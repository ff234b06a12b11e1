"""PowerMonitor: windows (nested, overlapping, shorter than a sample period), energy from the
counter or integrated, the phase split, and the trace it writes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from grpo_power import PowerMonitor
from grpo_power.config import Config
from grpo_power.telemetry.simulated import SimulatedGpuSource
from grpo_power.telemetry.store import read_trace
from grpo_power.telemetry.summary import summarize_trace


class NoCounter:
    """The simulated A100 without its energy counter (a GPU older than Volta, or a DCGM
    exporter without the field): the monitor must integrate power instead."""

    def __init__(self, inner: SimulatedGpuSource) -> None:
        self.inner, self.kind, self.gpus = inner, inner.kind, inner.gpus

    def read(self, now_s: float) -> list[dict]:
        return [{**row, "energy_j": None} for row in self.inner.read(now_s)]

    def close(self) -> None:
        self.inner.close()


def test_windows_nest_overlap_and_add_up(config: Config, tmp_path: Path) -> None:
    trace = tmp_path / "power.parquet"
    with PowerMonitor(gpus=[0, 1], period_s=0.05, source="simulated", trace=trace) as monitor:
        monitor.begin_window("overlapping")
        with monitor.window("outer") as outer:
            with monitor.window("train", phase="train", batch=8) as train:
                time.sleep(0.6)
            monitor.end_window("overlapping")  # closes inside "outer", opened before it
            with monitor.window("generate", phase="generate", batch=32) as generate:
                time.sleep(0.4)
            with monitor.window("short") as short:
                pass  # far shorter than the 0.05 s period: its boundary reads measure it
    # The power model's train power at micro-batch 8 (simulated, noise 4 W per sample).
    s = config.telemetry.simulated
    expected_w = config.gpu.idle_w + (config.gpu.nameplate_w - config.gpu.idle_w) * (
        s.train_base_frac + s.train_slope_per_doubling * np.log2(8)
    )
    # samples at the steady state, the mean lower by the first interval's ramp from idle (the
    # 25 ms sensor window and the counter's trapezoid between samples)
    assert train.p95_power_w == pytest.approx(expected_w, abs=12)
    assert expected_w - 25 < train.mean_power_w < expected_w + 5
    assert generate.mean_power_w > train.mean_power_w  # decode at 32 draws more (simulated)
    assert train.simulated and train.energy_source == "counter"
    assert set(train.gpu_energy_j) == {0, 1}
    assert short.samples >= 2 and short.time_s < 0.05
    inner_j = train.energy_j + generate.energy_j + short.energy_j
    assert inner_j == pytest.approx(outer.energy_j, rel=0.02)  # gaps between them are tiny
    assert outer.phases["train"].energy_j == pytest.approx(train.energy_j, rel=0.05)
    assert outer.phases["generate"].time_s == pytest.approx(generate.time_s, rel=0.05)
    assert sum(p.energy_j for p in outer.phases.values()) == pytest.approx(outer.energy_j, rel=0.01)
    written = read_trace(trace)
    assert written.metadata.simulated and written.complete
    # the trace (scheduled samples only) holds what the outer window measured
    trace_j = sum(g.energy_j for g in summarize_trace(written))
    assert trace_j >= 0.95 * outer.energy_j


def test_energy_is_integrated_without_a_counter(config: Config) -> None:
    from grpo_power.telemetry.signals import WorkloadSignal

    signal = WorkloadSignal()
    inner = SimulatedGpuSource(config.gpu, config.telemetry.simulated, signal, [0])
    monitor = PowerMonitor(period_s=0.02, source=NoCounter(inner), signal=signal)
    with monitor, monitor.window("train", phase="train", batch=4) as window:
        time.sleep(0.5)
    assert window.energy_source == "integrated"
    assert window.energy_j == pytest.approx(window.mean_power_w * window.time_s)
    assert 250 < window.mean_power_w < 330  # the simulated train phase, integrated


def test_window_misuse_is_refused() -> None:
    with PowerMonitor(period_s=0.05, source="simulated") as monitor:
        monitor.begin_window("a")
        with pytest.raises(ValueError, match="already open"):
            monitor.begin_window("a")
        with pytest.raises(KeyError, match="no open window 'b'"):
            monitor.end_window("b")
        with monitor.window("c") as c, pytest.raises(RuntimeError, match="still open"):
            _ = c.energy_j
        assert c.energy_j > 0
        monitor.end_window("a")
