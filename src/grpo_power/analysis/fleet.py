"""Fleet power from per-run energy bins (stage 6, DESIGN.md sections 1 and 5).

Input: the ``bins.parquet`` that the windows stage writes for each run: every GPU's energy in
wall-clock bins of ``bin_s`` (absolute grid, bins cut by gaps left out). A fleet's window mean is
a sum of whole bins, so fleets are analysed exactly from these files, one time partition at a
time, without loading any trace.

Two ways to build a fleet of ``n_gpus`` GPUs:

- ``wall_clock``: the input runs ran concurrently and together are the fleet. Their bins are
  summed bin by bin, reading ``partition_bins`` bins of every file at a time (row-group pruning on
  the sorted ``bin`` column), so memory stays bounded whatever the fleet's size on disk. A window
  counts only where every GPU has data (never interpolated).
- ``monte_carlo``: fleets are drawn: runs (jobs, with all their GPUs, which stay synchronous) are
  drawn with replacement until the fleet has ``n_gpus`` GPUs (the last one cut to fit), and each
  gets a uniformly random start offset. Each job's series is its bins where all its GPUs have
  data, gaps removed, and treated as periodic (a job restarts when it ends). The fleet's summed
  series is exact: offsets are histogrammed per job and the sum of shifted copies is a circular
  convolution (direct shifted adds for a few copies, FFT for many), so a draw of 100,000 GPUs
  costs about as much as one of 100 and memory does not grow with the fleet.

Results: per window, the fleet's exceedance of ``n_gpus x cap_w`` and its peak window mean as a
share of nameplate, with the spread over draws; the oversubscription factor
``nameplate / (peak x (1 + margin))`` at the chosen window (peak: the ``peak_quantile`` of the
draws); the scaling study over fleet sizes; and the comparison with the reference study and with
published oversubscription results. Everything computed from simulated traces is labelled
simulated.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from grpo_power.analysis import reference
from grpo_power.analysis.windows import (
    BINS_METADATA_KEY,
    WindowAccumulator,
    WindowCounts,
    window_bins_of,
)
from grpo_power.config import Config
from grpo_power.stage_files import require_keys

DIRECT_MAX_COPIES = 8  # above this many copies of one job in a draw, convolve by FFT
DRAW_CHUNK = 1 << 20  # jobs drawn per random-number chunk (bounds memory for huge fleets)


@dataclass(frozen=True)
class RunBins:
    """A run's ``bins.parquet`` and what its metadata says (nothing else is read)."""

    path: Path
    info: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.info["run_id"])

    @property
    def n_gpus(self) -> int:
        return int(self.info["n_gpus"])

    @property
    def nameplate_w(self) -> float:
        return float(self.info["nameplate_w"])

    @property
    def simulated(self) -> bool:
        return bool(self.info.get("simulated"))

    @property
    def bin_s(self) -> float:
        return float(self.info["bin_s"])

    @property
    def bin_range(self) -> tuple[int, int] | None:
        r = self.info.get("bin_range")
        return None if r is None else (int(r[0]), int(r[1]))


def bins_path(path: Path | str) -> Path:
    """``path`` itself if it is a file, else ``path/bins.parquet`` (a windows output folder)."""
    path = Path(path)
    return path / "bins.parquet" if path.is_dir() else path


