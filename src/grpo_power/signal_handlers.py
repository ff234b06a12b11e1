"""Signal handlers installed for a block of code: the recorder passing a stop on to the command
it records, the launcher passing it on to its accelerate processes, the batch waiter stopping,
and a SIGTERM that unwinds the command line's commands (their temporary files removed)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType

Handler = Callable[[int, FrameType | None], None]


@contextmanager
def handling(signums: Iterable[int], handler: Handler) -> Iterator[None]:
    """While entered, ``handler`` handles the signals ``signums`` in place of the process's
    own handlers, which are put back on exit; off the main thread (where Python allows no
    handler) the process keeps its own."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, restored in previous.items():
            signal.signal(signum, restored)


EXIT_TERMINATED = 128 + signal.SIGTERM  # what a shell reports for a process SIGTERM ended


def _exit_terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(EXIT_TERMINATED)


@contextmanager
def exiting_on_sigterm() -> Iterator[None]:
    """While entered, a SIGTERM (Slurm's ``scancel``, Snakemake stopping its jobs, ``kill``)
    raises ``SystemExit(143)`` where the process had the default action, so ``finally`` blocks
    and context managers run: a folder or file built aside (``grpo_power.atomic``) is removed
    instead of left beside its final name. A handler of the process's own (a run's checkpoint
    on SIGTERM) is left in place, and blocks that install their own (:func:`handling`) still
    do."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    with handling([signal.SIGTERM], _exit_terminated):
        yield
