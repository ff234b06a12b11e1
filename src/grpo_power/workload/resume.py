"""Resuming a run after a preemption, a timeout, a requeue or a kill.

Checkpoints are the trainer's own (transformers: model, optimizer, scheduler, RNG and trainer
state) in ``<run>/trainer/checkpoint-<step>``, saved every ``workload.checkpoint_every_steps``
steps and when a stop signal arrives. A checkpoint folder is written in place, so a kill can cut
it short; only once it is complete does the hook write ``resume.json`` (atomically): the step,
the checkpoint's name and the hook's own state (tokens so far, controller state, actuator
values). A new attempt trusts nothing else.

A new attempt (:func:`start_or_resume`) seals the journals the last one left (into the rows of
earlier attempts, :mod:`grpo_power.journal`), drops the step rows after the resume point (those
steps are redone, so each step appears once), records a lost attempt in the manifest and
continues the trace's clock and energy counters. The trace, step log and manifest appear under
their own names only when the run completes.

A completed run also keeps hard links to those three files in ``<run>/.completed/``
(:meth:`RunPaths.keep_completed`). Snakemake removes a job's outputs before it reruns the job, and
it reruns every job a stopped workflow was waiting for; a run that completed while no workflow
waited for it would lose its rows. The submitter that collects it puts them back
(:meth:`RunPaths.restore_completed`, called by :mod:`grpo_power.launch.batch`).

Stop signals (:class:`StopSignals`): SIGTERM (``scontrol requeue``, ``scancel``, preemption
without a user signal), SIGUSR1 and SIGUSR2 (submitit's timeout and preemption signal) ask the
run to stop at the end of its current step, after a checkpoint. The command then exits with
:data:`EXIT_INTERRUPTED`; the same command resumes it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pyarrow.parquet as pq

from grpo_power.atomic import write_json_atomic
from grpo_power.journal import earlier_path, journal_path, seal_journal
from grpo_power.layout import RUN
from grpo_power.signal_handlers import handling
from grpo_power.telemetry.steplog import trim_step_log
from grpo_power.workload.manifest import RunManifest, unfinished_path

EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: stopped by a signal with its state saved; rerun to resume


class RunStopped(Exception):
    """A run stopped by a stop signal, its checkpoint saved, inside a command that runs several
    in its own process (a calibration's candidates, a sweep's runs): the command stops with it,
    before it reads the unfinished run as a result, and exits with :data:`EXIT_INTERRUPTED`."""


@dataclass(frozen=True)
class RunPaths:
    """The files of one run folder."""

    folder: Path

    @property
    def trace(self) -> Path:
        return self.folder / RUN.trace

    @property
    def steps(self) -> Path:
        return self.folder / RUN.steps

    @property
    def manifest(self) -> Path:
        return self.folder / RUN.manifest

    @property
    def log_history(self) -> Path:
        """The trainer's logs: TRL's metrics and the power/* entries, one dict per log."""
        return self.folder / "log_history.json"

    @property
    def checkpoints(self) -> Path:
        """The trainer's output folder, where its ``checkpoint-<step>`` folders go."""
        return self.folder / "trainer"

    @property
    def resume(self) -> Path:
        return self.folder / "resume.json"

    @property
    def completed_copy(self) -> Path:
        """The folder of hard links to the completed run's trace, step log and manifest."""
        return self.folder / ".completed"

    def completed_manifest(self, copy: bool = False) -> dict[str, Any] | None:
        """The manifest of the completed run in this folder (None: it holds no completed run);
        with ``copy``, the one in :attr:`completed_copy` stands in for a removed manifest."""
        sources = [self.manifest] + ([self.completed_copy / RUN.manifest] if copy else [])
        for path in sources:
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(data, dict) and data.get("status") == "completed":
                return data
        return None

    def keep_completed(self) -> None:
        """Link the completed run's files into :attr:`completed_copy` (copy them where the file
        system has no hard links), the manifest last. A file removed before it was linked (a
        workflow manager's cleanup in the moment after the run wrote it) leaves no copy."""
        self.discard_completed_copy()
        self.completed_copy.mkdir()
        try:
            for path in (self.trace, self.steps, self.manifest):
                _link_or_copy(path, self.completed_copy / path.name)
        except FileNotFoundError:
            self.discard_completed_copy()

    def discard_completed_copy(self) -> None:
        """Remove :attr:`completed_copy` (a new run of this folder replaces the run it holds)."""
        shutil.rmtree(self.completed_copy, ignore_errors=True)

    def restore_completed(self) -> dict[str, Any] | None:
        """Link the completed run's files back from :attr:`completed_copy` where they were removed,
        the manifest last; return the run's manifest (None: no whole copy, nothing changed)."""
        manifest = self.completed_manifest(copy=True)
        sources = [self.completed_copy / p.name for p in (self.trace, self.steps, self.manifest)]
        if manifest is None or not all(source.is_file() for source in sources):
            return None
        for source in sources:
            target = self.folder / source.name
            if not target.exists():
                _link_or_copy(source, target)
        return manifest

    def clear(self) -> None:
        """Remove what an earlier run left in the folder (its submitit logs stay)."""
        for path in (self.trace, self.steps):
            for leftover in (path, journal_path(path), earlier_path(path)):
                leftover.unlink(missing_ok=True)
        self.manifest.unlink(missing_ok=True)
        self.log_history.unlink(missing_ok=True)
        unfinished_path(self.manifest).unlink(missing_ok=True)
        self.discard_completed_copy()
        self.remove_checkpoints()

    def remove_checkpoints(self) -> None:
        """Remove the resume point and the checkpoints (a completed run needs neither)."""
        self.resume.unlink(missing_ok=True)
        shutil.rmtree(self.checkpoints, ignore_errors=True)


def _link_or_copy(source: Path, target: Path) -> None:
    """A hard link ``target`` to ``source``, or a copy where the file system refuses links."""
    try:
        os.link(source, target)
    except FileNotFoundError:
        raise  # nothing to copy either
    except OSError:  # a file system without hard links
        shutil.copy2(source, target)


@dataclass(frozen=True)
class ResumePoint:
    """The last complete checkpoint of a run: its step, folder name and the hook's state."""

    step: int
    checkpoint: str
    hook: dict[str, Any]

    def save(self, paths: RunPaths) -> None:
        write_json_atomic(paths.resume, asdict(self))

    @classmethod
    def load(cls, paths: RunPaths) -> ResumePoint | None:
        """The resume point of a run folder (None: none was saved).

        Raises:
            ValueError: the file is unreadable or names a checkpoint that is not there.
        """
        if not paths.resume.exists():
            return None
        try:
            point = cls(**json.loads(paths.resume.read_text()))
        except (OSError, json.JSONDecodeError, TypeError) as error:
            raise ValueError(
                f"{paths.resume}: not a resume point (expected step, checkpoint and hook: {error})"
            ) from None
        if not (paths.checkpoints / point.checkpoint).is_dir():
            raise ValueError(
                f"{paths.resume}: names checkpoint {point.checkpoint!r}, which is not in "
                f"{paths.checkpoints}"
            )
        return point


class StopSignals:
    """While entered, SIGTERM, SIGUSR1 and SIGUSR2 ask the run to stop after its current step.

    Handlers are installed only in the main thread (Python allows no other); elsewhere the
    object records nothing. The first signal is kept in :attr:`received`; one entered inside
    another (a run inside a calibration's loop) starts with what the outer one received (a
    signal that came while the run loaded its model stops it after its first step).
    """

    SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)

    def __init__(self) -> None:
        self.received: str | None = None
        self._installed = ExitStack()

    def __enter__(self) -> StopSignals:
        outer = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
        if isinstance(outer, StopSignals):
            self.received = outer.received
        self._installed.enter_context(handling(self.SIGNALS, self._handle))
        return self

    def __exit__(self, *exc: object) -> None:
        self._installed.close()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = self.received or signal.Signals(signum).name

    def check(self, label: str) -> None:
        """Between the runs of a command that runs several in its own process: raise
        :class:`RunStopped`, naming ``label`` (the run not started), once a signal came (one
        that came during a run reaches that run's own handlers and result instead)."""
        if self.received is not None:
            raise RunStopped(
                f"{label}: stopped by {self.received} before it started; run the same command "
                "to go on"
            )


@dataclass(frozen=True)
class RunStart:
    """Where an attempt starts: the manifest it records into and what it resumes."""

    manifest: RunManifest
    resume: ResumePoint | None
    steps_redone: list[int]  # step rows of the last attempt dropped, to be run again
    trace_end_s: float | None  # the trace's last sample time so far (None: no samples)
    energy_j: dict[int, float]  # each GPU's energy counter at the end of the earlier attempts
    completed: bool  # the folder already holds this run, completed


def _trace_end(paths: RunPaths) -> tuple[float | None, dict[int, float]]:
    """The last sample time and each GPU's last energy counter value of the earlier attempts
    (after :func:`seal_journal`)."""
    earlier = earlier_path(paths.trace)
    if not earlier.exists():
        return None, {}
    samples = pq.read_table(earlier, columns=["t", "gpu", "energy_j"]).to_pandas()
    if samples.empty:
        return None, {}
    energy = samples.dropna(subset=["energy_j"]).groupby("gpu")["energy_j"].max()
    return float(samples["t"].max()), {int(gpu): float(j) for gpu, j in energy.items()}


def another_run(folder: Path, difference: str) -> str:
    """The one-line refusal of a run folder that holds another run."""
    return (
        f"{folder}: holds another run ({difference}); pass --fresh to discard it or choose "
        "another --out"
    )


def start_or_resume(
    paths: RunPaths, new: RunManifest, fresh: bool, replace_other: bool = False
) -> RunStart:
    """Prepare the run folder for an attempt of the run ``new`` describes.

    An empty folder, or ``fresh``, starts the run from scratch (earlier files are removed). A
    folder holding an unfinished attempt of the same run resumes it; one holding the same run,
    completed, needs nothing; one holding another run is refused, or with ``replace_other``
    (what the workflow's run rule asks: its folder is its output) discarded with a note.

    Raises:
        ValueError: the folder holds another run (the message names the first field that
            differs), or its manifest or resume point is unreadable.
    """
    old = None if fresh else RunManifest.read(paths.manifest)
    difference = None if old is None else old.same_run(new)
    if difference and replace_other:
        print(
            f"note: {paths.folder}: held another run ({difference}); discarded it "
            "(--replace-other)",
            file=sys.stderr,
        )
    elif difference:
        raise ValueError(another_run(paths.folder, difference))
    if old is None or difference:
        paths.clear()
        return RunStart(new, None, [], None, {}, completed=False)
    if old.data["status"] == "completed":
        paths.remove_checkpoints()  # in case the last attempt was killed before it did
        return RunStart(old, None, [], None, {}, completed=True)
    point = ResumePoint.load(paths)
    if paths.checkpoints.exists():  # only the resume point's checkpoint is known complete
        for folder in paths.checkpoints.glob("checkpoint-*"):
            if point is None or folder.name != point.checkpoint:
                shutil.rmtree(folder)
    seal_journal(paths.trace, key="t")
    redone = trim_step_log(paths.steps, point.step if point else 0)
    trace_end_s, energy_j = _trace_end(paths)
    old.mark_lost_attempt(t_end_s=trace_end_s)
    return RunStart(old, point, redone, trace_end_s, energy_j, completed=False)
