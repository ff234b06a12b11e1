"""The one configuration schema of grpo-power.

Every stage, the CLI and the Snakefile read their settings through :func:`load_config`, which
validates a YAML file against :class:`Config`. A bad value is rejected with the file, the field
path and the reason, for example::

    config/config.yaml: telemetry.period_s: Input should be greater than 0 (got -1)

Simulator defaults cite the row of ``shared/CALIBRATION.md`` they come from in their description.
"""

from __future__ import annotations

import math
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from grpo_power.planner.settings import PlannerConfig

DEFAULT_CONFIG_PATH = Path("config/config.yaml")
# The same file, shipped inside the package: src/grpo_power/default_config.yaml is a symbolic link
# to the repository's config/config.yaml (a wheel holds its content; see pyproject.toml).
PACKAGED_CONFIG_NAME = "default_config.yaml"

PositiveFloat = Annotated[float, Field(gt=0)]
MAX_NAMEPLATE_W = 3000.0  # no GPU board is rated higher (B200: 1000 W, GB300: 1400 W)
MAX_WINDOW_S = 7 * 24 * 3600.0  # a week: the longest averaging window or bin that means anything
WindowSeconds = Annotated[float, Field(gt=0, le=MAX_WINDOW_S)]
Fraction = Annotated[float, Field(ge=0, le=1)]
# A name that becomes a file or folder name under results/: no separators, no "..", no leading dot.
PathName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$", max_length=64)]


class ConfigError(ValueError):
    """A configuration file could not be read or failed validation."""


class _Strict(BaseModel):
    """Base of every config section: unknown keys are errors, values are re-validated on set."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, frozen=False, allow_inf_nan=False
    )


class GpuSpec(_Strict):
    """The GPU model the study targets (measured or simulated)."""

    name: str = Field("NVIDIA A100-SXM4-40GB", description="GPU model name, as NVML reports it.")
    nameplate_w: Annotated[float, Field(gt=0, le=MAX_NAMEPLATE_W)] = Field(
        400.0,
        description="Board power limit (TDP) in W. A100 SXM4: 400 W; some 80 GB parts 500 W "
        f"(at most {MAX_NAMEPLATE_W:g} W: no GPU board is rated higher).",
    )
    idle_w: PositiveFloat = Field(
        60.0,
        description="Idle power with a CUDA context resident, W. "
        "CALIBRATION.md 'idle' row: 56-66 W.",
    )

    @model_validator(mode="after")
    def _idle_below_nameplate(self) -> GpuSpec:
        if self.idle_w >= self.nameplate_w:
            raise ValueError(
                f"idle_w ({self.idle_w} W) must be below nameplate_w ({self.nameplate_w} W)"
            )
        return self


class SimulatedPowerConfig(_Strict):
    """Parameters of the occupancy-driven A100 power model (``sim/power_model.py``).

    Power while busy is ``idle_w + (nameplate_w - idle_w) * frac`` where
    ``frac = base + slope * log2(batch)`` for the phase, clipped to ``max_frac``.
    """

    decode_base_frac: Fraction = Field(
        0.49,
        description="Decode power fraction at batch 1. CALIBRATION.md '7-8B decode' row: "
        "222-234 W at b=1 on a 400 W A100 with 60 W idle -> (228-60)/340 = 0.49.",
    )
    decode_slope_per_doubling: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.057,
        description="Decode power fraction gained per doubling of the decode batch. "
        "CALIBRATION.md '7-8B decode' row: 264-339 W at b=16, 316-378 W at b=64.",
    )
    train_base_frac: Fraction = Field(
        0.66,
        description="Training (forward+backward) power fraction at micro-batch 1. "
        "CALIBRATION.md 'training, compute phase' gives 0.9-1.0 TDP at production batch sizes; "
        "GRPO's small micro-batches are assumed lower (an assumption: identify refits it).",
    )
    train_slope_per_doubling: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.02, description="Training power fraction gained per doubling of the micro-batch."
    )
    score_frac: Fraction = Field(
        0.05,
        description="Power fraction while rewards are scored on the CPU (GPU near idle).",
    )
    max_frac: Annotated[float, Field(gt=0, le=1.2)] = Field(
        1.0, description="Ceiling of the steady-state power fraction (1.0 = nameplate)."
    )
    transient_peak_frac: Annotated[float, Field(ge=0, le=0.2)] = Field(
        0.09,
        description="Ceiling of the prefill overshoot above nameplate, as a fraction of nameplate. "
        "CALIBRATION.md 'prefill': peaks about 1.09 TDP.",
    )
    noise_w: Annotated[float, Field(ge=0)] = Field(
        4.0,
        description="Standard deviation of sample-to-sample measurement noise, W "
        "(an assumption: no public A100 figure; identify refits it from traces).",
    )
    sensor_window_s: Annotated[float, Field(ge=0, le=1)] = Field(
        0.025,
        description="Each reading averages the true power over this window, s. CALIBRATION.md "
        "'NVML power update on A100': about every 100 ms, a 25 ms window.",
    )
    temp_ambient_c: float = Field(35.0, description="GPU temperature at idle, deg C.")
    temp_c_per_w: Annotated[float, Field(ge=0)] = Field(
        0.1, description="Steady-state temperature rise per watt above idle, deg C/W."
    )
    temp_tau_s: PositiveFloat = Field(30.0, description="Thermal time constant, s.")
    sm_clock_max_mhz: PositiveFloat = Field(1410.0, description="A100 maximum SM boost clock, MHz.")


TelemetrySource = Literal["simulated", "nvml", "auto"]


class TelemetryConfig(_Strict):
    """How power is sampled and stored."""

    source: TelemetrySource = Field(
        "simulated",
        description="simulated: the A100 power model driven by the workload's phases; nvml: real "
        "GPUs through pynvml; auto: nvml when NVML and a GPU are present, else simulated.",
    )
    period_s: Annotated[float, Field(gt=0, le=60)] = Field(
        0.1,
        description="Sampling period, s. The study used 0.5 s; "
        "0.1 s or faster sees the 0.2-3 Hz swings.",
    )
    flush_s: Annotated[float, Field(gt=0, le=60)] = Field(
        2.0,
        description="Samples are made durable at least this often, s "
        "(a SIGKILL loses at most this).",
    )
    gpus: list[int] | None = Field(
        None,
        description="GPU indices to sample; null = those in CUDA_VISIBLE_DEVICES, else all "
        "(nvml) or one (simulated).",
    )
    simulated: SimulatedPowerConfig = Field(default_factory=SimulatedPowerConfig)


def _is_multiple(value: float, step: float) -> bool:
    """Whether ``value`` is an integer multiple of ``step`` (to floating-point tolerance)."""
    ratio = value / step
    if not math.isfinite(ratio):
        return False
    return abs(ratio - round(ratio)) <= 1e-9 * max(1.0, ratio) and round(ratio) >= 1


class WindowsConfig(_Strict):
    """Exceedance by averaging window (the windows stage, ``analysis/windows.py``).

    A window's mean power comes from energy-counter differences where the trace has a counter,
    else from trapezoid integration of ``power_w``; gaps longer than ``gap_periods`` sample
    periods split the series and are never bridged (DESIGN.md section 7).
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
        bad = [w for w in self.windows_s if not _is_multiple(w, self.bin_s)]
        if bad:
            raise ValueError(
                f"windows_s {bad} are not whole multiples of bin_s ({self.bin_s} s): "
                "fleet windows are sums of whole bins; change bin_s or the windows"
            )
        return self


