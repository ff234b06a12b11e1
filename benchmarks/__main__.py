"""Run every benchmark module (bench_*.py), or those named: `python -m benchmarks sampler`.

A module may assert targets: its ``missed(result) -> list[str]`` names each target its result
misses. Every selected benchmark runs and writes its result; then, when any target was missed,
the command lists them and exits 1.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> None:
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    selected = [m for m in modules if not names or m.removeprefix("bench_") in names]
    if not selected:
        raise SystemExit(f"no benchmark named {names}; available: {[m[6:] for m in modules]}")
    missed: list[str] = []
    for name in selected:
        started = time.perf_counter()
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"benchmarks.{name}")
        result = module.main()
        print(json.dumps(result, indent=2))
        print(f"== {name} done in {time.perf_counter() - started:.1f} s", flush=True)
        if hasattr(module, "missed"):
            missed += [f"{name}: {line}" for line in module.missed(result)]
    if missed:
        print("\n".join(["targets MISSED:", *(f"  {line}" for line in missed)]), flush=True)
        raise SystemExit(f"{len(missed)} benchmark target(s) missed (listed above)")


if __name__ == "__main__":
    main(sys.argv[1:])
