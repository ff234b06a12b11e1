"""The simulator's calibration: every physical parameter with a value, a range and a source.

A calibration file (JSON, labelled simulated) holds

- ``power``: GPU-level power parameters (the occupancy curve of :mod:`power_model`, the power of
  communication-bound and optimizer phases, measurement noise, and the response of the GPU to a
  hardware power limit);
- ``deployments``: per deployment (``7b`` on 1 GPU, ``14b`` on 2, ``72b`` on 4 sharded with
  ZeRO-3) the phase-time parameters of a GRPO step;
- ``fits``: what ``grpo-power identify`` fitted from measured step logs and traces, with
  residuals.

Each parameter is ``{"value", "low", "high", "source"}``. ``value`` drives the simulator;
``[low, high]`` is its uncertainty, used for domain randomisation (:func:`draw`). Defaults start
from the sourced ranges of ``shared/CALIBRATION.md`` (cited in each ``source``) and from public
A100 specifications; phase times of the larger models are scaled from the 7-8B measurements by
parameter count (decode reads every weight once per step; prefill and training are FLOP-bound).
Values not found in public sources are marked ``assumption``.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from grpo_power.config import Config, DeploymentConfig
from grpo_power.stats import nonnegative_least_squares

CALIBRATION_KIND = "grpo-power simulator calibration"
CALIBRATION_VERSION = 1

# Public A100 figures the phase-time defaults are derived from.
A100_BF16_TFLOPS = 312.0  # dense bf16 peak, NVIDIA A100 datasheet
A100_HBM_TB_S = 1.555  # HBM2 bandwidth of the 40 GB part, A100 datasheet
# Effective bandwidth of ZeRO-3's per-layer parameter all-gathers during generation (assumption):
# each decode step gathers every layer in messages of ~1 GB or less, latency-bound and well under
# the ~230 GB/s NCCL all-gather peak on A100 NVSwitch for large messages (the range's top).
ALLGATHER_GB_S = 100.0
ALLGATHER_GB_S_RANGE = (50.0, 230.0)
LLAMA3_8B_DECODE_MS_PER_B = 14.6 / 8.0  # CALIBRATION.md '7-8B decode time': 14.6 ms at b=1, 8.0B
LLAMA3_8B_DECODE_MS_PER_SEQ_PER_B = (35.3 - 14.6) / 63 / 8.0  # same row: b=1 -> b=64


@dataclass(frozen=True)
class Parameter:
    """One calibrated quantity: the value used, its plausible range, and where it came from."""

    value: float
    low: float
    high: float
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "source": self.source}

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> Parameter:
        try:
            value, low, high = float(data["value"]), float(data["low"]), float(data["high"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{where}: needs numeric value, low and high, got {data!r}") from None
        if not low <= value <= high:
            raise ValueError(f"{where}: value {value} lies outside [{low}, {high}]")
        return cls(value, low, high, str(data.get("source", "")))


def _p(value: float, low: float, high: float, source: str) -> Parameter:
    return Parameter(float(value), float(min(low, value)), float(max(high, value)), source)


# Names of the GPU-level power parameters (fractions are of nameplate - idle).
POWER_PARAMETERS = (
    "decode_base_frac",
    "decode_slope_per_doubling",
    "train_base_frac",
    "train_slope_per_doubling",
    "score_frac",
    "comm_frac",
    "optimizer_frac",
    "noise_w",
    "hwcap_margin_frac",
    "hwcap_exponent_memory",
    "hwcap_exponent_compute",
)
# Names of the per-deployment phase-time parameters.
DEPLOYMENT_PARAMETERS = (
    "decode_base_ms",
    "decode_ms_per_seq",
    "prefill_ms_per_token",
    "train_ms_per_token",
    "optimizer_s",
    "gather_ms",
    "gather_overlap",
    "gen_call_s",
    "score_base_s",
    "score_ms_per_seq",
)


def default_power(config: Config) -> dict[str, Parameter]:
    """GPU-level power parameters: values from ``telemetry.simulated``, ranges from CALIBRATION.md.

    Fractions are shares of ``nameplate_w - idle_w``.
    """
    sim = config.telemetry.simulated
    span_w = config.gpu.nameplate_w - config.gpu.idle_w
    idle_w = config.gpu.idle_w

    def frac(watts: float) -> float:
        return (watts - idle_w) / span_w

    def tdp_frac(share_of_tdp: float) -> float:
        return frac(share_of_tdp * config.gpu.nameplate_w)

    return {
        "decode_base_frac": _p(
            sim.decode_base_frac,
            frac(222.0),
            frac(234.0),
            "CALIBRATION.md '7-8B decode': 222-234 W at b=1",
        ),
        "decode_slope_per_doubling": _p(
            sim.decode_slope_per_doubling,
            0.035,
            0.075,
            "CALIBRATION.md '7-8B decode': 264-339 W at b=16, 316-378 W at b=64",
        ),
        "train_base_frac": _p(
            sim.train_base_frac,
            0.6,
            0.8,
            "assumption below CALIBRATION.md 'training, compute phase' 0.9-1.0 TDP "
            "(GRPO micro-batches are small)",
        ),
        "train_slope_per_doubling": _p(
            sim.train_slope_per_doubling, 0.0, 0.04, "assumption (identify refits it)"
        ),
        "score_frac": _p(sim.score_frac, 0.02, 0.1, "assumption: rewards scored on the CPU"),
        "comm_frac": _p(
            tdp_frac(0.42),
            tdp_frac(0.35),
            tdp_frac(0.5),
            "CALIBRATION.md 'training, communication-bound sharded phases': 0.35-0.5 TDP",
        ),
        "optimizer_frac": _p(0.45, 0.35, 0.6, "assumption: memory-bound elementwise Adam update"),
        "noise_w": _p(sim.noise_w, 2.0, 8.0, "assumption (identify refits it from traces)"),
        "hwcap_margin_frac": _p(
            0.02, 0.0, 0.04, "assumption: the power-limit loop settles slightly under the limit"
        ),
        "hwcap_exponent_memory": _p(
            0.13,
            0.08,
            0.2,
            "CALIBRATION.md 'energy vs power cap' (Samsi et al.): 250 -> 175 W cap, +6-7 % "
            "latency for memory-bound decode: slowdown = (demand/limit)^0.13 above idle",
        ),
        "hwcap_exponent_compute": _p(
            0.5,
            0.33,
            1.0,
            "assumption: compute-bound phases slow between the DVFS cube law (1/3) and "
            "clock-proportional (1)",
        ),
    }


def default_deployment(deployment: DeploymentConfig) -> dict[str, Parameter]:
    """Phase-time parameters of one deployment, scaled from the 7-8B sources by parameters.

    Decode reads every weight once per step (time proportional to parameters); prefill and
    training are FLOP-bound (2 and 6 FLOP per parameter and token at an assumed MFU); a ZeRO-3
    forward all-gathers the ``(g-1)/g`` of the bf16 weights a GPU does not hold.
    """
    b = deployment.params_b
    g = deployment.gpus
    sharded = deployment.zero_stage == 3 and g > 1
    gather_ms = b * 2.0 * (g - 1) / g / ALLGATHER_GB_S * 1e3 if sharded else 0.0
    prefill = 2.0 * b / A100_BF16_TFLOPS  # ms per token at MFU 1 (b in billions)
    train = 6.0 * b / A100_BF16_TFLOPS
    optimizer_s = b * 1e9 * 32.0 / g / (A100_HBM_TB_S * 1e12)
    return {
        "decode_base_ms": _p(
            LLAMA3_8B_DECODE_MS_PER_B * b,
            1.7 * b,
            13.7 / 6.74 * b,
            "CALIBRATION.md '7-8B decode time': Llama-3-8B 14.6 ms, Llama-2-7B 13.7 ms at b=1, "
            "scaled by parameters",
        ),
        "decode_ms_per_seq": _p(
            LLAMA3_8B_DECODE_MS_PER_SEQ_PER_B * b,
            0.03 * b,
            0.08 * b,
            "CALIBRATION.md '7-8B decode time': Llama-3-8B (GQA, like Qwen2.5) b=1 -> b=64, "
            "scaled by parameters",
        ),
        "prefill_ms_per_token": _p(
            prefill / 0.5,
            prefill / 0.65,
            prefill / 0.35,
            "2 FLOP/parameter/token at 312 TFLOP/s (A100 bf16), MFU 0.5 (0.35-0.65, assumption)",
        ),
        "train_ms_per_token": _p(
            train / 0.4,
            train / 0.5,
            train / 0.3,
            "6 FLOP/parameter/token at 312 TFLOP/s (A100 bf16), MFU 0.4 (0.3-0.5, assumption)",
        ),
        "optimizer_s": _p(
            optimizer_s,
            0.7 * optimizer_s,
            1.5 * optimizer_s,
            "Adam: 32 bytes read+written per parameter (sharded over GPUs) at 1.555 TB/s HBM",
        ),
        "gather_ms": _p(
            gather_ms,
            gather_ms * ALLGATHER_GB_S / ALLGATHER_GB_S_RANGE[1],
            gather_ms * ALLGATHER_GB_S / ALLGATHER_GB_S_RANGE[0],
            "ZeRO-3: (g-1)/g of the bf16 weights all-gathered per forward at an effective "
            "100 GB/s (50-230, assumption: per-layer gathers are latency-bound; 230 GB/s is the "
            "NCCL all-gather peak on A100 NVSwitch)"
            if sharded
            else "not sharded: no parameter gathers",
        ),
        "gather_overlap": _p(
            0.8 if sharded else 0.0,
            0.5 if sharded else 0.0,
            1.0 if sharded else 0.0,
            "assumption: share of compute time that hides prefetched gathers",
        ),
        "gen_call_s": _p(
            0.02, 0.005, 0.05, "assumption: host-side setup of one generate call (identify fits it)"
        ),
        "score_base_s": _p(0.05, 0.01, 0.2, "assumption: reward functions on the CPU"),
        "score_ms_per_seq": _p(1.0, 0.1, 5.0, "assumption: reward functions on the CPU"),
    }


@dataclass
class Calibration:
    """A whole calibration: GPU, power parameters, per-deployment parameters, fits."""

    gpu: dict[str, Any]
    power: dict[str, Parameter]
    # name -> {"gpus", "zero_stage", "params_b", "parameters": {name: Parameter}}
    deployments: dict[str, dict[str, Any]]
    origin: str = "defaults"
    fits: dict[str, Any] | None = None

    def deployment_parameters(self, name: str) -> dict[str, Parameter]:
        """The phase-time parameters of deployment ``name``."""
        if name not in self.deployments:
            raise ValueError(
                f"the calibration has no deployment {name!r}; it has {sorted(self.deployments)}"
            )
        return self.deployments[name]["parameters"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": CALIBRATION_KIND,
            "version": CALIBRATION_VERSION,
            "simulated": True,
            "origin": self.origin,
            "gpu": self.gpu,
            "power": {k: v.to_dict() for k, v in self.power.items()},
            "deployments": {
                name: {
                    **{k: v for k, v in d.items() if k != "parameters"},
                    "parameters": {k: p.to_dict() for k, p in d["parameters"].items()},
                }
                for name, d in self.deployments.items()
            },
            "fits": self.fits or {},
        }

    def digest(self) -> str:
        """A short hash of the calibration's content (stored with trained controllers)."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def default_calibration(config: Config) -> Calibration:
    """The sourced defaults for every configured deployment."""
    return Calibration(
        gpu=config.gpu.model_dump(mode="json"),
        power=default_power(config),
        deployments={
            d.name: {
                "gpus": d.gpus,
                "zero_stage": d.zero_stage,
                "params_b": d.params_b,
                "parameters": default_deployment(d),
            }
            for d in config.sim.deployments
        },
    )