def read_run_bins(path: Path | str) -> RunBins:
    """Open a windows-stage ``bins.parquet`` (or its folder) and read its metadata."""
    given = Path(path)
    path = bins_path(path)
    if not path.exists() and (given / "trace.parquet").exists():
        raise FileNotFoundError(
            f"{given}: a run folder (it holds trace.parquet), not a windows output; run "
            f"`grpo-power windows {given / 'trace.parquet'} --out DIR` first and pass DIR"
        )
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such file; run `grpo-power windows TRACE --out DIR` first and pass DIR "
            "or DIR/bins.parquet"
        )
    try:
        schema = pq.read_schema(path)
    except Exception as error:  # pyarrow raises several types for a non-Parquet file
        raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
    raw = (schema.metadata or {}).get(BINS_METADATA_KEY)
    if raw is None and {"t", "gpu", "power_w"} <= set(schema.names):
        raise ValueError(
            f"{path}: a trace, not a windows-stage bins file; expected the bins.parquet written "
            f"by `grpo-power windows`: run `grpo-power windows {path.name} --out DIR` first and "
            "pass DIR"
        )
    if raw is None:
        raise ValueError(
            f"{path}: not a windows-stage bins file (no '{BINS_METADATA_KEY.decode()}' "
            "metadata); expected the bins.parquet written by `grpo-power windows`"
        )
    expected = "the bins.parquet written by `grpo-power windows`"
    try:
        info = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: {BINS_METADATA_KEY.decode()} metadata: expected {expected}, got invalid "
            f"JSON ({error.msg})"
        ) from None
    if not isinstance(info, dict):
        raise ValueError(f"{path}: {BINS_METADATA_KEY.decode()} metadata: expected a JSON object")
    required = ("run_id", "n_gpus", "nameplate_w", "bin_s")
    require_keys(info, required, f"{path}: {BINS_METADATA_KEY.decode()} metadata", expected)
    missing = [n for n in ("bin", "gpu", "energy_j") if n not in schema.names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected bin, gpu, energy_j")
    return RunBins(path=path, info=info)


def check_compatible(runs: Sequence[RunBins], bin_s: float) -> None:
    """All runs must share the configured bin width (windows are whole bins)."""
    if not runs:
        raise ValueError("no runs given to the fleet stage")
    for run in runs:
        if abs(run.bin_s - bin_s) > 1e-12 * bin_s:
            raise ValueError(
                f"{run.path}: bins of {run.bin_s} s, but windows.bin_s is {bin_s} s; rerun the "
                "windows stage with the same config"
            )


@dataclass
class JobSource:
    """One run as a Monte Carlo source: its GPUs' summed energy per bin, gaps removed.

    ``per_gpu_j`` (GPUs x bins) is kept to build a job cut to fewer GPUs.
    """

    run_id: str
    nameplate_w: float
    per_gpu_j: np.ndarray
    joins: int
    _total_j: np.ndarray | None = None
    _spectrum: np.ndarray | None = None
    _partial: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def n_gpus(self) -> int:
        return self.per_gpu_j.shape[0]

    @property
    def length(self) -> int:
        return self.per_gpu_j.shape[1]

    def series(self, gpus: int | None = None) -> np.ndarray:
        """Summed energy per bin of all GPUs, or of the first ``gpus`` of them, J."""
        if gpus is None or gpus >= self.n_gpus:
            if self._total_j is None:
                self._total_j = self.per_gpu_j.sum(axis=0)
            return self._total_j
        if gpus not in self._partial:
            self._partial[gpus] = self.per_gpu_j[:gpus].sum(axis=0)
        return self._partial[gpus]

    def spectrum(self) -> np.ndarray:
        """Real FFT of the summed series (cached)."""
        if self._spectrum is None:
            self._spectrum = np.fft.rfft(self.series())
        return self._spectrum


def load_job_source(run: RunBins) -> JobSource:
    """Read a run's bins and keep the bins where all its GPUs have data, in time order."""
    table = pq.read_table(run.path, columns=["bin", "gpu", "energy_j"])
    index = table.column("bin").to_numpy()
    gpu = table.column("gpu").to_numpy()
    energy = table.column("energy_j").to_numpy()
    if len(index) == 0:
        raise ValueError(
            f"{run.path}: the run has no complete bins (trace shorter than one {run.bin_s} s bin "
            "or cut by gaps everywhere)"
        )
    gpus = np.unique(gpu)
    lo = int(index.min())
    rel = index - lo
    size = int(rel.max()) + 1
    present = np.bincount(rel, minlength=size)
    complete = np.flatnonzero(present == len(gpus))
    if len(complete) == 0:
        raise ValueError(f"{run.path}: no bin where all {len(gpus)} GPUs have data")
    per_gpu = np.zeros((len(gpus), len(complete)))
    slot = np.searchsorted(gpus, gpu)
    position = np.full(size, -1, dtype=np.int64)
    position[complete] = np.arange(len(complete))
    where = position[rel]
    keep = where >= 0
    per_gpu[slot[keep], where[keep]] = energy[keep]
    joins = int(np.count_nonzero(np.diff(complete) > 1))
    return JobSource(run.run_id, run.nameplate_w, per_gpu, joins)


@dataclass
class DrawStats:
    """Per-window results of many fleets (draws), as arrays over draws."""

    window_s: list[float]
    windows: np.ndarray  # (draws, windows)
    over: np.ndarray
    peak_w: np.ndarray
    nameplate_w: np.ndarray  # (draws,)

    @property
    def exceedance(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.windows > 0, self.over / np.maximum(self.windows, 1), np.nan)

    @property
    def peak_share(self) -> np.ndarray:
        return self.peak_w / self.nameplate_w[:, None]


class MonteCarloFleet:
    """Draws fleets of a given size from job sources with random start offsets.

    Args:
        sources: the runs to draw from.
        horizon_bins: length of each fleet's timeline in bins (None: the shortest source).
        rng: the random generator (seeded by the caller).
    """

    def __init__(
        self, sources: Sequence[JobSource], horizon_bins: int | None, rng: np.random.Generator
    ) -> None:
        if not sources:
            raise ValueError("no job sources to draw fleets from")
        self.sources = list(sources)
        self.rng = rng
        self.horizon_bins = horizon_bins or min(s.length for s in sources)
        self.gpus = np.array([s.n_gpus for s in sources])

    def draw_jobs(self, n_gpus: int) -> tuple[np.ndarray, tuple[int, int] | None]:
        """Copies of each job in one fleet, and the (job, gpus) of a last job cut to fit."""
        counts = np.zeros(len(self.sources), dtype=np.int64)
        remaining = n_gpus
        while remaining > 0:
            size = min(DRAW_CHUNK, remaining // int(self.gpus.min()) + 1)
            ids = self.rng.integers(0, len(self.sources), size=size)
            filled = np.cumsum(self.gpus[ids])
            done = int(np.searchsorted(filled, remaining, side="left"))
            if done < len(ids):  # the fleet is full within this chunk
                full = ids[:done]
                counts += np.bincount(full, minlength=len(self.sources))
                used = int(filled[done - 1]) if done else 0
                last = int(ids[done])
                left = remaining - used
                if left == self.gpus[last]:
                    counts[last] += 1
                    return counts, None
                return counts, (last, left)
            counts += np.bincount(ids, minlength=len(self.sources))
            remaining -= int(filled[-1])
        return counts, None

    def _offsets(self, copies: int, length: int) -> np.ndarray:
        """Histogram of ``copies`` uniform start offsets over ``length`` bins (streamed)."""
        hist = np.zeros(length, dtype=np.int64)
        left = copies
        while left > 0:
            chunk = min(left, DRAW_CHUNK)
            hist += np.bincount(self.rng.integers(0, length, size=chunk), minlength=length)
            left -= chunk
        return hist

    def fleet_energy(self, n_gpus: int) -> tuple[np.ndarray, float]:
        """One drawn fleet: its summed energy per bin over the horizon (J) and nameplate (W)."""
        counts, partial = self.draw_jobs(n_gpus)
        horizon = self.horizon_bins
        total = np.zeros(horizon)
        spectra: dict[int, np.ndarray] = {}
        nameplate_w = 0.0
        for job, copies in zip(np.flatnonzero(counts), counts[counts > 0], strict=True):
            source = self.sources[job]
            nameplate_w += int(copies) * source.n_gpus * source.nameplate_w
            length = source.length
            if copies <= DIRECT_MAX_COPIES:
                series = source.series()
                for offset in self.rng.integers(0, length, size=int(copies)):
                    _add_shifted(total, series, int(offset))
            else:
                hist = self._offsets(int(copies), length)
                product = np.fft.rfft(hist) * source.spectrum()
                if length in spectra:
                    spectra[length] += product
                else:
                    spectra[length] = product
        for length, spectrum in spectra.items():
            _add_periodic(total, np.fft.irfft(spectrum, n=length))
        if partial is not None:
            job, gpus = partial
            source = self.sources[job]
            nameplate_w += gpus * source.nameplate_w
            offset = int(self.rng.integers(0, source.length))
            _add_shifted(total, source.series(gpus), offset)
        return total, nameplate_w

    def run(
        self, n_gpus: int, draws: int, windows_s: Sequence[float], bin_s: float, cap_w: float
    ) -> DrawStats:
        """Draw ``draws`` fleets of ``n_gpus`` and window each against ``n_gpus x cap_w``."""
        window_bins = window_bins_of(windows_s, bin_s)
        shape = (draws, len(window_bins))
        windows = np.zeros(shape, dtype=np.int64)
        over = np.zeros(shape, dtype=np.int64)
        peak_w = np.full(shape, np.nan)
        nameplate = np.zeros(draws)
        for d in range(draws):
            energy, nameplate[d] = self.fleet_energy(n_gpus)
            acc = WindowAccumulator(window_bins, bin_s, cap_w * n_gpus)
            acc.update(energy)
            for i, c in enumerate(acc.results()):
                windows[d, i], over[d, i], peak_w[d, i] = c.windows, c.over, c.peak_mean_w
        return DrawStats(list(windows_s), windows, over, peak_w, nameplate)


def _add_shifted(total: np.ndarray, series: np.ndarray, offset: int) -> None:
    """``total[t] += series[(t - offset) mod len(series)]`` for t over ``total`` (in place)."""
    length = len(series)
    horizon = len(total)
    start = 0
    # The shifted copy as consecutive whole periods of ``series`` (usually one or two slices).
    position = (-offset) % length
    while start < horizon:
        take = min(length - position, horizon - start)
        total[start : start + take] += series[position : position + take]
        start += take
        position = 0


def _add_periodic(total: np.ndarray, series: np.ndarray) -> None:
    """``total[t] += series[t mod len(series)]`` (in place)."""
    _add_shifted(total, series, 0)


def wall_clock_fleet(
    runs: Sequence[RunBins],
    windows_s: Sequence[float],
    bin_s: float,
    cap_w: float,
    partition_bins: int,
) -> tuple[list[WindowCounts], dict[str, Any]]:
    """The input runs summed bin by bin in real time, one time partition at a time.

    Returns per-window counts against ``cap_w`` (the fleet's total cap) and a summary of the
    common time range. Only bins where every GPU of every run has data count.
    """
    window_bins = window_bins_of(windows_s, bin_s)
    n_gpus = sum(r.n_gpus for r in runs)
    ranges = [r.bin_range for r in runs]
    acc = WindowAccumulator(window_bins, bin_s, cap_w)
    info: dict[str, Any] = {"common_bins": 0, "complete_bins": 0, "partitions": 0}
    if any(r is None for r in ranges):
        return acc.results(), info
    lo = max(r[0] for r in ranges)  # type: ignore[index]
    hi = min(r[1] for r in ranges)  # type: ignore[index]
    info["common_bins"] = max(0, hi - lo + 1)
    for start in range(lo, hi + 1, partition_bins):
        stop = min(start + partition_bins, hi + 1)
        size = stop - start
        energy = np.zeros(size)
        present = np.zeros(size, dtype=np.int64)
        for run in runs:
            table = pq.read_table(
                run.path,
                columns=["bin", "energy_j"],
                filters=[("bin", ">=", start), ("bin", "<", stop)],
            )
            rel = table.column("bin").to_numpy() - start
            energy += np.bincount(rel, weights=table.column("energy_j").to_numpy(), minlength=size)
            present += np.bincount(rel, minlength=size)
        valid = present == n_gpus
        info["complete_bins"] += int(np.count_nonzero(valid))
        info["partitions"] += 1
        acc.update(energy, valid)
    return acc.results(), info


def choose_alignment(runs: Sequence[RunBins], config: Config) -> str:
    """``wall_clock`` or ``monte_carlo`` for ``fleet.alignment = auto`` (see the config)."""
    if config.fleet.alignment != "auto":
        return config.fleet.alignment
    if sum(r.n_gpus for r in runs) != config.fleet.n_gpus:
        return "monte_carlo"
    ranges = [r.bin_range for r in runs]
    if any(r is None for r in ranges):
        return "monte_carlo"
    overlap = min(r[1] for r in ranges) - max(r[0] for r in ranges) + 1  # type: ignore[index]
    longest = max(window_bins_of(config.windows.windows_s, config.windows.bin_s))
    return "wall_clock" if overlap >= longest else "monte_carlo"


def _quantile(values: np.ndarray, q: float) -> float:
    finite = values[np.isfinite(values)]
    return float(np.quantile(finite, q)) if len(finite) else float("nan")


def _factor(peak_share: float, margin: float) -> float:
    if not peak_share > 0:
        return float("nan")
    return 1.0 / (peak_share * (1.0 + margin))


def stats_table(
    stats: DrawStats, n_gpus: int, alignment: str, config: Config, label: str
) -> pd.DataFrame:
    """One row per window: exceedance and peak share over draws, and the factor."""
    q = config.fleet.peak_quantile
    margin = config.fleet.margin
    exceed = stats.exceedance
    share = stats.peak_share
    rows = []
    for i, window_s in enumerate(stats.window_s):
        peak_q = _quantile(share[:, i], q)
        peak_mean = float(np.nanmean(share[:, i])) if np.isfinite(share[:, i]).any() else math.nan
        e = exceed[:, i]
        has = np.isfinite(e).any()
        rows.append(
            {
                "alignment": alignment,
                "n_gpus": n_gpus,
                "draws": len(share),
                "window_s": window_s,
                "windows_per_draw": int(stats.windows[:, i].max()),
                "exceedance_mean": float(np.nanmean(e)) if has else math.nan,
                "exceedance_p95": _quantile(e, 0.95),
                "exceedance_max": float(np.nanmax(e)) if has else math.nan,
                "draws_with_exceedance": int(np.count_nonzero(stats.over[:, i] > 0)),
                "peak_share_mean": peak_mean,
                "peak_share_p5": _quantile(share[:, i], 0.05),
                "peak_share_p50": _quantile(share[:, i], 0.5),
                "peak_share_p95": _quantile(share[:, i], 0.95),
                "peak_share_max": float(np.nanmax(share[:, i])) if has else math.nan,
                "peak_quantile": q,
                "peak_share_sizing": peak_q,
                "margin": margin,
                "factor": _factor(peak_q, margin),
                "factor_no_margin_mean_peak": _factor(peak_mean, 0.0),
                "data": label,
            }
        )
    return pd.DataFrame(rows)


def _pooled_run_exceedance(
    exceedance_files: Sequence[Path],
) -> tuple[pd.DataFrame, str]:
    """Run-level exceedance pooled over runs (72B runs only when the metadata names some)."""
    frames = [pd.read_parquet(p) for p in exceedance_files if p.exists()]
    if not frames:
        return pd.DataFrame(columns=["window_s", "windows", "windows_over"]), "no exceedance files"
    table = pd.concat(frames, ignore_index=True)
    pooled = table[table["scope"] == "run_pooled"]
    note = f"pooled over {pooled['run_id'].nunique()} run(s)"
    return pooled, note


def comparison_table(
    fleet_table: pd.DataFrame,
    runs: Sequence[RunBins],
    exceedance_files: Sequence[Path],
    config: Config,
    label: str,
) -> pd.DataFrame:
    """The study's figures, this run's, and the difference, with published results beside."""
    pooled, pooled_note = _pooled_run_exceedance(exceedance_files)
    sizes = {r.run_id: r.info.get("model_size") for r in runs}
    big = [rid for rid, size in sizes.items() if size and "72" in str(size)]
    if big:
        pooled = pooled[pooled["run_id"].isin(big)]
        pooled_note = f"72B runs only: {', '.join(sorted(big))}"
    else:
        pooled_note += "; no input run is labelled 72B (metadata model_size), so all are pooled"
    rows: list[dict[str, Any]] = []

    def add(fig: reference.ReferenceFigure, value: float, note: str, ref: str = "study") -> None:
        rows.append(
            {
                "reference": ref,
                "quantity": fig.quantity,
                "reference_value": fig.shown(),
                "this_run": value,
                "difference": fig.difference(value),
                "unit": fig.unit,
                "data": label,
                "note": note,
                "source": fig.source,
            }
        )

    for fig in reference.STUDY_EXCEEDANCE_72B:
        at = pooled[np.isclose(pooled["window_s"], fig.window_s)] if len(pooled) else pooled
        windows = float(at["windows"].sum()) if len(at) else 0.0
        value = 100.0 * float(at["windows_over"].sum()) / windows if windows else math.nan
        note = (
            pooled_note
            if windows
            else (
                f"{fig.window_s:g} s is not in windows.windows_s"
                if not len(at)
                else f"no full {fig.window_s:g} s window in the input runs"
            )
        )
        add(fig, value, note)

    alignment = str(fleet_table["alignment"].iloc[0])
    n_gpus = int(fleet_table["n_gpus"].iloc[0])
    fleet_desc = f"{n_gpus}-GPU fleet, {alignment}"
    if alignment == "monte_carlo":
        fleet_desc += f", {int(fleet_table['draws'].iloc[0])} draws"
    long = fleet_table[fleet_table["window_s"] >= 30.0]
    long = long[np.isfinite(long["exceedance_mean"])]
    mc = alignment == "monte_carlo"
    if len(long):
        worst = long.loc[long["exceedance_mean"].idxmax()]
        spread = (
            f" (mean over draws; worst draw {100.0 * float(worst['exceedance_max']):.3g} %)"
            if mc
            else ""
        )
        add(
            reference.STUDY_FLEET_EXCEEDANCE,
            100.0 * float(worst["exceedance_mean"]),
            f"{fleet_desc}; worst window {worst['window_s']:g} s{spread}",
        )
    else:
        add(reference.STUDY_FLEET_EXCEEDANCE, math.nan, f"{fleet_desc}; no full window >= 30 s")

    chosen = fleet_table[np.isclose(fleet_table["window_s"], config.fleet.window_s)].iloc[0]
    window_note = f"{fleet_desc}; window {config.fleet.window_s:g} s"
    if chosen["windows_per_draw"] == 0:
        window_note += (
            f"; NO full {config.fleet.window_s:g} s window: the fleet timeline is shorter "
            "(record longer runs, or set fleet.horizon_s to repeat them)"
        )
    spread = (
        f"; mean over draws, p5-p95 {100 * chosen['peak_share_p5']:.3g}-"
        f"{100 * chosen['peak_share_p95']:.3g} %"
        if mc and chosen["windows_per_draw"]
        else ("" if mc else "; the real fleet")
    )
    add(reference.STUDY_FLEET_PEAK, 100.0 * float(chosen["peak_share_mean"]), window_note + spread)
    one = "1 / mean peak share" if mc else "1 / peak share"
    add(
        reference.STUDY_OVERSUBSCRIPTION,
        float(chosen["factor_no_margin_mean_peak"]),
        f"{window_note}; {one}, no margin (the study's reading)",
    )
    sized = (
        f"{window_note}; peak at the {config.fleet.peak_quantile:g} quantile of draws, margin "
        f"{config.fleet.margin:g}"
        if mc
        else f"{window_note}; measured peak, margin {config.fleet.margin:g}"
    )
    add(reference.STUDY_OVERSUBSCRIPTION, float(chosen["factor"]), sized)
    for fig in reference.PUBLISHED_OVERSUBSCRIPTION:
        add(fig, float(chosen["factor"]), f"{sized}; published setting: {fig.setting}", ref=fig.key)
    return pd.DataFrame(rows)


def comparison_markdown(table: pd.DataFrame, label: str, summary: dict[str, Any]) -> str:
    """The comparison table as Markdown, with its data label in the title."""
    title = "Fleet and windowed exceedance: reference figures vs this run"
    if label == "simulated":
        title += " (SIMULATED power)"
    lines = [f"# {title}", ""]
    lines.append(
        f"Fleet: {summary['n_gpus']} GPUs, alignment {summary['alignment']}, window "
        f"{summary['window_s']:g} s, margin {summary['margin']:g}. Data: {label}."
    )
    lines += [
        "",
        "| reference | quantity | reference value | this run | difference | note |",
        "|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        value = "n/a" if not np.isfinite(row.this_run) else f"{row.this_run:.3g} {row.unit}"
        diff = "n/a" if not np.isfinite(row.difference) else f"{row.difference:+.3g} {row.unit}"
        lines.append(
            f"| {row.reference} | {row.quantity} | {row.reference_value} | {value} | {diff} | "
            f"{row.note} |"
        )
    lines += [
        "",
        "Differences against a range are 0 inside it, else the distance to its nearer "
        "end. Published results are production or inference settings, not GRPO training.",
        "",
        "Sources:",
    ]
    for source in dict.fromkeys(table["source"]):
        lines.append(f"- {source}")
    return "\n".join(lines) + "\n"


@dataclass
class FleetResult:
    """Everything the fleet stage computes."""

    fleet: pd.DataFrame
    scaling: pd.DataFrame
    comparison: pd.DataFrame
    summary: dict[str, Any]


def analyze_fleet(
    inputs: Sequence[Path | str], config: Config, exceedance_files: Sequence[Path] | None = None
) -> FleetResult:
    """The fleet stage on windows-stage outputs (folders or ``bins.parquet`` files)."""
    runs = [read_run_bins(p) for p in inputs]
    check_compatible(runs, config.windows.bin_s)
    ids = [r.run_id for r in runs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        files = [str(r.path) for r in runs if r.run_id == dup]
        raise ValueError(
            f"{files[-1]}: run_id: the same run is given twice ({dup!r}, also as "
            f"{', '.join(files[:-1])}); expected each run's windows output once"
        )
    if exceedance_files is None:
        exceedance_files = [r.path.with_name("exceedance.parquet") for r in runs]
    fc = config.fleet
    bin_s = config.windows.bin_s
    windows_s = list(config.windows.windows_s)
    label = "simulated" if any(r.simulated for r in runs) else "measured"
    seed = config.seed if fc.seed is None else fc.seed
    rng = np.random.default_rng(seed)
    alignment = choose_alignment(runs, config)
    summary: dict[str, Any] = {
        "inputs": [str(r.path) for r in runs],
        "run_ids": ids,
        "data": label,
        "simulated": label == "simulated",
        "alignment": alignment,
        "window_s": fc.window_s,
        "margin": fc.margin,
        "peak_quantile": fc.peak_quantile,
        "bin_s": bin_s,
        "cap_w_per_gpu": config.cap_w,
        "seed": seed,
    }
    sources: list[JobSource] | None = None
    if alignment == "wall_clock":
        n_gpus = sum(r.n_gpus for r in runs)
        counts, info = wall_clock_fleet(
            runs, windows_s, bin_s, config.cap_w * n_gpus, fc.partition_bins
        )
        nameplate = sum(r.n_gpus * r.nameplate_w for r in runs)
        stats = DrawStats(
            windows_s,
            np.array([[c.windows for c in counts]]),
            np.array([[c.over for c in counts]]),
            np.array([[c.peak_mean_w for c in counts]]),
            np.array([nameplate]),
        )
        summary.update(info)
    else:
        n_gpus = fc.n_gpus
        sources = [load_job_source(r) for r in runs]
        horizon = None if fc.horizon_s is None else max(1, round(fc.horizon_s / bin_s))
        mc = MonteCarloFleet(sources, horizon, rng)
        stats = mc.run(n_gpus, fc.draws, windows_s, bin_s, config.cap_w)
        summary.update(_mc_summary(mc, sources, bin_s))
    summary["n_gpus"] = n_gpus
    fleet_table = stats_table(stats, n_gpus, alignment, config, label)
    scaling = scaling_study(runs, config, label, rng, sources)
    comparison = comparison_table(fleet_table, runs, exceedance_files, config, label)
    chosen = fleet_table[np.isclose(fleet_table["window_s"], fc.window_s)].iloc[0]
    summary.update(
        {
            "peak_share_mean": chosen["peak_share_mean"],
            "peak_share_sizing": chosen["peak_share_sizing"],
            "factor": chosen["factor"],
            "factor_no_margin_mean_peak": chosen["factor_no_margin_mean_peak"],
            "chosen_window_fits": bool(chosen["windows_per_draw"] > 0),
        }
    )
    return FleetResult(fleet_table, scaling, comparison, summary)


def _mc_summary(mc: MonteCarloFleet, sources: Sequence[JobSource], bin_s: float) -> dict[str, Any]:
    return {
        "horizon_s": mc.horizon_bins * bin_s,
        "source_lengths_s": [s.length * bin_s for s in sources],
        "source_gpus": [s.n_gpus for s in sources],
        "joins_at_gaps": [s.joins for s in sources],
        "distinct_phases": int(sum(s.length for s in sources)),
        "assumption": "each run is periodic (restarts when it ends); runs keep their GPUs "
        "together; start offsets uniform over the run",
    }


def scaling_study(
    runs: Sequence[RunBins],
    config: Config,
    label: str,
    rng: np.random.Generator,
    sources: Sequence[JobSource] | None = None,
) -> pd.DataFrame:
    """Monte Carlo fleets of each configured size: how peak share and the factor change."""
    fc = config.fleet
    if sources is None:
        sources = [load_job_source(r) for r in runs]
    horizon = None if fc.horizon_s is None else max(1, round(fc.horizon_s / config.windows.bin_s))
    mc = MonteCarloFleet(sources, horizon, rng)
    tables = []
    for size in fc.scaling_sizes:
        stats = mc.run(
            size, fc.scaling_draws, config.windows.windows_s, config.windows.bin_s, config.cap_w
        )
        tables.append(stats_table(stats, size, "monte_carlo", config, label))
    return pd.concat(tables, ignore_index=True)


def write_fleet(result: FleetResult, out_dir: Path | str) -> list[Path]:
    """Write the fleet stage's outputs into ``out_dir`` (each file atomically).

    Files: ``fleet_windows.csv``/``.parquet``, ``scaling.csv``/``.parquet``,
    ``comparison.csv``, ``comparison.md`` and ``summary.json``.
    """
    from grpo_power.atomic import (
        write_csv_atomic,
        write_json_atomic,
        write_parquet_atomic,
        write_text_atomic,
    )

    out = Path(out_dir)
    return [
        write_csv_atomic(out / "fleet_windows.csv", result.fleet),
        write_parquet_atomic(out / "fleet_windows.parquet", result.fleet),
        write_csv_atomic(out / "scaling.csv", result.scaling),
        write_parquet_atomic(out / "scaling.parquet", result.scaling),
        write_csv_atomic(out / "comparison.csv", result.comparison),
        write_text_atomic(
            out / "comparison.md",
            comparison_markdown(result.comparison, result.summary["data"], result.summary),
        ),
        write_json_atomic(out / "summary.json", result.summary),
    ]


def run_fleet(inputs: Sequence[Path | str], out_dir: Path | str, config: Config) -> FleetResult:
    """The fleet stage: read windows outputs, analyse, write; returns the result."""
    result = analyze_fleet(inputs, config)
    write_fleet(result, out_dir)
    return result
