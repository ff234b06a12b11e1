"""Record the power of the GPUs while a command runs (``grpo-power telemetry record``)."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from tqdm import tqdm

from grpo_power.config import Config
from grpo_power.signal_handlers import handling
from grpo_power.telemetry.factory import open_source
from grpo_power.telemetry.sampler import PowerSampler
from grpo_power.telemetry.schema import TraceMetadata
from grpo_power.telemetry.signals import SIGNAL_FILE_ENV, WorkloadSignal
from grpo_power.telemetry.source import PowerSource
from grpo_power.telemetry.store import TraceWriter


def trace_metadata(
    source: PowerSource, run_id: str, period_s: float, **extra: object
) -> TraceMetadata:
    """Trace metadata describing ``source``'s GPUs."""
    first = source.gpus[0]
    return TraceMetadata(
        run_id=run_id,
        source=source.kind,  # type: ignore[arg-type]
        gpu_name=first.name,
        nameplate_w=first.nameplate_w,
        sample_period_s=period_s,
        simulated=source.kind == "simulated",
        gpus=[g.index for g in source.gpus],
        gpu_uuids={str(g.index): g.uuid for g in source.gpus if g.uuid},
        power_w_semantics=source.power_w_semantics,
        **extra,
    )


# Signals that would end the recorder: passed on to the recorded command instead (SIGINT comes
# as KeyboardInterrupt and is passed on too).
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class Recording:
    """What :func:`record_command` produced; ``returncode`` is the command's as
    :class:`subprocess.Popen` gives it (-N where signal N killed it)."""

    trace_path: Path
    returncode: int
    samples: int
    missed_slots: int

    @property
    def exit_code(self) -> int:
        """The command's exit status as a shell gives it: its exit code, or 128 + N where
        signal N killed it."""
        return 128 - self.returncode if self.returncode < 0 else self.returncode

    @property
    def outcome(self) -> str:
        """How the command ended, in words: ``exited with 3``, ``was killed by SIGKILL``."""
        if self.returncode >= 0:
            return f"exited with {self.returncode}"
        try:
            name = signal.Signals(-self.returncode).name
        except ValueError:  # a real-time signal has no name
            name = f"signal {-self.returncode}"
        return f"was killed by {name}"


def record_command(
    command: list[str],
    out: Path,
    config: Config,
    show_progress: bool = True,
    on_source: Callable[[PowerSource], None] | None = None,
) -> Recording:
    """Run ``command`` (an argument list, never a shell string) while sampling power into ``out``.

    The command can drive the simulated GPU through the signal file named in the
    ``GRPO_POWER_SIGNAL_FILE`` environment variable (see :mod:`grpo_power.telemetry.signals`).
    Ctrl-C, SIGTERM and SIGHUP are passed on to the command, which the recording then waits
    for; the trace is closed properly in every case but SIGKILL (which leaves its journal).
    ``on_source`` is called with the opened power source before the command starts.
    """
    if not command:
        raise ValueError("no command to record: put it after `--`, e.g. `-- python train.py`")
    if shutil.which(command[0]) is None:  # before any file or folder of the recording is made
        if "/" in command[0] and Path(command[0]).exists():  # there, but not to be run
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command[0])
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command[0])
    period_s = config.telemetry.period_s
    with tempfile.TemporaryDirectory(prefix="grpo-power-") as tmp:
        signal_file = Path(tmp) / "signal.json"
        workload_signal = WorkloadSignal(signal_file)
        source = open_source(config, workload_signal)
        if on_source is not None:
            on_source(source)
        metadata = trace_metadata(
            source, run_id=f"record-{uuid.uuid4().hex[:8]}", period_s=period_s, command=command
        )
        sampler = PowerSampler(
            source, TraceWriter(out, metadata), period_s=period_s, flush_s=config.telemetry.flush_s
        )
        env = dict(os.environ, **{SIGNAL_FILE_ENV: str(signal_file)})
        sampler.start()
        try:
            process = subprocess.Popen(command, env=env)
        except OSError:  # nothing ran: no recording is left (exit 2, "nothing written")
            sampler.stop()
            out.unlink(missing_ok=True)
            raise

        def forward(signum: int, frame: FrameType | None) -> None:
            process.send_signal(signum)

        with handling(FORWARDED_SIGNALS, forward):
            try:
                with tqdm(
                    desc="recording", unit="sample", disable=not show_progress, leave=False
                ) as bar:
                    while True:
                        try:  # returns as the command exits: the recording ends with it
                            process.wait(timeout=0.5)
                            break
                        except subprocess.TimeoutExpired:
                            pass
                        recent = sampler.recent(1.0)
                        bar.n = sampler.samples_taken
                        if len(recent.power_w):
                            bar.set_postfix(mean_power_w=f"{recent.power_w.mean():.0f}")
            except KeyboardInterrupt:
                process.send_signal(signal.SIGINT)
                process.wait()
            finally:
                sampler.stop()
        if sampler.error is not None:
            raise RuntimeError(f"the power sampler failed: {sampler.error}") from sampler.error
        return Recording(out, process.returncode, sampler.samples_taken, sampler.missed_slots)
