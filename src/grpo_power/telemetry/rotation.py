"""Rotated logs: the files logrotate (or a logging handler) keeps one log in, read as one log.

logrotate renames a log ``smi.csv`` to ``smi.csv.1`` (the older ones on to ``.2``, ``.3``,
compressed as ``.2.gz`` with ``compress``) or, with ``dateext``, to ``smi.csv-20261201``
(:func:`grpo_power.telemetry.logrows.rotated_name` tells these names). A logger that keeps
running, as ``nvidia-smi --query-gpu=... -lms 100`` does, writes its header line once, when it
starts: after a ``copytruncate`` rotation the live file holds rows only, and where the logger
did not open it for appending (a shell's ``>``) it starts with a hole of NUL bytes as long as
the part copied away. Each part alone is then a log without its header, or a fraction of the
GPUs' time; read as one, they are the node's trace.

:func:`rotation_groups` groups a folder's files into logs (the planner,
:mod:`grpo_power.planner.discover`; ``grpo-power telemetry import`` given the parts);
:class:`RotatedLog` is one log's parts, oldest first, which
:func:`grpo_power.telemetry.importers.import_log` reads as one text: every part's rows in
order, under the header of the parts that have one (one header for all, or the parts are
refused), with the NUL bytes a rotation left before a part's first line dropped. Errors name
the line in that text and which part holds it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from grpo_power.telemetry.formats import log_format
from grpo_power.telemetry.logrows import (
    ImportError_,
    header_is_data,
    is_dmon_header,
    read_log_text,
    rotated_name,
)

# The importer formats whose logs a logger appends line by line, and so can be rotated
ROTATED_FORMATS = ("nvidia-smi", "nvidia-smi-dmon", "dcgm")
T = TypeVar("T")


def _age(path: Path) -> tuple[int, str, int]:
    """A part's place among its log's parts, oldest first: dated parts by date, then numbered
    ones from the largest number, then the live file."""
    rotated = rotated_name(path)
    if rotated is None:
        return (2, "", 0)
    _, number, date = rotated
    return (0, date or "", 0) if number is None else (1, "", -number)


def rotation_groups(paths: Iterable[Path]) -> list[tuple[Path, ...]]:
    """``paths`` grouped into logs: each rotated part with the other parts of its log in the
    same folder (the live file of the log's name, and its other rotated parts), oldest first;
    any other file alone. Groups are in the order of their first file in ``paths``."""
    groups: dict[tuple[Path, str], list[Path]] = {}
    for path in paths:
        rotated = rotated_name(path)
        groups.setdefault((path.parent, rotated[0] if rotated else path.name), []).append(path)
    return [tuple(sorted(parts, key=_age)) for parts in groups.values()]


def one_log(paths: list[Path]) -> tuple[Path, ...]:
    """The files a user gave as one log (``telemetry import smi.csv*``): one file, or the parts
    of one rotated log, oldest first.

    Raises:
        ValueError: the files are of several logs (told by their names).
    """
    groups = rotation_groups(dict.fromkeys(paths))
    if len(groups) > 1:
        shown = ", ".join(str(parts[-1]) for parts in groups[:3])
        raise ValueError(
            f"{paths[0]}: expected one log, or the parts of one rotated log (smi.csv, "
            f"smi.csv.1, ...), got {len(groups)} logs ({shown}{', ...' * (len(groups) > 3)}): "
            "import each on its own"
        )
    return groups[0]


def rotated_parts_beside(path: Path) -> tuple[Path, ...]:
    """The parts of the rotated log ``path`` is a part of, found in its folder, oldest first
    (``path`` alone when it is none)."""
    try:
        files = sorted(p for p in path.parent.iterdir() if p.is_file())
    except OSError:
        return (path,)
    return next((parts for parts in rotation_groups(files) if path in parts), (path,))


def is_rotated(parts: tuple[Path, ...]) -> bool:
    """Whether a group of :func:`rotation_groups` is a rotated log (not one plain file)."""
    return len(parts) > 1 or rotated_name(parts[0]) is not None


def _tokens(line: str) -> list[str]:
    """A header line's names, for comparing headers (separators, blanks and ``#`` ignored)."""
    return [c for c in re.split(r"[,\s]+", line.strip().lstrip("#")) if c]


def _is_header(line: str) -> bool:
    """Whether a log's first line names its columns (a CSV header, an ``nvidia-smi dmon``
    header) rather than holding a sample."""
    return is_dmon_header(line) or ("," in line and not header_is_data(line.split(",")))


def _first_line(text: str) -> str:
    """A text's first line that is not blank ("" for a blank text), found without splitting
    the whole text (a part may hold millions of lines)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return text[start:end]
        start = end + 1
    return ""


def rotated_format(parts: tuple[Path, ...]) -> tuple[str | None, str]:
    """``(format, "")`` of a rotated log (its ``parts`` oldest first), told by its parts that
    tell one (:func:`grpo_power.telemetry.formats.log_format`: a part whose header was rotated
    away tells none), or ``(None, why it is no log read across parts)``.

    Raises:
        ValueError: a part cannot be read, or its parts are logs of different formats.
    """
    told = [(part, *log_format(part)) for part in parts]
    kinds = sorted({kind for _, kind, _ in told if kind is not None})
    names = ", ".join(part.name for part in parts)
    if len(kinds) > 1:
        raise ValueError(
            f"{parts[-1]}: the parts of one rotated log ({names}) are logs of different formats "
            f"({', '.join(kinds)}); expected one format: move the parts of another log away"
        )
    whole = f"a rotated log of {len(parts)} part{'s' * (len(parts) > 1)} ({names})"
    if kinds and kinds[0] not in ROTATED_FORMATS:
        return None, (
            f"{whole} of {kinds[0]} files: only {', '.join(ROTATED_FORMATS)} logs are read "
            "across rotated parts; give each part a name of its own"
        )
    if kinds:
        return kinds[0], ""
    part, _, reason = next((t for t in told if t[0].stat().st_size), told[0])
    return None, f"{whole}: {part.name}: {reason}"


@dataclass
class RotatedLog:
    """One log kept by rotation in ``parts`` (oldest first, the live file last), read as one
    text by :meth:`read_text`; ``notes`` says what reading it inferred, and ``line_parts``
    which lines of that text each part holds (errors name a line of it: :func:`naming_parts`)."""

    parts: tuple[Path, ...]
    notes: list[str] = field(default_factory=list)
    line_parts: str = ""  # "lines 1-130 smi.csv.2, 131-260 smi.csv.1.gz, ...", once read

    @property
    def path(self) -> Path:
        """The newest part (the live file where there is one): where the log is."""
        return self.parts[-1]

    def __str__(self) -> str:
        return f"{self.path} (rotated, {len(self.parts)} part{'s' * (len(self.parts) > 1)})"

    def read_text(self, expected: str) -> str:
        """Every part's rows in order under the log's header: the first header line of the
        parts, put first where the oldest part has none (it was rotated away); a later part's
        own header (the logger restarted) must be the same. Empty parts (a live file just
        truncated) are passed over; the newest part ends as it ends (a line being written has
        no newline yet, which the reader tells by).

        Raises:
            ImportError_: a part cannot be read (:func:`read_log_text`), or two parts have
                different headers.
        """
        read = [(part, read_log_text(part, expected, leading_nuls=True)) for part in self.parts]
        holes = [part.name for part, text in read if text.startswith("\x00")]
        texts = [(part, text.lstrip("\x00")) for part, text in read]
        texts = [(part, text) for part, text in texts if text.strip()]
        firsts = [_first_line(text) for _, text in texts]
        headers = [(part, f) for (part, _), f in zip(texts, firsts, strict=True) if _is_header(f)]
        self.notes, spans, chunks, line = [], [], [], 1
        borrowed = headers[0] if headers and texts[0][0] != headers[0][0] else None
        if borrowed is not None:  # the oldest part's header was rotated away
            chunks.append(borrowed[1].rstrip("\r\n") + "\n")
            spans.append(f"1 the header of {borrowed[0].name}")
            line = 2
        for (part, text), first in zip(texts, firsts, strict=True):
            if headers and _is_header(first) and _tokens(first) != _tokens(headers[0][1]):
                raise ImportError_(
                    f"{part}: line 1: expected the header of the log's other parts "
                    f"({headers[0][0].name}: {headers[0][1].strip()[:80]!r}), got "
                    f"{first.strip()[:80]!r}; rotated parts are one log only with one header: "
                    "import them apart"
                )
            if part != texts[-1][0] and not text.endswith("\n"):  # the newest may end mid-line
                text += "\n"
            count = text.count("\n") + (not text.endswith("\n"))
            spans.append(f"{line}-{line + count - 1} {part.name}")
            chunks.append(text)
            line += count
        self.line_parts = "lines " + ", ".join(spans)
        self.notes.append(f"{self}: read as one log, oldest first: {self.line_parts}")
        if borrowed is not None:
            self.notes.append(
                f"{self}: {texts[0][0].name} has no header line (a logger writes it once, when it "
                f"starts, and rotation moved it on): read under the header of {borrowed[0].name}"
            )
        if holes:
            self.notes.append(
                f"{self}: NUL bytes before the first line of {', '.join(holes)} dropped (the "
                "hole a copytruncate rotation leaves when the logger does not append)"
            )
        return "".join(chunks)


def naming_parts(read: Callable[..., T]) -> Callable[..., T]:
    """``read`` (whose first argument is a log, a :class:`RotatedLog` too) with each
    :class:`ImportError_` it raises for a rotated log that names a line saying which part holds
    which lines."""

    @functools.wraps(read)
    def reader(log: Any, *args: Any, **kwargs: Any) -> T:
        try:
            return read(log, *args, **kwargs)
        except ImportError_ as error:
            if not isinstance(log, RotatedLog) or not re.search(r"\bline", str(error)):
                raise
            raise ImportError_(f"{error} (the rotated log's {log.line_parts})") from None

    return reader
