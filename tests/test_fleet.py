"""Fleet aggregation and oversubscription (analysis/fleet/) on hand-computed runs."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from grpo_power.analysis import reference
from grpo_power.analysis.fleet import (
    JobSource,
    MonteCarloFleet,
    analyze_fleet,
    choose_alignment,
    monte_carlo,
    read_run_bins,
    wall_clock_fleet,
)
from grpo_power.analysis.fleet.factors import stats_table
from grpo_power.analysis.fleet.inputs import load_job_source
from grpo_power.analysis.fleet.monte_carlo import add_shifted
from grpo_power.analysis.fleet.wall_clock import coverage_note
from grpo_power.analysis.windows import run_windows
from grpo_power.atomic import write_parquet_atomic
from grpo_power.config import Config
from grpo_power.layout import BINS_METADATA_KEY
from grpo_power.telemetry.schema import TRACE_COLUMNS, TraceMetadata
from grpo_power.telemetry.store import write_trace

START = 1_000_000_000.0  # on the 0.5 s bin grid


def config(**fleet) -> Config:
    base = {
        "cap_w": 300.0,
        "windows": {"windows_s": [0.5, 5.0, 30.0]},
        "fleet": {
            "n_gpus": 4,
            "window_s": 5.0,
            "draws": 20,
            "scaling_sizes": [4, 64],
            "scaling_draws": 3,
            **fleet,
        },
    }
    return Config.model_validate(base)


def counter_run(
    tmp_path, name, levels_w, seconds=60.0, start=START, gpus=2, simulated=True, model_size=None
):
    """A run whose GPUs draw piecewise-constant power: ``levels_w`` = [(until_s, watts), ...].

    Energy comes from the counter, so each 0.5 s interval has exactly the level's power.
    """
    n = int(seconds / 0.5) + 1
    t = np.arange(n) * 0.5
    interval_w = np.empty(n - 1)
    lower = 0.0
    for until_s, watts in levels_w:
        interval_w[(t[:-1] >= lower) & (t[:-1] < until_s)] = watts
        lower = until_s
    counter = np.concatenate([[0.0], np.cumsum(interval_w * 0.5)])
    rows = []
    for g in range(gpus):
        frame = pd.DataFrame({c: np.full(n, np.nan) for c in TRACE_COLUMNS})
        frame["t"] = t
        frame["gpu"] = np.int32(g)
        frame["power_w"] = np.concatenate([interval_w, interval_w[-1:]])
        frame["energy_j"] = counter
        rows.append(frame)
    frame = pd.concat(rows).sort_values(["t", "gpu"], kind="stable").reset_index(drop=True)
    extra = {"model_size": model_size} if model_size else {}
    meta = TraceMetadata(
        run_id=name,
        source="simulated" if simulated else "nvml",
        gpu_name="A100",
        nameplate_w=400.0,
        sample_period_s=0.5,
        start_unix_s=start,
        simulated=simulated,
        **extra,
    )
    path = write_trace(tmp_path / f"{name}.parquet", frame, meta)
    out = tmp_path / "windows" / name
    run_windows(path, out, config())
    return out


# --------------------------------------------------------------------------------------------
# wall clock


def test_wall_clock_fleet_hand_computed(tmp_path):
    a = counter_run(tmp_path, "a", [(60.0, 300.0)])
    b = counter_run(tmp_path, "b", [(30.0, 100.0), (60.0, 380.0)])
    cfg = config()
    runs = [read_run_bins(a), read_run_bins(b)]
    assert choose_alignment(runs, cfg) == ("wall_clock", None)
    result = analyze_fleet([a, b], cfg)
    table = result.fleet.set_index("window_s")
    # Fleet: 800 W for 30 s then 1360 W; cap 4 x 300 = 1200 W; nameplate 1600 W.
    # 5 s windows end at 5.0 ... 60.0 (111); over when at most 1 s lies in the first half,
    # i.e. ends at 34.0 ... 60.0 (53 windows).
    row = table.loc[5.0]
    assert row["alignment"] == "wall_clock" and row["draws"] == 1
    assert row["windows_per_draw"] == 111
    assert row["exceedance_mean"] == pytest.approx(53 / 111)
    assert row["peak_share_mean"] == pytest.approx(1360 / 1600)
    assert row["factor"] == pytest.approx(1 / (0.85 * 1.1))
    assert row["factor_no_margin_mean_peak"] == pytest.approx(1 / 0.85)
    # 30 s windows (ends 30.0 ... 60.0): over when under 8.57 s of it is at 800 W (18 ends).
    assert table.loc[30.0, "exceedance_mean"] == pytest.approx(18 / 61)
    assert table.loc[0.5, "exceedance_mean"] == pytest.approx(60 / 120)
    assert result.summary["complete_bins"] == 120 and result.summary["n_gpus"] == 4
    assert "n_gpus_note" not in result.summary
    # a wall-clock fleet asked for by name is the runs' own GPUs, whatever fleet.n_gpus says:
    # the summary says the setting was not used (it was dropped silently)
    asked = cfg.model_copy(
        update={"fleet": cfg.fleet.model_copy(update={"alignment": "wall_clock", "n_gpus": 1000})}
    )
    named = analyze_fleet([a, b], asked)
    assert named.summary["n_gpus"] == 4
    assert "fleet.n_gpus (1000) not used" in named.summary["n_gpus_note"]


def test_wall_clock_partitions_do_not_change_the_result(tmp_path):
    a = counter_run(tmp_path, "a", [(20.0, 300.0), (40.0, 150.0), (60.0, 390.0)])
    b = counter_run(tmp_path, "b", [(30.0, 100.0), (60.0, 380.0)], start=START + 7.5)
    runs = [read_run_bins(a), read_run_bins(b)]
    whole, counted = wall_clock_fleet(runs, [0.5, 5.0, 30.0], 0.5, 1200.0, partition_bins=65536)
    for size in (16, 17, 61):
        parts, info = wall_clock_fleet(runs, [0.5, 5.0, 30.0], 0.5, 1200.0, partition_bins=size)
        assert info["partitions"] > 1
        assert info["bins_without_a_reading"] == counted["bins_without_a_reading"]
        for x, y in zip(whole, parts, strict=True):
            assert (x.windows, x.over) == (y.windows, y.over)
            assert x.peak_mean_w == pytest.approx(y.peak_mean_w)


def test_a_wall_clock_fleet_says_when_it_leaves_time_out():
    """The note names the share of the common bins left out and the runs that cost most, from
    1 % of them on; a few seconds between two daily logs are no news, and Monte Carlo none."""
    summary = {
        "alignment": "wall_clock",
        "bin_s": 0.5,
        "common_bins": 1000,
        "complete_bins": 900,
        "bins_without_a_reading": {"a": 20, "b": 100, "c": 3, "d": 1},
    }
    note = coverage_note(summary)
    assert note is not None
    assert "counts 900 of the 1,000 0.5 s bins its traces share (90.0 %)" in note
    assert "b (100), a (20), c (3) and 1 more" in note
    assert coverage_note({**summary, "complete_bins": 991}) is None
    assert coverage_note({**summary, "complete_bins": 990}) is not None
    assert coverage_note({**summary, "alignment": "monte_carlo"}) is None
    assert coverage_note({**summary, "common_bins": 0, "complete_bins": 0}) is None


def test_a_gap_every_trace_shares_is_not_blamed_on_one():
    """1,000 nodes' logs that all stop at the same time each of the day (170,405 bins each):
    the note told the planner to leave out a trace that costs many, which fills nothing. Where
    every trace misses (nearly) as many, it says the gap is shared."""
    runs = [f"node{i}" for i in range(4)]
    summary = {
        "alignment": "wall_clock",
        "bin_s": 0.5,
        "common_bins": 1000,
        "complete_bins": 900,
        "run_ids": runs,
        "bins_without_a_reading": dict(zip(runs, (100, 100, 95, 100), strict=True)),
    }
    note = coverage_note(summary)
    assert "every trace has no reading in 95 to 100 of them, a gap they share" in note
    assert "leave out a trace" not in note
    one = {**summary, "bins_without_a_reading": {"node0": 100, "node1": 3}}
    assert "node0 (100), node1 (3); leave out a trace that costs many" in coverage_note(one)


def test_runs_that_did_not_overlap_are_drawn_by_monte_carlo(tmp_path):
    a = counter_run(tmp_path, "a", [(60.0, 300.0)])
    b = counter_run(tmp_path, "b", [(60.0, 300.0)], start=START + 10_000)
    cfg = config()
    assert choose_alignment([read_run_bins(a), read_run_bins(b)], cfg) == (
        "monte_carlo",
        "the runs' clocks do not overlap: b starts 10,000 s = 2.78 h after a (logs of other "
        "times, or a clock or time zone set apart)",
    )
    # 60 s runs 50 s apart share 10 s, under the longest window (30 s); a fleet of other size
    c = counter_run(tmp_path, "c", [(60.0, 300.0)], start=START + 50)
    assert choose_alignment([read_run_bins(a), read_run_bins(c)], cfg)[1] == (
        "the runs' clocks overlap by 10 s, less than the longest window (30 s)"
    )
    assert choose_alignment([read_run_bins(a), read_run_bins(c)], config(n_gpus=6))[1] == (
        "the fleet is 6 GPUs, its runs hold 4"
    )
    result = analyze_fleet([a, b], cfg)
    assert (result.fleet["alignment"] == "monte_carlo").all()
    # Constant 300 W everywhere: every draw peaks at 300/400 of nameplate, never over 300 W.
    np.testing.assert_allclose(result.fleet["peak_share_max"], 0.75)
    assert (result.fleet["exceedance_max"] == 0).all()
    # the sized factor says over how long each draw's peak is taken (a longer timeline has a
    # higher peak, so a lower factor): the fleet's timeline, fleet.horizon_s here
    sized = result.comparison[result.comparison["reference"] == "polca"].iloc[0]["note"]
    assert cfg.fleet.horizon_s == result.summary["horizon_s"] == 600.0
    said = "peak (each draw's highest window over its 600 s: the factor holds per that long)"
    assert said in sized
    forced = analyze_fleet([a, b], config(alignment="wall_clock"))
    assert forced.summary["common_bins"] == 0
    assert np.isnan(forced.fleet["peak_share_mean"]).all()


def test_a_monte_carlo_fleet_is_the_same_whatever_order_its_runs_are_named_in(tmp_path):
    """The draws index the runs, so the runs named in another order (a shell glob's, another
    folder's) drew another fleet: 1.12054 against 1.11981 on the planner's example logs."""
    runs = [
        counter_run(tmp_path, "a", [(20.0, 390.0), (60.0, 120.0)]),
        counter_run(tmp_path, "b", [(45.0, 150.0), (60.0, 380.0)], start=START + 10_000),
        counter_run(tmp_path, "c", [(10.0, 60.0), (60.0, 330.0)], start=START + 20_000, gpus=1),
    ]
    forward = analyze_fleet(runs, config(n_gpus=8))
    backward = analyze_fleet(runs[::-1], config(n_gpus=8))
    assert forward.summary["alignment"] == "monte_carlo"
    pd.testing.assert_frame_equal(forward.fleet, backward.fleet)
    pd.testing.assert_frame_equal(forward.scaling, backward.scaling)
    assert forward.summary["factor"] == backward.summary["factor"]


def test_a_fleet_of_runs_shorter_than_the_sizing_window_says_it_repeats_them(tmp_path):
    """Runs of 4 s in a fleet sized at 5 s over a 60 s timeline: its 5 s figures repeat the
    runs end to end, so ``chosen_window_fits`` is false and the comparison says so (it was
    true: the timeline, not the runs, held the window); runs of 60 s fit as before."""
    short = [
        counter_run(tmp_path, name, [(2.0, 300.0), (4.0, 100.0)], seconds=4.0)
        for name in ("a", "b")
    ]
    result = analyze_fleet(short, config(horizon_s=60.0))
    summary = result.summary
    assert summary["alignment_reason"] == (
        "a spans 4 s from its first complete 0.5 s energy bin to its last, less than the "
        "longest window (30 s)"
    )
    assert result.fleet.set_index("window_s").loc[5.0, "windows_per_draw"] > 0
    assert not summary["chosen_window_fits"] and summary["runs_shorter_than_window"]
    repeated = (
        "every run is shorter than 5 s: the fleet repeats them end to end (each run periodic)"
    )
    assert result.comparison["note"].str.contains(f"window 5 s; {repeated}", regex=False).any()
    long = [
        counter_run(tmp_path, "c", [(60.0, 300.0)]),
        counter_run(tmp_path, "d", [(60.0, 200.0)], start=START + 10_000),
    ]
    fits = analyze_fleet(long, config(horizon_s=60.0)).summary
    assert fits["chosen_window_fits"] and not fits["runs_shorter_than_window"]


# --------------------------------------------------------------------------------------------
# Monte Carlo


def _source(values, name="s", nameplate_w=400.0):
    per_gpu = np.atleast_2d(np.asarray(values, dtype=float))
    return JobSource.from_per_gpu(name, nameplate_w, per_gpu)


def test_a_run_file_source_holds_its_sum_and_reads_a_cut_job_again(tmp_path):
    """A source read from a run's bins keeps one summed series, not its GPUs x bins (a
    node-week of 8 GPUs: 77 MB); a job cut to its first GPUs is read again from the file,
    over the same bins where every GPU has data."""
    ids, n = np.array([0, 2, 5, 6, 7, 9, 11, 12]), 50_000  # GPU numbers with holes
    energy = (np.arange(1, 9)[:, None] * 100.0 + np.arange(n)[None, :] % 7) * 0.5
    rows = pd.DataFrame(
        {
            "bin": np.tile(np.arange(n, dtype=np.int64) + 7_000, len(ids)),
            "gpu": np.repeat(ids, n).astype(np.int32),
            "energy_j": energy.ravel(),
        }
    )
    rows = rows[~((rows["gpu"] == 5) & rows["bin"].between(7_100, 7_109))]  # a gap on one GPU
    info = {"run_id": "node", "n_gpus": 8, "nameplate_w": 400.0, "bin_s": 0.5, "simulated": False}
    info["gpu_indices"] = list(range(8))
    path = tmp_path / "bins.parquet"
    write_parquet_atomic(path, rows, metadata={BINS_METADATA_KEY: json.dumps(info).encode()})
    complete = ~np.isin(np.arange(n), np.arange(100, 110))

    load_job_source(read_run_bins(path))  # a first read also loads pyarrow's modules
    tracemalloc.start()
    source = load_job_source(read_run_bins(path))
    held_bytes, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert held_bytes < 2 * n * 8  # the sum (n float64) and little else; per-GPU bins: 8 n
    assert (source.n_gpus, source.length, source.joins) == (8, n - 10, 1)
    np.testing.assert_allclose(source.series(), energy[:, complete].sum(axis=0))
    for gpus in (3, 1, 7):
        np.testing.assert_allclose(source.series(gpus), energy[:gpus, complete].sum(axis=0))


def test_add_shifted_matches_roll_and_tiling():
    series = np.arange(7.0)
    for horizon in (3, 7, 20):
        for offset in range(7):
            total = np.zeros(horizon)
            add_shifted(total, series, offset)
            expected = np.resize(np.roll(series, offset), horizon)
            np.testing.assert_array_equal(total, expected)


@pytest.mark.parametrize("sizes", [[1], [4], [1, 3, 4], [8, 2]])
def test_draw_jobs_fill_the_fleet_exactly(sizes):
    sources = [_source(np.ones((g, 10))) for g in sizes]
    mc = MonteCarloFleet(sources, None, np.random.default_rng(0))
    gpus = np.array(sizes)
    for n in (1, 5, 16, 1000, 100_001):
        counts, partial = mc.draw_jobs(n)
        total = int((counts * gpus).sum()) + (partial[1] if partial else 0)
        assert total == n
        if partial:
            assert 0 < partial[1] < gpus[partial[0]]


def test_a_fleet_of_each_source_once_holds_every_source_in_every_draw():
    """Without replacement (the planner's fleet of its traces), every draw is each source once
    at a random offset: a 380 W and a 200 W source always sum to 580 of 800 W; with
    replacement a draw can hold either twice."""
    sources = [_source(np.full(20, 190.0)), _source(np.full(30, 100.0))]  # J per 0.5 s bin
    once = MonteCarloFleet(sources, 60, np.random.default_rng(0), replace=False)
    counts, partial = once.draw_jobs(2)
    assert counts.tolist() == [1, 1] and partial is None
    np.testing.assert_allclose(once.run(2, 50, [0.5, 5.0], 0.5, 300.0).peak_share, 0.725)
    with pytest.raises(ValueError, match="expected each source once, the sources' 2 GPUs"):
        once.draw_jobs(3)
    drawn = MonteCarloFleet(sources, 60, np.random.default_rng(0))
    assert {0.5, 0.95} <= set(np.round(drawn.run(2, 50, [0.5], 0.5, 300.0).peak_share[:, 0], 3))


def test_fft_and_direct_sums_agree(monkeypatch):
    rng = np.random.default_rng(5)
    sources = [_source(rng.uniform(0, 200, (2, 50))), _source(rng.uniform(0, 200, (1, 37)))]
    results = []
    for limit in (10**9, 0):
        monkeypatch.setattr(monte_carlo, "DIRECT_MAX_COPIES", limit)
        monkeypatch.setattr(monte_carlo, "DIRECT_WORK_PER_TRANSFORM", float(limit))
        mc = MonteCarloFleet(sources, 60, np.random.default_rng(11))
        results.append([mc.fleet_energy(n) for n in (3, 40, 1001)])
    for (direct, np_a), (fft, np_b) in zip(*results, strict=True):
        np.testing.assert_allclose(direct, fft, rtol=1e-9)
        assert np_a == np_b


def test_a_source_long_against_the_horizon_is_summed_copy_by_copy(monkeypatch):
    """A week of 0.5 s bins is 1.2 M bins, of which a draw uses the horizon's 1,200: 100 copies
    of it were convolved by a transform of the whole source (0.1 s each), where summed directly
    they are 100 slices of 1,200 bins. Above the copies' limit a long source is still summed
    directly, and the two sums agree."""
    rng = np.random.default_rng(4)
    long = _source(rng.uniform(0, 200, (1, 200_000)))
    calls = []
    real_rfft = np.fft.rfft
    monkeypatch.setattr(np.fft, "rfft", lambda *a, **k: calls.append(1) or real_rfft(*a, **k))
    direct, _ = MonteCarloFleet([long], 1200, np.random.default_rng(1)).fleet_energy(100)
    assert not calls  # no transform for 100 copies of a long source
    monkeypatch.setattr(monte_carlo, "DIRECT_MAX_COPIES", 0)
    monkeypatch.setattr(monte_carlo, "DIRECT_WORK_PER_TRANSFORM", 0.0)
    fft, _ = MonteCarloFleet([long], 1200, np.random.default_rng(1)).fleet_energy(100)
    assert calls
    np.testing.assert_allclose(direct, fft, rtol=1e-9)


def test_fleet_energy_brute_force_single_source():
    """With one single-GPU source, a draw is a sum of shifted copies: recompute it by hand."""
    series = np.array([1.0, 5.0, 2.0, 0.0, 3.0])
    mc = MonteCarloFleet([_source(series)], None, np.random.default_rng(3))
    total, nameplate = mc.fleet_energy(30)
    rng = np.random.default_rng(3)
    rng.integers(0, 1, size=31)  # the job draw (one source) consumes the same numbers
    offsets = rng.integers(0, 5, size=30)
    expected = sum(np.roll(series, o) for o in offsets)
    np.testing.assert_allclose(total, expected)
    assert nameplate == 30 * 400.0


def test_jobs_keep_their_gpus_in_step():
    """One 4-GPU job whose GPUs peak together: a 4-GPU fleet is always that job, in step."""
    wave = np.where(np.arange(40) % 10 < 5, 200.0, 0.0)  # 400 W / 0 W per 0.5 s bin
    job = _source(np.tile(wave, (4, 1)))
    stats = MonteCarloFleet([job], None, np.random.default_rng(0)).run(4, 10, [0.5], 0.5, 300.0)
    np.testing.assert_allclose(stats.peak_share, 1.0)
    singles = [_source(wave, name=str(i)) for i in range(4)]
    stats = MonteCarloFleet(singles, None, np.random.default_rng(0)).run(4, 50, [0.5], 0.5, 300.0)
    assert stats.peak_share.mean() < 1.0  # independent phases rarely all peak together


def test_peak_share_falls_toward_the_mean_as_the_fleet_grows():
    wave = np.where(np.arange(400) % 40 < 20, 200.0, 20.0)  # 400 W / 40 W, 20 s period
    mc = MonteCarloFleet([_source(wave)], None, np.random.default_rng(1))
    small = mc.run(16, 20, [0.5], 0.5, 300.0).peak_share.mean()
    big = mc.run(100_000, 5, [0.5], 0.5, 300.0).peak_share
    assert big.max() < small
    assert big.max() == pytest.approx(0.55, abs=0.01)  # mean power 220 W of 400 W


def test_constant_power_fleet_factor():
    mc = MonteCarloFleet([_source(np.full(100, 100.0))], None, np.random.default_rng(0))
    stats = mc.run(16, 5, [0.5, 5.0], 0.5, 300.0)  # 200 W per GPU
    np.testing.assert_allclose(stats.peak_share, 0.5)
    table = stats_table(stats, 16, "monte_carlo", config(), "measured")
    np.testing.assert_allclose(table["factor"], 1 / (0.5 * 1.1))
    assert (table["exceedance_max"] == 0).all()


# --------------------------------------------------------------------------------------------
# comparison, labels, files, errors


def test_comparison_table_study_and_published(tmp_path):
    a = counter_run(tmp_path, "a", [(60.0, 300.0)], model_size="72B")
    b = counter_run(tmp_path, "b", [(30.0, 100.0), (60.0, 380.0)])
    result = analyze_fleet([a, b], config())
    table = result.comparison
    assert set(table["reference"]) == {"study", "polca", "thunderbolt", "flex"}
    assert (table["data"] == "simulated").all()
    study = table[table["reference"] == "study"].set_index("quantity")
    # Run a (72B) alone: 300 W is never strictly above the 300 W cap.
    assert study.loc["72B over-cap share, 0.5 s window", "this_run"] == 0.0
    assert study.loc["72B over-cap share, 0.5 s window", "difference"] == pytest.approx(-23.6)
    assert "72B runs only: a" in study.loc["72B over-cap share, 0.5 s window", "note"]
    assert "not in windows.windows_s" in study.loc["72B over-cap share, 5 min window", "note"]
    peak = study.loc["16-GPU fleet peak demand, share of nameplate"]
    assert peak["this_run"] == pytest.approx(85.0) and peak["difference"] == pytest.approx(29.0)
    polca = table[table["reference"] == "polca"].iloc[0]
    assert polca["this_run"] == pytest.approx(1 / (0.85 * 1.1))
    assert polca["difference"] == pytest.approx(1 / (0.85 * 1.1) - 1.30)
    thunderbolt = reference.PUBLISHED_OVERSUBSCRIPTION[1]
    assert thunderbolt.difference(1.2) == 0.0 and thunderbolt.shown() == "1.09-1.25 x"


def test_runs_not_labelled_72b_are_not_pooled_as_72b(tmp_path):
    a = counter_run(tmp_path, "a", [(60.0, 380.0)])  # above the 300 W cap, but not a 72B run
    b = counter_run(tmp_path, "b", [(60.0, 200.0)])
    table = analyze_fleet([a, b], config()).comparison
    rows = table[table["key"].str.startswith("exceedance_72b")]
    assert len(rows) == 3 and rows["this_run"].isna().all()
    assert rows["note"].str.contains("no input run is labelled 72B").all()
    assert rows["note"].str.contains("fleet/study-mix").all()
    assert (rows["study_origin"] == "abstract").all()


def test_measured_inputs_are_not_labelled_simulated(tmp_path):
    a = counter_run(tmp_path, "a", [(60.0, 300.0)], simulated=False)
    b = counter_run(tmp_path, "b", [(60.0, 200.0)], simulated=False)
    result = analyze_fleet([a, b], config())
    # and they say where their power comes from: the traces' source (it read "measured")
    assert (result.comparison["data"] == "measured (nvml)").all()
    assert result.summary["data"] == "measured (nvml)" and not result.summary["simulated"]


def test_input_errors(tmp_path):
    a = counter_run(tmp_path, "a", [(60.0, 300.0)])
    with pytest.raises(ValueError, match="the same run is given twice"):
        analyze_fleet([a, a / "bins.parquet"], config())
    with pytest.raises(FileNotFoundError, match="run `grpo-power windows"):
        analyze_fleet([tmp_path / "nowhere"], config())
    trace = tmp_path / "a.parquet"  # a trace, not a bins file
    with pytest.raises(ValueError, match="not a windows-stage bins file"):
        analyze_fleet([trace], config())
    other = Config.model_validate(
        {"windows": {"windows_s": [1.0, 30.0], "bin_s": 1.0}, "fleet": {"window_s": 30.0}}
    )
    with pytest.raises(ValueError, match=r"bins of 0\.5 s, but windows\.bin_s is 1\.0 s"):
        analyze_fleet([a], other)


def test_cli_fleet_end_to_end(tmp_path):
    from grpo_power.cli import app

    a = counter_run(tmp_path, "a", [(60.0, 300.0)])
    b = counter_run(tmp_path, "b", [(30.0, 100.0), (60.0, 380.0)], start=START + 5000)
    cfg_path = tmp_path / "config.yaml"
    data = config(scaling_sizes=[16, 100_000], scaling_draws=2).model_dump(mode="json")
    cfg_path.write_text(yaml.safe_dump(data))
    out = tmp_path / "fleet"
    result = CliRunner().invoke(
        app, ["fleet", str(a), str(b / "bins.parquet"), "--out", str(out), "-c", str(cfg_path)]
    )
    assert result.exit_code == 0, result.output
    assert "SIMULATED" in result.output and "monte_carlo" in result.output
    for name in (
        "fleet_windows.csv",
        "fleet_windows.parquet",
        "scaling.csv",
        "scaling.parquet",
        "comparison.csv",
        "comparison.md",
        "summary.json",
    ):
        assert (out / name).exists()
    scaling = pd.read_csv(out / "scaling.csv")
    assert sorted(set(scaling["n_gpus"])) == [16, 100_000]
    assert "(SIMULATED power)" in (out / "comparison.md").read_text()
    bad = CliRunner().invoke(app, ["fleet", str(tmp_path / "a.parquet"), "--out", str(out)])
    assert bad.exit_code == 2 and "not a windows-stage bins file" in bad.output
