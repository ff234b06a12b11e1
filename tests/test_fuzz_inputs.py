"""No traceback, whatever a user gives (issue 14): property tests and a path matrix.

- Hypothesis feeds random bytes, random CSV-like text, truncated copies of valid files and
  random numbers to the importers, the trace readers and the numeric options; every run must
  end in exit 0 or a one-line ``error: ...`` (exit 2), or click's usage error (exit 64), never an
  unhandled exception.
- A matrix drives every subcommand that reads or writes paths with paths that raise ``OSError``
  (a folder given as a file, a path below a file, an output that is an existing file or folder,
  no permission, a full disk): exit 2, one line, nothing written.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from grpo_power.cli import EXIT_DATA, EXIT_USAGE, app
from grpo_power.telemetry.schema import TRACE_COLUMNS, TraceMetadata
from grpo_power.telemetry.store import write_trace
from tests.conftest import DATA, REPO

FAST = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,  # the same examples on every run: a failure is reproducible
)


@contextmanager
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def _config(where: Path) -> Path:
    data = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    data["results_dir"] = str(where / "results")
    path = where / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _trace(where: Path, rows: int = 200) -> Path:
    frame = pd.DataFrame({name: np.full(rows, np.nan) for name in TRACE_COLUMNS})
    frame["t"] = np.arange(rows) * 0.1
    frame["gpu"] = np.zeros(rows, dtype=np.int32)
    frame["power_w"] = 250.0
    meta = TraceMetadata(
        run_id="r", source="nvml", gpu_name="A100", nameplate_w=400.0, sample_period_s=0.1
    )
    return write_trace(where / "trace.parquet", frame, meta)


def invoke(command: list[str]) -> tuple[int, str]:
    """Run a command in-process; fail on an unhandled exception or a malformed message."""
    result = CliRunner().invoke(app, command)
    exception = result.exception
    assert exception is None or isinstance(exception, SystemExit), (
        f"unhandled {exception!r} for {command}"
    )
    message = result.stderr
    assert "Traceback" not in message, message
    assert result.exit_code in (0, EXIT_DATA, EXIT_USAGE), (result.exit_code, message)
    if result.exit_code == EXIT_DATA:
        errors = [line for line in message.splitlines() if not line.startswith("note: ")]
        assert errors and errors[0].startswith("error: "), message
        # one line, or one per bad field of a config file, each starting with the file
        where = errors[0].removeprefix("error: ").split(": ")[0]
        assert all(line.startswith(f"{where}: ") for line in errors[1:]), message
    return result.exit_code, message


# --------------------------------------------------------------------------------------------
# random bytes, random text, truncated files

CSV_ALPHABET = st.sampled_from(list("0123456789.,:-/ WN[A]%e+\n\t;x\ufeff\x00"))
SMI_HEADER = "timestamp, index, power.draw [W], power.default_limit [W]\n"
DCGM_HEADER = "timestamp,gpu,modelName,DCGM_FI_DEV_POWER_USAGE\n"
DMON_HEADER = (
    "#Date       Time        gpu    pwr   pclk\n#YYYYMMDD   HH:MM:SS    Idx      W    MHz\n"
)
GRAFANA_HEADER = 'sep=,\n"Time","GPU 0","DCGM_FI_DEV_POWER_USAGE{gpu=""1"", Hostname=""b""}"\n'
HEADERS = {
    "nvidia-smi": SMI_HEADER,
    "nvidia-smi-dmon": DMON_HEADER,
    "dcgm": DCGM_HEADER,
    "grafana": GRAFANA_HEADER,
}
FORMATS = [*HEADERS, "prometheus", "auto"]


@FAST
@given(
    data=st.binary(max_size=400),
    fmt=st.sampled_from(FORMATS),
    suffix=st.sampled_from([".csv", ".csv.gz", ".json.xz", ".csv.zst"]),
)
def test_random_bytes_to_the_importers(data: bytes, fmt: str, suffix: str) -> None:
    with folder() as where:
        log = where / f"log{suffix}"
        log.write_bytes(data)
        invoke(["telemetry", "import", str(log), "--format", fmt, "--out", str(where / "o.pq")])


@FAST
@given(
    body=st.text(CSV_ALPHABET, max_size=300),
    fmt=st.sampled_from(list(HEADERS)),
)
def test_random_rows_under_a_valid_header(body: str, fmt: str) -> None:
    header = HEADERS[fmt]
    with folder() as where:
        log = where / "log.csv"
        log.write_text(header + body)
        command = ["telemetry", "import", str(log), "--format", fmt, "--nameplate-w", "400"]
        invoke([*command, "--out", str(where / "o.parquet")])


LABEL_VALUES = st.one_of(
    st.sampled_from(["DCGM_FI_DEV_POWER_USAGE", "0", "1", "-1", "x", "NVIDIA A100-SXM4-80GB"]),
    st.text(max_size=4),
    st.integers(-2, 2),
)
LABELS = st.dictionaries(
    st.sampled_from(["__name__", "gpu", "Hostname", "instance", "modelName", "pod"]), LABEL_VALUES
)
PROMETHEUS_SAMPLE = st.one_of(
    st.lists(
        st.one_of(
            st.floats(),
            st.integers(-(10**20), 10**400),
            st.sampled_from(["NaN", "+Inf", "250", "-3", "1e9", "4e2"]),
            st.text(max_size=3),
        ),
        max_size=3,
    ),
    st.none(),
    st.text(max_size=3),
)
PROMETHEUS_SERIES = st.lists(
    st.fixed_dictionaries({"metric": LABELS, "values": st.lists(PROMETHEUS_SAMPLE, max_size=6)}),
    max_size=4,
)
PROMETHEUS_DOCUMENTS = st.one_of(
    PROMETHEUS_SERIES,
    PROMETHEUS_SERIES.map(
        lambda result: {"status": "success", "data": {"resultType": "matrix", "result": result}}
    ),
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.text(max_size=4),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
        max_leaves=8,
    ),
)


@FAST
@given(document=PROMETHEUS_DOCUMENTS)
def test_random_prometheus_results(document: object) -> None:
    """Any JSON, and query results with any labels and samples (missing labels, text, huge
    numbers, NaN and inf): imported, or refused in one line."""
    with folder() as where:
        log = where / "prometheus.json"
        log.write_text(json.dumps(document))
        command = ["telemetry", "import", str(log), "--format", "prometheus"]
        invoke([*command, "--nameplate-w", "400", "--out", str(where / "o.parquet")])


EXPORT_NUMBER = st.one_of(
    st.integers(-(10**20), 10**400), st.floats(allow_nan=False), st.booleans(), st.text(max_size=3)
)
EXPORT_LINES = st.lists(
    st.fixed_dictionaries(
        {
            "metric": LABELS,
            "values": st.lists(EXPORT_NUMBER, max_size=4),
            "timestamps": st.lists(EXPORT_NUMBER, max_size=4),
        }
    ),
    min_size=1,
    max_size=3,
)


@FAST
@given(lines=EXPORT_LINES, tail=st.sampled_from(["", "\n{x", "\n" + "1" * 5000]))
def test_random_victoriametrics_exports(lines: list[dict[str, object]], tail: str) -> None:
    """JSON lines of series with any labels, values and timestamps (text, bools, huge numbers,
    lists of two lengths), and a broken line after them: imported, or refused in one line."""
    with folder() as where:
        log = where / "export.jsonl"
        log.write_text("\n".join(json.dumps(line) for line in lines) + tail)
        command = ["telemetry", "import", str(log), "--nameplate-w", "400"]
        invoke([*command, "--out", str(where / "o.parquet")])


@FAST
@given(data=st.binary(max_size=400), suffix=st.sampled_from([".parquet", ".csv"]))
def test_random_bytes_as_a_trace(data: bytes, suffix: str) -> None:
    with folder() as where:
        trace = where / f"trace{suffix}"
        trace.write_bytes(data)
        invoke(["telemetry", "summary", str(trace), "-c", str(_config(where))])


SAMPLES = st.lists(
    st.tuples(
        st.floats(allow_nan=True, allow_infinity=True, width=64),
        st.integers(min_value=-3, max_value=70_000),
        st.floats(allow_nan=True, allow_infinity=True, width=64),
    ),
    max_size=40,
)


@FAST
@given(
    samples=SAMPLES,
    with_metadata=st.booleans(),
    command=st.sampled_from(["summary", "windows"]),
)
def test_random_samples_in_a_trace(
    samples: list[tuple[float, int, float]], with_metadata: bool, command: str
) -> None:
    """Any t, gpu and power values (NaN, inf, steps back, repeats, milliseconds, ...), with
    or without metadata: read, or refused in one line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with folder() as where:
        config = _config(where)
        columns = list(zip(*samples, strict=True)) if samples else [[], [], []]
        table = pa.table(
            {
                "t": pa.array(columns[0], pa.float64()),
                "gpu": pa.array(columns[1], pa.int32()),
                "power_w": pa.array(columns[2], pa.float64()),
            }
        )
        if with_metadata:
            meta = TraceMetadata(
                run_id="r", source="nvml", gpu_name="A", nameplate_w=400.0, sample_period_s=0.1
            )
            table = table.replace_schema_metadata(meta.to_schema().metadata)
        trace = where / "trace.parquet"
        pq.write_table(table, trace)
        if command == "summary":
            invoke(["telemetry", "summary", str(trace), "-c", str(config)])
        else:
            invoke(["windows", str(trace), "--out", str(where / "w"), "-c", str(config)])


