"""The report's live-arm table: the study's four live 7B arms beside this run's.

The study (``analysis/reference.py: STUDY_LIVE_ARMS``) ran Qwen2.5-7B GRPO on one A100 under a
314.6 W cap: static generation batch 8 and 4, a hysteresis controller and PPO, each with its
tokens in a fixed budget and its share of NVML samples over the cap. This run's arms stand for
them on the simulated 7b deployment (the evaluate stage, 5 seeds) and on the tiny real run
(the windows and economics stages; its power is the simulated A100's on a CPU):

- static batch 8, the study's largest, is ``fixed`` (its configured concurrency, by default the
  upper bound: the whole step in one generate call);
- static batch 4, half of it, is the identify stage's sweep of the 7b deployment at the largest
  swept concurrency at most half the fixed arm's (one seed; the other actuators at their
  defaults). The real sweep measures only the bounds, so the real run has no such row;
- the hysteresis controller is ``threshold`` (AIMD on concurrency from recent p95 power);
- PPO is ``ppo``.

Every number is a :class:`~grpo_power.report.tables.Num` read from the file a stage wrote.
"""

from __future__ import annotations

from pathlib import Path

from grpo_power.analysis.reference import STUDY_7B_CAP_W, STUDY_LIVE_ARMS, STUDY_LIVE_SOURCE
from grpo_power.report.tables import Cell, CsvFile, Table
from grpo_power.stage_files import read_csv

LIVE_ARMS = ("fixed", None, "threshold", "ppo")  # this run's arm per study row; None: the sweep


def first_run_exceedance(exceedance: list[Path], run_arms: dict[str, str]) -> dict[str, Path]:
    """Per arm, the first (sorted) windows-stage ``exceedance.csv`` of one of its real runs.

    Args:
        exceedance: the windows stage's exceedance files of the real runs.
        run_arms: each real run's id -> its arm.
    """
    found: dict[str, Path] = {}
    for path in sorted(exceedance):
        run_ids = set(read_csv(path, "the windows stage's exceedance.csv", ("run_id",))["run_id"])
        for run_id in sorted(run_ids):
            arm = run_arms.get(run_id)
            if arm is not None:
                found.setdefault(arm, path)
    return found


def live_arm_table(
    summary: CsvFile,
    sweeps: CsvFile,
    run_arms: CsvFile,
    exceedance: dict[str, Path],
    deployment: str,
    size: str,
    cap_w: float,
    fixed_concurrency: int,
    window_s: float,
) -> Table:
    """The study's live arms and this run's, one row per study arm.

    Args:
        summary: the evaluate stage's study ``summary.csv``; sweeps: the identify stage's
            ``sweeps.csv``; run_arms: the economics stage's ``arms.csv`` (its ``run`` rows).
        exceedance: per arm, a real run's ``exceedance.csv`` (:func:`first_run_exceedance`).
        deployment: the simulated single-GPU deployment standing for the study's 7B; size: the
            real run size standing for it (``sim.deployments[].sizes``).
        cap_w: the simulated deployment's cap; fixed_concurrency: the fixed arm's concurrency;
        window_s: the shortest window the windows stage computed (the share over the cap).

    Raises:
        ValueError: the sweep has no concurrency level at most half the fixed arm's.
    """
    swept = sweeps.select(deployment=deployment, actuator="concurrency")["level"].astype(int)
    below = swept[swept <= fixed_concurrency // 2]
    if below.empty:
        raise ValueError(
            f"{sweeps.path}: level: expected a concurrency level of {deployment} at most "
            f"{fixed_concurrency // 2} (half the fixed arm's), got {sorted(swept)}"
        )
    half = int(below.max())
    table = Table(
        "live-arms",
        f"The study's live 7B arms and this run's ({deployment} SIMULATED; the real {size} run)",
        [
            "study arm",
            "study tokens",
            "study violations %",
            "this run's arm",
            f"{deployment} tokens in budget",
            f"{deployment} tokens/s",
            f"{deployment} violations %",
            f"{size} run tokens/s",
            f"{size} run over cap, {window_s:g} s windows %",
        ],
        sources=[summary.path, sweeps.path, run_arms.path, *sorted(set(exceedance.values()))],
        note=f"Study: {STUDY_LIVE_SOURCE}; its cap {STUDY_7B_CAP_W:g} W, this run's {deployment} "
        f"cap {cap_w:g} W. Study batch 8 is its largest generation batch: here the fixed arm's "
        f"concurrency {fixed_concurrency}; batch 4 is half: concurrency {half} (the identify "
        f"stage's sweep, one seed, no budget run). {deployment} rows: the evaluation's seeds, "
        "95 % intervals; the real run's share over the cap is its first seed's. The study "
        "measured a trained 7B model; here a simulated A100 and, for the real run, a small "
        "model with simulated power, so tokens differ in scale: compare the arms' order and "
        "violation shares, not absolute tokens.",
    )
    for study, arm in zip(STUDY_LIVE_ARMS, LIVE_ARMS, strict=True):
        row: list[Cell] = [study.arm, f"{study.tokens:,}", f"{study.violation_pct:g}"]
        if arm is None:
            keys = {"deployment": deployment, "actuator": "concurrency", "level": half}
            row += [
                f"concurrency {half} (sweep)",
                "-",
                sweeps.num("tokens_per_s", ",.1f", **keys),
                sweeps.num("violation_rate", ".2f", 100.0, **keys),
                "not run",
                "not run",
            ]
        elif summary.select(deployment=deployment, arm=arm).empty:
            row += [arm, "not evaluated", "not evaluated", "not evaluated"]
            row += _real(run_arms, exceedance.get(arm), size, arm, window_s)
        else:
            keys = {"deployment": deployment, "arm": arm}
            row += [
                f"fixed (concurrency {fixed_concurrency})" if arm == "fixed" else arm,
                _with_ci(summary, "output_tokens", ",.0f", 1.0, keys),
                _with_ci(summary, "throughput", ",.1f", 1.0, keys),
                _with_ci(summary, "violation_rate", ".2f", 100.0, keys),
                *_real(run_arms, exceedance.get(arm), size, arm, window_s),
            ]
        table.rows.append(row)
    return table


def _with_ci(file: CsvFile, column: str, spec: str, scale: float, keys: dict[str, object]) -> Cell:
    """A value of the evaluate summary with its 95 % interval."""
    return [
        file.num(column, spec, scale, **keys),
        " [",
        file.num(f"{column}_ci_low", spec, scale, **keys),
        ", ",
        file.num(f"{column}_ci_high", spec, scale, **keys),
        "]",
    ]


def _real(
    arms: CsvFile, exceedance: Path | None, size: str, arm: str, window_s: float
) -> list[Cell]:
    """A real run's tokens/s (economics, mean over seeds) and share of windows over the cap
    (windows, its first seed)."""
    keys = {"source": "run", "deployment": size, "arm": arm}
    if exceedance is None or arms.select(**keys).empty:
        return ["not run", "not run"]
    over = CsvFile(exceedance, "the windows stage's exceedance.csv")
    return [
        arms.num("tokens_per_gpu_s", ",.1f", **keys),
        over.num("exceedance", ".2f", 100.0, scope="run_pooled", window_s=window_s),
    ]
