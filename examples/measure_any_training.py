"""The power monitor around a plain PyTorch training loop: energy per step and per phase.

``PowerMonitor`` samples the GPUs in the background (NVML; on a machine without an NVIDIA GPU the
simulated A100, labelled so) and measures named windows, nested here: the whole run, each step,
and the forward and backward passes inside it. ``phase=`` announces what runs to the simulated
A100, which follows it (real GPUs ignore it), and splits the run's energy by phase. The trace is
the same crash-safe Parquet file as ``grpo-power telemetry record`` writes, so
``grpo-power telemetry summary`` and ``grpo-power windows`` read it.

    .venv/bin/python examples/measure_any_training.py --out results/examples/loop
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from grpo_power import PowerMonitor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/examples/loop"))
    parser.add_argument("--steps", type=int, default=20)
    options = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    inputs, targets = torch.randn(512, 64), torch.randn(512, 1)
    steps = []
    monitor = PowerMonitor(period_s=0.05, cap_w=300.0, trace=options.out / "power.parquet")
    with monitor, monitor.window("run") as run:
        for step in range(options.steps):
            with monitor.window("step", phase="train", batch=64) as window:
                with monitor.window("forward") as forward:
                    loss = torch.nn.functional.mse_loss(model(inputs), targets)
                with monitor.window("backward") as backward:
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            steps.append(
                {
                    "step": step,
                    "loss": loss.item(),
                    "time_s": window.time_s,
                    "energy_j": window.energy_j,
                    "forward_energy_j": forward.energy_j,
                    "backward_energy_j": backward.energy_j,
                    "mean_power_w": window.mean_power_w,
                    "peak_power_w": window.peak_power_w,
                }
            )
    label = " (SIMULATED power)" if run.simulated else ""
    print(
        f"{options.steps} steps{label}: {run.energy_j:.1f} J in {run.time_s:.2f} s, mean "
        f"{run.mean_power_w:.1f} W, peak {run.peak_power_w:.1f} W, "
        f"{100 * run.share_above_cap:.1f} % of samples above {run.cap_w:g} W "
        f"(energy from the {run.energy_source})"
    )
    for phase, share in sorted(run.phases.items()):
        print(f"  {phase}: {share.time_s:.2f} s, {share.energy_j:.1f} J")
    options.out.mkdir(parents=True, exist_ok=True)
    (options.out / "steps.json").write_text(json.dumps(steps, indent=1))
    written = monitor.trace.path  # power.parquet, or power-2.parquet beside an earlier one
    print(f"wrote {written} (trace) and {options.out}/steps.json")


if __name__ == "__main__":
    main()
