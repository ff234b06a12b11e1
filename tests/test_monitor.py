"""PowerMonitor: windows (nested, overlapping, shorter than a sample period), energy from the
counter or integrated, the phase split, and the trace it writes."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from grpo_power import PowerMonitor
from grpo_power.config import ActuatorBounds, Config
from grpo_power.telemetry.simulated import SimulatedGpuSource
from grpo_power.telemetry.store import read_trace
from grpo_power.telemetry.summary import summarize_trace
from tests.conftest import REPO

PAUSE_BOUNDS = {  # a controller's bounds with the pause: 0 or 1 s
    "concurrency": ActuatorBounds(min=1, max=32),
    "max_new_tokens": ActuatorBounds(min=8, max=64),
    "pause_s": ActuatorBounds(min=0, max=1),
}


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


def test_overlapping_phased_windows_announce_the_phase_of_the_last_one_open() -> None:
    """Windows with a phase that overlap and close in any order: the phase in force is the last
    open one's, and when all are closed the one before them (closing ``train`` before
    ``generate`` left the simulated GPU in ``train`` for good, and ``generate`` idle)."""
    monitor = PowerMonitor(period_s=0.05, source="simulated")
    with monitor:
        monitor.begin_window("train", phase="train", batch=8)
        monitor.begin_window("generate", phase="generate", batch=4)
        monitor.end_window("train")  # closes under "generate": generation goes on
        assert monitor.signal.current().phase == "generate"
        time.sleep(0.2)
        generate = monitor.end_window("generate")
        assert (monitor.signal.current().phase, monitor.signal.current().batch) == ("idle", 1)
        with monitor.window("after") as after:
            time.sleep(0.2)
    assert generate.time_s > 0.2
    assert generate.phases["generate"].time_s == pytest.approx(generate.time_s, abs=0.01)
    assert after.phases == {}  # nothing but idle announced


def test_a_long_window_splits_all_its_phases() -> None:
    """A window over more phase changes than the signal keeps for the sensor (4,096): its split
    by phase still holds its first phase, and adds up to its time and energy (the early phases
    were lost without a word)."""
    monitor = PowerMonitor(period_s=0.05, source="simulated")
    with monitor, monitor.window("run") as run:
        with monitor.window("warm", phase="generate", batch=8, sync_execution=False):
            time.sleep(0.3)
        for _ in range(2500):  # 5,000 changes: train, then back to generate
            with monitor.window("step", phase="train", batch=4, sync_execution=False):
                pass
    assert run.phases["generate"].time_s == pytest.approx(0.3, abs=0.05)
    assert sum(p.time_s for p in run.phases.values()) == pytest.approx(run.time_s, rel=1e-6)
    assert sum(p.energy_j for p in run.phases.values()) == pytest.approx(run.energy_j, rel=1e-9)


def test_a_windows_phases_add_up_to_its_energy_when_the_sampler_falls_behind() -> None:
    """Code that holds the GIL (a C call: a tokenizer, pickling a big batch) starves the sampler
    for longer than two periods. The window's energy is the counter's difference, which spans
    the gap; its split by phase is now read off the same counter (the train phase read 0.1 J of
    about 290 J: the gap counted zero)."""
    monitor = PowerMonitor(period_s=0.02, source="simulated")
    with monitor, monitor.window("step", phase="train", batch=4, sync_execution=False) as w:
        for _ in range(3):
            sum(range(10_000_000))  # holds the GIL for a tenth of a second or more
    assert monitor.sampler.missed_slots > 0  # the sampler did fall behind
    assert w.energy_source == "counter" and w.energy_j > 0.1 * 250
    assert w.phases["train"].energy_j == pytest.approx(w.energy_j, rel=1e-9)


def test_a_script_that_fails_before_sampling_leaves_no_trace_to_step_around(
    tmp_path: Path,
) -> None:
    """A script whose PowerCallback was made and whose next line failed (a PowerCapCallback
    refusing its cap) left an empty power.parquet.partial; the next run said "power.parquet
    exists" and recorded into power-2.parquet. A monitor never started leaves nothing."""
    import subprocess
    import sys

    trace = tmp_path / "power.parquet"
    failing = (
        "from grpo_power.callbacks import PowerCallback\n"
        f"power = PowerCallback(trace={str(trace)!r}, cap_w=300)\n"
        "raise SystemExit('the next line failed')\n"
    )
    done = subprocess.run([sys.executable, "-c", failing], capture_output=True, text=True)
    assert done.returncode == 1 and "the next line failed" in done.stderr
    assert list(tmp_path.iterdir()) == []
    with PowerMonitor(period_s=0.02, source="simulated", trace=trace) as monitor:
        time.sleep(0.1)
    assert monitor.trace is not None and monitor.trace.path == trace


def test_a_monitor_never_writes_over_a_trace_nor_into_a_folder(tmp_path: Path) -> None:
    """A trace path that holds a trace (an earlier job's, a run resumed in a new process) is
    kept: the recording goes to the next numbered name (it was overwritten); a folder given as
    the trace is refused at once, in one line (it failed when the run ended)."""
    trace = tmp_path / "power.parquet"
    written = []
    for _ in range(2):
        with PowerMonitor(period_s=0.02, source="simulated", trace=trace) as monitor:
            time.sleep(0.2)
        assert monitor.trace is not None
        written.append(monitor.trace.path)
    assert written == [trace, tmp_path / "power-2.parquet"]
    first, second = (read_trace(path) for path in written)
    assert first.complete and second.complete
    assert first.metadata.run_id != second.metadata.run_id
    with pytest.raises(ValueError, match=rf"^PowerMonitor: trace: {tmp_path}: is a folder"):
        PowerMonitor(source="simulated", trace=tmp_path)
    # a trace is Parquet: a .csv name held Parquet bytes that no CSV reader, ours included, took
    expected = "a trace is written as Parquet; expected a file name ending .parquet"
    with pytest.raises(ValueError, match=rf"power\.csv: {expected} \(such as power\.parquet\)$"):
        PowerMonitor(source="simulated", trace=tmp_path / "power.csv")
    assert not list(tmp_path.glob("power.csv*"))


def test_a_monitor_never_stopped_finishes_its_trace_at_exit(tmp_path: Path) -> None:
    """Used as Zeus's monitor is, without ``with`` or ``stop()``: the trace is finished when the
    interpreter exits (only its journal, ``.partial``, was left, read as unfinished)."""
    import subprocess
    import sys

    trace = tmp_path / "p.parquet"
    script = (
        "import time\nfrom grpo_power import PowerMonitor\n"
        f"m = PowerMonitor(period_s=0.05, source='simulated', trace={str(trace)!r})\n"
        "m.begin_window('a'); time.sleep(0.3); m.end_window('a')\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.parquet"]
    assert read_trace(trace).complete