def calibration_from_dict(data: dict[str, Any], where: str) -> Calibration:
    """Validate a calibration mapping; errors name the file and the parameter."""
    if not isinstance(data, dict) or data.get("kind") != CALIBRATION_KIND:
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise ValueError(
            f"{where}: kind: expected {CALIBRATION_KIND!r}, got {kind!r}: not a grpo-power "
            "calibration (write one with `grpo-power identify --out DIR`)"
        )
    try:
        gpu = dict(data["gpu"])
        power = {
            k: Parameter.from_dict(data["power"][k], f"{where}: power.{k}")
            for k in POWER_PARAMETERS
        }
        deployments = {}
        for name, d in data["deployments"].items():
            parameters = {
                k: Parameter.from_dict(d["parameters"][k], f"{where}: deployments.{name}.{k}")
                for k in DEPLOYMENT_PARAMETERS
            }
            deployments[name] = {
                "gpus": int(d["gpus"]),
                "zero_stage": int(d["zero_stage"]),
                "params_b": float(d["params_b"]),
                "parameters": parameters,
            }
        for key in ("nameplate_w", "idle_w"):
            gpu[key] = float(gpu[key])
    except KeyError as error:
        raise ValueError(f"{where}: missing calibration entry {error}") from None
    if gpu["idle_w"] >= gpu["nameplate_w"]:
        raise ValueError(f"{where}: gpu.idle_w must be below gpu.nameplate_w")
    return Calibration(
        gpu=gpu,
        power=power,
        deployments=deployments,
        origin=str(data.get("origin", "file")),
        fits=data.get("fits") or None,
    )


