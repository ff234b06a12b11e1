"""The channel from a workload to the simulated sampler: which phase runs, at what batch.

In one process the workload and the sampler share a :class:`WorkloadSignal`. Across processes
(``grpo-power telemetry record -- CMD``) the recorder creates a small state file and passes its
path in the ``GRPO_POWER_SIGNAL_FILE`` environment variable; the command's
:func:`signal_from_env` writes to it and the sampler reads it. Writes are atomic renames, so a
reader never sees half a state. On real GPUs (NVML) the signals are still sent but unused.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from pathlib import Path

from grpo_power.atomic import write_text_atomic
from grpo_power.sim.power_model import PHASES, GpuActivity, Phase

SIGNAL_FILE_ENV = "GRPO_POWER_SIGNAL_FILE"
HISTORY_CHANGES = 4096  # phase changes kept for the sensor window (far more than 1 s needs);
# more where a reader keeps them (an open window's phase split: :meth:`WorkloadSignal.keep_since`)


class WorkloadSignal:
    """Thread-safe current activity, optionally mirrored to a file for another process.

    Args:
        path: state file shared with another process, or None for in-process use only.
    """

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._activity = GpuActivity(phase="idle", batch=1)
        # (time.monotonic() of the change, activity from then on), the most recent last.
        self._changes: deque[tuple[float, GpuActivity]] = deque(
            [(time.monotonic(), self._activity)]
        )
        self._kept_since: dict[int, float] = {}  # a reader's id -> the oldest time it needs
        self._seen_mtime_ns = -1

    def keep_since(self, reader: object, since_s: float | None) -> None:
        """Keep every change that covers time from ``since_s`` (``time.monotonic()``) on, for
        ``reader`` (a monitor with an open window), however many; None: ``reader`` needs none,
        and only the last :data:`HISTORY_CHANGES` are kept beyond what other readers need."""
        with self._lock:
            if since_s is None:
                self._kept_since.pop(id(reader), None)
            else:
                self._kept_since[id(reader)] = since_s
            self._trim()

    def _trim(self) -> None:
        """Drop the oldest changes beyond :data:`HISTORY_CHANGES` that no reader needs (a change
        is needed while the next one comes after a reader's oldest time). Under the lock."""
        since_s = min(self._kept_since.values(), default=None)
        while len(self._changes) > HISTORY_CHANGES and (
            since_s is None or self._changes[1][0] <= since_s
        ):
            self._changes.popleft()

    def set(self, phase: Phase, batch: int = 1) -> None:
        """Announce that ``phase`` starts now with ``batch`` sequences processed at once."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; expected one of {PHASES}")
        activity = GpuActivity(phase=phase, batch=max(1, int(batch)))
        with self._lock:
            self._activity = activity
            self._changes.append((time.monotonic(), activity))
            self._trim()
        if self.path is not None:
            write_text_atomic(self.path, json.dumps({"phase": phase, "batch": activity.batch}))

    def current(self) -> GpuActivity:
        """The activity now; re-reads the shared file when another process changed it."""
        if self.path is not None:
            self._refresh_from_file()
        with self._lock:
            return self._activity

    def _refresh_from_file(self) -> None:
        assert self.path is not None
        try:
            mtime_ns = self.path.stat().st_mtime_ns
            if mtime_ns == self._seen_mtime_ns:
                return
            state = json.loads(self.path.read_text())
            activity = GpuActivity(phase=state["phase"], batch=int(state["batch"]))
        except (FileNotFoundError, json.JSONDecodeError, KeyError, ValueError):
            return  # nothing announced yet: keep the last known activity
        with self._lock:
            self._activity = activity
            self._changes.append((mtime_ns / 1e9 - time.time() + time.monotonic(), activity))
            self._trim()
            self._seen_mtime_ns = mtime_ns

    def changes(self, since_s: float | None = None) -> list[tuple[float, GpuActivity]]:
        """The recent changes, oldest first: (``time.monotonic()`` of the change, activity from
        then on); the last :data:`HISTORY_CHANGES`, and all that a reader keeps. With
        ``since_s``, only those in force from then on (the one in force at ``since_s`` first),
        found from the newest back, so a short window costs little however long the history."""
        if self.path is not None:
            self._refresh_from_file()
        with self._lock:
            if since_s is None:
                return list(self._changes)
            found = []
            for change in reversed(self._changes):
                found.append(change)
                if change[0] <= since_s:
                    break
            return found[::-1]

    def mix(self, window_s: float) -> list[tuple[GpuActivity, float]]:
        """The activities of the last ``window_s`` seconds and how long each lasted in it, s.

        A window of 0 gives the current activity alone.
        """
        now_s = time.monotonic()
        current = self.current()
        if window_s <= 0:
            return [(current, 1.0)]
        start_s = now_s - window_s
        changes = self.changes(start_s)
        mix: list[tuple[GpuActivity, float]] = []
        for (changed_s, activity), (next_s, _) in zip(
            changes, [*changes[1:], (now_s, current)], strict=True
        ):
            overlap_s = min(next_s, now_s) - max(changed_s, start_s)
            if overlap_s > 0:
                mix.append((activity, overlap_s))
        return mix or [(current, 1.0)]


def signal_from_env() -> WorkloadSignal:
    """The signal a workload should send to: the recorder's file if one is set, else local."""
    return WorkloadSignal(os.environ.get(SIGNAL_FILE_ENV))
