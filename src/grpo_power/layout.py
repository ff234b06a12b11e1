"""Where every stage's files lie under the results folder, and what they are called.

The one place that names them: the CLI's defaults, the stages that write and read the files,
the report's inputs and the workflow (``workflow/rules/common.smk``) import these names, so a
file is renamed here or nowhere. Also the keys under which grpo-power stores its metadata in a
Parquet file's schema.

    results/
      runs/SIZE/ARM/seedN/          RUN: trace, step log, manifest        (stage run)
      calibration/SIZE/             FIXED_SAFE: the fixed-safe setting     (grpo-power calibrate)
      identify/                     IDENTIFY: calibration fit, authority   (stage identify)
      identify/real-sweep/          SWEEP: the real-workload sweep         (grpo-power sweep)
      identify/traces/              TRACE_FIT: decode fit from traces      (identify --trace)
      real-traces/                  REAL_TRACES: measured runs fitted, windowed (real-traces)
      controller/DEPLOYMENT/        CONTROLLER: policy, normalisation      (stage controller)
      evaluate/study/, scenarios/N  EVALUATE: per-arm metrics, ratios      (stage evaluate)
      windows/<trace key>/          WINDOWS: exceedance, gaps, bins        (stage windows)
      windows/simulated/DEPLOYMENT/ SIM_WINDOWS: the evaluation's simulated runs windowed
      fleet/                        FLEET: fleet peak, scaling, comparison (stage fleet)
      fleet/study-mix/              STUDY_FLEET: the study's 16-GPU mix of simulated runs
      economics/                    ECONOMICS: cost, carbon, pilot         (stage economics)
      report/                       REPORT: index.html, figures/           (stage report)
      planner/                      planner mode: traces/ (PLANNER_TRACES), windows/KEY/,
                                    fleet/ (PLANNER_FLEET), economics/ (PLANNER_ECONOMICS),
                                    report/
      configs/, logs/               the resolved configs the jobs read; the jobs' logs

Imports nothing of grpo-power: every layer may use it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from pathlib import Path

# Keys of grpo-power's metadata in a Parquet file's schema.
TRACE_METADATA_KEY = b"grpo_power"  # a power trace's TraceMetadata (telemetry/schema.py)
SIM_RUN_METADATA_KEY = b"grpo_power_sim_run"  # a simulated run's samples (control/rollout.py)
BINS_METADATA_KEY = b"grpo_power_bins"  # the windows stage's energy bins (analysis/bins.py)

# The folder of the study's trained controllers, one folder each in it, under RESULTS_DIR.
CONTROLLERS_FOLDER = "controller"
# The arms the study trains a controller of their own for (``controller train --arm``).
CONTROLLER_ARMS = ("ppo", "ppo+hwcap")


def controller_in(controllers: Path, deployment: str, arm: str = "ppo") -> Path:
    """The folder of one deployment's controller of ``arm`` in a folder of controllers:
    ``<deployment>`` for ``ppo``, ``<deployment>+hwcap`` for ``ppo+hwcap`` (the one trained
    under the hardware tier)."""
    if arm not in CONTROLLER_ARMS:
        raise ValueError(f"no trained controller for arm {arm!r}; expected {CONTROLLER_ARMS}")
    return Path(controllers) / (deployment + arm.removeprefix("ppo"))


@dataclass(frozen=True)
class _Files:
    """A stage's output file names, one field each."""

    def names(self) -> tuple[str, ...]:
        """Every file name, in field order."""
        return tuple(getattr(self, field.name) for field in fields(self))

    def paths(self, folder: Path | str) -> dict[str, Path]:
        """Every file in ``folder``, keyed by field name (a Snakemake rule's named outputs)."""
        return {field.name: Path(folder) / getattr(self, field.name) for field in fields(self)}


@dataclass(frozen=True)
class RunFiles(_Files):
    """One GRPO run's folder (``runs/SIZE/ARM/seedN``)."""

    trace: str = "trace.parquet"
    steps: str = "steps.parquet"
    manifest: str = "manifest.json"


