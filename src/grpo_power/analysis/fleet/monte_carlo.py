"""Monte Carlo fleets: jobs drawn with replacement (or each source once: a fleet of exactly the
sources' GPUs), each at a random start offset, their periodic series summed exactly (shifted
adds for a few copies, FFT convolution for many)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_power.analysis.fleet.inputs import JobSource
from grpo_power.analysis.windows import (
    WindowAccumulator,
    window_bins_of,
)

DIRECT_MAX_COPIES = 8  # up to this many copies of one job in a draw, summed copy by copy
# above it, summed copy by copy still while copies x horizon <= this x length x log2(length)
# (the transform's work over the whole source), else convolved by FFT
DIRECT_WORK_PER_TRANSFORM = 0.125
DRAW_CHUNK = 1 << 20  # jobs drawn per random-number chunk (bounds memory for huge fleets)


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
        replace: draw jobs with replacement until the fleet is full (a fleet larger than the
            sources, the scaling study); False: every fleet is each source once (the fleet of
            exactly the sources' GPUs: the planner's traces), only the offsets drawn.
    """

    def __init__(
        self,
        sources: Sequence[JobSource],
        horizon_bins: int | None,
        rng: np.random.Generator,
        replace: bool = True,
    ) -> None:
        if not sources:
            raise ValueError("no job sources to draw fleets from")
        self.sources = list(sources)
        self.rng = rng
        self.horizon_bins = horizon_bins or min(s.length for s in sources)
        self.gpus = np.array([s.n_gpus for s in sources])
        self.replace = replace

    def draw_jobs(self, n_gpus: int) -> tuple[np.ndarray, tuple[int, int] | None]:
        """Copies of each job in one fleet of ``n_gpus``, and the (job, gpus) of a last job cut
        to fit (None when none is cut; always None without replacement: one copy of each).

        Raises:
            ValueError: without replacement, ``n_gpus`` is not the sources' GPUs.
        """
        if not self.replace:
            if n_gpus != int(self.gpus.sum()):
                raise ValueError(
                    f"n_gpus: a fleet of {n_gpus} GPUs; expected each source once, the "
                    f"sources' {int(self.gpus.sum())} GPUs"
                )
            return np.ones(len(self.sources), dtype=np.int64), None
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
        return self.sum_jobs(*self.draw_jobs(n_gpus))

    def sum_jobs(
        self, counts: np.ndarray, partial: tuple[int, int] | None = None
    ) -> tuple[np.ndarray, float]:
        """``counts[j]`` copies of each job ``j`` (and a last job cut to ``partial = (job,
        gpus)``), each at a uniform random start offset: the fleet's summed energy per bin over
        the horizon (J) and its nameplate (W)."""
        horizon = self.horizon_bins
        total = np.zeros(horizon)
        spectra: dict[int, np.ndarray] = {}
        nameplate_w = 0.0
        for job, copies in zip(np.flatnonzero(counts), counts[counts > 0], strict=True):
            source = self.sources[job]
            nameplate_w += int(copies) * source.n_gpus * source.nameplate_w
            length = source.length
            work = DIRECT_WORK_PER_TRANSFORM * length * np.log2(max(length, 2))
            if copies <= DIRECT_MAX_COPIES or copies * horizon <= work:
                # summed copy by copy over the horizon: cheaper than a transform of the whole
                # source where it is long against the horizon (a week of 0.5 s bins: 1.2 M)
                series = source.series()
                for offset in self.rng.integers(0, length, size=int(copies)):
                    add_shifted(total, series, int(offset))
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
            add_shifted(total, source.series(gpus), offset)
        return total, nameplate_w

    def run(
        self, n_gpus: int, draws: int, windows_s: Sequence[float], bin_s: float, cap_w: float
    ) -> DrawStats:
        """Draw ``draws`` fleets of ``n_gpus`` and window each against ``n_gpus x cap_w``."""
        return window_draws(
            lambda: self.fleet_energy(n_gpus), draws, windows_s, bin_s, cap_w * n_gpus
        )


def window_draws(
    draw: Callable[[], tuple[np.ndarray, float]],
    draws: int,
    windows_s: Sequence[float],
    bin_s: float,
    fleet_cap_w: float,
) -> DrawStats:
    """``draws`` fleets from ``draw`` (energy per bin, J; nameplate, W), each windowed against
    the fleet's total cap ``fleet_cap_w``."""
    window_bins = window_bins_of(windows_s, bin_s)
    shape = (draws, len(window_bins))
    windows = np.zeros(shape, dtype=np.int64)
    over = np.zeros(shape, dtype=np.int64)
    peak_w = np.full(shape, np.nan)
    nameplate = np.zeros(draws)
    for d in range(draws):
        energy, nameplate[d] = draw()
        acc = WindowAccumulator(window_bins, bin_s, fleet_cap_w)
        acc.update(energy)
        for i, c in enumerate(acc.results()):
            windows[d, i], over[d, i], peak_w[d, i] = c.windows, c.over, c.peak_mean_w
    return DrawStats(list(windows_s), windows, over, peak_w, nameplate)


def add_shifted(total: np.ndarray, series: np.ndarray, offset: int) -> None:
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
    add_shifted(total, series, 0)


def draw_summary(mc: MonteCarloFleet, sources: Sequence[JobSource], bin_s: float) -> dict[str, Any]:
    """What a Monte Carlo fleet drew from: its timeline, the sources' lengths and GPUs, how jobs
    were drawn and the assumptions."""
    drawn = "runs drawn with replacement" if mc.replace else "each run once per draw"
    return {
        "horizon_s": mc.horizon_bins * bin_s,
        "source_lengths_s": [s.length * bin_s for s in sources],
        "source_gpus": [s.n_gpus for s in sources],
        "joins_at_gaps": [s.joins for s in sources],
        "distinct_phases": int(sum(s.length for s in sources)),
        "assumption": f"{drawn}; each run is periodic (restarts when it ends); runs keep their "
        "GPUs together; start offsets uniform over the run",
    }
