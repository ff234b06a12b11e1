"""The whole configuration, :class:`Config`: one field per section, and the checks between
sections (a cap within the GPU's range, the fleet window among the windows, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import (
    Field,
    model_validator,
)

from grpo_power.config.analysis import FleetConfig, WindowsConfig
from grpo_power.config.arms import ArmsConfig
from grpo_power.config.base import (
    PositiveFloat,
    Strict,
)
from grpo_power.config.controller import AuthorityConfig, ControllerConfig
from grpo_power.config.economics import EconomicsConfig
from grpo_power.config.evaluate import EvaluateConfig
from grpo_power.config.launch import JobResources, LaunchConfig, RunSize
from grpo_power.config.objective import ObjectiveConfig
from grpo_power.config.planner import PlannerConfig
from grpo_power.config.real_traces import RealTracesConfig
from grpo_power.config.report import ReportConfig
from grpo_power.config.sim import SimConfig
from grpo_power.config.telemetry import GpuSpec, TelemetryConfig
from grpo_power.config.workload import WorkloadConfig
from grpo_power.layout import ResultsLayout


class Config(Strict):
    """The whole configuration of a grpo-power study."""

    results_dir: Path = Field(Path("results"), description="Where every stage writes its outputs.")
    seed: Annotated[int, Field(ge=0)] = 0
    gpu: GpuSpec = Field(default_factory=GpuSpec)
    cap_w: PositiveFloat = Field(
        320.0, description="Per-GPU power cap the controllers keep under, W."
    )
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    arms: ArmsConfig = Field(default_factory=ArmsConfig)
    launch: LaunchConfig = Field(default_factory=LaunchConfig)
    run_sizes: list[RunSize] = Field(
        default_factory=lambda: [RunSize(size="tiny")],
        min_length=1,
        description="Model sizes the run stage trains for real, each with its processes.",
    )
    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0], min_length=1, description="Seeds each arm runs with."
    )
    windows: WindowsConfig = Field(default_factory=WindowsConfig)
    fleet: FleetConfig = Field(default_factory=FleetConfig)
    sim: SimConfig = Field(default_factory=SimConfig)
    authority: AuthorityConfig = Field(default_factory=AuthorityConfig)
    controller: ControllerConfig = Field(default_factory=ControllerConfig)
    objective: ObjectiveConfig = Field(default_factory=ObjectiveConfig)
    evaluate: EvaluateConfig = Field(default_factory=EvaluateConfig)
    economics: EconomicsConfig = Field(default_factory=EconomicsConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    real_traces: RealTracesConfig = Field(default_factory=RealTracesConfig)
    planner: PlannerConfig = Field(default_factory=PlannerConfig)

    @property
    def layout(self) -> ResultsLayout:
        """The study's folders under ``results_dir``."""
        return ResultsLayout(self.results_dir)

    def run_size(self, size: str) -> RunSize:
        """How ``size`` runs: its ``run_sizes`` entry, or one process when it has none."""
        for entry in self.run_sizes:
            if entry.size == size:
                return entry
        return RunSize(size=size)  # type: ignore[arg-type]

    def deployment_cap_w(self, deployment: str) -> float:
        """The cap a simulated deployment runs under: its own ``cap_w``, else the top-level
        ``cap_w``, W."""
        own = self.sim.deployment(deployment).cap_w
        return float(own if own is not None else self.cap_w)

    def job_resources(self, size: str) -> JobResources:
        """The resources of a GPU job of ``size``: its ``run_sizes`` entry over ``launch.job``,
        with the GPUs defaulting to the size's processes."""
        entry = self.run_size(size)
        resources = entry.job.over(self.launch.job)
        if resources.gpus is None:
            resources.gpus = entry.processes
        return resources

    @model_validator(mode="after")
    def _run_sizes_unique(self) -> Config:
        sizes = [entry.size for entry in self.run_sizes]
        if len(set(sizes)) != len(sizes):
            raise ValueError(f"run_sizes lists a size twice: {sizes}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: expected each seed once (one run each), got {self.seeds}")
        return self

    @model_validator(mode="after")
    def _cap_within_gpu_range(self) -> Config:
        if self.cap_w > self.gpu.nameplate_w:
            raise ValueError(
                f"cap_w ({self.cap_w} W) is above gpu.nameplate_w ({self.gpu.nameplate_w} W): "
                "a cap the GPU can never reach controls nothing"
            )
        if self.cap_w <= self.gpu.idle_w:
            raise ValueError(
                f"cap_w ({self.cap_w} W) must be above gpu.idle_w ({self.gpu.idle_w} W)"
            )
        return self

    @model_validator(mode="after")
    def _study_sections_consistent(self) -> Config:
        names = [d.name for d in self.sim.deployments]
        if self.authority.reference not in names:
            raise ValueError(
                f"authority.reference ({self.authority.reference!r}) must be one of the "
                f"deployments {names}"
            )
        caps = [(f"sim.deployments {d.name}", d.cap_w) for d in self.sim.deployments] + [
            (f"evaluate.scenarios {s.name}", s.cap_w) for s in self.evaluate.scenarios
        ]
        for scenario in self.evaluate.scenarios:  # a schedule's cap: a share of each cap
            for d in self.sim.deployments:
                if scenario.deployments is None or d.name in scenario.deployments:
                    cap_w = scenario.cap_w or d.cap_w or self.cap_w
                    caps += [
                        (
                            f"evaluate.scenarios {scenario.name}: schedule segment from "
                            f"{segment.start_frac:g} on {d.name}: cap_frac {segment.cap_frac:g} x "
                            f"{cap_w:g} W",
                            segment.cap_frac * cap_w,
                        )
                        for segment in scenario.schedule
                    ]
        for where, cap_w in caps:
            if cap_w is not None and not self.gpu.idle_w < cap_w <= self.gpu.nameplate_w:
                raise ValueError(
                    f"{where}: cap_w ({cap_w:g} W) must lie above gpu.idle_w "
                    f"({self.gpu.idle_w:g} W) and at most gpu.nameplate_w "
                    f"({self.gpu.nameplate_w:g} W)"
                )
        mix = [entry.deployment for entry in self.fleet.study_mix]
        unknown = [name for name in mix if name not in names]
        if unknown and "study_mix" not in self.fleet.model_fields_set:
            # The default mix needs the study's deployments: without them, no study fleet.
            self.fleet.study_mix = []
        elif unknown:
            raise ValueError(
                f"fleet.study_mix: deployment {unknown[0]!r} is not in sim.deployments {names}; "
                "expected configured deployments, or study_mix: [] for no study fleet"
            )
        scenarios = [s.name for s in self.evaluate.scenarios]
        if len(set(scenarios)) != len(scenarios):
            raise ValueError(f"evaluate.scenarios need unique names, got {scenarios}")
        for scenario in self.evaluate.scenarios:
            unknown = sorted(set(scenario.deployments or []) - set(names))
            if unknown:
                raise ValueError(
                    f"evaluate.scenarios {scenario.name}: unknown deployment(s) {unknown}; "
                    f"configured: {names}"
                )
        return self

    @model_validator(mode="after")
    def _fleet_window_listed(self) -> Config:
        if not any(abs(w - self.fleet.window_s) <= 1e-9 * w for w in self.windows.windows_s):
            raise ValueError(
                f"fleet.window_s ({self.fleet.window_s} s) must be one of windows.windows_s "
                f"{self.windows.windows_s}"
            )
        return self
