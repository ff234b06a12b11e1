"""The planner's report: ``index.html`` and its figures, from the planner's folders.

What the traces are (where they came from, their GPUs, span and data label), the fleet they make
(peak demand against window and fleet size, the oversubscription factor), and what it is worth
(energy, cost, carbon, capital avoided). Figures and tables come from the report stage's own
code (:mod:`grpo_power.report.figures`, :mod:`grpo_power.report.tables`,
:mod:`grpo_power.report.html`), so every number links to the file and row it was read from.
Traces are shown by a short label (``T1``, ``T2``, ...), which the traces table maps to its name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from grpo_power.atomic import merge_folder_atomic, write_text_atomic
from grpo_power.config import Config
from grpo_power.economics.oversubscription import monte_carlo_labelled
from grpo_power.layout import FLEET, PLANNER_ECONOMICS, PLANNER_FLEET, REPORT
from grpo_power.listing import named_few
from grpo_power.planner.discover import INDEX, NOTE_SEPARATOR
from grpo_power.planner.economics import POOLED
from grpo_power.planner.fleet import fleet_notes, refuse_other_fleet
from grpo_power.report import cells, html
from grpo_power.report import figures as fig
from grpo_power.report import tables as tab
from grpo_power.telemetry.store import read_trace
from grpo_power.version import __version__

FIGURES = (
    ("planner_traces", "Power of each trace's first GPU"),
    ("planner_distributions", "Per-GPU power distribution of each trace"),
    ("planner_fleet", "The traces' fleet: peak demand and oversubscription factor"),
)
# What each figure draws; ``{cap_w}``: the cap per GPU the fleet stage counted exceedance
# against (its summary.json), ``{trace_s}``: how much of each trace is drawn.
CAPTIONS = {
    "planner_traces": "Power of each trace's first GPU over its first {trace_s:g} s, from its "
    "first reading; dashed: the cap, {cap_w:g} W per GPU.",
    "planner_distributions": "Distribution of per-GPU power samples per trace (violins cut at "
    "the observed range; lines: quartiles); dashed: the cap, {cap_w:g} W per GPU.",
    "planner_fleet": "Fleet peak demand as a share of nameplate against the averaging window "
    "(left) and the fleet size (middle), and the oversubscription factor nameplate / (peak x "
    "(1 + margin)) against the fleet size (right); grey band: the study's {study_peak}; dashed: "
    "the study's {study_factor}; shaded bands and lines: the published {published} results.",
}
# Traces drawn in the figures: one panel (a violin) each, so a folder of hundreds of logs drew a
# figure hundreds of panels wide, whose shared axes cost matplotlib time growing with their square
# (1000 traces never finished); the first ones by label are drawn, every trace counts in the tables
DRAWN_TRACES = 12
TRACE_COLS = (
    cells.Col("label", "label"),
    cells.Col("trace", "key"),
    cells.Col("format", "format"),
    cells.Col("data", "data"),
    cells.Col("GPUs", "gpus", ",.0f"),
    cells.Col("samples", "samples", ",.0f"),
    cells.Col("span (s)", "span_s", ",.1f"),
    cells.Col("sample period (s)", "sample_period_s", "g"),
    cells.Col("from", "source_path"),
)
FLEET_COLS = (
    cells.Col("window (s)", "window_s", "g"),
    cells.Col("windows per draw", "windows_per_draw", ",.0f"),
    cells.Col("exceedance of the fleet cap", "exceedance_mean", ".4f"),
    cells.Col("peak share % (mean)", "peak_share_mean", ".1f", 100.0),
    cells.Col("peak share % (sizing)", "peak_share_sizing", ".1f", 100.0),
    cells.Col("factor (x)", "factor", ".3f"),
    cells.Col("data", "data"),
)
PEAK_COLS = (
    cells.Col("label", "label"),
    cells.Col("trace", "run_id"),
    cells.Col("data", "data"),
    cells.Col("GPUs", "gpus", ",.0f"),
    cells.Col("one GPU's highest window (W)", "gpu_peak_w", ",.1f"),
    cells.Col("% of nameplate", "gpu_peak_share", ".1f", 100.0),
    cells.Col("cap per GPU (W)", "gpu_cap_w", "g"),
    cells.Col("GPU windows above the cap", "gpu_exceedance", ".4f"),
    cells.Col("the GPUs' sum: highest window (W)", "total_peak_w", ",.0f"),
    cells.Col("% of their nameplates", "total_peak_share", ".1f", 100.0),
    cells.Col("sum's windows above the caps' sum", "total_exceedance", ".4f"),
)
# a wall-clock fleet is one draw, the traced time itself: its mean and sizing peak are both its
# highest window, and a quantile of draws names nothing
WALL_CLOCK_FLEET_COLS = (
    cells.Col("window (s)", "window_s", "g"),
    cells.Col("windows", "windows_per_draw", ",.0f"),
    cells.Col("exceedance of the fleet cap", "exceedance_mean", ".4f"),
    cells.Col("peak share % (highest window)", "peak_share_sizing", ".1f", 100.0),
    cells.Col("factor (x)", "factor", ".3f"),
    cells.Col("data", "data"),
)
# the planner's headline has no GPU-time row: the GPU-hour price moves none of it (left out)
PLANNER_SENSITIVITY_NOTE = (
    "One assumption changed at a time; the others as configured. Energy: GPU energy x PUE, the "
    "hosts' not counted (the capital counts their power). The capital is a one-time cost, not a "
    "yearly one."
)
ENERGY_COLS = (
    cells.Col("trace", "deployment"),
    cells.Col("data", "data"),
    cells.Col("GPUs", "gpus", ",.0f"),
    cells.Col("span per GPU (s, mean)", "wall_s", ",.1f"),
    cells.Col("energy (J)", "energy_j", ",.0f"),
    cells.Col("mean W per GPU", "power_w_per_gpu", ",.1f"),
    cells.Col("kWh (GPU energy x PUE)", "wall_kwh", ",.4f"),
    cells.Col("energy $", "energy_usd", ",.5f"),
    cells.Col("carbon (kg CO2eq)", "carbon_kg", ",.5f"),
    cells.Col("tokens", "tokens", ",.0f"),
    cells.Col("kWh per M tokens", "kwh_per_mtok", ",.2f"),
    cells.Col("fleet-year MWh (GPU energy x PUE)", "annual_mwh", ",.0f"),
    cells.Col("fleet-year energy $", "annual_energy_usd", ",.0f"),
    cells.Col("fleet-year t CO2eq", "annual_carbon_t", ",.0f"),
)


@dataclass(frozen=True)
class PlannerFolders:
    """Where the planner's steps wrote: imported traces, fleet, economics."""

    traces: Path
    fleet: Path
    economics: Path