def test_a_window_open_across_a_stop_is_not_measured_across_two_clocks(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A window left open when the monitor stops (around two ``trainer.train()`` calls of a
    PowerCallback that stops its monitor) measured a second session against the first's clock:
    1.0 s of a 2.5 s span, and its energy. It is warned about at the stop and refused at the
    end, in one line; its name is free again."""
    import logging

    from grpo_power.callbacks.power import INTERVAL_WINDOW

    monitor = PowerMonitor(period_s=0.05, source="simulated").start()
    monitor.begin_window("whole script")
    monitor.begin_window(INTERVAL_WINDOW)  # the PowerCallback's own: Ctrl-C leaves it open
    time.sleep(0.2)
    with caplog.at_level(logging.WARNING, logger="grpo_power.telemetry.monitor"):
        monitor.stop()
    # only the user's window is theirs to end: `grpo-power run` stopped by Ctrl-C warned of its
    # callback's log interval
    assert "stopped with window(s) ['whole script'] open" in caplog.text
    with monitor:
        time.sleep(0.1)
        with pytest.raises(ValueError, match=r"^window 'whole script' was opened before the moni"):
            monitor.end_window("whole script")
        with monitor.window("whole script") as w:
            time.sleep(0.1)
    assert 0.1 <= w.time_s < 0.5


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


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"period_s": 0}, "PowerMonitor: period_s: Input should be greater than 0 (got 0)"),
        ({"period_s": float("nan")}, "PowerMonitor: period_s: "),
        ({"gpus": []}, "PowerMonitor: gpus: List should have at least 1 item"),
        ({"gpus": [-1]}, "PowerMonitor: gpus.0: Input should be greater than or equal to 0"),
        ({"source": "nvidia"}, "PowerMonitor: source: Input should be 'simulated', 'nvml'"),
        ({"cap_w": -320}, "PowerMonitor: cap_w: expected a finite number above 0, got -320"),
        ({"cap_w": float("inf")}, "PowerMonitor: cap_w: expected a finite number above 0"),
        ({"history_s": 0}, "PowerMonitor: history_s: expected a finite number above 0, got 0"),
        # a string passed the check and failed at the first window's comparison
        ({"cap_w": "320"}, "PowerMonitor: cap_w: expected a finite number above 0, got '320'"),
        (  # a node's cap given for a GPU's, on the simulated A100
            {"cap_w": 5600, "source": "simulated"},
            "PowerMonitor: cap_w: expected a per-GPU cap of at most the GPU's nameplate, 400 W "
            "(NVIDIA A100",
        ),
        (  # an H200's cap on a laptop: the simulated GPU is the config's, which says how
            {"cap_w": 515, "source": "auto"},
            "PowerMonitor: cap_w: expected a per-GPU cap of at most the GPU's nameplate, 400 W "
            "(NVIDIA A100-SXM4-80GB), got 515 W (a simulated GPU: the config's gpu, the default "
            "config's A100; give a config naming your part, PowerMonitor(config=...) or --config",
        ),
    ],
)
def test_bad_monitor_arguments_are_refused_in_one_line(
    arguments: dict[str, object], message: str
) -> None:
    """A bad argument is a ValueError naming the class, the argument and what was expected
    (not a ZeroDivisionError or a monitor that samples no GPU)."""
    with pytest.raises(ValueError) as refused:
        PowerMonitor(**arguments)  # type: ignore[arg-type]
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_arguments_of_the_wrong_kind_are_refused_naming_what_was_expected(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A misspelt argument named an internal class (``PowerSampler.__init__() got an unexpected
    keyword argument``); a trace file's name given first, or a ``PowerCallback`` given for its
    monitor, failed later with an AttributeError. Two caps in force (the monitor's, which
    ``power/share_above_cap`` is judged by, and the cap callback's) are warned about. A monitor
    that falls back to the simulated A100 says so: a GPU machine whose NVML library is missing
    would otherwise log simulated power with one flag among its keys to tell."""
    import logging

    from grpo_power.callbacks import PowerCallback, PowerCapCallback
    from grpo_power.control.contract import Action

    class Hold:
        def decide(self, observation: object) -> Action:
            return Action()

    with pytest.raises(TypeError, match=r"^PowerMonitor: unexpected argument 'cap'; expected"):
        PowerMonitor(cap=320)  # type: ignore[call-arg]
    zeus = r"^PowerMonitor: unexpected argument 'gpu_indices' \(Zeus's gpu_indices is gpus here\)"
    with pytest.raises(TypeError, match=zeus):
        PowerMonitor(gpu_indices=[0])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"got str 'power.parquet' \(a trace file goes in trace="):
        PowerCallback("power.parquet")  # type: ignore[arg-type]
    power = PowerCallback(source="simulated", cap_w=280)
    with pytest.raises(TypeError, match=r"got PowerCallback .*\(give its \.monitor"):
        PowerCapCallback(Hold(), cap_w=300.0, monitor=power)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="grpo_power"):
        PowerCapCallback(Hold(), cap_w=300.0, monitor=power.monitor)  # two caps in force
        # a monitor judging by no cap: power/share_above_cap goes unlogged (it went unsaid)
        PowerCapCallback(Hold(), cap_w=300.0, monitor=PowerMonitor(source="simulated"))
        monitor = PowerMonitor()
    assert "PowerCapCallback: cap_w 300 W, its monitor's 280 W" in caplog.text
    assert (
        "PowerCapCallback: cap_w 300 W, its monitor none: power/share_above_cap is not logged "
        "(give the monitor's PowerCallback cap_w=300 too)"
    ) in caplog.text
    fell_back = "PowerMonitor: no NVIDIA GPU found: power is the simulated" in caplog.text
    assert fell_back == (monitor.source.kind == "simulated")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"cap_w": 0.0}, "PowerCapCallback: cap_w: expected a finite number above 0, got 0.0"),
        # a string or None passed the check and failed at the first step
        ({"cap_w": "320"}, "PowerCapCallback: cap_w: expected a finite number above 0, got '320'"),
        ({"cap_w": None}, "PowerCapCallback: cap_w: expected a finite number above 0, got None"),
        ({"cap_w": 320.0, "window_s": -5.0}, "PowerCapCallback: window_s: expected a finite"),
        ({"cap_w": 320.0, "staleness_s": float("nan")}, "PowerCapCallback: staleness_s: "),
        (
            {"cap_w": 320.0, "pause_s": -1.0},
            "PowerCapCallback: pause_s: expected a finite number at or above 0",
        ),
    ],
)
def test_bad_cap_callback_arguments_are_refused_in_one_line(
    arguments: dict[str, float], message: str
) -> None:
    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.control.contract import Action

    class Hold:
        def decide(self, observation: object) -> Action:
            return Action()

    with pytest.raises(ValueError, match=re.escape(message)):
        PowerCapCallback(controller=Hold(), **arguments)  # type: ignore[arg-type]
    PowerCapCallback(controller=Hold(), cap_w=320.0, pause_s=0.0)  # zero pause is valid


def test_a_stopped_monitor_starts_a_new_session_in_the_next_trace(tmp_path: Path) -> None:
    """Started again after stop() (a second trainer.train()), it samples on a new clock into
    power-2.parquet; a monitor whose writer or source was given opened says it cannot."""
    trace = tmp_path / "power.parquet"
    monitor = PowerMonitor(period_s=0.05, source="simulated", trace=trace)
    for _ in range(2):
        with monitor, monitor.window("train", phase="train", batch=4) as window:
            time.sleep(0.3)
        assert window.energy_j > 0 and window.time_s < 0.5  # the second on its own clock
    first, second = read_trace(trace), read_trace(tmp_path / "power-2.parquet")
    assert first.complete and second.complete
    assert second.frame["t"].min() < 0.1  # a new clock, not the first session's
    assert first.metadata.run_id != second.metadata.run_id
    from grpo_power.telemetry.record import trace_metadata
    from grpo_power.telemetry.store import TraceWriter

    source = SimulatedGpuSource(Config().gpu, Config().telemetry.simulated, None, [0])
    writer = TraceWriter(tmp_path / "given.parquet", trace_metadata(source, "given", 0.05))
    given = PowerMonitor(period_s=0.05, source="simulated", trace=writer)
    given.start().stop()
    with pytest.raises(RuntimeError, match="given a TraceWriter, which stop\\(\\) closed"):
        given.start()


class HotSource(SimulatedGpuSource):
    """A simulated A100 drawing 380 W throughout: every sample above a 320 W cap."""

    def __init__(self) -> None:
        from grpo_power.telemetry.signals import WorkloadSignal

        config = Config()
        super().__init__(config.gpu, config.telemetry.simulated, WorkloadSignal(), [0])

    def read(self, now_s: float) -> list[dict]:
        return [dict(row, power_w=380.0) for row in super().read(now_s)]


