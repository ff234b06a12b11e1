"""The simulator's default parameters, each with a value, a range and its published source
(``docs/calibration.md`` lists them all): the GPU's power parameters and each deployment's
phase-time parameters, derived from public A100 figures; and domain-randomised draws of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_power.config import Config, DeploymentConfig

# Public A100 figures the phase-time defaults are derived from.
A100_BF16_TFLOPS = 312.0  # dense bf16 peak, NVIDIA A100 datasheet
A100_HBM_TB_S = 1.555  # HBM2 bandwidth of the 40 GB part, A100 datasheet
# Effective bandwidth of ZeRO-3's per-layer parameter all-gathers during generation (assumption):
# each decode step gathers every layer in messages of ~1 GB or less, latency-bound and well under
# the ~230 GB/s NCCL all-gather peak on A100 NVSwitch for large messages (the range's top).
ALLGATHER_GB_S = 100.0
ALLGATHER_GB_S_RANGE = (50.0, 230.0)
# docs/calibration.md '7-8B decode time': Llama-3-8B (8.0B) 14.6 ms at b=1, 35.3 ms at b=64
LLAMA3_8B_DECODE_MS_PER_B = 14.6 / 8.0
LLAMA3_8B_DECODE_MS_PER_SEQ_PER_B = (35.3 - 14.6) / 63 / 8.0


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


# docs/calibration.md '7-8B decode' (the literature prior, on a 400 W A100 with 60 W idle):
# 222-234 W at b=1 (0.49 of 340 W over idle: 226.6 W), 0.035-0.075 of 340 W per doubling.
LITERATURE_DECODE_AT_1_W = (226.6, 222.0, 234.0)
LITERATURE_DECODE_W_PER_DOUBLING = (0.057 * 340.0, 0.035 * 340.0, 0.075 * 340.0)
LITERATURE_NOISE_W = (4.0, 2.0, 8.0)  # an assumption: no public per-sample figure
LITERATURE_TRANSIENT_PEAK_FRAC = 0.09  # docs/calibration.md 'prefill': about 1.09 TDP
# docs/calibration.md 'measured decode, Qwen3-8B on vLLM': the steady decode line fitted by
# `grpo-power identify --trace` (sim/trace_fit.py:steady_decode) to the two arrival-pattern runs
# of grantwilkins/powertrace-sim @96361ef (copied 2026-12-01): value, 95 % interval.
MEASURED_DECODE_AT_1_W = (277.5, 274.1, 281.1)
MEASURED_DECODE_W_PER_DOUBLING = (6.55, 5.33, 7.80)
MEASURED_NOISE_W = (6.41, 5.84, 7.13)
MEASURED_TRANSIENT_PEAK_FRAC = 0.281  # the highest single reading: 1.281 x nameplate
MEASURED_DECODE_SOURCE = (
    "docs/calibration.md 'measured decode, Qwen3-8B on vLLM' (steady line of the public A100 "
    "traces); range: it and the '7-8B decode' literature row"
)


# The part the decode figures below were measured on: a 400 W A100 idling at 60 W. They enter
# the simulator as shares of its nameplate - idle, as the default decode curve does, so that on
# another part (an H100) the randomisation range scales with the default, not around A100 watts.
REFERENCE_IDLE_W = 60.0
REFERENCE_SPAN_W = 400.0 - REFERENCE_IDLE_W


def reference_frac(power_w: float) -> float:
    """A decode power measured on the reference A100 (W) as a share of its nameplate - idle."""
    return (power_w - REFERENCE_IDLE_W) / REFERENCE_SPAN_W


def literature_decode_prior(config: Config) -> dict[str, dict[str, float]]:
    """The literature values of the decode parameters (docs/calibration.md '7-8B decode'), as
    shares of the reference A100's nameplate - idle (the default curve's unit: on another part
    they scale with its span as the default does): the prior a trace fit is shown beside.

    Returns:
        name -> ``{"value", "low", "high"}`` for ``decode_base_frac``,
        ``decode_slope_per_doubling``, ``noise_w`` and ``transient_peak_frac``.
    """
    at_1 = [reference_frac(w) for w in LITERATURE_DECODE_AT_1_W]
    slope = [w / REFERENCE_SPAN_W for w in LITERATURE_DECODE_W_PER_DOUBLING]
    peak = LITERATURE_TRANSIENT_PEAK_FRAC
    return {
        name: dict(zip(("value", "low", "high"), values, strict=True))
        for name, values in (
            ("decode_base_frac", at_1),
            ("decode_slope_per_doubling", slope),
            ("noise_w", LITERATURE_NOISE_W),
            ("transient_peak_frac", (peak, peak, peak)),
        )
    }


def default_power(config: Config) -> dict[str, Parameter]:
    """GPU-level power parameters: values from ``telemetry.simulated``, ranges from the rows of
    docs/calibration.md.

    The decode curve's and the noise's ranges span both the measured fit's 95 % interval and the
    literature prior, so a domain-randomised controller trains on either. Fractions are shares
    of ``nameplate_w - idle_w``; the decode ranges are the reference A100's shares
    (:func:`reference_frac`), as the default curve is, so on an H100 they surround its default
    (they were A100 watts: 222-281 W about a default of 475 W, which sat at the range's top).
    """
    sim = config.telemetry.simulated
    span_w = config.gpu.nameplate_w - config.gpu.idle_w
    idle_w = config.gpu.idle_w
    prior = literature_decode_prior(config)

    def tdp_frac(share_of_tdp: float) -> float:
        return (share_of_tdp * config.gpu.nameplate_w - idle_w) / span_w

    def measured_or_prior(name: str, value: float, measured_frac: tuple[float, ...]) -> Parameter:
        low = min(prior[name]["low"], *measured_frac)
        high = max(prior[name]["high"], *measured_frac)
        return _p(value, low, high, MEASURED_DECODE_SOURCE)

    return {
        "decode_base_frac": measured_or_prior(
            "decode_base_frac",
            sim.decode_base_frac,
            tuple(reference_frac(w) for w in MEASURED_DECODE_AT_1_W[1:]),
        ),
        "decode_slope_per_doubling": measured_or_prior(
            "decode_slope_per_doubling",
            sim.decode_slope_per_doubling,
            tuple(w / REFERENCE_SPAN_W for w in MEASURED_DECODE_W_PER_DOUBLING[1:]),
        ),
        "train_base_frac": _p(
            sim.train_base_frac,
            0.6,
            0.8,
            "assumption below docs/calibration.md 'training, compute phase' 0.9-1.0 TDP "
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
            "docs/calibration.md 'training, communication-bound sharded phases': 0.35-0.5 TDP",
        ),
        "optimizer_frac": _p(0.45, 0.35, 0.6, "assumption: memory-bound elementwise Adam update"),
        "noise_w": measured_or_prior("noise_w", sim.noise_w, MEASURED_NOISE_W[1:]),
        "hwcap_margin_frac": _p(
            0.02, 0.0, 0.04, "assumption: the power-limit loop settles slightly under the limit"
        ),
        "hwcap_exponent_memory": _p(
            0.13,
            0.08,
            0.2,
            "docs/calibration.md 'energy vs power cap' (Samsi et al.): 250 -> 175 W cap, +6-7 % "
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
            "docs/calibration.md '7-8B decode time': Llama-3-8B 14.6 ms, Llama-2-7B 13.7 ms at "
            "b=1, scaled by parameters",
        ),
        "decode_ms_per_seq": _p(
            LLAMA3_8B_DECODE_MS_PER_SEQ_PER_B * b,
            0.03 * b,
            0.08 * b,
            "docs/calibration.md '7-8B decode time': Llama-3-8B (GQA, like Qwen2.5) b=1 -> b=64, "
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


def draw(parameters: dict[str, Parameter], rng: np.random.Generator | None) -> dict[str, float]:
    """Parameter values: the nominal ``value`` (``rng`` None) or a uniform draw in [low, high]."""
    if rng is None:
        return {k: p.value for k, p in parameters.items()}
    return {k: float(rng.uniform(p.low, p.high)) for k, p in parameters.items()}