def load_calibration(path: Path | str) -> Calibration:
    """Read a calibration file written by :func:`save_calibration`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no calibration file; write one with `grpo-power identify --out DIR`"
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON: {error}") from None
    return calibration_from_dict(data, str(path))


def save_calibration(calibration: Calibration, path: Path | str) -> Path:
    """Write a calibration file atomically (temporary name, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(calibration.to_dict(), indent=2) + "\n")
    tmp.replace(path)
    return path


def check_calibration_matches(calibration: Calibration, config: Config, where: str) -> None:
    """Refuse a calibration made for other deployments than the config's.

    A calibration belongs to the GPU and the deployments it was identified on: its
    ``gpu.nameplate_w`` must be the config's, and every deployment it shares by name with
    ``sim.deployments`` must have the same GPUs, ZeRO stage and parameter count (its phase times
    mean nothing for another shape). It must share at least one deployment name with the config.

    Raises:
        ValueError: naming the file, the field, the calibration's value and the config's.
    """
    hint = "use the calibration `grpo-power identify` wrote with this config, or rerun it"
    nameplate_w = float(calibration.gpu["nameplate_w"])
    if not math.isclose(nameplate_w, config.gpu.nameplate_w, rel_tol=1e-9):
        raise ValueError(
            f"{where}: gpu.nameplate_w: expected {config.gpu.nameplate_w:g} W (the config's "
            f"{config.gpu.name}), got {nameplate_w:g} W (the calibration's "
            f"{calibration.gpu.get('name', 'GPU')}): a calibration of another GPU; {hint}"
        )
    configured = {d.name: d for d in config.sim.deployments}
    if not set(calibration.deployments) & set(configured):
        raise ValueError(
            f"{where}: deployments: expected at least one of the config's {sorted(configured)}, "
            f"got {sorted(calibration.deployments)}: a calibration of other deployments; {hint}"
        )
    for name, entry in calibration.deployments.items():
        if name not in configured:
            continue
        d = configured[name]
        for key, want in (("gpus", d.gpus), ("zero_stage", d.zero_stage), ("params_b", d.params_b)):
            if not math.isclose(float(entry[key]), float(want), rel_tol=1e-9):
                raise ValueError(
                    f"{where}: deployments.{name}.{key}: expected {want:g} (the config's "
                    f"deployment {name}: {_shape(d.gpus, d.zero_stage, d.params_b)}), got "
                    f"{float(entry[key]):g} (the calibration's deployment {name}: "
                    f"{_shape(entry['gpus'], entry['zero_stage'], entry['params_b'])}): a "
                    f"calibration of another deployment; {hint}"
                )