@dataclass(frozen=True)
class FixedSafeFiles(_Files):
    """The fixed-safe arm's calibration (``calibration/SIZE``)."""

    setting: str = "fixed_safe.json"


@dataclass(frozen=True)
class IdentifyFiles(_Files):
    """The identify stage's folder: the calibration fit and the authority table."""

    calibration: str = "calibration.json"
    sweeps: str = "sweeps.csv"
    authority_csv: str = "authority.csv"
    authority_md: str = "authority.md"
    authority_json: str = "authority.json"


@dataclass(frozen=True)
class TraceFitFiles(_Files):
    """``grpo-power identify --trace``'s folder: the decode power fit from measured traces."""

    fit: str = "trace_fit.json"
    validation: str = "validation.csv"
    points: str = "trace_points.csv"


@dataclass(frozen=True)
class RealTraceFiles(_Files):
    """``grpo-power real-traces``' folder: measured runs imported, fitted and windowed."""

    traces: str = "traces"  # KEY.parquet per run
    fit: str = "fit"  # TRACE_FIT's files
    runs: str = "runs.csv"
    exceedance: str = "exceedance.csv"


@dataclass(frozen=True)
class SweepFiles(_Files):
    """The real-workload actuator sweep's folder: its index (each run in a subfolder)."""

    index: str = "sweep.json"


@dataclass(frozen=True)
class ControllerFiles(_Files):
    """One deployment's trained controller."""

    controller: str = "controller.json"
    policy_npz: str = "policy.npz"
    policy_zip: str = "policy.zip"
    normalization: str = "vecnormalize.pkl"
    learning_curve: str = "learning_curve.csv"


@dataclass(frozen=True)
class EvaluateFiles(_Files):
    """One evaluation (the study's or a scenario's); simulated samples lie beside them."""

    summary_csv: str = "summary.csv"
    ratios: str = "ratios.csv"
    metrics: str = "metrics.csv"
    table: str = "table.md"
    summary_json: str = "summary.json"


@dataclass(frozen=True)
class SimRunFiles(_Files):
    """One deployment's simulated runs inside an evaluation (``<evaluation>/DEPLOYMENT/``),
    besides ``<arm>.samples.parquet`` and ``<arm>.steps.parquet`` of each arm."""

    arms: str = "arms.json"

    @staticmethod
    def samples(arm: str) -> str:
        """The power samples of one arm's simulated runs."""
        return f"{arm}.samples.parquet"

    @staticmethod
    def steps(arm: str) -> str:
        """The step rows of one arm's simulated runs."""
        return f"{arm}.steps.parquet"


@dataclass(frozen=True)
class WindowsFiles(_Files):
    """The windows stage's folder of one trace."""

    exceedance_csv: str = "exceedance.csv"
    exceedance_parquet: str = "exceedance.parquet"
    gaps: str = "gaps.csv"
    bins: str = "bins.parquet"
    summary: str = "summary.json"


@dataclass(frozen=True)
class SimWindowsFiles(_Files):
    """The windows stage on one deployment's simulated runs (``windows/simulated/DEPLOYMENT``):
    every arm's seeds windowed, one row set per arm and seed."""

    exceedance_csv: str = "exceedance.csv"
    exceedance_parquet: str = "exceedance.parquet"
    bins: str = "bins.parquet"
    summary: str = "summary.json"


@dataclass(frozen=True)
class FleetFiles(_Files):
    """The fleet stage's folder."""

    fleet_csv: str = "fleet_windows.csv"
    fleet_parquet: str = "fleet_windows.parquet"
    scaling_csv: str = "scaling.csv"
    scaling_parquet: str = "scaling.parquet"
    comparison_csv: str = "comparison.csv"
    comparison_md: str = "comparison.md"
    summary: str = "summary.json"