@FAST
@given(data=st.binary(max_size=300))
def test_random_bytes_as_a_config(data: bytes) -> None:
    with folder() as where:
        config = where / "config.yaml"
        config.write_bytes(data)
        missing = str(where / "missing.parquet")
        invoke(["windows", missing, "--out", str(where / "w"), "-c", str(config)])


@FAST
@given(
    which=st.sampled_from(
        [
            "nvidia-smi-a100.csv",
            "nvidia-smi-dmon.log",
            "dcgm-exporter-a100.csv",
            "prometheus-dcgm.json",
            "trace",
            "config",
        ]
    ),
    cut=st.floats(0.0, 1.0),
)
def test_truncated_files(which: str, cut: float) -> None:
    with folder() as where:
        config = _config(where)
        if which == "trace":
            source = _trace(where)
        elif which == "config":
            source = config
        else:
            source = DATA / which
        data = source.read_bytes()
        target = where / f"cut{source.suffix}"
        target.write_bytes(data[: int(len(data) * cut)])
        if which == "trace":
            invoke(["windows", str(target), "--out", str(where / "w"), "-c", str(config)])
        elif which == "config":
            invoke(["telemetry", "summary", str(_trace(where)), "-c", str(target)])
        else:
            fmt = next(f for f in reversed(FORMATS) if which.startswith(f))
            command = ["telemetry", "import", str(target), "--format", fmt]
            invoke([*command, "--nameplate-w", "400", "--out", str(where / "o.parquet")])


