"""The arms of the study (docs/design.md section 4) as controllers for a run.

| arm          | controller                                                          |
|--------------|---------------------------------------------------------------------|
| uncontrolled | fixed at the upper bounds of concurrency and max new tokens          |
| fixed        | fixed at the workload's configured defaults                         |
| fixed-half   | fixed at half the default concurrency (the study's static batch 4   |
|              | beside its batch 8), the default max new tokens                     |
| fixed-safe   | fixed at the calibrated highest concurrency with p99 power < cap    |
| threshold    | AIMD on concurrency from recent p95 power                           |
| ppo          | the PPO meta-controller trained in the simulator for the deployment |
|              | this workload size stands for (``sim.deployments[].sizes``)         |
| hwcap        | uncontrolled settings, GPU power limit set to the cap through NVML  |
| ppo+hwcap    | its own PPO controller (trained under the hardware tier), the GPU   |
|              | power limit set to the share of the cap it was trained under, for   |
|              | sites where users may set it                                        |
"""

from __future__ import annotations

from pathlib import Path

from grpo_power.config import ARM_NAMES, HARDWARE_LIMIT_ARMS, STATIC_ARMS, Config, static_setting
from grpo_power.control.controllers import Controller, FixedController, ThresholdController
from grpo_power.layout import CONTROLLER_ARMS
from grpo_power.workload.fixed_safe import calibrate_fixed_safe


def controller_for_arm(arm: str, config: Config, calibration_dir: Path) -> Controller:
    """The controller an arm runs with.

    Raises:
        ValueError: an unknown arm, ``hwcap`` or ``ppo+hwcap`` without NVML telemetry, or
            ``ppo`` for a size no simulated deployment stands for.
        FileNotFoundError: ``ppo`` before its controller was trained (the message names the
            file and the command that creates it).
    """
    w = config.workload
    if arm in HARDWARE_LIMIT_ARMS and config.telemetry.source != "nvml":
        raise ValueError(
            f"arm '{arm}' sets the GPU power limit through NVML, which needs real GPUs, "
            "root and `telemetry.source: nvml`; this config uses "
            f"'{config.telemetry.source}' telemetry"
        )
    if arm in STATIC_ARMS:
        return FixedController(*static_setting(arm, w))
    if arm == "fixed-safe":
        calibration = calibrate_fixed_safe(config, calibration_dir)
        return FixedController(calibration["concurrency"], calibration["max_new_tokens"])
    if arm == "threshold":
        return ThresholdController(
            config.arms.threshold, w.concurrency_bounds, w.concurrency, w.max_new_tokens
        )
    if arm in CONTROLLER_ARMS:
        from grpo_power.control.policy import (
            PPOController,
            controller_folder,
            deployment_for_size,
        )

        deployment = deployment_for_size(config, w.size)
        return PPOController.load(controller_folder(config, deployment, arm), deployment)
    raise ValueError(f"unknown arm {arm!r}; expected one of {ARM_NAMES}")
