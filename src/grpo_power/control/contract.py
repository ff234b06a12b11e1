"""What a controller sees before each GRPO step, and what it may ask for."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np


@dataclass
class RunViolations:
    """The per-GPU power samples of a run's steps so far and how many were above the cap (the
    share a budget-tracking controller steers); kept by the simulator, the run's controller hook
    and ``PowerCapCallback``."""

    samples: int = 0
    over_cap: int = 0

    def add(self, power_w: np.ndarray, cap_w: float) -> None:
        """Count a step's per-GPU samples, W, against the cap it ran under, W."""
        self.samples += int(np.size(power_w))
        self.over_cap += int(np.count_nonzero(np.asarray(power_w) > cap_w))

    @property
    def share(self) -> float:
        """Share of the samples above the cap (0 before any)."""
        return self.over_cap / max(1, self.samples)


@dataclass(frozen=True)
class Observation:
    """Recent state of a run, given to the controller before each step.

    Power statistics are per-GPU samples over the last ``window_s`` seconds of live telemetry.
    """

    mean_power_w: float
    p95_power_w: float
    max_power_w: float
    share_above_cap: float  # share of samples above the cap, 0..1
    concurrency: int  # current generation concurrency, sequences
    max_new_tokens: int  # current completion length limit, tokens
    tokens_per_s: float  # completion tokens per second of the last step
    cap_w: float
    samples: int  # power samples in the window (0: no telemetry yet)
    train_micro_batch: int = 0  # current training chunk, sequences (0: not reported)
    pause_s: int = 0  # current pause before a step, s
    run_share_above_cap: float = 0.0  # share of the run's per-GPU samples so far above the cap
    run_samples: int = 0  # per-GPU samples since the run (this attempt) began

    @classmethod
    def from_power(
        cls,
        power_w: np.ndarray,
        cap_w: float,
        concurrency: int,
        max_new_tokens: int,
        tokens_per_s: float,
        train_micro_batch: int = 0,
        pause_s: int = 0,
        run: RunViolations | None = None,
    ) -> Observation:
        """The observation of a window of per-GPU power samples, the current settings and the
        run's samples above the cap so far (None: none counted)."""
        run = run or RunViolations()
        return cls(
            **power_observation_fields(power_w, cap_w),
            concurrency=concurrency,
            max_new_tokens=max_new_tokens,
            tokens_per_s=tokens_per_s,
            cap_w=cap_w,
            train_micro_batch=train_micro_batch,
            pause_s=pause_s,
            run_share_above_cap=run.share,
            run_samples=run.samples,
        )

    def to_dict(self, prefix: str = "obs_") -> dict[str, float]:
        """Flat fields for the step log."""
        return {f"{prefix}{k}": v for k, v in asdict(self).items()}

    def to_array(self) -> np.ndarray:
        """A float vector for learned policies (power fields as a share of the cap), in the
        order of :data:`ARRAY_FIELDS`."""
        return np.array(
            [
                self.mean_power_w / self.cap_w,
                self.p95_power_w / self.cap_w,
                self.max_power_w / self.cap_w,
                self.share_above_cap,
                float(self.concurrency),
                float(self.max_new_tokens),
                self.tokens_per_s,
                float(self.train_micro_batch),
                float(self.pause_s),
            ],
            dtype=np.float32,
        )


# What each entry of :meth:`Observation.to_array` is, in order (a trained controller's metadata).
ARRAY_FIELDS = (
    "mean_power_w/cap_w",
    "p95_power_w/cap_w",
    "max_power_w/cap_w",
    "share_above_cap",
    "concurrency",
    "max_new_tokens",
    "tokens_per_s",
    "train_micro_batch",
    "pause_s",
)


def random_observations(
    n: int, rng: np.random.Generator, cap_w: float = 320.0, nameplate_w: float = 436.0
) -> list[Observation]:
    """``n`` observations spread over what a run can report (power from idle-ish to the
    nameplate, every concurrency and length of the default bounds), to exercise a controller
    over its whole input range (the benchmarks' latency, the tests' policy agreement)."""
    return [
        Observation(
            mean_power_w=float(rng.uniform(60, 0.92 * nameplate_w)),
            p95_power_w=float(rng.uniform(60, 0.96 * nameplate_w)),
            max_power_w=float(rng.uniform(60, nameplate_w)),
            share_above_cap=float(rng.uniform(0, 1)),
            concurrency=int(rng.integers(1, 33)),
            max_new_tokens=int(rng.integers(8, 65)),
            tokens_per_s=float(rng.uniform(0, 1500)),
            cap_w=cap_w,
            samples=50,
            train_micro_batch=int(rng.integers(1, 9)),
            pause_s=int(rng.integers(0, 9)),
        )
        for _ in range(n)
    ]


def percentile_95(values: np.ndarray) -> float:
    """The 95th percentile of an array's values, bit for bit ``np.percentile(values, 95)`` (linear
    method: numpy's interpolation between the two order statistics about it), from a partial
    sort: about 3 us against numpy's 35 us, the difference that matters in the hot loop of
    controller training, which takes it before every simulated step. Any shape is taken
    whole, as numpy does."""
    values = np.ravel(values)
    n = values.size
    index = 0.95 * (n - 1)
    low = math.floor(index)
    high = min(low + 1, n - 1)
    part = np.partition(values, (low, high))
    a, b = part[low], part[high]
    t = index - low
    if t >= 0.5:  # numpy's lerp, from the nearer end
        return float(b - (b - a) * (1 - t))
    return float(a + (b - a) * t)


def power_observation_fields(power_w: np.ndarray, cap_w: float) -> dict[str, float]:
    """Mean, p95, max and share above cap of a window of power samples (zeros when empty)."""
    if len(power_w) == 0:
        return {
            "mean_power_w": 0.0,
            "p95_power_w": 0.0,
            "max_power_w": 0.0,
            "share_above_cap": 0.0,
            "samples": 0,
        }
    return {
        "mean_power_w": float(power_w.mean()),
        "p95_power_w": percentile_95(power_w),
        "max_power_w": float(power_w.max()),
        "share_above_cap": float((power_w > cap_w).mean()),
        "samples": len(power_w),
    }


@dataclass(frozen=True)
class Action:
    """Actuator values a controller asks for; None leaves an actuator unchanged.

    The fields are the online actuators (``sim/step_model.py``: ``ONLINE_ACTUATORS``), in the
    same order, so ``run.step(**action.settings())`` drives a simulated run."""

    concurrency: int | None = None
    max_new_tokens: int | None = None
    train_micro_batch: int | None = None  # training chunk, sequences
    pause_s: int | None = None  # pause before the step, whole seconds, GPUs idle

    def settings(self) -> dict[str, int | None]:
        """The requested value of every actuator, by name (None: unchanged)."""
        return dict(self.__dict__)  # the fields in order (asdict deep-copies: hot loop)
