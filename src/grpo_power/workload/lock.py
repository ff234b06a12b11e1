"""The lock of a run folder: one attempt writes a run at a time.

An attempt holds an exclusive ``flock`` on ``<run>/.lock`` from before it touches the folder
until it ends, then removes the file; the lock file says who holds it (host, process, Slurm
job). The kernel releases the lock when the process ends, however it ends, so a killed attempt
never leaves a stale lock (a file left by a kill is taken over by the next attempt).
On a shared file system (NFS) Linux turns ``flock`` into a lock every node sees.

A second attempt, from another process, another node or a second Slurm job, is refused with a
one-line error naming the holder (:class:`RunFolderBusy`). The workflow's waiting command uses
:func:`lock_holder` to wait until a cancelled job has let go before it submits a new one.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO, Any

LOCK_NAME = ".lock"


class RunFolderBusy(ValueError):
    """Another attempt holds the run folder's lock (the message names it)."""


def _describe(holder: dict[str, Any]) -> str:
    job = f", Slurm job {holder['slurm_job_id']}" if holder.get("slurm_job_id") else ""
    return f"host {holder.get('host', '?')}, pid {holder.get('pid', '?')}{job}"


class RunLock:
    """An exclusive lock on a run folder, held while entered.

    Raises:
        RunFolderBusy: on entry, when another attempt holds it.
    """

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / LOCK_NAME
        self._file: IO[str] | None = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            handle = self.path.open("a+")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read(handle)
                handle.close()
                raise RunFolderBusy(
                    f"{self.path.parent}: another attempt is writing this run "
                    f"({_describe(holder)}); wait for it to end or cancel it, then run the same "
                    "command again to resume"
                ) from None
            # The holder before us removes the file as it lets go: a lock on a removed file
            # is no lock, so take it again on the file that is there now.
            if _same_file(handle, self.path):
                break
            handle.close()
        holder = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "slurm_job_id": _slurm_job_id(),
            "since_unix_s": time.time(),
        }
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(holder))
        handle.flush()
        self._file = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self.path.unlink(missing_ok=True)  # the folder is left as the run left it
            self._file.close()  # closing releases the flock
            self._file = None


def _same_file(handle: IO[str], path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False


def _slurm_job_id() -> str | None:
    array_job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return os.environ.get("SLURM_JOB_ID")


def _read(handle: IO[str]) -> dict[str, Any]:
    handle.seek(0)
    try:
        holder = json.loads(handle.read() or "{}")
    except json.JSONDecodeError:
        return {}
    return holder if isinstance(holder, dict) else {}


def lock_holder(folder: Path) -> dict[str, Any] | None:
    """Who holds the run folder's lock (host, pid, slurm_job_id), or None when nobody does."""
    path = Path(folder) / LOCK_NAME
    if not path.exists():
        return None
    with path.open("r") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(handle)
        return None
