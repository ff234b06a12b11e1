"""The one configuration schema of grpo-power.

Every stage, the CLI and the Snakefile read their settings through :func:`load_config`, which
validates a YAML file against :class:`Config`. A bad value is rejected with the file, the field
path and the reason, for example::

    config/config.yaml: telemetry.period_s: Input should be greater than 0 (got -1)

Simulator defaults cite the row of ``shared/CALIBRATION.md`` they come from in their description.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_CONFIG_PATH = Path("config/config.yaml")

PositiveFloat = Annotated[float, Field(gt=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class ConfigError(ValueError):
    """A configuration file could not be read or failed validation."""


class _Strict(BaseModel):
    """Base of every config section: unknown keys are errors, values are re-validated on set."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


class GpuSpec(_Strict):
    """The GPU model the study targets (measured or simulated)."""

    name: str = Field("NVIDIA A100-SXM4-40GB", description="GPU model name, as NVML reports it.")
    nameplate_w: PositiveFloat = Field(
        400.0, description="Board power limit (TDP) in W. A100 SXM4: 400 W; some 80 GB parts 500 W."
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
        0.85,
        description="Training (forward+backward) power fraction at micro-batch 1. "
        "CALIBRATION.md 'training, compute phase': 0.9-1.0 TDP at production batch sizes.",
    )
    train_slope_per_doubling: Annotated[float, Field(ge=0, le=0.5)] = Field(
        0.03, description="Training power fraction gained per doubling of the micro-batch."
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
        description="Overshoot above nameplate at the start of a generation phase (prefill), as a "
        "fraction of nameplate. CALIBRATION.md 'prefill': peaks about 1.09 TDP.",
    )
    transient_s: Annotated[float, Field(ge=0)] = Field(
        0.3, description="Duration of the prefill transient at the start of a generation phase, s."
    )
    noise_w: Annotated[float, Field(ge=0)] = Field(
        6.0, description="Standard deviation of sample-to-sample measurement noise, W."
    )
    temp_ambient_c: float = Field(35.0, description="GPU temperature at idle, deg C.")
    temp_c_per_w: Annotated[float, Field(ge=0)] = Field(
        0.1, description="Steady-state temperature rise per watt above idle, deg C/W."
    )
    temp_tau_s: PositiveFloat = Field(30.0, description="Thermal time constant, s.")
    sm_clock_max_mhz: PositiveFloat = Field(1410.0, description="A100 maximum SM boost clock, MHz.")


class TelemetryConfig(_Strict):
    """How power is sampled and stored."""

    source: Literal["simulated", "nvml", "auto"] = Field(
        "simulated",
        description="simulated: the A100 power model driven by the workload's phases; nvml: real "
        "GPUs through pynvml; auto: nvml when NVML and a GPU are present, else simulated.",
    )
    period_s: Annotated[float, Field(gt=0, le=60)] = Field(
        0.5,
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


class Config(_Strict):
    """The whole configuration of a grpo-power study."""

    results_dir: Path = Field(Path("results"), description="Where every stage writes its outputs.")
    seed: Annotated[int, Field(ge=0)] = 0
    gpu: GpuSpec = Field(default_factory=GpuSpec)
    cap_w: PositiveFloat = Field(
        300.0, description="Per-GPU power cap the controllers keep under, W."
    )
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)

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


def _format_errors(source: str, error: ValidationError) -> str:
    lines = [f"{source}: {error.error_count()} invalid setting(s)"]
    for item in error.errors():
        path = ".".join(str(part) for part in item["loc"]) or "(top level)"
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key (check its spelling and section)"
        given = item.get("input")
        shown = "" if isinstance(given, dict) or item["type"] == "missing" else f" (got {given!r})"
        lines.append(f"  {path}: {message}{shown}")
    return "\n".join(lines)


def validate_config(data: dict[str, Any], source: str = "<config>") -> Config:
    """Validate a config mapping; raise :class:`ConfigError` naming each bad field."""
    try:
        return Config.model_validate(data)
    except ValidationError as error:
        raise ConfigError(_format_errors(source, error)) from None


def load_config(
    path: Path | str = DEFAULT_CONFIG_PATH, overrides: dict[str, Any] | None = None
) -> Config:
    """Load and validate a YAML config file, optionally deep-merged with ``overrides``."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config file ({error.strerror})") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}"
        )
    if overrides:
        data = deep_merge(data, overrides)
    return validate_config(data, str(path))


def deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``overrides`` merged in, recursing into nested mappings."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def write_resolved_config(config: Config, path: Path | str) -> Path:
    """Write the validated config as YAML, only when it differs from what is there (keeps mtime)."""
    path = Path(path)
    text = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path