def _shape(gpus: int, zero_stage: int, params_b: float) -> str:
    return f"{params_b:g}B on {gpus} GPU(s), ZeRO-{zero_stage}"


def calibration_for(config: Config, path: Path | str | None = None) -> Calibration:
    """The calibration a command uses: ``path``, else ``sim.calibration``, else the defaults.

    A file must match the config's GPU and deployments (:func:`check_calibration_matches`);
    deployments configured but absent from it get their defaults.
    """
    path = path if path is not None else config.sim.calibration
    if path is None:
        return default_calibration(config)
    calibration = load_calibration(path)
    check_calibration_matches(calibration, config, str(path))
    defaults = default_calibration(config)
    for name, entry in defaults.deployments.items():
        calibration.deployments.setdefault(name, entry)
    return calibration


def draw(parameters: dict[str, Parameter], rng: np.random.Generator | None) -> dict[str, float]:
    """Parameter values: the nominal ``value`` (``rng`` None) or a uniform draw in [low, high]."""
    if rng is None:
        return {k: p.value for k, p in parameters.items()}
    return {k: float(rng.uniform(p.low, p.high)) for k, p in parameters.items()}


# ------------------------------------------------------------------------------------------
# identify: fit phase times and power from step logs and traces


@dataclass(frozen=True)
class LinearFit:
    """A least-squares fit of one measured quantity on named features."""

    target: str
    coefficients: dict[str, float]  # fitted parameters (in the calibration's units)
    held: dict[str, float]  # parameters not identifiable from these data: held at their prior
    predicted: np.ndarray
    measured: np.ndarray

    @property
    def residuals(self) -> np.ndarray:
        return self.measured - self.predicted

    def summary(self) -> dict[str, Any]:
        """Coefficients, held parameters and residual statistics (RMS, relative)."""
        res = self.residuals
        scale = float(np.mean(np.abs(self.measured))) if len(self.measured) else float("nan")
        rms = float(np.sqrt(np.mean(res**2))) if len(res) else float("nan")
        return {
            "target": self.target,
            "fitted": self.coefficients,
            "held_at_prior": self.held,
            "points": len(res),
            "rms_residual": rms,
            "relative_rms": rms / scale if scale else float("nan"),
            "max_abs_residual": float(np.max(np.abs(res))) if len(res) else float("nan"),
        }


