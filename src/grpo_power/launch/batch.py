"""A batch of GPU runs as Slurm jobs: one job, or one submitit job array, waited for together.

:func:`submit_batch` is what ``grpo-power run --launcher submitit`` (and the fixed-safe
calibration and the identify sweep) call with the runs they need:

- a run folder that already holds its completed run needs no job;
- a run folder whose ``job.json`` names a job that Slurm still runs (or has queued) is
  reattached to (``submitit.SlurmJob(folder, job_id)``) instead of submitting a second one, so
  a restarted workflow picks up the jobs a stopped one left;
- the rest are submitted at once, as one job array (``map_array``, at most
  ``launch.array_parallelism`` tasks at a time) when there are several, and each run folder
  records its job in ``job.json``;
- the batch is waited for as a whole: every job's state change is logged, and failures are
  reported together, each with its job's stderr tail.

A job's record stays ``collected: false`` until a batch has waited for it to the end. A run that
completed uncollected (its workflow stopped, or a sibling run failed) is not measured again when
Snakemake, which removes a job's outputs before rerunning it, has removed its files: the next
batch of the same command and config puts them back from the run's ``.completed`` copy
(:meth:`RunPaths.restore_completed`). Once collected, a removed run is measured anew
(``snakemake --forcerun run``).

Interrupts: SIGINT (Ctrl-C of Snakemake reaches its whole process group) or SIGTERM while
waiting cancels the batch's jobs (``launch.on_interrupt: cancel``; Slurm's SIGTERM makes each
run save a checkpoint) and waits until their runs have let go of their folders, or leaves them
running (``keep``); either way :class:`RunsInterrupted` says which, and running the same
command again resumes or reattaches.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import submitit

from grpo_power.atomic import write_json_atomic
from grpo_power.config import Config
from grpo_power.launch.submit import (
    JobFailed,
    RunJob,
    SubmitRefused,
    make_executor,
    resolve_cluster,
    run_command,
    stderr_tail,
)
from grpo_power.signal_handlers import handling
from grpo_power.workflow_params import run_settings
from grpo_power.workload.lock import RunLock, lock_holder
from grpo_power.workload.manifest import RunManifest, settings_difference
from grpo_power.workload.resume import RunPaths, another_run

JOB_RECORD = "job.json"
# sacct/squeue states of a job that is queued or still running (it may still write its folder)
LIVE_STATES = frozenset(
    {
        "PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING",
        "COMPLETING", "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD",
    }
)  # fmt: skip
RELEASE_MARGIN_S = 60.0  # beyond launch.checkpoint_grace_s, for Slurm's kill wait

Log = Callable[[str], None]


class RunsInterrupted(RuntimeError):
    """The wait was interrupted; the message says which jobs were cancelled or left running."""


@dataclass(frozen=True)
class RunSpec:
    """One run of a batch: a label for the log, its ``grpo-power run`` command, its folder, the
    config file the command reads and the settings its results depend on
    (:func:`~grpo_power.workflow_params.run_settings`)."""

    label: str
    command: list[str]
    folder: Path
    config_file: Path
    settings: str
    planned: RunManifest  # the manifest the run starts with: what its folder's must match
    replace_other: bool = False  # a run of other settings in the folder is discarded, not refused


def run_spec(
    config: Config,
    config_file: Path,
    arm: str,
    seed: int,
    out: Path,
    steps: int | None = None,
    label: str | None = None,
    replace_other: bool = False,
) -> RunSpec:
    """The spec of one run of ``config.workload`` (its size, fixed setting, steps)."""
    out = Path(out).resolve()
    label = label or f"{config.workload.size}/{arm}/seed{seed}"
    command = run_command(config, config_file, arm, seed, out, steps, replace_other)
    return RunSpec(
        label,
        command,
        out,
        Path(config_file).resolve(),
        run_settings(config, arm),
        RunManifest.planned(RunPaths(out).manifest, config, arm, seed, steps),
        replace_other,
    )


def _job_record(folder: Path) -> dict[str, Any] | None:
    """``folder/job.json`` (None: absent or unreadable)."""
    try:
        record = json.loads((Path(folder) / JOB_RECORD).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def _queue_state(job_id: str) -> str | None:
    """The state ``squeue`` gives the job (an array task as ``<array>_<task>``): the controller's
    own view, which has a job from its submission on; "" where it has no such job (never, or
    ended long enough ago), None where squeue could not be asked."""
    try:
        out = subprocess.run(
            ["squeue", "--noheader", "--array", "--jobs", job_id, "--format", "%T"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return "" if "invalid job id" in out.stderr.lower() else None
    return out.stdout.split()[0] if out.stdout.split() else ""


def live_job(folder: Path) -> submitit.Job | None:
    """The Slurm job ``folder/job.json`` names, when Slurm still has it queued or running.

    Its state is sacct's (submitit's view); a job sacct does not know (UNKNOWN: submitted in
    the last seconds, which the accounting has not recorded yet, or the accounting down) is
    looked up in the controller's queue, so a restart reattaches to a job it has just submitted
    instead of clearing its folder and submitting a second one."""
    record = _job_record(folder)
    if record is None:
        return None
    try:
        if record.get("cluster") != "slurm":
            return None  # local jobs end with the process that started them
        job = submitit.SlurmJob(Path(record["submitit_folder"]), str(record["job_id"]))
    except (KeyError, TypeError):
        return None
    state = job.state
    if state == "UNKNOWN":
        state = _queue_state(str(job.job_id)) or state
    return job if state in LIVE_STATES else None


def _finished(job: submitit.Job) -> bool:
    """Whether ``job`` has ended: submitit's ``done()`` counts a SUSPENDED job (or one held,
    configuring, resizing, ...) as done, whose ``result()`` then failed while the job lived on
    and held its run folder; such a job is waited for."""
    return job.done() and job.state not in LIVE_STATES


def _config_sha256(spec: RunSpec) -> str | None:
    try:
        return hashlib.sha256(spec.config_file.read_bytes()).hexdigest()
    except OSError:
        return None


def _record(spec: RunSpec, job: submitit.Job, cluster: str, folder: Path) -> None:
    spec.folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        spec.folder / JOB_RECORD,
        {
            "job_id": job.job_id,
            "cluster": cluster,
            "submitit_folder": str(folder.resolve()),
            "submitted_unix_s": time.time(),
            "label": spec.label,
            "command": spec.command,
            "config_sha256": _config_sha256(spec),
            "settings": spec.settings,
            "collected": False,
        },
    )


def _other_work(spec: RunSpec) -> str | None:
    """What differs between the run ``spec`` asks for and the one the job recorded in its folder
    (``job.json``) was submitted for: the first argument of its command, else the first setting
    its results depend on (a record without them: its config file's digest); None: the same."""
    record = _job_record(spec.folder) or {}
    command = record.get("command")
    if isinstance(command, list) and command != spec.command:
        for i, (was, now) in enumerate(zip(command, spec.command, strict=False)):
            if was != now:
                option = f"{command[i - 1]} " if i and command[i - 1].startswith("--") else ""
                return f"{option}{was} (now {now})"
        return f"the command {' '.join(command)} (now {' '.join(spec.command)})"
    settings = record.get("settings")
    if isinstance(settings, str):
        return settings_difference(json.loads(settings), json.loads(spec.settings))
    if "config_sha256" in record and record["config_sha256"] != _config_sha256(spec):
        return f"another config ({spec.config_file} has changed since)"
    return None


def _uncollected_record(spec: RunSpec) -> dict[str, Any] | None:
    """``spec.folder``'s job record when a job of this same command and config wrote it and no
    batch has collected the job (None otherwise)."""
    record = _job_record(spec.folder)
    if (
        record is None
        or record.get("collected") is not False
        or record.get("command") != spec.command
        or record.get("config_sha256") != _config_sha256(spec)
    ):
        return None
    return record


def uncollected(spec: RunSpec) -> bool:
    """Whether a job of this same command and config has completed the run in ``spec.folder``
    (its files in place or in the run's ``.completed`` copy) and no batch has collected it."""
    return (
        _uncollected_record(spec) is not None
        and RunPaths(spec.folder).completed_manifest(copy=True) is not None
    )


def _restore_uncollected(spec: RunSpec, log: Log) -> dict[str, Any] | None:
    """The manifest of the completed run in ``spec.folder``: as it is, or with its removed files
    put back when it is :func:`uncollected` (None: the folder holds no completed run of this
    spec)."""
    paths = RunPaths(spec.folder)
    manifest = paths.completed_manifest()
    if manifest is not None or (record := _uncollected_record(spec)) is None:
        return manifest
    try:
        copied = RunManifest.read(paths.completed_copy / paths.manifest.name)
        # an earlier run's copy (another length, seed or setting) is not this run
        same = copied is not None and copied.same_run(spec.planned) is None
    except ValueError:  # a copy cut short, or a config it records no longer valid
        return None
    if not same:
        return None
    manifest = paths.restore_completed()
    if manifest is not None:
        log(
            f"{spec.label}: completed by job {record.get('job_id')} while no workflow waited "
            f"for it; its files, which the workflow removed since, are back from "
            f"{paths.completed_copy}"
        )
    return manifest


def _collect(specs: Sequence[RunSpec], log: Log) -> None:
    """Mark every run of a finished batch collected; a completed run's removed files are first
    put back (the job completed between a restarted workflow's check and its cleanup)."""
    for spec in specs:
        if _restore_uncollected(spec, log) is None:
            raise JobFailed(f"{spec.label}: the job ended; {spec.folder} holds no completed run")
        record = _job_record(spec.folder)
        if record is not None and record.get("collected") is False:
            write_json_atomic(spec.folder / JOB_RECORD, {**record, "collected": True})


def _wait_for_release(folders: Sequence[Path], timeout_s: float, poll_s: float) -> None:
    """Wait until no attempt holds these run folders (a cancelled job saving its checkpoint)."""
    deadline = time.monotonic() + timeout_s
    for folder in folders:
        while (holder := lock_holder(folder)) is not None:
            if time.monotonic() > deadline:
                job = holder.get("slurm_job_id") or f"pid {holder.get('pid')}"
                raise JobFailed(
                    f"{folder}: another attempt ({job} on {holder.get('host')}) still writes this "
                    f"run after {timeout_s:g} s; cancel it, then run the same command again"
                )
            time.sleep(min(poll_s, 1.0))


class _Stop(BaseException):
    """A stop signal arrived while the batch was waited for. A ``BaseException``, like
    ``KeyboardInterrupt``: raised inside submitit's ``sacct`` call, an ``Exception`` was taken
    for a failed call there ("Bypassing sacct error") and the Ctrl-C was lost."""


def _stop(signum: int, frame: FrameType | None) -> None:
    """Raise :class:`_Stop`: a stop signal arrived while the batch was waited for."""
    raise _Stop(signal.Signals(signum).name)


def _asked(config: Config) -> str:
    """What a GPU job of ``config.workload.size`` asks Slurm for, with the settings that say
    so (a rejection by sbatch names none of them)."""
    size = config.workload.size
    job = config.job_resources(size)
    gpus = f"{job.gpus} GPU(s)" + (f" of type {job.gpu_type}" if job.gpu_type else "")
    parts = [gpus] + [
        text
        for value, text in (
            (job.cpus_per_task, f"{job.cpus_per_task} CPUs"),
            (job.mem_gb, f"{job.mem_gb:g} GB"),
            (job.timeout_min, f"{job.timeout_min} min"),
            (job.qos, f"qos {job.qos}"),
            (job.constraint, f"constraint {job.constraint}"),
        )
        if value
    ]
    where = ", ".join(
        f"{name} {value}"
        for name, value in (
            ("partition", config.launch.slurm_partition),
            ("account", config.launch.slurm_account),
        )
        if value
    )
    return (
        f"{', '.join(parts)}{f' on {where}' if where else ''} (launch.job, run_sizes[{size}].job "
        "and launch.slurm_partition / slurm_account)"
    )


def _check_other_run(spec: RunSpec, log: Log) -> None:
    """Before anything is queued: a folder holding another run (completed or not) is refused
    as the run itself would refuse it, in one line naming what differs, or with
    ``spec.replace_other`` cleared with a note (a completed run of other settings was taken
    for this one, and an unfinished one was found only by the job, after its queue wait).

    Raises:
        JobFailed: the folder holds another run, or a manifest that cannot be read.
    """
    paths = RunPaths(spec.folder)
    try:
        old = RunManifest.read(paths.manifest)
        difference = None if old is None else old.same_run(spec.planned)
    except ValueError as error:  # an unreadable manifest or recorded config
        raise JobFailed(f"{spec.label}: {error}") from None
    if difference is None:
        return
    if not spec.replace_other:
        raise JobFailed(another_run(spec.folder, difference))
    log(f"{spec.label}: {spec.folder} held another run ({difference}); discarded it")
    with RunLock(spec.folder):
        paths.clear()
    (spec.folder / JOB_RECORD).unlink(missing_ok=True)


def start_batch(
    config: Config, specs: Sequence[RunSpec], submitit_folder: Path, name: str, log: Log = print
) -> dict[int, Any]:
    """Reattach or submit every run of ``specs`` without waiting; new jobs are named ``name``
    (``grpo-power-<size>-<arm>`` and the like, what ``sacct`` shows).

    Returns, per index of ``specs``, the completed run's manifest or its job.
    """
    handles: dict[int, Any] = {}
    pending: list[int] = []
    for index, spec in enumerate(specs):
        job = live_job(spec.folder)
        if job is not None and (other := _other_work(spec)) is not None:
            raise JobFailed(  # its run is not the one asked for, and it still writes the folder
                f"{spec.label}: job {job.job_id} ({job.state}) still runs {spec.folder} with "
                f"{other}; wait for it to end or cancel it (scancel {job.job_id}), then run "
                "this again"
            )
        if job is None:
            _check_other_run(spec, log)
        # a job still queued or running has not completed this run: only its own files count
        manifest = (
            _restore_uncollected(spec, log)
            if job is None
            else RunPaths(spec.folder).completed_manifest()
        )
        if manifest is not None:
            log(f"{spec.label}: already completed in {spec.folder}")
            handles[index] = manifest
        elif job is not None:
            log(f"{spec.label}: reattached to job {job.job_id} ({job.state})")
            handles[index] = job
        else:
            pending.append(index)
    if not pending:
        return handles
    launch = config.launch
    _wait_for_release(
        [specs[i].folder for i in pending],
        launch.checkpoint_grace_s + RELEASE_MARGIN_S,
        launch.poll_s,
    )
    for i in pending:
        # a completed copy left here is an earlier run's, which the new job replaces: were
        # this job cancelled before it ran, a restart must not put that run back as its own
        RunPaths(specs[i].folder).discard_completed_copy()
    executor = make_executor(config, submitit_folder, name)
    runner = RunJob(launch.checkpoint_grace_s)
    cluster = resolve_cluster(launch)
    try:
        if len(pending) == 1:
            spec = specs[pending[0]]
            jobs = [executor.submit(runner, spec.command, spec.folder)]
        else:
            chosen = [specs[i] for i in pending]
            jobs = executor.map_array(
                runner, [s.command for s in chosen], [s.folder for s in chosen]
            )
    except submitit.core.utils.FailedJobError as error:
        raise SubmitRefused(
            f"could not submit {len(pending)} run(s): {' '.join(str(error).split())}; "
            f"asked for {_asked(config)}"
        ) from None
    kind = "a job array" if len(jobs) > 1 else "a job"
    log(f"submitted {len(jobs)} run(s) as {kind} ({cluster})")
    for index, job in zip(pending, jobs, strict=True):
        _record(specs[index], job, cluster, submitit_folder)
        log(f"{specs[index].label}: job {job.job_id}")
        handles[index] = job
    return handles


def _refresh(jobs: Iterable[submitit.Job]) -> None:
    """Ask the cluster for the jobs' states now, once for all (one ``sacct``): submitit's own
    view is refreshed ever less often as its jobs age (every half their age, up to 10 min), so a
    job that had ended was noticed minutes late, and a failure named a state sacct had left
    ("failed (RUNNING)"); the outcome now reads this poll's state. A job submitit has set aside
    as finished in a state that is not (SUSPENDED: submitit 1.5.4 asks no more about it, so its
    resumption was never seen) is asked about again. Where the cluster does not answer, the
    cached view stands."""
    watchers = {}
    for job in jobs:
        watcher = getattr(job, "watcher", None)
        if watcher is None:
            continue
        watchers[id(watcher)] = watcher
        if job.state in LIVE_STATES:
            getattr(watcher, "_finished", set()).discard(job.job_id)
    for watcher in watchers.values():
        try:
            watcher.update()
        except Exception:  # a local job's watcher has none; sacct failing: the cached view
            continue


NOT_REQUEUED = re.compile(r"Job not requeued because: (.+?)\.?$", re.M)  # submitit's words


def _reason(error: Exception, stderr: str) -> str:
    """Why a job failed, in one line: the run's own ``error: ...`` line on its stderr, else
    submitit's account up to the error stream it quotes (``... has not produced any output
    (state: FAILED)``; its first line named only the result file), else its last line (a
    traceback's exception); a job submitit would not requeue (timed out too often) says so and
    what to raise."""
    own = [line for line in stderr.splitlines() if line.startswith("error: ")]
    if own:
        return own[-1].removeprefix("error: ")
    requeue = NOT_REQUEUED.search(f"{error}\n{stderr}")
    if requeue:  # submitit's own end of a job it would not requeue, deep in its traceback
        why = requeue.group(1)
        if "too many times" not in why:
            return f"submitit did not requeue it: {why}"
        return (
            f"submitit did not requeue it: {why}: every attempt reached the job's time limit "
            "(timeout_min of launch.job or of its run_sizes entry's job) and launch.max_timeouts "
            "requeues were spent; raise timeout_min (or max_timeouts), and the same command "
            "resumes from the run's checkpoint"
        )
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    head = []
    for line in lines:
        if line.startswith(("Error stream", "----")):
            break
        head.append(line)
    if len(head) > 1 or not lines:
        return " ".join(head)
    return lines[-1]


def _outcome(job: submitit.Job) -> tuple[Any, str | None]:
    try:
        return job.result(), None
    except Exception as error:  # submitit raises FailedJobError / UncompletedJobError
        tail = stderr_tail(job)
        return None, (
            f"job {job.job_id} failed ({job.state}): {_reason(error, tail)}\n"
            f"--- tail of the job's stderr ---\n{tail}"
        )


def wait_batch(
    config: Config, specs: Sequence[RunSpec], handles: dict[int, Any], log: Log = print
) -> list[dict[str, Any]]:
    """Wait for every job of a batch; return the runs' manifests in the order of ``specs``.

    Raises:
        JobFailed: one or more jobs failed (every failure is in the message).
        RunsInterrupted: SIGINT or SIGTERM arrived (the jobs were cancelled or kept).
    """
    jobs = {i: h for i, h in handles.items() if isinstance(h, submitit.Job)}
    states: dict[int, str] = {}
    try:
        with handling((signal.SIGINT, signal.SIGTERM), _stop):
            while True:
                _refresh(jobs.values())
                for index, job in jobs.items():
                    state = job.state
                    if state != states.get(index):
                        log(f"{specs[index].label}: job {job.job_id}: {state}")
                        states[index] = state
                if all(_finished(job) for job in jobs.values()):
                    break
                time.sleep(config.launch.poll_s)
    except (_Stop, KeyboardInterrupt) as stop:
        _interrupted(config, specs, jobs, str(stop) or "SIGINT", log)
    results: dict[int, Any] = {i: h for i, h in handles.items() if i not in jobs}
    failures = []
    for index, job in jobs.items():
        results[index], failure = _outcome(job)
        if failure:
            failures.append(f"{specs[index].label}: {failure}")
    if failures:
        raise JobFailed("\n".join(failures))
    _collect(specs, log)
    return [results[i] for i in range(len(specs))]


def _interrupted(
    config: Config, specs: Sequence[RunSpec], jobs: dict[int, submitit.Job], name: str, log: Log
) -> None:
    """Cancel (or keep) the batch's unfinished jobs, then raise :class:`RunsInterrupted`."""
    live = {i: job for i, job in jobs.items() if not _finished(job)}
    ids = ", ".join(job.job_id for job in live.values()) or "none"
    if config.launch.on_interrupt == "keep":
        raise RunsInterrupted(
            f"{name}: left job(s) {ids} running (launch.on_interrupt: keep); run the same "
            "command again to reattach"
        )
    for job in live.values():
        job.cancel(check=False)  # Slurm's SIGTERM: each run saves a checkpoint and exits
    log(f"{name}: cancelled job(s) {ids}; waiting for their runs to save a checkpoint")
    _wait_for_release(
        [specs[i].folder for i in live],
        config.launch.checkpoint_grace_s + RELEASE_MARGIN_S,
        config.launch.poll_s,
    )
    raise RunsInterrupted(
        f"{name}: cancelled job(s) {ids} (launch.on_interrupt: cancel); their runs saved a "
        "checkpoint: run the same command again to resume them"
    )


def submit_batch(
    config: Config, specs: Sequence[RunSpec], submitit_folder: Path, name: str, log: Log = print
) -> list[dict[str, Any]]:
    """:func:`start_batch`, then :func:`wait_batch`: the runs' manifests, in order."""
    handles = start_batch(config, specs, submitit_folder, name, log)
    return wait_batch(config, specs, handles, log)
