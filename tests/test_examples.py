"""The examples/ scripts, run as the README shows them in a clean copy of the checkout: a user's
own GRPO script whose TensorBoard events hold the power scalars, and the monitor around a plain
PyTorch loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from grpo_power.telemetry.store import read_trace
from grpo_power.telemetry.summary import summarize_trace
from tests.conftest import checkout_copy, run_as_user

pytestmark = pytest.mark.slow  # the examples run as a user runs them

GRPO = ".venv/bin/python examples/grpo_with_power.py --out results/examples/grpo"
LOOP = ".venv/bin/python examples/measure_any_training.py --out results/examples/loop"


def test_grpo_example_logs_power_to_tensorboard(tmp_path: Path) -> None:
    checkout = checkout_copy(tmp_path / "checkout")
    output = run_as_user(GRPO, checkout)
    out = checkout / "results" / "examples" / "grpo"
    (events,) = list((out / "runs").glob("*/events.out.tfevents.*"))
    accumulator = EventAccumulator(str(events.parent))
    accumulator.Reload()
    scalars = {
        tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }
    print("TensorBoard power scalars:", {t: v for t, v in scalars.items() if "power" in t})
    for tag in ("mean_w", "p95_w", "max_w", "energy_j", "tokens_per_mj", "share_above_cap"):
        assert f"train/power/{tag}" in scalars, sorted(scalars)
    for phase in ("prefill", "generate", "train"):  # the phase split the forward passes show
        assert f"train/power/{phase}_energy_j" in scalars, sorted(scalars)
    assert "SIMULATED" in output and all(v == 1.0 for _, v in scalars["train/power/simulated"])
    steps = [s for s, _ in scalars["train/loss"]]
    assert steps == [1, 2, 3]
    mean_w = dict(scalars["train/power/mean_w"])
    assert all(60.0 <= mean_w[s] <= 400.0 for s in steps)  # the simulated A100's idle..nameplate
    # The logged intervals' energy is what the trace holds over the same time; each interval's
    # boundary reads (not written to the trace) add at most a sample period at nameplate per end.
    trace = read_trace(out / "power.parquet")
    trace_j = sum(g.energy_j for g in summarize_trace(trace))
    logged_j = sum(v for _, v in scalars["train/power/energy_j"])
    boundary_j = 2 * len(steps) * trace.metadata.sample_period_s * trace.metadata.nameplate_w
    assert 0.8 * trace_j < logged_j <= trace_j + boundary_j, (logged_j, trace_j, boundary_j)
    # The controller's max new tokens reached generation: no completion is longer.
    limits = dict(scalars["train/power_cap/max_new_tokens"])
    longest = dict(scalars["train/completions/max_length"])
    assert all(longest[s] <= limits[s] for s in steps), (longest, limits)
    assert limits[1] == 8  # the rule halved the configured 16 before the first step
    assert max(limits.values()) <= 16  # and never lengthened past it
    # the run's share of samples above the cap, counted over its steps, is logged beside them
    run_share = dict(scalars["train/power_cap/run_share_above_cap"])
    assert sorted(run_share) == steps and all(0.0 <= v <= 1.0 for v in run_share.values())


def test_measure_any_training_example(tmp_path: Path) -> None:
    checkout = checkout_copy(tmp_path / "checkout")
    output = run_as_user(LOOP, checkout)
    out = checkout / "results" / "examples" / "loop"
    steps = json.loads((out / "steps.json").read_text())
    assert len(steps) == 20 and "SIMULATED" in output
    for step in steps:  # nested windows: forward and backward lie within their step
        assert step["forward_energy_j"] + step["backward_energy_j"] <= step["energy_j"] * 1.01
    trace = read_trace(out / "power.parquet")
    assert trace.complete and trace.metadata.simulated