class _Regression:
    """A plain HF Trainer's model and data (no tokens): what any training script has."""

    @staticmethod
    def trainer(
        tmp_path: Path, callbacks: list, fail_at_step: int | None = None, save_steps: int = 0
    ) -> object:
        import torch
        from transformers import Trainer, TrainerCallback, TrainingArguments

        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.linear = torch.nn.Linear(4, 1)

            def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict:
                y = self.linear(x)
                return {"loss": torch.nn.functional.mse_loss(y, labels), "logits": y}

        class Fail(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == fail_at_step:
                    raise KeyboardInterrupt  # a user's Ctrl+C, or an error in their code

        data = [{"x": torch.randn(4), "labels": torch.randn(1)} for _ in range(32)]
        args = TrainingArguments(
            output_dir=str(tmp_path / "out"),
            max_steps=4,
            logging_steps=1,
            per_device_train_batch_size=4,
            use_cpu=True,
            report_to=[],
            save_strategy="steps" if save_steps else "no",
            save_steps=save_steps or 500,
            disable_tqdm=True,
        )
        extra = [Fail()] if fail_at_step else []
        return Trainer(model=Model(), args=args, train_dataset=data, callbacks=callbacks + extra)


def test_power_callback_survives_a_second_train_and_an_interrupted_one(tmp_path: Path) -> None:
    """trainer.train() twice (a notebook, a second stage) and after a train() that raised:
    every call logs power and the callback's own monitor writes one trace per call."""
    from grpo_power.callbacks import PowerCallback

    power = PowerCallback(trace=tmp_path / "power.parquet", source="simulated", period_s=0.02)
    interrupted = _Regression.trainer(tmp_path, [power], fail_at_step=2)
    with pytest.raises(KeyboardInterrupt):
        interrupted.train()  # type: ignore[attr-defined]
    trainer = _Regression.trainer(tmp_path, [power])
    for _ in range(2):
        trainer.train()  # type: ignore[attr-defined]
        logged = [e for e in trainer.state.log_history if "loss" in e]  # type: ignore[attr-defined]
        assert len(logged) == 4 and all(e["power/simulated"] == 1.0 for e in logged)
    # the interrupted call never stopped the monitor: the next call sampled on into its trace
    # and closed it; the call after that wrote its own
    assert read_trace(tmp_path / "power.parquet").complete
    assert read_trace(tmp_path / "power-2.parquet").complete
    assert not (tmp_path / "power-3.parquet").exists()


def test_power_is_logged_for_training_intervals_only(tmp_path: Path) -> None:
    """An evaluation's logs (``eval_*``) get no ``power/`` or ``power_cap/`` entries (reporting
    integrations filed them under ``train/``, a second point at the step); the closing summary
    where the last step was logged already gets no ``power/`` entries (an interval of
    milliseconds), and the cap's counts of the whole run."""
    from grpo_power.callbacks import PowerCallback, PowerCapCallback

    power = PowerCallback(source="simulated", period_s=0.02)
    cap = PowerCapCallback(Observing(), cap_w=300.0, monitor=power.monitor, bounds=PAUSE_BOUNDS)
    trainer: Any = _Regression.trainer(tmp_path, [power, cap])
    trainer.args.eval_strategy, trainer.args.eval_steps = "steps", 2
    trainer.eval_dataset = trainer.train_dataset[:8]
    trainer.train()
    history = trainer.state.log_history
    evaluations = [e for e in history if "eval_loss" in e]
    steps = [e for e in history if "loss" in e]
    (summary,) = [e for e in history if "train_runtime" in e]
    assert len(evaluations) == 2 and len(steps) == 4
    assert not any(key.startswith("power") for e in evaluations for key in e)
    assert not any(key.startswith("power/") for key in summary)
    assert summary["power_cap/run_share_above_cap"] == steps[-1]["power_cap/run_share_above_cap"]
    assert all(e["power/simulated"] == 1.0 and e["power_cap/cap_w"] == 300 for e in steps)
    # what each decision observed: none of loading before the first step, then its window
    assert [e["power_cap/obs_samples"] > 0 for e in steps] == [False, True, True, True]
    assert all(e["power_cap/obs_max_power_w"] >= e["power_cap/obs_mean_power_w"] for e in steps)


def test_a_run_resumed_from_a_checkpoint_carries_on_with_its_share_above_the_cap(
    tmp_path: Path,
) -> None:
    """A run stopped after its step-2 checkpoint and resumed from it by new objects (a new job):
    the run's samples above the cap, its counts and the controller's state go on from the
    checkpoint's, not from zero."""
    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.callbacks.cap import STATE_KEY
    from grpo_power.control.contract import Action

    class Counting:  # a stateful controller: it pauses on its first decision only
        def __init__(self) -> None:
            self.calls = 0

        def decide(self, observation: object) -> Action:
            self.calls += 1
            return Action(pause_s=int(self.calls == 1))

        def state_dict(self) -> dict:
            return {"calls": self.calls}

        def load_state_dict(self, state: dict) -> None:
            self.calls = state["calls"]

    monitors: list[PowerMonitor] = []

    def attempt(fail_at_step: int | None) -> tuple[PowerCapCallback, Counting, object]:
        controller = Counting()
        monitors.append(PowerMonitor(source=HotSource(), period_s=0.05))
        cap = PowerCapCallback(controller, cap_w=320.0, bounds=PAUSE_BOUNDS, monitor=monitors[-1])
        trainer = _Regression.trainer(tmp_path, [cap], fail_at_step=fail_at_step, save_steps=2)
        return cap, controller, trainer

    cap, controller, trainer = attempt(fail_at_step=3)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()  # type: ignore[attr-defined]
    saved = json.loads((tmp_path / "out" / "checkpoint-2" / "trainer_state.json").read_text())
    at_checkpoint = saved["stateful_callbacks"][STATE_KEY]
    assert at_checkpoint["controller"] == {"calls": 2}
    assert at_checkpoint["counts"]["paused_s"] == 1.0
    over_cap = at_checkpoint["violations"]["over_cap"]
    assert over_cap > 0

    cap, controller, trainer = attempt(fail_at_step=None)
    trainer.train(resume_from_checkpoint=True)  # type: ignore[attr-defined]
    assert controller.calls == 4  # decisions for steps 3 and 4 after the checkpoint's two
    assert cap.counts["paused_s"] == 1.0  # the first attempt's pause, and none since
    # the checkpoint's samples and those of steps 3 and 4
    assert cap.violations.over_cap > over_cap
    assert cap.violations.samples > at_checkpoint["violations"]["samples"]
    last = trainer.state.log_history[-1]  # type: ignore[attr-defined]
    assert last["power_cap/paused_s"] == 1.0
    for monitor in monitors:
        monitor.stop()


class Observing:
    """A controller of one's own that asks for nothing and keeps every observation."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def decide(self, observation: Any) -> object:
        from grpo_power.control.contract import Action

        self.seen.append(observation)
        return Action()


def test_a_second_train_starts_a_new_run_of_the_cap(tmp_path: Path) -> None:
    """A second ``trainer.train()`` that does not resume is a new run: its first decision sees
    none of the first run's samples above the cap, counts or tokens (it saw the first run's)."""
    from grpo_power.callbacks import PowerCallback, PowerCapCallback

    power = PowerCallback(source="simulated", period_s=0.02)
    controller = Observing()
    cap = PowerCapCallback(controller, cap_w=61.0, monitor=power.monitor, bounds=PAUSE_BOUNDS)
    trainer = _Regression.trainer(tmp_path, [power, cap])
    trainer.train()  # type: ignore[attr-defined]
    assert cap.violations.samples > 0 and controller.seen[-1].run_samples > 0
    trainer.train()  # type: ignore[attr-defined]
    first = controller.seen[4]  # the second run's first decision
    assert (first.run_samples, first.run_share_above_cap, first.tokens_per_s) == (0, 0.0, 0.0)


def test_a_controller_observes_the_settings_applied_and_the_pause_slept_is_logged(
    tmp_path: Path,
) -> None:
    """The callback observed a pause (and a micro-batch) of 0 whatever was applied, where a
    trained controller learnt on the simulator's observation, which holds them (its decisions
    moved on 63 of 64 inputs, at 2.5 standard deviations off). Bounds naming only the actuators
    the trainer has are enough (a missing concurrency entry raised KeyError at the first step).
    The pause logged is the one slept: the callback's own after a hot window, 2 s, not the
    controller's 1 s."""
    from grpo_power.callbacks import PowerCallback, PowerCapCallback
    from grpo_power.control.contract import Action

    class PausingOnce:
        def __init__(self) -> None:
            self.seen: list[int] = []

        def decide(self, observation: Any) -> Action:
            self.seen.append(observation.pause_s)
            return Action(pause_s=1 if len(self.seen) == 1 else 0)

    power = PowerCallback(source="simulated", period_s=0.02)
    controller = PausingOnce()
    bounds = {"pause_s": ActuatorBounds(min=0, max=1)}  # a plain Trainer's one actuator
    cap = PowerCapCallback(controller, cap_w=61.0, monitor=power.monitor, bounds=bounds)
    trainer = _Regression.trainer(tmp_path, [power, cap])
    trainer.train()  # type: ignore[attr-defined]
    assert controller.seen == [0, 1, 0, 0]
    logged = [e["power_cap/pause_s"] for e in trainer.state.log_history if "loss" in e]  # type: ignore[attr-defined]
    assert logged[0] == 1.0  # the controller's pause before the first step (no window yet)

    monitor = PowerMonitor(source=HotSource(), period_s=0.05)  # every window above the cap
    hot = PowerCapCallback(PausingOnce(), cap_w=320.0, pause_s=2, monitor=monitor)
    trainer = _Regression.trainer(tmp_path, [hot])
    trainer.train()  # type: ignore[attr-defined]
    monitor.stop()
    logged = [e["power_cap/pause_s"] for e in trainer.state.log_history if "loss" in e]  # type: ignore[attr-defined]
    assert logged == [0.0, 2.0, 2.0, 2.0]  # after a hot window: the callback's 2 s, slept
    assert sum(logged) == hot.counts["paused_s"]


