"""Signal handlers installed for a block of code: the recorder passing a stop on to the command
it records, the launcher passing it on to its accelerate processes, the batch waiter stopping."""

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
