"""Windowed exceedance (analysis/windows/) on hand-computed traces, bad input, and properties."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from grpo_power.analysis.windows import (
    WindowAccumulator,
    analyze_trace,
    energy_bins,
    gpu_window_counts,
    prepare_series,
    run_windows,
    series_from_frame,
    window_means,
)
from grpo_power.config import Config
from grpo_power.telemetry.schema import TRACE_COLUMNS, TraceMetadata
from grpo_power.telemetry.store import read_trace, write_trace

# --------------------------------------------------------------------------------------------
# helpers


def counts_by_window(series, windows_s, cap_w, step_s):
    return {c.window_s: c for c in gpu_window_counts(series, windows_s, cap_w, step_s)}


def square_counter_series(cap_w: float = 310.0):
    """Counter-only square wave: 400 W for 2 s, 100 W for 2 s; samples every 0.5 s over 8 s.

    The counter makes each interval's power exactly the wave's value (no trapezoid ramps).
    """
    t_s = np.arange(17) * 0.5
    interval_w = np.where((t_s[:-1] // 2) % 2 == 0, 400.0, 100.0)
    counter_j = 5.0e6 + np.concatenate([[0.0], np.cumsum(interval_w * 0.5)])
    power_w = np.full(17, 250.0)  # deliberately wrong: the counter must win
    return prepare_series(0, t_s, power_w, counter_j, max_gap_s=1.0)


def trace_frame(t_s, power_w, gpu=0, energy_j=None) -> pd.DataFrame:
    n = len(t_s)
    frame = pd.DataFrame({name: np.full(n, np.nan) for name in TRACE_COLUMNS})
    frame["t"] = np.asarray(t_s, dtype=float)
    frame["gpu"] = np.full(n, gpu, dtype=np.int32)
    frame["power_w"] = np.asarray(power_w, dtype=float)
    if energy_j is not None:
        frame["energy_j"] = np.asarray(energy_j, dtype=float)
    return frame


def metadata(period_s=0.5, simulated=False, start_unix_s=1_700_000_000.0, **extra):
    return TraceMetadata(
        run_id="r1",
        source="simulated" if simulated else "nvml",
        gpu_name="NVIDIA A100-SXM4-40GB",
        nameplate_w=400.0,
        sample_period_s=period_s,
        start_unix_s=start_unix_s,
        simulated=simulated,
        **extra,
    )


def config(cap_w=300.0, windows_s=(0.5, 1.0, 5.0, 30.0, 60.0, 300.0), **windows) -> Config:
    return Config.model_validate(
        {
            "cap_w": cap_w,
            "windows": {"windows_s": list(windows_s), **windows},
            "fleet": {"window_s": windows_s[-1]},
        }
    )


def brute_force_means(t_s, power_w, window_s, step_s, max_gap_s):
    """Loop implementation of the definition: grid ends from each segment's first sample, and
    energy accrues at the interval's trapezoid mean power between samples."""
    t_s = list(map(float, t_s))
    p = list(map(float, power_w))
    segments, first = [], 0
    for i in range(1, len(t_s)):
        if t_s[i] - t_s[i - 1] > max_gap_s:
            segments.append((first, i - 1))
            first = i
    segments.append((first, len(t_s) - 1))
    ends, means = [], []
    for a, b in segments:
        k = 0
        while True:
            g = t_s[a] + k * step_s
            if g > t_s[b] + 1e-9 * step_s:
                break
            if g - window_s >= t_s[a] - 1e-9 * step_s:
                lo, energy = g - window_s, 0.0
                for i in range(a, b):
                    overlap = min(t_s[i + 1], g) - max(t_s[i], lo)
                    if overlap > 0:
                        energy += 0.5 * (p[i] + p[i + 1]) * overlap
                ends.append(g)
                means.append(energy / window_s)
            k += 1
    return np.array(ends), np.array(means)


# --------------------------------------------------------------------------------------------
# hand-computed square waves


