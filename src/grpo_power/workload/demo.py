"""A stand-in workload for ``grpo-power telemetry record``: matrix multiplies in GRPO-like phases.

``grpo`` mode cycles generate (decode-sized matmuls at batch 1, 4, 16, 64), score (CPU only) and
train (large matmuls); ``matmul`` mode keeps the device busy with large matmuls; ``idle`` sleeps.
Every phase change is announced through :func:`grpo_power.telemetry.signals.signal_from_env`, so
the simulated A100 follows it. Run::

    grpo-power telemetry record -- python -m grpo_power.workload.demo --seconds 20
"""

from __future__ import annotations

import argparse
import time

import torch

from grpo_power.telemetry.signals import WorkloadSignal, signal_from_env

DECODE_BATCHES = (1, 4, 16, 64)


def _busy(device: torch.device, seconds: float, rows: int, width: int) -> None:
    """Multiply a ``rows`` x ``width`` matrix by a square one on ``device`` for ``seconds`` of
    the device's time: on a GPU each multiply is waited for before the clock is read, so no
    queue of launched kernels runs on past the phase (launched for 30 s, an H100's 8192 x 8192
    multiplies ran 41 s)."""
    a = torch.randn(rows, width, device=device)
    b = torch.randn(width, width, device=device)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        a = torch.tanh(a @ b)
        if device.type == "cuda":
            torch.cuda.synchronize(device)


def run_grpo_phases(signal: WorkloadSignal, device: torch.device, seconds: float) -> int:
    """Cycle generate / score / train until ``seconds`` have passed; return the cycles run."""
    width = 4096 if device.type == "cuda" else 256
    deadline = time.monotonic() + seconds
    cycles = 0
    while time.monotonic() < deadline:
        batch = DECODE_BATCHES[cycles % len(DECODE_BATCHES)]
        signal.set("generate", batch)
        _busy(device, 1.5, batch, width)
        signal.set("score")
        time.sleep(0.3)
        signal.set("train", 4)
        _busy(device, 1.0, width, width)
        cycles += 1
    signal.set("idle")
    return cycles


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["grpo", "matmul", "idle"], default="grpo")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--idle-after", type=float, default=0.0, help="Stay idle this long afterwards, s."
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    signal = signal_from_env()
    if args.mode == "grpo":
        cycles = run_grpo_phases(signal, device, args.seconds)
        print(f"demo: {cycles} generate/score/train cycles on {device}")
    elif args.mode == "matmul":
        signal.set("train", 64)
        _busy(
            device,
            args.seconds,
            8192 if device.type == "cuda" else 512,
            8192 if device.type == "cuda" else 512,
        )
        signal.set("idle")
        print(f"demo: {args.seconds:.0f} s of matrix multiplies on {device}")
    else:
        signal.set("idle")
        time.sleep(args.seconds)
        print(f"demo: {args.seconds:.0f} s idle")
    if args.idle_after > 0:
        signal.set("idle")
        time.sleep(args.idle_after)
        print(f"demo: then {args.idle_after:.0f} s idle")


if __name__ == "__main__":
    main()
