"""Atomic writers, shared by every stage: each output is written to a temporary name beside it
and renamed, so a reader (or a job killed half-way) never sees a half-written file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

T = TypeVar("T")


def write_atomic(path: Path | str, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` then rename ``tmp`` onto ``path``; remove ``tmp`` on failure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _building_folder(folder: Path) -> Path:
    """A new hidden folder beside ``folder`` to build it in, with the permissions a plain
    ``mkdir`` gives under the process's umask (``mkdtemp``'s are 0700: the finished folder, a
    planner's traces or the shared model cache, was unreadable to anyone else)."""
    building = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    umask = os.umask(0)
    os.umask(umask)
    building.chmod(0o777 & ~umask)
    return building


def write_folder_atomic(folder: Path | str, build: Callable[[Path], Any]) -> Path:
    """Call ``build(tmp_folder)`` then rename it onto ``folder``; on failure remove it. When
    another process renamed its own build there first, that one stays and this one goes."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = _building_folder(folder)
    try:
        build(building)
        try:
            os.replace(building, folder)
        except OSError:  # the folder exists (and is not empty): another process built it first
            shutil.rmtree(building, ignore_errors=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return folder


def replace_folder_atomic(folder: Path | str, build: Callable[[Path], T]) -> T:
    """Call ``build(tmp_folder)`` then put it in the place of ``folder`` (an earlier one is
    moved aside and removed, so no file of it is left among the new ones); on failure remove
    it, and the folders above it this call made, so that a refused input leaves nothing.
    Returns what ``build`` returned."""
    folder = Path(folder)
    made = [p for p in (folder.parent, *folder.parent.parents) if not p.exists()]
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = _building_folder(folder)
    try:
        built = build(building)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        for empty in made:  # deepest first
            if empty.exists() and not any(empty.iterdir()):
                empty.rmdir()
        raise
    old = folder.with_name(f"{building.name}-old")
    if folder.exists():
        os.replace(folder, old)
    os.replace(building, folder)
    shutil.rmtree(old, ignore_errors=True)
    return built


def merge_folder_atomic(folder: Path | str, build: Callable[[Path], T]) -> T:
    """Call ``build(tmp_folder)`` then move every file it wrote to the same place under
    ``folder``, those in subfolders first (a page at the top is replaced after what it shows);
    the files of ``folder`` that ``build`` did not write stay. On failure remove the build, so
    that nothing of it reaches ``folder``. Returns what ``build`` returned."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = _building_folder(folder)
    try:
        built = build(building)
        files = [p for p in building.rglob("*") if p.is_file()]
        for path in sorted(files, key=lambda p: (-len(p.relative_to(building).parts), str(p))):
            target = folder / path.relative_to(building)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return built


def write_text_atomic(path: Path | str, text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    return write_atomic(path, lambda tmp: tmp.write_text(text))


def write_json_atomic(path: Path | str, data: Any) -> Path:
    """Write ``data`` as indented JSON (NaN written as null) atomically."""
    text = json.dumps(_jsonable(data), indent=2, allow_nan=False) + "\n"
    return write_text_atomic(path, text)


def write_csv_atomic(path: Path | str, frame: pd.DataFrame) -> Path:
    """Write a table as CSV atomically (NaN written as an empty field)."""
    return write_atomic(path, lambda tmp: frame.to_csv(tmp, index=False, float_format="%.10g"))


def write_parquet_atomic(
    path: Path | str,
    table: pd.DataFrame | pa.Table,
    metadata: dict[bytes, bytes] | None = None,
    row_group_size: int = 65_536,
) -> Path:
    """Write a table as Parquet (zstd) atomically, with optional schema metadata."""
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    return write_atomic(
        path,
        lambda tmp: pq.write_table(table, tmp, compression="zstd", row_group_size=row_group_size),
    )


def _jsonable(value: Any) -> Any:
    """Replace NaN/inf floats by None and numpy scalars by Python ones, recursively."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return None
    if isinstance(value, Path):
        return str(value)
    return value