def test_square_wave_counter_means_known_at_each_window():
    s = square_counter_series()
    assert s.energy_source == "counter"
    ends, means = window_means(s, 2.0, 0.5)
    np.testing.assert_allclose(ends, np.arange(2.0, 8.01, 0.5))
    expected = [400, 325, 250, 175, 100, 175, 250, 325, 400, 325, 250, 175, 100]
    np.testing.assert_allclose(means, expected, rtol=1e-12)
    _, means_4 = window_means(s, 4.0, 0.5)  # one whole period: always the mean
    np.testing.assert_allclose(means_4, 250.0, rtol=1e-12)
    assert len(means_4) == 9

    c = counts_by_window(s, [0.5, 1.0, 2.0, 4.0, 0.75, 10.0], 310.0, 0.5)
    assert (c[0.5].windows, c[0.5].over) == (16, 8)
    assert (c[1.0].windows, c[1.0].over) == (15, 6)
    assert (c[2.0].windows, c[2.0].over) == (13, 5)
    assert (c[4.0].windows, c[4.0].over) == (9, 0)
    assert c[4.0].peak_mean_w == pytest.approx(250.0)
    # 0.75 s is not a whole number of 0.5 s steps: ends at 1.0, 1.5, ..., 8.0; over when more
    # than 0.525 s of the window is at 400 W.
    assert (c[0.75].windows, c[0.75].over) == (15, 6)
    assert c[0.75].peak_mean_w == pytest.approx(400.0)
    # Longer than the trace: no window, exceedance NaN (not 0).
    assert c[10.0].windows == 0 and math.isnan(c[10.0].exceedance)


def test_exceedance_is_not_monotone_in_window_length():
    """1.5x / 0.6x the cap, 1 s period, sampled at 0.1 s: every 1 s window is over the cap (mean
    1.05x) but only some 0.5 s windows are."""
    cap_w = 300.0
    t_s = np.round(np.arange(101) * 0.1, 10)
    power_w = np.where((np.round(t_s * 10) % 10) < 5, 1.5 * cap_w, 0.6 * cap_w)
    s = prepare_series(0, t_s, power_w, None, max_gap_s=0.2)
    c = counts_by_window(s, [0.5, 1.0, 2.0], cap_w, 0.1)
    assert c[1.0].windows == 91 and c[1.0].over == 91
    assert c[1.0].peak_mean_w == pytest.approx(1.05 * cap_w)
    # 0.5 s windows end at k/10 s, k = 5..100; over when k mod 10 is 2..7 (hand count).
    over_05 = sum(1 for k in range(5, 101) if k % 10 in (2, 3, 4, 5, 6, 7))
    assert (c[0.5].windows, c[0.5].over) == (96, over_05)
    assert c[1.0].exceedance == 1.0 > c[0.5].exceedance == pytest.approx(57 / 96)
    _, means = window_means(s, 0.5, 0.1)
    assert means.max() == pytest.approx(423.0) and means.min() == pytest.approx(207.0)


def test_gap_in_the_middle_splits_and_is_reported():
    t_s = np.concatenate([np.arange(21) * 0.5, 20.0 + np.arange(21) * 0.5])  # 10 s gap
    power_w = np.concatenate([np.full(21, 350.0), np.full(21, 200.0)])
    s = prepare_series(3, t_s, power_w, None, max_gap_s=1.0)
    assert s.segments == 2
    c = counts_by_window(s, [5.0, 20.0], 300.0, 0.5)
    assert (c[5.0].windows, c[5.0].over) == (22, 11)  # 11 windows per 10 s segment
    assert c[5.0].peak_mean_w == pytest.approx(350.0)
    assert c[20.0].windows == 0  # a window across the gap would need interpolation

    frame = trace_frame(t_s, power_w, gpu=3)
    trace = _trace(frame, metadata())
    result = analyze_trace(trace, config(windows_s=(5.0, 20.0)))
    gaps = result.gaps
    assert len(gaps) == 2  # one gap x two windows
    row = gaps[gaps["window_s"] == 5.0].iloc[0]
    assert (row["start_s"], row["end_s"], row["gap_s"]) == (10.0, 20.0, 10.0)
    assert row["removed_s"] == pytest.approx(15.0)
    assert row["lost_window_ends"] == 10 and row["samples_unused"] == 0
    row20 = gaps[gaps["window_s"] == 20.0].iloc[0]
    assert row20["samples_unused"] == 21 and row20["removed_s"] == pytest.approx(20.0)
    gpu_rows = result.exceedance[result.exceedance["scope"] == "gpu"].set_index("window_s")
    assert gpu_rows.loc[20.0, "windows"] == 0 and np.isnan(gpu_rows.loc[20.0, "exceedance"])
    assert "shorter than 20 s" in gpu_rows.loc[20.0, "note"]
    assert gpu_rows.loc[5.0, "gap_s"] == pytest.approx(10.0)
    assert gpu_rows.loc[20.0, "samples_unused"] == 42
    # Bins never bridge the gap either.
    assert result.bins["energy_j"].sum() == pytest.approx(350.0 * 10 + 200.0 * 10)