@dataclass(frozen=True)
class PlannerFleetFiles(FleetFiles):
    """Planner mode's fleet folder: the fleet stage's files and each trace's peaks."""

    trace_peaks_csv: str = "trace_peaks.csv"


@dataclass(frozen=True)
class StudyFleetFiles(_Files):
    """The study's fleet mix composed of simulated runs, per arm (``fleet/study-mix``)."""

    fleet_csv: str = "fleet_windows.csv"
    fleet_parquet: str = "fleet_windows.parquet"
    comparison_csv: str = "comparison.csv"
    comparison_md: str = "comparison.md"
    summary: str = "summary.json"


@dataclass(frozen=True)
class EconomicsFiles(_Files):
    """The economics stage's folder."""

    constants: str = "constants.csv"
    runs: str = "runs.csv"
    arms: str = "arms.csv"
    savings: str = "savings.csv"
    oversubscription: str = "oversubscription.csv"
    pilot: str = "pilot.csv"
    sensitivity: str = "sensitivity.csv"
    summary: str = "summary.json"


@dataclass(frozen=True)
class PlannerTraceFiles(_Files):
    """Planner mode's imported traces (``planner/traces/``): the index, beside
    ``<key>.parquet`` for each trace found, and the folder they were read from
    (:meth:`folder_stamp`)."""

    index: str = "index.csv"

    @staticmethod
    def folder_stamp(folder: Path | str) -> str:
        """The name of the file an import writes beside its index, holding the folder it read
        (``folder-<hash of its absolute path>.txt``): the workflow asking for another folder
        finds its stamp missing and imports again, whoever wrote the traces there."""
        resolved = str(Path(folder).resolve())
        return f"folder-{hashlib.sha256(resolved.encode()).hexdigest()[:12]}.txt"


@dataclass(frozen=True)
class PlannerEconomicsFiles(_Files):
    """Planner mode's economics (``planner/economics/``)."""

    constants: str = "constants.csv"
    traces: str = "traces.csv"
    oversubscription: str = "oversubscription.csv"
    sensitivity: str = "sensitivity.csv"
    summary: str = "summary.json"


@dataclass(frozen=True)
class ReportFiles(_Files):
    """The report stage's page; its figures are ``figures/<name>.pdf|png``."""

    page: str = "index.html"


# Written by identify only when it fits real runs (a sweep or measured traces): the fit's residuals.
FIT_RESIDUALS = "fit_residuals.csv"

RUN = RunFiles()
FIXED_SAFE = FixedSafeFiles()
IDENTIFY = IdentifyFiles()
SWEEP = SweepFiles()
TRACE_FIT = TraceFitFiles()
REAL_TRACES = RealTraceFiles()
CONTROLLER = ControllerFiles()
EVALUATE = EvaluateFiles()
SIM_RUN = SimRunFiles()
WINDOWS = WindowsFiles()
SIM_WINDOWS = SimWindowsFiles()
FLEET = FleetFiles()
PLANNER_FLEET = PlannerFleetFiles()
STUDY_FLEET = StudyFleetFiles()
ECONOMICS = EconomicsFiles()
REPORT = ReportFiles()
PLANNER_TRACES = PlannerTraceFiles()
PLANNER_ECONOMICS = PlannerEconomicsFiles()

# The report's figures and their titles, each written as figures/<name>.pdf and .png; the
# workflow's caption of each is workflow/report/figure_<name>.rst.
REPORT_FIGURES = {
    "power_traces": "Power traces of each arm against the cap",
    "power_distributions": "Power distributions per arm",
    "exceedance_windows": "Exceedance against averaging window, with the study's points",
    "authority": "Actuator authority by deployment",
    "fleet": "Fleet peak share and oversubscription against window and fleet size",
    "ppo_learning": "PPO meta-controller training",
    "throughput_violations": "Throughput against violations per arm",
    "cost_carbon": "Cost and carbon per million tokens",
}
# the real-traces section's figure, drawn when real_traces.folder names measured runs
REAL_TRACES_FIGURE = "real_traces"


