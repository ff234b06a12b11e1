"""Economics of a folder of traces: energy, cost, carbon and the value of oversubscription.

Per trace (and for all of them pooled): GPU energy from the trace (the energy counter where
present, else integrated power: :func:`~grpo_power.telemetry.summary.summarize_trace`) x PUE
(the GPUs' share of the facility's energy; the hosts' power is not in the traces, so not counted
here: the capital counts it, at its configured share per GPU), its cost and carbon, and a
fleet-year of ``economics.fleet_gpus`` GPUs drawing the trace's mean power
(:func:`grpo_power.economics.cost.per_run`, the economics stage's own arithmetic). Tokens are
not needed; where a trace has some (``tokens`` in the import's index: from its step log, or from
the engine metrics log aligned with it) the per-token figures are filled too. The value of
oversubscription comes from the planner's fleet
(:func:`grpo_power.economics.oversubscription.oversubscription_table`); the sensitivity
recomputes the pooled figures and that value at each end of ``economics.sensitivity``'s ranges
(:func:`grpo_power.economics.sensitivity.sensitivity`). Writes ``constants.csv``,
``traces.csv``, ``oversubscription.csv``, ``sensitivity.csv`` and ``summary.json`` into ``out``,
atomically."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_power.atomic import write_csv_atomic, write_json_atomic
from grpo_power.config import Config
from grpo_power.economics.cost import J_PER_KWH, Assumptions, part_notes, per_run
from grpo_power.economics.oversubscription import FleetRows, oversubscription_table
from grpo_power.economics.records import RECORD_COLUMNS
from grpo_power.economics.sensitivity import HEADLINE_COLUMNS, capital_row, sensitivity
from grpo_power.economics.stage import constants_table
from grpo_power.layout import PLANNER_ECONOMICS
from grpo_power.planner.discover import INDEX, INDEX_FILE
from grpo_power.planner.fleet import refuse_other_fleet
from grpo_power.stage_files import read_csv
from grpo_power.telemetry.store import read_trace
from grpo_power.telemetry.summary import summarize_trace

POOLED = "all traces"


def trace_records(
    traces_dir: Path, provenance: dict[str, Any] | None = None
) -> tuple[pd.DataFrame, float, list[dict[str, str]]]:
    """One economics record per imported trace (:data:`RECORD_COLUMNS`), and the pooled one;
    the GPUs' mean nameplate, W: the board power each is provisioned at (a fleet of A100s and
    H100s at the mean of their 400 W and 700 W, not at 700 W each); and the traces left out
    (``run_id``, ``reason``): one sample per GPU spans no time to price energy over, as the
    fleet leaves it out for holding no energy bin (it refused the whole folder).

    A record's ``gpus x wall_s`` is its GPU-seconds: the sum of each GPU's own time with energy
    (``wall_s`` the mean of them), so that a GPU whose readings stop (lost, not exported) is not
    counted at 0 W for the time it has none, nor is a gap between two days' logs. The pooled
    record is every trace's energy over every GPU's time (its power the GPU-time-weighted mean),
    its GPUs each counted once (a GPU known by its UUID in several traces is one GPU).

    ``provenance``, where given, is filled with where the nameplates came from
    (``nameplate_from``: :func:`nameplate_origin` of each trace, distinct) and the traces whose
    readings reach above their nameplate (``above_nameplate``: ``run_id``, ``peak_w``,
    ``nameplate_w``), so that the capital provisioned at that nameplate can say so."""
    index = read_csv(traces_dir / INDEX, INDEX_FILE, ("key", "status", "tokens"))
    rows, left_out = [], []
    parts: set[str] = set()  # the GPU parts the traces name
    origins: list[str] = []
    above: list[dict[str, Any]] = []
    nameplates: dict[str | tuple[str, int], float] = {}  # by UUID, else by trace and number
    for _, entry in index[index["status"] == "imported"].iterrows():
        trace = read_trace(traces_dir / f"{entry['key']}.parquet")
        gpus = summarize_trace(trace)
        meta = trace.metadata
        if not any(g.energy_span_s > 0 for g in gpus):
            reason = "one sample per GPU: no time to price its energy over"
            left_out.append({"run_id": str(entry["key"]), "reason": reason})
            continue
        parts.add(meta.gpu_name)
        for gpu in gpus:
            uuid = None if meta.simulated else meta.gpu_uuids.get(str(gpu.gpu))
            nameplates[uuid or (entry["key"], gpu.gpu)] = meta.nameplate_w
        notes = entry["notes"] if isinstance(entry.get("notes"), str) else ""
        if (origin := nameplate_origin(notes)) not in origins:
            origins.append(origin)
        peak_w = max(g.peak_power_w for g in gpus)
        if peak_w > meta.nameplate_w:
            above.append(
                {"run_id": str(entry["key"]), "peak_w": peak_w, "nameplate_w": meta.nameplate_w}
            )
        rows.append(
            {
                "source": "trace",
                "deployment": entry["key"],
                "arm": "as traced",
                "seed": 0,
                "gpus": len(gpus),
                "tokens": float(entry["tokens"]) if pd.notna(entry["tokens"]) else float("nan"),
                "energy_j": float(sum(g.energy_j for g in gpus)),
                # each GPU's time its energy covers, on average: a gap (the hours between two
                # days' logs joined, a logger restarted, a GPU lost) is not time at zero power
                "wall_s": float(np.mean([g.energy_span_s for g in gpus])),
                "data": trace.metadata.source,
            }
        )
    records = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    if records.empty:
        raise ValueError(
            f"{traces_dir}: every trace holds one sample per GPU: expected a trace spanning "
            "some time, to price its energy"
        )
    gpu_s = (records["gpus"] * records["wall_s"]).sum()
    pooled_gpus = len(nameplates)  # a GPU in several traces (a log a day) is one GPU
    pooled = {
        "source": "pooled",
        "deployment": POOLED,
        "arm": "as traced",
        "seed": 0,
        "gpus": pooled_gpus,
        "tokens": records["tokens"].sum(min_count=len(records)),  # NaN unless every trace has
        "energy_j": float(records["energy_j"].sum()),
        "wall_s": float(gpu_s / pooled_gpus),  # each GPU's traced time, on average
        "data": ",".join(sorted(set(records["data"]))),
    }
    nameplate_w = sum(nameplates.values()) / pooled_gpus
    if provenance is not None:
        provenance.update(nameplate_from=origins, above_nameplate=above, parts=sorted(parts))
    return pd.concat([records, pd.DataFrame([pooled])], ignore_index=True), nameplate_w, left_out


# the import's note on a nameplate it did not read from the log (planner.discover, telemetry)
# the import's notes of a nameplate not in the log: "nameplate 400 W from the config's ...",
# "nameplate 400 W, the default board power of NVIDIA A100-SXM4-80GB (boards of ...)",
# "nameplate 350 W, the highest enforced power limit (...)"
_NAMEPLATE_FROM = re.compile(
    r"nameplate [0-9.]+ W(?: from ([^:|]+)|, (the default board power of [^(|]+|the highest "
    r"enforced power limit))"
)
# where a nameplate came from when the import noted nothing: the log or the trace gave it
FROM_THE_TRACES = "the traces themselves (the log's power limit, or the trace's metadata)"


def nameplate_origin(notes: str) -> str:
    """Where a trace's nameplate came from, from its index ``notes``: the import's own words
    (e.g. ``the config's gpu.nameplate_w``) where it took it from elsewhere than the log, else
    :data:`FROM_THE_TRACES`."""
    found = _NAMEPLATE_FROM.search(notes)
    return (found.group(1) or found.group(2)).strip() if found else FROM_THE_TRACES


def priced(records: pd.DataFrame, a: Assumptions) -> pd.DataFrame:
    """``records`` with the economics stage's per-run columns and the energy's own cost."""
    table = per_run(records, a)
    table["wall_kwh"] = table["energy_j"] / J_PER_KWH * a.pue
    table["energy_usd"] = table["wall_kwh"] * a.usd_per_kwh
    table["carbon_kg"] = table["wall_kwh"] * a.carbon.g_per_kwh / 1000.0
    return table


def planner_headline(
    records: pd.DataFrame, fleet: FleetRows, nameplate_w: float, a: Assumptions
) -> pd.DataFrame:
    """The planner's headline under ``a`` (rows of :data:`HEADLINE_COLUMNS`): the traces'
    pooled GPU energy x PUE (the hosts' power is not in it), its cost and carbon, a
    fleet-year's, and the capital that oversubscription avoids for the economics fleet."""
    pooled = priced(records, a).set_index("deployment").loc[POOLED]
    key = {"source": "traces", "deployment": POOLED, "data": pooled["data"]}
    rows = [
        {**key, "quantity": quantity, "unit": unit, "value": float(pooled[column])}
        for quantity, unit, column in HEADLINE_QUANTITIES
    ]
    rows.append(capital_row(oversubscription_table(fleet, nameplate_w, a)))
    return pd.DataFrame(rows, columns=list(HEADLINE_COLUMNS))


# (quantity, unit, column of :func:`priced`) of the planner's headline
HEADLINE_QUANTITIES = (
    ("GPU energy x PUE", "kWh", "wall_kwh"),
    ("energy cost", "$", "energy_usd"),
    ("carbon", "kgCO2eq", "carbon_kg"),
    ("energy cost per fleet-year", "$", "annual_energy_usd"),
    ("carbon per fleet-year", "tCO2eq", "annual_carbon_t"),
)


def planner_economics(
    traces_dir: Path | str, fleet_dir: Path | str, out: Path | str, config: Config
) -> dict[str, Any]:
    """Price the traces and value oversubscription; write ``out``; return the summary.

    Raises:
        ValueError: ``fleet_dir`` is not the fleet of the traces (:func:`refuse_other_fleet`).
    """
    traces_dir, fleet_dir, out = Path(traces_dir), Path(fleet_dir), Path(out)
    refuse_other_fleet(traces_dir, fleet_dir)
    a = Assumptions.from_config(config.economics)
    provenance: dict[str, Any] = {}
    records, nameplate_w, left_out = trace_records(traces_dir, provenance)
    table = priced(records, a)
    fleet = FleetRows.read(fleet_dir)  # once: the sensitivity values it at every point
    oversubscription = oversubscription_table(fleet, nameplate_w, a)
    pooled = table[table["deployment"] == POOLED].iloc[0]
    sensitivities = sensitivity(
        lambda at: planner_headline(records, fleet, nameplate_w, at), a, config.economics
    )
    economics_fleet = oversubscription[oversubscription["scope"] == "economics fleet"].iloc[0]
    summary = {
        "data": sorted(set(table["data"])),
        "traces": int((table["source"] == "trace").sum()),
        "gpus": int(pooled["gpus"]),
        "tokens_used": bool(pd.notna(pooled["tokens"])),
        "energy_j": float(pooled["energy_j"]),
        "wall_kwh": float(pooled["wall_kwh"]),
        "energy_usd": float(pooled["energy_usd"]),
        "carbon_kg": float(pooled["carbon_kg"]),
        "mean_power_w_per_gpu": float(pooled["power_w_per_gpu"]),
        "pue": a.pue,
        "carbon_region": a.carbon.region,
        "carbon_g_per_kwh": a.carbon.g_per_kwh,
        "fleet_gpus": a.fleet_gpus,
        "fleet_hours": a.fleet_hours,  # hours a year the fleet runs (the year x utilization)
        "annual_mwh": float(pooled["annual_mwh"]),
        "annual_energy_usd": float(pooled["annual_energy_usd"]),
        "annual_carbon_t": float(pooled["annual_carbon_t"]),
        "oversubscription": economics_fleet.to_dict(),
        "nameplate_w": nameplate_w,  # per GPU, the mean of the traces' GPUs
        # where the traces' nameplates came from, and the traces reading above theirs
        "nameplate_from": provenance["nameplate_from"],
        "above_nameplate": provenance["above_nameplate"],
        "part_notes": part_notes(provenance["parts"], config.economics, "the traces"),
        "left_out": left_out,
        "inputs": {"traces": str(traces_dir), "fleet": str(fleet_dir)},
    }
    write_csv_atomic(out / PLANNER_ECONOMICS.constants, constants_table(config, a))
    write_csv_atomic(out / PLANNER_ECONOMICS.traces, table)
    write_csv_atomic(out / PLANNER_ECONOMICS.oversubscription, oversubscription)
    write_csv_atomic(out / PLANNER_ECONOMICS.sensitivity, sensitivities)
    write_json_atomic(out / PLANNER_ECONOMICS.summary, summary)
    return summary