def test_interval_of_exactly_two_periods_is_not_a_gap():
    t_s = np.array([0.0, 0.5, 1.5, 2.0, 3.01])
    s = prepare_series(0, t_s, np.full(5, 100.0), None, max_gap_s=1.0)
    assert s.segments == 2 and list(s.seg_first) == [0, 4]


def test_irregular_timestamps_ramp_exact():
    """Irregular samples of a linear ramp, window ends on samples: means are exact integrals."""
    t_s = np.array([0.0, 0.1, 0.5, 0.6, 1.0, 1.45, 1.5, 1.7, 2.0, 2.35, 2.5, 3.0])
    power_w = 100.0 + 100.0 * t_s
    s = prepare_series(0, t_s, power_w, None, max_gap_s=1.0)
    ends, means = window_means(s, 1.0, 0.5)
    np.testing.assert_allclose(ends, [1.0, 1.5, 2.0, 2.5, 3.0])
    np.testing.assert_allclose(means, 100.0 + 100.0 * (ends - 0.5), rtol=1e-12)
    c = counts_by_window(s, [1.0], 249.0, 0.5)[1.0]
    assert (c.windows, c.over) == (5, 3) and c.peak_mean_w == pytest.approx(350.0)


def test_jittered_square_wave_matches_brute_force():
    rng = np.random.default_rng(7)
    t_s = np.arange(200) * 0.1 + rng.uniform(0.0, 0.02, 200)
    power_w = np.where((t_s % 1.0) < 0.5, 450.0, 180.0)
    s = prepare_series(0, t_s, power_w, None, max_gap_s=0.2)
    for window_s in (0.5, 1.0, 0.35):
        ends, means = window_means(s, window_s, 0.1)
        bf_ends, bf_means = brute_force_means(t_s, power_w, window_s, 0.1, 0.2)
        np.testing.assert_allclose(ends, bf_ends, atol=1e-9)
        np.testing.assert_allclose(means, bf_means, rtol=1e-9)


# --------------------------------------------------------------------------------------------
# energy counter: agreement with power, resets and wraps


def _trapezoid_counter(t_s, power_w, start_j=1.234e6):
    inc = 0.5 * (power_w[1:] + power_w[:-1]) * np.diff(t_s)
    return start_j + np.concatenate([[0.0], np.cumsum(inc)])


def _jittered(n=400, seed=3):
    rng = np.random.default_rng(seed)
    t_s = np.arange(n) * 0.1 + rng.uniform(0.0, 0.01, n)
    power_w = rng.uniform(80.0, 420.0, n)
    return t_s, power_w


def test_counter_and_power_paths_agree():
    t_s, power_w = _jittered()
    by_power = prepare_series(0, t_s, power_w, None, 0.2)
    by_counter = prepare_series(0, t_s, power_w, _trapezoid_counter(t_s, power_w), 0.2)
    assert (by_power.energy_source, by_counter.energy_source) == ("integrated", "counter")
    windows_s = [0.1, 0.5, 1.0, 2.5, 0.45]
    for a, b in zip(
        gpu_window_counts(by_power, windows_s, 250.0, 0.1),
        gpu_window_counts(by_counter, windows_s, 250.0, 0.1),
        strict=True,
    ):
        assert (a.windows, a.over) == (b.windows, b.over)
        assert a.peak_mean_w == pytest.approx(b.peak_mean_w, rel=1e-9)
    for window_s in windows_s:
        np.testing.assert_allclose(
            window_means(by_power, window_s, 0.1)[1],
            window_means(by_counter, window_s, 0.1)[1],
            rtol=1e-9,
        )


