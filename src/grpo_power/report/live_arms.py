"""The report's live-arm table: the study's four live 7B arms beside this run's.

The study (``analysis/reference.py: STUDY_LIVE_ARMS``, from the secondary summary) ran
Qwen2.5-7B GRPO on one A100 under a 314.6 W cap: static generation batch 8 and 4, a hysteresis
controller and PPO, each with its tokens in a fixed budget and its share of NVML samples over the
cap. This run's arms stand for them on the simulated 7b deployment (the evaluate stage, 5 seeds,
the deployment's budget) and on the tiny real run (the windows and economics stages; its power is
the simulated power of the GPU its trace names, on a CPU):

- static batch 8, the study's largest, is ``fixed`` (its configured concurrency, by default the
  upper bound: the whole step in one generate call);
- static batch 4, half of it, is ``fixed-half`` (``config.arms.static_setting``);
- the hysteresis controller is ``threshold`` (AIMD on concurrency from recent p95 power);
- PPO is ``ppo``.

Every row says where the study's figures come from and how and why this run's differ. Every
number is a :class:`~grpo_power.report.cells.Num` read from the file a stage wrote.
"""

from __future__ import annotations

from pathlib import Path

from grpo_power.analysis.reference import STUDY_7B_CAP_W, STUDY_LIVE_ARMS, STUDY_LIVE_SOURCE
from grpo_power.report.cells import Cell, CsvFile, Table
from grpo_power.report.tables import against_study
from grpo_power.stage_files import read_csv

# This run's arm per study row, and why its figures differ from the study's beyond the shared
# causes the table's note names (a simulated GPU, another workload scale); ``{cap_compared}``:
# the study's cap against this run's.
LIVE_ARMS: tuple[tuple[str, str], ...] = (
    (
        "fixed",
        "the study's cap {cap_compared}; here the decode line is flat, so the "
        "violations come from the prefill bursts and the training pass",
    ),
    (
        "fixed-half",
        "halving concurrency barely lowers decode power on the measured (flat) decode line and "
        "leaves the prefill bursts and the training pass over the cap, where the study's batch "
        "4 stayed under its cap (docs/calibration.md: why the study's cap is not the default)",
    ),
    (
        "threshold",
        "tuned in the simulator to the budget; it acts on concurrency alone, whose authority is "
        "small on this calibration, so it gives up more output than the study's hysteresis",
    ),
    (
        "ppo",
        "trained in the simulator only (domain-randomised physics), never on a live run, over "
        "the actuators the authority stage selected, not the study's",
    ),
)


# A violation share within a point of the study's is near it.
VIOLATIONS_AGAINST = ("fewer violations", "violations near the study's", "more violations")


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
    run_arms: CsvFile,
    exceedance: dict[str, Path],
    deployment: str,
    size: str,
    cap_w: float,
    concurrency: dict[str, int],
    window_s: float,
    gpu: str,
    interval: str,
    run_power: str,
    alike: list[str] | None = None,
) -> Table:
    """The study's live arms and this run's, one row per study arm.

    Args:
        summary: the evaluate stage's study ``summary.csv``; run_arms: the economics stage's
            ``arms.csv`` (its ``run`` rows).
        exceedance: per arm, a real run's ``exceedance.csv`` (:func:`first_run_exceedance`).
        deployment: the simulated single-GPU deployment standing for the study's 7B; size: the
            real run size standing for it (``sim.deployments[].sizes``).
        cap_w: the simulated deployment's cap; concurrency: the static arms' concurrency
            (``fixed``, ``fixed-half``); window_s: the shortest window the windows stage
            computed (the share over the cap); gpu: the GPU the runs' traces name, whose
            power the simulator models; interval: the evaluation's confidence as text
            (``"95 %"``); run_power: the real runs' power's label (``"SIMULATED"``, or
            ``"measured: nvml"``; :func:`~grpo_power.report.cells.data_label`), said beside
            their share over the cap.
        alike: lines naming the real runs' arms that ran the same settings throughout
            (:func:`~grpo_power.report.inputs.same_settings`), said in the note.
    """
    table = Table(
        "live-arms",
        f"The study's live 7B arms and this run's ({deployment} SIMULATED; the real {size} run)",
        [
            "study arm",
            "study tokens",
            "study violations %",
            "study figures from",
            "this run's arm",
            f"{deployment} tokens in budget",
            f"{deployment} tokens/s",
            f"{deployment} violations %",
            f"{size} run tokens/s",
            f"{size} run over cap, {window_s:g} s windows % ({run_power})",
            f"how {deployment} differs, and why",
        ],
        sources=[summary.path, run_arms.path, *sorted(set(exceedance.values()))],
        note=f"Study: {STUDY_LIVE_SOURCE}; its cap {STUDY_7B_CAP_W:g} W, this run's {deployment} "
        f"cap {cap_w:g} W. Study batch 8 is its largest generation batch: here the fixed arm's "
        f"concurrency {concurrency['fixed']}; batch 4 is half: the fixed-half arm's concurrency "
        f"{concurrency['fixed-half']}. {deployment} rows: the evaluation's seeds, {interval} "
        "intervals; the real run's share over the cap is its first seed's. The study measured a "
        f"trained 7B model; here a simulated {gpu} and, for the real run, a small model (power: "
        f"{run_power}), so tokens differ in scale: compare the arms' order and violation shares, "
        "not absolute tokens." + "".join(f" {line}." for line in alike or []),
    )
    for study, (arm, why) in zip(STUDY_LIVE_ARMS, LIVE_ARMS, strict=True):
        row: list[Cell] = [study.arm, f"{study.tokens:,}", f"{study.violation_pct:g}"]
        row.append(study.origin)
        shown = f"{arm} (concurrency {concurrency[arm]})" if arm in concurrency else arm
        evaluated = summary.select(deployment=deployment, arm=arm)
        if evaluated.empty:
            row += [shown, "not evaluated", "not evaluated", "not evaluated"]
            row += _real(run_arms, exceedance.get(arm), size, arm, window_s)
            row.append("not evaluated")
        else:
            keys = {"deployment": deployment, "arm": arm}
            violation_pct = 100.0 * float(evaluated["violation_rate"].iloc[0])
            pct = study.violation_pct
            row += [
                shown,
                _with_ci(summary, "output_tokens", ",.0f", 1.0, keys),
                _with_ci(summary, "tokens_per_s", ",.1f", 1.0, keys),
                _with_ci(summary, "violation_rate", ".2f", 100.0, keys),
                *_real(run_arms, exceedance.get(arm), size, arm, window_s),
                f"{against_study(violation_pct, pct, pct, 1.0, VIOLATIONS_AGAINST)}: "
                + why.format(cap_compared=_cap_compared(cap_w)),
            ]
        table.rows.append(row)
    return table


def _cap_compared(cap_w: float) -> str:
    """The study's 7B cap against ``cap_w``, e.g. ``lies 5.4 W lower``."""
    gap_w = cap_w - STUDY_7B_CAP_W
    if abs(gap_w) < 0.05:
        return "is the same"
    return f"lies {abs(gap_w):.1f} W {'lower' if gap_w > 0 else 'higher'}"


def _with_ci(file: CsvFile, column: str, spec: str, scale: float, keys: dict[str, object]) -> Cell:
    """A value of the evaluate summary with its interval."""
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