class FleetConfig(_Strict):
    """Fleet aggregation and oversubscription (the fleet stage, ``analysis/fleet.py``)."""

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
        None,
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

    @model_validator(mode="after")
    def _sizes_valid(self) -> FleetConfig:
        if not self.scaling_sizes:
            raise ValueError("scaling_sizes must list at least one fleet size")
        if sorted(set(self.scaling_sizes)) != self.scaling_sizes:
            raise ValueError(
                f"scaling_sizes must be increasing without repeats: {self.scaling_sizes}"
            )
        return self


ModelSize = Literal[
    "tiny", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-72b"
]


class ActuatorBounds(_Strict):
    """Inclusive range a controller may set an actuator to; actions outside are clamped."""

    min: Annotated[int, Field(ge=1)]
    max: Annotated[int, Field(ge=1)]

    @model_validator(mode="after")
    def _ordered(self) -> ActuatorBounds:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class WorkloadConfig(_Strict):
    """The GRPO run: model preset, task volume, TRL settings and actuator defaults and bounds."""

    size: ModelSize = Field(
        "tiny", description="Model preset (architecture shapes, random weights)."
    )
    model_path: str | None = Field(
        None, description="Local checkpoint folder or hub id to load instead of random weights."
    )
    cache_dir: Path = Field(
        Path(".cache/grpo-power"), description="Where the tiny model and tokenizer are built."
    )
    steps: Annotated[int, Field(ge=1)] = Field(30, description="Optimizer steps per run.")
    prompts_per_step: Annotated[int, Field(ge=1)] = 4
    num_generations: Annotated[int, Field(ge=2)] = Field(
        8, description="GRPO group size; fixed for a run (TRL builds its sampler once)."
    )
    train_micro_batch: Annotated[int, Field(ge=1)] = Field(
        4,
        description="Sequences per training forward/backward pass (gradients accumulate over "
        "the step's sequences). Occupancy of the training phase.",
    )
    concurrency: Annotated[int, Field(ge=1)] = Field(
        32,
        description="Default generation concurrency: sequences decoded together (fixed arm). "
        "TRL's own behaviour is one generate call for the whole step (= sequences per step).",
    )
    max_new_tokens: Annotated[int, Field(ge=1)] = Field(
        32, description="Default completion length limit, tokens (fixed arm)."
    )
    concurrency_bounds: ActuatorBounds = Field(
        default_factory=lambda: ActuatorBounds(min=1, max=32)
    )
    max_new_tokens_bounds: ActuatorBounds = Field(
        default_factory=lambda: ActuatorBounds(min=8, max=64)
    )
    learning_rate: PositiveFloat = 1e-5
    checkpoint_every_steps: Annotated[int, Field(ge=0)] = Field(
        10,
        description="Save the trainer and controller state every N steps, so a preempted, "
        "requeued or killed run resumes from there (0: only when a stop signal arrives).",
    )
    report_to: list[str] = Field(
        default_factory=lambda: ["none"],
        description="transformers' report_to for the run's logs (TRL's metrics and power/*): "
        "none, tensorboard (events in <run>/tensorboard), wandb, trackio, codecarbon, ...",
    )

    @property
    def sequences_per_step(self) -> int:
        """Completions generated per step on each process."""
        return self.prompts_per_step * self.num_generations

    @model_validator(mode="after")
    def _defaults_within_bounds(self) -> WorkloadConfig:
        for name in ("concurrency", "max_new_tokens"):
            value, bounds = getattr(self, name), getattr(self, f"{name}_bounds")
            if not bounds.min <= value <= bounds.max:
                raise ValueError(
                    f"{name} ({value}) lies outside {name}_bounds [{bounds.min}, {bounds.max}]"
                )
        if self.sequences_per_step % self.train_micro_batch:
            raise ValueError(
                f"train_micro_batch ({self.train_micro_batch}) must divide the sequences per step "
                f"(prompts_per_step x num_generations = {self.sequences_per_step})"
            )
        if self.concurrency_bounds.max > self.sequences_per_step:
            raise ValueError(
                f"concurrency_bounds.max ({self.concurrency_bounds.max}) exceeds the sequences "
                "generated per step (prompts_per_step x num_generations = "
                f"{self.sequences_per_step})"
            )
        return self


class ThresholdArmConfig(_Strict):
    """Classic feedback peer: multiplicative decrease / additive increase of concurrency."""

    high_frac_of_cap: Annotated[float, Field(gt=0, le=1.5)] = Field(
        1.0, description="Decrease when recent p95 power exceeds this share of the cap."
    )
    low_frac_of_cap: Annotated[float, Field(gt=0, le=1.5)] = Field(
        0.9, description="Increase when recent p95 power is below this share of the cap."
    )
    decrease_factor: Annotated[float, Field(gt=0, lt=1)] = 0.5
    increase_step: Annotated[int, Field(ge=1)] = 1

    @model_validator(mode="after")
    def _low_below_high(self) -> ThresholdArmConfig:
        if self.low_frac_of_cap >= self.high_frac_of_cap:
            raise ValueError("low_frac_of_cap must be below high_frac_of_cap")
        return self


