"""Telemetry faults: a stalled or failing sampler puts the run into the fail-safe setting within
the staleness limit, and the run leaves it when fresh samples return."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np
import pytest

from grpo_power.config import Config
from grpo_power.control.controllers import FixedController
from grpo_power.telemetry.sampler import PowerSampler
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.simulated import SimulatedGpuSource
from grpo_power.telemetry.steplog import read_step_log
from grpo_power.telemetry.store import read_trace
from grpo_power.workload import runner


class StallingSource:
    """Wraps a source; its reads fail (like an NVML error or a lost GPU) inside a time window."""

    def __init__(self, source: SimulatedGpuSource, stall_from_s: float, stall_to_s: float) -> None:
        self.source, self.kind, self.gpus = source, source.kind, source.gpus
        self.power_w_semantics = source.power_w_semantics
        self.stall = (stall_from_s, stall_to_s)
        self.first_read_s: float | None = None

    def read(self, now_s: float) -> list[dict]:
        self.first_read_s = self.first_read_s or now_s
        if self.stall[0] <= now_s - self.first_read_s < self.stall[1]:
            raise RuntimeError("NVML: GPU is lost")
        return self.source.read(now_s)

    def close(self) -> None:
        self.source.close()


class StallUntilStepsSource(StallingSource):
    """A stall that begins ``stall_from_s`` after the first read and lasts at least
    ``min_stall_s``, and until ``steps`` GRPO steps have begun generating since (seen through the
    workload's phase signal): on a machine of any speed, steps are decided inside the stall."""

    def __init__(
        self,
        source: SimulatedGpuSource,
        signal: WorkloadSignal,
        stall_from_s: float,
        min_stall_s: float,
        steps: int,
    ) -> None:
        super().__init__(source, stall_from_s, float("inf"))
        self.signal, self.min_stall_s, self.steps = signal, min_stall_s, steps
        self.stall_start_s: float | None = None

    def _steps_begun_since(self, since_s: float) -> int:
        changes = self.signal.changes()
        return sum(
            1
            for (_, before), (when, now) in itertools.pairwise(changes)
            if now.phase == "generate" and before.phase != "generate" and when > since_s
        )

    def read(self, now_s: float) -> list[dict]:
        self.first_read_s = self.first_read_s or now_s
        if self.stall[1] == float("inf") and now_s - self.first_read_s >= self.stall[0]:
            self.stall_start_s = self.stall_start_s or now_s
            long_enough = now_s - self.stall_start_s >= self.min_stall_s
            if long_enough and self._steps_begun_since(self.stall_start_s) >= self.steps:
                self.stall = (self.stall[0], now_s - self.first_read_s)  # over: fresh again
        return super().read(now_s)


def test_sampler_survives_read_errors_and_reports_its_age(config: Config) -> None:
    inner = SimulatedGpuSource(config.gpu, config.telemetry.simulated, WorkloadSignal(), [0])
    sampler = PowerSampler(StallingSource(inner, 0.5, 1.5), writer=None, period_s=0.05)
    ages = []
    with sampler:
        for _ in range(40):
            time.sleep(0.05)
            ages.append(sampler.age_s())
    assert sampler.error is None and sampler.read_errors >= 15  # ~1 s of failed reads at 20 Hz
    assert "GPU is lost" in str(sampler.last_read_error)
    assert max(ages) > 0.8  # stale during the stall
    assert ages[-1] < 0.2  # fresh again afterwards


@pytest.mark.slow
def test_run_holds_the_failsafe_setting_while_telemetry_is_stale(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config.model_copy(update={"results_dir": tmp_path})  # no calibration: lowest c
    config.arms.staleness_s = 0.5
    original = runner.open_source

    def stalling_open_source(cfg: Config, signal: WorkloadSignal) -> StallingSource:
        return StallUntilStepsSource(original(cfg, signal), signal, 3.0, 3.0, 2)

    monkeypatch.setattr(runner, "open_source", stalling_open_source)
    result = runner.run_grpo(
        config, "fixed", 0, tmp_path / "run", FixedController(32, 32), steps=60, show_progress=False
    )
    steps = read_step_log(result.paths.steps)
    failsafe = steps[steps["failsafe"]]
    assert len(failsafe) >= 1
    assert (failsafe["telemetry_age_s"] > 0.5).all()
    assert (failsafe["concurrency"] == config.workload.concurrency_bounds.min).all()
    assert (steps.loc[~steps["failsafe"], "concurrency"] == 32).all()
    assert not steps["failsafe"].iloc[-1]  # fresh samples returned: the controller is back
    # Entered within the staleness limit: a step is decided when it begins, so every step that
    # began more than 0.5 s into the stall and before fresh samples returned is a fail-safe
    # step, and the first fail-safe step began inside the stall. (A fail-safe step at
    # concurrency 1 is slow and may outlast the stall: then no other step begins inside it.)
    trace = read_trace(result.paths.trace).frame
    t_s = trace["t"].to_numpy()
    gap = np.diff(t_s)
    assert gap.max() > 2.5  # the stall left a gap in the trace, never filled in
    stall_start_s, stall_end_s = t_s[np.argmax(gap)], t_s[np.argmax(gap) + 1]
    start_s = steps["start_s"]
    inside = steps[(start_s > stall_start_s + 0.5 + 0.1) & (start_s < stall_end_s)]
    assert inside["failsafe"].all()
    assert stall_start_s < failsafe["start_s"].iloc[0] < stall_end_s


@pytest.mark.slow
def test_a_crashed_sampler_never_stops_the_run(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trace writer fails for good (a full disk): the sampler stops, the run goes on in
    fail-safe, completes, and its manifest names the sampler's error."""
    config = config.model_copy(update={"results_dir": tmp_path})
    config.arms.staleness_s = 0.5
    # the disk fills at the third flush, about 0.15 s in (while the model loads): the sampler's
    # death precedes the steps by far more than the staleness even when threads are starved
    config.telemetry.period_s = config.telemetry.flush_s = 0.05
    writes = {"n": 0}
    original_write = runner.TraceWriter.write

    def failing_write(self: runner.TraceWriter, rows: list[dict]) -> None:
        writes["n"] += 1
        if writes["n"] > 2:
            raise OSError(28, "No space left on device")
        original_write(self, rows)

    monkeypatch.setattr(runner.TraceWriter, "write", failing_write)
    result = runner.run_grpo(
        config, "fixed", 0, tmp_path / "run", FixedController(32, 32), steps=12, show_progress=False
    )
    assert result.status == "completed" and result.steps == 12
    steps = read_step_log(result.paths.steps)
    assert steps["step"].tolist() == list(range(1, 13)) and steps["failsafe"].iloc[-1]
    manifest = json.loads(result.paths.manifest.read_text())
    assert "No space left on device" in manifest["attempts"][0]["sampler_error"]
    assert manifest["failsafe_steps"] == int(steps["failsafe"].sum()) > 0
    assert len(read_trace(result.paths.trace).frame) > 0  # what was written before is kept
