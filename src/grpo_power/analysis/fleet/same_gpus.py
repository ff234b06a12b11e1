"""Logs of the same GPUs: a planner's folder holds a node's logs as several files (a file a day,
a logger restarted, an export in chunks), and each GPU is one GPU of the fleet however many logs
hold it.

A GPU is known by its UUID where its trace names one (``gpu_uuids`` in the windows stage's bins
metadata: NVML, nvidia-smi's ``uuid``, DCGM's ``UUID``). Runs whose GPUs are all named, with the
same UUIDs, are one run of the fleet (:class:`~grpo_power.analysis.fleet.inputs.RunBins` with
``parts``): their bins read as one, the hours between them a gap. A run that holds some of
another's GPUs and no others (a day a GPU was lost or not exported) joins it, the GPUs it lacks
without readings over its time; runs that each hold GPUs the other lacks (a GPU replaced) stay
apart. A GPU in two runs at the same time is refused (one GPU logged twice: a copy of a log,
two loggers on one node), as the fleet would count its power twice. Runs without UUIDs, and
simulated runs, stay runs of their own. The fleet stage of the study never joins: its runs are
jobs composed into a fleet.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from grpo_power.analysis.fleet.inputs import RunBins, read_bins


def gpu_set(run: RunBins) -> frozenset[str] | None:
    """The UUIDs of a measured run's GPUs, or None where one of them has none."""
    uuids = run.info.get("gpu_uuids") or []
    if run.simulated or len(uuids) != run.n_gpus or not all(uuids):
        return None
    return frozenset(uuids)


@dataclass(frozen=True)
class SameGpus:
    """What :func:`join_same_gpus` made of the runs.

    ``runs``: the fleet's runs, those of one set of GPUs joined (in the order of their first);
    ``joined``: each join (``run_id``, ``logs``, ``gpus``); ``notes``: the joined runs that hold
    only some of the set's GPUs, and runs that share some GPUs but not all and stay apart (their
    shared GPUs count in each).
    """

    runs: list[RunBins]
    joined: list[dict[str, Any]]
    notes: list[str]


def join_same_gpus(runs: Sequence[RunBins]) -> SameGpus:
    """Join the runs that hold one set of GPUs at different times (see the module).

    Raises:
        ValueError: a GPU is in two runs over the same time (the message names both).
    """
    refuse_twice_logged(_bin_spans(runs))
    homes = _homes([gpu_set(run) for run in runs])
    groups: dict[frozenset[str] | int, list[RunBins]] = {}
    for i, run in enumerate(runs):
        key = homes.get(gpu_set(run))
        groups.setdefault(i if key is None else key, []).append(run)
    joined = [group[0] if len(group) == 1 else _joined(group) for group in groups.values()]
    records = [
        {"run_id": run.run_id, "logs": [p.run_id for p in run.parts], "gpus": run.n_gpus}
        for run in joined
        if run.parts
    ]
    notes = [
        f"{part.run_id!r} holds {part.n_gpus} of the {run.n_gpus} GPUs of {run.run_id!r} (by "
        "UUID): joined with the logs of them all, the others have no reading over its time"
        for run in joined
        for part in run.parts
        if part.n_gpus < run.n_gpus
    ]
    sets = [(run, gpu_set(run)) for run in joined]
    notes += [
        f"{a.run_id!r} and {b.run_id!r} share {len(sa & sb)} of their GPUs (by UUID) but not "
        "all, at different times: they stay separate runs, and the shared GPUs count in each"
        for i, (a, sa) in enumerate(sets)
        for b, sb in sets[i + 1 :]
        if sa is not None and sb is not None and sa & sb
    ]
    return SameGpus(joined, records, notes)


def _homes(sets: Sequence[frozenset[str] | None]) -> dict[frozenset[str], frozenset[str]]:
    """The set of GPUs each set's runs join: the one largest set that holds it (a log of a day
    a GPU was missing, lost or not exported, joins the logs of all of them), else itself (it
    is in two largest sets that each hold GPUs the other lacks: a GPU replaced)."""
    named = {s for s in sets if s is not None}
    largest = [s for s in named if not any(s < t for t in named)]
    homes = {}
    for s in named:
        holders = [t for t in largest if s <= t]
        homes[s] = holders[0] if len(holders) == 1 else s
    return homes