class FixedSafeArmConfig(_Strict):
    """How the fixed-safe arm's static setting is calibrated."""

    calibration_steps: Annotated[int, Field(ge=1)] = Field(
        10, description="GRPO steps measured per candidate setting."
    )
    percentile: Annotated[float, Field(gt=50, lt=100)] = Field(
        99.0, description="Power percentile that must stay under the cap."
    )
    confidence: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.95, description="Confidence of the percentile's upper bound that is compared to the cap."
    )


# The arms of a real run (`grpo-power run --arm`): the one list of their names.
ArmName = Literal["uncontrolled", "fixed", "fixed-safe", "threshold", "ppo", "hwcap"]
ARM_NAMES: tuple[str, ...] = get_args(ArmName)


class ArmsConfig(_Strict):
    """Which arms the study runs, and their settings."""

    run: list[ArmName] = Field(
        default_factory=lambda: ["uncontrolled", "fixed", "fixed-safe", "threshold"],
        min_length=1,
    )
    observation_window_s: PositiveFloat = Field(
        5.0, description="Power statistics a controller sees cover this many recent seconds."
    )
    staleness_s: PositiveFloat = Field(
        2.0,
        description="When the newest power sample is older than this (s), the controller is "
        "bypassed and the run holds the fail-safe setting (the fixed-safe one) until fresh "
        "samples return.",
    )
    threshold: ThresholdArmConfig = Field(default_factory=ThresholdArmConfig)
    fixed_safe: FixedSafeArmConfig = Field(default_factory=FixedSafeArmConfig)


class DeploymentConfig(_Strict):
    """One simulated GRPO deployment of the study (model size x GPUs x sharding).

    Its physics (phase times, gathers) come from the calibration file; this section says what
    the deployment is and how long it runs in the simulator.
    """

    name: PathName = Field(description="Deployment name, e.g. '7b' (used in file names).")
    gpus: Annotated[int, Field(ge=1)] = Field(description="GPUs the model runs on.")
    zero_stage: Literal[0, 3] = Field(
        0, description="DeepSpeed ZeRO stage; 3 = parameters sharded and gathered per forward."
    )
    params_b: PositiveFloat = Field(description="Model parameters, billions.")
    sizes: list[ModelSize] = Field(
        default_factory=list,
        description="workload.size presets this deployment stands for: a real run of one of "
        "these sizes loads this deployment's trained controller (the ppo arm).",
    )
    cap_w: PositiveFloat | None = Field(
        None,
        description="Per-GPU cap of this deployment, W; null = the top-level cap_w. A sharded "
        "deployment draws about half of nameplate, far below a cap meant for one GPU.",
    )
    budget_s: PositiveFloat = Field(
        description="Simulated time budget of one evaluation run, s ('output in a fixed time "
        "budget')."
    )

    @model_validator(mode="after")
    def _sharding_needs_gpus(self) -> DeploymentConfig:
        if self.zero_stage == 3 and self.gpus < 2:
            raise ValueError(f"deployment {self.name}: zero_stage 3 needs at least 2 GPUs")
        return self


def _default_deployments() -> list[DeploymentConfig]:
    return [
        DeploymentConfig(
            name="7b",
            gpus=1,
            zero_stage=0,
            params_b=7.6,
            sizes=["tiny", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b"],
            budget_s=900.0,
        ),
        DeploymentConfig(
            name="14b",
            gpus=2,
            zero_stage=3,
            params_b=14.8,
            sizes=["qwen2.5-14b"],
            cap_w=240.0,
            budget_s=1800.0,
        ),
        DeploymentConfig(
            name="72b",
            gpus=4,
            zero_stage=3,
            params_b=72.7,
            sizes=["qwen2.5-72b"],
            cap_w=220.0,
            budget_s=3600.0,
        ),
    ]


class SimConfig(_Strict):
    """The GRPO step simulator (``sim/grpo_sim.py``): deployments and the workload's shape.

    Step shape and actuator defaults and bounds are the ``workload`` section's, so a policy
    trained here acts on a real run of the same workload unchanged.
    """

    calibration: Path | None = Field(
        None,
        description="Calibration file (JSON) written by `grpo-power identify`; null = the "
        "sourced defaults of sim/calibration.py (CALIBRATION.md ranges).",
    )
    deployments: list[DeploymentConfig] = Field(default_factory=_default_deployments)
    prompt_tokens: Annotated[int, Field(ge=1)] = Field(
        24,
        description="Prompt length, tokens (the arithmetic task's prompts: 18-20 tokens; "
        "identify measures it from step logs).",
    )
    step_jitter: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.03, description="Relative standard deviation of each step's phase times."
    )
    group_sizes: list[Annotated[int, Field(ge=2)]] = Field(
        default_factory=lambda: [2, 4, 8, 16],
        description="num_generations levels the authority stage sweeps (fixed per run in TRL).",
    )
    sweep_s: PositiveFloat = Field(
        600.0, description="Simulated seconds measured per actuator level in authority sweeps."
    )
    sweep_min_steps: Annotated[int, Field(ge=1)] = Field(
        4, description="Steps measured at least per sweep level (slow levels outlast sweep_s)."
    )

    @model_validator(mode="after")
    def _unique_names(self) -> SimConfig:
        names = [d.name for d in self.deployments]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"deployments need unique names, got {names}")
        return self

    def deployment(self, name: str) -> DeploymentConfig:
        """The deployment called ``name``; the error lists the configured ones."""
        for deployment in self.deployments:
            if deployment.name == name:
                return deployment
        raise ValueError(
            f"unknown deployment {name!r}; configured: {[d.name for d in self.deployments]}"
        )