@dataclass(frozen=True)
class PlannerLayout:
    """Planner mode's folders under its output folder (``results/planner`` in the workflow)."""

    root: Path

    @property
    def traces(self) -> Path:
        """The imported traces: ``<key>.parquet`` each, and PLANNER_TRACES.index."""
        return self.root / "traces"

    def trace(self, key: str) -> Path:
        """One imported trace."""
        return self.traces / f"{key}.parquet"

    @property
    def windows_root(self) -> Path:
        """The windows-stage folders, one per trace."""
        return self.root / "windows"

    def windows(self, key: str) -> Path:
        """One trace's windows-stage folder."""
        return self.windows_root / key

    @property
    def fleet(self) -> Path:
        return self.root / "fleet"

    @property
    def economics(self) -> Path:
        return self.root / "economics"

    @property
    def report(self) -> Path:
        return self.root / "report"


@dataclass(frozen=True)
class ResultsLayout:
    """The folders of a study under its results folder (``results_dir`` of the config)."""

    root: Path

    def run(self, size: str, arm: str, seed: int | str) -> Path:
        """One GRPO run's folder (``seed`` may be a ``{seed}`` pattern)."""
        return self.root / "runs" / size / arm / f"seed{seed}"

    def calibration(self, size: str) -> Path:
        """The fixed-safe calibration folder of a run size."""
        return self.root / "calibration" / size

    def fixed_safe(self, size: str) -> Path:
        """The fixed-safe setting a size's fixed-safe runs use."""
        return self.calibration(size) / FIXED_SAFE.setting

    @property
    def identify(self) -> Path:
        return self.root / "identify"

    @property
    def trace_fit(self) -> Path:
        """Where ``grpo-power identify --trace`` writes by default, and the report looks."""
        return self.identify / "traces"

    @property
    def real_traces(self) -> Path:
        """The simulator against real traces (``grpo-power real-traces``)."""
        return self.root / "real-traces"

    @property
    def real_sweep(self) -> Path:
        return self.identify / "real-sweep"

    @property
    def controllers(self) -> Path:
        return self.root / CONTROLLERS_FOLDER

    def controller(self, deployment: str, arm: str = "ppo") -> Path:
        """One deployment's controller folder of ``arm`` (:func:`controller_in`)."""
        return controller_in(self.controllers, deployment, arm)

    @property
    def evaluate_study(self) -> Path:
        return self.root / "evaluate" / "study"

    @property
    def evaluate_scenarios(self) -> Path:
        """The folder of every evaluation scenario's folder."""
        return self.root / "evaluate" / "scenarios"

    def evaluate_scenario(self, name: str) -> Path:
        """An evaluation scenario's folder."""
        return self.evaluate_scenarios / name

    def windows(self, trace: Path | str) -> Path:
        """The windows folder of a trace under ``root``: ``runs/7b/x/seed0/trace.parquet`` ->
        ``windows/runs/7b/x/seed0/trace``."""
        key = Path(trace).relative_to(self.root).with_suffix("")
        return self.root / "windows" / key

    def sim_windows(self, deployment: str) -> Path:
        """The windows of one deployment's simulated runs in the study's evaluation."""
        return self.root / "windows" / "simulated" / deployment

    @property
    def fleet(self) -> Path:
        return self.root / "fleet"

    @property
    def study_fleet(self) -> Path:
        """The study's fleet mix composed of the deployments' simulated runs."""
        return self.fleet / "study-mix"

    @property
    def economics(self) -> Path:
        return self.root / "economics"

    @property
    def report(self) -> Path:
        return self.root / "report"

    @property
    def planner(self) -> PlannerLayout:
        """Planner mode's folders."""
        return PlannerLayout(self.root / "planner")

    @property
    def configs(self) -> Path:
        return self.root / "configs"

    @property
    def logs(self) -> Path:
        return self.root / "logs"
