"""What the fleet stage reads: each run's ``bins.parquet`` (checked, with its metadata), or
several of them that hold the same GPUs at different times (:mod:`.same_gpus`), and a job's
series of energy per bin where all its GPUs have data."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from grpo_power.layout import BINS_METADATA_KEY, RUN, WINDOWS
from grpo_power.stage_files import require_data_label, require_keys


@dataclass(frozen=True)
class RunBins:
    """A run's ``bins.parquet`` and what its metadata says (nothing else is read); or, with
    ``parts``, the runs (logs) of one set of GPUs at different times, read as one run whose
    GPUs are numbered as ``info["gpu_uuids"]`` lists them (``path`` is the first part's)."""

    path: Path
    info: dict[str, Any]
    parts: tuple[RunBins, ...] = ()

    @property
    def files(self) -> tuple[RunBins, ...]:
        """The runs whose files hold this run's bins: its parts, or itself."""
        return self.parts or (self,)

    @property
    def run_id(self) -> str:
        return str(self.info["run_id"])

    @property
    def n_gpus(self) -> int:
        return int(self.info["n_gpus"])

    @property
    def nameplate_w(self) -> float:
        return float(self.info["nameplate_w"])

    @property
    def simulated(self) -> bool:
        return bool(self.info["simulated"])

    @property
    def bin_s(self) -> float:
        return float(self.info["bin_s"])

    @property
    def bin_range(self) -> tuple[int, int] | None:
        r = self.info.get("bin_range")
        return None if r is None else (int(r[0]), int(r[1]))

    @property
    def complete_bins(self) -> int | None:
        """Bins holding a reading of every GPU of the run (None: a windows output written
        before the count was kept)."""
        n = self.info.get("complete_bins")
        return None if n is None else int(n)


def bins_path(path: Path | str) -> Path:
    """``path`` itself if it is a file, else ``path/bins.parquet`` (a windows output folder)."""
    path = Path(path)
    return path / WINDOWS.bins if path.is_dir() else path


def read_run_bins(path: Path | str) -> RunBins:
    """Open a windows-stage ``bins.parquet`` (or its folder) and read its metadata."""
    given = Path(path)
    path = bins_path(path)
    if not path.exists() and (given / RUN.trace).exists():
        raise FileNotFoundError(
            f"{given}: a run folder (it holds trace.parquet), not a windows output; run "
            f"`grpo-power windows {given / 'trace.parquet'} --out DIR` first and pass DIR"
        )
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no such file; run `grpo-power windows TRACE --out DIR` first and pass DIR "
            "or DIR/bins.parquet"
        )
    try:
        schema = pq.read_schema(path)
    except Exception as error:  # pyarrow raises several types for a non-Parquet file
        raise ValueError(f"{path}: not a readable Parquet file ({error})") from None
    raw = (schema.metadata or {}).get(BINS_METADATA_KEY)
    if raw is None and {"t", "gpu", "power_w"} <= set(schema.names):
        raise ValueError(
            f"{path}: a trace, not a windows-stage bins file; expected the bins.parquet written "
            f"by `grpo-power windows`: run `grpo-power windows {path.name} --out DIR` first and "
            "pass DIR"
        )
    if raw is None:
        raise ValueError(
            f"{path}: not a windows-stage bins file (no '{BINS_METADATA_KEY.decode()}' "
            "metadata); expected the bins.parquet written by `grpo-power windows`"
        )
    expected = "the bins.parquet written by `grpo-power windows`"
    try:
        info = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path}: {BINS_METADATA_KEY.decode()} metadata: expected {expected}, got invalid "
            f"JSON ({error.msg})"
        ) from None
    if not isinstance(info, dict):
        raise ValueError(f"{path}: {BINS_METADATA_KEY.decode()} metadata: expected a JSON object")
    required = ("run_id", "n_gpus", "nameplate_w", "bin_s", "simulated", "gpu_indices")
    require_keys(info, required, f"{path}: {BINS_METADATA_KEY.decode()} metadata", expected)
    where = f"{path}: {BINS_METADATA_KEY.decode()} metadata"
    require_data_label(info, where, "whether the power is simulated")
    missing = [n for n in ("bin", "gpu", "energy_j") if n not in schema.names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; expected bin, gpu, energy_j")
    return RunBins(path=path, info=info)


def check_compatible(runs: Sequence[RunBins], bin_s: float) -> None:
    """All runs must share the configured bin width (windows are whole bins)."""
    if not runs:
        raise ValueError("no runs given to the fleet stage")
    for run in runs:
        if abs(run.bin_s - bin_s) > 1e-12 * bin_s:
            raise ValueError(
                f"{run.path}: bins of {run.bin_s} s, but windows.bin_s is {bin_s} s; rerun the "
                "windows stage with the same config"
            )


@dataclass
class JobSource:
    """One run as a Monte Carlo source: its GPUs' summed energy per bin, gaps removed.

    Only the sum over all its GPUs is held (a node-week of 8 GPUs at 0.5 s bins: 9.7 MB, not
    the 77 MB of its per-GPU bins). A job cut to its first ``k`` GPUs, which a draw needs at
    most once, asks ``first_gpus_j(k)``: a run's file is then read again.
    """

    run_id: str
    nameplate_w: float
    n_gpus: int
    total_j: np.ndarray
    joins: int
    first_gpus_j: Callable[[int], np.ndarray] = field(repr=False)  # energy of the first k GPUs
    _spectrum: np.ndarray | None = None
    _cut: tuple[int, np.ndarray] | None = None

    @classmethod
    def from_per_gpu(
        cls, run_id: str, nameplate_w: float, per_gpu_j: np.ndarray, joins: int = 0
    ) -> JobSource:
        """A source from its energy per GPU and bin held in memory (GPUs x bins, J)."""
        return cls(
            run_id,
            nameplate_w,
            per_gpu_j.shape[0],
            per_gpu_j.sum(axis=0),
            joins,
            lambda gpus: per_gpu_j[:gpus].sum(axis=0),
        )

    @property
    def length(self) -> int:
        return len(self.total_j)

    def series(self, gpus: int | None = None) -> np.ndarray:
        """Summed energy per bin of all GPUs, or of the first ``gpus`` of them, J (the last
        cut asked for is kept: a fleet of one size cuts the same source the same way)."""
        if gpus is None or gpus >= self.n_gpus:
            return self.total_j
        if self._cut is None or self._cut[0] != gpus:
            self._cut = (gpus, self.first_gpus_j(gpus))
        return self._cut[1]

    def spectrum(self) -> np.ndarray:
        """Real FFT of the summed series (cached)."""
        if self._spectrum is None:
            self._spectrum = np.fft.rfft(self.total_j)
        return self._spectrum


def read_bins(
    run: RunBins, columns: Sequence[str], filters: list[tuple[str, str, int]] | None = None
) -> dict[str, np.ndarray]:
    """``columns`` of a run's (bin, gpu, energy_j) rows (``filters`` as pyarrow's), from its
    file or from each of its parts, whose GPUs are then numbered as the run numbers them."""
    read: dict[str, list[np.ndarray]] = {name: [] for name in columns}
    for part in run.files:
        table = pq.read_table(part.path, columns=list(columns), filters=filters)
        for name in columns:
            values = table.column(name).to_numpy()
            if name == "gpu" and run.parts:
                slot = np.full(max(part.info["gpu_indices"]) + 1, -1, dtype=np.int64)
                for gpu, uuid in zip(part.info["gpu_indices"], part.info["gpu_uuids"], strict=True):
                    slot[gpu] = run.info["gpu_uuids"].index(uuid)
                values = slot[values]
            if name == "energy_j":
                _check_energy(values, part.path)
            read[name].append(values)
    return {  # one file's columns as they are read: no copy
        name: arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        for name, arrays in read.items()
    }


def _check_energy(energy_j: np.ndarray, path: Path) -> None:
    """Raise a ValueError naming ``path`` unless every bin's energy is finite and >= 0 J."""
    bad = ~(np.isfinite(energy_j) & (energy_j >= 0))
    if bad.any():
        raise ValueError(
            f"{path}: energy_j: expected a finite energy >= 0 J in every bin, got "
            f"{energy_j[bad][0]!r} in {int(bad.sum()):,} of {len(energy_j):,} rows"
        )


def load_job_source(run: RunBins) -> JobSource:
    """Read a run's bins and keep the sum over its GPUs of the bins where all of them have
    data, in time order (a cut to fewer GPUs reads the file again)."""

    def rows() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        read = read_bins(run, ("bin", "gpu", "energy_j"))
        return read["bin"], read["gpu"], read["energy_j"]

    return job_source_from_rows(run.run_id, run.nameplate_w, rows, run.bin_s, str(run.path))


Rows = tuple[np.ndarray, np.ndarray, np.ndarray]  # a run's (bin, gpu, energy_j) columns


def job_source_from_rows(
    run_id: str, nameplate_w: float, rows: Callable[[], Rows], bin_s: float, where: str
) -> JobSource:
    """A job source of the run whose (bin, gpu, energy_j) rows ``rows()`` returns (asked again
    for a job cut to fewer GPUs, so that they need not be held): :func:`complete_sum`;
    ``where`` names the file in errors."""

    def summed(gpus: int | None) -> tuple[np.ndarray, int, int]:
        return complete_sum(*rows(), bin_s, where, gpus)

    total_j, n_gpus, joins = summed(None)
    return JobSource(run_id, nameplate_w, n_gpus, total_j, joins, lambda gpus: summed(gpus)[0])


def complete_sum(
    index: np.ndarray,
    gpu: np.ndarray,
    energy: np.ndarray,
    bin_s: float,
    where: str,
    first_gpus: int | None = None,
) -> tuple[np.ndarray, int, int]:
    """(bin, gpu, energy_j) rows summed per bin over the bins where all the run's GPUs have
    data, in time order, gaps removed; over all GPUs, or over the ``first_gpus`` of them in
    GPU order. Returns (energy per bin J, the run's GPUs, joins at gaps); ``where`` names the
    file in errors."""
    if len(index) == 0:
        raise ValueError(
            f"{where}: the run has no complete bins (trace shorter than one {bin_s} s bin "
            "or cut by gaps everywhere)"
        )
    gpus = np.unique(gpu)
    lo = int(index.min())
    rel = index - lo
    size = int(rel.max()) + 1
    present = np.bincount(rel, minlength=size)
    complete = np.flatnonzero(present == len(gpus))
    if len(complete) == 0:
        raise ValueError(f"{where}: no bin where all {len(gpus)} GPUs have data")
    position = np.full(size, -1, dtype=np.int64)
    position[complete] = np.arange(len(complete))
    at = position[rel]
    del rel, position
    keep = at >= 0
    if first_gpus is not None:
        keep &= gpu < gpus[first_gpus]
    if not keep.all():  # else summed as read: no copy of the rows
        at, energy = at[keep], energy[keep]
    total_j = np.bincount(at, weights=energy, minlength=len(complete))
    joins = int(np.count_nonzero(np.diff(complete) > 1))
    return total_j, len(gpus), joins