class AuthorityConfig(_Strict):
    """The authority stage (``analysis/authority.py``, DESIGN.md section 2)."""

    threshold: Fraction = Field(
        0.05,
        description="Authority (share of nameplate - idle) an actuator needs to enter a "
        "deployment's controller action space.",
    )
    reference: str = Field(
        "7b", description="Single-GPU deployment that retained authority is relative to."
    )
    real_sweep_steps: Annotated[int, Field(ge=0)] = Field(
        3,
        description="Steps of each real-workload sweep run (every actuator at its bounds) that "
        "identify measures and fits from; 0 = simulated sweeps only.",
    )


class RewardConfig(_Strict):
    """Reward of the PPO meta-controller, scored on a step's rates against the fixed arm's::

        tokens_weight * tokens_per_s / fixed tokens_per_s - violation_weight * violation rate
        - energy_weight * power / fixed power

    The oracle maximises the same reward over static settings (``control/env.py``)."""

    tokens_weight: Annotated[float, Field(ge=0)] = 1.0
    violation_weight: Annotated[float, Field(ge=0)] = Field(
        10.0, description="Penalty per unit of violation rate (10: one point = 10 % of output)."
    )
    energy_weight: Annotated[float, Field(ge=0)] = 0.2


class ControllerConfig(_Strict):
    """PPO meta-controller training in the simulator (``control/ppo.py``)."""

    reward: RewardConfig = Field(default_factory=RewardConfig)
    total_timesteps: Annotated[int, Field(ge=64)] = Field(
        40_000, description="Environment steps (GRPO steps) of PPO training per deployment."
    )
    episode_steps: Annotated[int, Field(ge=2)] = Field(
        64,
        description="GRPO steps per training episode (rewards are rates, so every step "
        "weighs the same whatever its length).",
    )
    n_envs: Annotated[int, Field(ge=1)] = Field(8, description="Vectorised environments.")
    n_steps: Annotated[int, Field(ge=2)] = Field(64, description="Steps per env per update.")
    batch_size: Annotated[int, Field(ge=2)] = 128
    n_epochs: Annotated[int, Field(ge=1)] = 8
    learning_rate: PositiveFloat = 1e-3
    gamma: Annotated[float, Field(gt=0, le=1)] = 0.5
    net_arch: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [32, 32])
    log_std_init: float = Field(
        -1.0, description="Initial log standard deviation of the Gaussian policy's actions."
    )
    ent_coef: Annotated[float, Field(ge=0)] = 0.0
    domain_randomization: bool = Field(
        True, description="Draw the physics from the calibration's ranges every episode."
    )
    cap_jitter_frac: Annotated[float, Field(ge=0, le=0.3)] = Field(
        0.08, description="Training caps are drawn within +-this share of cap_w."
    )
    torch_threads: Annotated[int, Field(ge=1)] = 1
    seed: Annotated[int, Field(ge=0)] | None = Field(None, description="null = top-level seed.")


# The simulator's arms: the real ones and the oracle (a simulator-only upper bound).
SimArmName = Literal[ArmName, "oracle"]


class ThresholdTuningConfig(_Strict):
    """Grid the threshold arm is tuned over in the simulator (best reward on tuning seeds)."""

    high_frac_of_cap: list[Annotated[float, Field(gt=0, le=1.5)]] = Field(
        default_factory=lambda: [0.95, 1.0, 1.05, 1.1]
    )
    low_frac_of_cap: list[Annotated[float, Field(gt=0, le=1.5)]] = Field(
        default_factory=lambda: [0.85, 0.9, 0.95]
    )
    decrease_factor: list[Annotated[float, Field(gt=0, lt=1)]] = Field(
        default_factory=lambda: [0.5, 0.75]
    )


class ScenarioConfig(_Strict):
    """An evaluation scenario the controllers were not tuned on."""

    name: PathName
    calibration: Path | None = Field(None, description="Another calibration; null = the study's.")
    cap_w: PositiveFloat | None = Field(
        None, description="Another cap for every deployment evaluated, W; null = their caps."
    )
    deployments: list[str] | None = Field(
        None, description="Deployments evaluated in the scenario; null = all."
    )
    retrain: bool = Field(True, description="Also retrain PPO in the scenario and report both.")


class EvaluateConfig(_Strict):
    """Arm-vs-arm evaluation in the simulator (``analysis/evaluate.py``)."""

    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0, 1, 2, 3, 4],
        min_length=5,
        description="Seeds every arm runs with on every deployment (at least 5).",
    )
    arms: list[SimArmName] = Field(
        default_factory=lambda: [
            "uncontrolled",
            "fixed",
            "fixed-safe",
            "threshold",
            "ppo",
            "hwcap",
            "oracle",
        ],
        min_length=1,
    )
    tuning_seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [1000, 1001],
        min_length=1,
        description="Seeds of the runs that tune fixed-safe and threshold (never evaluated).",
    )
    tuning_budget_frac: Annotated[float, Field(gt=0, le=1)] = Field(
        0.25, description="Tuning runs last this share of a deployment's budget_s."
    )
    exceedance_window_s: PositiveFloat = Field(
        0.5, description="Averaging window of the reported exceedance, s (the study: 0.5 s)."
    )
    confidence: Annotated[float, Field(gt=0.5, lt=1)] = Field(
        0.95, description="Confidence level of the intervals over seeds."
    )
    threshold_grid: ThresholdTuningConfig = Field(default_factory=ThresholdTuningConfig)
    scenarios: list[ScenarioConfig] = Field(
        default_factory=lambda: [
            ScenarioConfig(name="7b-cap-305w", cap_w=305.0, deployments=["7b"])
        ],
        description="Scenarios evaluated besides the study's (as is, and after retraining).",
    )


