"""The one configuration schema of grpo-power, a module per section.

Every stage, the CLI and the Snakefile read their settings through :func:`load_config`, which
validates a YAML file against :class:`Config` (``schema``). A bad value is rejected with the
file, the field path and the reason, for example::

    config/config.yaml: telemetry.period_s: Input should be greater than 0 (got -1)

    base           the strict base model, ConfigError, value types with units
    telemetry      gpu, telemetry (and the simulated power source's model)
    workload       workload: the real GRPO run's model, task and actuator bounds
    arms           arms, and the one list of arm names
    sim            sim: the simulated deployments
    controller     authority, controller
    objective      objective: the violation budget and breaker window of the one objective
    evaluate       evaluate: seeds, arms, tuning grid, scenarios
    analysis       windows, fleet
    economics      economics (carbon_region: the carbon region type and its lookup)
    launch         launch, run_sizes
    planner        planner: the folder of traces planner mode reads
    report         report
    schema         Config: the sections together and the checks between them
    loading        YAML, validation, the default and the resolved config
    options        command-line options checked as the fields they stand for

Simulator defaults cite their published source in their description; ``docs/calibration.md``
lists them all. ``workflow/schemas/config.schema.json`` is generated from :class:`Config`
(``grpo-power config schema``).
"""

from grpo_power.config.arms import (
    ARM_NAMES,
    HARDWARE_LIMIT_ARMS,
    ORACLE_ARMS,
    SIM_ARM_NAMES,
    STATIC_ARMS,
    ArmName,
    ArmsConfig,
    FixedSafeArmConfig,
    SimArmName,
    ThresholdArmConfig,
    oracle_for,
    power_limit_w,
    static_setting,
    uses_hardware_tier,
)
from grpo_power.config.base import ConfigError
from grpo_power.config.controller import (
    AuthorityConfig,
    BudgetTrackingConfig,
    ControllerConfig,
    RewardConfig,
    TrainingConditionsConfig,
)
from grpo_power.config.economics import EconomicsConfig, PilotConfig, SourcedValue
from grpo_power.config.evaluate import EvaluateConfig, ScenarioConfig, ScheduleSegmentConfig
from grpo_power.config.launch import JobResources, LaunchConfig, LauncherName, RunSize
from grpo_power.config.loading import (
    DEFAULT_CONFIG_PATH,
    deep_merge,
    default_config_path,
    load_config,
    packaged_config_path,
    read_yaml,
    validate_config,
    write_resolved_config,
)
from grpo_power.config.objective import ObjectiveConfig
from grpo_power.config.options import validate_option, validate_setting
from grpo_power.config.planner import PlannerConfig
from grpo_power.config.real_traces import RealTracesConfig
from grpo_power.config.schema import Config
from grpo_power.config.sim import DeploymentConfig, SimConfig
from grpo_power.config.telemetry import (
    GpuSpec,
    SimulatedPowerConfig,
    TelemetryConfig,
    TelemetrySource,
)
from grpo_power.config.workload import ActuatorBounds, ModelSize, WorkloadConfig

__all__ = [
    "ARM_NAMES",
    "DEFAULT_CONFIG_PATH",
    "HARDWARE_LIMIT_ARMS",
    "ORACLE_ARMS",
    "SIM_ARM_NAMES",
    "STATIC_ARMS",
    "ActuatorBounds",
    "ArmName",
    "ArmsConfig",
    "AuthorityConfig",
    "BudgetTrackingConfig",
    "Config",
    "ConfigError",
    "ControllerConfig",
    "DeploymentConfig",
    "EconomicsConfig",
    "EvaluateConfig",
    "FixedSafeArmConfig",
    "GpuSpec",
    "JobResources",
    "LaunchConfig",
    "LauncherName",
    "ModelSize",
    "ObjectiveConfig",
    "PilotConfig",
    "PlannerConfig",
    "RealTracesConfig",
    "RewardConfig",
    "RunSize",
    "ScenarioConfig",
    "ScheduleSegmentConfig",
    "SimArmName",
    "SimConfig",
    "SimulatedPowerConfig",
    "SourcedValue",
    "TelemetryConfig",
    "TelemetrySource",
    "ThresholdArmConfig",
    "TrainingConditionsConfig",
    "WorkloadConfig",
    "deep_merge",
    "default_config_path",
    "load_config",
    "oracle_for",
    "packaged_config_path",
    "power_limit_w",
    "read_yaml",
    "static_setting",
    "uses_hardware_tier",
    "validate_config",
    "validate_option",
    "validate_setting",
    "write_resolved_config",
]
