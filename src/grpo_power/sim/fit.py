"""Identify's fit: phase times and power of the simulator fitted from measured step logs and
traces (non-negative least squares on named features, unidentifiable parameters held at their
prior), with residuals."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from grpo_power.sim.defaults import Parameter
from grpo_power.stats import nonnegative_least_squares


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
    prior_power_w: Callable[[str, int], float] | None = None,
) -> tuple[dict[str, Parameter], dict[str, Parameter], dict[str, Any], Any]:
    """Fit a deployment's phase times and the power curve from measured runs.

    Phase times come from the step log: ``generate_s`` on generate calls, prompt tokens (prefill),
    decode steps (calls x longest completion) and sequence-steps (completion tokens);
    ``train_s`` on tokens; ``score_s`` on sequences; the optimizer from the rest of each step.
    Power comes from the trace: each step's generation window against log2 of its concurrency,
    its training window against log2 of its training chunk (the step's ``train_micro_batch``,
    at most its sequences). A parameter without variation in the data is
    held at its prior and reported as such.

    Args:
        prior_power_w: the simulator's steady power of a phase at a batch before this fit (the
            prior's :meth:`GpuPowerModel.steady_power_w`), W: the residual table sets each
            step's phase power beside it and beside the fit's.

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
        train_end = train_start + steps["train_s"].to_numpy()  # the optimizer's step after it
        steps["train_power_w"] = _window_means(run, train_start, train_end)
        steps["power_data"] = "simulated" if run.simulated_power else "measured"
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
    micro_batches = (  # each step's own when the step log has it (an actuator may change it)
        data["train_micro_batch"].to_numpy(int)
        if "train_micro_batch" in data
        else np.full(len(data), train_micro_batch)
    )
    # the sequences trained at once: a chunk above the step's sequences trains them in one
    chunk = np.minimum(micro_batches, data["sequences"].to_numpy(int))
    train_power = data["train_power_w"].to_numpy(float)
    ok_t = np.isfinite(train_power)
    train_frac = fit_linear(
        "train_power_frac",
        (train_power[ok_t] - gpu["idle_w"]) / span_w,
        {
            "train_base_frac": (np.ones(ok_t.sum()), 1.0, power_prior["train_base_frac"].value),
            "train_slope_per_doubling": (
                np.log2(np.maximum(chunk[ok_t], 1)),
                1.0,
                power_prior["train_slope_per_doubling"].value,
            ),
        },
    )
    power_columns = {
        "generate_power_w": gen_power,
        "generate_power_w_prior": _prior(prior_power_w, "generate", occupancy.astype(int)),
        "generate_power_w_fit": _on_rows(ok, gpu["idle_w"] + span_w * decode.predicted),
        "train_power_w": train_power,
        "train_power_w_prior": _prior(prior_power_w, "train", chunk),
        "train_power_w_fit": _on_rows(ok_t, gpu["idle_w"] + span_w * train_frac.predicted),
    }
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
            # the sequences trained at once (the step's micro-batch, at most its sequences):
            # what training power is fitted against
            "train_chunk": chunk,
            "generate_s": gen.measured,
            "generate_s_fit": gen.predicted,
            "train_s": train.measured,
            "train_s_fit": train.predicted,
            "score_s": score.measured,
            "score_s_fit": score.predicted,
            # the phase times are the runs' own step logs, timed where they ran, whatever
            # their power's source
            "data": "measured (phase times from the runs' step logs)",
            # each phase's mean power in the run's trace, the simulator's steady phase power
            # before this fit (prior) and after it (fit), W; power_data: the trace's source
            **power_columns,
            "power_data": data["power_data"],
        }
    )
    summaries = {
        "runs": [r.run_id for r in runs],
        "completion_lengths": fit_completion_lengths(data),
        "prompt_tokens_per_sequence": float(
            (data["prompt_tokens"] / data["sequences"].clip(lower=1)).mean()
        ),
        "power_source": "simulated" if all(r.simulated_power for r in runs) else "measured",
        "fits": [f.summary() for f in fits],
    }
    return fitted_deployment, fitted_power, summaries, residuals


def _prior(
    power_w: Callable[[str, int], float] | None, phase: str, batches: np.ndarray
) -> np.ndarray:
    """The simulator's steady power of ``phase`` at each step's batch before the fit, W (NaN
    without a power model)."""
    if power_w is None:
        return np.full(len(batches), np.nan)
    return np.array([power_w(phase, int(batch)) for batch in batches], dtype=float)


