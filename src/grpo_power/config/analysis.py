"""Config sections of the trace analyses: ``windows`` (exceedance by averaging window) and
``fleet`` (peak of many GPUs, oversubscription, scaling)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
    model_validator,
)

from grpo_power.config.base import (
    PositiveFloat,
    Strict,
    WindowSeconds,
    is_multiple,
)


class WindowsConfig(Strict):
    """Exceedance by averaging window (the windows stage, ``analysis/windows/``).

    A window's mean power comes from energy-counter differences where the trace has a counter,
    else from trapezoid integration of ``power_w``; gaps longer than ``gap_periods`` sample
    periods split the series and are never bridged (docs/design.md section 7).
    """

    windows_s: list[WindowSeconds] = Field(
        default_factory=lambda: [0.5, 1.0, 5.0, 30.0, 60.0, 300.0],
        description="Averaging windows, s. The study reports 0.5 s, 30 s and 5 min.",
    )
    step_s: PositiveFloat | None = Field(
        None,
        description="How far windows slide between evaluations, s; null = the trace's sample "
        "period. Window ends lie on a grid of this step from each contiguous segment's start.",
    )
    gap_periods: Annotated[float, Field(ge=1)] = Field(
        2.0, description="An interval longer than this many sample periods is a gap."
    )
    bin_s: WindowSeconds = Field(
        0.5,
        description="Width of the wall-clock bins in which per-run energy is summed for the fleet "
        "stage, s; every window must be a whole number of bins.",
    )

    @model_validator(mode="after")
    def _windows_fit_bins(self) -> WindowsConfig:
        if not self.windows_s:
            raise ValueError("windows_s must list at least one window, s")
        if len(set(self.windows_s)) != len(self.windows_s):
            raise ValueError(f"windows_s has duplicates: {self.windows_s}")
        bad = [w for w in self.windows_s if not is_multiple(w, self.bin_s)]
        if bad:
            raise ValueError(
                f"windows_s {bad} are not whole multiples of bin_s ({self.bin_s} s): "
                "fleet windows are sums of whole bins; change bin_s or the windows"
            )
        return self


class MixJobs(Strict):
    """One entry of the study's fleet mix: ``jobs`` runs of a simulated deployment."""

    deployment: str = Field(description="A name from sim.deployments.")
    jobs: Annotated[int, Field(ge=1)] = Field(
        description="Runs of this deployment in the fleet (each with all its GPUs)."
    )


def _study_mix() -> list[MixJobs]:
    return [
        MixJobs(deployment="72b", jobs=2),
        MixJobs(deployment="14b", jobs=2),
        MixJobs(deployment="7b", jobs=4),
    ]


class FleetConfig(Strict):
    """Fleet aggregation and oversubscription (the fleet stage, ``analysis/fleet/``)."""

    n_gpus: Annotated[int, Field(ge=1)] = Field(
        16, description="GPUs in the fleet (the study's fleet: 16)."
    )
    alignment: Literal["auto", "wall_clock", "monte_carlo"] = Field(
        "auto",
        description="wall_clock: sum the input runs bin by bin in real time (they ran together); "
        "monte_carlo: draw runs with random start offsets; auto: wall_clock when the inputs hold "
        "exactly n_gpus GPUs that ran concurrently for at least the longest window.",
    )
    draws: Annotated[int, Field(ge=1)] = Field(
        200, description="Monte Carlo fleets drawn (random runs and start offsets)."
    )
    window_s: WindowSeconds = Field(
        30.0,
        description="The window whose peak sizes the oversubscription factor, s (the study: no "
        "fleet exceedance at 30 s and longer). Must be one of windows.windows_s.",
    )
    margin: Annotated[float, Field(ge=0)] = Field(
        0.1,
        description="Safety margin on the peak: factor = nameplate / (peak x (1 + margin)).",
    )
    peak_quantile: Annotated[float, Field(gt=0, le=1)] = Field(
        0.95,
        description="Quantile over Monte Carlo draws of the fleet peak used for the factor "
        "(1.0 = the worst draw).",
    )
    horizon_s: PositiveFloat | None = Field(
        600.0,
        description="Length of each simulated fleet's timeline, s; null = the shortest input "
        "run. Longer horizons repeat runs end to end (each run is treated as periodic).",
    )
    scaling_sizes: list[Annotated[int, Field(ge=1)]] = Field(
        default_factory=lambda: [16, 64, 256, 1024, 4096, 16384, 100000],
        description="Fleet sizes of the scaling study, GPUs.",
    )
    scaling_draws: Annotated[int, Field(ge=1)] = Field(
        20, description="Monte Carlo draws per fleet size in the scaling study."
    )
    partition_bins: Annotated[int, Field(ge=16)] = Field(
        65536,
        description="Bins read per time partition when summing runs by wall clock (bounds memory).",
    )
    seed: Annotated[int, Field(ge=0)] | None = Field(
        None, description="Seed of the Monte Carlo draws; null = the top-level seed."
    )
    study_mix: list[MixJobs] = Field(
        default_factory=_study_mix,
        description="The study's fleet composed of the evaluation's simulated runs, per arm "
        "(rule study_fleet): runs of each deployment, each at a random seed and start offset; "
        "the study's 16 GPUs: 2 x 72b (4 GPUs each), 2 x 14b (2), 4 x 7b (1). Empty: no "
        "study fleet; left at its default, it is empty where sim.deployments lacks one of "
        "these.",
    )

    @model_validator(mode="after")
    def _sizes_valid(self) -> FleetConfig:
        if not self.scaling_sizes:
            raise ValueError("scaling_sizes must list at least one fleet size")
        if sorted(set(self.scaling_sizes)) != self.scaling_sizes:
            raise ValueError(
                f"scaling_sizes must be increasing without repeats: {self.scaling_sizes}"
            )
        names = [entry.deployment for entry in self.study_mix]
        if len(set(names)) != len(names):
            raise ValueError(f"study_mix lists a deployment twice: {names}")
        return self