def test_a_hardware_tier_controller_gets_the_limit_it_was_trained_under(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ppo+hwcap controller learnt over a GPU limit of 0.9 of the cap: `set_power_limit=True`
    sets 0.9 x 300 W = 270 W, as the project's runs do (it set the cap, 300 W); without it a
    warning says the tier is left unset. A trained controller's bounds above the trainer's
    own setting are warned about (it raised max_completion_length 8 to 48 without a word)."""
    import logging

    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.callbacks.cap import _warn_above_settings
    from grpo_power.control.contract import Action
    from grpo_power.telemetry.nvml import NvmlSource
    from tests.conftest import FakeGpu, fake_nvml

    class Tiered:
        power_limit_frac = 0.9

        def decide(self, observation: object) -> Action:
            return Action()

    gpu = FakeGpu(0, "GPU-0", 100_000, 100_000, 0)
    monitor = PowerMonitor(source=NvmlSource(nvml=fake_nvml([gpu])), period_s=0.05)
    cap = PowerCapCallback(
        Tiered(), cap_w=300.0, monitor=monitor, set_power_limit=True, bounds=PAUSE_BOUNDS
    )
    trainer = _Regression.trainer(tmp_path, [cap])
    trainer.train()  # type: ignore[attr-defined]
    assert gpu.limits_set_mw[0] == 270_000
    with caplog.at_level(logging.WARNING, logger="grpo_power.callbacks.cap"):
        PowerCapCallback(Tiered(), cap_w=300.0, monitor=monitor)
        _warn_above_settings(
            {"max_new_tokens": ActuatorBounds(min=48, max=48)},
            {"max_new_tokens": 8},
            "the trained controller's bounds",
            "give bounds= to keep it lower",
        )
    assert "trained under a GPU power limit of 0.9 of the cap (270 W at 300 W)" in caplog.text
    assert (
        "the trained controller's bounds let the controller set max_new_tokens up to 48 (bounds "
        "48-48), above the trainer's own 8; give bounds= to keep it lower"
    ) in caplog.text


def test_a_controller_that_cannot_decide_is_refused_in_one_line(tmp_path: Path) -> None:
    """An object without ``decide`` is refused when the callback is made; a ``decide`` that
    returns no Action, at the first step, naming it (both failed deep inside the callback)."""
    from grpo_power.callbacks import PowerCapCallback

    with pytest.raises(TypeError, match="controller: expected an object with decide"):
        PowerCapCallback(controller=object(), cap_w=300.0)  # type: ignore[arg-type]

    class Forgets:
        def decide(self, observation: object) -> None:
            return None

    trainer = _Regression.trainer(tmp_path, [PowerCapCallback(Forgets(), cap_w=300.0)])
    with pytest.raises(TypeError, match=r"Forgets.decide returned NoneType; expected a grpo_po"):
        trainer.train()  # type: ignore[attr-defined]


def test_power_cap_callback_drives_the_trainer_calling_it(tmp_path: Path) -> None:
    """The same callbacks given to a second trainer (a notebook cell run again) drive that
    trainer, not the first one."""
    from types import SimpleNamespace

    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.control.contract import Action

    class Shorter:
        def decide(self, observation: object) -> Action:
            return Action(max_new_tokens=8)

    cap = PowerCapCallback(controller=Shorter(), cap_w=300.0)
    trainers = [_Regression.trainer(tmp_path / name, [cap]) for name in ("first", "second")]
    for trainer in trainers:
        trainer.generation_config = SimpleNamespace(max_new_tokens=32)  # type: ignore[attr-defined]
        trainer.train()  # type: ignore[attr-defined]
        assert trainer.generation_config.max_new_tokens == 8  # type: ignore[attr-defined]


def test_power_cap_callback_keeps_to_what_a_trainer_that_does_not_generate_has(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A plain HF Trainer (or SFTTrainer) has no max new tokens and no concurrency: the run
    trains, the controller's settings for them are counted as not applied and warned about once,
    and the pause it has still acts, inside the step: the run's share above the cap counts the
    paused seconds' samples, as the simulator and the run's hook do."""
    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.control.contract import Action

    class Asks:
        def decide(self, observation: object) -> Action:
            return Action(concurrency=8, max_new_tokens=16, pause_s=1)

    cap = PowerCapCallback(controller=Asks(), cap_w=300.0, bounds=PAUSE_BOUNDS)
    trainer = _Regression.trainer(tmp_path, [cap])
    with caplog.at_level("WARNING", logger="grpo_power.callbacks.cap"):
        trainer.train()  # type: ignore[attr-defined]
    last = trainer.state.log_history[-1]  # type: ignore[attr-defined]
    assert last["power_cap/max_new_tokens_unavailable_steps"] == 4
    assert last["power_cap/concurrency_unavailable_steps"] == 4
    assert last["power_cap/pause_s_unavailable_steps"] == 0
    assert last["power_cap/paused_s"] == 4.0 and last["power_cap/pause_s"] == 1
    assert cap.monitor is not None
    assert cap.violations.samples >= 0.8 * 4.0 / cap.monitor.period_s  # the pauses' samples
    warned = [r.getMessage() for r in caplog.records if r.name == "grpo_power.callbacks.cap"]
    assert len(warned) == 3, warned
    assert any("Trainer has no max_new_tokens actuator" in line for line in warned)
    # this Trainer counts no tokens: said once, with the setting that counts them
    assert any("include_num_input_tokens_seen=True" in line for line in warned)


class Plays:
    """A controller of one's own that plays a list of actions, one per step."""

    def __init__(self, actions: list) -> None:
        self.actions = iter(actions)

    def decide(self, observation: object) -> object:
        return next(self.actions)


class Watching:
    """A controller of one's own that asks for nothing and keeps the tokens per second each
    decision observed."""

    def __init__(self) -> None:
        self.seen: list[float] = []

    def decide(self, observation: Any) -> object:
        from grpo_power.control.contract import Action

        self.seen.append(observation.tokens_per_s)
        return Action()


def _tiny_grpo(tmp_path: Path, callbacks: list, max_completion_length: int, **args: object) -> Any:
    """The stock trl.GRPOTrainer on the tiny model (built locally), three steps (unless ``args``
    say otherwise) of four completions of a constant reward."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_power.workload.models import tiny_model_dir
    from grpo_power.workload.task import arithmetic_dataset

    model_dir = tiny_model_dir(tmp_path / "cache")
    settings: dict[str, Any] = {
        "output_dir": str(tmp_path / "out"),
        "max_steps": 3,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": max_completion_length,
        "beta": 0.0,
        "logging_steps": 1,
        "use_cpu": True,
        "report_to": [],
        "save_strategy": "no",
        "disable_tqdm": True,
    }
    config = GRPOConfig(**{**settings, **args})
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        args=config,
        train_dataset=arithmetic_dataset(12, seed=0),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        callbacks=callbacks,
    )


def test_tokens_per_mj_shares_a_generation_among_the_steps_it_serves(tmp_path: Path) -> None:
    """With ``num_iterations=2`` every other step generates: TRL counts a generation's tokens at
    the step that generated them. They were logged over that step's energy alone (twice the
    run's tokens per MJ) and the next step logged none; each step now gets half of them."""
    from grpo_power.callbacks import PowerCallback

    power = PowerCallback(source="simulated", period_s=0.02)
    trainer = _tiny_grpo(tmp_path, [power], 8, max_steps=4, num_iterations=2)
    trainer.train()
    steps = [e for e in trainer.state.log_history if "loss" in e]
    tokens = [e["power/tokens_per_mj"] * e["power/energy_j"] / 1e6 for e in steps]
    generated = [steps[0]["num_tokens"], steps[2]["num_tokens"] - steps[0]["num_tokens"]]
    assert "num_tokens" not in steps[1]  # TRL logs its count where a step generated
    assert tokens == pytest.approx([g / 2 for g in generated for _ in range(2)])


def test_a_cap_callback_with_a_monitor_of_its_own_sees_the_runs_phases(tmp_path: Path) -> None:
    """Without a ``PowerCallback`` to share a monitor with, the cap's own monitor is told the
    model's phases as well: on a machine without a GPU its simulated A100 draws the GRPO run's
    power (it stayed idle, about 60 W, so no cap was ever exceeded)."""
    from grpo_power.callbacks import PowerCapCallback

    controller = Observing()
    # steps of 64 new tokens, 6 of them: at 16 tokens a fast machine ran a step in 45 ms, under
    # the monitor's 0.1 s period, and no sample of 3 steps fell in a busy phase
    cap = PowerCapCallback(controller, cap_w=300.0)
    trainer = _tiny_grpo(tmp_path, [cap], 64, max_steps=6)
    trainer.train()
    after_the_first = [o.mean_power_w for o in controller.seen[1:]]
    # a decision's window may hold only the time between steps (CI once saw 60.8 W, then 164.7
    # W): the run's power is seen at some decision, never at any before the fix
    assert after_the_first and max(after_the_first) > 120.0, after_the_first


def test_a_cap_callback_counts_the_tokens_an_sft_trainer_counts(tmp_path: Path) -> None:
    """TRL's SFTTrainer (and DPOTrainer) count their tokens themselves (``num_tokens``), not in
    ``num_input_tokens_seen``: the controller sees those tokens per second (it saw 0)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.workload.models import tiny_model_dir

    model_dir = tiny_model_dir(tmp_path / "cache")
    controller = Observing()
    args = SFTConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=3,
        per_device_train_batch_size=4,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        max_length=16,
        disable_tqdm=True,
    )
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        args=args,
        train_dataset=Dataset.from_dict({"text": [f"sample {i} of text" for i in range(16)]}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        callbacks=[PowerCapCallback(controller, cap_w=300.0)],
    )
    trainer.train()
    steps = [e for e in trainer.state.log_history if "loss" in e]
    assert all(e["power_cap/step_tokens"] > 0 for e in steps), steps
    assert sum(e["power_cap/step_tokens"] for e in steps) == steps[-1]["num_tokens"]
    assert all(o.tokens_per_s > 0 for o in controller.seen[1:])


def test_bounds_given_for_one_actuator_leave_a_trained_controllers_others_as_trained(
    tmp_path: Path,
) -> None:
    """Bounds given for max new tokens alone (what the warning about a trained controller's
    bounds asks for) replaced every bound: the observation's concurrency and micro-batch, of the
    actuators a plain Trainer lacks, read 0 where the controller was trained on 32 and 8.
    Bounds that are no ``ActuatorBounds`` (a tuple) or name no actuator are refused at once,
    not at the first step."""
    from types import SimpleNamespace

    from grpo_power.callbacks import PowerCapCallback

    class Trained(Observing):
        space = SimpleNamespace(
            actuators=("concurrency", "max_new_tokens", "train_micro_batch"),
            bounds={"concurrency": (1, 32), "max_new_tokens": (8, 64), "train_micro_batch": (1, 8)},
            holds={},
        )

    controller = Trained()
    bounds = {"max_new_tokens": ActuatorBounds(min=8, max=16)}
    cap = PowerCapCallback(controller, cap_w=300.0, bounds=bounds)
    _Regression.trainer(tmp_path, [cap]).train()  # type: ignore[attr-defined]
    seen = controller.seen[0]
    assert (seen.concurrency, seen.train_micro_batch, seen.max_new_tokens) == (32, 8, 16)
    assert cap.bounds["max_new_tokens"] == bounds["max_new_tokens"]
    with pytest.raises(TypeError, match=r"^PowerCapCallback: bounds\['max_new_tokens'\]: expec"):
        PowerCapCallback(controller, cap_w=300.0, bounds={"max_new_tokens": (8, 16)})
    with pytest.raises(ValueError, match=r"^PowerCapCallback: bounds: 'max_tokens': expected one"):
        PowerCapCallback(controller, cap_w=300.0, bounds={"max_tokens": bounds["max_new_tokens"]})


def test_a_controller_used_at_a_cap_it_was_not_trained_for_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A controller trained at 320 W (caps within 8 % of it) loaded at 200 W said nothing, and
    the run spent a quarter of its samples above the cap."""
    from grpo_power.callbacks import PowerCapCallback

    class Trained(Observing):
        def __init__(self) -> None:
            super().__init__()
            self.meta = {"cap_w": 320.0, "training": {"cap_jitter_frac": 0.08}}

    with caplog.at_level("WARNING", logger="grpo_power.callbacks.cap"):
        PowerCapCallback(Trained(), cap_w=300.0)  # within its training's caps
        assert "trained at a cap" not in caplog.text
        PowerCapCallback(Trained(), cap_w=200.0)
    assert (
        "the controller was trained at a cap of 320 W (caps within 8 % of it), this run's is "
        "200 W: it acts outside what it learnt; train one at this cap (grpo-power controller "
        "train --cap-w 200)"
    ) in caplog.text


def test_a_controller_trained_for_another_part_is_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A controller trained in the simulator for an A100 (400 W), run on an H200 (700 W) at the
    same cap, said nothing: it learnt another part's power. The simulated GPU here is the
    config's A100, so one trained for an H200 is the other part."""
    from grpo_power.callbacks import PowerCapCallback

    class Trained(Observing):
        def __init__(self, name: str, nameplate_w: float) -> None:
            super().__init__()
            self.meta = {"gpu": {"name": name, "nameplate_w": nameplate_w}}

    with caplog.at_level("WARNING", logger="grpo_power.callbacks.cap"):
        PowerCapCallback(Trained("NVIDIA A100-SXM4-80GB", 400.0), cap_w=300.0)
        assert "trained in the simulator for" not in caplog.text
        PowerCapCallback(Trained("NVIDIA H200", 700.0), cap_w=300.0)
    assert (
        "the controller was trained in the simulator for NVIDIA H200 (700 W), this run's GPUs "
        "are NVIDIA A100-SXM4-80GB (400 W): it learnt another part's power"
    ) in caplog.text


def test_inputs_far_from_a_trained_controllers_training_are_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The inputs a trained controller names as far from its training (PPOController.far_inputs)
    are warned of once each, not at the first decision (no samples yet, as in training)."""
    from grpo_power.callbacks import PowerCapCallback

    class Far(Observing):
        def far_inputs(self, observation: Any, sd: float) -> list:
            return [("tokens_per_s", observation.tokens_per_s, -12.6)]

    controller = Far()
    trainer = _Regression.trainer(tmp_path, [PowerCapCallback(controller, cap_w=300.0)])
    with caplog.at_level("WARNING", logger="grpo_power.callbacks.cap"):
        trainer.train()  # type: ignore[attr-defined]
    far = [r.getMessage() for r in caplog.records if "standard deviations" in r.getMessage()]
    assert len(far) == 1 and len(controller.seen) > 2
    assert far[0].startswith("PowerCapCallback: the trained controller sees tokens_per_s = ")
    assert "13 standard deviations from its training's mean" in far[0]


def test_a_trained_controllers_held_actuators_read_as_trained_and_keep_the_users_setting(
    tmp_path: Path,
) -> None:
    """A trained controller holds the actuators without authority on its deployment (7b: the
    training chunk at 1; 14b: max new tokens at 64). Its observation read a chunk the stock
    trainer lacks at its bound, 8 (18 standard deviations off its training), and the 7b
    controller paused 6-8 s before every step; and its held 64 new tokens overrode a trainer's
    16. Held actuators read their hold level and keep the trainer's own setting."""
    from types import SimpleNamespace

    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.control.contract import Action

    class Trained(Observing):
        space = SimpleNamespace(
            actuators=("concurrency",),
            bounds={"concurrency": (1, 32), "max_new_tokens": (8, 64), "train_micro_batch": (1, 8)},
            holds={"max_new_tokens": 64, "train_micro_batch": 1, "pause_s": 0},
        )

        def decide(self, observation: Any) -> Action:  # as ControlSpace.to_action gives it
            super().decide(observation)
            return Action(concurrency=8, max_new_tokens=64, train_micro_batch=1, pause_s=0)

    controller = Trained()
    cap = PowerCapCallback(controller, cap_w=300.0)
    trainer = _tiny_grpo(tmp_path, [cap], max_completion_length=16, max_steps=2)
    trainer.train()
    seen = controller.seen[-1]
    assert (seen.max_new_tokens, seen.train_micro_batch, seen.pause_s) == (64, 1, 0)
    steps = [e for e in trainer.state.log_history if "loss" in e]
    assert [e["power_cap/max_new_tokens"] for e in steps] == [16, 16]
    assert all(e["completions/max_length"] <= 16 for e in steps)
    last = trainer.state.log_history[-1]
    assert last["power_cap/train_micro_batch_unavailable_steps"] == 0  # held: never asked for
    assert last["power_cap/concurrency_unavailable_steps"] == 2  # driven: the stock trainer lacks


def test_a_controller_of_ones_own_never_lengthens_completions_past_the_users_setting(
    tmp_path: Path,
) -> None:
    """A GRPO run configured for completions of 80 tokens (the config's workload bounds stop at
    64): a controller that asks nothing leaves them at 80, one that asks more gets 80, one that
    asks less gets it; a second train() starts from the user's 80 again, not the last value."""
    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.control.contract import Action

    assert Config().workload.max_new_tokens_bounds.max < 80
    asked = [Action(), Action(max_new_tokens=500), Action(max_new_tokens=20)]
    cap = PowerCapCallback(controller=Plays([*asked, *asked]), cap_w=300.0)
    trainer = _tiny_grpo(tmp_path, [cap], max_completion_length=80)
    for _ in range(2):
        trainer.train()
        steps = [e for e in trainer.state.log_history if "loss" in e]
        assert [e["power_cap/max_new_tokens"] for e in steps] == [80, 80, 20]
        assert [e["completions/max_length"] for e in steps][:2] == [80, 80]  # random weights
        assert steps[-1]["completions/max_length"] <= 20


def test_bounds_above_the_trainers_own_setting_are_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """bounds= of max_new_tokens up to 40 on a trainer of max_completion_length 16 let a
    controller of one's own generate 40 tokens without a word (a trained controller's bounds
    were warned about): the user's bounds are too."""
    from grpo_power.callbacks import PowerCapCallback
    from grpo_power.control.contract import Action

    cap = PowerCapCallback(
        Plays([Action(max_new_tokens=40)]),
        cap_w=300.0,
        bounds={"max_new_tokens": ActuatorBounds(min=4, max=40)},
    )
    trainer = _tiny_grpo(tmp_path, [cap], max_completion_length=16, max_steps=1)
    with caplog.at_level("WARNING", logger="grpo_power.callbacks.cap"):
        trainer.train()
    assert (
        "bounds= let the controller set max_new_tokens up to 40 (bounds 4-40), above the "
        "trainer's own 16; lower their max to keep it there"
    ) in caplog.text
    assert trainer.state.log_history[0]["power_cap/max_new_tokens"] == 40


def test_truncated_completions_masked_out_of_the_loss_still_count_as_generated(
    tmp_path: Path,
) -> None:
    """With TRL's mask_truncated_completions (a DAPO setting) a completion that runs to max new
    tokens gets a mask of zeros: step_tokens and tokens_per_s read 0 though every step
    generated, and a controller shortening completions (more truncated) saw its own
    throughput fall to 0. They count the tokens generated, as TRL's completion lengths do."""
    from grpo_power.callbacks import PowerCapCallback

    watching = Watching()
    trainer = _tiny_grpo(
        tmp_path,
        [PowerCapCallback(watching, cap_w=300.0)],
        max_completion_length=12,
        mask_truncated_completions=True,
    )
    trainer.train()
    steps = [e for e in trainer.state.log_history if "loss" in e]
    assert any(e["completions/clipped_ratio"] > 0 for e in steps)  # random weights: truncated
    completions = [4 * e["completions/mean_length"] for e in steps]
    assert [e["power_cap/step_tokens"] for e in steps] == pytest.approx(completions)
    assert all(tokens_per_s > 0 for tokens_per_s in watching.seen[1:])


def test_the_controller_sees_the_completion_tokens_per_second_the_simulator_counts(
    tmp_path: Path,
) -> None:
    """The stock GRPOTrainer counts prompt and completion tokens (num_input_tokens_seen, TRL's
    num_tokens); a controller trained in the simulator learnt completion tokens per second:
    each step's are the completion tokens it generated (four completions of the mean length
    TRL logs), and its tokens per second are what the next decision observes."""
    from grpo_power.callbacks import PowerCapCallback

    watching = Watching()
    trainer = _tiny_grpo(
        tmp_path, [PowerCapCallback(watching, cap_w=300.0)], max_completion_length=12
    )
    trainer.train()
    steps = [e for e in trainer.state.log_history if "loss" in e]
    completions = [4 * e["completions/mean_length"] for e in steps]
    assert [e["power_cap/step_tokens"] for e in steps] == pytest.approx(completions)
    assert steps[0]["power_cap/step_tokens"] < steps[0]["num_tokens"]  # prompts not counted
    assert watching.seen[1:] == [e["power_cap/tokens_per_s"] for e in steps[:-1]]
    assert all(tokens_per_s > 0 for tokens_per_s in watching.seen[1:])
    assert "_generate_and_score_completions" not in vars(trainer)  # the wrapper is gone


def test_forward_passes_are_announced_as_prefill_decode_or_train(tmp_path: Path) -> None:
    """A generation's prompt pass (3 sequences of 7 tokens: 21 tokens at once) is a prefill, its
    one-token steps decode at a batch of 3; a no-grad pass over whole sequences (GRPO's
    log-probability passes) is a prefill too, not a decode of 3 sequences; a pass with
    gradients trains. The sequences are ``input_ids``, whatever tensor a caller passes first."""
    import torch
    from transformers import AutoModelForCausalLM

    from grpo_power.callbacks.phases import ForwardPhases
    from grpo_power.telemetry.signals import WorkloadSignal
    from grpo_power.workload.models import tiny_model_dir

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir(tmp_path / "cache"))
    signal = WorkloadSignal()
    phases = ForwardPhases(model, signal)
    ids = torch.randint(3, 50, (3, 7))
    with torch.no_grad():
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4)
        model(ids)
        # a caller that passes another tensor first: the sequences are still input_ids's
        model(position_ids=torch.arange(7)[None], input_ids=ids[:2])  # broadcast over 2
    model(ids).logits.sum().backward()
    phases.remove()
    model(ids)  # not announced
    announced = [(activity.phase, activity.batch) for _, activity in signal.changes()]
    assert announced == [
        ("idle", 1),
        ("prefill", 21),
        ("generate", 3),
        ("prefill", 21),
        ("prefill", 14),
        ("train", 3),
    ]