def _on_rows(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` (one per True of the mask ``rows``) spread over every row, NaN elsewhere."""
    out = np.full(len(rows), np.nan)
    out[rows] = values
    return out


# the widest lognormal spread of completion lengths a fit may take (a sigma of 2 spans a factor
# of 7 either side of the median in one sd: wider is no distribution a run's steps can pin down)
SIGMA_MAX = 2.0


def fit_completion_lengths(steps: Any) -> dict[str, Any]:
    """The completion-length distribution of measured steps, in the simulator's model
    (``sim/step_model.py``: ``expected_completion_lengths``, lognormal about the end-of-sequence
    length and truncated at max new tokens), for ``sim.completion_tokens`` and
    ``sim.completion_tokens_sigma``.

    Args:
        steps: step-log rows (``sequences``, ``completion_tokens``, ``max_completion_tokens``,
            ``max_new_tokens``).

    Returns:
        ``identifiable``: False when no completion ended before max new tokens (a random-weight
        model never samples end of sequence), or when the fit runs to a bound of its median or
        spread (a few early ends do not pin it down; ``reason`` says which); else
        ``completion_tokens`` (the median, tokens) and ``completion_tokens_sigma`` fitted by
        least squares on the log of each step's total and longest completion, with the relative
        RMS residual of each.
    """
    from scipy.optimize import least_squares

    from grpo_power.sim.step_model import expected_completion_lengths

    rows = steps[(steps["sequences"] > 0) & (steps["completion_tokens"] > 0)]
    n = rows["sequences"].to_numpy(int)
    total = rows["completion_tokens"].to_numpy(float)
    longest = rows["max_completion_tokens"].to_numpy(float)
    limit = rows["max_new_tokens"].to_numpy(float)
    out: dict[str, Any] = {"target": "completion_lengths", "points": len(rows)}
    if not ((longest < limit) | (total < n * limit)).any():
        return {
            **out,
            "identifiable": False,
            "reason": "every completion ran to max new tokens (no end of sequence: random "
            "weights?), so sim.completion_tokens stays as configured",
        }

    def predicted(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eos, sigma = math.exp(x[0]), x[1]
        pairs = zip(n, limit, strict=True)
        lengths = [expected_completion_lengths(k, m, eos, sigma) for k, m in pairs]
        return np.array([v.sum() for v in lengths]), np.array([v[-1] for v in lengths])

    def residuals(x: np.ndarray) -> np.ndarray:
        sums, tops = predicted(x)
        return np.concatenate([np.log(sums / total), np.log(tops / longest)])

    start = [math.log(float(np.median(total / n))), 0.5]
    high = math.log(10.0 * float(limit.max()))
    low_x, high_x = np.array([0.0, 0.0]), np.array([high, SIGMA_MAX])
    fit = least_squares(residuals, start, bounds=(low_x, high_x))
    near = 1e-3 * (high_x - low_x)  # within this of a bound is at it (a solver's last digits)
    if ((fit.x - low_x < near) | (high_x - fit.x < near)).any():
        early = int(np.count_nonzero(total < n * limit))
        share = float(total.sum() / (n * limit).sum())
        return {
            **out,
            "identifiable": False,
            "reason": f"the fit runs to its bound (median {math.exp(fit.x[0]):.0f} tokens, "
            f"lognormal sigma {fit.x[1]:.2f}; bounds: a median of 1 to {math.exp(high):.0f} "
            f"tokens, sigma 0 to {SIGMA_MAX:g}): the completions ran to {share:.0%} of max new "
            f"tokens ({early} of {len(rows)} steps had one end early), which no lognormal about "
            "an end-of-sequence length describes (a model that rarely samples end of sequence: "
            "random weights?), so sim.completion_tokens stays as configured",
        }
    sums, tops = predicted(fit.x)
    return {
        **out,
        "identifiable": True,
        "completion_tokens": round(math.exp(fit.x[0])),
        "completion_tokens_sigma": float(fit.x[1]),
        "relative_rms_total": float(np.sqrt(np.mean((sums / total - 1.0) ** 2))),
        "relative_rms_longest": float(np.sqrt(np.mean((tops / longest - 1.0) ** 2))),
    }
