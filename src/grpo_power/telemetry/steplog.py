"""The step log (docs/design.md section 7): one row per GRPO step, written as the run goes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from grpo_power.atomic import write_parquet_atomic
from grpo_power.journal import ParquetJournal, earlier_path, read_journaled, seal_journal

STEP_LOG_SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("start_s", pa.float64()),  # s since run start (the trace's clock)
        ("end_s", pa.float64()),
        ("generate_s", pa.float64()),
        ("score_s", pa.float64()),
        ("train_s", pa.float64()),
        ("generate_calls", pa.int64()),
        ("train_chunks", pa.int64()),  # forward/backward chunks of the training pass
        ("sequences", pa.int64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("max_completion_tokens", pa.int64()),
        ("tokens_per_s", pa.float64()),  # completion tokens / step wall time
        ("reward_mean", pa.float64()),
        ("num_generations", pa.int64()),
        # telemetry health: a step taken in fail-safe held the fixed-safe setting
        ("failsafe", pa.bool_()),
        ("telemetry_age_s", pa.float64()),
        # actuators: requested by the controller, applied (after clamping), clamped or not
        ("action_concurrency", pa.int64()),
        ("concurrency", pa.int64()),
        ("clamped_concurrency", pa.bool_()),
        ("action_max_new_tokens", pa.int64()),
        ("max_new_tokens", pa.int64()),
        ("clamped_max_new_tokens", pa.bool_()),
        ("action_train_micro_batch", pa.int64()),
        ("train_micro_batch", pa.int64()),
        ("clamped_train_micro_batch", pa.bool_()),
        ("action_pause_s", pa.int64()),
        ("pause_s", pa.int64()),
        ("clamped_pause_s", pa.bool_()),
        # the controller's observation before the step
        ("obs_mean_power_w", pa.float64()),
        ("obs_p95_power_w", pa.float64()),
        ("obs_max_power_w", pa.float64()),
        ("obs_share_above_cap", pa.float64()),
        ("obs_concurrency", pa.int64()),
        ("obs_max_new_tokens", pa.int64()),
        ("obs_tokens_per_s", pa.float64()),
        ("obs_cap_w", pa.float64()),
        ("obs_samples", pa.int64()),
        ("obs_train_micro_batch", pa.int64()),
        ("obs_pause_s", pa.int64()),
        ("obs_run_share_above_cap", pa.float64()),
        ("obs_run_samples", pa.int64()),
    ]
)
STEP_LOG_COLUMNS = tuple(STEP_LOG_SCHEMA.names)
# Columns of the training-chunk and pause actuators and of the run's violation share: step logs
# written before them lack them.
LATER_COLUMNS = frozenset(
    f"{prefix}{name}"
    for name in ("train_micro_batch", "pause_s")
    for prefix in ("action_", "", "clamped_", "obs_")
) | {"train_chunks", "obs_run_share_above_cap", "obs_run_samples"}


class StepLogWriter(ParquetJournal):
    """Appends step rows; a killed run keeps every step written before the kill.

    Rows follow those of the run's earlier attempts, if it was resumed; a step already there
    is not written twice.
    """

    def __init__(
        self,
        path: Path | str,
        run_id: str,
        simulated_power: bool,
        start_unix_s: float | None = None,
    ) -> None:
        """``start_unix_s``: the wall clock at the run's t = 0, which ``start_s`` and ``end_s``
        count from (the trace's ``start_unix_s``); kept in the metadata where given."""
        metadata = {b"run_id": run_id.encode(), b"simulated_power": str(simulated_power).encode()}
        if start_unix_s is not None:
            metadata[b"start_unix_s"] = repr(float(start_unix_s)).encode()
        super().__init__(path, STEP_LOG_SCHEMA.with_metadata(metadata), append_key="step")


def trim_step_log(path: Path, last_step: int) -> list[int]:
    """Seal what the last attempt left, then drop the rows of steps after ``last_step`` (a
    resumed run redoes them); return their numbers. Atomic; safe to repeat."""
    seal_journal(path, key="step")
    path = earlier_path(path)
    if not path.exists():
        return []
    table = pq.read_table(path)
    steps = table.column("step")
    later = pc.greater(steps, last_step)
    dropped = table.filter(later).column("step").to_pylist()
    if dropped:
        kept = table.filter(pc.invert(later))
        write_parquet_atomic(path, kept, table.schema.metadata)
    return dropped


def read_step_log(path: Path | str) -> pd.DataFrame:
    """A step log (or the journal of a killed run) as a DataFrame; errors name the file."""
    table, _ = read_journaled(path)
    missing = [
        c for c in STEP_LOG_COLUMNS if c not in table.column_names and c not in LATER_COLUMNS
    ]
    if missing:
        raise ValueError(f"{path}: missing step-log column(s) {missing}")
    return table.to_pandas()


def decode_columns(t_s: np.ndarray, steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The trace columns ``concurrency`` and ``tokens_per_s`` at sample times ``t_s`` (the
    trace's clock) from a step log: inside a step's generation window, the sequences decoded
    together (its concurrency, at most its sequences) and its completion tokens over its
    generation time; NaN outside generation (the step log does not say what decodes then)."""
    t_s = np.asarray(t_s, dtype=float)
    start = steps["start_s"].to_numpy(float)
    end = start + steps["generate_s"].to_numpy(float)
    step = np.searchsorted(start, t_s, side="right") - 1
    inside = (step >= 0) & (t_s < end[np.maximum(step, 0)])
    occupancy = np.minimum(steps["concurrency"], steps["sequences"]).to_numpy(float)
    rate = steps["completion_tokens"].to_numpy(float) / np.maximum(
        steps["generate_s"].to_numpy(float), 1e-9
    )
    index = np.maximum(step, 0)
    return (
        np.where(inside, occupancy[index], np.nan),
        np.where(inside, rate[index], np.nan),
    )
