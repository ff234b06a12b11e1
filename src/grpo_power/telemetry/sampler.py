"""The background sampler: reads a power source every ``period_s`` and stores the samples.

It runs in a daemon thread, keeps to its schedule with ``time.monotonic()`` (a late sample is
taken at once and the schedule moves on; missed slots are counted, never back-filled), makes rows
durable every ``flush_s`` through a :class:`~grpo_power.telemetry.store.TraceWriter`, and keeps the
last ``history_s`` seconds in memory for a controller (:meth:`PowerSampler.recent`).

A failing read (an NVML error, a GPU lost) is counted and retried at the next slot; it never
stops the sampler or the workload. :meth:`PowerSampler.age_s` tells a controller how old the
newest sample is, so it can fall back to a safe setting while telemetry is stale.

A ``listener`` (the :class:`~grpo_power.telemetry.monitor.PowerMonitor`) gets every sample's rows
as they are read; :meth:`PowerSampler.take_now` reads one extra sample from the caller's thread
(a measurement window's boundary), which the listener and the history get but the trace does not,
so the trace keeps its period.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from grpo_power.telemetry.source import PowerSource, Row
from grpo_power.telemetry.store import TraceWriter


@dataclass(frozen=True)
class RecentPower:
    """Samples of the last window: times (s since start), GPU indices and power, W."""

    t_s: np.ndarray
    gpu: np.ndarray
    power_w: np.ndarray


END_SAMPLE_MIN_S = 1e-3  # a stop this soon after the last reading takes no reading of its own


class PowerSampler:
    """Sample a :class:`PowerSource` in a background thread.

    Args:
        source: where samples come from.
        writer: where they are stored (None: keep only the in-memory history).
        period_s: sampling period, s.
        flush_s: rows are written to ``writer`` at least this often, s.
        history_s: how much recent history :meth:`recent` can return, s.
        origin_s: ``time.monotonic()`` value that is ``t = 0`` (default: when started).
        energy_offset_j: added to each GPU's energy counter (by GPU index), J: a resumed run's
            counters continue from its earlier attempts.
        listener: called with the rows of every sample (``t`` set), in time order.
    """

    def __init__(
        self,
        source: PowerSource,
        writer: TraceWriter | None,
        period_s: float,
        flush_s: float = 2.0,
        history_s: float = 300.0,
        origin_s: float | None = None,
        energy_offset_j: dict[int, float] | None = None,
        listener: Callable[[list[Row]], None] | None = None,
    ) -> None:
        if period_s <= 0:
            raise ValueError(f"period_s must be positive, got {period_s}")
        self.source = source
        self.writer = writer
        self.period_s = period_s
        self.flush_s = flush_s
        self.origin_s = origin_s
        self.energy_offset_j = energy_offset_j or {}
        self.listener = listener
        self.samples_taken = 0
        self.missed_slots = 0
        self.read_errors = 0
        self.last_read_error: Exception | None = None
        self.error: BaseException | None = None  # a fatal error that stopped the sampler
        self._last_sample_s: float | None = None
        self._started_s: float | None = None
        max_rows = int(history_s / period_s + 1) * max(1, len(source.gpus))
        self._history: deque[tuple[float, int, float]] = deque(maxlen=max_rows)
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()  # one read at a time: the loop's or take_now's
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="grpo-power-sampler", daemon=True)

    def start(self) -> PowerSampler:
        self._started_s = time.monotonic()
        if self.origin_s is None:
            self.origin_s = self._started_s
        self._thread.start()
        return self

    def stop(self, complete: bool = True) -> None:
        """Stop sampling, write what is pending, and close the writer (``complete=False``: an
        attempt of a resumable run that ends unfinished) and the source."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.writer is not None:
            self.writer.close(complete)
        self.source.close()

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def recent(self, window_s: float) -> RecentPower:
        """Samples of the last ``window_s`` seconds (all GPUs)."""
        with self._lock:
            rows = list(self._history)
        if not rows:
            empty = np.empty(0)
            return RecentPower(empty, empty.astype(int), empty)
        data = np.asarray(rows)
        keep = data[:, 0] >= data[-1, 0] - window_s
        return RecentPower(data[keep, 0], data[keep, 1].astype(int), data[keep, 2])

    def age_s(self) -> float:
        """Seconds since the newest sample (since :meth:`start` when there is none yet)."""
        newest_s = self._last_sample_s if self._last_sample_s is not None else self._started_s
        return time.monotonic() - newest_s if newest_s is not None else float("inf")

    def take_now(self) -> list[Row]:
        """Read one sample now, from the caller's thread, between the scheduled ones (a window's
        boundary): the listener and the history get it, the trace does not, and it does not make
        the telemetry fresh (:meth:`age_s` is the age of the scheduled samples: a stopped
        sampler still puts a run in fail-safe). Returns its rows (none when the read failed; the
        failure is counted like the loop's)."""
        return self._read(scheduled=False) or []

    def _read(self, scheduled: bool = True) -> list[Row] | None:
        """Read the source once: rows with ``t`` set, handed to the listener and the history;
        a ``scheduled`` read is the newest sample :meth:`age_s` measures from."""
        with self._read_lock:
            now_s = time.monotonic()
            assert self.origin_s is not None
            t_s = now_s - self.origin_s
            try:
                rows = self.source.read(now_s)
            except Exception as error:  # NVML errors, GPU lost: count, retry at the next slot
                self.read_errors += 1
                self.last_read_error = error
                return None
            if scheduled:
                self._last_sample_s = now_s
            with self._lock:
                for row in rows:
                    row["t"] = t_s
                    if row.get("energy_j") is not None:
                        row["energy_j"] += self.energy_offset_j.get(row["gpu"], 0.0)
                    self._history.append((t_s, row["gpu"], row["power_w"]))
            if self.listener is not None:
                self.listener(rows)
        return rows

    def _take(self, pending: list[Row]) -> None:
        rows = self._read()
        if rows is not None:
            pending.extend(rows)
            self.samples_taken += 1

    def _loop(self) -> None:
        pending: list[Row] = []
        next_s = time.monotonic()
        last_flush_s = next_s
        try:
            while True:
                self._take(pending)
                now_s = time.monotonic()
                if self.writer is not None and now_s - last_flush_s >= self.flush_s:
                    self.writer.write(pending)
                    pending, last_flush_s = [], now_s
                next_s += self.period_s
                if next_s < now_s:  # fell behind: skip the missed slots, never back-fill
                    skipped = int((now_s - next_s) / self.period_s) + 1
                    self.missed_slots += skipped
                    next_s += skipped * self.period_s
                if self._stop.wait(next_s - time.monotonic()):
                    # a reading at the stop too, as at the start: the trace spans the whole
                    # recording (a 1 s command sampled every 2 s had one reading and 0 J)
                    if time.monotonic() - (self._last_sample_s or 0.0) >= END_SAMPLE_MIN_S:
                        self._take(pending)
                    break
        except BaseException as error:  # the sampler must never take the workload down
            self.error = error
        try:  # keep what was sampled since the last flush, if the writer still can
            if self.writer is not None:
                self.writer.write(pending)
        except BaseException as error:
            self.error = self.error or error
