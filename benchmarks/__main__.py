"""Run every benchmark module (bench_*.py), or those named: `python -m benchmarks sampler`.

A module may assert targets: its ``missed(result) -> list[str]`` names each target its result
misses. Every selected benchmark runs and writes its result, one that fails included (its error
is printed and the next runs); then, when any target was missed or any benchmark failed, the
command lists them and exits 1. A name that is no benchmark is refused before any runs.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

from grpo_power.signal_handlers import exiting_on_sigterm

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> None:
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    known = [m.removeprefix("bench_") for m in modules]
    unknown = [name for name in names if name not in known]
    if unknown:  # a typo ran the others and said nothing of it
        raise SystemExit(f"no benchmark named {unknown}; available: {known}")
    selected = [m for m in modules if not names or m.removeprefix("bench_") in names]
    missed: list[str] = []
    failed: list[str] = []
    for name in selected:
        started = time.perf_counter()
        print(f"== {name}", flush=True)
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            result = module.main()
        except Exception as error:  # the next benchmarks still run; the error is shown
            failed.append(f"{name}: {type(error).__name__}: {error}")
            print(f"== {name} FAILED: {type(error).__name__}: {error}", flush=True)
            continue
        print(json.dumps(result, indent=2))
        print(f"== {name} done in {time.perf_counter() - started:.1f} s", flush=True)
        if hasattr(module, "missed"):
            missed += [f"{name}: {line}" for line in module.missed(result)]
    if missed:
        print("\n".join(["targets MISSED:", *(f"  {line}" for line in missed)]), flush=True)
    if failed:
        print("\n".join(["benchmarks FAILED:", *(f"  {line}" for line in failed)]), flush=True)
    if missed or failed:
        raise SystemExit(
            f"{len(missed)} benchmark target(s) missed, {len(failed)} benchmark(s) failed "
            "(listed above)"
        )


if __name__ == "__main__":
    with exiting_on_sigterm():  # a stopped benchmark removes its temporary folder
        main(sys.argv[1:])