class JobResources(_Strict):
    """What one GPU job asks Slurm for (submitit's parameters). ``launch.job`` holds the defaults
    and each ``run_sizes`` entry's ``job`` overrides them; a field left null takes the value
    from the level above (``launch.job``, then submitit's own default)."""

    gpus: Annotated[int, Field(ge=0)] | None = Field(
        None, description="GPUs per job (gpus_per_node); null = the run size's processes."
    )
    gpu_type: str | None = Field(
        None, description="GPU type for the gres request (gpu:TYPE:N), e.g. a100; null = any."
    )
    cpus_per_task: Annotated[int, Field(ge=1)] | None = None
    mem_gb: PositiveFloat | None = None
    timeout_min: Annotated[int, Field(ge=1)] | None = Field(None, description="Time limit, min.")
    qos: str | None = Field(None, description="Slurm quality of service (--qos).")
    constraint: str | None = Field(None, description="Slurm node features (--constraint).")
    setup: list[str] | None = Field(
        None,
        description="Shell lines run in the job before the run (module load, conda activate); "
        "they replace, not extend, the level above.",
    )
    additional_parameters: dict[str, str | int] | None = Field(
        None,
        description="Other sbatch options, passed through as they are (submitit's "
        "slurm_additional_parameters), e.g. {reservation: study, exclude: node07}.",
    )

    def over(self, base: JobResources) -> JobResources:
        """These resources with every null field taken from ``base``."""
        return JobResources.model_validate(
            {**base.model_dump(), **self.model_dump(exclude_none=True)}
        )


class RunSize(_Strict):
    """A model size the study runs for real, and on how many processes (GPUs) it runs."""

    size: ModelSize
    processes: Annotated[int, Field(ge=1)] = Field(
        1, description="Processes (GPUs) per run, launched with accelerate."
    )
    zero_stage: Literal[0, 3] = Field(
        0, description="DeepSpeed ZeRO stage for multi-process runs (3 = sharded parameters)."
    )
    job: JobResources = Field(
        default_factory=JobResources,
        description="This size's job resources; null fields come from launch.job.",
    )


def _check_carbon_region(region: str) -> str:
    """``region`` when CodeCarbon's data has its intensity; else ValueError with suggestions."""
    from grpo_power.economics.carbon import carbon_intensity

    carbon_intensity(region)  # UnknownRegion is a ValueError: pydantic reports it on the field
    return region


class SourcedValue(_Strict):
    """A constant with where it comes from and the year it describes (the report lists both)."""

    unit: ClassVar[str] = ""
    value: float

    source: str = Field(min_length=1, description="Publication or table the value comes from.")
    year: Annotated[int, Field(ge=1990, le=2100)] = Field(description="Year the value describes.")


class ElectricityPrice(SourcedValue):
    """Electricity price paid by the datacenter, $/kWh (not cents)."""

    unit: ClassVar[str] = "$/kWh"

    value: PositiveFloat = Field(description="$/kWh (0.0806, not 8.06 cents).")

    @field_validator("value")
    @classmethod
    def _not_cents(cls, value: float) -> float:
        if value > 2:
            raise ValueError(
                f"{value:g} $/kWh is implausible (above 2 $/kWh): is it in cents? "
                f"{value:g} c/kWh is {value / 100:g} $/kWh"
            )
        return value


class PowerUsageEffectiveness(SourcedValue):
    """Power usage effectiveness: facility energy / IT energy (1.0 = no overhead)."""

    unit: ClassVar[str] = "facility / IT energy"

    value: Annotated[float, Field(ge=1, le=3)] = Field(description="PUE, at least 1.")


class CapacityCost(SourcedValue):
    """Capital cost of one MW of datacenter critical (IT) capacity, $/MW."""

    unit: ClassVar[str] = "$/MW"

    value: PositiveFloat = Field(description="$ per MW of critical load (11.7e6, not 11.7).")

    @field_validator("value")
    @classmethod
    def _whole_dollars(cls, value: float) -> float:
        if not 1e5 <= value <= 1e9:
            raise ValueError(
                f"{value:g} $/MW is implausible (outside 1e5-1e9 $/MW): write dollars, e.g. "
                "11.7e6 for $11.7 million per MW"
            )
        return value


class HostPower(SourcedValue):
    """Provisioned non-GPU IT power per GPU (CPUs, memory, network, fans of its server), W."""

    unit: ClassVar[str] = "W per GPU"

    value: Annotated[float, Field(ge=0, le=5000)] = Field(description="W per GPU; 0 = GPUs only.")


class GpuHourPrice(SourcedValue):
    """Rental price of one GPU for one hour, $."""

    unit: ClassVar[str] = "$ per GPU-hour"

    value: Annotated[float, Field(gt=0, le=100)] = Field(description="$ per GPU-hour.")


class Range(_Strict):
    """A low and a high value a headline number is recomputed at (sensitivity)."""

    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self


class SensitivityConfig(_Strict):
    """One-at-a-time sensitivity of the headline economics to price, PUE and carbon intensity."""

    electricity_usd_per_kwh: Range = Field(
        default_factory=lambda: Range(low=0.0575, high=0.1864),
        description="$/kWh. US EIA, Electric Power Annual 2023 (released 2024), average revenue "
        "per kWh from industrial customers by state: lowest New Mexico 5.75 c, California "
        "18.64 c (2023).",
    )
    pue: Range = Field(
        default_factory=lambda: Range(low=1.10, high=2.0),
        description="PUE. Low: Google's fleet-wide trailing-twelve-month PUE, about 1.10 "
        "(Google 2024 Environmental Report, 2023 data); high: an assumption for older "
        "air-cooled enterprise rooms.",
    )
    capacity_usd_per_mw: Range = Field(
        default_factory=lambda: Range(low=9.3e6, high=15.0e6),
        description="$/MW. Cushman & Wakefield, Data Center Development Cost Guide 2025 (2024 "
        "data): the cheapest (San Antonio) and dearest (Reno) of 19 US markets.",
    )
    carbon_regions: list[str] = Field(
        default_factory=lambda: ["FRA", "IND"],
        min_length=1,
        description="Carbon regions (same forms as carbon_region) the carbon figures are "
        "recomputed at: default a low-carbon grid (France) and a coal-heavy one (India).",
    )

    @model_validator(mode="after")
    def _valid(self) -> SensitivityConfig:
        if self.electricity_usd_per_kwh.low <= 0:
            raise ValueError("electricity_usd_per_kwh.low must be above 0 $/kWh")
        if self.capacity_usd_per_mw.low <= 0:
            raise ValueError("capacity_usd_per_mw.low must be above 0 $/MW")
        if self.pue.low < 1:
            raise ValueError(f"pue.low ({self.pue.low}) must be at least 1")
        return self

    @field_validator("carbon_regions")
    @classmethod
    def _known_regions(cls, regions: list[str]) -> list[str]:
        return [_check_carbon_region(region) for region in regions]