@pytest.mark.parametrize(
    "serving", [{"num_iterations": 2}, {"generation_batch_size": 8}], ids=["iterations", "batch"]
)
def test_a_step_training_on_an_earlier_generation_is_not_seen_as_a_step_of_no_tokens(
    tmp_path: Path, serving: dict[str, int]
) -> None:
    """With ``num_iterations=2`` (each batch trained on twice) or a generation batch of two
    steps' batches, TRL generates at every other step: the steps that train on the last
    generation generate nothing (``step_tokens`` 0), and the controller sees that generation's
    tokens over the two steps it serves, not 0 tokens per second (a rate a controller trained in
    the simulator, where every step generates, never saw)."""
    from grpo_power.callbacks import PowerCapCallback

    watching = Watching()
    trainer = _tiny_grpo(
        tmp_path,
        [PowerCapCallback(watching, cap_w=300.0)],
        max_completion_length=12,
        max_steps=4,
        **serving,
    )
    trainer.train()
    steps = [e for e in trainer.state.log_history if "loss" in e]
    tokens = [e["power_cap/step_tokens"] for e in steps]
    assert tokens[0] > 0 and tokens[2] > 0 and tokens[1] == tokens[3] == 0
    rates = [e["power_cap/tokens_per_s"] for e in steps]
    assert watching.seen[1:] == rates[:-1] and all(rate > 0 for rate in rates)
    # the rates are over the last two steps, one generation's: the first step's alone, the
    # second's over both
    assert rates[1] < rates[0]


