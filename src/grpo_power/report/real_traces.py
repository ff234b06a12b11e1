"""The report's "Simulator against real traces" section, from what ``grpo-power real-traces``
wrote (layout ``REAL_TRACES``): the measured power per concurrency with the least-squares, the
steady (the simulator's) and the literature prior's decode curves; the fitted parameters
against the prior; the held-out error per concurrency bin; and every run's windowed exceedance
of the cap. Every number is labelled as its file labels it (``measured (public trace)`` for
runs with a named source). Reads files only."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from grpo_power.layout import REAL_TRACES, REAL_TRACES_FIGURE, TRACE_FIT
from grpo_power.report import cells, html
from grpo_power.report import figures as fig
from grpo_power.stage_files import read_csv

TITLE = "Simulator against real traces"
WRITTEN_BY = "`grpo-power real-traces --out DIR` (the config's real_traces section)"
NOT_CONFIGURED = (
    "No measured runs configured: set real_traces.folder to a folder of runs, each an "
    "nvidia-smi power.csv beside its engine's engine.csv (README: 'The simulator against real "
    "traces')."
)
PARAMETER_COLS = (
    ("decode power at concurrency 1 (W)", "power_at_1_w"),
    ("decode power per doubling (W)", "slope_w_per_doubling"),
    ("noise (W)", "noise_w"),
)
VALIDATION_COLS = (
    cells.Col("data", "data"),
    cells.Col("run", "run_id"),
    cells.Col("concurrency", "concurrency_bin"),
    cells.Col("samples", "samples", ",.0f"),
    cells.Col("measured mean (W)", "measured_mean_w", ".1f"),
    cells.Col("least-squares fit mean (W)", "predicted_mean_w", ".1f"),
    cells.Col("prior mean (W)", "prior_mean_w", ".1f"),
    cells.Col("error of the mean (% nameplate)", "error_mean_pct_nameplate", "+.1f"),
    cells.Col("measured p95 (W)", "measured_p95_w", ".1f"),
    cells.Col("least-squares fit p95 (W)", "predicted_p95_w", ".1f"),
    cells.Col("error of the p95 (% nameplate)", "error_p95_pct_nameplate", "+.1f"),
    cells.Col("meets the targets", "meets_targets"),
)
EXCEEDANCE_COLS = (
    cells.Col("data", "data"),
    cells.Col("run", "run_id"),
    cells.Col("split", "split"),
    cells.Col("window (s)", "window_s", "g"),
    cells.Col("windows", "windows", ",.0f"),
    cells.Col("over the cap (%)", "exceedance", ".2f", 100.0),
    cells.Col("peak window mean (W)", "peak_mean_w", ".1f"),
)


def _curve_w(
    concurrency: np.ndarray, at_1_w: float, slope_w: float, nameplate_w: float
) -> np.ndarray:
    return np.minimum(at_1_w + slope_w * np.log2(concurrency), nameplate_w)


def decode_curves(points: pd.DataFrame, fit: cells.JsonFile) -> Figure:
    """Mean power per concurrency of every run (marker size: samples), with the three curves."""
    nameplate_w = float(fit.get("nameplate_w"))
    steady = fit.get("steady_decode")
    decode = points[points["concurrency"] >= 1]
    c = np.geomspace(1, max(2.0, float(decode["concurrency"].max())), 100)

    def of_watts(line: dict[str, dict[str, float]]) -> np.ndarray:
        at_1_w, slope_w = line["power_at_1_w"]["value"], line["slope_w_per_doubling"]["value"]
        return _curve_w(c, at_1_w, slope_w, nameplate_w)

    figure, ax = plt.subplots(figsize=(8.0, 3.6))
    sns.scatterplot(
        decode, x="concurrency", y="mean_power_w", hue="split", size="samples", ax=ax, alpha=0.7
    )
    ax.plot(
        c,
        of_watts(fit.get("least_squares_w")),
        color="tab:red",
        label="least squares (with bursts)",
    )
    ax.plot(
        c,
        _curve_w(
            c,
            steady["power_at_1_w"]["value"],
            steady["slope_w_per_doubling"]["value"],
            nameplate_w,
        ),
        color="black",
        label="steady line (the simulator's)",
        linewidth=2.0,
    )
    ax.plot(
        c,
        of_watts(fit.get("prior_w")),
        "--",
        color="0.5",
        label="literature prior",
    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("decode concurrency (requests running)")
    ax.set_ylabel("mean power per concurrency (W)")
    ax.legend(frameon=False, fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
    figure.tight_layout()
    return figure


def _with_interval(fit: cells.JsonFile, key: str, spec: str = ".1f") -> list[cells.Part]:
    """``value [low, high]`` of the fit file's ``key`` (a ``{"value", "low", "high"}``)."""
    return [
        fit.num(f"{key}.value", spec),
        " [",
        fit.num(f"{key}.low", spec),
        ", ",
        fit.num(f"{key}.high", spec),
        "]",
    ]