class PilotConfig(_Strict):
    """The low-cost pilot that would confirm the controller's gain and the oversubscription
    headroom on real hardware (``economics/pilot.py``)."""

    gpus_per_node: Annotated[int, Field(ge=1)] = Field(
        8, description="GPUs per node (NVIDIA DGX/HGX A100: 8)."
    )
    run_steps: Annotated[int, Field(ge=1)] = Field(
        500, description="GRPO steps per pilot run (the study's runs: 500 steps)."
    )
    confidence: Annotated[float, Field(gt=0.5, lt=1)] = Field(
        0.95, description="Confidence of the pilot's conclusions (two-sided for the gain)."
    )
    power: Annotated[float, Field(gt=0.5, lt=1)] = Field(
        0.8, description="Probability that the pilot detects the gain when it is there."
    )
    min_effect_share: Annotated[float, Field(gt=0, le=1)] = Field(
        0.5,
        description="The pilot is sized to detect a gain this share of the simulated one "
        "(the real gain may be smaller than the simulator's).",
    )
    sd_inflation: Annotated[float, Field(ge=1)] = Field(
        2.0,
        description="Seed-to-seed spread of real runs relative to the simulator's (an "
        "assumption: the simulator's noise is narrower than a real cluster's).",
    )
    min_seeds: Annotated[int, Field(ge=2)] = Field(
        3, description="Seeds per arm at least, whatever the power calculation says."
    )
    exceedance_target: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.001,
        description="Fleet exceedance rate at fleet.window_s the pilot must bound: with no "
        "exceedance in n independent windows, the rate is below -ln(1 - confidence) / n.",
    )


class EconomicsConfig(_Strict):
    """Energy cost, carbon, oversubscription value and the pilot (the economics stage).

    Every constant carries its source and year; the carbon intensity is looked up offline in
    CodeCarbon's packaged data (location-based), never defaulted to a world average.
    """

    electricity_price: ElectricityPrice = Field(
        default_factory=lambda: ElectricityPrice(
            value=0.0806,
            source="US EIA, Electric Power Annual 2023 (released October 2024): average retail "
            "price to industrial customers, US, 8.06 c/kWh",
            year=2023,
        )
    )
    pue: PowerUsageEffectiveness = Field(
        default_factory=lambda: PowerUsageEffectiveness(
            value=1.58,
            source="Uptime Institute Global Data Center Survey 2023: industry average PUE",
            year=2023,
        )
    )
    carbon_region: str = Field(
        "USA",
        description="Where the fleet draws power: an ISO 3166 alpha-3 country code (CodeCarbon's "
        "global_energy_mix.json: Our World in Data / Ember, the year per country) or "
        "'<provider>:<region>' for a cloud region (CodeCarbon's cloud/impact.csv, the "
        "provider's published figure), e.g. 'gcp:us-central1'. Location-based intensity.",
    )
    capacity_cost: CapacityCost = Field(
        default_factory=lambda: CapacityCost(
            value=11.7e6,
            source="Cushman & Wakefield, Data Center Development Cost Guide 2025: average cost "
            "to develop 1 MW of critical load across 19 US markets ($9.3M-$15.0M), data "
            "through October 2024",
            year=2024,
        )
    )
    host_power: HostPower = Field(
        default_factory=lambda: HostPower(
            value=412.5,
            source="NVIDIA DGX A100 datasheet: 6.5 kW maximum system power for 8 A100 "
            "(8 x 400 W on GPUs) -> (6500 - 3200) / 8 W per GPU, provisioned at nameplate",
            year=2020,
        )
    )
    gpu_hour: GpuHourPrice = Field(
        description="What a GPU-hour costs: prices the GPU time a token takes and the pilot.",
        default_factory=lambda: GpuHourPrice(
            value=4.10,
            source="AWS EC2 p4d.24xlarge (8x A100 40 GB) on-demand, us-east-1: "
            "$32.77 per hour / 8 GPUs",
            year=2024,
        ),
    )
    fleet_gpus: Annotated[int, Field(ge=1)] = Field(
        10_000, description="GPUs of the fleet the annual cost and carbon are scaled to."
    )
    year: Annotated[int, Field(ge=2000, le=2100)] = Field(
        2025, description="Calendar year the annual figures cover (8784 h in leap years)."
    )
    utilization: Annotated[float, Field(gt=0, le=1)] = Field(
        1.0, description="Share of the year's hours the fleet runs GRPO training."
    )
    controller_arm: SimArmName = Field(
        "ppo", description="The arm whose savings the headline reports."
    )
    baseline_arm: SimArmName = Field(
        "fixed", description="The arm the headline savings are measured against."
    )
    sensitivity: SensitivityConfig = Field(default_factory=SensitivityConfig)
    pilot: PilotConfig = Field(default_factory=PilotConfig)

    @field_validator("carbon_region")
    @classmethod
    def _known_region(cls, region: str) -> str:
        return _check_carbon_region(region)

    @model_validator(mode="after")
    def _arms_differ(self) -> EconomicsConfig:
        if self.controller_arm == self.baseline_arm:
            raise ValueError(
                f"controller_arm and baseline_arm are both {self.controller_arm!r}: the headline "
                "compares two different arms"
            )
        return self


class ReportConfig(_Strict):
    """Figures and the HTML report (the report stage)."""

    title: str = Field(
        "GRPO power: measurement, control, fleet provisioning and economics",
        description="Title of the HTML report.",
    )
    dpi: Annotated[int, Field(ge=50, le=600)] = Field(200, description="PNG resolution, dpi.")
    trace_s: PositiveFloat = Field(
        60.0, description="Seconds of each arm's power trace the trace figure shows."
    )
    max_points: Annotated[int, Field(ge=100)] = Field(
        20_000,
        description="Samples per arm and deployment drawn in distribution figures (evenly "
        "thinned beyond this).",
    )


LauncherName = Literal["direct", "submitit"]