def _labelled_index(folders: PlannerFolders) -> pd.DataFrame:
    index = cells.CsvFile(folders.traces / INDEX).frame
    imported = index[index["status"] == "imported"].copy()
    imported["label"] = [f"T{i + 1}" for i in range(len(imported))]
    return imported


def _power_frames(
    imported: pd.DataFrame, folders: PlannerFolders, config: Config, cap_w: float
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(first GPU over the first ``report.trace_s``, thinned samples of every GPU) per trace,
    in the columns :func:`grpo_power.report.figures.power_traces` draws and the GPU each
    trace names (``gpu_name``); ``cap_w``: the cap per GPU drawn with them, W."""
    traces, samples = [], []
    r = config.report
    for _, entry in imported.iterrows():
        trace = read_trace(folders.traces / f"{entry['key']}.parquet")
        frame = trace.frame
        info = {"panel": "traces", "arm": entry["label"], "cap_w": cap_w}
        info["data"] = trace.metadata.source
        info["gpu_name"] = trace.metadata.gpu_name
        first = frame[frame["gpu"] == frame["gpu"].min()]
        shown = first[first["t"] <= first["t"].min() + r.trace_s]
        traces.append(
            pd.DataFrame(
                {"t_s": shown["t"] - first["t"].min(), "power_w": shown["power_w"]}
            ).assign(**info)
        )
        step = max(1, -(-len(frame) // r.max_points))
        samples.append(pd.DataFrame({"power_w": frame["power_w"].iloc[::step]}).assign(**info))
    return pd.concat(traces, ignore_index=True), pd.concat(samples, ignore_index=True)


def planner_report(folders: PlannerFolders, out: Path | str, config: Config) -> Path:
    """Draw the figures and write ``out/index.html``, built in a folder beside ``out`` whose
    files take their places only when all are written (a bad input leaves ``out`` as it was);
    returns the page's path.

    Raises:
        ValueError: ``folders.fleet`` is not the fleet of ``folders.traces``
            (:func:`~grpo_power.planner.fleet.refuse_other_fleet`), or an input lacks what the
            report reads (the message names the file).
    """
    out = Path(out)
    page = merge_folder_atomic(out, lambda folder: _write_report(folders, folder, config))
    return out / page


def _write_report(folders: PlannerFolders, out: Path, config: Config) -> Path:
    """Write the report into ``out``; the page's path relative to ``out``."""
    refuse_other_fleet(folders.traces, folders.fleet)
    imported = _labelled_index(folders)
    fleet_json = cells.JsonFile(folders.fleet / FLEET.summary)
    fleet_windows = cells.CsvFile(
        folders.fleet / FLEET.fleet_csv, columns=fig.FLEET_WINDOWS_COLUMNS
    )
    scaling = cells.CsvFile(folders.fleet / FLEET.scaling_csv, columns=fig.SCALING_COLUMNS)
    energy = cells.CsvFile(folders.economics / PLANNER_ECONOMICS.traces)
    oversub = cells.CsvFile(folders.economics / PLANNER_ECONOMICS.oversubscription)
    constants = cells.CsvFile(folders.economics / PLANNER_ECONOMICS.constants)
    summary = cells.JsonFile(folders.economics / PLANNER_ECONOMICS.summary)
    sensitivities = cells.CsvFile(folders.economics / PLANNER_ECONOMICS.sensitivity)
    index_file = cells.CsvFile(folders.traces / INDEX)
    labelled = index_file.frame.merge(imported[["key", "label"]], on="key", how="left")
    index_file.frame = labelled[labelled["status"] == "imported"]
    cap_w = float(fleet_json.get("cap_w_per_gpu"))
    window_s = float(fleet_json.get("window_s"))
    wall_clock = fleet_json.get("alignment") == "wall_clock"
    drawn_note = ""
    if len(imported) > DRAWN_TRACES:
        drawn_note = (
            f" The first {DRAWN_TRACES} of the {len(imported)} traces are drawn "
            f"(T1-T{DRAWN_TRACES}); every trace counts in the tables and the fleet."
        )
    traces, samples = _power_frames(imported.head(DRAWN_TRACES), folders, config, cap_w)
    fig.apply_style()
    drawn = {
        "planner_traces": (
            fig.power_traces(traces, "time since the trace's first reading (s)"),
            traces["data"],
        ),
        "planner_distributions": (fig.power_distributions(samples), samples["data"]),
        "planner_fleet": (
            fig.fleet(fleet_windows.frame, scaling.frame, window_s),
            fleet_windows.frame["data"],
        ),
    }
    made = []
    for name, title in FIGURES:
        figure, data = drawn[name]
        pdf, png = fig.save_figure(figure, out / "figures", name, config.report.dpi)
        caption = CAPTIONS[name].format(
            cap_w=cap_w, trace_s=config.report.trace_s, **fig.CAPTION_FIGURES
        )
        if name != "planner_fleet":
            caption += drawn_note
        made.append(html.figure_html(title, f"{fig.data_label(data)}. {caption}", png, pdf, out))
    skipped = index_file_skipped(folders)
    read_notes = import_notes(index_file.frame)
    headline: list[cells.Cell] = [
        [
            f"{len(imported)} trace(s), ",
            summary.num("gpus", ",.0f"),
            f" GPU(s), {fig.data_label(imported['data'])}: a fleet of ",
            *_gpus(fleet_json.num("n_gpus", ",.0f")),
            f" by {fleet_json.get('alignment')} alignment peaks at ",
            fleet_json.num("peak_share_sizing", ".1f", 100.0),
            *(
                [" % of nameplate in its highest ", fleet_json.num("window_s", "g"), " s window"]
                if wall_clock
                else [
                    " % of nameplate at the ",
                    fleet_json.num("window_s", "g"),
                    " s window (sizing quantile ",
                    fleet_json.num("peak_quantile", "g"),
                    " of its draws)",
                ]
            ),
            ", so it can be oversubscribed by a factor of ",
            fleet_json.num("factor", ".3f"),
            " x with margin ",
            fleet_json.num("margin", "g"),
            ". Exceedance is judged against a cap of ",
            fleet_json.num("cap_w_per_gpu", "g"),
            " W per GPU ("
            + (
                "planner.cap_w"
                if config.planner.cap_w is not None
                else "the config's cap_w; planner.cap_w or --cap-w sets the planner's own"
            )
            + "), the fleet's the sum over its GPUs.",
        ],
        [
            "GPU energy x PUE (PUE ",
            summary.num("pue", "g"),
            "; not the wall's: the hosts' CPUs, memory and network are not in the traces, not "
            "counted here; the capital below counts their share) ",
            summary.num("wall_kwh", ",.4f"),
            " kWh, costing $",
            summary.num("energy_usd", ",.4f"),
            " and ",
            summary.num("carbon_kg", ",.4f"),
            f" kg CO2eq ({summary.get('carbon_region')}); a fleet of ",
            *_gpus(summary.num("fleet_gpus", ",.0f"), " such GPU"),
            " running ",
            summary.num("fleet_hours", ",.0f"),
            " h a year: $",
            summary.num("annual_energy_usd", ",.0f"),
            "; oversubscription avoids $",
            summary.num("oversubscription.capital_usd_avoided", ",.0f"),
            " of capacity, the power of ",
            summary.num("oversubscription.extra_gpus", ",.0f"),
            " more GPUs (and their hosts) in what the ",
            summary.num("fleet_gpus", ",.0f"),
            " are provisioned for, at the factor of the ",
            summary.num("oversubscription.factor_from_gpus", ",.0f"),
            "-GPU fleet (",
            summary.num("oversubscription.factor", ".3f"),
            f" x; {summary.get('oversubscription.data')}",
            *_drawn_beside_traced(summary, fleet_json),
            "), each GPU provisioned at ",
            summary.num("nameplate_w", ",.0f"),
            f" W ({_nameplate_origin(summary)}) plus its host's share.",
            *_above_nameplate(summary),
            *(" Caution: " + note + "." for note in summary.data.get("part_notes", [])),
        ],
    ]
    if summary.get("tokens_used"):
        headline.append(
            [
                "Every trace counts its tokens: ",
                energy.num("kwh_per_mtok", ",.3f", deployment=POOLED),
                " kWh per million tokens, pooled (GPU energy x PUE; per trace in the energy "
                "table).",
            ]
        )
    # the figures drawn: a drawn fleet's GPUs are draws of the traced ones, labelled in the
    # table as the economics labels them (it said "measured (imported)" of them)
    fleet_windows.frame = monte_carlo_labelled(fleet_windows.frame, int(fleet_json.get("n_gpus")))
    unresolved, coarsest_s = unresolved_windows(
        index_file, sorted(set(fleet_windows.frame["window_s"]))
    )
    if window_s < coarsest_s:
        headline.append(
            [
                "The sizing window (",
                fleet_json.num("window_s", "g"),
                " s) is shorter than a trace's sample period: see the fleet table's note.",
            ]
        )
    headline += [note[0].upper() + note[1:] + "." for note in fleet_notes(fleet_json.data)]
    if read_notes:
        headline.append(
            f"{len(read_notes)} note(s) from the import on how the traces were read (a value a "
            "log did not give, such as its nameplate, or what was repaired): see The traces."
        )
    sections = [
        html.section("What the traces show", html.bullet_list(headline, out), key="headline"),
        html.section(
            "The traces",
            html.table_html(
                cells.csv_table("traces", "Traces", index_file, TRACE_COLS, ["key"]), out
            ),
            *(
                [html.paragraph("How the traces were read:"), html.bullet_list(read_notes, out)]
                if read_notes
                else []
            ),
            html.paragraph(
                f"Skipped (not power traces, or none the planner can read): {skipped}"
                if skipped
                else "Skipped: none."
            ),
            key="traces",
        ),
        html.section("Figures", *made, key="figures"),
        html.section(
            "Fleet",
            html.table_html(
                cells.csv_table(
                    "fleet",
                    "Fleet of the traces",
                    fleet_windows,
                    WALL_CLOCK_FLEET_COLS if wall_clock else FLEET_COLS,
                    ["window_s"],
                ),
                out,
            ),
            *[
                html.bullet_list([note], out, css="note")
                for note in (unresolved, repeated_windows(fleet_json, fleet_windows.frame))
                if note
            ],
            html.table_html(_peaks_table(folders, imported, fleet_json), out),
            key="fleet",
        ),
        html.section(
            "Economics",
            html.table_html(
                cells.csv_table(
                    "energy",
                    "Energy, cost and carbon",
                    energy,
                    ENERGY_COLS,
                    ["deployment"],
                    note=[
                        "kWh: GPU energy x PUE ",
                        summary.num("pue", "g"),
                        " (the hosts' not counted). Fleet-year: ",
                        *_gpus(summary.num("fleet_gpus", ",.0f")),
                        " running ",
                        summary.num("fleet_hours", ",.0f"),
                        " h a year (the year's hours x economics.utilization), each at the "
                        "trace's mean W per GPU.",
                    ],
                ),
                out,
            ),
            html.table_html(
                cells.csv_table(
                    "oversubscription",
                    "Oversubscription value",
                    oversub,
                    tab.OVERSUBSCRIPTION_COLS,
                    ["scope", "n_gpus"],
                    note=(
                        f"Each GPU provisioned at {_nameplate_origin(summary)} plus its host's "
                        "share." + "".join(_above_nameplate(summary))
                    ),
                ),
                out,
            ),
            html.table_html(
                tab.sensitivity_table(sensitivities, PLANNER_SENSITIVITY_NOTE, ("GPU-hour price",)),
                out,
            ),
            html.table_html(tab.constants_table("constants", "Constants", constants), out),
            key="economics",
        ),
    ]
    simulated = traces[traces["data"] == "simulated"].drop_duplicates("arm")
    subtitle = (
        f"grpo-power {__version__}, planner mode: measured or imported traces only, no GRPO run "
        "and no simulator"
        + (
            f" (traces labelled SIMULATED, {', '.join(simulated['arm'])}, are the simulated "
            f"power of {', '.join(sorted(set(simulated['gpu_name'])))})."
            if len(simulated)
            else "."
        )
    )
    page = html.page("Power traces: fleet provisioning and economics", subtitle, sections)
    return write_text_atomic(out / REPORT.page, page).relative_to(out)


def _peaks_table(
    folders: PlannerFolders, imported: pd.DataFrame, fleet_json: cells.JsonFile
) -> cells.Table:
    """Each trace's peaks at the sizing window (the fleet's ``trace_peaks.csv``), labelled as
    the traces table labels them (``imported``: the labelled index)."""
    peaks = cells.CsvFile(
        folders.fleet / PLANNER_FLEET.trace_peaks_csv,
        "the planner fleet's trace_peaks.csv, written by `grpo-power planner fleet`",
        ("run_id", "gpu_peak_w", "total_peak_w"),
    )
    labels = dict(zip(imported["key"], imported["label"], strict=True))
    peaks.frame["label"] = [labels.get(run, "") for run in peaks.frame["run_id"]]
    return cells.csv_table(
        "trace-peaks",
        "Peaks per trace at the sizing window",
        peaks,
        PEAK_COLS,
        ["run_id"],
        note=[
            "Each trace's highest ",
            fleet_json.num("window_s", "g"),
            " s window: of any one of its GPUs against the nameplate, and of the sum of its GPUs "
            "against the sum of theirs; windows above the cap: the share of its GPUs' windows "
            "whose mean is above the cap per GPU, or of the sum's above that times its GPUs. A "
            "trace the fleet left out has no row.",
        ],
    )


def _gpus(count: cells.Num, noun: str = " GPU") -> list[cells.Part]:
    """``count`` followed by ``noun``, plural unless the count is one."""
    return [count, noun if count.value == 1 else f"{noun}s"]


def unresolved_windows(
    index_file: cells.CsvFile, windows_s: list[float]
) -> tuple[list[cells.Cell], float]:
    """What the fleet's windows shorter than the coarsest trace's sample period mean (a
    Prometheus scrape every 15 s cannot see a 1 s peak), as a paragraph ([] when every window
    is at least every sample period), and that period, s (0 without one)."""
    periods = index_file.frame.dropna(subset=["sample_period_s"])
    if periods.empty:
        return [], 0.0
    coarsest = periods.loc[periods["sample_period_s"].idxmax()]
    coarsest_s = float(coarsest["sample_period_s"])
    short = [w for w in windows_s if w < coarsest_s]
    if not short:
        return [], coarsest_s
    return [
        f"Windows shorter than {coarsest['label']}'s sample period (",
        index_file.num("sample_period_s", "g", key=coarsest["key"]),
        f" s: the {', '.join(f'{w:g}' for w in short)} s rows) are not resolved by its samples: "
        "each sample is held for its period, so a peak shorter than the period can fall between "
        "samples, and those rows can understate the fleet's short peaks.",
    ], coarsest_s


def repeated_windows(fleet: cells.JsonFile, windows: pd.DataFrame) -> list[cells.Part]:
    """What a Monte Carlo fleet's rows (``windows``, the fleet table) rest on where each draw's
    timeline (the fleet summary's ``horizon_s``) is longer than a trace: the traces repeated end
    to end, and the windows longer than every trace resting on that repetition alone, as a
    paragraph ([] for a wall-clock fleet, or one whose traces all span the timeline)."""
    lengths_s = [float(x) for x in fleet.data.get("source_lengths_s") or []]
    horizon_s = fleet.data.get("horizon_s")
    if fleet.get("alignment") != "monte_carlo" or not lengths_s or horizon_s is None:
        return []
    if float(horizon_s) <= min(lengths_s):
        return []
    longest_s = max(lengths_s)
    beyond = [float(w) for w in windows["window_s"] if float(w) > longest_s]
    every = "every trace" if float(horizon_s) > longest_s else "a trace"
    spans = f"{min(lengths_s):g}-{longest_s:g}" if min(lengths_s) < longest_s else f"{longest_s:g}"
    note: list[cells.Part] = [
        "Each draw's timeline (",
        fleet.num("horizon_s", "g"),
        f" s, fleet.horizon_s) is longer than {every} ({spans} s of complete bins): the "
        "traces are repeated end to end to fill it, each treated as periodic, an assumption, "
        "not a measurement",
    ]
    if beyond:
        note.append(
            f"; the {', '.join(f'{w:g}' for w in beyond)} s row(s) are longer than every trace "
            "and rest on that repetition alone"
        )
    return [*note, "."]


def import_notes(imported: pd.DataFrame) -> list[str]:
    """The notes the import made on the ``imported`` rows of the planner's index (what it
    inferred or repaired: time zone, nameplate, readings above it, missing readings), in the
    index's order; a note several logs share but for the file it names is said once, naming
    three of them and counting the rest (a node's log a day otherwise repeats it hundreds of
    times)."""
    if "notes" not in imported:
        return []
    files: dict[str, list[str]] = {}  # a note's text without its file -> the files it names
    for source, text in zip(imported["source_path"], imported["notes"], strict=True):
        if not isinstance(text, str):
            continue  # no notes
        prefix = f"{source}: "
        for note in filter(None, text.split(NOTE_SEPARATOR)):
            named = note.startswith(prefix)
            files.setdefault(note.removeprefix(prefix), []).extend([source] if named else [])
    return [f"{named_few(names)}: {note}" if names else note for note, names in files.items()]


def index_file_skipped(folders: PlannerFolders) -> str:
    """The skipped files of the planner's index, as text."""
    index = cells.CsvFile(folders.traces / INDEX).frame
    rows = index[index["status"] == "skipped"]
    return "; ".join(f"{r['key']} ({r['reason']})" for _, r in rows.iterrows())


def _drawn_beside_traced(summary: cells.JsonFile, fleet: cells.JsonFile) -> list[cells.Part]:
    """Where the capital's factor is a drawn fleet's, not the traced GPUs' own (a scaling
    study's fleet draws the traced GPUs with replacement, as if independent, which a few
    traced GPUs can flatter): the traced fleet's own factor beside it."""
    if summary.get("oversubscription.factor_from_gpus") == fleet.get("n_gpus"):
        return []
    return [
        ": the traced GPUs drawn with replacement as if independent; the traced fleet of ",
        fleet.num("n_gpus", ",.0f"),
        " GPU(s) itself has a factor of ",
        fleet.num("factor", ".3f"),
        " x",
    ]


def _nameplate_origin(summary: cells.JsonFile) -> str:
    """Where the nameplate each GPU is provisioned at came from (the economics summary's
    ``nameplate_from``): the traced GPUs' mean nameplate, and whose it is."""
    origins = summary.data.get("nameplate_from") or []
    if not origins:
        return "the traced GPUs' mean nameplate"
    return "the traced GPUs' mean nameplate, from " + "; ".join(origins)


def _above_nameplate(summary: cells.JsonFile) -> list[str]:
    """The warning beside the capital where a trace reads above its nameplate (the economics
    summary's ``above_nameplate``): the capital rests on a nameplate the GPUs exceed."""
    above = summary.data.get("above_nameplate") or []
    if not above:
        return []
    peak = max(above, key=lambda a: a["peak_w"] - a["nameplate_w"])
    return [
        f" Caution: readings reach {peak['peak_w']:,.0f} W, above the nameplate "
        f"{peak['nameplate_w']:,.0f} W ({len(above)} trace(s)): the capital avoided is "
        "provisioned at a nameplate the GPUs exceed; if they are another part, give its "
        "nameplate (--nameplate-w, or gpu.nameplate_w)."
    ]
