"""What the fleet stage reads: each run's ``bins.parquet`` (checked, with its metadata), or
several of them that hold the same GPUs at different times (:mod:`.same_gpus`), and a job's
series of energy per bin where all its GPUs have data."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from grpo_power.layout import BINS_METADATA_KEY, RUN, WINDOWS
from grpo_power.stage_files import require_keys


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
        return bool(self.info.get("simulated"))

    @property
    def bin_s(self) -> float:
        return float(self.info["bin_s"])

    @property
    def bin_range(self) -> tuple[int, int] | None:
        r = self.info.get("bin_range")
        return None if r is None else (int(r[0]), int(r[1]))


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
    required = ("run_id", "n_gpus", "nameplate_w", "bin_s")
    require_keys(info, required, f"{path}: {BINS_METADATA_KEY.decode()} metadata", expected)
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

    ``per_gpu_j`` (GPUs x bins) is kept to build a job cut to fewer GPUs.
    """

    run_id: str
    nameplate_w: float
    per_gpu_j: np.ndarray
    joins: int
    _total_j: np.ndarray | None = None
    _spectrum: np.ndarray | None = None
    _partial: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def n_gpus(self) -> int:
        return self.per_gpu_j.shape[0]

    @property
    def length(self) -> int:
        return self.per_gpu_j.shape[1]

    def series(self, gpus: int | None = None) -> np.ndarray:
        """Summed energy per bin of all GPUs, or of the first ``gpus`` of them, J."""
        if gpus is None or gpus >= self.n_gpus:
            if self._total_j is None:
                self._total_j = self.per_gpu_j.sum(axis=0)
            return self._total_j
        if gpus not in self._partial:
            self._partial[gpus] = self.per_gpu_j[:gpus].sum(axis=0)
        return self._partial[gpus]

    def spectrum(self) -> np.ndarray:
        """Real FFT of the summed series (cached)."""
        if self._spectrum is None:
            self._spectrum = np.fft.rfft(self.series())
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
                slot = np.full(max(part.info["gpus"]) + 1, -1, dtype=np.int64)
                for gpu, uuid in zip(part.info["gpus"], part.info["gpu_uuids"], strict=True):
                    slot[gpu] = run.info["gpu_uuids"].index(uuid)
                values = slot[values]
            read[name].append(values)
    return {  # one file's columns as they are read: no copy
        name: arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
        for name, arrays in read.items()
    }


def load_job_source(run: RunBins) -> JobSource:
    """Read a run's bins and keep the bins where all its GPUs have data, in time order."""
    rows = read_bins(run, ("bin", "gpu", "energy_j"))
    return job_source_from_bins(
        run.run_id,
        run.nameplate_w,
        rows["bin"],
        rows["gpu"],
        rows["energy_j"],
        run.bin_s,
        str(run.path),
    )


def job_source_from_bins(
    run_id: str,
    nameplate_w: float,
    index: np.ndarray,
    gpu: np.ndarray,
    energy: np.ndarray,
    bin_s: float,
    where: str,
) -> JobSource:
    """A run's (bin, gpu, energy_j) rows as a job source: the bins where all its GPUs have data,
    in time order, gaps removed (``where`` names the file in errors)."""
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
    per_gpu = np.zeros((len(gpus), len(complete)))
    slot = np.searchsorted(gpus, gpu)
    position = np.full(size, -1, dtype=np.int64)
    position[complete] = np.arange(len(complete))
    where = position[rel]
    keep = where >= 0
    per_gpu[slot[keep], where[keep]] = energy[keep]
    joins = int(np.count_nonzero(np.diff(complete) > 1))
    return JobSource(run_id, nameplate_w, per_gpu, joins)
