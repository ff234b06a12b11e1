"""The trace store: round trip, metadata, and a recording killed with SIGKILL stays readable."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import pytest

from grpo_power.telemetry.schema import TRACE_COLUMNS, TraceMetadata
from grpo_power.telemetry.store import TraceWriter, journal_path, read_trace, write_trace
from tests.conftest import REPO


def _rows(t0: float, n: int) -> list[dict]:
    return [
        {
            "t": t0 + 0.1 * i,
            "gpu": 0,
            "power_w": 100.0 + i,
            "power_avg_w": None,
            "energy_j": None,
            "sm_util": 50.0,
            "mem_util": 10.0,
            "sm_clock_mhz": 1410.0,
            "temp_c": 40.0,
            "power_limit_w": 400.0,
        }
        for i in range(n)
    ]


def _metadata() -> TraceMetadata:
    return TraceMetadata(
        run_id="r1",
        source="simulated",
        gpu_name="A100",
        nameplate_w=400.0,
        sample_period_s=0.1,
        simulated=True,
    )


def test_writer_round_trip_keeps_rows_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    with TraceWriter(path, _metadata()) as writer:
        writer.write(_rows(0.0, 5))
        assert read_trace(path).complete is False  # readable while recording, from the journal
        writer.write(_rows(0.5, 5))
    trace = read_trace(path)
    assert trace.complete
    assert not journal_path(path).exists()
    assert list(trace.frame.columns) == list(TRACE_COLUMNS)
    assert len(trace.frame) == 10
    assert trace.frame["power_w"].tolist() == [100.0 + i for i in range(5)] * 2
    assert trace.metadata.run_id == "r1" and trace.metadata.simulated
    assert trace.frame["power_avg_w"].isna().all()


def test_cut_off_journal_keeps_complete_batches(tmp_path: Path) -> None:
    path = tmp_path / "trace.parquet"
    writer = TraceWriter(path, _metadata())
    writer.write(_rows(0.0, 3))
    writer.write(_rows(0.3, 3))
    writer._sink.flush()
    journal = journal_path(path)
    size = journal.stat().st_size
    with open(journal, "r+b") as f:  # cut the last batch in half, as a kill mid-write would
        f.truncate(size - 100)
    trace = read_trace(path)
    assert not trace.complete
    assert len(trace.frame) == 3


def test_the_journal_named_itself_reads_as_its_trace(tmp_path: Path) -> None:
    """What a killed recorder leaves is `<trace>.partial` alone: every stage reads it."""
    path = tmp_path / "term.parquet"
    writer = TraceWriter(path, _metadata())
    writer.write(_rows(0.0, 5))
    journal = journal_path(path)
    trace = read_trace(journal)
    assert not trace.complete and trace.path == path
    assert trace.frame["power_w"].tolist() == [100.0 + i for i in range(5)]
    assert trace.metadata.run_id == "r1"
    summary = subprocess.run(
        [sys.executable, "-m", "grpo_power.cli", "telemetry", "summary", str(journal)],
        capture_output=True,
        text=True,
    )
    assert summary.returncode == 0, summary.stderr
    assert "SIMULATED" in summary.stdout and "did not finish" in summary.stderr
    writer.close()
    assert read_trace(journal).complete  # the journal's name, once closed: the trace itself


def test_not_a_trace_names_the_file(tmp_path: Path) -> None:
    plain = tmp_path / "plain.parquet"
    pd.DataFrame({"t": [0.0], "power_w": [1.0]}).to_parquet(plain)
    with pytest.raises(ValueError, match=r"plain\.parquet: missing trace column\(s\) \['gpu'"):
        read_trace(plain)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_trace(tmp_path / "absent.parquet")
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=r"garbage\.parquet: not a readable Parquet file"):
        read_trace(garbage)


def test_write_trace_is_atomic_and_readable(tmp_path: Path) -> None:
    frame = pd.DataFrame(_rows(0.0, 4))
    path = write_trace(tmp_path / "t.parquet", frame, _metadata())
    assert not (tmp_path / "t.parquet.tmp").exists()
    assert read_trace(path).frame["t"].tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3])


@pytest.mark.slow
def test_recording_killed_with_sigkill_leaves_a_readable_trace(tmp_path: Path) -> None:
    out = tmp_path / "killed.parquet"
    command = [
        sys.executable,
        "-m",
        "grpo_power.cli",
        "telemetry",
        "record",
        "--config",
        str(REPO / "config" / "config.yaml"),
        "--period",
        "0.05",
        "--out",
        str(out),
        "--",
        "sleep",
        "60",
    ]
    process = subprocess.Popen(
        command, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    journal = journal_path(out)
    deadline = time.monotonic() + 60
    while not (journal.exists() and journal.stat().st_size > 2000) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert journal.exists(), process.stderr.read().decode() if process.poll() is not None else ""
    time.sleep(3.0)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()

    trace = read_trace(out)
    assert not trace.complete and not out.exists()
    t_s = trace.frame["t"].to_numpy()
    # Flushed every 2 s (config): at least 3 s of the 5+ s recorded at 20 Hz survive.
    assert len(t_s) >= 3.0 / 0.05 * 0.8
    assert np.all(np.diff(t_s) > 0)
    assert trace.metadata.source == "simulated" and trace.metadata.sample_period_s == 0.05
    summary = subprocess.run(
        [sys.executable, "-m", "grpo_power.cli", "telemetry", "summary", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "SIMULATED" in summary.stdout
    assert "did not finish" in summary.stderr


def test_a_clock_jump_in_a_two_gpu_trace_is_refused_or_split(tmp_path: Path) -> None:
    """Two GPUs sampled together; after 1 s the clock steps back to 0.5 s (issue 14). Refused
    with the row, or split: segments laid end to end, each GPU's time increases, and no sample
    is lost or reordered within a GPU."""
    t = np.concatenate([np.arange(0, 1.0, 0.1), np.arange(0.5, 1.5, 0.1)])
    frame = pd.DataFrame({"t": np.repeat(t, 2), "gpu": np.tile([0, 1], len(t))})
    frame["power_w"] = 200.0 + np.arange(len(frame))
    path = tmp_path / "jump.parquet"
    write_trace(path, frame, _metadata())
    with pytest.raises(ValueError, match=r"gpu 0: decreasing timestamp at row 21: .*row 19"):
        read_trace(path)
    trace = read_trace(path, split_on_clock_jumps=True)
    assert len(trace.frame) == len(frame)
    for _, rows in trace.frame.groupby("gpu"):
        assert (np.diff(rows["t"].to_numpy()) > 0).all()
        assert (np.diff(rows["power_w"].to_numpy()) > 0).all()  # recorded order kept
    (jump,) = trace.metadata.model_extra["clock_jumps"]
    assert jump["row"] == 21 and jump["shift_s"] == pytest.approx(0.9 + 60.0 - 0.5)
    assert any("laid end to end 60 s apart" in note for note in trace.notes)


def test_recordings_concatenated_out_of_order_are_put_in_time_order(tmp_path: Path) -> None:
    t = np.concatenate([np.arange(10.0, 11.0, 0.1), np.arange(0.0, 1.0, 0.1)])
    frame = pd.DataFrame({"t": t, "gpu": 0, "power_w": 200.0 + np.arange(len(t))})
    path = tmp_path / "two.parquet"
    write_trace(path, frame, _metadata())
    trace = read_trace(path, split_on_clock_jumps=True)
    assert trace.frame["t"].tolist() == pytest.approx(np.sort(t).tolist())  # real times kept
    assert trace.frame["power_w"].iloc[0] == 210.0  # the earlier recording first
    assert any("2 recordings concatenated out of order" in note for note in trace.notes)


def test_a_trace_with_only_t_gpu_power_takes_metadata_from_the_defaults(tmp_path: Path) -> None:
    from grpo_power.telemetry.store import TraceDefaults

    path = tmp_path / "mine.csv"
    path.write_text("t,gpu,power_w\n" + "".join(f"{0.5 * i},0,300\n" for i in range(10)))
    trace = read_trace(path, TraceDefaults(nameplate_w=700.0, gpu_name="H100", source="x.yaml"))
    meta = trace.metadata
    assert (meta.nameplate_w, meta.gpu_name, meta.source, meta.run_id) == (
        700.0,
        "H100",
        "imported",
        "mine",
    )
    assert meta.sample_period_s == pytest.approx(0.5)  # inferred from the spacing
    assert list(trace.frame.columns) == list(TRACE_COLUMNS)
    assert trace.frame["energy_j"].isna().all()
    assert any("nameplate 700 W from x.yaml" in note for note in trace.notes)
    assert not any("readings reach" in note for note in trace.notes)
    # an H100's 600 W under the default A100 config: the nameplate taken says it is passed
    hot = tmp_path / "hot.csv"
    hot.write_text("t,gpu,power_w\n" + "".join(f"{0.5 * i},0,{300 + 30 * i}\n" for i in range(11)))
    notes = read_trace(hot, TraceDefaults(nameplate_w=400.0, source="config.yaml")).notes
    assert any(
        "readings reach 600 W, above the nameplate 400 W from config.yaml" in n for n in notes
    )
    packed = tmp_path / "mine.csv.gz"  # compressed: the same trace, the same run id
    packed.write_bytes(gzip.compress(path.read_bytes()))
    again = read_trace(packed, TraceDefaults(nameplate_w=700.0, gpu_name="H100", source="x.yaml"))
    assert again.frame.equals(trace.frame) and again.metadata.run_id == "mine"
    path.write_text("t,gpu,power_w\n" + "".join(f"{20 * i},0,300\n" for i in range(10)))
    with pytest.raises(ValueError, match="cannot tell the time unit"):
        read_trace(path)
    # a minute apart: the config's 0.1 s period is 600x the spacing in ms, but a minute's log is
    # as likely (it was read as milliseconds, 1000x too little energy); its own period decides
    path.write_text("t,gpu,power_w\n" + "".join(f"{60 * i},0,300\n" for i in range(60)))
    with pytest.raises(ValueError, match=r"0\.1 s does not decide"):
        read_trace(path, TraceDefaults(nameplate_w=400.0, gpu_name="A100", period_s=0.1))
    minute = read_trace(path, TraceDefaults(nameplate_w=400.0, gpu_name="A100", period_s=60.0))
    assert minute.metadata.sample_period_s == 60.0 and minute.frame["t"].iloc[-1] == 3540.0
    path.write_text("t,gpu,power_w\n" + "".join(f"{100 * i},0,300\n" for i in range(60)))
    millis = read_trace(path, TraceDefaults(nameplate_w=400.0, gpu_name="A100", period_s=0.1))
    assert millis.frame["t"].iloc[-1] == pytest.approx(5.9)  # 100 apart: ms, as 100 s is no log's


def test_the_summary_total_is_the_gpus_summed(tmp_path: Path) -> None:
    """The total row of ``telemetry summary``: two GPUs in antiphase (200 and 380 W, a second
    apart) sum to a steady 580 W, so its peak is 580 W, not one GPU's 380 W (its mean, the
    GPUs' summed, exceeded its peak); a GPU without readings in a second hour adds nothing
    there, and its mean is that of its own readings."""
    from grpo_power.telemetry.store import TraceDefaults
    from grpo_power.telemetry.summary import summary_table

    rows = [
        f"{1_800_000_000 + i},{g},{(200, 380)[(i + g) % 2]}\n"
        for i in range(7200)
        for g in (0, 1)
        if g == 0 or i < 3600
    ]
    path = tmp_path / "node.csv"
    path.write_text("t,gpu,power_w\n" + "".join(rows))
    trace = read_trace(path, TraceDefaults(period_s=1.0))
    total = summary_table(trace).set_index("gpu").loc["all"]
    assert total["peak_power_w"] == 580.0
    assert total["mean_power_w"] == pytest.approx(580.0, abs=0.1)


def test_a_counter_across_a_gap_is_not_time_at_the_power_its_step_implies(tmp_path: Path) -> None:
    """A GPU read a minute at 200 W, not for an hour (a logger down, the pause between a
    resumed run's attempts: its counter steps little or not at all across), then a minute at
    260 W. Its mean is 230 W over the two minutes with readings; the counter's was divided by
    the whole span (7.4 W), which the planner then priced a fleet-year at."""
    from grpo_power.telemetry.store import TraceDefaults
    from grpo_power.telemetry.summary import check_energy, summary_table

    t_s = [*range(60), *range(3660, 3720)]
    power_w = [200.0] * 60 + [260.0] * 60
    energy_j = np.concatenate([[0.0], np.cumsum(np.array(power_w[:-1]) * 1.0)])
    energy_j[60:] -= 200.0  # the counter took no step across the hour
    rows = "".join(f"{t},0,{w},{e}\n" for t, w, e in zip(t_s, power_w, energy_j, strict=True))
    path = tmp_path / "gap.csv"
    path.write_text("t,gpu,power_w,energy_j\n" + rows)
    trace = read_trace(path, TraceDefaults(nameplate_w=400.0, gpu_name="A100", period_s=1.0))
    gpu = summary_table(trace).iloc[0]
    assert gpu["energy_source"] == "counter"
    assert gpu["energy_span_s"] == 118.0 and gpu["energy_j"] == 59 * 200.0 + 59 * 260.0
    assert gpu["mean_power_w"] == pytest.approx(230.0, abs=0.01)
    [check] = check_energy(trace)  # the counter and the integral over the same minutes
    assert check.counter_j == pytest.approx(check.integrated_j, rel=1e-9)


def test_a_folder_written_whole_is_readable_as_a_plain_folder_is(tmp_path: Path) -> None:
    """Folders built aside and renamed into place (a planner's traces and windows, the model
    cache) kept mkdtemp's 0700: others on the node could not read them. They now get what a
    plain mkdir gives under the umask."""
    from grpo_power.atomic import replace_folder_atomic, write_folder_atomic

    umask = os.umask(0o022)
    try:
        (tmp_path / "plain").mkdir()
        replace_folder_atomic(tmp_path / "replaced", lambda folder: (folder / "a").write_text("x"))
        write_folder_atomic(tmp_path / "written", lambda folder: (folder / "a").write_text("x"))
    finally:
        os.umask(umask)
    modes = {name: (tmp_path / name).stat().st_mode & 0o777 for name in ("replaced", "written")}
    assert modes == {"replaced": 0o755, "written": 0o755}
    assert (tmp_path / "plain").stat().st_mode & 0o777 == 0o755


def test_a_merged_folder_takes_all_the_builds_files_or_none(tmp_path: Path) -> None:
    """A report's figures were saved one by one into its folder, so that a bad input found at
    the fourth left three new figures beside the old page. A build merged into a folder puts
    every file it wrote in place (the page last) or, failing, none; the folder's other files
    stay."""
    from grpo_power.atomic import merge_folder_atomic

    out = tmp_path / "report"
    (out / "figures").mkdir(parents=True)
    (out / "index.html").write_text("old page")
    (out / "figures" / "a.png").write_text("old a")
    (out / "notes.txt").write_text("the user's")

    def failing(folder: Path) -> None:
        (folder / "figures").mkdir()
        (folder / "figures" / "a.png").write_text("new a")
        raise ValueError("a bad input")

    with pytest.raises(ValueError, match="a bad input"):
        merge_folder_atomic(out, failing)
    assert (out / "figures" / "a.png").read_text() == "old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]

    order: list[str] = []

    def building(folder: Path) -> int:
        (folder / "figures").mkdir()
        (folder / "index.html").write_text("new page")
        (folder / "figures" / "a.png").write_text("new a")
        (folder / "figures" / "b.png").write_text("new b")
        return 3

    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        order.append(Path(dst).name)
        real_replace(src, dst)

    with mock.patch("grpo_power.atomic.os.replace", replace):
        assert merge_folder_atomic(out, building) == 3
    assert order == ["a.png", "b.png", "index.html"]  # the page after what it shows
    assert (out / "index.html").read_text() == "new page"
    assert (out / "figures" / "b.png").read_text() == "new b"
    assert (out / "notes.txt").read_text() == "the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
