"""The report stage: every figure written, every number in the HTML traced back to the file a
stage wrote, the page read in order, the Snakemake wiring, and a render in headless Chromium
(Debian's ``chromium`` package) that checks that the page loads with no missing image.

The inputs are the small study of ``test_economics.py``, written by the earlier stages' own
code; the economics and report stages run through the CLI.
"""

from __future__ import annotations

import functools
import html
import json
import math
import re
import shlex
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from grpo_power.cli import app
from grpo_power.layout import REAL_TRACES_FIGURE, REPORT_FIGURES
from grpo_power.report.cells import CsvFile, JsonFile, Num, data_label, with_unit
from grpo_power.report.evaluation import (
    Evaluation,
    answer_in_short,
    edge_verdicts,
    same_runs,
    schedule_phrase,
)
from grpo_power.report.inputs import run_power
from grpo_power.report.stage import infeasible_verdict
from tests.conftest import REPO, build_stage_outputs, missing_requirement, real_traces

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


class Page(HTMLParser):
    """The parts of index.html the tests look at: headings, images, traceable numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.images: list[str] = []
        self.numbers: list[dict[str, str]] = []
        self._open: dict[str, str] | None = None
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "img":
            self.images.append(values["src"])
        elif tag == "h2":
            self._in_h2 = True
        elif tag == "span" and values.get("class") == "num":
            self._open = {**values, "text": ""}

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open["text"] += data
        if self._in_h2:
            self.headings.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self._open is not None:
            self.numbers.append(self._open)
            self._open = None
        elif tag == "h2":
            self._in_h2 = False


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("report")
    config, paths = build_stage_outputs(root)
    config_file = root / "config.yaml"
    config_file.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    runs = [arg for folder in paths["runs"] for arg in ("--run", str(folder))]
    runner = CliRunner()
    done = runner.invoke(
        app, ["economics", "--out", str(root / "economics"), *runs, "-c", str(config_file)]
    )
    assert done.exit_code == 0, done.output
    exceedance = [arg for path in paths["exceedance"] for arg in ("--exceedance", str(path))]
    controllers = [arg for path in paths["controllers"] for arg in ("--controller", str(path))]
    done = runner.invoke(
        app,
        [
            "report",
            "--out",
            str(root / "report"),
            *runs,
            *exceedance,
            *controllers,
            "-c",
            str(config_file),
        ],
    )
    assert done.exit_code == 0, done.output
    page = Page()
    page.feed((root / "report" / "index.html").read_text())
    return {"root": root, "config": config, "page": page, "output": done.output, "paths": paths}


def test_every_figure_is_written_as_pdf_and_png(report: dict) -> None:
    figures = report["root"] / "report" / "figures"
    for name in REPORT_FIGURES:
        pdf, png = figures / f"{name}.pdf", figures / f"{name}.png"
        assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 5_000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000, name
        assert b"/CreationDate" not in pdf.read_bytes(), name  # a rerun writes the same file
    assert f"{len(REPORT_FIGURES)} figures" in report["output"]


@functools.cache
def _read(path: Path) -> pd.DataFrame | dict:
    return json.loads(path.read_text()) if path.suffix == ".json" else pd.read_csv(path)


def _source_value(path: Path, column: str, row: dict[str, str]) -> float:
    """The number a span says it came from, read independently of the report's code."""
    if path.suffix == ".json":
        value = _read(path)
        for part in column.split("."):
            value = value[part]
        return float("nan") if value is None else float(value)
    frame = _read(path)
    for key, text in row.items():
        frame = frame[frame[key].astype(str) == text]
    assert len(frame) == 1, (path, row)
    return float(frame[column].iloc[0])


def test_every_number_in_the_tables_traces_back_to_a_stage_file(report: dict) -> None:
    index_dir = report["root"] / "report"
    numbers = report["page"].numbers
    assert len(numbers) > 300
    sources = set()
    for number in numbers:
        path = (index_dir / number["data-src"]).resolve()
        assert path.is_relative_to(report["root"]), path  # written by a stage of this study
        sources.add(path.relative_to(report["root"]).as_posix())
        value = _source_value(path, number["data-col"], json.loads(number["data-row"]))
        shown = float(number["data-scale"]) * value
        expected = "n/a" if not math.isfinite(shown) else format(shown, number["data-spec"])
        assert number["text"] == expected, number
    for stage_file in (
        "evaluate/study/summary.csv",
        "evaluate/study/ratios.csv",
        "evaluate/study/summary.json",
        "evaluate/scenarios/7b-cap-305w/summary.csv",  # the default config's scenario
        "evaluate/scenarios/7b-cap-305w/ratios.csv",
        "evaluate/scenarios/7b-cap-305w/summary.json",
        "identify/authority.csv",
        "fleet/comparison.csv",
        "fleet/study-mix/comparison.csv",
        "economics/arms.csv",
        "economics/constants.csv",
        "economics/oversubscription.csv",
        "economics/pilot.csv",
        "economics/sensitivity.csv",
    ):
        assert stage_file in sources, stage_file


def test_a_few_numbers_against_their_source_files(report: dict) -> None:
    root, numbers = report["root"], report["page"].numbers

    def shown(src: str, column: str, **row: str) -> list[str]:
        return [
            n["text"]
            for n in numbers
            if n["data-src"].endswith(src)
            and n["data-col"] == column
            and all(json.loads(n["data-row"]).get(k) == v for k, v in row.items())
        ]

    assert "0.0806" in shown("economics/constants.csv", "value", name="electricity_price")
    ratios = pd.read_csv(root / "evaluate" / "study" / "ratios.csv").set_index(
        ["deployment", "comparison"]
    )
    output = ratios.loc[("7b", "output_vs_fixed"), "value"]
    assert f"{output:+,.1f}" in shown("study/ratios.csv", "value", comparison="output_vs_fixed")
    summary = pd.read_csv(root / "evaluate" / "study" / "summary.csv").set_index(
        ["deployment", "arm"]
    )
    violations = 100 * summary.loc[("72b", "ppo"), "violation_rate"]
    assert f"{violations:.2f}" in shown("study/summary.csv", "violation_rate", deployment="72b")
    # each arm's share of its oracle, and a target's oracle's share of the best peer, shown
    # (the share was in the evaluation's Markdown only, the oracle's share in ratios.csv only);
    # this study has no oracle arm, so both read n/a, traced to their files
    assert shown("study/summary.csv", "share_of_oracle", deployment="7b", arm="ppo") == ["n/a"]
    assert (
        shown("study/ratios.csv", "oracle_value", comparison="budget_vs_best_peer") == ["n/a"] * 2
    )
    html = (root / "report" / "index.html").read_text()
    assert "share of its oracle %" in html and "oracle&#x27;s share of the base %" in html
    arms = pd.read_csv(root / "economics" / "arms.csv")
    fixed = arms[(arms["source"] == "run") & (arms["arm"] == "fixed")].iloc[0]
    cost = shown("arms.csv", "energy_usd_per_mtok", source="run", arm="fixed")
    assert cost == [f"{fixed['energy_usd_per_mtok']:,.3g}"]  # significant figures