# --------------------------------------------------------------------------------------------
# random numbers to every numeric option

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, -1, 1, 1e308, -1e-308, 5e-324, 10**400]),
)
# option -> a command where it is checked, then the command fails fast on a missing file
NUMERIC = {
    "--cap-w": ["controller", "train", "--deployment", "7b", "--authority", "{missing}"],
    "--timesteps": ["controller", "train", "--deployment", "7b", "--authority", "{missing}"],
    "--nameplate-w": ["telemetry", "import", "{log}", "--out", "{dir}/o.parquet"],
    "--period": ["telemetry", "record", "-c", "{missing}", "--", "true"],
    "--steps": ["run", "--arm", "fixed", "--out", "{dir}/r", "-c", "{missing}"],
    "--concurrency": ["run", "--arm", "fixed", "--out", "{dir}/r", "-c", "{missing}"],
    "--max-new-tokens": ["run", "--arm", "fixed", "--out", "{dir}/r", "-c", "{missing}"],
    "--train-micro-batch": ["run", "--arm", "fixed", "--out", "{dir}/r", "-c", "{missing}"],
    "--seed": ["run", "--arm", "fixed", "--out", "{dir}/r", "-c", "{missing}"],
    "--real-sweep-steps": ["identify", "--out", "{dir}/i", "-c", "{missing}"],
}