def _fitted_cell(fit: cells.JsonFile, name: str, spec: str, interval: bool = True) -> cells.Cell:
    """A fitted parameter's cell: value and (with ``interval``) its interval; the config's
    value, said so, where the traces could not fit it; "not identifiable" and why where the
    estimate is outside the config schema's range."""
    key = f"parameters.{name}"
    if fit.has(f"{key}.source") and fit.get(f"{key}.source") == "config":
        return [fit.num(f"{key}.value", spec), f" ({fit.get(f'{key}.reason')})"]
    if fit.get(f"{key}.value") is None:
        return [
            "not identifiable from these traces (estimate ",
            fit.num(f"{key}.estimate", spec),
            f"): {fit.get(f'{key}.reason')}",
        ]
    return _with_interval(fit, key, spec) if interval else fit.num(f"{key}.value", spec)


def _parameter_table(fit: cells.JsonFile) -> cells.Table:
    """The fitted parameters beside the prior; every cell of a row in the unit its header
    states (W, the least-squares and prior lines taken from ``least_squares_w`` and
    ``prior_w``)."""
    table = cells.Table(
        "real_traces_fit",
        "The decode power model fitted to measured runs, against the literature prior",
        ["parameter", "steady line (the simulator's default)", "least squares", "prior"],
        sources=[fit.path],
        note=f"{fit.get('data')}; steady line: {fit.get('steady_decode.method')}.",
    )
    for header, key in PARAMETER_COLS:
        table.rows.append(
            [
                header,
                _with_interval(fit, f"steady_decode.{key}"),
                _with_interval(fit, f"least_squares_w.{key}"),
                _with_interval(fit, f"prior_w.{key}"),
            ]
        )
    table.rows.append(
        [
            "idle (W; the median of idle samples)",
            "",
            _fitted_cell(fit, "idle_w", ".1f"),
            fit.num("parameters.idle_w.prior", ".1f"),
        ]
    )
    peak = _fitted_cell(fit, "transient_peak_frac", ".3f", interval=False)
    table.rows.append(
        [
            "transient peak (x nameplate, above it)",
            peak,
            peak,
            fit.num("parameters.transient_peak_frac.prior", ".3f"),
        ]
    )
    table.rows.append(["decode samples fitted", fit.num("decode_samples", ",.0f"), "", ""])
    return table


def real_traces_section(folder: Path | None, out: Path, dpi: int) -> tuple[str, list[Path]]:
    """The section's HTML and its figure's files (PDF, PNG) drawn into ``out/figures``, or a
    note and no figure when no measured runs were configured (``folder`` None)."""
    if folder is None:
        return html.section(TITLE, html.paragraph(NOT_CONFIGURED), key="real-traces"), []
    expected = f"{WRITTEN_BY}'s files"
    fit_dir = folder / REAL_TRACES.fit
    fit = cells.JsonFile(fit_dir / TRACE_FIT.fit, expected)
    points = read_csv(fit_dir / TRACE_FIT.points, expected)
    validation = cells.CsvFile(fit_dir / TRACE_FIT.validation, expected)
    exceedance = cells.CsvFile(folder / REAL_TRACES.exceedance, expected)
    # each held-out run's bins, and the runs pooled (run "all"), which the count below is of
    held = validation.frame[validation.frame["split"] == "held-out"]
    tables = [
        _parameter_table(fit),
        cells.csv_table(
            "real_traces_validation",
            "Held-out error of the least-squares decode fit per concurrency bin",
            validation,
            VALIDATION_COLS,
            ["split", "run_id", "concurrency_bin"],
            held,
            note=[
                "Bins of ",
                fit.num("held_out_error.min_bin_samples", ".0f"),
                " samples or more are held to the targets: the error of the mean under ",
                fit.num("held_out_error.targets_pct_nameplate.mean", "g"),
                " % of nameplate, of the p95 under ",
                fit.num("held_out_error.targets_pct_nameplate.p95", "g"),
                " % (empty: too few samples to judge). Of the held-out runs pooled, ",
                fit.num("held_out_error.bins_meeting_targets", ".0f"),
                " of ",
                fit.num("held_out_error.bins", ".0f"),
                " bins held to the targets meet them (run all). The fit scored is the "
                "least-squares line (the mean of the decode samples, the engine's prefill bursts "
                "in them); the simulator decodes on the steady line and adds the bursts (the "
                "parameter table and the figure show both).",
            ],
        ),
        cells.csv_table(
            "real_traces_exceedance",
            "Windowed exceedance of the cap by the measured runs",
            exceedance,
            EXCEEDANCE_COLS,
            ["run_id", "window_s"],
            note="Each run's windows pooled over its GPUs (the windows stage's run_pooled rows).",
        ),
    ]
    labels = [*points["data"], str(fit.get("data"))]
    pdf, png = fig.save_figure(decode_curves(points, fit), out / "figures", REAL_TRACES_FIGURE, dpi)
    caption = (
        f"{fig.data_label(labels)}. Measured mean power per decode concurrency of each run "
        "(marker size: samples), with the least-squares line (pulled up by the engine's "
        "prefill bursts), the steady line the simulator uses, and the literature prior."
    )
    section = html.section(
        TITLE,
        html.figure_html("Decode power against concurrency, measured", caption, png, pdf, out),
        *(html.table_html(t, out) for t in tables),
        key="real-traces",
    )
    return section, [pdf, png]
