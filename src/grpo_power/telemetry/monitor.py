"""Measure the power and energy of any code: ``with monitor.window("rollout") as w: ...``.

:class:`PowerMonitor` is the measurement API for code the project does not run (a user's own
training script, a plain PyTorch loop), in the spirit of Zeus's ``ZeusMonitor``: windows are
named, may nest and overlap, and each gives a :class:`Measurement` (time, energy, mean and peak
power, the share of samples above a cap, and the split by phase where the workload announces its
phases). Power comes from the project's own sources and sampler
(:mod:`grpo_power.telemetry.factory`, :mod:`grpo_power.telemetry.sampler`): NVML on NVIDIA GPUs,
else the simulated A100 (labelled ``simulated`` in every measurement and file). With ``trace`` it
writes the same crash-safe trace as ``grpo-power telemetry record``
(:class:`~grpo_power.telemetry.store.TraceWriter`).

Like Zeus's windows, a window's start and end first wait for the GPU work the process has queued
on each measured CUDA device (``torch.cuda.synchronize(device)``, where PyTorch is imported and
has used CUDA; ``sync_execution=False`` skips it), so that a window holds the work launched in it
and not the launch alone, on every GPU a model is spread over. A window reads one extra sample at
its start and at its end (like Zeus reading the energy counter), so a window shorter than the
sampling period is still measured; its energy is the energy counter's difference where every
sample has one (NVML on Volta and newer, the simulated A100), else the trapezoid of sampled power
in which gaps are not bridged (:func:`~grpo_power.telemetry.summary.trapezoid_cumulative_j`); its
split by phase shares out that same energy, so the phases add up to it. A window measures one
sampling session: one still open when the monitor stops cannot be ended after it starts again (a
warning at the stop, an error at the end). A monitor never stopped is stopped at the
interpreter's exit, so its trace is finished.
``python -m benchmarks monitor`` measures the overhead per window and per sample.
"""

from __future__ import annotations

import atexit
import bisect
import logging
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from grpo_power.config import Config, TelemetrySource
from grpo_power.config.base import check_arguments, validation_problems
from grpo_power.sim.power_model import Phase
from grpo_power.telemetry.factory import open_source
from grpo_power.telemetry.record import trace_metadata
from grpo_power.telemetry.sampler import PowerSampler, RecentPower
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.source import GpuInfo, PowerSource, Row
from grpo_power.telemetry.store import (
    TraceWriter,
    free_trace_path,
    numbered_trace_path,
    trace_output_problem,
)
from grpo_power.telemetry.summary import sample_weights_s, trapezoid_cumulative_j

logger = logging.getLogger(__name__)
# windows grpo-power opens for itself (the PowerCallback's log interval): a run stopped part-way
# (Ctrl-C, a failure) leaves them open, which is no user's to end
OWN_WINDOW_PREFIX = "grpo-power/"


@dataclass(frozen=True)
class PhaseShare:
    """Time (s) and energy (J, all GPUs) of one announced phase within a window."""

    time_s: float
    energy_j: float


@dataclass(frozen=True)
class Measurement:
    """What one window measured. Power figures are per GPU (the cap is per GPU).

    Attributes:
        name: the window's name.
        time_s: wall time of the window, s.
        energy_j: energy of all measured GPUs, J.
        gpu_energy_j: energy per GPU index, J.
        energy_source: ``counter`` (the energy counter's difference) or ``integrated``.
        mean_power_w: mean power per GPU, W (energy / time / GPUs).
        p95_power_w: 95th percentile of the per-GPU power over the window's time, W (each
            sample weighted by the time it stands for: see ``share_above_cap``).
        peak_power_w: the highest per-GPU sample, W.
        share_above_cap: share of the window's per-GPU time above ``cap_w``, each sample
            standing for half the intervals beside it (None without a cap): the share of
            samples where they are evenly spaced, but a nested window's edge readings, taken
            between the scheduled ones, count for the little time they stand for.
        cap_w: the per-GPU cap, W, or None.
        samples: per-GPU samples in the window (its two boundary reads included).
        phases: time and energy per phase the workload announced (empty when none was).
        simulated: True when the power comes from the simulated A100, not a meter.
    """

    name: str
    time_s: float
    energy_j: float
    gpu_energy_j: dict[int, float]
    energy_source: str
    mean_power_w: float
    p95_power_w: float
    peak_power_w: float
    share_above_cap: float | None
    cap_w: float | None
    samples: int
    phases: dict[str, PhaseShare] = field(default_factory=dict)
    simulated: bool = False