def test_the_economics_section_says_what_its_figures_are(report: dict) -> None:
    """The analyst's review: energy is GPU energy x PUE, not the wall's (it read "(wall)"); a
    saving is for the baseline's fleet-year of tokens, beside the fleet's bill; the headline
    leads with the simulated deployments, the tiny CPU runs noted as not an estimate for
    A100s; the GPU-hour price moves in the sensitivity."""
    page = (report["root"] / "report" / "index.html").read_text()
    costs = _text(_table_html(page, "costs"))
    assert "kWh per M tokens (GPU energy x PUE)" in costs and "(wall)" not in costs
    assert "Source run: tiny model on the CPU, not an estimate for GPU runs." in costs
    savings = _text(_table_html(page, "savings"))
    assert "GPU energy $ saved on versus's fleet-year of tokens" in savings
    assert "fleet's yearly GPU electricity bill change at equal GPU-hours ($; negative: lower)" in (
        savings
    )
    assert "the baseline's (versus's) fleet-year of tokens" in savings
    sensitivity = _table_html(page, "sensitivity")
    rows = [
        [_text(c) for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", sensitivity, re.S)
    ]
    rows = [r for r in rows if r]
    assert rows[0][0] == "simulator"  # the simulated deployments lead (the tiny runs led)
    assert "<th>note</th>" in sensitivity
    # this small study has no real ppo run, so no tiny-run headline rows; any would be noted
    tiny = [r for r in rows if r[0] == "run"]
    assert all(r[5] == "tiny model on the CPU, not an estimate for GPU runs" for r in tiny)
    assert "GPU-hour price: 1.517 $/GPU-h" in _text(sensitivity)  # 0.37 x $4.10
    frame = pd.read_csv(report["root"] / "economics" / "sensitivity.csv")
    gpu = frame[frame["quantity"].str.startswith("GPU-time $ saved")]
    low = gpu[(gpu["parameter"] == "GPU-hour price") & (gpu["setting"] == "1.517 $/GPU-h")]
    assert len(low) and (low["change_pct"].abs() > 1).all()  # 0.37 - 1 = -63 %
    study = _text(_table_html(page, "study"))
    assert "fleet's yearly GPU electricity bill change" in study
    # "saved" and "change" sit side by side with opposite signs for a better controller
    assert "positive, the controller saves; negative, it costs more" in study
    assert "negative, a lower bill or less carbon than the baseline's fleet" in study
    # an economics reviewer read the capital, in the controller's savings, as the controller's
    assert "a one-time cost, of oversubscribing the fleet of every arm's runs, not a saving" in (
        study
    )
    # and would have summed the GPU-time $ with the energy $ and the capital
    assert "GPU-time $ is a renter's price" in _text(sensitivity)


def test_the_fleet_of_tiny_runs_says_so_wherever_its_factor_is_shown(report: dict) -> None:
    """A reviewer's finding: the capital headline, the cautions' factor and the fleet figure
    rest on the fleet of the tiny CPU runs (seconds long), labelled only "simulated"."""
    root = report["root"]
    summary = json.loads((root / "fleet" / "summary.json").read_text())
    assert summary["model_sizes"] == ["tiny"]  # the fleet stage names what its runs ran
    page = _text((root / "report" / "index.html").read_text())
    tiny = f"{len(summary['run_ids'])} run(s) (tiny model on the CPU, not an estimate for GPU"
    assert f"The fleet is made of the fleet stage's {tiny} runs)" in page  # the fleet caption
    oversubscription = pd.read_csv(root / "economics" / "oversubscription.csv")
    for scope in ("fleet stage", "economics fleet"):
        note = oversubscription[oversubscription["scope"] == scope]["note"].iloc[0]
        assert "(tiny model on the CPU, not an estimate for GPU runs)" in note, scope
    caution = page.split("This run's evidence:")[1].split("gives a factor")[0]
    assert "(tiny model on the CPU, not an estimate for GPU runs)" in caution


def test_the_authority_table_says_what_enters_the_action_space(report: dict) -> None:
    """A reviewer read the 7b group size's "selected True" as driven by the controller; it is
    above threshold but offline, so the 7b controller does not act on it."""
    root = report["root"]
    table = _table_html((root / "report" / "index.html").read_text(), "authority")
    assert "<th>above threshold</th>" in table and "<th>online</th>" in table
    assert "only where it is above threshold and online" in _text(table)
    authority = pd.read_csv(root / "identify" / "authority.csv")
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    offline = [r for r in rows if "<td>num_generations</td>" in r]
    assert len(offline) == (authority["actuator"] == "num_generations").sum() > 0
    assert all(r.rstrip().endswith("<td>False</td>") for r in offline)  # the online column


def test_the_run_power_panels_draw_the_cap_the_runs_are_judged_by(report: dict) -> None:
    """After `--config cap_w=280` only the arms that read the cap reran; the fixed runs'
    manifests kept 300 W, and the power panels drew 300 W beside windows judged at 280 W."""
    runs = report["paths"]["runs"]
    recorded = {json.loads((f / "manifest.json").read_text())["config"]["cap_w"] for f in runs}
    judged_w = min(recorded) - 40.0  # the study's cap now, none of the runs' own
    traces, samples = run_power(runs, 30.0, 500, judged_w)
    assert set(traces["cap_w"]) == set(samples["cap_w"]) == {judged_w}


def test_an_infeasible_cap_says_why_its_lowest_mean_is_not_enough() -> None:
    """A Slurm user read "cap infeasible ... (lowest achievable 84 W under 300 W)" as a
    contradiction: the mean was under the cap, its peaks were not within the budget."""
    verdict = "cap infeasible for this deployment with these actuators"
    under = infeasible_verdict({"verdict": verdict, "lowest_power_w": 84.2}, 300.0)
    assert under == (
        f"{verdict} (lowest achievable mean power 84 W per GPU under the run's lowest cap, "
        "300 W: a mean under the cap, but no setting keeps its samples and windows within the "
        "budget)"
    )
    over = infeasible_verdict({"verdict": verdict, "lowest_power_w": 251.0}, 240.0)
    assert over.endswith("240 W: no setting brings the mean under the cap)")


def test_a_scenario_says_its_cap_or_workload_changes_only_where_it_does() -> None:
    """The 305 W scenario (one segment of the deployment's own cap and workload) read "its cap
    or workload changes over the run" (any schedule did)."""
    steady = {"start_s": 0.0, "end_s": 900.0, "cap_frac": 1.0, "completion_tokens": None}
    assert schedule_phrase([{**steady, "slowdown": 1.0}]) == ""
    assert schedule_phrase([]) == ""
    dropped = {**steady, "start_s": 300.0, "cap_frac": 0.7, "slowdown": 1.0}
    changing = schedule_phrase([{**steady, "end_s": 300.0, "slowdown": 1.0}, dropped])
    assert changing.startswith(" (its cap or workload changes over the run")
    held = schedule_phrase([{**steady, "completion_tokens": 40, "slowdown": 1.0}])
    assert held.startswith(" (a cap fraction, completion length or slowdown held over the run")


def test_arms_whose_runs_coincide_are_named_under_the_evaluation() -> None:
    """A reviewer found ppo+hwcap equal to oracle+hwcap to every digit on 14b and 72b (both at
    the oracle's static setting under the power limit), which the tables left to be noticed."""
    rows = []
    for deployment, seeds in (("14b", (0, 1)), ("72b", (0, 1)), ("7b", (0, 1))):
        for seed in seeds:
            same = (1000.0 + seed, 5.0e5 + seed)
            for arm, (tokens, energy_j) in (
                ("ppo+hwcap", same),
                ("oracle+hwcap", same if deployment != "7b" else (900.0, 4.0e5 + seed)),
                ("hwcap", (800.0 + seed, 4.5e5)),
            ):
                rows.append((deployment, arm, seed, tokens, energy_j))
    metrics = pd.DataFrame(rows, columns=["deployment", "arm", "seed", "output_tokens", "energy_j"])
    lines = same_runs(metrics)
    assert lines == [
        "ppo+hwcap and oracle+hwcap made the same tokens with the same energy on every seed "
        "(14b, 72b): the same settings throughout, so a target one meets, the other meets by "
        "the same run"
    ]
    one_seed_apart = metrics.copy()
    one_seed_apart.loc[
        (one_seed_apart["arm"] == "oracle+hwcap") & (one_seed_apart["seed"] == 1), "energy_j"
    ] += 1.0
    assert same_runs(one_seed_apart) == []


def test_verdicts_on_the_budgets_edge_are_named_under_the_evaluation(tmp_path: Path) -> None:
    """A reviewer found 14b's fixed arm "within budget" at 1.998 % and 72b's "outside" at
    2.010 %, both with intervals across the 2 % budget: the verdict is the mean's, unsaid. The
    note's numbers are traceable to ``summary.csv`` like the table's, and a ``within_budget``
    column with a blank in it (read as objects, where NaN is truthy) says "outside" for it."""
    summary = pd.DataFrame(
        [
            ("14b", "fixed", 0.01998, 0.0198, 0.0202, True),
            ("14b", "threshold", 0.0070, 0.0068, 0.0073, True),
            ("72b", "fixed", 0.02010, 0.0198, 0.0204, False),
            ("72b", "uncontrolled", 0.0552, 0.0548, 0.0556, False),
            ("7b", "fixed-safe", 0.0190, 0.0180, 0.0200, True),  # its interval ends at the budget
            ("7b", "ppo", 0.0150, 0.0100, 0.0210, None),  # a blank: the column is read as objects
        ],
        columns=[
            "deployment",
            "arm",
            "violation_rate",
            "violation_rate_ci_low",
            "violation_rate_ci_high",
            "within_budget",
        ],
    )
    summary.to_csv(tmp_path / "summary.csv", index=False)
    (tmp_path / "summary.json").write_text(json.dumps({"objective": {"violation_budget": 0.02}}))
    csv = CsvFile(tmp_path / "summary.csv")
    evaluation = Evaluation(tmp_path, csv, csv, JsonFile(tmp_path / "summary.json"), csv)
    lines = edge_verdicts(evaluation, "95 %")
    assert ["".join(p if isinstance(p, str) else p.text() for p in line) for line in lines] == [
        "On 14b the 95 % interval of the violation rate spans the 2 % budget for fixed 1.998 % "
        "[1.98, 2.02], within: the verdict is the mean's, and other seeds may give the other one",
        "On 72b the 95 % interval of the violation rate spans the 2 % budget for fixed 2.010 % "
        "[1.98, 2.04], outside: the verdict is the mean's, and other seeds may give the other "
        "one",
        "On 7b the 95 % interval of the violation rate spans the 2 % budget for ppo 1.500 % "
        "[1.00, 2.10], outside: the verdict is the mean's, and other seeds may give the other one",
    ]
    rate = lines[1][4]
    assert isinstance(rate, Num)
    assert (rate.src, rate.column) == (tmp_path / "summary.csv", "violation_rate")
    assert dict(rate.row) == {"deployment": "72b", "arm": "fixed"}


def test_data_labels_and_dollars_read_as_written() -> None:
    """A fleet labelled ``measured`` reads "measured" (it read "measured: measured"); a dollar
    amount reads "$0.0053" (it read "0.0053 $")."""
    assert data_label(["measured"]) == "measured"
    assert data_label(["measured", "simulated"]) == "SIMULATED and measured"
    assert data_label(["nvml, imported"]) == "measured: imported, nvml"
    # a windows or fleet label names its source: it reads once, not "measured: measured (nvml)"
    assert data_label(["measured (nvml), measured (imported)"]) == "measured: imported, nvml"
    assert data_label(["real run (simulated power)"]) == "SIMULATED"
    usd = Num(0.0053, Path("summary.json"), "energy_usd", spec=",.4f")
    assert with_unit(usd, "$") == ["$", usd]
    assert with_unit(usd, "$ (one-time)") == ["$", usd, " (one-time)"]  # the capital's unit
    assert with_unit(usd, "kWh") == [usd, " kWh"]


def _rename_gpu(trace: Path, gpu_name: str) -> None:
    """Rewrite a trace's metadata to name another GPU."""
    table = pq.read_table(trace)
    metadata = dict(table.schema.metadata)
    info = json.loads(metadata[b"grpo_power"])
    metadata[b"grpo_power"] = json.dumps({**info, "gpu_name": gpu_name}).encode()
    pq.write_table(table.replace_schema_metadata(metadata), trace)


def _text(fragment: str) -> str:
    """HTML as the reader sees it: no tags, entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def _table_html(page: str, key: str) -> str:
    """The HTML of one report table, from its heading to its source line."""
    found = re.search(rf'<h3 id="table-{key}">.*?<p class="sources">', page, re.S)
    assert found, key
    return found.group(0)


def test_a_report_of_another_config_states_what_the_stage_files_hold(
    report: dict, tmp_path: Path
) -> None:
    """`grpo-power report -c other.yaml` beside the stage files of the study's config: the
    fleet-year and the pilot's settings are the economics files' (the notes stated the other
    config's), the GPU named is the one the runs' traces name (the captions said A100 whatever
    the part), the sensitivity and pilot tables say SIMULATED, and the constants show a year as
    a year (they showed 2023.0, and the year setting 2,025)."""
    root, paths = report["root"], report["paths"]
    gpu = "NVIDIA H100 80GB HBM3"
    runs = []
    for folder in paths["runs"]:
        copy = tmp_path / folder.relative_to(root)
        shutil.copytree(folder, copy)
        _rename_gpu(copy / "trace.parquet", gpu)
        runs += ["--run", str(copy)]
    config = report["config"].model_dump(mode="json")
    config["economics"].update(fleet_gpus=7, year=2031, utilization=0.25)
    config["economics"]["pilot"].update(confidence=0.6, power=0.6)
    config["fleet"]["window_s"] = 10.0
    config["cap_w"] = 300.0
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(config))
    exceedance = [arg for path in paths["exceedance"] for arg in ("--exceedance", str(path))]
    controllers = [arg for path in paths["controllers"] for arg in ("--controller", str(path))]
    out = tmp_path / "report"
    done = CliRunner().invoke(
        app, ["report", "--out", str(out), *runs, *exceedance, *controllers, "-c", str(other)]
    )
    assert done.exit_code == 0, done.output
    page = (out / "index.html").read_text()
    economics = root / "economics"
    constants = pd.read_csv(economics / "constants.csv").set_index("name")["value"]
    pilot = pd.read_csv(economics / "pilot.csv").iloc[0]
    window_s = json.loads((economics / "summary.json").read_text())["oversubscription"]["window_s"]
    costs = _text(_table_html(page, "costs"))
    assert (
        f"Fleet-year: {float(constants['fleet_gpus']):,.0f} GPUs in "
        f"{float(constants['year']):.0f} at utilisation {float(constants['utilization']):g}."
    ) in costs
    pilot_table = _table_html(page, "pilot")
    pilot_text = _text(pilot_table)
    assert f"Confidence {pilot['confidence']:g}, power {pilot['power']:g};" in pilot_text
    assert f"no exceedance in {pilot['headroom_windows']:,} independent {window_s:g} s" in (
        pilot_text
    )
    assert "SIMULATED" in _text(re.search(r"<h3.*?</h3>", pilot_table).group(0))
    assert "<th>data</th>" in pilot_table and "simulated inputs" in pilot_text
    sensitivity = _table_html(page, "sensitivity")
    assert "SIMULATED" in _text(re.search(r"<h3.*?</h3>", sensitivity).group(0))
    assert "<th>data</th>" in sensitivity
    rows = {
        cells[0]: cells
        for row in re.findall(r"<tr>(.*?)</tr>", _table_html(page, "constants"), re.S)
        if (cells := [_text(c) for c in re.findall(r"<td>(.*?)</td>", row, re.S)])
    }
    assert rows["electricity_price"][4] == "2023" and rows["fleet_gpus"][4] == ""
    assert rows["year"][1] == f"{float(constants['year']):.0f}"
    text = _text(page)
    assert f"the calibrated {gpu} power model" in text  # what was simulated
    assert f"from the simulated {gpu} model where marked SIMULATED" in text  # power traces
    assert f"here a simulated {gpu} and" in text  # the live arms
    assert "simulated A100" not in text and "A100 power model" not in text
    cap_w = json.loads((root / "evaluate" / "study" / "summary.json").read_text())["deployments"]
    assert f"this run's 7b cap {cap_w['7b']['cap_w']:g} W" in text  # the evaluation's, not 300


def test_the_intervals_confidence_is_the_stage_files(report: dict, tmp_path: Path) -> None:
    """A study evaluated at `evaluate.confidence: 0.9`: the report's evaluation, costs, live-arm
    and study tables state the 90 % of the stage files (they said 95 % whatever the files
    held), and the live arms' real-run column says its power is simulated."""
    root = tmp_path / "results"
    shutil.copytree(report["root"], root, ignore=shutil.ignore_patterns("report"))
    for stage in ("evaluate/study", "evaluate/scenarios/7b-cap-305w", "economics"):
        path = root / stage / "summary.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "confidence": 0.9}))
    config = report["config"].model_dump(mode="json")
    config["results_dir"] = str(root)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    paths = report["paths"]
    args = [
        *(arg for folder in paths["runs"] for arg in ("--run", str(folder))),
        *(arg for path in paths["exceedance"] for arg in ("--exceedance", str(path))),
        *(arg for path in paths["controllers"] for arg in ("--controller", str(path))),
    ]
    done = CliRunner().invoke(
        app, ["report", "--out", str(tmp_path / "report"), *args, "-c", str(config_file)]
    )
    assert done.exit_code == 0, done.output
    page = (tmp_path / "report" / "index.html").read_text()
    text = _text(page)
    assert "95 %" not in text
    assert "Arm evaluation per deployment, the study (SIMULATED; 90 % intervals over seeds)" in text
    assert "scenario 7b-cap-305w (SIMULATED; 90 % intervals over seeds)" in text
    assert (
        "Energy, cost and carbon per arm (SIMULATED; ratios of totals over seeds, 90 % intervals)"
        in text
    )
    assert "rows: the evaluation's seeds, 90 % intervals;" in text
    assert "intervals are 90 % over seeds" in text
    live = _text(_table_html(page, "live-arms"))
    assert re.search(r"run over cap, [\d.]+ s windows % \(SIMULATED\)", live)


def _set_cell(path: Path, column: str, value: str) -> None:
    frame = pd.read_csv(path, dtype=str)
    frame.loc[0, column] = value
    frame.to_csv(path, index=False)


def _drop_column(path: Path, column: str) -> None:
    pd.read_csv(path).drop(columns=[column]).to_csv(path, index=False)


def _drop_key(path: Path, key: str) -> None:
    data = json.loads(path.read_text())
    del data[key]
    path.write_text(json.dumps(data))


DAMAGED = {
    "a word for a number": (
        lambda root: _set_cell(root / "economics" / "arms.csv", "kwh_per_mtok", "abc"),
        ["arms.csv: kwh_per_mtok (row source=", "expected a number, got 'abc'"],
    ),
    "a column the tables read": (
        lambda root: _drop_column(root / "evaluate" / "study" / "summary.csv", "violation_rate"),
        ["summary.csv: violation_rate: expected"],
    ),
    "a column a figure reads": (
        lambda root: _drop_column(root / "identify" / "authority.csv", "threshold"),
        ["authority.csv: threshold: expected"],
    ),
    "the controller's data label": (
        lambda root: _drop_key(root / "controller" / "7b" / "controller.json", "simulated"),
        ["controller.json: simulated: expected"],
    ),
}


@pytest.mark.parametrize("damage", DAMAGED, ids=list(DAMAGED))
def test_a_bad_stage_file_is_named_and_leaves_the_last_report_as_it_was(
    report: dict, tmp_path: Path, damage: str
) -> None:
    """A number that is a word, a missing column (read by a table or by a figure) and a
    controller without its data label: each was a bare ``could not convert``, a traceback, a
    report half redrawn (three figures new beside the old page) or a figure captioned
    "measured". Each must be one line naming the file and the field, and leave the last
    report's files as they were, with nothing beside them."""
    root = tmp_path / "results"
    shutil.copytree(report["root"], root)
    damage_files, expected = DAMAGED[damage]
    damage_files(root)
    config = report["config"].model_dump(mode="json")
    config["results_dir"] = str(root)
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    paths = report["paths"]
    moved = [str(p).replace(str(report["root"]), str(root)) for p in paths["controllers"]]
    args = [
        *(arg for folder in paths["runs"] for arg in ("--run", str(folder))),
        *(arg for path in paths["exceedance"] for arg in ("--exceedance", str(path))),
        *(arg for path in moved for arg in ("--controller", path)),
    ]
    before = {p: p.read_bytes() for p in (root / "report").rglob("*") if p.is_file()}
    siblings = sorted(p.name for p in root.iterdir())
    done = CliRunner().invoke(
        app, ["report", "--out", str(root / "report"), *args, "-c", str(config_file)]
    )
    assert done.exit_code == 2, done.output
    lines = done.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.output
    for fragment in expected:
        assert fragment in lines[0], lines[0]
    after = {p: p.read_bytes() for p in (root / "report").rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in root.iterdir()) == siblings  # no build folder left


def test_an_arm_of_one_seed_gets_no_error_bar() -> None:
    """The tiny runs have one seed each: no interval (NaN in arms.csv). The cost figure drew
    them a zero-length error bar with caps, which reads as a very tight interval; now only the
    arms with an interval get a bar."""
    from matplotlib.container import ErrorbarContainer

    from grpo_power.report import figures as fig

    rows = []
    for arm, interval in (("fixed", (0.8, 1.2)), ("ppo", (math.nan, math.nan))):
        row = {"arm": arm, "deployment": "tiny", "source": "run", "data": "simulated"}
        for metric, _ in fig.COST_METRICS:
            row[metric] = 1.0
            row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = interval
        rows.append(row)
    figure = fig.cost_carbon(pd.DataFrame(rows))
    for ax in figure.axes:
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert [len(c.lines[2][0].get_segments()) for c in bars] == [1]  # fixed's alone


def test_the_snakemake_reports_captions_state_the_configs_settings() -> None:
    """Snakemake renders each caption with Jinja2 and the workflow's config (every setting:
    workflow/rules/common.smk); a caption stating the confidence or the evaluation's window takes
    it from there (a study at 0.9 had its 90 % table captioned "95 % confidence intervals")."""
    import types

    import jinja2

    from grpo_power.config import Config

    config = Config.model_validate(
        {
            "evaluate": {"confidence": 0.9, "exceedance_window_s": 1.0},
            "cap_w": 280,
            "results_dir": "results-mystudy",
        }
    ).model_dump(mode="json")
    snakemake = types.SimpleNamespace(config=config)
    rendered = {
        path.name: jinja2.Environment().from_string(path.read_text()).render(snakemake=snakemake)
        for path in sorted((REPO / "workflow" / "report").glob("*.rst"))
    }
    assert not [name for name, text in rendered.items() if "95 %" in text]
    assert "exceedance at 1 s" in rendered["evaluate.rst"]
    # a study of its own cap and results folder (they read 320 W and results/)
    assert "(results-mystudy/report/index.html)" in rendered["index.rst"]
    for name in ("figure_power_traces.rst", "figure_power_distributions.rst"):
        assert "the real runs' 280 W" in " ".join(rendered[name].split()), name
    for name in (
        "evaluate.rst",
        "economics_costs.rst",
        "figure_cost_carbon.rst",
        "figure_throughput_violations.rst",
    ):
        assert "90 % " in rendered[name], name


def test_the_live_arm_table_sets_the_study_beside_the_files(report: dict) -> None:
    """The study's four live 7B arms with this run's: the evaluation's 7b arms (batch 4: the
    fixed-half arm), the real runs' tokens/s and share over the cap, or "not ..." where the
    study's arm has no counterpart in this run; each row names the summary as its source and
    says how this run differs."""
    root = report["root"]
    text = (root / "report" / "index.html").read_text()
    section = text[text.index('id="live-arms"') :]
    section = section[: section.index("</table>")]
    rows = [html.unescape(re.sub(r"<[^>]+>", "", r)) for r in section.split("<tr>")[2:]]
    assert len(rows) == 4
    for study, tokens in (("static generation batch 8", "222,472"), ("PPO", "183,069")):
        assert any(r.startswith(study) and tokens in r for r in rows), study
    summary = pd.read_csv(root / "evaluate" / "study" / "summary.csv").set_index(
        ["deployment", "arm"]
    )
    ppo = next(r for r in rows if r.startswith("PPO"))
    assert f"{summary.loc[('7b', 'ppo'), 'output_tokens']:,.0f}" in ppo
    assert f"{100 * summary.loc[('7b', 'ppo'), 'violation_rate']:.2f}" in ppo
    assert "not run" in ppo  # no real ppo run in this small study
    batch4 = next(r for r in rows if r.startswith("static generation batch 4"))
    assert "fixed-half (concurrency 16)" in batch4  # the fixed arm's 32, halved
    half = summary.loc[("7b", "fixed-half")]
    assert f"{half['output_tokens']:,.0f}" in batch4
    assert f"{100 * half['violation_rate']:.2f}" in batch4
    arms = pd.read_csv(root / "economics" / "arms.csv")
    real_half = arms[(arms["source"] == "run") & (arms["arm"] == "fixed-half")].iloc[0]
    assert f"{real_half['tokens_per_gpu_s']:,.1f}" in batch4
    # the study's 0.01 % against this run's share: the row says which way it differs
    said = [d for d in ("fewer violations", "more violations", "near the study's") if d in batch4]
    expected = "more violations" if 100 * half["violation_rate"] > 1.01 else "near the study's"
    assert said == [expected]
    assert all("summary" in r for r in rows)
    hysteresis = next(r for r in rows if r.startswith("hysteresis"))
    assert "not evaluated" in hysteresis  # the small evaluation has no threshold arm
    real = arms[(arms["source"] == "run") & (arms["arm"] == "threshold")].iloc[0]
    assert f"{real['tokens_per_gpu_s']:,.1f}" in hysteresis
    exceedance = pd.read_csv(next(p for p in root.rglob("exceedance.csv") if "threshold" in str(p)))
    over = exceedance[(exceedance["scope"] == "run_pooled") & (exceedance["window_s"] == 0.5)]
    assert f"{100 * over['exceedance'].iloc[0]:.2f}" in hysteresis


def test_the_72b_authority_sits_beside_the_studys_four_figures(report: dict) -> None:
    """The study's 72B sweep (generation batch, group size as concurrency, completion length,
    inter-batch pause) beside the simulated 72b rows of authority.csv, each row saying where the
    study's figure comes from and how this run's differs; an actuator not swept says so."""
    root = report["root"]
    text = (root / "report" / "index.html").read_text()
    section = text[text.index('id="table-study-authority"') :]
    section = section[: section.index("</table>")]
    rows = {
        r.split("|")[0]: r
        for r in (
            html.unescape(re.sub(r"<[^>]+>", "|", r)).replace("||", "|").strip("|")
            for r in section.split("<tr>")[2:]
        )
    }
    assert set(rows) == {"concurrency", "num_generations", "max_new_tokens", "pause_s"}
    authority = pd.read_csv(root / "identify" / "authority.csv").set_index(
        ["data", "deployment", "actuator"]
    )
    study_figures = {"concurrency": "22.5", "num_generations": "16.9", "pause_s": "6.3"}
    for actuator, study in study_figures.items():
        row = rows[actuator]
        here = authority.loc[("simulated", "72b", actuator), "authority"]
        assert f"{100 * here:.1f}" in row and study in row and "summary" in row
        assert "smaller" in row  # the synthetic 72b sweep moves power far less than the study's
    assert "4 to 32 sequences" in rows["num_generations"]  # 4 prompts x 1-16, at most 32
    pause = authority.loc[("simulated", "72b", "pause_s"), "authority"]
    assert pause < 0 and f"|{100 * pause:.1f}|" in rows["pause_s"]  # signed: a pause lowers power
    assert "not swept" in rows["max_new_tokens"] and "3.5" in rows["max_new_tokens"]


def test_the_study_table_shows_the_simulated_72b_share_and_the_study_fleet(report: dict) -> None:
    root, numbers = report["root"], report["page"].numbers

    def study_rows(key: str, arm: str) -> list[str]:
        return [
            n["text"]
            for n in numbers
            if n["data-src"].endswith("study-mix/comparison.csv")
            and n["data-col"] == "this_run"
            and json.loads(n["data-row"]) == {"key": key, "arm": arm}
        ]

    # The 72b uncontrolled runs' 0.5 s over-cap share, from the samples by a sliding sum: a
    # window ending at sample k holds the trapezoids of samples k - 5 ... k (0.1 s each).
    samples = pd.read_parquet(root / "evaluate" / "study" / "72b" / "uncontrolled.samples.parquet")
    over = windows = 0
    for _, run in samples.groupby(["seed", "gpu"]):
        p = run.sort_values("sample")["power_w"].to_numpy(dtype=float)
        inner = sum(p[i : len(p) - 5 + i] for i in range(1, 5))
        energy_j = 0.1 * (0.5 * (p[:-5] + p[5:]) + inner)
        over += int((energy_j / 0.5 > 220.0).sum())
        windows += len(energy_j)
    share = 100 * over / windows
    # Twice in the page: the study table and the study fleet's table.
    assert study_rows("exceedance_72b_0.5s", "uncontrolled") == [f"{share:.1f}", f"{share:,.2f}"]
    for arm in ("uncontrolled", "ppo"):
        assert all(t != "n/a" for t in study_rows("fleet_peak_kw", arm))
        assert all(t != "n/a" for t in study_rows("exceedance_72b_30s", arm))
    html = (root / "report" / "index.html").read_text()
    study = html[html.index("findings and this run") : html.index("Figures")]
    assert "summary" in study and "abstract" in study and "(simulated, arm ppo)" in study


def test_the_study_ratio_rows_say_what_sets_the_difference(report: dict) -> None:
    """Each ratio row of the study table names the baseline behind it, read from the evaluate
    stage's files: the fixed arm's violations (7b), the uncontrolled arm's (72b), the
    fixed-safe arm's concurrency (72b); the 72B concurrency row reads authority, not the share
    retained."""
    root = report["root"]
    text = html.unescape(re.sub(r"<[^>]+>", "", (root / "report" / "index.html").read_text()))
    rows = text[text.index("findings and this run") : text.index("The study's live arms")]
    rows = rows.split("\n")
    summary = pd.read_csv(root / "evaluate" / "study" / "summary.csv").set_index(
        ["deployment", "arm"]
    )
    fixed = next(r for r in rows if r.startswith("cap violations, ppo vs fixed (7b)"))
    violations = 100 * summary.loc[("7b", "fixed"), "violation_rate"]
    assert f"fixed arm violates {violations:.2f} %" in fixed
    assert "batch 8: 17.72 %" in fixed
    tokens = next(r for r in rows if r.startswith("tokens, ppo vs fixed (7b)"))
    assert "17.7% fewer tokens" in tokens  # the study's live PPO against its batch 8
    uncontrolled = 100 * summary.loc[("72b", "uncontrolled"), "violation_rate"]
    assert any(
        r.startswith("violations, ppo vs uncontrolled (72b)")
        and f"uncontrolled arm violates {uncontrolled:.2f} %" in r
        for r in rows
    )
    safe = json.loads((root / "evaluate" / "study" / "summary.json").read_text())
    concurrency = safe["deployments"]["72b"]["arms"]["fixed-safe"]["concurrency"]
    assert any(
        r.startswith("output, ppo vs fixed-safe (72b)") and f"holds concurrency {concurrency} " in r
        for r in rows
    )
    authority = pd.read_csv(root / "identify" / "authority.csv").set_index(
        ["data", "deployment", "actuator"]
    )
    concurrency_row = next(r for r in rows if r.startswith("concurrency alone, 72b sharded"))
    here = 100 * authority.loc[("simulated", "72b", "concurrency"), "authority"]
    assert f"{here:.1f} % (group size as concurrency" in concurrency_row
    assert "smaller than the study's" in concurrency_row  # the synthetic 72b: 6.2 % of 17-22 %
    for finding in (  # the simulator's rows, beside the study's measured figures
        "cap violations, ppo vs fixed (7b)",
        "tokens, ppo vs fixed (7b)",
        "tokens per MJ, ppo vs fixed (7b)",
        "output, ppo vs fixed-safe (72b)",
        "violations, ppo vs uncontrolled (72b)",
    ):
        assert "SIMULATED; target" in next(r for r in rows if r.startswith(finding)), finding


def test_the_page_reads_top_to_bottom_and_labels_simulation(report: dict) -> None:
    page = report["page"]
    assert page.headings == [
        "The question",
        "The answer in short (SIMULATED)",
        "Setup",
        "The study and this run",
        "The study's live arms",
        "Figures",
        "Tables",
        "Scenarios (SIMULATED)",
        "Simulator against real traces",
        "Economics",
        "Cautions",
    ]
    text = (report["root"] / "report" / "index.html").read_text()
    assert text.count("SIMULATED") > 20
    for caution in ("POLCA", "Thunderbolt", "Flex", "NVML_FI_DEV_POWER_INSTANT", "0.2-3 Hz"):
        assert caution in text
    # the tiny runs' numbers follow this machine's timing; the simulator's do not
    runs = len(list((report["root"] / "runs").rglob("manifest.json")))
    assert f"Reruns: the {runs} real run(s) here ran a model on this machine" in text
    assert "2.13.0+cpu" in text and "test-platform" in text  # versions and hardware
    # the GPU a simulated run's trace names is the simulated one (the runs had no CUDA device)
    hardware = _text(_table_html(text, "hardware"))
    assert "none" in hardware and " (SIMULATED)" in hardware
    assert "No measured runs configured: set real_traces.folder" in text  # the default config


def test_each_evaluated_scenario_has_its_tables_and_one_not_evaluated_is_named(
    report: dict, tmp_path: Path
) -> None:
    """The scenarios the controller's targets are judged on (another cap, a cap schedule,
    drifting lengths) were in Snakemake's report and the benchmark only, not in the page."""
    root = report["root"]
    text = (root / "report" / "index.html").read_text()
    folder = root / "evaluate" / "scenarios" / "7b-cap-305w"
    arms = pd.read_csv(folder / "summary.csv")
    table = _table_html(text, "scenario-7b-cap-305w-evaluation")
    assert "scenario 7b-cap-305w (SIMULATED" in table
    assert all(f"<td>7b</td><td>{arm}</td>" in table for arm in arms["arm"]), table
    ratios = pd.read_csv(folder / "ratios.csv")
    assert len(ratios) > 0 and "Ratios with targets, scenario 7b-cap-305w" in text
    # what "within budget" is judged against, under each evaluation table (it was nowhere)
    objective = json.loads((folder / "summary.json").read_text())["objective"]
    budget = f"Within budget: at most {100 * objective['violation_budget']:g} % of per-GPU"
    assert _text(text).count(budget) == 2  # the study's table and the scenario's
    setting = _text(text.split('id="scenario-7b-cap-305w"')[1].split("<table")[0])
    summary = json.loads((folder / "summary.json").read_text())
    assert f"7b: cap {summary['deployments']['7b']['cap_w']:,.1f} W per GPU" in setting
    assert f"targets met: {summary['targets_met']} of {summary['targets']}" in setting
    # a scenario the config names but nobody evaluated: left out, with how to add it
    config = report["config"].model_dump(mode="json")
    config["evaluate"]["scenarios"].append({"name": "dr", "cap_w": 250, "deployments": ["7b"]})
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump(config))
    paths = report["paths"]
    args = [
        *(arg for folder in paths["runs"] for arg in ("--run", str(folder))),
        *(arg for path in paths["controllers"] for arg in ("--controller", str(path))),
    ]
    out = tmp_path / "report"
    done = CliRunner().invoke(app, ["report", "--out", str(out), *args, "-c", str(config_file)])
    assert done.exit_code == 0, done.output
    missing = root / "evaluate" / "scenarios" / "dr"
    assert (
        f"note: scenario 'dr' is not in the report: {missing} holds no summary.csv (run "
        f"`grpo-power evaluate --scenario dr --out {missing}`)"
    ) in done.output
    page = (out / "index.html").read_text()
    assert 'id="scenario-7b-cap-305w"' in page and 'id="scenario-dr"' not in page


def test_images_exist_beside_the_page(report: dict) -> None:
    index_dir = report["root"] / "report"
    assert len(report["page"].images) == len(REPORT_FIGURES)
    for src in report["page"].images:
        assert not src.startswith(("/", "http")) and (index_dir / src).stat().st_size > 0


LOAD_CHECK = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const broken = images.filter((i) => !i.complete || i.naturalWidth === 0).map((i) => i.src);
  const out = document.createElement("pre");
  out.id = "load-check";
  out.textContent = JSON.stringify({images: images.length, broken: broken});
  document.body.appendChild(out);
});
</script>
"""


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_report_renders_in_headless_chromium(report: dict, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        missing_requirement(f"{CHROMIUM} missing: apt-get install chromium to render the report")
    index = report["root"] / "report" / "index.html"
    # the same page with a script that lists images the browser could not load
    checked = index.with_name("index.load-check.html")
    checked.write_text(index.read_text().replace("</body>", LOAD_CHECK + "</body>"))
    dom = _chromium(
        "--virtual-time-budget=15000", "--dump-dom", checked.as_uri(), profile=tmp_path / "a"
    )
    found = re.search(r'<pre id="load-check">(.*?)</pre>', dom.stdout)
    assert found, dom.stderr[-2000:]
    loaded = json.loads(found.group(1).replace("&quot;", '"'))
    assert loaded == {"images": len(REPORT_FIGURES), "broken": []}
    screenshot = tmp_path / "report.png"
    shot = _chromium(
        "--window-size=1400,5000",
        "--virtual-time-budget=15000",
        f"--screenshot={screenshot}",
        index.as_uri(),
        profile=tmp_path / "b",
    )
    assert screenshot.exists(), shot.stderr[-2000:]
    from PIL import Image

    image = Image.open(screenshot).convert("L")
    assert image.size == (1400, 5000)
    low, high = image.getextrema()
    assert low < 100 and high > 200  # text and figures drawn, not a blank page


def test_every_report_figure_has_a_workflow_caption() -> None:
    captions = REPO / "workflow" / "report"
    for name in REPORT_FIGURES:
        assert (captions / f"figure_{name}.rst").read_text().strip(), name
    for caption in ("index", "economics_costs", "economics_oversubscription", "economics_pilot"):
        assert (captions / f"{caption}.rst").exists()


def _snakemake() -> str:
    """The snakemake beside this Python (skips outside CI when the workflow extra is absent)."""
    snakemake = shutil.which("snakemake", path=str(Path(sys.executable).parent))
    if snakemake is None:
        missing_requirement("snakemake is not beside this Python (install the workflow extra)")
    return snakemake


def _dry_run(results: Path, settings: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``snakemake -n --forceall`` of this checkout's workflow, its results under ``results``,
    with more ``--config`` ``settings`` and the options and targets ``args``; it must plan."""
    config = ["--config", f"results_dir={results}", *settings]
    done = subprocess.run(
        [_snakemake(), "-n", "--directory", str(REPO), *config, "--forceall", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_snakemake_dag_builds_the_report_on_the_default_config(tmp_path: Path) -> None:
    done = _dry_run(tmp_path, [], "--quiet", "rules")
    # every figure is asked for by `rule all`: one deleted by hand was not made again by the
    # plain command (Snakemake checks only the files asked for), and --report then failed
    planned = _dry_run(tmp_path, [])
    wanted = (planned.stdout + planned.stderr).split("\nrule all:")[1].split("\n\n")[0]
    for name in REPORT_FIGURES:
        for suffix in ("png", "pdf"):
            assert f"report/figures/{name}.{suffix}" in wanted, (name, wanted[:2000])
    # so is every stage's every file: economics/pilot.csv, identify/authority.csv or the
    # evaluation's ratios.csv deleted by hand stayed missing ("Nothing to be done"), the report
    # up to date; the sweep and the fixed-safe calibrations are made for what reads them
    text = planned.stdout + planned.stderr
    jobs = re.findall(r"^(?:local)?rule (\w+):\n((?: {4}.*\n)+)", text, re.M)
    made = {
        path.strip()
        for rule, job in jobs
        if rule not in ("all", "sweep", "calibrate_fixed_safe")
        for line in job.splitlines()
        if line.strip().startswith("output:")
        for path in line.split("output:", 1)[1].split(", ")
    }
    assert {"economics", "identify", "evaluate", "report"} <= {rule for rule, _ in jobs}
    assert str(tmp_path / "economics" / "pilot.csv") in made
    asked = {path.strip() for path in wanted.split("input:", 1)[1].split("\n")[0].split(", ")}
    assert sorted(made - asked) == []
    assert re.search(r"\beconomics\s+1\b", done.stdout) and re.search(
        r"\breport\s+1\b", done.stdout
    )


@pytest.mark.slow
def test_the_real_traces_figure_is_a_report_output_when_measured_runs_are_set(
    tmp_path: Path,
) -> None:
    """With real_traces.folder set the report draws a ninth figure; the rule did not declare
    it, so Snakemake's report (--report) left it out and the count said 8."""
    target = str(tmp_path / "report" / "index.html")
    plan = _dry_run(tmp_path, [f"real_traces={{folder: {real_traces()}}}"], target)
    report_job = plan.stdout.split("rule report:")[1].split("\n\n")[0]
    for suffix in ("png", "pdf"):
        assert f"figures/{REAL_TRACES_FIGURE}.{suffix}" in report_job, report_job
    caption = REPO / "workflow" / "report" / f"figure_{REAL_TRACES_FIGURE}.rst"
    assert "Measured" in caption.read_text()


def test_shell_commands_keep_config_paths_as_single_arguments(tmp_path: Path) -> None:
    """A results folder with a space and shell syntax stays one argument in every command."""
    hostile = tmp_path / "my results; touch PWNED $(id)"
    command = [_snakemake(), "-n", "-p", "--directory", str(REPO), "--forceall"]
    done = subprocess.run(
        [*command, "--config", f"results_dir={hostile}"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    output = (done.stdout + done.stderr).splitlines()
    commands = [line for line in output if "grpo_power.cli" in line]
    assert len(commands) >= 10
    for command in commands:
        words = shlex.split(command)
        assert "touch" not in words and "PWNED" not in words, command
        config_file = words[words.index("--config") + 1]
        assert re.fullmatch(
            rf"{re.escape(str(hostile))}/configs/config-[0-9a-f]{{12}}\.yaml", config_file
        )


def test_the_report_answers_its_question_in_short(report: dict) -> None:
    """A newcomer found the question asked at the top and no answer: it had to be worked out
    from sixty rows. The answer in short gives the targets met and what the controller made
    on each deployment, each number from the evaluation's files."""
    root = report["root"]
    page = _text((root / "report" / "index.html").read_text())
    assert "The answer in short (SIMULATED)" in report["page"].headings
    summary = json.loads((root / "evaluate" / "study" / "summary.json").read_text())
    met = f"Controller targets met (SIMULATED): {summary['targets_met']} of {summary['targets']}"
    assert met + " in the study's evaluation" in page
    arms = pd.read_csv(root / "evaluate" / "study" / "summary.csv")
    for _, ppo in arms[arms["arm"] == "ppo"].iterrows():
        rate = f"{ppo['deployment']}: ppo ran at {100 * ppo['violation_rate']:.2f} % violations"
        assert rate in page
    ratios = pd.read_csv(root / "evaluate" / "study" / "ratios.csv")
    shares = ratios[
        (ratios["controller"] == "ppo") & (ratios["comparison"] == "budget_share_of_oracle")
    ]
    for _, share in shares.iterrows():
        assert f"{share['value']:.1f} % of its oracle's output (target {share['target']}:" in page


def test_the_answer_in_short_judges_both_targets_within_the_budget(tmp_path: Path) -> None:
    """A paper author read "72b: ppo ran at 2.62 % violations (outside the budget); 123.8 % of
    its oracle's output (target >= 95 %: met); 308.1 % of ... the best classic peer (NOT met)":
    the oracle's row was the one without the budget. Both are the budget's, and a miss that is
    the budget's says so."""
    pd.DataFrame(
        [("72b", "ppo", 0.0262, False), ("7b", "ppo", 0.0150, True)],
        columns=["deployment", "arm", "violation_rate", "within_budget"],
    ).to_csv(tmp_path / "summary.csv", index=False)
    pd.DataFrame(
        [
            ("72b", "ppo", "output_share_of_oracle", 123.8, ">= 95 %", True),
            ("72b", "ppo", "budget_share_of_oracle", 123.8, ">= 95 % within budget", False),
            ("72b", "ppo", "budget_vs_best_peer", 308.1, ">= 100 % of the best peer", False),
            ("7b", "ppo", "budget_share_of_oracle", 91.0, ">= 95 % within budget", False),
        ],
        columns=["deployment", "controller", "comparison", "value", "target", "met"],
    ).to_csv(tmp_path / "ratios.csv", index=False)
    (tmp_path / "summary.json").write_text(json.dumps({"targets_met": 1, "targets": 4}))
    summary, ratios = CsvFile(tmp_path / "summary.csv"), CsvFile(tmp_path / "ratios.csv")
    evaluation = Evaluation(tmp_path, summary, ratios, JsonFile(tmp_path / "summary.json"), summary)
    lines = [
        "".join(p if isinstance(p, str) else p.text() for p in line)
        for line in answer_in_short(evaluation, {}, "ppo")
    ]
    assert lines[1] == (
        "72b: ppo ran at 2.62 % violations (outside the budget); 123.8 % of its oracle's output "
        "(target >= 95 % within budget: NOT met, being outside the budget); 308.1 % of the output "
        "of the best classic peer within the budget (target >= 100 % of the best peer: NOT met, "
        "being outside the budget)."
    )
    assert lines[2] == (
        "7b: ppo ran at 1.50 % violations (within the budget); 91.0 % of its oracle's output "
        "(target >= 95 % within budget: NOT met)."
    )


def test_real_runs_of_arms_that_ran_alike_are_named_under_the_live_arms(report: dict) -> None:
    """A newcomer found fixed, fixed-safe and threshold ran the same settings at every step
    (fixed-safe tuned to fixed's concurrency, threshold never moving) while the live-arms table
    showed their tokens/s two-fold apart, unsaid: machine load, not the arms. Arms whose step
    logs hold the same settings on every seed are named in the table's note."""
    from grpo_power.report.inputs import SETTINGS, run_infos, same_settings

    infos = run_infos(report["paths"]["runs"])
    by_arm: dict[str, list] = {}
    for info in sorted(infos, key=lambda i: int(i.manifest.get("seed", 0))):
        steps = pd.read_parquet(info.folder / "steps.parquet")
        by_arm.setdefault(info.manifest["arm"], []).append(steps[list(SETTINGS)].values.tolist())
    alike = [{a for a in by_arm if by_arm[a] == by_arm[arm]} for arm in by_arm]
    expected = {frozenset(group) for group in alike if len(group) > 1}
    lines = same_settings(infos)
    assert len(lines) == len(expected)
    for group in expected:
        named = sorted(group)
        assert any(f"{', '.join(named[:-1])} and {named[-1]} ran the same" in x for x in lines)
    live = _text(_table_html((report["root"] / "report" / "index.html").read_text(), "live-arms"))
    assert all(line in live for line in lines)