@settings(FAST, max_examples=40)
@given(option=st.sampled_from(sorted(NUMERIC)), number=NUMBERS)
def test_random_numbers_to_numeric_options(option: str, number: float | int) -> None:
    with folder() as where:
        values = {"missing": str(where / "missing"), "log": str(DATA / "nvidia-smi-a100.csv")}
        values["dir"] = str(where)
        command = [part.format(**values) for part in NUMERIC[option]]
        at = command.index("--") if "--" in command else len(command)
        command[at:at] = [option, str(number)]
        code, message = invoke(command)
        if code == EXIT_DATA and isinstance(number, float) and not np.isfinite(number):
            assert option in message, message  # refused by the option's own check


# --------------------------------------------------------------------------------------------
# a matrix of bad paths over every subcommand

TRAIN = ["controller", "train", "--deployment", "7b"]
# subcommand: (command, what --out is: "file", "folder" or None); {in} is the input path
SUBCOMMANDS: dict[str, tuple[list[str], str | None]] = {
    "telemetry import": (["telemetry", "import", "{in}", "--out", "{out}"], "file"),
    "telemetry summary": (["telemetry", "summary", "{in}"], None),
    "telemetry record": (
        ["telemetry", "record", "--out", "{out}", "-c", "{in}", "--", "true"],
        "file",
    ),
    "windows": (["windows", "{in}", "--out", "{out}", "-c", "{config}"], "folder"),
    "fleet": (["fleet", "{in}", "--out", "{out}", "-c", "{config}"], "folder"),
    "identify": (
        [
            "identify",
            "--run",
            "{in}",
            "--out",
            "{out}",
            "--real-sweep-steps",
            "0",
            "-c",
            "{config}",
        ],
        "folder",
    ),
    "controller train": (
        [*TRAIN, "--authority", "{in}", "--out", "{out}", "-c", "{config}"],
        "folder",
    ),
    "evaluate": (
        ["evaluate", "--controllers", "{in}", "--out", "{out}", "-c", "{config}"],
        "folder",
    ),
    "economics": (["economics", "--run", "{in}", "--out", "{out}", "-c", "{config}"], "folder"),
    "report": (["report", "--run", "{in}", "--out", "{out}", "-c", "{config}"], "folder"),
    "run": (["run", "--arm", "fixed", "--out", "{out}", "-c", "{in}"], "folder"),
    "calibrate": (["calibrate", "-c", "{in}"], None),
    "sweep": (["sweep", "--out", "{out}", "-c", "{in}"], "folder"),
}
ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False
KINDS = [
    "input-is-a-folder",
    "input-below-a-file",
    "input-unreadable",
    "output-is-taken",
    "output-below-a-file",
    "output-in-a-read-only-folder",
]


PERMISSION_KINDS = ("input-unreadable", "output-in-a-read-only-folder")
# Every (subcommand, kind) that applies: the output kinds only where the command writes --out.
PATH_CASES = [
    (name, kind)
    for name in sorted(SUBCOMMANDS)
    for kind in KINDS
    if not kind.startswith("output") or "{out}" in " ".join(SUBCOMMANDS[name][0])
]