def fit_linear(
    target: str,
    measured: np.ndarray,
    features: dict[str, tuple[np.ndarray, float, float]],
) -> LinearFit:
    """Fit ``measured ~ sum(coef * feature)`` with non-negative coefficients.

    Args:
        target: name of the measured quantity (for the summary).
        measured: one value per data point.
        features: name -> (feature values, scale from feature x coefficient to the target's
            unit, prior coefficient); features are added in order while they raise the rank
            of the design (the rest are not identifiable and held at their prior).
    """
    measured = np.asarray(measured, dtype=float)
    chosen: list[str] = []
    columns: list[np.ndarray] = []
    for name, (values, scale, _) in features.items():
        column = np.asarray(values, dtype=float) * scale
        trial = np.column_stack([*columns, column]) if columns else column[:, None]
        normed = trial / np.maximum(np.abs(trial).max(axis=0), 1e-12)
        if np.linalg.matrix_rank(normed, tol=1e-6) == trial.shape[1]:
            chosen.append(name)
            columns.append(column)
    held = {n: prior for n, (_, _, prior) in features.items() if n not in chosen}
    offset = np.zeros_like(measured)
    for name, prior in held.items():
        values, scale, _ = features[name]
        offset += np.asarray(values, dtype=float) * scale * prior
    coefficients: dict[str, float] = {}
    if chosen:
        design = np.column_stack(columns)
        solution = nonnegative_least_squares(design, measured - offset)
        coefficients = dict(zip(chosen, map(float, solution), strict=True))
    predicted = offset + sum(
        (features[n][0] * features[n][1] * c for n, c in coefficients.items()),
        start=np.zeros_like(measured),
    )
    return LinearFit(target, coefficients, held, predicted, measured)


