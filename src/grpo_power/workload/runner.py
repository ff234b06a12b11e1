"""One GRPO run (model size x arm x seed) with power telemetry, a step log and a manifest.

Files written into the run folder:
``trace.parquet`` (power samples), ``steps.parquet`` (one row per step), ``manifest.json``.
On the CPU the power is the simulated A100's, driven by this run's real phases and actuator
values: tokens and timings are measured, only the power is simulated (and labelled so).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PrinterCallback, set_seed
from trl import GRPOConfig

from grpo_power.config import Config
from grpo_power.control.controllers import Controller
from grpo_power.telemetry.factory import open_source
from grpo_power.telemetry.record import trace_metadata
from grpo_power.telemetry.sampler import PowerSampler
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.store import TraceWriter
from grpo_power.workload.actuators import Actuators
from grpo_power.workload.fixed_safe import failsafe_action
from grpo_power.workload.hook import ControllerCallback
from grpo_power.workload.manifest import RunManifest
from grpo_power.workload.models import load_model
from grpo_power.workload.steplog import StepLogWriter
from grpo_power.workload.task import arithmetic_dataset, exact_answer_reward, format_reward
from grpo_power.workload.trainer import PowerAwareGRPOTrainer


@dataclass(frozen=True)
class RunPaths:
    """The files of one run folder."""

    folder: Path

    @property
    def trace(self) -> Path:
        return self.folder / "trace.parquet"

    @property
    def steps(self) -> Path:
        return self.folder / "steps.parquet"

    @property
    def manifest(self) -> Path:
        return self.folder / "manifest.json"


@dataclass(frozen=True)
class RunResult:
    """Outcome of :func:`run_grpo` (main process)."""

    paths: RunPaths
    steps: int
    completion_tokens: int
    wall_s: float


def _grpo_args(
    config: Config, out: Path, seed: int, steps: int, device: torch.device
) -> GRPOConfig:
    w = config.workload
    return GRPOConfig(
        output_dir=str(out / "trainer"),
        # One generation of sequences_per_step completions per optimizer step, trained in
        # micro-batches of train_micro_batch with gradient accumulation.
        per_device_train_batch_size=w.train_micro_batch,
        gradient_accumulation_steps=w.sequences_per_step // w.train_micro_batch,
        num_generations=w.num_generations,
        max_completion_length=w.max_new_tokens_bounds.max,
        max_steps=steps,
        learning_rate=w.learning_rate,
        beta=0.0,  # no reference model: the power study needs the policy's passes only
        temperature=1.0,
        seed=seed,
        data_seed=seed,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        use_cpu=device.type != "cuda",
        bf16=device.type == "cuda",
        dataloader_num_workers=0,
    )


def run_grpo(
    config: Config,
    arm: str,
    seed: int,
    out: Path,
    controller: Controller,
    steps: int | None = None,
    show_progress: bool = True,
) -> RunResult:
    """Run GRPO under ``controller`` while sampling power; write trace, step log and manifest.

    The sampler runs on local rank 0 of each node, for that node's GPUs; the step log and
    manifest are written by the main process.
    """
    set_seed(seed)
    paths = RunPaths(Path(out))
    paths.folder.mkdir(parents=True, exist_ok=True)
    steps = steps or config.workload.steps
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    is_main = int(os.environ.get("RANK", "0")) == 0
    device = torch.device(f"cuda:{local_rank}" if torch.cuda.is_available() else "cpu")
    run_id = f"{config.workload.size}-{arm}-seed{seed}"

    signal = WorkloadSignal()
    origin_s = time.monotonic()
    sampler: PowerSampler | None = None
    if local_rank == 0:
        source = open_source(config, signal)
        if arm == "hwcap":  # controllers_for_arm has checked that the source is NVML
            source.set_power_limit_w(config.cap_w)  # type: ignore[attr-defined]
        metadata = trace_metadata(
            source,
            run_id,
            config.telemetry.period_s,
            arm=arm,
            model_size=config.workload.size,
            seed=seed,
        )
        sampler = PowerSampler(
            source,
            TraceWriter(paths.trace, metadata),
            period_s=config.telemetry.period_s,
            flush_s=config.telemetry.flush_s,
            origin_s=origin_s,
        ).start()
    manifest = step_log = None
    if is_main:
        simulated = sampler is not None and sampler.source.kind == "simulated"
        manifest = RunManifest(
            paths.manifest,
            config,
            arm,
            seed,
            {
                "run_id": run_id,
                "steps_planned": steps,
                "power": "simulated" if simulated else "nvml",
            },
        )
        step_log = StepLogWriter(paths.steps, run_id, simulated_power=simulated)
    started_s = time.monotonic()
    try:
        model, tokenizer = load_model(config.workload, device)
        dataset = arithmetic_dataset(steps * config.workload.prompts_per_step * 4, seed)
        trainer = PowerAwareGRPOTrainer(
            model=model,
            reward_funcs=[exact_answer_reward, format_reward],
            args=_grpo_args(config, paths.folder, seed, steps, device),
            train_dataset=dataset,
            processing_class=tokenizer,
            signal=signal,
            concurrency=config.workload.concurrency,
        )
        trainer.generation_config.max_new_tokens = config.workload.max_new_tokens
        actuators = Actuators(
            trainer,
            {
                "concurrency": config.workload.concurrency_bounds,
                "max_new_tokens": config.workload.max_new_tokens_bounds,
            },
        )
        callback = ControllerCallback(
            trainer,
            controller,
            actuators,
            recent_power_w=(lambda window_s: sampler.recent(window_s).power_w) if sampler else None,
            telemetry_age_s=sampler.age_s if sampler else None,
            staleness_s=config.arms.staleness_s,
            failsafe=failsafe_action(config),
            cap_w=config.cap_w,
            window_s=config.arms.observation_window_s,
            step_log=step_log,
            origin_s=origin_s,
            show_progress=show_progress,
        )
        trainer.add_callback(callback)
        trainer.remove_callback(PrinterCallback)  # our progress bar replaces its per-step dicts
        trainer.train()
    except BaseException as error:
        if manifest is not None:
            manifest.finish("failed", error=f"{type(error).__name__}: {error}")
        raise
    finally:
        signal.set("idle")
        if step_log is not None:
            step_log.close()
        if sampler is not None:
            sampler.stop()
    wall_s = time.monotonic() - started_s
    if manifest is not None:
        manifest.finish(
            "completed",
            failsafe_steps=callback.failsafe_steps,
            telemetry_read_errors=sampler.read_errors if sampler else None,
            steps_completed=steps,
            wall_s=wall_s,
            completion_tokens=callback.completion_tokens,
            sampler_missed_slots=sampler.missed_slots if sampler else None,
        )
    return RunResult(paths, steps, callback.completion_tokens, wall_s)
