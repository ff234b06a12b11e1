"""An inference engine's metrics log beside a power log (``grpo_power.telemetry.engine``): the
clock offset when one log runs past the other or the engine's clock is seconds off, missing
cells, milliseconds, counter family names, the engine told from the header, and several
data-parallel engines in one file. The public traces (``tests.conftest.real_traces``) are read
where they are, never copied; the rest are small logs built here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grpo_power.telemetry.engine import (
    EngineLog,
    align_engine,
    generated_tokens,
    read_engine_log,
)
from grpo_power.telemetry.formats import engine_format
from grpo_power.telemetry.importers import ImportError_, import_log
from tests.conftest import REAL_RUNS, real_traces

ZONE_S = 25_200.0  # the public runs' engine clock is 7 h ahead of their power logs' local time


@pytest.fixture(scope="module")
def r2p5() -> tuple[np.ndarray, np.ndarray, EngineLog]:
    """The arrival_rate run: its power samples' times as logged (read as UTC, s), power (W) and
    engine log; the engine's counter rises by 42,688 tokens over the power log's span."""
    folder = real_traces() / REAL_RUNS["r2p5"]
    frame, meta = import_log(folder / "power.csv", "nvidia-smi", nameplate_w=400.0, timezone="UTC")
    power_unix_s = meta.start_unix_s + frame["t"].to_numpy(float)
    return power_unix_s, frame["power_w"].to_numpy(float), read_engine_log(folder / "engine.csv")


def _synthetic(
    length_s: float, power_follows: bool, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, EngineLog]:
    """A run of ``length_s`` at 250 ms: concurrency changes every 2-6 s; power follows it (the
    decode line plus 2 W of noise) or, with ``power_follows`` False, wanders on its own. The
    engine's clock is :data:`ZONE_S` ahead. Returns the power times (s) and power (W), and the
    engine log."""
    rng = np.random.default_rng(seed)
    start_s, period_s = 1_784_400_000.0, 0.25
    changes_s = start_s + np.cumsum(rng.uniform(2.0, 6.0, int(length_s)))
    levels = 2.0 ** rng.integers(0, 7, len(changes_s) + 1)
    power_t_s = start_s + np.arange(0.0, length_s, period_s)
    steps = levels[np.searchsorted(changes_s, power_t_s)]
    if not power_follows:
        steps = rng.permutation(steps)
    power_w = 277.5 + 6.55 * np.log2(steps) + rng.normal(0.0, 2.0, len(power_t_s))
    engine_true_s = power_t_s + 0.1
    concurrency = levels[np.searchsorted(changes_s, engine_true_s)]
    log = EngineLog(
        engine_true_s + ZONE_S,
        concurrency,
        np.zeros(len(engine_true_s)),
        "vllm",
        Path("engine.csv"),
        period_s,
    )
    return power_t_s, power_w, log


def test_a_power_log_running_past_the_engine_log_takes_the_offset_power_follows(
    r2p5: tuple[np.ndarray, np.ndarray, EngineLog],
) -> None:
    """20 minutes of idle power logged before and after the run: several quarter hours put the
    whole engine log inside the power log, and the one under which power follows concurrency
    is taken, whatever zone the power log was read in (it was the first of them: +6.75 h with a
    correlation of 0.00, and -0.25 h for the true 0)."""
    power_unix_s, power_w, log = r2p5
    rng = np.random.default_rng(1)
    pad_s = np.arange(0.25, 1200.0 + 0.125, 0.25)
    padded_s = np.concatenate(
        [power_unix_s[0] - pad_s[::-1], power_unix_s, power_unix_s[-1] + pad_s]
    )
    idle_w = power_w[0] + rng.normal(0.0, 0.5, len(pad_s))
    padded_w = np.concatenate([idle_w, power_w, idle_w])
    for zone_s in (ZONE_S, 0.0):  # read as UTC, or in the run's own zone (America/Los_Angeles)
        _, info, _ = align_engine(padded_s + ZONE_S - zone_s, padded_w, log)
        assert info["zone_offset_s"] == zone_s
        assert info["offset_s"] == pytest.approx(zone_s, abs=0.3)
        assert info["skew_correlation"] > 0.6
        assert info["zone_offsets_tied"] >= 2


def test_tied_offsets_that_nothing_tells_apart_are_refused() -> None:
    """An engine log of constant concurrency inside a longer power log: every quarter hour
    that covers it fits alike, and the import says so instead of taking the first."""
    power_t_s, power_w, log = _synthetic(3000.0, power_follows=True)
    inside = slice(len(log.unix_s) // 2, len(log.unix_s) // 2 + 400)
    flat = dataclasses.replace(
        log,
        unix_s=log.unix_s[inside],
        concurrency=np.full(400, 8.0),
        tokens_per_s=log.tokens_per_s[inside],
    )
    with pytest.raises(ImportError_) as refused:
        align_engine(power_t_s, power_w, flat)
    message = str(refused.value)
    assert message.startswith("engine.csv: timestamp: expected one time-zone offset under which")
    assert "got 3 (+6.75 h to +7.25 h)" in message and "\n" not in message


def test_an_engine_log_longer_than_the_power_log_is_aligned(
    r2p5: tuple[np.ndarray, np.ndarray, EngineLog],
) -> None:
    """A Prometheus scrape running 120 s past each end of a 94 s power log: the power log lies
    wholly inside it (it was refused: under half the engine's samples inside the power log),
    and the tokens over the power log's span are the counter's rise, 42,688."""
    power_unix_s, power_w, log = r2p5
    pad_s = np.arange(0.25, 120.0 + 0.125, 0.25)
    longer = dataclasses.replace(
        log,
        unix_s=np.concatenate([log.unix_s[0] - pad_s[::-1], log.unix_s, log.unix_s[-1] + pad_s]),
        concurrency=np.concatenate([np.zeros(len(pad_s)), log.concurrency, np.zeros(len(pad_s))]),
        tokens_per_s=np.concatenate([np.zeros(len(pad_s)), log.tokens_per_s, np.zeros(len(pad_s))]),
    )
    _, info, _ = align_engine(power_unix_s, power_w, longer)
    assert info["zone_offset_s"] == ZONE_S and info["offset_s"] == pytest.approx(ZONE_S, abs=0.3)
    start_s = power_unix_s.min() + info["offset_s"]
    assert generated_tokens(longer, start_s, power_unix_s.max() + info["offset_s"]) == 42_688


def test_an_engine_clock_seconds_off_is_found_beyond_the_first_skew_search(
    r2p5: tuple[np.ndarray, np.ndarray, EngineLog],
) -> None:
    """An engine clock 5 s or 30 s ahead of the run's: the search within 1 s ends at its edge
    (it was taken there, +1 s and -1 s, correlation 0.08), so the skew is searched within half
    a quarter hour and found where power follows concurrency as in the true log."""
    power_unix_s, power_w, log = r2p5
    for ahead_s in (5.0, 30.0):
        shifted = dataclasses.replace(log, unix_s=log.unix_s + ahead_s)
        _, info, notes = align_engine(power_unix_s, power_w, shifted)
        assert info["zone_offset_s"] == ZONE_S
        assert info["offset_s"] == pytest.approx(ZONE_S + ahead_s, abs=0.3)
        assert info["skew_correlation"] > 0.6 and info["skew_search_s"] == 450.0
        assert "skew found within 450 s" in notes[-1]


def test_a_weak_correlation_is_said_and_a_short_runs_chance_peak_not_taken() -> None:
    """Power that does not follow concurrency: the one quarter hour covering the logs is kept,
    and the note says the skew is uncertain (it said nothing); in a run of a few seconds the
    wide search's best, a chance correlation, is not taken either."""
    for length_s in (600.0, 7.0):
        power_t_s, power_w, log = _synthetic(length_s, power_follows=False, seed=3)
        _, info, notes = align_engine(power_t_s, power_w, log)
        assert info["zone_offset_s"] == ZONE_S and abs(info["skew_s"]) <= 1.0
        assert "the residual skew is uncertain" in notes[-1]
        assert info["skew_search_s"] == 1.0


@pytest.mark.slow
def test_unrelated_logs_that_change_in_steps_are_not_aligned_by_the_wide_search() -> None:
    """An hour of power and of concurrency that each change once a minute, independently: their
    i.i.d. p-value counted 3,600 samples where the steps hold 60, so the wide search took a
    chance correlation of 0.3 at an offset of minutes for an alignment (6 runs of 20)."""
    taken = []
    for seed in (0, 1, 5):  # 0 and 5 were taken (offsets of 240 s and -360 s)
        rng = np.random.default_rng(seed)
        t_s = 1.7e9 + np.arange(3600, dtype=float)
        concurrency = np.repeat(rng.integers(1, 17, size=61), 60)[:3600].astype(float)
        power_w = np.repeat(rng.normal(250, 40, size=61), 60)[:3600] + rng.normal(0, 5, 3600)
        log = EngineLog(t_s.copy(), concurrency, np.full(3600, 100.0), "vllm", Path("e.csv"), 1.0)
        _, info, _ = align_engine(t_s, power_w, log)
        taken += [info["offset_s"]] if info["skew_search_s"] > 1.0 else []
    assert not taken, taken


def test_missing_engine_cells_stay_missing(tmp_path: Path) -> None:
    """An empty or [N/A] concurrency cell is no sample (it was 0: a false idle point), and a
    missing counter cell's interval is the counter's rise across the gap (it zeroed two)."""
    rows = [(8, 0), (8, 100), ("", 200), (8, 300), (8, ""), (8, 500), ("[N/A]", 600)]
    path = tmp_path / "engine.csv"
    path.write_text(
        "timestamp,num_requests_running,generation_tokens_total\n"
        + "".join(f"{1000 + i},{c},{tokens}\n" for i, (c, tokens) in enumerate(rows))
    )
    log = read_engine_log(path)
    np.testing.assert_array_equal(log.concurrency, [8, 8, np.nan, 8, 8, 8, np.nan])
    np.testing.assert_array_equal(log.tokens_per_s, [0, 100, 100, 100, 100, 100, 100])
    assert generated_tokens(log, 999.0, 1006.0) == 600.0
    # a counter known only from the second sample on: nothing is counted before it
    path.write_text(path.read_text().replace("1000,8,0", "1000,8,"))
    log = read_engine_log(path)
    assert np.isnan(log.tokens_per_s[0]) and generated_tokens(log, 999.0, 1006.0) == 500.0


def test_an_engine_log_in_milliseconds_is_read_as_such(tmp_path: Path) -> None:
    """Unix milliseconds are told by size, as in the power readers, and said (they were read as
    seconds and refused: the engine log 'starts +495175353 h from the power log')."""
    power_t_s, power_w, log = _synthetic(120.0, power_follows=True)
    path = tmp_path / "engine.csv"
    pd.DataFrame(
        {
            "timestamp": np.round(log.unix_s * 1000).astype(np.int64),
            "vllm:num_requests_running": log.concurrency,
            "vllm:generation_tokens_total": np.arange(len(log.unix_s)) * 10,
        }
    ).to_csv(path, index=False)
    read = read_engine_log(path)
    np.testing.assert_allclose(read.unix_s, log.unix_s, atol=1e-3)
    _, info, notes = align_engine(power_t_s, power_w, read)
    assert info["offset_s"] == pytest.approx(ZONE_S + 0.1, abs=0.3)
    assert notes[0].startswith(f"{path}: timestamp: read as unix time in milliseconds")


def test_a_counter_family_name_and_the_engine_told_from_the_header(tmp_path: Path) -> None:
    """`vllm:generation_tokens` (a counter as prometheus_client names its family) is the
    counter; without --engine-format the engine is told from the header (an SGLang log was
    refused as a vLLM one), and a wrong --engine-format names the engine the columns are of."""
    from typer.testing import CliRunner

    from grpo_power.cli import app

    folder = real_traces() / REAL_RUNS["r2p5"]
    engine = pd.read_csv(folder / "engine.csv")
    renames = {
        "vllm": {"generation_tokens_total": "vllm:generation_tokens"},
        "sglang": {
            "num_requests_running": "sglang:num_running_reqs",
            "generation_tokens_total": "sglang:generation_tokens_total",
        },
    }
    runner = CliRunner()
    for name, renamed in renames.items():
        engine.rename(columns=renamed).to_csv(tmp_path / f"{name}.csv", index=False)
        assert engine_format(tmp_path / f"{name}.csv") == name
        command = ["telemetry", "import", str(folder / "power.csv"), "--nameplate-w", "400"]
        command += ["--engine", str(tmp_path / f"{name}.csv"), "-o", str(tmp_path / "t.parquet")]
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
        assert f"engine format {name} (told from its header line;" in result.output
    result = runner.invoke(app, [*command, "--engine-format", "vllm"])
    assert result.exit_code == 2
    assert result.output.strip().endswith(
        "(the columns are a sglang metrics log's: --engine-format sglang)"
    )


def test_data_parallel_engines_in_one_file_are_summed(tmp_path: Path) -> None:
    """Two engines on one GPU set, as rows told by an `engine` column or as columns told by
    their Prometheus label sets: concurrency is the sum, tokens/s the sum of each engine's own
    counter differences (engine 1's reset costs only its own interval). A single label set is
    just the metric's name. Rows of several engines without the column are refused in one
    line naming it (it was 'expected unix seconds that increase, got np.float64(...)')."""
    concurrency = {"0": [2, 3, 4, 5], "1": [1, 1, 2, "[N/A]"]}
    counter = {"0": [0, 10, 30, 60], "1": [500, 510, 5, 25]}
    long = tmp_path / "long.csv"
    long.write_text(
        "timestamp,engine,vllm:num_requests_running,vllm:generation_tokens_total\n"
        + "".join(
            f"{100 + i},{e},{concurrency[e][i]},{counter[e][i]}\n" for i in range(4) for e in "01"
        )
    )
    labels = {e: f'{{engine=""{e}"",model_name=""m""}}' for e in "01"}
    wide = tmp_path / "wide.csv"
    wide.write_text(
        "timestamp,"
        + ",".join(
            f'"vllm:{metric}{labels[e]}"'
            for e in "01"
            for metric in ("num_requests_running", "generation_tokens_total")
        )
        + "\n"
        + "".join(
            f"{100 + i},{concurrency['0'][i]},{counter['0'][i]},{concurrency['1'][i]},"
            f"{counter['1'][i]}\n"
            for i in range(4)
        )
    )
    for path in (long, wide):
        log = read_engine_log(path)
        np.testing.assert_array_equal(log.unix_s, [100, 101, 102, 103])
        np.testing.assert_array_equal(log.concurrency, [3, 4, 6, np.nan])
        np.testing.assert_array_equal(log.tokens_per_s, [0, 20, 20, 50])
    assert engine_format(wide) == "vllm"
    single = tmp_path / "single.csv"
    pd.read_csv(wide).iloc[:, :3].to_csv(single, index=False)
    np.testing.assert_array_equal(read_engine_log(single).concurrency, [2, 3, 4, 5])
    unlabelled = tmp_path / "unlabelled.csv"
    unlabelled.write_text(long.read_text().replace("engine,", "rank,"))
    with pytest.raises(ImportError_) as refused:
        read_engine_log(unlabelled)
    assert str(refused.value) == (
        f"{unlabelled}: line 3: column 'timestamp': expected unix seconds that increase, got "
        "'100'; rows of several engines need an 'engine' column naming each"
    )


def test_a_power_log_of_several_gpus_is_aligned() -> None:
    """Two GPUs' rows share each sampling time: the skew is searched at the sampling period,
    not at the zero between the GPUs' rows (a division by zero)."""
    power_t_s, power_w, log = _synthetic(300.0, power_follows=True)
    _, info, _ = align_engine(
        np.repeat(power_t_s, 2), np.repeat(power_w, 2) + [0.0, 5.0] * len(power_w), log
    )
    assert info["offset_s"] == pytest.approx(ZONE_S + 0.1, abs=0.3)
    assert info["power_samples_matched"] > 0.95
