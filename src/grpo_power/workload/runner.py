"""One GRPO run (model size x arm x seed) with power telemetry, a step log and a manifest.

Files written into the run folder:
``trace.parquet`` (power samples), ``steps.parquet`` (one row per step), ``manifest.json``,
``log_history.json`` (the trainer's logs: TRL's metrics and the ``power/*`` entries of
:class:`~grpo_power.callbacks.PowerCallback`; ``workload.report_to`` also sends them to
TensorBoard, in ``tensorboard/``, or W&B, trackio, ...);
while the run is unfinished also ``trainer/checkpoint-<step>`` and ``resume.json``, from which
a stopped, requeued or killed run resumes (:mod:`grpo_power.workload.resume`).
On the CPU the power is the simulated A100's, driven by this run's real phases and actuator
values: tokens and timings are measured, only the power is simulated (and labelled so).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PrinterCallback, set_seed
from transformers.integrations import TensorBoardCallback
from trl import GRPOConfig

from grpo_power.atomic import write_json_atomic
from grpo_power.callbacks import PowerCallback
from grpo_power.config import Config, power_limit_w
from grpo_power.control.controllers import Controller
from grpo_power.telemetry.factory import open_source
from grpo_power.telemetry.monitor import PowerMonitor
from grpo_power.telemetry.record import trace_metadata
from grpo_power.telemetry.sampler import PowerSampler
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.steplog import StepLogWriter
from grpo_power.telemetry.store import TraceWriter
from grpo_power.workload.actuators import ACTUATORS, Actuators
from grpo_power.workload.distributed import process_ranks
from grpo_power.workload.failsafe import failsafe_action
from grpo_power.workload.hook import ControllerCallback
from grpo_power.workload.lock import RunLock
from grpo_power.workload.manifest import RunManifest, run_id_of
from grpo_power.workload.models import check_runs_on, load_model
from grpo_power.workload.resume import (
    ResumePoint,
    RunPaths,
    RunStopped,
    StopSignals,
    start_or_resume,
)
from grpo_power.workload.task import arithmetic_dataset, exact_answer_reward, format_reward
from grpo_power.workload.trainer import PowerAwareGRPOTrainer


@dataclass(frozen=True)
class RunResult:
    """Outcome of :func:`run_grpo` (main process); totals over all attempts."""

    paths: RunPaths
    status: str  # completed | interrupted (a stop signal; rerun to resume)
    steps: int  # steps completed
    completion_tokens: int
    wall_s: float  # time the attempts ran, without the gaps between them
    # the signal an interrupted run stopped for, or one that came as it completed its last step
    # (a command of several runs stops with it: :func:`completed`)
    stopped_by: str | None = None


def _grpo_args(
    config: Config, out: Path, seed: int, steps: int, device: torch.device
) -> GRPOConfig:
    w = config.workload
    return GRPOConfig(
        output_dir=str(out / "trainer"),
        # One generation of sequences_per_step completions per optimizer step, handed to one
        # training_step: the trainer trains them in chunks of its live train_micro_batch with
        # gradient accumulation inside the step (workload/trainer.py).
        per_device_train_batch_size=w.sequences_per_step,
        gradient_accumulation_steps=1,
        num_generations=w.num_generations,
        max_completion_length=w.max_new_tokens_bounds.max,
        max_steps=steps,
        learning_rate=w.learning_rate,
        beta=0.0,  # no reference model: the power study needs the policy's passes only
        temperature=1.0,
        seed=seed,
        data_seed=seed,
        logging_steps=1,
        report_to=w.report_to,
        # Checkpoints to resume from; the last two are kept, one of them the resume point.
        save_strategy="steps" if w.checkpoint_every_steps else "no",
        save_steps=w.checkpoint_every_steps or None,
        save_total_limit=2,
        disable_tqdm=True,
        use_cpu=device.type != "cuda",
        bf16=device.type == "cuda",
        dataloader_num_workers=0,
    )


def _device() -> torch.device:
    """This process's device: its local rank's GPU where there is one, else the CPU."""
    return torch.device(f"cuda:{process_ranks()[1]}" if torch.cuda.is_available() else "cpu")


def _holding_the_run_lock(run: Callable[..., RunResult]) -> Callable[..., RunResult]:
    """``run`` with the run folder (its 4th argument, ``out``) locked by the main process
    throughout (:class:`RunLock`): a second attempt at the folder is refused naming this one."""

    @functools.wraps(run)
    def locked(config: Config, arm: str, seed: int, out: Path, *args: Any, **kwargs: Any) -> Any:
        check_runs_on(config.workload, _device())  # before the run's folder is made or locked
        if process_ranks()[0] != 0:
            return run(config, arm, seed, out, *args, **kwargs)
        with RunLock(Path(out)):
            return run(config, arm, seed, out, *args, **kwargs)

    return locked


@_holding_the_run_lock
def run_grpo(
    config: Config,
    arm: str,
    seed: int,
    out: Path,
    controller: Controller,
    steps: int | None = None,
    show_progress: bool = True,
    fresh: bool = False,
    replace_other: bool = False,
) -> RunResult:
    """Run GRPO under ``controller`` while sampling power; write trace, step log and manifest.

    A folder holding an unfinished attempt of the same run is resumed from its last checkpoint
    (``fresh`` discards it instead); one holding the same run, completed, is left as it is; one
    holding another run is refused, or discarded with ``replace_other`` (the workflow's). A
    stop signal ends the run after the current step with a checkpoint (status ``interrupted``).
    The sampler runs on local rank 0 of each node, for that node's GPUs; the folder, step log
    and manifest are handled by the main process, which holds the folder's lock.
    """
    rank, local_rank = process_ranks()
    is_main = rank == 0
    device = _device()
    set_seed(seed)
    paths = RunPaths(Path(out))
    paths.folder.mkdir(parents=True, exist_ok=True)
    steps = steps or config.workload.steps
    run_id = run_id_of(config, arm, seed)
    simulated = config.telemetry.source == "simulated"

    start = elapsed_s = None
    if is_main:
        new = RunManifest.planned(paths.manifest, config, arm, seed, steps)
        start = start_or_resume(paths, new, fresh, replace_other)
        if start.completed:
            return _result(paths, start.manifest)
        # The trace's clock runs on across attempts: t is seconds since the run first started,
        # and never goes back (another host's clock may lag).
        elapsed_s = time.time() - start.manifest.data["started_unix_s"]
        if start.trace_end_s is not None:
            elapsed_s = max(elapsed_s, start.trace_end_s + config.telemetry.period_s)
    origin_s = time.monotonic() - (elapsed_s or 0.0)

    # the wall clock at the run's t = 0, which the trace and the step log count from (a node
    # other than the main one starts its own trace's clock now)
    start_unix_s = start.manifest.data["started_unix_s"] if start is not None else time.time()
    signal = WorkloadSignal()
    sampler: PowerSampler | None = None
    monitor: PowerMonitor | None = None
    if local_rank == 0:
        source = open_source(config, signal)
        limit_w = power_limit_w(arm, config.cap_w, getattr(controller, "power_limit_frac", None))
        if limit_w is not None:  # controller_for_arm has checked that the source is NVML
            source.set_power_limit_w(limit_w)  # type: ignore[attr-defined]
        metadata = trace_metadata(
            source,
            run_id,
            config.telemetry.period_s,
            arm=arm,
            model_size=config.workload.size,
            seed=seed,
            cap_w=config.cap_w,
            start_unix_s=start_unix_s,
        )
        monitor = PowerMonitor(
            source=source,
            trace=TraceWriter(paths.trace, metadata, append=True),
            config=config,
            signal=signal,
            origin_s=origin_s,
            energy_offset_j=start.energy_j if start is not None else None,
        ).start()
        sampler = monitor.sampler
    manifest = step_log = None
    if start is not None:
        manifest = start.manifest
        manifest.begin_attempt(
            t_start_s=elapsed_s,
            resumed_from_step=start.resume.step if start.resume else 0,
            steps_redone=start.steps_redone,
        )
        step_log = StepLogWriter(paths.steps, run_id, simulated, start_unix_s)
    started_s = time.monotonic()
    complete = False  # the trace and step log become whole files only when the run completes
    with StopSignals() as stop:
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
                train_micro_batch=config.workload.train_micro_batch,
            )
            trainer.generation_config.max_new_tokens = config.workload.max_new_tokens
            for reporter in trainer.callback_handler.callbacks:
                if isinstance(reporter, TensorBoardCallback):  # outside trainer/, which goes
                    reporter.logging_dir = str(paths.folder / "tensorboard")
            actuators = Actuators(
                trainer,
                {name: getattr(config.workload, f"{name}_bounds") for name in ACTUATORS},
                pause_s=config.workload.pause_s,
            )
            callback = ControllerCallback(
                trainer,
                controller,
                actuators,
                recent_power_w=(
                    (lambda window_s: sampler.recent(window_s).power_w) if sampler else None
                ),
                telemetry_age_s=sampler.age_s if sampler else None,
                staleness_s=config.arms.staleness_s,
                failsafe=failsafe_action(config),
                cap_w=config.cap_w,
                window_s=config.arms.observation_window_s,
                step_log=step_log,
                origin_s=origin_s,
                show_progress=show_progress,
                stop_requested=lambda: stop.received,
                paths=paths if is_main else None,
            )
            trainer.add_callback(callback)
            if monitor is not None:  # the trainer announces its phases to the monitor's signal
                trainer.add_callback(PowerCallback(monitor, announce_phases=False))
            trainer.remove_callback(PrinterCallback)  # our progress bar replaces its dicts
            trainer.accelerator.wait_for_everyone()  # the main process has prepared the folder
            point = start.resume if start is not None else ResumePoint.load(paths)
            if point is not None:
                callback.load_state_dict(point.hook)
            trainer.train(
                resume_from_checkpoint=str(paths.checkpoints / point.checkpoint) if point else None
            )
            complete = trainer.state.global_step >= steps
        except KeyboardInterrupt:  # Ctrl-C: no checkpoint; the steps after the last are redone
            if manifest is not None:
                manifest.end_attempt(
                    "interrupted",
                    t_end_s=time.monotonic() - origin_s,
                    wall_s=time.monotonic() - started_s,
                    steps_done=(start.resume.step if start.resume else 0)
                    + (step_log.rows_written if step_log is not None else 0),
                    stop_signal="SIGINT",
                    **_attempt_figures(sampler),
                )
                manifest.finish("interrupted", stop_signal="SIGINT")
            raise
        except BaseException as error:
            if manifest is not None:
                message = f"{type(error).__name__}: {error}"
                manifest.end_attempt(
                    "failed",
                    error=message,
                    t_end_s=time.monotonic() - origin_s,
                    wall_s=time.monotonic() - started_s,
                    **_attempt_figures(sampler),
                )
                manifest.finish("failed", error=message)
            raise
        finally:
            signal.set("idle")
            if step_log is not None:
                step_log.close(complete)
            if monitor is not None:
                monitor.stop(complete)
    steps_done = trainer.state.global_step
    status = "completed" if complete else "interrupted"
    if is_main:  # restored from the checkpoint on resume, so it holds every attempt's steps
        write_json_atomic(paths.log_history, trainer.state.log_history)
    if manifest is not None:
        manifest.end_attempt(
            status,
            t_end_s=time.monotonic() - origin_s,
            wall_s=time.monotonic() - started_s,
            steps_done=steps_done,
            stop_signal=callback.stopped_by,
            **_attempt_figures(sampler),
        )
        attempts = manifest.attempts
        manifest.finish(
            status,
            steps_completed=steps_done,
            completion_tokens=callback.completion_tokens,
            failsafe_steps=callback.failsafe_steps,
            wall_s=sum(a["t_end_s"] - a["t_start_s"] for a in attempts if a.get("t_end_s")),
            telemetry_read_errors=_total(attempts, "telemetry_read_errors"),
            sampler_missed_slots=_total(attempts, "sampler_missed_slots"),
            stop_signal=callback.stopped_by if status == "interrupted" else None,
        )
        if status == "completed":
            paths.keep_completed()
            paths.remove_checkpoints()
    _leave_together(trainer)
    if manifest is None:
        return RunResult(paths, status, steps_done, callback.completion_tokens, 0.0)
    return _result(paths, manifest, stop.received)


def completed(result: RunResult, label: str) -> RunResult:
    """``result`` of a run that completed with no stop signal;
    :class:`~grpo_power.workload.resume.RunStopped`, naming ``label`` and what the same command
    does, for one a stop signal interrupted, or one that completed as the signal came (in its
    last step: the command of several runs stops after it, not at the end of the next)."""
    if result.status == "interrupted":
        raise RunStopped(
            f"{label}: stopped by {result.stopped_by} after step {result.steps}, checkpoint saved; "
            f"run the same command to go on -> {result.paths.folder}"
        )
    if result.stopped_by is not None:
        raise RunStopped(
            f"{label}: stopped by {result.stopped_by} as it completed its last step "
            f"({result.steps}); run the same command to go on -> {result.paths.folder}"
        )
    return result


def _leave_together(trainer: PowerAwareGRPOTrainer) -> None:
    """The ranks of a multi-process run wait for the main one to write the run's files, then
    close their process group: a rank that exits while another still holds the group can abort
    the launch (seen once as SIGABRT after a final ZeRO-3 checkpoint)."""
    if trainer.accelerator.num_processes > 1:
        trainer.accelerator.wait_for_everyone()
        torch.distributed.destroy_process_group()


def _attempt_figures(sampler: PowerSampler | None) -> dict[str, int | str | None]:
    """The sampler's health over one attempt: failed reads, missed slots, a fatal error."""
    if sampler is None:
        return {}
    error = sampler.error
    return {
        "telemetry_read_errors": sampler.read_errors,
        "sampler_missed_slots": sampler.missed_slots,
        "sampler_error": f"{type(error).__name__}: {error}" if error else None,
    }


def _total(attempts: list[dict[str, Any]], name: str) -> int | None:
    values = [a[name] for a in attempts if a.get(name) is not None]
    return sum(values) if values else None


def _result(paths: RunPaths, manifest: RunManifest, received: str | None = None) -> RunResult:
    """The run's totals from its manifest; ``received``: a stop signal this attempt got."""
    data = manifest.data
    return RunResult(
        paths,
        data["status"],
        data["steps_completed"],
        data["completion_tokens"],
        data["wall_s"],
        data.get("stop_signal") or received,
    )