class LaunchConfig(_Strict):
    """How runs are launched: directly, or as submitit jobs (Slurm on a cluster). The Slurm
    account and partitions are written here once; the workflow's analysis jobs read them too."""

    launcher: LauncherName = Field(
        "direct",
        description="direct: `grpo-power run` trains in its own process; submitit: it submits a "
        "job (an array for several seeds) and waits for it (a local rule on Slurm).",
    )
    cluster: Literal["auto", "slurm", "local", "debug"] = Field(
        "auto", description="submitit cluster; auto = slurm where sbatch exists, else local."
    )
    slurm_account: str | None = Field(None, description="Account of every job (GPU and CPU).")
    slurm_partition: str | None = Field(
        None, description="Partition of the GPU jobs (runs, calibration, sweeps)."
    )
    analysis_partition: str | None = Field(
        None,
        description="Partition of the workflow's CPU-only analysis jobs (windows, fleet, "
        "identify, controller, evaluate, economics, report); null = the cluster's default.",
    )
    job: JobResources = Field(
        default_factory=lambda: JobResources(cpus_per_task=8, mem_gb=64.0, timeout_min=240),
        description="Resources of a GPU job, unless its run size overrides them.",
    )
    array_parallelism: Annotated[int, Field(ge=1)] = Field(
        256, description="At most this many tasks of one job array run at once."
    )
    on_interrupt: Literal["cancel", "keep"] = Field(
        "cancel",
        description="When the waiting `grpo-power run` (Snakemake's job) is interrupted "
        "(Ctrl-C, SIGTERM): cancel its Slurm jobs (they checkpoint first), or keep them "
        "running; a restarted workflow reattaches to a job that is still alive either way.",
    )
    poll_s: PositiveFloat = Field(10.0, description="How often a waiting job's state is read, s.")
    checkpoint_grace_s: PositiveFloat = Field(
        60.0,
        description="On preemption or timeout (USR2), how long the job waits for the run to "
        "save a checkpoint at the end of its current step, s; keep it below submitit's 90 s "
        "signal delay.",
    )
    max_timeouts: Annotated[int, Field(ge=0)] = Field(
        3, description="How often a timed-out run is requeued to resume (submitit)."
    )


class Config(_Strict):
    """The whole configuration of a grpo-power study."""

    results_dir: Path = Field(Path("results"), description="Where every stage writes its outputs.")
    seed: Annotated[int, Field(ge=0)] = 0
    gpu: GpuSpec = Field(default_factory=GpuSpec)
    cap_w: PositiveFloat = Field(
        320.0, description="Per-GPU power cap the controllers keep under, W."
    )
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    arms: ArmsConfig = Field(default_factory=ArmsConfig)
    launch: LaunchConfig = Field(default_factory=LaunchConfig)
    run_sizes: list[RunSize] = Field(
        default_factory=lambda: [RunSize(size="tiny")],
        min_length=1,
        description="Model sizes the run stage trains for real, each with its processes.",
    )
    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0], min_length=1, description="Seeds each arm runs with."
    )
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    sim: SimConfig = Field(default_factory=SimConfig)
    authority: AuthorityConfig = Field(default_factory=AuthorityConfig)
    controller: ControllerConfig = Field(default_factory=ControllerConfig)
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)
    economics: EconomicsConfig = Field(default_factory=EconomicsConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    planner: PlannerConfig = Field(default_factory=PlannerConfig)

    def run_size(self, size: str) -> RunSize:
        """How ``size`` runs: its ``run_sizes`` entry, or one process when it has none."""
        for entry in self.run_sizes:
            if entry.size == size:
                return entry
        return RunSize(size=size)  # type: ignore[arg-type]

    def job_resources(self, size: str) -> JobResources:
        """The resources of a GPU job of ``size``: its ``run_sizes`` entry over ``launch.job``,
        with the GPUs defaulting to the size's processes."""
        entry = self.run_size(size)
        resources = entry.job.over(self.launch.job)
        if resources.gpus is None:
            resources.gpus = entry.processes
        return resources

    @model_validator(mode="after")
    def _run_sizes_unique(self) -> Config:
        sizes = [entry.size for entry in self.run_sizes]
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"run_sizes lists a size twice: {sizes}")
        return self

    @model_validator(mode="after")
    def _cap_within_gpu_range(self) -> Config:
        if self.cap_w > self.gpu.nameplate_w:
            raise ValueError(
                f"cap_w ({self.cap_w} W) is above gpu.nameplate_w ({self.gpu.nameplate_w} W): "
                "a cap the GPU can never reach controls nothing"
            )
        if self.cap_w <= self.gpu.idle_w:
            raise ValueError(
                f"cap_w ({self.cap_w} W) must be above gpu.idle_w ({self.gpu.idle_w} W)"
            )
        return self

    @model_validator(mode="after")
    def _study_sections_consistent(self) -> Config:
        names = [d.name for d in self.sim.deployments]
        if self.authority.reference not in names:
            raise ValueError(
                f"authority.reference ({self.authority.reference!r}) must be one of the "
                f"deployments {names}"
            )
        for d in self.sim.deployments:
            if d.cap_w is not None and not self.gpu.idle_w < d.cap_w <= self.gpu.nameplate_w:
                raise ValueError(
                    f"deployment {d.name}: cap_w ({d.cap_w} W) must lie in (idle_w, nameplate_w]"
                )
        scenarios = [s.name for s in self.evaluate.scenarios]
        if len(set(scenarios)) != len(scenarios):
            raise ValueError(f"evaluate.scenarios need unique names, got {scenarios}")
        for scenario in self.evaluate.scenarios:
            unknown = sorted(set(scenario.deployments or []) - set(names))
            if unknown:
                raise ValueError(
                    f"evaluate.scenarios {scenario.name}: unknown deployment(s) {unknown}; "
                    f"configured: {names}"
                )
        return self

    @model_validator(mode="after")
    def _fleet_window_listed(self) -> Config:
        if not any(abs(w - self.fleet.window_s) <= 1e-9 * w for w in self.windows.windows_s):
            raise ValueError(
                f"fleet.window_s ({self.fleet.window_s} s) must be one of windows.windows_s "
                f"{self.windows.windows_s}"
            )
        return self