def _unprivileged(call: Callable[[], tuple[int, str]]) -> tuple[int, str]:
    """``call()`` in a forked child running as ``nobody``, so that file permissions bind (they
    do not bind root, as CI runs); its result, or its failure, comes back through a pipe.

    The modules the commands import lazily are imported first, here: nobody may not read the
    Python installation of root (CI's Python lives under /root)."""
    import importlib
    import json
    import traceback

    for module in ("grpo_power.workload.runner", "grpo_power.workload.arms", "pickletools"):
        importlib.import_module(module)

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read_end)
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            outcome = {"result": call()}
        except BaseException:  # reported to the parent, which fails the test
            outcome = {"error": traceback.format_exc()}
        with os.fdopen(write_end, "w") as pipe:
            json.dump(outcome, pipe)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        outcome = json.loads(pipe.read() or '{"error": "the child reported nothing"}')
    os.waitpid(child, 0)
    assert "error" not in outcome, outcome["error"]
    code, message = outcome["result"]
    return code, message


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        if p.is_file()
        else (0, 0)
        for p in root.rglob("*")
    }


@pytest.mark.parametrize(("name", "kind"), PATH_CASES)
def test_bad_paths_give_one_line_and_write_nothing(name: str, kind: str, tmp_path: Path) -> None:
    command, out_kind = SUBCOMMANDS[name]
    as_nobody = ROOT and kind in PERMISSION_KINDS
    if as_nobody:  # a folder nobody may enter (pytest's own is root's alone)
        tmp_path = Path(tempfile.mkdtemp(prefix="grpo-power-perm-"))
        tmp_path.chmod(0o755)
    config = _config(tmp_path)
    # a valid input by default: the matching file for each input slot
    valid_in = {"run": config, "calibrate": config, "sweep": config, "telemetry record": config}
    path_in: Path = valid_in.get(name) or _trace(tmp_path)
    out = tmp_path / "out"
    blocker = tmp_path / "a-file.txt"
    blocker.write_text("x")
    locked = tmp_path / "locked"
    if kind == "input-is-a-folder":
        path_in = tmp_path / "a-folder"
        path_in.mkdir()
        if name in ("identify", "economics", "report", "evaluate"):  # they take folders
            path_in = blocker  # ... so give them a file where a folder is expected
    elif kind == "input-below-a-file":
        path_in = blocker / "trace.parquet"
    elif kind == "input-unreadable":
        path_in.chmod(0)
    elif kind == "output-is-taken":  # a file where a folder is written, or the reverse
        out = blocker
        if out_kind == "file":
            out = tmp_path / "a-folder"
            out.mkdir()
    elif kind == "output-below-a-file":
        out = blocker / "out"
    elif kind == "output-in-a-read-only-folder":
        locked.mkdir()
        locked.chmod(0o555)
        out = locked / "out"
    before = _snapshot(tmp_path)
    values = {"in": str(path_in), "out": str(out), "config": str(config)}
    arguments = [part.format(**values) for part in command]
    try:
        code, message = _unprivileged(lambda: invoke(arguments)) if as_nobody else invoke(arguments)
    finally:
        for p in (path_in, locked):
            if p.exists():
                p.chmod(0o755 if p.is_dir() else 0o644)
    assert code == EXIT_DATA, message
    assert _snapshot(tmp_path) == before, "something was written"
    shutil.rmtree(tmp_path / "results", ignore_errors=True)
    if as_nobody:
        shutil.rmtree(tmp_path)


@pytest.mark.parametrize("name", ["telemetry import", "windows"])
def test_a_full_disk_is_one_line_and_leaves_no_temporary(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC while the output is written: one line naming the output, no .tmp left."""
    import grpo_power.atomic as atomic

    def full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(src))

    config = _config(tmp_path)
    log = DATA / "nvidia-smi-a100.csv"
    path_in = log if name == "telemetry import" else _trace(tmp_path)
    monkeypatch.setattr(atomic.os, "replace", full)
    before = _snapshot(tmp_path)
    command, out_kind = SUBCOMMANDS[name]
    out = tmp_path / ("out.parquet" if out_kind == "file" else "out")  # a trace is .parquet
    values = {"in": str(path_in), "out": str(out), "config": str(config)}
    code, message = invoke([part.format(**values) for part in command])
    assert code == EXIT_DATA and "no space left on the device" in message, message
    assert ".tmp" not in message
    written = set(_snapshot(tmp_path)) - set(before)
    assert not [p for p in written if p.endswith(".tmp")], written