class OpenWindow:
    """What ``with monitor.window(name) as w`` gives: after the block, ``w.measurement`` and
    its fields (``w.energy_j``, ``w.mean_power_w``, ...) are the window's :class:`Measurement`."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.measurement: Measurement | None = None

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_") or item not in Measurement.__dataclass_fields__:
            raise AttributeError(item)
        if self.measurement is None:
            raise RuntimeError(f"window {self.name!r} is still open: read {item} after its block")
        return getattr(self.measurement, item)


@dataclass(frozen=True)
class _Begun:
    """An open window: its start (sampler clock, s), the activity it announced, if any, and the
    monitor's sampling session it was opened in."""

    t_s: float
    activity: tuple[Phase, int] | None
    session: int


def synchronize_gpu_work(devices: list[int] | None = None) -> None:
    """Wait for the GPU work this process has queued on each of ``devices`` (CUDA device
    indices; None: every device it sees), as Zeus's ``sync_execution`` does; nothing where
    PyTorch is not imported (no work to wait for, and the telemetry layer never imports it) or has
    not initialised CUDA."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        for device in range(torch.cuda.device_count()) if devices is None else devices:
            torch.cuda.synchronize(device)


def check_cap_within_nameplate(owner: str, cap_w: float | None, gpus: list[GpuInfo]) -> None:
    """Refuse a per-GPU cap ``cap_w`` above the nameplate of the sampled ``gpus`` (a node's or a
    job's cap given for a GPU's), as ``grpo-power windows --cap-w`` does; ``owner`` names the
    class in the message. None: no cap, nothing to check.

    Raises:
        ValueError: the cap, the nameplate and the GPU's name in one line.
    """
    if cap_w is None or not gpus:
        return
    gpu = min(gpus, key=lambda g: g.nameplate_w)
    if cap_w > gpu.nameplate_w:
        # a simulated GPU (no UUID) is the config's part: another part's cap needs its config
        simulated = (
            " (a simulated GPU: the config's gpu, the default config's A100; give a config "
            "naming your part, PowerMonitor(config=...) or --config, to simulate it)"
            if gpu.uuid is None
            else ""
        )
        raise ValueError(
            f"{owner}: cap_w: expected a per-GPU cap of at most the GPU's nameplate, "
            f"{gpu.nameplate_w:g} W ({gpu.name}), got {cap_w:g} W{simulated}"
        )


def check_monitor(owner: str, monitor: object) -> None:
    """Refuse a ``monitor`` argument that is neither a :class:`PowerMonitor` nor None (a trace
    file's name given first, a ``PowerCallback`` for its ``.monitor``), naming ``owner``.

    Raises:
        TypeError: what was given and what was expected, in one line.
    """
    if monitor is None or isinstance(monitor, PowerMonitor):
        return
    hint = " (a trace file goes in trace=)" if isinstance(monitor, str | Path) else ""
    if hasattr(monitor, "monitor"):
        hint = f" (give its .monitor: {type(monitor).__name__}(...).monitor)"
    raise TypeError(
        f"{owner}: monitor: expected a grpo_power.telemetry.monitor.PowerMonitor or None, got "
        f"{type(monitor).__name__} {monitor!r}{hint}"
    )


class PowerMonitor:
    """Sample GPU power in the background and measure named windows of code.

    Args:
        gpus: CUDA device indices to measure, as torch numbers them (``cuda:0`` is the first
            GPU of ``CUDA_VISIBLE_DEVICES`` where it is set), as Zeus's monitor takes them
            (None: every GPU ``CUDA_VISIBLE_DEVICES`` makes visible, else every GPU). Samples
            and measurements name each GPU by its NVML index, as nvidia-smi does.
        period_s: sampling period, s (None: the config's ``telemetry.period_s``).
        source: ``auto`` (NVML when there is an NVIDIA GPU, else the simulated A100), ``nvml``,
            ``simulated``, or an opened :class:`~grpo_power.telemetry.source.PowerSource`.
        trace: a trace file to write (Parquet, crash-safe), or a ready
            :class:`~grpo_power.telemetry.store.TraceWriter`; None: keep samples in memory only.
            A monitor started again after :meth:`stop` (a second ``trainer.train()``) samples
            anew, on a new clock, into ``<stem>-2<suffix>``, ``<stem>-3<suffix>``, ... (a
            trace given as a writer, or a source given opened, cannot be restarted).
        cap_w: per-GPU cap, W, for ``share_above_cap`` (None: the ``cap_w`` of a ``config``
            given, else no cap: a cap nobody set is not reported against).
        config: the config whose GPU, simulated power model and telemetry settings are used
            (None: the defaults).
        signal: where the workload announces its phases (drives the simulated A100 and the
            phase split); None: a new one, :attr:`signal`.
        history_s: samples kept in memory beyond the open windows' needs, s.
        sampler_options: passed to :class:`~grpo_power.telemetry.sampler.PowerSampler`
            (``origin_s``, ``energy_offset_j``: a resumed run's clock and counters).

    Raises:
        TelemetryUnavailable: ``nvml`` asked for on a machine without NVML, or NVML failing.
    """

    def __init__(
        self,
        gpus: list[int] | None = None,
        period_s: float | None = None,
        source: TelemetrySource | PowerSource = "auto",
        trace: Path | str | TraceWriter | None = None,
        cap_w: float | None = None,
        config: Config | None = None,
        signal: WorkloadSignal | None = None,
        history_s: float = 600.0,
        **sampler_options: Any,
    ) -> None:
        unknown = sorted(set(sampler_options) - {"origin_s", "energy_offset_j"})
        if unknown:
            zeus = " (Zeus's gpu_indices is gpus here)" if unknown[0] == "gpu_indices" else ""
            raise TypeError(
                f"PowerMonitor: unexpected argument {unknown[0]!r}{zeus}; expected gpus, "
                "period_s, source, trace, cap_w, config, signal, history_s, origin_s or "
                "energy_offset_j"
            )
        if cap_w is None and config is not None:
            cap_w = config.cap_w
        config = config or Config()
        check_arguments("PowerMonitor", cap_w=cap_w, history_s=history_s)
        self._restart = (source, trace if isinstance(trace, str | Path) else None)
        self._sessions = 1
        telemetry = config.telemetry.model_copy()
        given = {"gpus": gpus, "period_s": period_s}
        if isinstance(source, str):
            given["source"] = source
        try:
            for name, value in given.items():
                if value is not None:
                    setattr(telemetry, name, value)  # validated against the config's schema
        except ValidationError as error:
            raise ValueError(f"PowerMonitor: {validation_problems(error)[0]}") from None
        config = config.model_copy(update={"telemetry": telemetry})
        self._config = config
        self.signal = signal or WorkloadSignal()
        self.source = open_source(config, self.signal) if isinstance(source, str) else source
        if telemetry.source == "auto" and isinstance(source, str) and self.source.kind != "nvml":
            logger.warning(
                "PowerMonitor: no NVIDIA GPU found: power is the simulated %s's (logged as "
                "power/simulated 1); source='nvml' refuses to run without one",
                config.gpu.name,
            )
        self.period_s = telemetry.period_s
        self._cuda_devices = telemetry.gpus  # what a window waits for (None: every device)
        self.cap_w = None if cap_w is None else float(cap_w)
        try:
            check_cap_within_nameplate("PowerMonitor", self.cap_w, self.source.gpus)
        except ValueError:
            if isinstance(source, str):  # opened here
                self.source.close()
            raise
        self.simulated = self.source.kind == "simulated"
        self.trace = self._writer(trace) if isinstance(trace, str | Path) else trace
        self._rows: dict[str, list[float]] = {k: [] for k in ("t", "gpu", "power_w", "energy_j")}
        self._keep_rows = int(history_s / self.period_s + 2) * max(1, len(self.source.gpus))
        self._open: dict[str, _Begun] = {}  # in the order they were opened
        self._before_phases: tuple[Phase, int] | None = None  # the activity before they began
        self._lock = threading.Lock()
        self._history_s = history_s
        self.sampler = self._sampler(**sampler_options)
        self._started = self._stopped = False
        if self.trace is not None and isinstance(trace, str | Path):
            atexit.register(self._discard_unused_trace)  # until start()

    def _sampler(self, **options: Any) -> PowerSampler:
        return PowerSampler(
            self.source,
            self.trace,
            period_s=self.period_s,
            flush_s=self._config.telemetry.flush_s,
            history_s=self._history_s,
            listener=self._store,
            **options,
        )

    def _writer(self, path: Path | str) -> TraceWriter:
        """A trace writer for this session of the monitor (a run id of its own): ``path`` for
        the first session and ``<stem>-<session><suffix>`` for later ones, or the next number
        that no trace (nor its journal) holds yet, so that no earlier recording is overwritten
        (an earlier job's, a run resumed in a new process).

        Raises:
            ValueError: ``path`` is no trace file name (not ``.parquet``), a folder, or inside
                a file.
        """
        path = Path(path)
        problem = trace_output_problem(path)
        if problem:
            raise ValueError(f"PowerMonitor: trace: {problem}")
        chosen = free_trace_path(path, self._sessions)
        if chosen != numbered_trace_path(path, self._sessions):
            logger.warning("PowerMonitor: %s exists; this recording goes to %s", path, chosen)
        run_id = f"monitor-{uuid.uuid4().hex[:8]}"
        capped = {} if self.cap_w is None else {"cap_w": self.cap_w}
        return TraceWriter(chosen, trace_metadata(self.source, run_id, self.period_s, **capped))

    def _reopen(self) -> None:
        """A new sampling session after :meth:`stop` closed the source and the trace: the
        source opened again, the next numbered trace file, a new clock, no samples kept.

        Raises:
            RuntimeError: the source was given opened, or the trace as a writer (both closed).
        """
        source, trace = self._restart
        if not isinstance(source, str) or (self.trace is not None and trace is None):
            given = "an opened power source" if not isinstance(source, str) else "a TraceWriter"
            raise RuntimeError(
                f"PowerMonitor: cannot start again after stop(): it was given {given}, which "
                "stop() closed; give it a source name and a trace path, or make a new monitor"
            )
        self._sessions += 1
        self.source = open_source(self._config, self.signal)
        if trace is not None:
            self.trace = self._writer(trace)
        with self._lock:
            for values in self._rows.values():
                values.clear()
        self.sampler = self._sampler()

    # -- lifecycle -------------------------------------------------------------------------

    def _discard_unused_trace(self) -> None:
        """At exit, the journal of the trace a monitor opened and never started sampling into
        (a script that failed before its training began) removed, so that the next run's
        recording takes the trace's name rather than ``<stem>-2``."""
        unused = not self._started and not self._stopped and self.trace is not None
        if unused and self.trace.rows_written == 0:  # type: ignore[union-attr]
            self.trace.discard()  # type: ignore[union-attr]

    def start(self) -> PowerMonitor:
        """Start sampling (a window started before this starts it); after :meth:`stop`, a new
        session (see the class docstring)."""
        if not self._started:
            atexit.unregister(self._discard_unused_trace)
            if self._stopped:
                self._reopen()
            self._started, self._stopped = True, False
            self.sampler.start()
            atexit.register(self.stop)  # a monitor never stopped still finishes its trace
        return self

    def stop(self, complete: bool = True) -> None:
        """Stop sampling and close the trace (``complete=False``: an unfinished attempt).
        Windows still open cannot be ended once the monitor starts again (a warning says so)."""
        if self._started:
            atexit.unregister(self.stop)
            users = sorted(n for n in self._open if not n.startswith(OWN_WINDOW_PREFIX))
            if users:
                logger.warning(
                    "PowerMonitor: stopped with window(s) %s open: a window measures one "
                    "sampling session; end it before stop(), or keep the monitor running",
                    users,
                )
            self.sampler.stop(complete)
            self._started, self._stopped = False, True

    def __enter__(self) -> PowerMonitor:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- windows ---------------------------------------------------------------------------

    def begin_window(
        self, name: str, phase: Phase | None = None, batch: int = 1, sync_execution: bool = True
    ) -> None:
        """Open window ``name`` now (after the queued GPU work, unless ``sync_execution`` is
        False; see the module docstring); ``phase`` (optional) is announced to :attr:`signal`
        for the window's duration (it drives the simulated A100; real GPUs ignore it): of
        overlapping windows, the phase of the last one opened that is still open, and when none
        is, the activity before the first."""
        if name in self._open:
            raise ValueError(f"window {name!r} is already open; close it or use another name")
        if sync_execution:
            synchronize_gpu_work(self._cuda_devices)
        self.start()
        activity = None
        if phase is not None:
            activity = (phase, batch)
            with self._lock:
                if not any(b.activity for b in self._open.values()):
                    current = self.signal.current()
                    self._before_phases = (current.phase, current.batch)
            self.signal.set(phase, batch)
        begun = _Begun(self._boundary_s(), activity, self._sessions)
        with self._lock:
            self._open[name] = begun
            self._keep_phase_changes()

    def end_window(self, name: str, sync_execution: bool = True) -> Measurement:
        """Close window ``name`` (after the queued GPU work, unless ``sync_execution`` is False)
        and return what it measured.

        Raises:
            KeyError: no window of that name is open.
            ValueError: the window was opened before the monitor stopped and started again
                (its start is on the earlier session's clock, its samples are gone).
        """
        if name not in self._open:
            raise KeyError(f"no open window {name!r}; open ones: {sorted(self._open)}")
        if self._open[name].session != self._sessions or not self._started:
            del self._open[name]
            raise ValueError(
                f"window {name!r} was opened before the monitor was stopped: a window measures "
                "one sampling session; end it before stop(), or keep the monitor running (a "
                "PowerCallback stops only a monitor it made: give it one you start and stop)"
            )
        if sync_execution:
            synchronize_gpu_work(self._cuda_devices)
        end_s = self._boundary_s()
        with self._lock:
            last_phased = next((n for n in reversed(self._open) if self._open[n].activity), None)
            begun = self._open.pop(name)
            times = self._rows["t"]
            first, last = bisect.bisect_left(times, begun.t_s), bisect.bisect_right(times, end_s)
            rows = {k: np.asarray(v[first:last], dtype=float) for k, v in self._rows.items()}
            phased = [b.activity for b in self._open.values() if b.activity]
        if name == last_phased:  # its phase was the one in force: the next one's, or the first's
            restore = phased[-1] if phased else self._before_phases
            if restore is not None:
                self.signal.set(*restore)
        measurement = self._measure(name, begun.t_s, end_s, rows)
        with self._lock:
            self._keep_phase_changes()
        return measurement

    def _keep_phase_changes(self) -> None:
        """Ask :attr:`signal` to keep the phase changes the open windows' split needs (from the
        oldest one's start on), however many. Under the lock."""
        oldest_s = min((b.t_s for b in self._open.values()), default=None)
        origin_s = self.sampler.origin_s
        since_s = None if oldest_s is None or origin_s is None else origin_s + oldest_s
        self.signal.keep_since(self, since_s)

    @contextmanager
    def window(
        self, name: str, phase: Phase | None = None, batch: int = 1, sync_execution: bool = True
    ) -> Iterator[OpenWindow]:
        """``with monitor.window("rollout") as w: ...``; afterwards ``w.energy_j`` etc."""
        handle = OpenWindow(name)
        self.begin_window(name, phase, batch, sync_execution)
        try:
            yield handle
        finally:
            handle.measurement = self.end_window(name, sync_execution)

    def recent(self, window_s: float) -> RecentPower:
        """Per-GPU samples of the last ``window_s`` seconds (for a controller)."""
        return self.sampler.recent(window_s)

    def age_s(self) -> float:
        """Seconds since the newest sample."""
        return self.sampler.age_s()

    # -- internals -------------------------------------------------------------------------

    def _boundary_s(self) -> float:
        """Read a boundary sample now; its time on the sampler's clock, s (now, if it failed)."""
        rows = self.sampler.take_now()
        if rows:
            return float(rows[0]["t"])
        assert self.sampler.origin_s is not None
        return time.monotonic() - self.sampler.origin_s

    def _store(self, rows: list[Row]) -> None:
        """The sampler's listener: keep every row; drop old ones no open window needs."""
        with self._lock:
            for row in rows:
                energy_j = row.get("energy_j")
                self._rows["t"].append(row["t"])
                self._rows["gpu"].append(row["gpu"])
                self._rows["power_w"].append(row["power_w"])
                self._rows["energy_j"].append(np.nan if energy_j is None else energy_j)
            if len(self._rows["t"]) > 2 * self._keep_rows:
                drop = len(self._rows["t"]) - self._keep_rows
                oldest_s = min((b.t_s for b in self._open.values()), default=None)
                if oldest_s is not None:
                    drop = min(drop, bisect.bisect_left(self._rows["t"], oldest_s))
                for values in self._rows.values():
                    del values[:drop]

    def _measure(
        self, name: str, start_s: float, end_s: float, rows: dict[str, np.ndarray]
    ) -> Measurement:
        time_s = max(0.0, end_s - start_s)
        max_gap_s = 2.0 * self.period_s
        changes = self._phase_changes(start_s, end_s)
        gpu_energy_j: dict[int, float] = {}
        phase_energy_j: dict[str, float] = {}
        sources = set()
        weights_s = np.zeros(len(rows["t"]))  # the time each sample stands for, per GPU
        for gpu in np.unique(rows["gpu"]).astype(int):
            mine = rows["gpu"] == gpu
            t_s, power_w, counter = rows["t"][mine], rows["power_w"][mine], rows["energy_j"][mine]
            weights_s[mine] = sample_weights_s(t_s, max_gap_s)
            if len(counter) >= 2 and not np.isnan(counter).any():
                cumulative_j, source = counter - counter[0], "counter"
            else:
                cumulative_j, source = trapezoid_cumulative_j(t_s, power_w, max_gap_s), "integrated"
            gpu_energy_j[int(gpu)] = float(cumulative_j[-1]) if len(cumulative_j) else 0.0
            sources.add(source)
            if changes:
                _split_by_phase(t_s, cumulative_j, changes, phase_energy_j)
        power_w = rows["power_w"]
        if not weights_s.sum() > 0:  # one reading per GPU: each counts alike
            weights_s = np.ones(len(power_w))
        energy_j = float(sum(gpu_energy_j.values()))
        n_gpus = max(1, len(gpu_energy_j))
        return Measurement(
            name=name,
            time_s=time_s,
            energy_j=energy_j,
            gpu_energy_j=gpu_energy_j,
            energy_source=",".join(sorted(sources)) or "none",
            mean_power_w=energy_j / time_s / n_gpus if time_s > 0 else float("nan"),
            p95_power_w=(
                float(np.percentile(power_w, 95, weights=weights_s, method="inverted_cdf"))
                if len(power_w)
                else float("nan")
            ),
            peak_power_w=float(power_w.max()) if len(power_w) else float("nan"),
            share_above_cap=(
                float(weights_s[power_w > self.cap_w].sum() / weights_s.sum())
                if len(power_w) and self.cap_w
                else None
            ),
            cap_w=self.cap_w,
            samples=len(power_w) // n_gpus,
            phases={
                phase: PhaseShare(_phase_time_s(changes, phase), energy)
                for phase, energy in phase_energy_j.items()
            },
            simulated=self.simulated,
        )

    def _phase_changes(self, start_s: float, end_s: float) -> list[tuple[float, float, str]]:
        """The announced phases as (from, to, phase) on the sampler's clock, cut to the window;
        empty when nothing but idle was announced."""
        assert self.sampler.origin_s is not None
        origin_s = self.sampler.origin_s
        changes = [(t - origin_s, a.phase) for t, a in self.signal.changes(origin_s + start_s)]
        spans = []
        for (since_s, phase), (until_s, _) in zip(
            changes, [*changes[1:], (end_s, "")], strict=True
        ):
            low, high = max(since_s, start_s), min(until_s, end_s)
            if high > low:
                spans.append((low, high, phase))
        return spans if any(phase != "idle" for *_, phase in spans) else []


def _phase_time_s(spans: list[tuple[float, float, str]], phase: str) -> float:
    return float(sum(high - low for low, high, p in spans if p == phase))


def _split_by_phase(
    t_s: np.ndarray,
    cumulative_j: np.ndarray,
    spans: list[tuple[float, float, str]],
    energy_j: dict[str, float],
) -> None:
    """Add one GPU's window energy to ``energy_j`` by phase: ``cumulative_j`` (its energy since
    the window's first sample, the same the window's energy is read from) at each span's ends,
    each sample interval's energy shared among the phases in proportion to their time in it."""
    if len(t_s) < 2:
        return
    low = np.array([span[0] for span in spans])
    high = np.array([span[1] for span in spans])
    per_span_j = np.interp(high, t_s, cumulative_j) - np.interp(low, t_s, cumulative_j)
    for (_, _, phase), share_j in zip(spans, per_span_j, strict=True):
        energy_j[phase] = energy_j.get(phase, 0.0) + float(share_j)