def test_power_cap_callback_sets_the_length_a_vllm_grpo_run_generates(tmp_path: Path) -> None:
    """On the stock GRPOTrainer with use_vllm=True generation reads its length from TRL's vLLM
    generation, not from a generation_config: the controller's max new tokens reaches the
    requests TRL sends the vLLM server and the completions TRL trains on, and PowerCallback
    sees vLLM's generation as the generate phase (the model runs no forward pass for it). The
    server (a GPU this machine lacks) is the only stand-in: it answers each request with
    max_tokens tokens after 50 ms."""
    from trl.generation.vllm_generation import VLLMGeneration

    from grpo_power.callbacks import PowerCallback, PowerCapCallback
    from grpo_power.control.contract import Action

    class Server:
        def __init__(self) -> None:
            self.max_tokens: list[int] = []

        def generate(self, prompts: list, n: int, max_tokens: int, **kwargs: object) -> dict:
            self.max_tokens.append(max_tokens)
            time.sleep(0.05)
            completions = [[7] * max_tokens for _ in prompts for _ in range(n)]
            return {
                "prompt_ids": prompts,
                "completion_ids": completions,
                "logprobs": [[[-1.0]] * max_tokens for _ in completions],
            }

    class ServedGeneration(VLLMGeneration):
        def _init_vllm(self) -> None:
            self.vllm_client = Server()

        def sync_weights(self) -> None:  # the weights would go to the server's GPU
            pass

    power = PowerCallback(source="simulated", period_s=0.01, cap_w=300.0)
    asked = [Action(max_new_tokens=n) for n in (12, 5, 9)]
    cap = PowerCapCallback(controller=Plays(asked), cap_w=300.0, monitor=power.monitor)
    trainer = _tiny_grpo(
        tmp_path, [power, cap], max_completion_length=16, vllm_importance_sampling_correction=False
    )
    # what GRPOTrainer(use_vllm=True, vllm_mode="server") builds, with the server stood in
    del trainer.generation_config
    trainer.use_vllm, trainer.vllm_mode, trainer._last_loaded_step = True, "server", -1
    engine = ServedGeneration(
        model=trainer.model,
        accelerator=trainer.accelerator,
        processing_class=trainer.processing_class,
        mode="server",
        max_completion_length=trainer.args.max_completion_length,
    )
    trainer.vllm_generation = engine
    trainer.train()
    low = Config().workload.max_new_tokens_bounds.min  # 5 is asked, the lower bound applied
    assert low > 5
    assert engine.vllm_client.max_tokens == [12, low, 9]
    steps = [e for e in trainer.state.log_history if "loss" in e]
    assert [e["completions/mean_length"] for e in steps] == [12, low, 9]
    assert all(e["power/generate_energy_j"] > 0 for e in steps)
    assert "generate" not in type(engine).__dict__ and "generate" not in vars(engine)  # unhooked
    assert trainer.state.log_history[-1]["power_cap/max_new_tokens_unavailable_steps"] == 0