@pytest.mark.parametrize("kind", ["reset", "wrap", "missing"])
def test_counter_reset_wrap_and_missing_values(kind):
    t_s, power_w = _jittered()
    counter = _trapezoid_counter(t_s, power_w)
    if kind == "reset":  # driver reload: the counter restarts near zero at sample 150
        counter[150:] = counter[150:] - counter[150] + 3.0
    elif kind == "wrap":  # a 32-bit millijoule counter wrapping at 2**32 mJ
        counter = np.mod(counter + 4_294_967.296 - counter[200], 4_294_967.296)
    else:
        counter[[10, 11, 300]] = np.nan
    reference = prepare_series(0, t_s, power_w, _trapezoid_counter(t_s, power_w), 0.2)
    s = prepare_series(0, t_s, power_w, counter, 0.2)
    assert s.energy_source == "mixed"
    if kind == "missing":
        assert s.counter_resets == 0 and s.fallback_intervals == 5  # 3 + 2 intervals
    else:
        assert s.counter_resets == 1 and s.fallback_intervals == 1
    np.testing.assert_allclose(np.diff(s.energy_j), np.diff(reference.energy_j), rtol=1e-9)
    windows_s = [0.5, 2.0]
    assert [(c.windows, c.over) for c in gpu_window_counts(s, windows_s, 250.0, 0.1)] == [
        (c.windows, c.over) for c in gpu_window_counts(reference, windows_s, 250.0, 0.1)
    ]


# --------------------------------------------------------------------------------------------
# bad input


def _trace(frame, meta, tmp_path=None):
    from grpo_power.telemetry.store import Trace

    return Trace(frame=frame, metadata=meta, path="mem.parquet", complete=True)


def test_empty_trace_is_an_error(tmp_path):
    path = write_trace(tmp_path / "empty.parquet", trace_frame([], []), metadata())
    with pytest.raises(ValueError, match=r"empty\.parquet: the trace has no samples"):
        analyze_trace(read_trace(path), config())


def test_nan_power_is_an_error_naming_gpu_and_time():
    frame = trace_frame([0.0, 0.5, 1.0, 1.5], [100.0, np.nan, 120.0, np.nan], gpu=2)
    with pytest.raises(
        ValueError,
        match=r"x\.parquet: power_w: .* 2 sample\(s\) with NaN .* gpu 2 \(first at t = 0\.5 s",
    ):
        series_from_frame(frame, 2.0, 0.5, "x.parquet")


def test_negative_power_is_an_error():
    with pytest.raises(
        ValueError,
        match=r"power_w: expected watts >= 0, got negative power -5 W on gpu 0 at t = 1 s",
    ):
        prepare_series(0, np.array([0.0, 0.5, 1.0]), np.array([1.0, 2.0, -5.0]), None, 1.0)


@pytest.mark.parametrize(
    ("t_s", "message"),
    [
        ([0.0, 0.5, 0.5, 1.0], r"gpu 0: duplicated timestamp\(s\) \(1 in all\): t goes from 0\.5"),
        ([0.0, 0.5, 1.0, 0.7], r"gpu 0: decreasing timestamp\(s\) .* from 1 s to 0\.7 s"),
        ([0.0, np.inf, 1.0, 1.5], r"t is not a finite number at sample 1"),
    ],
)
def test_bad_timestamps_are_errors(t_s, message):
    with pytest.raises(ValueError, match=message):
        series_from_frame(trace_frame(t_s, [100.0] * 4), 2.0, 0.5, "bad.parquet")


