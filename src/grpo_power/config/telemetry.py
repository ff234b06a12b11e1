"""Config sections of the GPU and its power telemetry: ``gpu``, ``telemetry`` (with the
simulated power source's model, ``telemetry.simulated``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from grpo_power.config.base import MAX_NAMEPLATE_W, Fraction, PositiveFloat, Strict
from grpo_power.config.gpu_models import GPU_MODELS, NvmlPower, gpu_model_for


class GpuSpec(Strict):
    """The GPU model the study targets (measured or simulated): a parameter set chosen by
    ``name`` (``config/gpu_models.py``), whose board power, idle power and NVML semantics fill
    what the section does not set."""

    name: str = Field(
        "NVIDIA A100-SXM4-80GB",
        description="GPU model name, as NVML reports it; one of "
        f"{', '.join(sorted(GPU_MODELS))}. docs/calibration.md 'GPU models'.",
    )
    nameplate_w: Annotated[float, Field(gt=0, le=MAX_NAMEPLATE_W)] = Field(
        400.0,
        description="Board power limit (TDP) in W. A100 SXM4: 400 W; some 80 GB parts 500 W "
        f"(at most {MAX_NAMEPLATE_W:g} W: no GPU board is rated higher).",
    )
    idle_w: PositiveFloat = Field(
        60.0,
        description="Idle power of the board, W, without a CUDA context (a resident one adds "
        "26-50 W on HBM parts). docs/calibration.md 'idle' row: 56-66 W (A100; the part's "
        "default otherwise).",
    )
    sm_clock_max_mhz: PositiveFloat | None = Field(
        1410.0,
        description="Maximum SM boost clock, MHz (the simulated clock readings' ceiling). "
        "Default: the part's (A100 1410, H100 and H200 1980; "
        "docs/calibration.md 'GPU models'); another part described by the section: unknown "
        "(the simulated readings are empty) unless given.",
    )
    nvml_power: NvmlPower = Field(
        "instant",
        description="What NVML's power reading is on this part: instant (A100) or average_1s "
        "(a 1 s average: H100 and newer); the energy counter exists on all. Default: the "
        "part's. docs/calibration.md 'NVML reading semantics'.",
    )

    @model_validator(mode="before")
    @classmethod
    def _part_defaults(cls, data: Any) -> Any:
        """Board power, idle power and NVML semantics from the part ``name`` names, where the
        section does not set them; a board power the part does not ship with is refused. A part
        without a parameter set is accepted when the section gives its board and idle power."""
        if not isinstance(data, dict):
            return data
        name = str(data.get("name", cls.model_fields["name"].default))
        if name not in GPU_MODELS and {"nameplate_w", "idle_w"} <= set(data):
            return {"sm_clock_max_mhz": None, **data}  # another part, described by the section
        try:
            model = gpu_model_for(name)
        except ValueError as error:
            raise ValueError(
                f"{error}; for another part give gpu.nameplate_w and gpu.idle_w (and "
                "gpu.nvml_power) yourself"
            ) from None
        filled = {
            "nameplate_w": model.nameplate_w,
            "idle_w": model.idle_w,
            "nvml_power": model.nvml_power,
            "sm_clock_max_mhz": model.sm_clock_max_mhz,
            **data,
        }
        nameplate_w = filled["nameplate_w"]
        if isinstance(nameplate_w, int | float) and nameplate_w not in model.nameplate_variants_w:
            variants = " or ".join(f"{w:g} W" for w in model.nameplate_variants_w)
            raise ValueError(
                f"nameplate_w: expected {variants} for the {model.name}, got {nameplate_w:g} W"
            )
        return filled

    @model_validator(mode="after")
    def _idle_below_nameplate(self) -> GpuSpec:
        if self.idle_w >= self.nameplate_w:
            raise ValueError(
                f"idle_w ({self.idle_w} W) must be below nameplate_w ({self.nameplate_w} W)"
            )
        return self


class SimulatedPowerConfig(Strict):
    """Parameters of the occupancy-driven A100 power model (``sim/power_model.py``).

    Power while busy is ``idle_w + (nameplate_w - idle_w) * frac`` where
    ``frac = base + slope * log2(batch)`` for the phase, clipped to ``max_frac``.
    """

    decode_base_frac: Fraction = Field(
        0.64,
        description="Decode power fraction at batch 1. docs/calibration.md "
        "'measured decode, Qwen3-8B on vLLM': the steady line of public A100 traces, 277.5 W at "
        "concurrency 1 -> (277.5-60)/340 = 0.64 (the literature prior, '7-8B decode': 222-234 "
        "W, 0.49).",
    )
    decode_slope_per_doubling: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.0193,
        description="Decode power fraction gained per doubling of the decode batch. "
        "docs/calibration.md 'measured decode, Qwen3-8B on vLLM': 6.55 W per doubling -> "
        "6.55/340 = 0.0193 (the literature prior, '7-8B decode': 0.057).",
    )
    prefill_slope_per_doubling: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.057,
        description="Prefill power fraction gained per doubling of the prompt tokens processed "
        "at once, from the decode curve's value at one token. docs/calibration.md 'prefill': "
        "a prefill reaches or exceeds TDP, so it keeps the literature '7-8B decode' slope "
        "(0.057): the measured decode line's 0.0193 describes a memory-bound decode and would "
        "never bring a compute-bound prefill to TDP.",
    )
    train_base_frac: Fraction = Field(
        0.66,
        description="Training (forward+backward) power fraction at micro-batch 1. "
        "docs/calibration.md 'training, compute phase' gives 0.9-1.0 TDP at production batch "
        "sizes; GRPO's small micro-batches are assumed lower (an assumption: identify refits it).",
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
    transient_peak_frac: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.28,
        description="Ceiling of the prefill overshoot above nameplate, as a fraction of nameplate. "
        "docs/calibration.md 'measured decode, Qwen3-8B on vLLM': single readings reach 1.281 "
        "x nameplate at prefill (the literature prior, 'prefill': about 1.09 TDP).",
    )
    noise_w: Annotated[float, Field(ge=0)] = Field(
        6.4,
        description="Standard deviation of sample-to-sample measurement noise where the GPU "
        "works, W; it shrinks to none at idle (idle readings spread under 1 W). "
        "docs/calibration.md 'measured decode, Qwen3-8B on vLLM': the robust spread of decode "
        "readings about the steady line, 6.41 W (the prior was an assumption of 4 W).",
    )
    sensor_window_s: Annotated[float, Field(ge=0, le=1)] = Field(
        0.025,
        description="Each reading averages the true power over this window, s. docs/calibration.md "
        "'NVML power update on A100': about every 100 ms, a 25 ms window.",
    )
    temp_ambient_c: float = Field(35.0, description="GPU temperature at idle, deg C.")
    temp_c_per_w: Annotated[float, Field(ge=0)] = Field(
        0.1, description="Steady-state temperature rise per watt above idle, deg C/W."
    )
    temp_tau_s: PositiveFloat = Field(30.0, description="Thermal time constant, s.")


TelemetrySource = Literal["simulated", "nvml", "auto"]


class TelemetryConfig(Strict):
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
    gpus: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)] | None = Field(
        None,
        description="CUDA device indices to sample (0 is the first GPU of "
        "CUDA_VISIBLE_DEVICES where it is set, as torch numbers them); null = those in "
        "CUDA_VISIBLE_DEVICES, else all (nvml) or one (simulated). Traces name each GPU by its "
        "NVML index.",
    )
    simulated: SimulatedPowerConfig = Field(default_factory=SimulatedPowerConfig)

    @field_validator("gpus")
    @classmethod
    def _each_gpu_once(cls, gpus: list[int] | None) -> list[int] | None:
        """A GPU named twice would be sampled twice (its samples and energy counted twice)."""
        if gpus is not None and len(set(gpus)) != len(gpus):
            raise ValueError("expected each GPU once")
        return gpus