DISTRIBUTED_SCRIPT = """
import json, os, sys
from pathlib import Path

import torch

sys.path.insert(0, sys.argv[2])  # the checkout, for the tests' trainer
from grpo_power.callbacks import PowerCallback, PowerCapCallback
from grpo_power.config import Config
from grpo_power.control.contract import Action
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.simulated import SimulatedGpuSource
from tests.test_monitor import PAUSE_BOUNDS, _Regression

class PauseFirst:  # a rank deciding for itself would pause on its own first step
    def __init__(self):
        self.calls, self.peaks_w = 0, []

    def decide(self, observation):
        self.calls += 1
        self.peaks_w.append(observation.max_power_w)
        return Action(pause_s=int(self.calls == 1 and os.environ["RANK"] == "0"))

out = Path(sys.argv[1])
node = int(os.environ["RANK"]) // int(os.environ["LOCAL_WORLD_SIZE"])
class Hot(SimulatedGpuSource):  # a node whose GPUs draw 380 W, above the cap
    def read(self, now_s):
        return [dict(row, power_w=380.0) for row in super().read(now_s)]

config = Config()
source = Hot(config.gpu, config.telemetry.simulated, WorkloadSignal(), [0]) if node else "simulated"
power = PowerCallback(trace=out / "power.parquet", source=source, period_s=0.05)
controller = PauseFirst()
cap = PowerCapCallback(controller, cap_w=320, monitor=power.monitor, bounds=PAUSE_BOUNDS)
trainer = _Regression.trainer(out, [power, cap])
trainer.train()
last = [entry for entry in trainer.state.log_history if "loss" in entry][-1]  # the last step's
(out / f"rank{os.environ['RANK']}.json").write_text(
    json.dumps({"log": last, "decisions": controller.calls, "peaks_w": controller.peaks_w})
)
torch.distributed.barrier()  # as a torchrun script ends: no rank leaves the group in use
torch.distributed.destroy_process_group()
"""


GRPO_SCRIPT = """
import json, os, sys
from pathlib import Path

import torch

sys.path.insert(0, sys.argv[2])  # the checkout, for the tests' trainer
from grpo_power.callbacks import PowerCapCallback
from tests.test_monitor import Watching, _tiny_grpo

out = Path(sys.argv[1])
controller = Watching()
trainer = _tiny_grpo(out / os.environ["RANK"], [PowerCapCallback(controller, cap_w=300)], 12)
trainer.train()
steps = [e for e in trainer.state.log_history if "loss" in e]
written = {"steps": steps, "seen": controller.seen}
(out / f"rank{os.environ['RANK']}.json").write_text(json.dumps(written))
torch.distributed.barrier()
torch.distributed.destroy_process_group()
"""


def _torchrun(
    tmp_path: Path, nodes: int, processes_per_node: int, script_text: str = DISTRIBUTED_SCRIPT
) -> list[dict]:
    """A script (DISTRIBUTED_SCRIPT) under torchrun: one launcher a node (several nodes on this
    machine, rendezvous on a free local port); what each rank wrote (its last log and decision
    count).

    A launch whose every rank wrote its results, passed the closing barrier and then aborted in
    torch's C++ teardown ("terminate called without an active exception", SIGABRT of a rank:
    seen on the 2-core CI machine, never in the run itself) is launched once more, and that
    launch must exit cleanly."""
    try:
        return _torchrun_once(tmp_path, nodes, processes_per_node, script_text)
    except _TeardownAbort:
        for stale in tmp_path.glob("rank*.json"):
            stale.unlink()
        return _torchrun_once(tmp_path, nodes, processes_per_node, script_text)


class _TeardownAbort(AssertionError):
    """Every rank wrote its results, and then a rank aborted in torch's teardown."""


def _torchrun_once(
    tmp_path: Path, nodes: int, processes_per_node: int, script_text: str
) -> list[dict]:
    """One launch of :func:`_torchrun`."""
    import json
    import socket
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(script_text)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    launchers = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", "torch.distributed.run"),
                *("--nnodes", str(nodes), "--node_rank", str(node)),
                *("--nproc_per_node", str(processes_per_node)),
                *("--master_addr", "127.0.0.1", "--master_port", str(port)),
                *(str(script), str(tmp_path), str(REPO)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for node in range(nodes)
    ]
    ranks = range(nodes * processes_per_node)
    ended = [(launcher.communicate(timeout=600)[1], launcher.returncode) for launcher in launchers]
    # which ranks wrote what they saw tells a crash in the run from one in torch's teardown
    written = [r for r in ranks if (tmp_path / f"rank{r}.json").exists()]
    for stderr, returncode in ended:
        teardown = "terminate called without an active exception" in stderr
        if returncode != 0 and teardown and written == list(ranks):
            raise _TeardownAbort(stderr[-3000:])
        assert returncode == 0, f"ranks that wrote their results: {written}\n" + stderr[-3000:]
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in ranks]


def test_callbacks_in_a_multi_process_run_sample_once_a_node_and_act_alike(tmp_path: Path) -> None:
    """A user's script under torchrun with two processes: one sampler and one trace for the
    node (the two used to write one file and fail at its end), power in the main process's
    logs, and the controller's decisions taken on rank 0 and applied on both ranks."""
    ranks = _torchrun(tmp_path, nodes=1, processes_per_node=2)
    assert [r["decisions"] for r in ranks] == [4, 0]  # rank 0 decides for both
    assert [r["log"]["power_cap/paused_s"] for r in ranks] == [1.0, 1.0]
    assert ranks[0]["log"]["power/simulated"] == 1.0
    assert not any(name.startswith("power/") for name in ranks[1]["log"])
    # the run's share above the cap is counted on rank 0 alone: rank 1 logged a made-up 0.0
    assert "power_cap/run_share_above_cap" in ranks[0]["log"]
    assert "power_cap/run_share_above_cap" not in ranks[1]["log"]
    assert sorted(p.name for p in tmp_path.glob("power*")) == ["power.parquet"]
    trace = read_trace(tmp_path / "power.parquet")
    assert trace.complete and trace.frame["t"].max() >= 1.0  # the pause is in it