@dataclass
class RunData:
    """What identify reads of one run: its step log rows and per-GPU power samples."""

    run_id: str
    steps: Any  # pandas DataFrame (step log)
    t_s: np.ndarray
    power_w: np.ndarray
    simulated_power: bool


def _window_means(run: RunData, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mean power of the samples inside each [start, end) window (NaN where none), W."""
    order = np.argsort(run.t_s, kind="stable")
    t_s, power_w = run.t_s[order], run.power_w[order]
    cum = np.concatenate([[0.0], np.cumsum(power_w)])
    lo = np.searchsorted(t_s, starts, side="left")
    hi = np.searchsorted(t_s, ends, side="left")
    count = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, (cum[hi] - cum[lo]) / np.maximum(count, 1), np.nan)


def fit_from_runs(
    runs: list[RunData],
    prior: dict[str, Parameter],
    power_prior: dict[str, Parameter],
    gpu: dict[str, Any],
    train_micro_batch: int,
) -> tuple[dict[str, Parameter], dict[str, Parameter], dict[str, Any], Any]:
    """Fit a deployment's phase times and the power curve from measured runs.

    Phase times come from the step log: ``generate_s`` on generate calls, prompt tokens (prefill),
    decode steps (calls x longest completion) and sequence-steps (completion tokens);
    ``train_s`` on tokens; ``score_s`` on sequences; the optimizer from the rest of each step.
    Power comes from the trace: each step's generation window against log2 of its concurrency,
    its training window against the micro-batch. A parameter without variation in the data is
    held at its prior and reported as such.

    Returns:
        (deployment parameters, power parameters, fit summaries, per-step residual table).
    """
    import pandas as pd

    frames = []
    for run in runs:
        steps = run.steps.copy()
        steps["run_id"] = run.run_id
        starts = steps["start_s"].to_numpy()
        gen_end = starts + steps["generate_s"].to_numpy()
        train_start = gen_end + steps["score_s"].to_numpy()
        steps["generate_power_w"] = _window_means(run, starts, gen_end)
        steps["train_power_w"] = _window_means(run, train_start, steps["end_s"].to_numpy())
        frames.append(steps)
    data = pd.concat(frames, ignore_index=True)
    data = data[data["step"] > 1].reset_index(drop=True)  # step 1 carries start-up costs
    if len(data) < 3:
        raise ValueError(
            f"identify needs at least 3 steps after the first across the runs, got {len(data)}"
        )
    calls = data["generate_calls"].to_numpy(float)
    decode_steps = calls * data["max_completion_tokens"].to_numpy(float)
    gen = fit_linear(
        "generate_s",
        data["generate_s"].to_numpy(float),
        {
            "decode_base_ms": (decode_steps, 1e-3, prior["decode_base_ms"].value),
            "decode_ms_per_seq": (
                data["completion_tokens"].to_numpy(float),
                1e-3,
                prior["decode_ms_per_seq"].value,
            ),
            "gen_call_s": (calls, 1.0, prior["gen_call_s"].value),
            "prefill_ms_per_token": (
                data["prompt_tokens"].to_numpy(float),
                1e-3,
                prior["prefill_ms_per_token"].value,
            ),
        },
    )
    tokens = data["prompt_tokens"].to_numpy(float) + data["completion_tokens"].to_numpy(float)
    train = fit_linear(
        "train_s",
        data["train_s"].to_numpy(float),
        {"train_ms_per_token": (tokens, 1e-3, prior["train_ms_per_token"].value)},
    )
    score = fit_linear(
        "score_s",
        data["score_s"].to_numpy(float),
        {
            "score_base_s": (np.ones(len(data)), 1.0, prior["score_base_s"].value),
            "score_ms_per_seq": (
                data["sequences"].to_numpy(float),
                1e-3,
                prior["score_ms_per_seq"].value,
            ),
        },
    )
    phases = data["generate_s"] + data["score_s"] + data["train_s"]
    rest = data["end_s"] - data["start_s"] - phases
    optimizer = fit_linear(
        "optimizer_s",
        rest.to_numpy(float),
        {"optimizer_s": (np.ones(len(data)), 1.0, prior["optimizer_s"].value)},
    )
    span_w = gpu["nameplate_w"] - gpu["idle_w"]
    occupancy = np.minimum(data["concurrency"].to_numpy(float), data["sequences"].to_numpy(float))
    gen_power = data["generate_power_w"].to_numpy(float)
    ok = np.isfinite(gen_power)
    decode = fit_linear(
        "generate_power_frac",
        (gen_power[ok] - gpu["idle_w"]) / span_w,
        {
            "decode_base_frac": (np.ones(ok.sum()), 1.0, power_prior["decode_base_frac"].value),
            "decode_slope_per_doubling": (
                np.log2(np.maximum(occupancy[ok], 1.0)),
                1.0,
                power_prior["decode_slope_per_doubling"].value,
            ),
        },
    )
    train_power = data["train_power_w"].to_numpy(float)
    ok_t = np.isfinite(train_power)
    train_frac = fit_linear(
        "train_power_frac",
        (train_power[ok_t] - gpu["idle_w"]) / span_w,
        {"train_base_frac": (np.ones(ok_t.sum()), 1.0, power_prior["train_base_frac"].value)},
    )
    fits = [gen, train, score, optimizer, decode, train_frac]
    fitted_deployment = dict(prior)
    fitted_power = dict(power_prior)
    for fit in fits:
        target = fitted_power if fit.target.endswith("_frac") else fitted_deployment
        rel = fit.summary()["relative_rms"]
        for name, value in fit.coefficients.items():
            old = target[name]
            spread = max(abs(value) * (rel if math.isfinite(rel) else 0.0), 1e-9)
            target[name] = Parameter(
                value,
                max(0.0, value - 2 * spread),
                value + 2 * spread,
                f"identify fit of {fit.target} ({len(fit.measured)} steps); prior: {old.source}",
            )
    residuals = pd.DataFrame(
        {
            "run_id": data["run_id"],
            "step": data["step"],
            "concurrency": data["concurrency"],
            "max_new_tokens": data["max_new_tokens"],
            "generate_s": gen.measured,
            "generate_s_fit": gen.predicted,
            "train_s": train.measured,
            "train_s_fit": train.predicted,
            "score_s": score.measured,
            "score_s_fit": score.predicted,
        }
    )
    summaries = {
        "runs": [r.run_id for r in runs],
        "prompt_tokens_per_sequence": float(
            (data["prompt_tokens"] / data["sequences"].clip(lower=1)).mean()
        ),
        "power_source": "simulated" if all(r.simulated_power for r in runs) else "measured",
        "fits": [f.summary() for f in fits],
    }
    return fitted_deployment, fitted_power, summaries, residuals
