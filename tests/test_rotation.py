"""Rotated logs: the parts logrotate leaves of one nvidia-smi or dmon log (``smi.csv``,
``smi.csv.1``, ``smi.csv.2.gz``; ``dateext`` names; a live file whose header was rotated away
and whose start is a hole of NUL bytes) are read as one log, by the planner and by
``telemetry import smi.csv*``, giving the trace the unsplit log gives."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from grpo_power.cli import app
from grpo_power.telemetry.logrows import log_stem, log_suffix, rotated_name
from grpo_power.telemetry.rotation import rotation_groups
from grpo_power.telemetry.store import read_trace
from tests.conftest import DATA

HEADER = "timestamp, index, name, power.draw [W], power.default_limit [W]"


def _log_lines(rows: int, start: str = "2026-11-30 23:58:00") -> list[str]:
    """An nvidia-smi log's rows (two A100s, every 0.5 s), each GPU's power changing per row."""
    stamps = pd.date_range(start, periods=rows, freq="500ms").strftime("%Y/%m/%d %H:%M:%S.%f")
    return [
        f"{s[:-3]}, {g}, NVIDIA A100-SXM4-80GB, {100 + (7 * i + 90 * g) % 300:.2f} W, 400.00 W"
        for i, s in enumerate(stamps)
        for g in (0, 1)
    ]


def _write(path: Path, lines: list[str], header: bool = False, hole: int = 0) -> None:
    """Write ``lines`` (after the header where ``header``; after ``hole`` NUL bytes, as a
    copytruncate rotation leaves them), gzip-compressed where the name ends in .gz."""
    data = b"\0" * hole + "".join(f"{line}\n" for line in ([HEADER] * header + lines)).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def _import(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.output


def _frame(path: Path) -> pd.DataFrame:
    return read_trace(path).frame[["t", "gpu", "power_w"]]


def test_rotated_names_are_told_apart_from_other_logs() -> None:
    parts = {
        "smi.csv.1": ("smi.csv", 1, None),
        "smi.csv.12.gz": ("smi.csv", 12, None),
        "power.log.3.xz": ("power.log", 3, None),
        "smi.csv-20261201": ("smi.csv", None, "20261201"),
        "smi.csv-2026-12-01-1764547200.bz2": ("smi.csv", None, "202612011764547200"),
    }
    for name, told in parts.items():
        assert rotated_name(Path(name)) == told, name
        assert (log_stem(Path(name)), log_suffix(Path(name))) == (
            Path(told[0]).stem,
            Path(told[0]).suffix,
        )
    for name in ("smi.csv", "smi.csv.gz", "node.1.csv", "run.2", "trace.parquet", "a.json.1"):
        assert rotated_name(Path(name)) is None, name
    # oldest first: dated parts by date, numbered from the largest, the live file last
    names = ["smi.csv", "smi.csv.1", "smi.csv.10.gz", "smi.csv.2", "other.csv", "smi.csv-20261130"]
    groups = rotation_groups([Path(n) for n in names])
    assert [[p.name for p in g] for g in groups] == [
        ["smi.csv-20261130", "smi.csv.10.gz", "smi.csv.2", "smi.csv.1", "smi.csv"],
        ["other.csv"],
    ]


def test_the_planner_reads_a_rotated_log_as_the_unsplit_log(tmp_path: Path) -> None:
    """copytruncate: only the oldest part kept the header, the live file starts with a hole;
    dateext with a restarted logger: every part has its header. Each node is one trace,
    sample for sample the unsplit log's, and nothing is skipped."""
    lines = _log_lines(400)
    whole = tmp_path / "whole" / "smi.csv"
    _write(whole, lines, header=True)
    folder = tmp_path / "traces"
    cuts = [0, 90, 200, 330, 800]  # row lines of smi.csv.3.gz, .2, .1 and the live file
    names = ["smi.csv.3.gz", "smi.csv.2", "smi.csv.1", "smi.csv"]
    for i, name in enumerate(names):
        hole = 4096 if name == "smi.csv" else 0
        _write(folder / "node1" / name, lines[cuts[i] : cuts[i + 1]], header=i == 0, hole=hole)
    for i, name in enumerate(["smi.csv-20261130", "smi.csv-20261201.gz", "smi.csv"]):
        _write(folder / "node2" / name, lines[300 * i : 300 * (i + 1)], header=True)
    (folder / "node3").mkdir()
    (folder / "node3" / "smi.csv").write_text("")  # truncated just now, with no rotated part

    code, output = _import(["planner", "import", str(folder), "--out", str(tmp_path / "out")])
    assert code == 0, output
    code, output = _import(["planner", "import", str(whole.parent), "--out", str(tmp_path / "w")])
    assert code == 0, output
    index = pd.read_csv(tmp_path / "out" / "index.csv").set_index("key")
    assert index.loc[["node1/smi", "node2/smi"], "status"].tolist() == ["imported", "imported"]
    assert index.loc["node3/smi", "status"] == "skipped"  # an empty file: no trace
    expected = _frame(tmp_path / "w" / "smi.parquet")
    for node in ("node1", "node2"):
        got = _frame(tmp_path / "out" / node / "smi.parquet")
        pd.testing.assert_frame_equal(got, expected)
        metadata = read_trace(tmp_path / "out" / node / "smi.parquet").metadata
        assert (
            metadata.start_unix_s
            == read_trace(tmp_path / "w" / "smi.parquet").metadata.start_unix_s
        )
    notes = index.loc["node1/smi", "notes"]
    assert "lines 1-91 smi.csv.3.gz, 92-201 smi.csv.2, 202-331 smi.csv.1, 332-801 smi.csv" in notes
    assert "NUL bytes before the first line of smi.csv dropped" in notes
    metadata = read_trace(tmp_path / "out" / "node1" / "smi.parquet").metadata
    assert [Path(p).name for p in (metadata.model_extra or {})["rotated_parts"]] == names