def test_a_multi_process_grpo_run_counts_every_process_completion_tokens(tmp_path: Path) -> None:
    """Two processes of the stock GRPOTrainer, four completions each a step: the tokens per
    second rank 0's controller observes are the job's completion tokens (eight completions of
    the mean length TRL logs), summed over the processes, with no prompt token."""
    ranks = _torchrun(tmp_path, nodes=1, processes_per_node=2, script_text=GRPO_SCRIPT)
    steps = ranks[0]["steps"]
    completions = [8 * e["completions/mean_length"] for e in steps]
    assert [e["power_cap/step_tokens"] for e in steps] == pytest.approx(completions)
    assert [e["power_cap/step_tokens"] for e in ranks[1]["steps"]] == pytest.approx(completions)
    assert all(e["power_cap/step_tokens"] < e["num_tokens"] for e in steps[:1])
    assert ranks[0]["seen"][1:] == [e["power_cap/tokens_per_s"] for e in steps[:-1]]
    assert ranks[1]["seen"] == []  # rank 0 decides for both


def test_each_node_of_a_job_writes_a_trace_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two nodes of one process each (two torchrun launchers on this machine, sharing its file
    system): each node's local rank 0 samples its node; the second adds its host to the trace's
    name; rank 0 decides on both nodes' samples (the second runs above the cap), and its
    decisions act on both. Each node's GPUs process its share of the tokens."""
    import socket

    from grpo_power.workload.distributed import node_share

    ranks = _torchrun(tmp_path, nodes=2, processes_per_node=1)
    assert [r["decisions"] for r in ranks] == [4, 0]
    # node 1 runs above the cap: rank 0 decides on every node's samples, not node 0's alone
    assert all(peak_w >= 380 for peak_w in ranks[0]["peaks_w"][1:])
    assert ranks[0]["log"]["power_cap/run_share_above_cap"] > 0
    assert [r["log"]["power_cap/paused_s"] for r in ranks] == [1.0, 1.0]
    assert all(r["log"]["power/simulated"] == 1.0 for r in ranks)  # each node logs its own
    names = sorted(p.name for p in tmp_path.glob("power*"))
    assert names == sorted(["power.parquet", f"power-{socket.gethostname()}.parquet"])
    assert all(read_trace(tmp_path / name).complete for name in names)
    assert node_share() == 1.0  # outside a launch
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert node_share() == 0.5


def test_a_node_whose_processes_each_see_their_own_gpu_is_warned_about(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`srun --gpus-per-task=1` gives each of a node's processes one GPU: the node's one sampler,
    local rank 0, sees its own alone, which one warning says (both callbacks asking); processes
    that see the node's GPUs, as torchrun's do, are not warned about."""
    import warnings

    from grpo_power.callbacks import PowerCallback, PowerCapCallback
    from grpo_power.telemetry.nvml import NvmlSource
    from tests.conftest import FakeGpu, fake_nvml

    class Holding:
        def decide(self, observation: object) -> object:
            raise AssertionError("not asked here")

    gpus = [FakeGpu(i, f"GPU-{i}", 100_000, 100_000, 0) for i in range(4)]
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    monitor = PowerMonitor(source=NvmlSource(nvml=fake_nvml(gpus)), period_s=0.1)
    with pytest.warns(RuntimeWarning) as caught:
        PowerCallback(monitor)
        PowerCapCallback(Holding(), cap_w=300.0, monitor=monitor)
    messages = [str(w.message) for w in caught if "srun --gpus-per-task" in str(w.message)]
    assert len(messages) == 1
    assert messages[0].startswith("4 processes on this node, but CUDA_VISIBLE_DEVICES='2' shows")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        PowerCallback(PowerMonitor(source=NvmlSource(nvml=fake_nvml(gpus)), period_s=0.1))


def test_a_launch_on_a_node_of_more_gpus_measures_its_processes_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``torchrun --nproc_per_node 2`` on a node showing four GPUs: the job drives cuda:0 and
    cuda:1 (one a local rank), and both callbacks' monitors measure those two (they summed all
    four, diluting the power the cap is judged by); GPUs given are kept, and outside a launch
    every visible GPU is measured."""
    from grpo_power.callbacks import PowerCallback, PowerCapCallback

    class Holding:
        def decide(self, observation: object) -> object:
            raise AssertionError("not asked here")

    def measured(callback: PowerCallback | PowerCapCallback) -> list[int]:
        assert callback.monitor is not None
        return [gpu.index for gpu in callback.monitor.source.gpus]

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert measured(PowerCallback(source="simulated", period_s=0.1)) == [0, 1]
    assert measured(PowerCapCallback(Holding(), cap_w=300.0)) == [0, 1]
    assert measured(PowerCallback(source="simulated", period_s=0.1, gpus=[3])) == [3]
    monkeypatch.delenv("WORLD_SIZE")
    assert measured(PowerCallback(source="simulated", period_s=0.1)) == [0, 1, 2, 3]


def test_a_window_waits_for_the_gpu_work_queued_in_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyTorch queues CUDA work and returns at once: a window's end waits for it
    (``torch.cuda.synchronize``), as Zeus's windows do, so the window holds the work launched in
    it, not the launch; ``sync_execution=False`` measures the launch alone. CUDA (a GPU this
    machine lacks) is stood in for by 0.3 s of queued work that ``synchronize`` waits out."""
    import sys
    import types

    class Cuda:
        queued_until_s: ClassVar[dict[int, float]] = {0: 0.0, 1: 0.0}  # cuda:0 is current

        @staticmethod
        def is_initialized() -> bool:
            return True

        @staticmethod
        def device_count() -> int:
            return 2

        @classmethod
        def synchronize(cls, device: int | None = None) -> None:
            until_s = cls.queued_until_s[0 if device is None else device]
            time.sleep(max(0.0, until_s - time.monotonic()))

    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=Cuda))
    measured_s = {}
    # a model spread over two GPUs (device_map="auto"): its last layers' work is on cuda:1
    with PowerMonitor(source="simulated", period_s=0.05, gpus=[0, 1]) as monitor:
        for sync in (True, False):
            with monitor.window("launch", sync_execution=sync) as w:
                Cuda.queued_until_s[1] = time.monotonic() + 0.3  # a launch returns at once
            measured_s[sync] = w.time_s
            Cuda.synchronize(1)  # the work ends before the next window
    assert measured_s[True] >= 0.3  # cuda:1 waited for too, as Zeus does (not the current only)
    assert measured_s[False] < 0.1


def test_a_cap_is_reported_against_only_when_one_was_set(config: Config) -> None:
    """Without cap_w a monitor reports no share above a cap (an H100 user's run measured
    against the A100 study's 320 W would read as always over it); a config given brings its
    cap, and cap_w overrides both."""
    cases = (({}, None), ({"config": config}, config.cap_w), ({"cap_w": 50.0}, 50.0))
    for arguments, cap_w in cases:
        monitor = PowerMonitor(source="simulated", period_s=0.02, **arguments)
        with monitor, monitor.window("work") as w:
            time.sleep(0.1)
        assert w.measurement is not None and w.measurement.cap_w == cap_w
        assert (w.share_above_cap is None) == (cap_w is None)
    assert w.share_above_cap == 1.0  # the simulated A100 idles above 50 W


def _outer_window(nested: bool) -> Any:
    """A window over generation then idle, with or without 100 short windows nested in it."""
    monitor = PowerMonitor(period_s=0.1, source="simulated", cap_w=300)
    with monitor, monitor.window("run") as run:
        with monitor.window("generate", phase="generate", batch=64):
            time.sleep(0.6)
        for i in range(100):
            if nested:
                with monitor.window(f"step{i}"):
                    time.sleep(0.002)
            else:
                time.sleep(0.002)
        monitor.signal.set("idle", 1)
        time.sleep(0.6)
    return run.measurement


def test_a_windows_share_above_cap_does_not_depend_on_the_windows_nested_in_it() -> None:
    """A researcher's finding: each window's start and end take a reading, and an outer window
    counted every one as a whole sample, so 200 short windows inside it took its share above
    the cap from 0.39 to 0.03 and its p95 from 322 W to 148 W. Each sample now stands for the
    time beside it."""
    plain, nested = _outer_window(nested=False), _outer_window(nested=True)
    assert nested.samples > 2 * plain.samples  # the nested windows' edge readings are there
    assert plain.share_above_cap > 0.2  # the generation phase is above the cap
    assert nested.share_above_cap == pytest.approx(plain.share_above_cap, abs=0.1)
    assert nested.p95_power_w == pytest.approx(plain.p95_power_w, rel=0.05)
