"""Paths a user gives: a folder where a file is expected (and the reverse), and the one-line
message of an ``OSError`` (a folder given as a file, permission denied, disk full, ...).

Light on purpose (no pandas, no pyarrow): the command line imports it for every command.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable
from pathlib import Path

_TMP_NAME = re.compile(r"^\.(?P<name>.+)\.\d+\.tmp$")  # grpo_power.atomic's temporary names


def _shown(name: str | Path) -> str:
    """A path as the user knows it: an atomic writer's temporary name becomes the final one."""
    path = Path(name)
    match = _TMP_NAME.match(path.name)
    return str(path.with_name(match["name"])) if match else str(path)


def file_ancestor(path: Path) -> Path | None:
    """The nearest folder of ``path`` that exists as a file (so ``path`` cannot exist)."""
    for parent in path.parents:
        if parent.exists():
            return parent if not parent.is_dir() else None
    return None


def path_problem(path: Path | str, expected: str, meant: Iterable[str] = ()) -> str | None:
    """Why ``path`` cannot be the file expected, or None when it may be.

    ``meant`` are file names a folder given instead usually holds (``trace.parquet`` in a run
    folder): the message names the first one present.
    """
    path = Path(path)
    if path.is_dir():
        inside = [path / name for name in meant if (path / name).exists()]
        hint = f"; did you mean {inside[0]}?" if inside else ""
        return f"{path}: is a folder; expected {expected}{hint}"
    parent = file_ancestor(path)
    if parent is not None:
        return f"{parent}: is a file, not a folder; expected a folder holding {path.name}"
    return None


def output_problem(path: Path | str, kind: str) -> str | None:
    """Why ``path`` cannot be written as an output ``kind`` ("file" or "folder"), or None."""
    path = Path(path)
    if kind == "file" and path.is_dir():
        return f"{path}: is a folder; expected an output file (a path such as {path}/out.parquet)"
    if kind == "folder" and path.exists() and not path.is_dir():
        return f"{path}: is a file; expected an output folder"
    parent = file_ancestor(path)
    if parent is not None:
        return f"{parent}: is a file, not a folder; cannot write {path} inside it"
    existing = next(p for p in (path.absolute(), *path.absolute().parents) if p.exists())
    if existing != path.absolute() and not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing}: permission denied; cannot write {path} inside it"
    return None


_REASONS = {
    errno.EISDIR: "is a folder, expected a file",
    errno.ENOTDIR: "a part of the path is a file, expected a folder",
    errno.EEXIST: "already exists",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "read-only file system",
    errno.ENAMETOOLONG: "file name too long",
    errno.ENOENT: "no such file or folder",
}


def one_line(error: BaseException, limit: int | None = None) -> str:
    """An exception's message on one line (its whitespace runs as single spaces), cut to
    ``limit`` characters; the exception's type where it has no message."""
    return " ".join(str(error).split())[:limit] or type(error).__name__


def os_error_message(error: OSError) -> str:
    """One line for an ``OSError``: the path as given, and what went wrong."""
    name = error.filename2 if error.filename2 is not None else error.filename
    if name is None:
        return one_line(error)
    shown = _shown(name if isinstance(name, str | Path) else str(name))
    if error.errno == errno.ENOTDIR:
        parent = file_ancestor(Path(shown))
        if parent is not None:
            return f"{parent}: is a file, not a folder (needed for {shown})"
    reason = _REASONS.get(error.errno or 0) or error.strerror or type(error).__name__
    return f"{shown}: {reason}"