def _joined(group: Sequence[RunBins]) -> RunBins:
    """One run of the runs of one set of GPUs, in time order."""
    parts = tuple(sorted(group, key=lambda r: r.bin_range or (0, 0)))
    ranges = [p.bin_range for p in parts if p.bin_range is not None]
    first = parts[0]
    uuids = sorted(frozenset().union(*(gpu_set(p) or () for p in parts)))
    info = {
        **{k: first.info.get(k) for k in ("source", "data", "gpu_name", "bin_s")},
        "simulated": any(p.simulated for p in parts),
        "run_id": " + ".join(p.run_id for p in parts),
        "gpu_indices": list(range(len(uuids))),
        "gpu_uuids": uuids,
        "n_gpus": len(uuids),
        "nameplate_w": max(p.nameplate_w for p in parts),
        "start_unix_s": min(float(p.info.get("start_unix_s", 0.0)) for p in parts),
        "bin_range": [min(r[0] for r in ranges), max(r[1] for r in ranges)] if ranges else None,
        "model_size": None,
    }
    return RunBins(path=first.path, info=info, parts=parts)


@dataclass(frozen=True)
class GpuSpan:
    """When one log holds a GPU: its UUID, the first and last instant (unix s), the log's name
    and the file an error names."""

    uuid: str
    start_unix_s: float
    end_unix_s: float
    log: str
    where: str


def refuse_twice_logged(spans: Iterable[GpuSpan]) -> None:
    """Refuse a GPU that two logs hold over a common time (one logged twice would count its
    power twice in a fleet).

    Raises:
        ValueError: naming the later log's file, the GPU, both logs and the time they share.
    """
    by_uuid: dict[str, list[GpuSpan]] = {}
    for span in spans:
        by_uuid.setdefault(span.uuid, []).append(span)
    for uuid, found in by_uuid.items():
        found.sort(key=lambda span: (span.start_unix_s, span.end_unix_s))
        reach: GpuSpan | None = None  # the span that ends latest so far
        for span in found:
            if reach is not None and span.start_unix_s < reach.end_unix_s:
                end_s = min(span.end_unix_s, reach.end_unix_s)
                raise ValueError(
                    f"{span.where}: GPU {uuid} is in {span.log!r} and in {reach.log!r} over the "
                    f"same time ({_utc(span.start_unix_s)} to {_utc(end_s)} UTC): one GPU "
                    "logged twice (a copy of a log, two loggers on one node, exports that "
                    "overlap) would count its power twice in the fleet; expected each GPU's "
                    "samples in one log at a time: remove the copy, or cut the overlap"
                )
            if reach is None or span.end_unix_s > reach.end_unix_s:
                reach = span


def busy_spans(times: np.ndarray, gap: float) -> list[tuple[float, float]]:
    """The spans (first, last) over which ``times`` come at most ``gap`` apart: one log holds
    a GPU over each (a log of Monday and Wednesday concatenated holds it on neither Tuesday nor
    the night between). Empty where ``times`` is."""
    times = np.sort(np.asarray(times, dtype=np.float64))
    if not len(times):
        return []
    cuts = np.flatnonzero(np.diff(times) > gap) + 1
    return [(float(piece[0]), float(piece[-1])) for piece in np.split(times, cuts)]


def _bin_spans(runs: Sequence[RunBins]) -> Iterator[GpuSpan]:
    """Each measured run's named GPUs over its runs of consecutive bins (a bin's end is the
    next one's start)."""
    for run in runs:
        if run.simulated or run.bin_range is None or not any(run.info.get("gpu_uuids") or []):
            continue
        where = str(run.info.get("trace", run.path))
        rows = read_bins(run, ("bin", "gpu"))
        for gpu, uuid in zip(run.info["gpu_indices"], run.info["gpu_uuids"], strict=True):
            if not uuid:
                continue
            for lo, hi in busy_spans(rows["bin"][rows["gpu"] == gpu], gap=1):
                yield GpuSpan(uuid, lo * run.bin_s, (hi + 1) * run.bin_s, run.run_id, where)


def _utc(unix_s: float) -> str:
    """A unix time as ``YYYY-MM-DD HH:MM:SS``."""
    return datetime.fromtimestamp(unix_s, UTC).strftime("%Y-%m-%d %H:%M:%S")