def test_a_live_file_alone_names_its_rotated_parts(tmp_path: Path) -> None:
    """`telemetry import smi.csv*` reads the parts as one; the header-less live file alone is
    refused, naming the command that reads them all; two logs are refused."""
    lines = _log_lines(60)
    _write(tmp_path / "smi.csv.1", lines[:50], header=True)
    _write(tmp_path / "smi.csv", lines[50:], hole=100)
    _write(tmp_path / "whole.csv", lines, header=True)
    parts = [str(tmp_path / "smi.csv"), str(tmp_path / "smi.csv.1")]  # as a shell's glob
    code, output = _import(["telemetry", "import", *parts])
    assert code == 0, output
    code, output = _import(["telemetry", "import", str(tmp_path / "whole.csv")])
    assert code == 0, output
    pd.testing.assert_frame_equal(
        _frame(tmp_path / "smi.parquet"), _frame(tmp_path / "whole.parquet")
    )

    (tmp_path / "smi.parquet").unlink()
    code, output = _import(["telemetry", "import", parts[0]])
    errors = [line for line in output.splitlines() if line.startswith("error")]
    assert code == 2 and len(errors) == 1, output
    assert "got bytes that are not text (byte 0)" in errors[0]  # the hole, alone
    assert f"`grpo-power telemetry import {parts[1]} {parts[0]}`" in errors[0]
    assert not (tmp_path / "smi.parquet").exists()
    code, output = _import(["telemetry", "import", parts[0], str(tmp_path / "whole.csv")])
    assert code == 2 and "expected one log, or the parts of one rotated log" in output


@pytest.mark.parametrize("fault", ["order", "header"])
def test_parts_that_are_not_one_log_are_refused_naming_the_part(tmp_path: Path, fault: str) -> None:
    """Parts whose names put them out of time order (time steps back), or whose headers
    differ, are refused by the planner in one line naming the part and its lines."""
    lines = _log_lines(40)
    folder = tmp_path / "traces"
    if fault == "order":  # the newer rows in the part whose name says older
        _write(folder / "smi.csv.1", lines[40:], header=True)
        _write(folder / "smi.csv", lines[:40])
    else:
        _write(folder / "smi.csv.1", lines[:40], header=True)
        (folder / "smi.csv").write_text(
            "timestamp, index, power.draw [W]\n"
            + "".join(f"{line.rsplit(',', 3)[0]}, 250 W\n" for line in lines[40:])
        )
    code, output = _import(["planner", "import", str(folder), "--out", str(tmp_path / "out")])
    errors = [line for line in output.splitlines() if line.startswith("error")]
    assert code == 2 and len(errors) == 1, output
    if fault == "order":
        assert "timestamp at line 42" in errors[0]
        assert "(the rotated log's lines 1-41 smi.csv.1, 42-81 smi.csv)" in errors[0]
    else:
        assert errors[0].startswith(f"error: {folder / 'smi.csv'}: line 1: expected the header")
    assert not (tmp_path / "out" / "index.csv").exists()


def test_a_rotated_log_without_any_header_is_skipped_with_why(tmp_path: Path) -> None:
    """The oldest part, the one with the header, was deleted by logrotate's `rotate N`: the
    columns cannot be told apart, and the log is skipped saying so (one row, not one a part)."""
    lines = _log_lines(30)
    folder = tmp_path / "traces"
    _write(folder / "smi.csv.2.gz", lines[:20])
    _write(folder / "smi.csv.1", lines[20:40])
    _write(folder / "smi.csv", lines[40:], hole=10)
    (folder / "other").mkdir()
    (folder / "other" / "node.csv").write_bytes((DATA / "nvidia-smi-a100.csv").read_bytes())
    code, output = _import(["planner", "import", str(folder), "--out", str(tmp_path / "out")])
    assert code == 0, output
    index = pd.read_csv(tmp_path / "out" / "index.csv").set_index("key")
    assert index.loc["smi", "status"] == "skipped"
    assert index.loc["smi", "reason"].startswith(
        "a rotated log of 3 parts (smi.csv.2.gz, smi.csv.1, smi.csv): smi.csv.2.gz: no header line"
    )
    assert np.count_nonzero(index.index == "smi") == 1