def _format_errors(source: str, error: ValidationError) -> str:
    """One line per bad field, each starting with the file: ``<file>: <field>: <reason>``."""
    lines = []
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key (check its spelling and section)"
        given = item.get("input")
        shown = "" if isinstance(given, dict) or item["type"] == "missing" else f" (got {given!r})"
        lines.append(f"{source}: {path}: {message}{shown}")
    return "\n".join(lines)


def validate_config(data: dict[str, Any], source: str = "<config>") -> Config:
    """Validate a config mapping; raise :class:`ConfigError` naming each bad field."""
    try:
        return Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_format_errors(source, error)) from None


def packaged_config_path() -> Path:
    """The default config shipped in the package: the repository's ``config/config.yaml``."""
    return Path(str(files("grpo_power").joinpath(PACKAGED_CONFIG_NAME)))


def default_config_path(folder: Path | str | None = None) -> Path:
    """``config/config.yaml`` in ``folder`` (default: the working folder) when it exists, else
    the packaged default (:func:`packaged_config_path`)."""
    local = DEFAULT_CONFIG_PATH if folder is None else Path(folder) / DEFAULT_CONFIG_PATH
    return local if local.is_file() else packaged_config_path()


class DuplicateKeyError(yaml.YAMLError):
    """A mapping of a YAML file names the same key twice."""

    def __init__(self, key: Any, first_line: int, line: int) -> None:
        super().__init__(f"line {line}: duplicate key {key!r} (first at line {first_line})")
        self.key, self.first_line, self.line = key, first_line, line


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (plain YAML keeps the
    last value silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise DuplicateKeyError(key, seen[key], line)
                seen[key] = line
            except TypeError:  # an unhashable key: the base class reports it
                continue
        return super().construct_mapping(node, deep)


def yaml_error_message(path: Path | str, error: yaml.YAMLError) -> str:
    """One line for a YAML error: the file, the line (and column), and the problem."""
    if isinstance(error, DuplicateKeyError):
        return (
            f"{path}: line {error.line}: duplicate key {error.key!r} (first at line "
            f"{error.first_line}); expected each key once (YAML would keep only the last value)"
        )
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    detail = f"{problem} ({context})" if context else problem
    return f"{path}: not valid YAML{where}: {' '.join(str(detail).split())}"


def read_yaml(path: Path | str) -> Any:
    """Parse a YAML file (UTF-8, a byte-order mark allowed) refusing duplicate keys; errors are
    one-line :class:`ConfigError` naming the file and the line."""
    from grpo_power.user_paths import path_problem

    path = Path(path)
    problem = path_problem(path, "a YAML config file", ("config.yaml",))
    if problem:
        raise ConfigError(problem)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: expected a YAML config file, got bytes that are not text (byte {error.start})"
        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file ({error.strerror})") from None
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader
    except yaml.YAMLError as error:
        raise ConfigError(yaml_error_message(path, error)) from None
    except (RecursionError, OverflowError, ValueError) as error:
        raise ConfigError(f"{path}: not valid YAML: {type(error).__name__}") from None


def load_config(
    path: Path | str = DEFAULT_CONFIG_PATH, overrides: dict[str, Any] | None = None
) -> Config:
    """Load and validate a YAML config file, optionally deep-merged with ``overrides``."""
    path = Path(path)
    data = read_yaml(path)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}"
        )
    if overrides:
        data = deep_merge(data, overrides)
    try:
        return validate_config(data, str(path))
    except (OverflowError, RecursionError) as error:
        raise ConfigError(f"{path}: a value is out of range ({error})") from None


# --------------------------------------------------------------------------------------------
# command-line options: the same types (and ranges) as the config fields they stand for


def _field_info(dotted: str) -> Any:
    model: Any = Config
    info = None
    for part in dotted.split("."):
        info = model.model_fields[part]
        model = info.annotation
    return info


def _bounds(metadata: list[Any]) -> list[str]:
    words = []
    for item in metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(item, attr, None)
            if value is not None:
                words.append(f"{sign} {value:g}")
    return words


def validate_option(option: str, dotted: str, value: Any, unit: str) -> Any:
    """Validate a command-line option with the type of the config field ``dotted`` (finite,
    and within the field's range); raise a one-line :class:`ConfigError` naming the option."""
    info = _field_info(dotted)
    kind = info.annotation
    adapter = TypeAdapter(Annotated[kind, *info.metadata], config=ConfigDict(allow_inf_nan=False))
    try:
        return adapter.validate_python(value)
    except ValidationError as error:
        reason = error.errors()[0]["msg"]
    except OverflowError:
        reason = "out of range"
    bounds = " and ".join(_bounds(info.metadata))
    finite = ", finite" if kind is float else ""
    raise ConfigError(
        f"{option}: expected {unit} {bounds}{finite}, as the config's {dotted}: {reason} "
        f"(got {value!r})"
    )


def validate_setting(config: Config, option: str, dotted: str, value: Any) -> None:
    """Check that the config stays valid with ``dotted`` set to an option's value (the checks
    between fields: a cap above idle and at most the nameplate, ...)."""
    data = config.model_dump()
    _set_dotted(data, dotted, value)
    try:
        Config.model_validate(data)
    except ValidationError as error:
        reason = error.errors()[0]["msg"].removeprefix("Value error, ")
        shown = f"{value:g}" if isinstance(value, float) else repr(value)
        raise ConfigError(f"{option}: {reason} (got {shown})") from None


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[key]
    data[last] = value


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``overrides`` merged in, recursing into nested mappings."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def write_resolved_config(config: Config, folder: Path | str) -> Path:
    """Write the validated config as YAML into ``folder``, named by its content
    (``config-<sha256 prefix>.yaml``); an existing file of the same content is left as it is.

    Returns the file's path. Two configs never share a file, so writing one (a dry run with
    another config, say) never changes the file a running workflow's jobs read.
    """
    import hashlib

    from grpo_power.atomic import write_text_atomic

    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = Path(folder) / f"config-{digest}.yaml"
    if not path.exists():
        write_text_atomic(path, text)
    return path