def test_window_longer_than_trace_is_documented_nan():
    frame = trace_frame(np.arange(11) * 0.5, np.full(11, 350.0))
    result = analyze_trace(_trace(frame, metadata()), config(windows_s=(1.0, 300.0)))
    table = result.exceedance.set_index(["scope", "window_s"])
    for scope in ("gpu", "run_pooled", "run_total"):
        assert table.loc[(scope, 300.0), "windows"] == 0
        assert np.isnan(table.loc[(scope, 300.0), "exceedance"])
        assert table.loc[(scope, 300.0), "note"]
    assert table.loc[("gpu", 1.0), "exceedance"] == 1.0


def test_single_sample_trace_has_no_window():
    s = prepare_series(0, np.array([1.0]), np.array([300.0]), None, 1.0)
    assert gpu_window_counts(s, [0.5], 100.0, 0.5)[0].windows == 0
    assert energy_bins(s, 1e9, 0.5)[0].size == 0


# --------------------------------------------------------------------------------------------
# per-run results, bins and files


def _two_gpu_frame(n=241, period_s=0.5):
    """Two GPUs interleaved like the sampler writes them; GPU 1 at twice GPU 0's power."""
    t = np.arange(n) * period_s
    power = 150.0 + 200.0 * ((t // 5) % 2)  # 150 W / 350 W, 10 s period
    frames = [trace_frame(t, power, gpu=0), trace_frame(t + 0.001, power * 1.1, gpu=1)]
    frame = pd.concat(frames).sort_values(["t", "gpu"], kind="stable").reset_index(drop=True)
    return frame


def test_interleaved_and_grouped_layouts_agree():
    frame = _two_gpu_frame()
    grouped = frame.sort_values("gpu", kind="stable").reset_index(drop=True)
    a = series_from_frame(frame, 2.0, 0.5)
    b = series_from_frame(grouped, 2.0, 0.5)
    assert [s.gpu for s in a] == [s.gpu for s in b] == [0, 1]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.t_s, y.t_s)
        np.testing.assert_array_equal(x.energy_j, y.energy_j)


def test_energy_bins_absolute_grid_hand_computed():
    t_s = np.round(np.arange(101) * 0.1, 10)
    power_w = np.where((np.round(t_s * 10) % 10) < 5, 450.0, 180.0)
    s = prepare_series(0, t_s, power_w, None, 0.2)
    index, energy = energy_bins(s, 1000.25, 0.5)  # grid phase: bins start at t = 0.25, 0.75...
    assert index[0] == 2001 and len(index) == 19
    np.testing.assert_allclose(energy[:4], [144.0, 171.0, 144.0, 171.0])
    np.testing.assert_array_equal(np.diff(index), 1)


def test_analyze_trace_run_rows_and_files(tmp_path):
    frame = _two_gpu_frame()
    path = write_trace(tmp_path / "run.parquet", frame, metadata(simulated=True, model_size="72B"))
    out = tmp_path / "w"
    result = run_windows(path, out, config(cap_w=320.0, windows_s=(0.5, 5.0, 10.0)))
    table = result.exceedance
    assert set(table["scope"]) == {"gpu", "run_pooled", "run_total"}
    assert (table["data"] == "simulated").all()
    gpu = table[table["scope"] == "gpu"].set_index(["gpu", "window_s"])
    pooled = table[table["scope"] == "run_pooled"].set_index("window_s")
    for w in (0.5, 5.0, 10.0):
        assert pooled.loc[w, "windows"] == gpu.loc[(0, w), "windows"] + gpu.loc[(1, w), "windows"]
        assert pooled.loc[w, "windows_over"] == (
            gpu.loc[(0, w), "windows_over"] + gpu.loc[(1, w), "windows_over"]
        )
    # 10 s windows cover a whole period: mean 250 W (GPU 0) and 275 W (GPU 1), under 320 W.
    assert gpu.loc[(0, 10.0), "windows_over"] == 0
    assert gpu.loc[(1, 10.0), "peak_mean_w"] == pytest.approx(275.0, rel=1e-3)
    total = table[table["scope"] == "run_total"].set_index("window_s")
    assert total.loc[10.0, "cap_w"] == 640.0
    assert total.loc[10.0, "peak_mean_w"] == pytest.approx(525.0, rel=2e-3)
    assert result.summary["model_size"] == "72B" and result.summary["simulated"]
    # the trace's GPU numbers, a list, named apart from the GPU counts every other file's
    # `gpus` holds (it was `gpus` here too); the gaps say the trace's data label
    assert result.summary["gpu_indices"] == [0, 1] and "gpus" not in result.summary
    assert (result.gaps["data"] == "simulated").all()
    for name in (
        "exceedance.csv",
        "exceedance.parquet",
        "gaps.csv",
        "bins.parquet",
        "summary.json",
    ):
        assert (out / name).exists()
    assert not list(out.glob("*.tmp"))
    bins = pd.read_parquet(out / "bins.parquet")
    assert (np.diff(bins["bin"].to_numpy()) >= 0).all()
    # Bins hold each GPU's energy: equal to the trapezoid over the bins' span.
    g0 = bins[bins["gpu"] == 0]
    assert g0["energy_j"].sum() == pytest.approx(len(g0) * 0.5 * 250.0, rel=0.02)


@pytest.mark.parametrize("period_s", [0.1, 0.2])
def test_power_at_the_cap_is_never_above_it(tmp_path, period_s):
    """An hour at exactly the cap: no window is above it, per GPU nor summed, at any length (the
    rounding of differences of cumulative energy counted up to 83 % of windows over), while a
    milliwatt above the cap puts every window over."""
    t_s = np.round(np.arange(round(3600 / period_s)) * period_s, 6)
    windows_s = (0.5, 1.0, 5.0, 30.0, 60.0, 300.0)
    for power_w, share in ((320.0, 0.0), (320.001, 1.0)):
        frame = pd.concat(
            [trace_frame(t_s, np.full(len(t_s), power_w), gpu=g) for g in (0, 1)],
            ignore_index=True,
        )
        path = write_trace(tmp_path / f"{power_w}.parquet", frame, metadata(period_s=period_s))
        trace = read_trace(path)
        table = analyze_trace(trace, config(cap_w=320.0, windows_s=windows_s)).exceedance
        for scope in ("gpu", "run_total"):
            rows = table[table["scope"] == scope]
            assert len(rows) >= len(windows_s), scope
            assert (rows["exceedance"] == share).all(), (power_w, scope, rows["exceedance"])


def test_cli_windows(tmp_path):
    from grpo_power.cli import app

    path = write_trace(tmp_path / "run.parquet", _two_gpu_frame(), metadata(simulated=True))
    runner = CliRunner()
    result = runner.invoke(app, ["windows", str(path), "--out", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    assert "SIMULATED" in result.output and "run_pooled" in result.output
    bad = write_trace(tmp_path / "dup.parquet", trace_frame([0, 0.5, 0.5], [1, 2, 3]), metadata())
    result = runner.invoke(app, ["windows", str(bad), "--out", str(tmp_path / "w2")])
    assert result.exit_code == 2 and "duplicated" in result.output


def test_a_trace_recorded_under_another_cap_says_so_and_can_be_judged_by_it(tmp_path):
    """A ``PowerMonitor(cap_w=250)`` trace keeps its cap; ``windows`` judges it by the config's
    320 W, with a note naming the recorded cap, or by ``--cap-w 250`` (there was no way to
    give it, and nothing said the cap differed)."""
    import time

    from grpo_power import PowerMonitor
    from grpo_power.cli import app

    path = tmp_path / "power.parquet"
    monitor = PowerMonitor(gpus=[0], period_s=0.05, source="simulated", cap_w=250, trace=path)
    with monitor, monitor.window("rollout", phase="generate"):
        time.sleep(1.5)
    runner = CliRunner()
    shares = {}
    for extra in ([], ["--cap-w", "250"]):
        out = tmp_path / f"w{len(extra)}"
        result = runner.invoke(app, ["windows", str(path), "--out", str(out), *extra])
        assert result.exit_code == 0, result.output
        table = pd.read_csv(out / "exceedance.csv").set_index(["scope", "window_s"])
        shares[len(extra)] = table.loc[("run_pooled", 0.5), "exceedance"]
        recorded = "recorded under a cap of 250 W per GPU" in result.output
        assert recorded == (not extra), result.output
    assert shares[0] == 0.0 and shares[2] > 0.9  # decode draws ~275 W: under 320, over 250


def test_a_trace_of_another_part_says_whose_cap_judges_it(tmp_path):
    """An H100 trace (700 W) under the default A100 config was judged by its 320 W cap with no
    word (every window above it); it is still judged so, with a note naming both parts, and a
    --cap-w above the trace's nameplate is refused, naming the trace."""
    from grpo_power.cli import app

    frame = trace_frame(np.arange(0.0, 60.0, 0.5), np.full(120, 450.0))
    meta = metadata().model_copy(update={"gpu_name": "NVIDIA H100 80GB HBM3", "nameplate_w": 700.0})
    path = write_trace(tmp_path / "h100.parquet", frame, meta)
    runner = CliRunner()
    result = runner.invoke(app, ["windows", str(path), "--out", str(tmp_path / "w")])
    assert result.exit_code == 0, result.output
    assert (
        "the trace's NVIDIA H100 80GB HBM3 (700 W) is judged by the config's cap_w, 320 W, set "
        "for its NVIDIA A100-SXM4-80GB (400 W)" in " ".join(result.output.split())
    )
    given = runner.invoke(
        app, ["windows", str(path), "--out", str(tmp_path / "w2"), "--cap-w", "560"]
    )
    assert given.exit_code == 0 and "is judged by the config's cap_w" not in given.output
    over = runner.invoke(
        app, ["windows", str(path), "--out", str(tmp_path / "w3"), "--cap-w", "800"]
    )
    assert over.exit_code == 2
    assert "h100.parquet: --cap-w: expected at most the trace's nameplate, 700 W" in over.output
    assert not (tmp_path / "w3").exists()


def test_a_gpu_sampled_slower_than_the_rest_of_its_trace_keeps_its_energy(tmp_path):
    """Two hosts scraped at different intervals in one log: GPU 0 every 0.1 s at 300 W, GPU 1
    every 1 s at 350 W, for 120 s. The trace's period is the fast GPU's, under which every
    interval of GPU 1 was a gap: 0 J and no windows for it, the run's share above a 320 W cap
    0 instead of half. Each GPU's gaps are judged by its own period."""
    from grpo_power.telemetry.summary import summarize_trace

    fast, slow = np.arange(0.0, 120.0, 0.1), np.arange(0.0, 120.0, 1.0)
    frame = pd.concat(
        [trace_frame(fast, np.full(len(fast), 300.0)), trace_frame(slow, np.full(120, 350.0), 1)]
    ).sort_values(["t", "gpu"], kind="stable")
    trace = _trace(frame, metadata(period_s=0.1))
    energy_j = {s.gpu: s.energy_j for s in summarize_trace(trace)}
    assert energy_j[1] == pytest.approx(350.0 * 119.0)
    result = analyze_trace(trace, config(cap_w=320.0, windows_s=(30.0,)))
    rows = result.exceedance.set_index(["scope", "gpu"])
    assert rows.loc[("gpu", 1), "exceedance"] == 1.0  # all its windows, above the cap
    pooled = rows.loc[("run_pooled", slice(None)), "exceedance"].iloc[0]
    assert pooled == pytest.approx(0.5, abs=0.01)  # half the GPU windows (each slides 0.1 s)


def test_windows_shorter_than_the_sample_period_are_named(tmp_path, config):
    """A scrape every 15 s (Prometheus) holds each sample for 15 s: the 0.5, 1 and 5 s windows
    it gives are not resolved, and the summary says so; a 0.5 s trace's windows all are."""
    from grpo_power.analysis.windows.stage import run_windows

    t = np.arange(0.0, 600.0, 15.0)
    coarse = write_trace(tmp_path / "coarse.parquet", trace_frame(t, 200 + t % 7), metadata(15.0))
    summary = run_windows(coarse, tmp_path / "w15", config).summary
    (note,) = [n for n in summary["notes"] if "not resolved" in n]
    assert "windows of 0.5, 1, 5 s are shorter than the sample period 15 s" in note
    fine = write_trace(tmp_path / "fine.parquet", _two_gpu_frame(), metadata())
    assert not any(
        "not resolved" in n for n in run_windows(fine, tmp_path / "w", config).summary["notes"]
    )


# --------------------------------------------------------------------------------------------
# property tests


@st.composite
def random_trace(draw):
    n = draw(st.integers(2, 40))
    dt = draw(st.lists(st.floats(0.02, 0.35), min_size=n - 1, max_size=n - 1))
    power = draw(st.lists(st.floats(0.0, 500.0), min_size=n, max_size=n))
    t0 = draw(st.floats(0.0, 100.0))
    t_s = t0 + np.concatenate([[0.0], np.cumsum(dt)])
    return t_s, np.array(power)


@settings(max_examples=150, deadline=None)
@given(
    random_trace(),
    st.sampled_from([0.1, 0.2, 0.3, 0.45, 1.0]),
    st.sampled_from([0.05, 0.1, 0.15]),
)
def test_window_means_match_brute_force_and_stay_within_samples(trace, window_s, step_s):
    t_s, power_w = trace
    max_gap_s = 0.2  # period 0.1 s: random intervals above 0.2 s are gaps
    s = prepare_series(0, t_s, power_w, None, max_gap_s)
    ends, means = window_means(s, window_s, step_s)
    bf_ends, bf_means = brute_force_means(t_s, power_w, window_s, step_s, max_gap_s)
    assert len(ends) == len(bf_ends)
    np.testing.assert_allclose(ends, bf_ends, atol=1e-9)
    np.testing.assert_allclose(means, bf_means, rtol=1e-9, atol=1e-9)
    # Each mean lies between the smallest and largest sample of the intervals it touches.
    for end, mean in zip(ends, means, strict=True):
        lo = np.searchsorted(t_s, end - window_s, side="right") - 1
        hi = np.searchsorted(t_s, end - 1e-12, side="left")
        touched = power_w[max(lo, 0) : hi + 1]
        assert touched.min() - 1e-6 <= mean <= touched.max() + 1e-6
    # The fast counter agrees with the materialised windows.
    cap_w = 250.0
    c = gpu_window_counts(s, [window_s], cap_w, step_s)[0]
    assert c.windows == len(means)
    # a window whose mean is the cap to rounding may fall either side of it
    tie = 1e-9 * cap_w
    assert np.count_nonzero(means > cap_w + tie) <= c.over <= np.count_nonzero(means > cap_w - tie)
    if len(means):
        assert c.peak_mean_w == pytest.approx(means.max(), rel=1e-9, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.0, 1000.0), min_size=1, max_size=80),
    st.lists(st.booleans(), min_size=80, max_size=80),
    st.lists(st.integers(1, 20), min_size=1, max_size=6),
    st.integers(1, 30),
)
def test_window_accumulator_chunking_matches_brute_force(energy, valid, windows, chunk):
    energy = np.array(energy)
    valid = np.array(valid[: len(energy)]) | (np.arange(len(energy)) % 7 != 0)
    windows = sorted(set(windows))
    acc = WindowAccumulator(windows, 0.5, cap_w=900.0)
    for start in range(0, len(energy), chunk):
        acc.update(energy[start : start + chunk], valid[start : start + chunk])
    for w, result in zip(windows, acc.results(), strict=True):
        sums = [
            energy[k - w + 1 : k + 1].sum()
            for k in range(w - 1, len(energy))
            if valid[k - w + 1 : k + 1].all()
        ]
        assert result.windows == len(sums)
        assert result.over == sum(1 for x in sums if x > 900.0 * w * 0.5)
        if sums:
            assert result.peak_mean_w == pytest.approx(max(sums) / (w * 0.5))
        else:
            assert math.isnan(result.peak_mean_w)
