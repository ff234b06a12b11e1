"""Bad input everywhere a user can give it, driven through the real CLI (issue 8, item 3).

Each case builds one bad input in a fresh folder, runs one ``grpo-power`` command on it and
checks that the command

- exits with the case's exit code: 2 through the CLI's data-error path (a one-line
  ``error: ...``, never a traceback), or 64 for a usage error (click's ``Usage: ...`` and
  ``Error: ...``, e.g. an invalid choice);
- names the file, the field and what was expected (the case's substrings, all present);
- leaves nothing behind: the folder holds exactly the files it held before the command (no
  output file or folder under its final name, no ``*.tmp`` leftover).

The case table below is data: an id, what the input is, how to build it (a builder and its
parameters, the builders follow the table), the command, the substrings the message must
contain, and the exit code when it is not 2. In commands and substrings ``{input}`` is the
built input, ``{name}`` its file name, ``{out}`` an output path that must not appear,
``{config}`` a valid config whose results folder is the case's own, and ``{dir}`` the case's
folder.

Issue 14 added the inputs that real logs contain, one or more cases per class and per
subcommand that reads files or numbers: clock jumps, milliseconds and time zones (data that
would be silently wrong), missing readings that dominate, bad paths and ``OSError`` (a folder
given as a file, an output that is an existing file or folder), numbers outside the config's
types (0, negative, NaN, inf, overflow), config files (duplicate keys, syntax errors by line,
one line per bad field) and a run folder given where a trace is expected. Each message must have
the case's number of lines (one, or one per bad field of a config) and no traceback; "nothing
left behind" also means no file changed. ``ACCEPTED`` lists the real-world inputs that must be
read (exit 0, the output written, a note saying what was inferred): a byte-order mark, one
missing reading, an instantaneous power column that is ``[N/A]`` throughout, a Parquet or CSV
trace with only t, gpu and power_w, milliseconds, and clock jumps split on request.

``python tests/test_bad_inputs.py`` runs every case and prints a markdown table
(# | input | command | exit code | message) for the closing note, then one of the accepted
inputs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from grpo_power.analysis.windows import run_windows
from grpo_power.cli import EXIT_DATA, EXIT_USAGE, app
from grpo_power.config import load_config
from grpo_power.layout import BINS_METADATA_KEY, TRACE_METADATA_KEY
from grpo_power.sim.calibration import default_calibration
from grpo_power.telemetry.schema import TRACE_COLUMNS, TraceMetadata
from grpo_power.telemetry.steplog import StepLogWriter
from grpo_power.telemetry.store import write_trace
from grpo_power.workload.manifest import RunManifest

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    """One bad input: how to build it, the command, and what its message must say."""

    id: str
    input: str  # what the input is, in words
    build: tuple[str, dict[str, Any]]  # (builder, its parameters)
    command: list[str]
    expect: list[str]  # substrings of the error message (after placeholders)
    exit_code: int = EXIT_DATA  # EXIT_USAGE: refused by the command line's parser
    lines: int = 1  # lines of the message: one, or one per bad field of a config


NVSMI_HEADER = "timestamp, index, power.draw [W], power.default_limit [W]"
DCGM_HEADER = "timestamp,gpu,modelName,DCGM_FI_DEV_POWER_USAGE"
T0, T1 = "2025/03/04 10:15:30.000", "2025/03/04 10:15:30.500"
IMPORT = ["telemetry", "import", "{input}", "--out", "{out}/trace.parquet"]
WINDOWS = ["windows", "{input}", "--out", "{out}", "-c", "{config}"]
SUMMARY = ["telemetry", "summary", "{input}"]
FLEET = ["fleet", "{input}", "--out", "{out}", "-c", "{config}"]
IDENTIFY = ["identify", "--out", "{out}", "--real-sweep-steps", "0", "-c", "{config}"]
TRAIN = ["controller", "train", "--deployment", "7b", "--out", "{out}", "-c", "{config}"]
EVALUATE = ["evaluate", "--out", "{out}", "-c", "{config}"]
RUN = ["run", "--arm", "fixed", "--out", "{out}", "-c", "{input}"]
RESUME = ["run", "--arm", "fixed", "--out", "{input}", "-c", "{config}"]
SMI_EXPECTED = "expected a comma-separated nvidia-smi log with a header line"
T2, T_BACK = "2025/03/04 10:15:31.000", "2025/03/04 10:15:29.000"
SMI_ROW = ", 0, 250 W, 400 W\n"
JUMP = "t must increase strictly within a GPU"
RECORD = ["telemetry", "record", "--out", "{out}/t.parquet", "-c", "{config}", "--", "true"]
SWEEP = ["sweep", "--out", "{out}", "-c", "{config}"]
REPORT = ["report", "--out", "{out}", "-c", "{config}"]
ECONOMICS = ["economics", "--out", "{out}", "-c", "{config}"]
COMPLETED = '{"status": "completed", "size": "tiny", "arm": "fixed", "seed": 0, "config": {}}'

CASES: list[Case] = [
    # --- telemetry import: nvidia-smi and DCGM logs -----------------------------------------
    Case(
        "import-missing-file",
        "nvidia-smi log path that does not exist",
        ("absent", {"name": "smi.csv"}),
        IMPORT,
        ["{name}", "no such file", SMI_EXPECTED],
    ),
    Case(
        "import-empty-file",
        "empty nvidia-smi log",
        ("text", {"name": "smi.csv", "text": ""}),
        IMPORT,
        ["{name}", SMI_EXPECTED, "got an empty file"],
    ),
    Case(
        "import-binary-garbage",
        "binary bytes named .csv",
        ("bytes", {"name": "smi.csv"}),
        IMPORT,
        ["{name}", SMI_EXPECTED, "got bytes that are not text"],
    ),
    Case(
        "import-semicolons",
        "nvidia-smi log separated by semicolons",
        (
            "text",
            {"name": "smi.csv", "text": "timestamp;index;power.draw [W]\n" + T0 + ";0;250 W\n"},
        ),
        IMPORT,
        ["{name}", "header", "got one column", "separated by ';', not commas"],
    ),
    Case(
        "import-no-header",
        "nvidia-smi log recorded with --format=csv,noheader",
        ("text", {"name": "smi.csv", "text": T0 + SMI_ROW + T1 + SMI_ROW}),
        IMPORT,
        ["{name}", "line 1", "expected a header line", "got data", "--format=csv,noheader"],
    ),
    Case(
        "import-engine-log",
        "an inference engine's metrics log given as the power log",
        (
            "text",
            {
                "name": "engine.csv",
                "text": "timestamp,vllm:num_requests_running,vllm:generation_tokens_total\n"
                "1.5,3,100\n",
            },
        ),
        IMPORT,
        ["{name}", "missing column", "inference engine's metrics log (vllm)", "--engine THIS"],
    ),
    Case(
        "import-grafana-legend-without-gpu",
        "a Grafana panel's CSV download whose legend names no GPU (a total of the node)",
        (
            "text",
            {
                "name": "grafana.csv",
                "text": '"Time","node power"\r\n2026-12-01 10:00:00,1250.5 W\r\n',
            },
        ),
        IMPORT,
        ["{name}", "column 'node power'", "no GPU named", "set the panel's legend"],
    ),
    Case(
        "import-nvidia-smi-query-report",
        "the text report of nvidia-smi -q -d POWER -l 1 given as a power log",
        (
            "text",
            {
                "name": "power.txt",
                "text": "\n==============NVSMI LOG==============\n\n"
                "Timestamp                                 : Fri Dec  4 16:00:00 2026\n"
                "GPU 00000000:07:00.0\n    GPU Power Readings\n"
                "        Power Draw                        : 63.17 W\n",
            },
        ),
        IMPORT,
        ["{name}", "expected a power log", "an nvidia-smi -q report (text)", "--query-gpu="],
    ),
    Case(
        "import-dcgm-exporter-metrics-scrape",
        "a scrape of dcgm-exporter's /metrics text (no time of its own) given as a power log",
        (
            "text",
            {
                "name": "metrics.txt",
                "text": "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n"
                "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
                'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-1",modelName="NVIDIA A100"} 301.2\n',
            },
        ),
        IMPORT,
        ["{name}", "a Prometheus text exposition", "no time of their own", "query_range"],
    ),
    Case(
        "import-nvidia-smi-xml-report",
        "the XML report of nvidia-smi -q -x given as a power log",
        (
            "text",
            {
                "name": "power.xml",
                "text": '<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi.dtd">\n'
                "<nvidia_smi_log>\n<timestamp>Fri Dec  4 16:00:00 2026</timestamp>\n",
            },
        ),
        IMPORT,
        ["{name}", "an nvidia-smi -q report (XML, -x)", "--query-gpu="],
    ),
    Case(
        "import-grafana-temperature",
        "a Grafana panel's CSV download of GPU temperature given as power",
        ("text", {"name": "grafana.csv", "text": '"Time","GPU 0"\n1764583200000,45 °C\n'}),
        IMPORT,
        ["{name}", "column 'GPU 0'", "'45 °C'", "line 2", "expected power"],
    ),
    Case(
        "import-prometheus-summed",
        "Prometheus result of sum(DCGM_FI_DEV_POWER_USAGE): no labels name the GPU",
        (
            "text",
            {
                "name": "prometheus.json",
                "text": '{"status":"success","data":{"resultType":"matrix","result":'
                '[{"metric":{},"values":[[1764590400,"2100.5"],[1764590415,"2200"]]}]}}',
            },
        ),
        [*IMPORT, "--format", "prometheus"],
        ["{name}", "series 1", "no '__name__' label", "sum() or rate()"],
    ),
    Case(
        "import-several-parts",
        "DCGM export of a fleet of A100 and H100 hosts in one file",
        (
            "text",
            {
                "name": "fleet.csv",
                "text": "timestamp,Hostname,gpu,modelName,DCGM_FI_DEV_POWER_USAGE\n"
                "1764590400,a,0,NVIDIA A100-SXM4-80GB,250\n"
                "1764590400,h,0,NVIDIA H100 80GB HBM3,600\n",
            },
        ),
        [*IMPORT, "--format", "dcgm"],
        ["{name}", "column 'modelName'", "expected one GPU part per log", "got 2", "split"],
    ),
    Case(
        "import-dmon-without-time",
        "nvidia-smi dmon log recorded without -o DT",
        ("text", {"name": "dmon.log", "text": "# gpu   pwr\n# Idx     W\n    0    62\n"}),
        [*IMPORT, "--format", "nvidia-smi-dmon", "--nameplate-w", "400"],
        ["{name}", "line 1", "no Date and Time columns", "-o DT"],
    ),
    Case(
        "import-dmon-without-time-told-by-its-header",
        "nvidia-smi dmon log recorded without -o DT, its format told from the file",
        ("text", {"name": "dmon.log", "text": "# gpu   pwr\n# Idx     W\n    0    62\n"}),
        [*IMPORT, "--nameplate-w", "400"],
        ["{name}", "expected a power log", "without its Date and Time columns", "-o DT"],
    ),
    Case(
        "import-no-power-column",
        "nvidia-smi log without power.draw",
        (
            "text",
            {
                "name": "smi.csv",
                "text": "timestamp, index, utilization.gpu [%]\n" + T0 + ", 0, 5 %\n",
            },
        ),
        IMPORT,
        ["{name}", "missing power column 'power.draw'", "expected in watts", "found"],
    ),
    Case(
        "import-no-timestamp",
        "nvidia-smi log without a timestamp column",
        ("text", {"name": "smi.csv", "text": "index, power.draw [W]\n0, 250 W\n"}),
        IMPORT,
        ["{name}", "missing column 'timestamp'", "expected in every nvidia-smi log"],
    ),
    Case(
        "import-power-all-na",
        'nvidia-smi log whose power is "[N/A]" in every row',
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}, 0, [N/A], 400 W\n{T1}, 0, [N/A], 400 W\n",
            },
        ),
        IMPORT,
        [
            "{name}",
            "'power.draw [W]'",
            "expected watts in most rows",
            "got no reading in 2 of 2 row",
        ],
    ),
    Case(
        "import-non-numeric-power",
        "nvidia-smi log with a word in the power column",
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\n{T0}, 0, lots W, 400 W\n"}),
        IMPORT,
        ["{name}", "'power.draw [W]'", "non-numeric value 'lots W'", "expected a number"],
    ),
    Case(
        "import-truncated-row",
        "nvidia-smi log whose last line was cut off",
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\n{T0}, 0, 250 W, 400 W\n{T1}, 0\n"}),
        IMPORT,
        ["{name}", "line 3", "different number of fields than the header", "expected 4, got 2"],
    ),
    Case(
        "import-bad-timestamp",
        "nvidia-smi log with an unreadable timestamp",
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\nyesterday, 0, 250 W, 400 W\n"}),
        IMPORT,
        ["{name}", "'timestamp'", "'yesterday'", "expected 'YYYY/MM/DD HH:MM:SS.mmm'"],
    ),
    Case(
        "import-header-only",
        "nvidia-smi log with a header and no samples",
        ("text", {"name": "smi.csv", "text": NVSMI_HEADER + "\n"}),
        IMPORT,
        ["{name}", "expected at least one sample", "no rows"],
    ),
    Case(
        "import-gpu-index-na",
        'nvidia-smi log with "[N/A]" as the GPU index',
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\n{T0}, [N/A], 250 W, 400 W\n"}),
        IMPORT,
        ["{name}", "'index'", "expected a GPU index (a whole number) in every row", "[N/A]"],
    ),
    Case(
        "import-no-nameplate",
        "minimal nvidia-smi query without power.default_limit nor --nameplate-w",
        (
            "text",
            {"name": "smi.csv", "text": f"timestamp, index, power.draw [W]\n{T0}, 0, 250 W\n"},
        ),
        IMPORT,
        ["{name}", "power.default_limit", "--nameplate-w"],
    ),
    Case(
        "import-zero-nameplate",
        "nvidia-smi log imported with --nameplate-w 0",
        (
            "text",
            {"name": "smi.csv", "text": f"timestamp, index, power.draw [W]\n{T0}, 0, 250 W\n"},
        ),
        [*IMPORT, "--nameplate-w", "0"],
        ["{name}", "--nameplate-w", "expected watts > 0", "got 0"],
    ),
    Case(
        "import-negative-power",
        "nvidia-smi log with negative power",
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}, 0, 250 W, 400 W\n{T1}, 0, -12 W, 400 W\n",
            },
        ),
        IMPORT,
        ["{name}", "power.draw [W]", "expected watts >= 0", "-12 W"],
    ),
    Case(
        "import-dcgm-milliwatts",
        "DCGM log with power in milliwatts (250000 on a 400 W A100)",
        (
            "text",
            {"name": "dcgm.csv", "text": f"{DCGM_HEADER}\n0,0,A100,250000\n1,0,A100,262000\n"},
        ),
        [*IMPORT, "--format", "dcgm", "--nameplate-w", "400"],
        [
            "{name}",
            "DCGM_FI_DEV_POWER_USAGE",
            "expected watts at most 3 x the nameplate 400 W",
            "looks like milliwatts",
        ],
    ),
    Case(
        "import-dcgm-no-gpu-column",
        "DCGM log without its gpu column",
        ("text", {"name": "dcgm.csv", "text": "timestamp,DCGM_FI_DEV_POWER_USAGE\n0,250\n"}),
        [*IMPORT, "--format", "dcgm", "--nameplate-w", "400"],
        ["{name}", "missing column 'gpu'", "expected in every dcgm log"],
    ),
    Case(
        "import-unknown-format",
        "a log imported with --format csv",
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\n{T0}, 0, 250 W, 400 W\n"}),
        [*IMPORT, "--format", "csv"],
        [
            "Invalid value for '--format'",
            "'csv' is not one of 'auto', 'nvidia-smi', 'nvidia-smi-dmon', 'dcgm', 'prometheus'",
        ],
        EXIT_USAGE,
    ),
    # --- telemetry summary -------------------------------------------------------------------
    Case(
        "summary-missing-file",
        "trace path that does not exist",
        ("absent", {"name": "trace.parquet"}),
        SUMMARY,
        ["{name}", "no such file"],
    ),
    Case(
        "summary-csv-renamed",
        "a CSV log renamed .parquet",
        ("text", {"name": "trace.parquet", "text": f"{NVSMI_HEADER}\n{T0}, 0, 250 W, 400 W\n"}),
        SUMMARY,
        ["{name}", "not a readable Parquet file"],
    ),
    Case(
        "summary-milliwatts",
        "trace with power_w in milliwatts",
        ("trace", {"scale": 1000.0}),
        SUMMARY,
        [
            "{name}",
            "power_w",
            "expected watts at most 3 x the nameplate 400 W",
            "looks like milliwatts",
        ],
    ),
    Case(
        "summary-nan-power",
        "trace with NaN power",
        ("trace", {"set_power": [[100, "nan"]]}),
        SUMMARY,
        ["{name}", "power_w", "expected finite watts", "NaN"],
    ),
    Case(
        "summary-empty-trace",
        "trace with no samples",
        ("trace", {"rows": 0}),
        SUMMARY,
        ["{name}", "no samples", "expected at least one"],
    ),
    # --- windows -----------------------------------------------------------------------------
    Case(
        "windows-truncated-parquet",
        "real trace file cut in half",
        ("trace", {"cut": 0.5}),
        WINDOWS,
        ["{name}", "not a readable Parquet file"],
    ),
    Case(
        "windows-missing-file",
        "trace path that does not exist",
        ("absent", {"name": "trace.parquet"}),
        WINDOWS,
        ["{name}", "no such file"],
    ),
    Case(
        "windows-missing-column",
        "Parquet with 'watts' instead of power_w",
        ("trace", {"rename": {"power_w": "watts"}}),
        WINDOWS,
        ["{name}", "missing trace column(s) ['power_w']", "expected ["],
    ),
    Case(
        "windows-power-as-text",
        "trace whose power_w column holds strings",
        ("trace", {"as_text": "power_w"}),
        WINDOWS,
        ["{name}", "column 'power_w'", "expected numbers (double)", "got string"],
    ),
    Case(
        "windows-bad-metadata",
        "trace whose metadata says nameplate_w 0",
        ("trace", {"metadata": {"nameplate_w": 0}}),
        WINDOWS,
        ["{name}", "trace metadata: nameplate_w", "greater than 0", "got 0"],
    ),
    Case(
        "windows-milliwatts",
        "trace with power_w in milliwatts (250000 for a 400 W A100)",
        ("trace", {"scale": 1000.0}),
        WINDOWS,
        [
            "{name}",
            "power_w",
            "expected watts at most 3 x the nameplate 400 W",
            "looks like milliwatts",
        ],
    ),
    Case(
        "windows-nan-power",
        "trace with NaN power",
        ("trace", {"set_power": [[100, "nan"], [101, "nan"]]}),
        WINDOWS,
        ["{name}", "power_w", "expected finite watts", "2 sample(s) with NaN", "t = 10 s"],
    ),
    Case(
        "windows-negative-power",
        "trace with a negative power sample",
        ("trace", {"set_power": [[50, -3.0]]}),
        WINDOWS,
        ["{name}", "power_w", "expected watts >= 0", "-3 W", "t = 5 s"],
    ),
    Case(
        "windows-decreasing-time",
        "trace whose time goes backwards",
        ("trace", {"swap_t": 200}),
        WINDOWS,
        ["{name}", "decreasing timestamp", "t must increase strictly"],
    ),
    Case(
        "windows-duplicate-time",
        "trace with a repeated timestamp",
        ("trace", {"repeat_t": 200}),
        WINDOWS,
        ["{name}", "duplicated timestamp", "t must increase strictly"],
    ),
    Case(
        "windows-empty-trace",
        "trace with no samples",
        ("trace", {"rows": 0}),
        WINDOWS,
        ["{name}", "no samples", "expected at least one"],
    ),
    # --- fleet -------------------------------------------------------------------------------
    Case(
        "fleet-missing-folder",
        "windows output folder that does not exist",
        ("absent", {"name": "windows-a"}),
        FLEET,
        ["bins.parquet", "no such file", "grpo-power windows"],
    ),
    Case(
        "fleet-trace-not-bins",
        "a trace given where bins.parquet is expected",
        ("trace", {}),
        FLEET,
        ["{name}", "not a windows-stage bins file", "expected the bins.parquet"],
    ),
    Case(
        "fleet-bins-truncated",
        "bins.parquet cut in half",
        ("bins", {"cut": 0.5}),
        FLEET,
        ["bins.parquet", "not a readable Parquet file"],
    ),
    Case(
        "fleet-bins-metadata-missing-key",
        "bins.parquet whose metadata lacks bin_s",
        ("bins", {"drop_key": "bin_s"}),
        FLEET,
        ["bins.parquet", "bin_s", "expected the bins.parquet written by `grpo-power windows`"],
    ),
    Case(
        "fleet-bins-without-provenance",
        "bins.parquet whose metadata does not say whether its power is simulated",
        ("bins", {"drop_key": "simulated"}),
        FLEET,
        ["bins.parquet", "simulated", "expected the bins.parquet written by `grpo-power windows`"],
    ),
    Case(
        "fleet-bins-provenance-not-a-flag",
        "bins.parquet whose metadata says simulated: 'no'",
        ("bins", {"set_key": {"simulated": "no"}}),
        FLEET,
        ["bins.parquet", "simulated: expected true or false", "got 'no'"],
    ),
    Case(
        "fleet-bins-without-gpu-indices",
        "bins.parquet whose metadata lacks the trace's GPU numbers (an older windows output)",
        ("bins", {"drop_key": "gpu_indices"}),
        FLEET,
        ["bins.parquet", "gpu_indices", "expected the bins.parquet written by"],
    ),
    Case(
        "fleet-bins-negative-energy",
        "bins.parquet whose energies are negated",
        ("bins", {"energy_scale": -1.0}),
        FLEET,
        ["bins.parquet", "energy_j: expected a finite energy >= 0 J in every bin"],
    ),
    Case(
        "fleet-bin-width-mismatch",
        "bins of 0.25 s for a config with windows.bin_s 0.5",
        ("bins", {"set_key": {"bin_s": 0.25}}),
        FLEET,
        ["bins.parquet", "bins of 0.25 s", "windows.bin_s is 0.5 s"],
    ),
    Case(
        "fleet-same-run-twice",
        "one windows output given twice",
        ("bins", {}),
        ["fleet", "{input}", "{input}/bins.parquet", "--out", "{out}", "-c", "{config}"],
        ["bins.parquet", "run_id", "the same run is given twice", "expected each run"],
    ),
    # --- sim-windows, study-fleet ------------------------------------------------------------
    Case(
        "sim-windows-no-evaluation",
        "evaluation folder that does not exist",
        ("absent", {"name": "evaluate-study"}),
        ["sim-windows", "{input}", "--deployment", "72b", "--out", "{out}", "-c", "{config}"],
        ["summary.json", "no such file", "grpo-power evaluate"],
    ),
    Case(
        "study-fleet-missing-folder",
        "simulated windows folder that does not exist",
        ("absent", {"name": "windows-72b"}),
        ["study-fleet", "{input}", "--out", "{out}", "-c", "{config}"],
        ["summary.json", "no such file", "grpo-power sim-windows"],
    ),
    # --- identify ----------------------------------------------------------------------------
    Case(
        "identify-calibration-missing",
        "--calibration path that does not exist",
        ("absent", {"name": "calibration.json"}),
        [*IDENTIFY, "--calibration", "{input}"],
        ["{name}", "no calibration file", "grpo-power identify"],
    ),
    Case(
        "identify-calibration-not-json",
        "calibration file that is not JSON",
        ("text", {"name": "calibration.json", "text": "gpu: A100\n"}),
        [*IDENTIFY, "--calibration", "{input}"],
        ["{name}", "not valid JSON"],
    ),
    Case(
        "identify-calibration-wrong-kind",
        "an authority table given as the calibration",
        ("text", {"name": "calibration.json", "text": '{"rows": []}'}),
        [*IDENTIFY, "--calibration", "{input}"],
        ["{name}", "kind", "expected 'grpo-power simulator calibration'", "got None"],
    ),
    Case(
        "identify-calibration-out-of-range",
        "calibration whose decode time lies outside its own range",
        ("calibration", {"edit": {"deployments.7b.parameters.decode_base_ms.value": 1e6}}),
        [*IDENTIFY, "--calibration", "{input}"],
        ["{name}", "deployments.7b.decode_base_ms", "lies outside"],
    ),
    Case(
        "identify-calibration-other-deployment",
        "calibration of a 7b deployment on 2 GPUs (config: 1 GPU)",
        ("calibration", {"edit": {"deployments.7b.gpus": 2}}),
        [*IDENTIFY, "--calibration", "{input}"],
        [
            "{name}",
            "deployments.7b.gpus",
            "expected 1 (the config's deployment 7b",
            "got 2 (the calibration's deployment 7b",
        ],
    ),
    Case(
        "identify-run-without-trace",
        "--run folder with no trace.parquet",
        ("folder", {"name": "run-a"}),
        [*IDENTIFY, "--run", "{input}"],
        ["trace.parquet", "no such file"],
    ),
    Case(
        "identify-run-milliwatts",
        "--run folder whose trace is in milliwatts",
        ("run", {"trace": {"scale": 1000.0}}),
        [*IDENTIFY, "--run", "{input}"],
        ["trace.parquet", "power_w", "looks like milliwatts"],
    ),
    # --- controller train --------------------------------------------------------------------
    Case(
        "train-authority-missing",
        "--authority path that does not exist",
        ("absent", {"name": "authority.json"}),
        [*TRAIN, "--authority", "{input}"],
        ["{name}", "no authority table", "grpo-power identify"],
    ),
    Case(
        "train-authority-not-a-table",
        "authority.json whose rows lack the table's columns",
        ("text", {"name": "authority.json", "text": '{"rows": [{"x": 1}]}'}),
        [*TRAIN, "--authority", "{input}"],
        ["{name}", "rows[0]", "deployment", "expected an authority table"],
    ),
    Case(
        "train-authority-other-config",
        "authority.json of a config with other bounds (max new tokens held at 256)",
        (
            "text",
            {
                "name": "authority.json",
                "text": json.dumps(
                    {
                        "rows": [
                            {
                                "deployment": "7b",
                                "actuator": a,
                                "data": "simulated",
                                "authority": 0.3 if a == "concurrency" else 0.01,
                                "selected": a == "concurrency",
                                "hold_level": level,
                            }
                            for a, level in [
                                ("concurrency", 8),
                                ("max_new_tokens", 256),
                                ("train_micro_batch", 4),
                                ("pause_s", 0),
                            ]
                        ]
                    }
                ),
            },
        ),
        [*TRAIN, "--authority", "{input}"],
        [
            "{name}",
            "max_new_tokens on 7b",
            "hold_level 256",
            "workload.max_new_tokens_bounds [8, 64]",
        ],
    ),
    Case(
        "train-calibration-other-gpu",
        "calibration of a 700 W GPU (config: 400 W A100)",
        ("calibration", {"edit": {"gpu.nameplate_w": 700, "gpu.name": "NVIDIA H100 SXM5"}}),
        [*TRAIN, "--calibration", "{input}"],
        ["{name}", "gpu.name", "expected 'NVIDIA A100-SXM4-80GB'", "got 'NVIDIA H100 SXM5'"],
    ),
    Case(
        "train-calibration-other-board-power",
        "calibration of the 500 W board of the same part (config: 400 W)",
        ("calibration", {"edit": {"gpu.nameplate_w": 500}}),
        [*TRAIN, "--calibration", "{input}"],
        ["{name}", "gpu.nameplate_w", "expected 400 W", "got 500 W", "another GPU"],
    ),
    # --- evaluate ----------------------------------------------------------------------------
    Case(
        "evaluate-controller-missing",
        "controllers folder without a trained controller",
        ("folder", {"name": "controllers"}),
        [*EVALUATE, "--controllers", "{input}"],
        [
            "controller.json",
            "no trained PPO controller",
            "grpo-power controller train --deployment 7b",
        ],
    ),
    Case(
        "evaluate-controller-not-a-controller",
        "a calibration file saved as controller.json",
        ("controller", {"meta": "calibration"}),
        [*EVALUATE, "--controllers", "{input}"],
        [
            "controller.json",
            "kind",
            "expected 'grpo-power PPO controller'",
            "got 'grpo-power simulator calibration'",
        ],
    ),
    Case(
        "evaluate-controller-not-json",
        "controller.json that is not JSON",
        ("controller", {"meta": "{"}),
        [*EVALUATE, "--controllers", "{input}"],
        ["controller.json", "expected a PPO controller's controller.json", "invalid JSON"],
    ),
    Case(
        "evaluate-controller-other-deployment",
        "a 14b controller in the 7b controller's folder",
        ("controller", {"meta": {"deployment": "14b"}}),
        [*EVALUATE, "--controllers", "{input}"],
        ["controller.json", "deployment", "expected '7b'", "got '14b'"],
    ),
    Case(
        "evaluate-policy-not-npz",
        "policy.npz that is not a numpy archive",
        ("controller", {"meta": {}, "npz": "garbage"}),
        [*EVALUATE, "--controllers", "{input}"],
        ["policy.npz", "expected the actor's arrays", "unreadable file"],
    ),
    Case(
        "evaluate-controller-older-observation",
        "a controller trained on the 7-value observation of before the training-chunk actuator",
        ("controller", {"meta": {"observation": {"mean": [0.0] * 7}}}),
        [*EVALUATE, "--controllers", "{input}"],
        ["controller.json", "observation.mean", "expected 9 values", "got 7", "retrain"],
    ),
    Case(
        "evaluate-calibration-other-deployments",
        "calibration of deployments the config does not have (h100-8b)",
        ("calibration", {"rename": {"7b": "h100-8b", "14b": "h100-16b", "72b": "h100-80b"}}),
        [*EVALUATE, "--calibration", "{input}"],
        [
            "{name}",
            "deployments",
            "expected at least one of the config's ['14b', '72b', '7b']",
            "got ['h100-16b', 'h100-80b', 'h100-8b']",
        ],
    ),
    Case(
        "evaluate-unknown-scenario",
        "--scenario not in the config",
        ("config", {}),
        ["evaluate", "--out", "{out}", "-c", "{input}", "--scenario", "nope"],
        [
            "{name}",
            "evaluate.scenarios",
            "expected one of ['7b-cap-305w']",
            "got 'nope'",
        ],
    ),
    # --- economics ---------------------------------------------------------------------------
    Case(
        "economics-no-evaluate",
        "no evaluate stage output (the default folder is empty)",
        ("folder", {"name": "results"}),
        ["economics", "--out", "{out}", "-c", "{config}"],
        ["metrics.csv", "no such file", "grpo-power evaluate"],
    ),
    Case(
        "economics-run-without-the-study",
        "a measured run folder priced where no study ran (it needs the evaluate stage's)",
        ("run", {"manifest": COMPLETED, "steps": True}),
        ["economics", "--run", "{input}", "--out", "{out}", "-c", "{config}"],
        ["metrics.csv", "no such file", "sets the runs beside the study", "planner run"],
    ),
    Case(
        "report-run-without-the-study",
        "a measured run folder reported where no study ran",
        ("run", {"manifest": COMPLETED, "steps": True}),
        ["report", "--run", "{input}", "--out", "{out}", "-c", "{config}"],
        ["evaluate", "no such file", "sets the runs beside the study", "planner run"],
    ),
    Case(
        "economics-run-without-manifest",
        "--run folder without manifest.json",
        ("folder", {"name": "run-a"}),
        ["economics", "--run", "{input}", "--out", "{out}", "-c", "{config}"],
        ["manifest.json", "no such file", "grpo-power run"],
    ),
    Case(
        "economics-manifest-not-json",
        "--run folder whose manifest.json is not JSON",
        ("run", {"manifest": "{oops"}),
        ["economics", "--run", "{input}", "--out", "{out}", "-c", "{config}"],
        ["manifest.json", "expected a run folder's manifest.json", "invalid JSON"],
    ),
    Case(
        "economics-metrics-missing-column",
        "evaluate metrics.csv without output_tokens",
        ("metrics", {"drop": "output_tokens"}),
        ["economics", "--evaluate", "{input}", "--out", "{out}", "-c", "{config}"],
        ["metrics.csv", "output_tokens", "expected the evaluate stage's metrics.csv"],
    ),
    Case(
        "economics-fleet-missing",
        "valid evaluate metrics but no fleet stage output",
        ("metrics", {}),
        [
            "economics",
            "--evaluate",
            "{input}",
            "--fleet",
            "{dir}/fleet",
            "--out",
            "{out}",
            "-c",
            "{config}",
        ],
        ["summary.json", "no such file", "grpo-power fleet"],
    ),
    # --- report ------------------------------------------------------------------------------
    Case(
        "report-no-evaluate",
        "no evaluate stage output (the default folder is empty)",
        ("folder", {"name": "results"}),
        ["report", "--out", "{out}", "-c", "{config}"],
        ["evaluate/study/summary.csv", "no such file", "grpo-power evaluate"],
    ),
    Case(
        "report-run-without-manifest",
        "--run folder without manifest.json",
        ("folder", {"name": "run-a"}),
        ["report", "--run", "{input}", "--out", "{out}", "-c", "{config}"],
        ["manifest.json", "no such file", "grpo-power run"],
    ),
    # --- config (run, calibrate, windows) ----------------------------------------------------
    # --- run folders: resuming (run) ------------------------------------------------------
    Case(
        "run-folder-of-another-run",
        "--out folder holding an unfinished run of another seed",
        ("unfinished_run", {"seed": 1}),
        RESUME,
        ["{input}", "holds another run", "seed (was 1, now 0)", "--fresh"],
    ),
    Case(
        "run-resume-point-unreadable",
        "unfinished run whose resume.json is not JSON",
        ("unfinished_run", {"resume": "{not json"}),
        RESUME,
        ["{input}/resume.json", "not a resume point", "expected step, checkpoint and hook"],
    ),
    Case(
        "run-resume-point-without-checkpoint",
        "unfinished run whose resume.json names a checkpoint that is not there",
        ("unfinished_run", {"resume": '{"step": 4, "checkpoint": "checkpoint-4", "hook": {}}'}),
        RESUME,
        ["{input}/resume.json", "names checkpoint 'checkpoint-4'", "which is not in"],
    ),
    Case(
        "run-config-yaml-syntax",
        "config with a YAML syntax error",
        ("text", {"name": "bad.yaml", "text": "seed: [0\ncap_w: 320\n"}),
        RUN,
        ["{name}", "not valid YAML at line 2, column 6", "expected ',' or ']'"],
    ),
    Case(
        "run-config-wrong-type",
        "config with seed: abc",
        ("config", {"edit": {"seed": "abc"}}),
        RUN,
        ["{name}", "seed", "valid integer", "got 'abc'"],
    ),
    Case(
        "run-config-out-of-range",
        "config with telemetry.period_s: -1",
        ("config", {"edit": {"telemetry.period_s": -1}}),
        RUN,
        ["{name}", "telemetry.period_s", "greater than 0", "got -1"],
    ),
    Case(
        "run-config-unknown-key",
        "config with a misspelt key telemetry.perod_s",
        ("config", {"edit": {"telemetry.perod_s": 0.1}}),
        RUN,
        ["{name}", "telemetry.perod_s", "unknown key"],
    ),
    Case(
        "calibrate-config-missing",
        "config path that does not exist",
        ("absent", {"name": "missing.yaml"}),
        ["calibrate", "-c", "{input}"],
        ["{name}", "cannot read the config file"],
    ),
    Case(
        "calibrate-cap-above-nameplate",
        "config with cap_w 500 on a 400 W GPU",
        ("config", {"edit": {"cap_w": 500}}),
        ["calibrate", "-c", "{input}"],
        ["{name}", "cap_w", "above gpu.nameplate_w"],
    ),
    Case(
        "windows-config-not-a-mapping",
        "config that is a YAML list",
        ("text", {"name": "bad.yaml", "text": "- seed\n- cap_w\n"}),
        ["windows", "{dir}/trace.parquet", "--out", "{out}", "-c", "{input}"],
        ["{name}", "expected a mapping of settings", "got list"],
    ),
    # === issue 14: inputs that real logs contain ============================================
    # --- class 1: data that would be silently wrong (clock jumps, milliseconds, time zones) --
    Case(
        "import-clock-steps-back",
        "nvidia-smi log whose clock steps back (NTP, a reboot)",
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T1}{SMI_ROW}{T_BACK}{SMI_ROW}",
            },
        ),
        IMPORT,
        [
            "{name}",
            "gpu 0",
            "decreasing timestamp at line 4",
            "(line 3)",
            JUMP,
            "--split-on-clock-jumps",
        ],
    ),
    Case(
        "import-concatenated-logs",
        "two nvidia-smi recordings concatenated (header repeated, same times)",
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T1}{SMI_ROW}"
                f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T1}{SMI_ROW}",
            },
        ),
        IMPORT,
        ["{name}", "timestamp at line 5", "1 such line(s) (5)", JUMP],
    ),
    Case(
        "import-dcgm-time-unit-ambiguous",
        "DCGM log with relative numeric timestamps 20 apart (s or ms?)",
        (
            "text",
            {
                "name": "dcgm.csv",
                "text": f"{DCGM_HEADER}\n0,0,A100,250\n20,0,A100,251\n40,0,A100,252\n",
            },
        ),
        [*IMPORT, "--format", "dcgm", "--nameplate-w", "400"],
        ["{name}", "timestamp", "cannot tell the time unit", "a 20 s or a 20 ms period"],
    ),
    Case(
        "import-timezone-unknown",
        "--timezone that is not a time zone",
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}"}),
        [*IMPORT, "--timezone", "Mars/Olympus"],
        ["--timezone", "expected an IANA time zone name", "got 'Mars/Olympus'"],
    ),
    Case(
        "import-local-time-that-does-not-exist",
        "nvidia-smi local times in the hour skipped by daylight saving (Europe/Berlin)",
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\n2025/03/30 02:30:00.000{SMI_ROW}"}),
        [*IMPORT, "--timezone", "Europe/Berlin"],
        [
            "{name}",
            "the local time 2025-03-30 02:30:00 (line 2, gpu 0) falls in the hour the clocks skip",
            "in time zone Europe/Berlin",
            "--timezone",
        ],
    ),
    Case(
        "import-local-time-that-repeats",
        "nvidia-smi log of two GPUs within the hour repeated when the clocks go back (Europe/"
        "Berlin): nothing says which pass it is",
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n2025/10/26 02:30:00.000{SMI_ROW}"
                "2025/10/26 02:30:00.000, 1, 250 W, 400 W\n"
                f"2025/10/26 02:31:00.000{SMI_ROW}2025/10/26 02:31:00.000, 1, 250 W, 400 W\n",
            },
        ),
        [*IMPORT, "--timezone", "Europe/Berlin"],
        [
            "{name}",
            "the local time 2025-10-26 02:30:00 (line 2, gpu 0) falls in the hour repeated when "
            "the clocks go back",
            "do not show which pass it is in",
            "a log in UTC or with UTC offsets",
        ],
    ),
    Case(
        "summary-duplicate-time",
        "trace with a repeated timestamp (passed summary before)",
        ("trace", {"repeat_t": 200}),
        SUMMARY,
        ["{name}", "duplicated timestamp at row 202", "(row 201)", JUMP, "--split-on-clock-jumps"],
    ),
    Case(
        "summary-decreasing-time",
        "trace whose time goes backwards (passed summary before)",
        ("trace", {"swap_t": 200}),
        SUMMARY,
        ["{name}", "decreasing timestamp at row 202", JUMP],
    ),
    Case(
        "windows-time-unit-ambiguous",
        "trace without metadata whose t is 20 apart (a 20 s or a 20 ms period?)",
        ("trace", {"metadata": None, "t_scale": 200.0}),
        WINDOWS,
        ["{name}", "t: cannot tell the time unit", "telemetry.period_s"],
    ),
    Case(
        "identify-run-clock-jump",
        "--run folder whose trace repeats a timestamp",
        ("run", {"trace": {"repeat_t": 10}}),
        [*IDENTIFY, "--run", "{input}"],
        ["trace.parquet", "duplicated timestamp at row 12", JUMP],
    ),
    Case(
        "economics-run-clock-jump",
        "--run folder of a completed run whose trace steps back",
        ("run", {"trace": {"swap_t": 10}, "manifest": COMPLETED}),
        [*ECONOMICS, "--run", "{input}"],
        ["trace.parquet", "decreasing timestamp at row 12", JUMP],
    ),
    Case(
        "report-run-clock-jump",
        "--run folder whose trace steps back",
        ("run", {"trace": {"swap_t": 10}, "manifest": COMPLETED}),
        [*REPORT, "--run", "{input}"],
        ["trace.parquet", "decreasing timestamp at row 12", JUMP],
    ),
    Case(
        "fleet-given-a-run-folder",
        "a run folder given to fleet instead of its windows output",
        ("run", {}),
        FLEET,
        [
            "{name}",
            "a run folder (it holds trace.parquet), not a windows output",
            "grpo-power windows",
        ],
    ),
    # --- class 2: good files are read; refused only where missing readings dominate ---------
    Case(
        "import-power-mostly-na",
        'nvidia-smi log whose power is "[N/A]" in 2 of 3 rows',
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}, 0, [N/A], 400 W\n"
                f"{T1}, 0, [N/A], 400 W\n{T2}{SMI_ROW}",
            },
        ),
        IMPORT,
        [
            "{name}",
            "expected watts in most rows",
            "a missing reading becomes a gap",
            "got no reading in 2 of 3 row(s)",
        ],
    ),
    Case(
        "import-one-gpu-all-na",
        'nvidia-smi log whose GPU 1 is "[N/A]" in every row',
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T0}, 1, [N/A], 400 W\n"
                f"{T1}{SMI_ROW}{T2}{SMI_ROW}",
            },
        ),
        IMPORT,
        ["{name}", "got no reading in 1 of 4 row(s)", "gpu 1: every one of its rows"],
    ),
    Case(
        "summary-log-given-as-trace-csv",
        "an nvidia-smi log given to summary as a CSV trace",
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}"}),
        SUMMARY,
        ["{name}", "a log with a timestamp column, not a trace CSV", "telemetry import"],
    ),
    Case(
        "windows-csv-trace-without-power",
        "CSV trace with t and gpu but no power_w",
        ("text", {"name": "trace.csv", "text": "t,gpu,watts\n0,0,250\n0.1,0,251\n"}),
        WINDOWS,
        ["{name}", "missing trace column(s) ['power_w']", "optional:"],
    ),
    Case(
        "windows-csv-trace-word-in-power",
        "CSV trace with a word in power_w",
        ("text", {"name": "trace.csv", "text": "t,gpu,power_w\n0,0,250\n0.1,0,lots\n"}),
        WINDOWS,
        ["{name}", "column 'power_w'", "expected numbers", "'lots' at line 3"],
    ),
    # --- class 3: OSError and bad paths: one line, exit 2, for every subcommand -------------
    Case(
        "import-log-is-a-folder",
        "a folder given as the log",
        ("folder", {"name": "smi.csv"}),
        IMPORT,
        ["{name}", "is a folder", SMI_EXPECTED],
    ),
    Case(
        "import-out-is-a-folder",
        "--out an existing folder",
        ("folder", {"name": "traces"}),
        ["telemetry", "import", "{dir}/smi.csv", "--out", "{input}"],
        ["{name}", "is a folder; expected an output file"],
    ),
    Case(
        "import-out-inside-a-file",
        "--out inside a path that is a file",
        ("text", {"name": "notes.txt", "text": "x"}),
        ["telemetry", "import", "{dir}/smi.csv", "--out", "{input}/trace.parquet"],
        ["{name}", "is a file, not a folder", "cannot write"],
    ),
    Case(
        "summary-trace-inside-a-file",
        "trace path below a file",
        ("text", {"name": "notes.txt", "text": "x"}),
        ["telemetry", "summary", "{input}/trace.parquet"],
        ["{name}", "is a file, not a folder", "expected a folder holding trace.parquet"],
    ),
    Case(
        "windows-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["windows", "{dir}/trace.parquet", "--out", "{input}", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "fleet-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["fleet", "{dir}/windows-a", "--out", "{input}", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "identify-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["identify", "--out", "{input}", "--real-sweep-steps", "0", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "train-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["controller", "train", "--deployment", "7b", "--out", "{input}", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "evaluate-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["evaluate", "--out", "{input}", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "economics-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["economics", "--out", "{input}", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "report-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["report", "--out", "{input}", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "run-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["run", "--arm", "fixed", "--out", "{input}", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "sweep-out-is-a-file",
        "--out an existing file",
        ("text", {"name": "out.txt", "text": "x"}),
        ["sweep", "--out", "{input}", "-c", "{config}"],
        ["{name}", "is a file; expected an output folder"],
    ),
    Case(
        "record-out-is-a-folder",
        "--out an existing folder",
        ("folder", {"name": "traces"}),
        ["telemetry", "record", "--out", "{input}", "-c", "{config}", "--", "true"],
        ["{name}", "is a folder; expected an output file"],
    ),
    Case(
        "calibrate-config-is-a-folder",
        "a folder given as the config",
        ("folder", {"name": "config"}),
        ["calibrate", "-c", "{input}"],
        ["{name}", "is a folder; expected a YAML config file"],
    ),
    # --- class 4: numbers through the config's types (finite, in range) ---------------------
    Case(
        "train-cap-zero",
        "controller train --cap-w 0",
        ("absent", {"name": "authority.json"}),
        [*TRAIN, "--cap-w", "0", "--authority", "{input}"],
        ["--cap-w", "expected watts > 0", "as the config's cap_w", "got 0"],
    ),
    Case(
        "train-cap-nan",
        "controller train --cap-w nan",
        ("absent", {"name": "authority.json"}),
        [*TRAIN, "--cap-w", "nan", "--authority", "{input}"],
        ["--cap-w", "finite", "got nan"],
    ),
    Case(
        "train-cap-above-nameplate",
        "controller train --cap-w 500 on a 400 W GPU",
        ("absent", {"name": "authority.json"}),
        [*TRAIN, "--cap-w", "500", "--authority", "{input}"],
        ["--cap-w", "above gpu.nameplate_w (400.0 W)", "got 500"],
    ),
    Case(
        "train-timesteps-too-few",
        "controller train --timesteps 10",
        ("absent", {"name": "authority.json"}),
        [*TRAIN, "--timesteps", "10", "--authority", "{input}"],
        ["--timesteps", "expected steps >= 64", "controller.total_timesteps", "got 10"],
    ),
    Case(
        "evaluate-cap-inf",
        "evaluate --cap-w inf",
        ("folder", {"name": "controllers"}),
        [*EVALUATE, "--cap-w", "inf", "--controllers", "{input}"],
        ["--cap-w", "finite", "got inf"],
    ),
    Case(
        "evaluate-cap-negative",
        "evaluate --cap-w -5",
        ("folder", {"name": "controllers"}),
        [*EVALUATE, "--cap-w", "-5", "--controllers", "{input}"],
        ["--cap-w", "expected watts > 0", "got -5"],
    ),
    Case(
        "import-nameplate-inf",
        "telemetry import --nameplate-w inf (written as null before)",
        (
            "text",
            {"name": "smi.csv", "text": f"timestamp, index, power.draw [W]\n{T0}, 0, 250 W\n"},
        ),
        [*IMPORT, "--nameplate-w", "inf"],
        ["{name}", "--nameplate-w", "finite", "got inf"],
    ),
    Case(
        "record-period-zero",
        "telemetry record --period 0",
        ("config", {}),
        ["telemetry", "record", "--period", "0", "-c", "{input}", "--", "true"],
        ["--period", "expected seconds > 0 and <= 60", "telemetry.period_s", "got 0"],
    ),
    Case(
        "run-steps-zero",
        "run --steps 0",
        ("config", {}),
        [*RUN, "--steps", "0"],
        ["--steps", "expected steps >= 1", "workload.steps", "got 0"],
    ),
    Case(
        "run-seed-negative",
        "run --seed -1",
        ("config", {}),
        [*RUN, "--seed", "-1"],
        ["--seed", ">= 0", "got -1"],
    ),
    Case(
        "identify-sweep-steps-negative",
        "identify --real-sweep-steps -1",
        ("config", {}),
        ["identify", "--out", "{out}", "--real-sweep-steps", "-1", "-c", "{input}"],
        ["--real-sweep-steps", "expected steps >= 0", "got -1"],
    ),
    Case(
        "sweep-steps-zero",
        "sweep --steps 0",
        ("config", {}),
        ["sweep", "--out", "{out}", "--steps", "0", "-c", "{input}"],
        ["--steps", "expected steps >= 1", "got 0"],
    ),
    Case(
        "windows-config-window-overflows",
        "config with windows.windows_s: [30, 1e308] (overflowed before)",
        ("config", {"edit": {"windows.windows_s": [30.0, 1e308]}}),
        ["windows", "{dir}/trace.parquet", "--out", "{out}", "-c", "{input}"],
        ["{name}", "windows.windows_s.1", "less than or equal to 604800"],
    ),
    Case(
        "calibrate-config-nan-cap",
        "config with cap_w: .nan",
        ("config", {"edit": {"cap_w": float("nan")}}),
        ["calibrate", "-c", "{input}"],
        ["{name}", "cap_w", "finite number", "got nan"],
    ),
    # --- class 5: config files ----------------------------------------------------------------
    Case(
        "run-config-duplicate-key",
        "config naming seed twice (YAML keeps the second silently)",
        ("text", {"name": "dup.yaml", "text": "seed: 0\ncap_w: 300\nseed: 1\n"}),
        RUN,
        ["{name}", "line 3", "duplicate key 'seed'", "first at line 1"],
    ),
    Case(
        "windows-config-yaml-syntax",
        "config with an unclosed list",
        ("text", {"name": "bad.yaml", "text": "windows:\n  windows_s: [30, 60\nseed: 0\n"}),
        ["windows", "{dir}/trace.parquet", "--out", "{out}", "-c", "{input}"],
        ["{name}", "not valid YAML at line 3"],
    ),
    Case(
        "evaluate-config-two-bad-fields",
        "config with two bad fields (one line each, file first)",
        ("config", {"edit": {"telemetry.period_s": -1, "seed": -2}}),
        ["evaluate", "--out", "{out}", "-c", "{input}"],
        [
            "{name}: seed: Input should be greater than or equal to 0",
            "\n{input}: telemetry.period_s: Input should be greater than 0",
        ],
        lines=2,
    ),
    Case(
        "summary-config-with-bom-and-duplicate",
        "summary -c config with a byte-order mark and a duplicate key",
        ("text", {"name": "dup.yaml", "text": "\ufeffcap_w: 300\ncap_w: 310\n"}),
        ["telemetry", "summary", "{dir}/trace.parquet", "-c", "{input}"],
        ["{name}", "line 2", "duplicate key 'cap_w'", "first at line 1"],
    ),
    # --- class 6: a run folder where a trace is expected, and the reverse --------------------
    Case(
        "summary-run-folder-as-trace",
        "a run folder given as the trace",
        ("run", {}),
        SUMMARY,
        ["{name}", "is a folder; expected a trace file", "did you mean {input}/trace.parquet?"],
    ),
    Case(
        "windows-run-folder-as-trace",
        "a run folder given as the trace",
        ("run", {}),
        WINDOWS,
        ["{name}", "is a folder; expected a trace file", "did you mean {input}/trace.parquet?"],
    ),
    Case(
        "identify-run-is-a-trace-file",
        "--run given the trace file instead of its run folder",
        ("trace", {}),
        [*IDENTIFY, "--run", "{input}"],
        ["{name}", "is a file, not a folder", "expected a folder holding trace.parquet"],
    ),
    Case(
        "economics-run-is-a-trace-file",
        "--run given the trace file instead of its run folder",
        ("trace", {}),
        [*ECONOMICS, "--run", "{input}"],
        ["{name}", "is a file, not a folder", "expected a folder holding manifest.json"],
    ),
]


# --------------------------------------------------------------------------------------------
# builders: (context, parameters) -> the input path


@dataclass
class Context:
    """A case's folder, with a valid config whose results folder lies inside it."""

    dir: Path
    config: Path = field(init=False)

    def __post_init__(self) -> None:
        data = _default_config()
        data["results_dir"] = str(self.dir / "results")
        self.config = self.dir / "config.yaml"
        self.config.write_text(yaml.safe_dump(data))


def _default_config() -> dict[str, Any]:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data.setdefault(key, {})
    data[last] = value


def build_absent(ctx: Context, name: str) -> Path:
    return ctx.dir / name


def build_folder(ctx: Context, name: str) -> Path:
    (ctx.dir / name).mkdir(parents=True, exist_ok=True)
    return ctx.dir / name


def build_text(ctx: Context, name: str, text: str) -> Path:
    (ctx.dir / name).write_text(text)
    return ctx.dir / name


def build_bytes(ctx: Context, name: str) -> Path:
    (ctx.dir / name).write_bytes(bytes(range(256)) * 8)
    return ctx.dir / name


def _trace_frame(rows: int = 600) -> pd.DataFrame:
    """One A100 for 60 s at 0.1 s: 250 W with a slow swing."""
    t_s = np.arange(rows) * 0.1
    frame = pd.DataFrame({name: np.full(rows, np.nan) for name in TRACE_COLUMNS})
    frame["t"] = t_s
    frame["gpu"] = np.zeros(rows, dtype=np.int32)
    frame["power_w"] = 250.0 + 50.0 * np.sin(t_s)
    frame["power_limit_w"] = 400.0
    return frame


def _trace_metadata() -> TraceMetadata:
    return TraceMetadata(
        run_id="run-a",
        source="nvml",
        gpu_name="NVIDIA A100-SXM4-40GB",
        nameplate_w=400.0,
        sample_period_s=0.1,
        host="test",
        start_unix_s=1_700_000_000.0,
    )


def build_trace(
    ctx: Context,
    name: str = "trace.parquet",
    rows: int = 600,
    scale: float = 1.0,
    t_scale: float = 1.0,
    only_required: bool = False,
    set_power: list[list[Any]] | None = None,
    swap_t: int | None = None,
    repeat_t: int | None = None,
    cut: float | None = None,
    rename: dict[str, str] | None = None,
    as_text: str | None = None,
    metadata: Any = "valid",
) -> Path:
    """A trace written by the store (so a real trace file), then damaged as asked."""
    path = ctx.dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = _trace_frame(rows)
    frame["power_w"] *= scale
    frame["t"] *= t_scale
    if swap_t is not None:
        t = frame["t"].to_numpy().copy()
        t[swap_t], t[swap_t + 1] = t[swap_t + 1], t[swap_t]
        frame["t"] = t
    if repeat_t is not None:
        frame.loc[repeat_t + 1, "t"] = frame.loc[repeat_t, "t"]
    write_trace(path, frame, _trace_metadata())
    if set_power or rename or as_text or metadata != "valid" or only_required:
        table = pq.read_table(path)
        if only_required:  # what a user exports from their own tools
            table = table.select(["t", "gpu", "power_w"])
        meta = json.loads(table.schema.metadata[TRACE_METADATA_KEY])
        if set_power:  # NaN kept as NaN, not null (the store would write null)
            power = table.column("power_w").to_numpy().copy()
            for index, value in set_power:
                power[index] = float(value)
            i = table.column_names.index("power_w")
            table = table.set_column(i, table.schema.field(i), pa.array(power))
        if rename:
            table = table.rename_columns([rename.get(n, n) for n in table.column_names])
        if as_text:
            i = table.column_names.index(as_text)
            text = pa.array([f"{v:.1f} W" for v in table.column(as_text).to_pylist()])
            table = table.set_column(i, as_text, text)
        meta.update(metadata if isinstance(metadata, dict) else {})
        kept = {} if metadata is None else {TRACE_METADATA_KEY: json.dumps(meta).encode()}
        pq.write_table(table.replace_schema_metadata(kept), path)
    if cut is not None:
        data = path.read_bytes()
        path.write_bytes(data[: int(len(data) * cut)])
    return path


def build_bins(
    ctx: Context,
    cut: float | None = None,
    drop_key: str | None = None,
    set_key: dict[str, Any] | None = None,
    trace: dict[str, Any] | None = None,
    energy_scale: float | None = None,
) -> Path:
    """A real windows-stage output folder (``windows-a/bins.parquet``) of a trace built with
    ``trace`` (see :func:`build_trace`), then damaged (``energy_scale``: every bin's energy
    times it)."""
    trace_path = build_trace(ctx, name="run-a.parquet", **(trace or {}))
    folder = ctx.dir / "windows-a"
    run_windows(trace_path, folder, load_config(ctx.config))
    bins = folder / "bins.parquet"
    if drop_key or set_key or energy_scale is not None:
        table = pq.read_table(bins)
        info = json.loads(table.schema.metadata[BINS_METADATA_KEY])
        info.pop(drop_key, None)
        info.update(set_key or {})
        if energy_scale is not None:
            at = table.schema.get_field_index("energy_j")
            energy_j = pc.multiply(table.column(at), energy_scale)
            table = table.set_column(at, "energy_j", energy_j)
        table = table.replace_schema_metadata({BINS_METADATA_KEY: json.dumps(info).encode()})
        pq.write_table(table, bins)
    if cut is not None:
        data = bins.read_bytes()
        bins.write_bytes(data[: int(len(data) * cut)])
    return folder


def _calibration_data(ctx: Context) -> dict[str, Any]:
    return default_calibration(load_config(ctx.config)).to_dict()


def build_calibration(
    ctx: Context, edit: dict[str, Any] | None = None, rename: dict[str, str] | None = None
) -> Path:
    """The sourced default calibration of the config, edited."""
    data = _calibration_data(ctx)
    for dotted, value in (edit or {}).items():
        _set(data, dotted, value)
    for old, new in (rename or {}).items():
        data["deployments"][new] = data["deployments"].pop(old)
    path = ctx.dir / "calibration.json"
    path.write_text(json.dumps(data))
    return path


def build_config(ctx: Context, edit: dict[str, Any] | None = None) -> Path:
    """The repository's default config with some values set (dotted keys)."""
    data = _default_config()
    data["results_dir"] = str(ctx.dir / "results")
    for dotted, value in (edit or {}).items():
        _set(data, dotted, value)
    path = ctx.dir / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def build_controller(ctx: Context, meta: Any, npz: str = "valid") -> Path:
    """A controllers folder whose ``7b/`` holds the given controller.json and a policy.npz.

    ``meta``: text, ``"calibration"`` (a calibration file's content), or a dict merged into a
    minimal controller.json of deployment 7b.
    """
    folder = ctx.dir / "controllers" / "7b"
    folder.mkdir(parents=True)
    if meta == "calibration":
        text = json.dumps(_calibration_data(ctx))
    elif isinstance(meta, dict):
        minimal = {"kind": "grpo-power PPO controller", "deployment": "7b"}
        text = json.dumps({**minimal, "space": {}, "observation": {}, **meta})
    else:
        text = str(meta)
    (folder / "controller.json").write_text(text)
    if npz == "valid":
        np.savez(folder / "policy.npz", w0=np.zeros((1, 7)), b0=np.zeros(1), activations=[])
    else:
        (folder / "policy.npz").write_bytes(b"not a numpy archive")
    return folder.parent


def build_run(
    ctx: Context,
    trace: dict[str, Any] | None = None,
    manifest: str | None = None,
    steps: bool = False,
) -> Path:
    """A run folder ``run-a/`` with a trace (damaged as ``trace`` says), a manifest text and,
    with ``steps``, a step log of two steps."""
    folder = ctx.dir / "run-a"
    build_trace(ctx, name="run-a/trace.parquet", **(trace or {}))
    if manifest is not None:
        (folder / "manifest.json").write_text(manifest)
    if steps:
        log = StepLogWriter(folder / "steps.parquet", "run-a", simulated_power=True)
        log.write([{"step": 1, "completion_tokens": 400}, {"step": 2, "completion_tokens": 600}])
        log.close(True)
    return folder


def build_unfinished_run(ctx: Context, seed: int = 0, resume: str | None = None) -> Path:
    """A folder ``run-fixed/`` with the unfinished manifest of a fixed-arm run of the case's
    config and ``seed``, and a resume point with the text ``resume``."""
    folder = ctx.dir / "run-fixed"
    config = load_config(ctx.config)
    manifest = RunManifest.create(
        folder / "manifest.json", config, "fixed", seed, {"steps_planned": config.workload.steps}
    )
    folder.mkdir()
    manifest.write()
    if resume is not None:
        (folder / "resume.json").write_text(resume)
    return folder


def build_metrics(ctx: Context, drop: str | None = None) -> Path:
    """An evaluate folder whose metrics.csv has two arms x two seeds of one deployment."""
    rows = [
        {
            "deployment": "7b",
            "arm": arm,
            "seed": seed,
            "gpus": 1,
            "output_tokens": 1.0e5 + 1000 * seed + (5000 if arm == "ppo" else 0),
            "energy_j": 200_000.0,
            "budget_s": 900.0,
            "violation_rate": 0.01,
            "exceedance": 0.0,
        }
        for arm in ("fixed", "ppo")
        for seed in (0, 1)
    ]
    frame = pd.DataFrame(rows)
    if drop:
        frame = frame.drop(columns=[drop])
    folder = ctx.dir / "evaluate"
    folder.mkdir()
    frame.to_csv(folder / "metrics.csv", index=False)
    return folder


BUILDERS = {
    "absent": build_absent,
    "folder": build_folder,
    "text": build_text,
    "bytes": build_bytes,
    "trace": build_trace,
    "bins": build_bins,
    "calibration": build_calibration,
    "config": build_config,
    "controller": build_controller,
    "run": build_run,
    "unfinished_run": build_unfinished_run,
    "metrics": build_metrics,
}


# --------------------------------------------------------------------------------------------
# running a case


@dataclass
class Outcome:
    """What a command did: exit code, its stderr, files it added, the expanded command."""

    exit_code: int
    message: str
    exception: BaseException | None
    added: list[str]
    command: list[str]
    expect: list[str]


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``folder`` with its size and modification time (folders: 0, 0)."""
    out = {}
    for p in folder.rglob("*"):
        stat = p.stat()
        out[str(p.relative_to(folder))] = (0, 0) if p.is_dir() else (stat.st_size, stat.st_mtime_ns)
    return out


def _changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """Paths added or changed (a file written over counts as much as a new one)."""
    return sorted(p for p, v in after.items() if before.get(p) != v)


def run_case(case: Case, folder: Path) -> Outcome:
    """Build the case's input in ``folder``, run its command in-process, report the outcome."""
    folder.mkdir(parents=True, exist_ok=True)
    ctx = Context(folder)
    builder, params = case.build
    path = BUILDERS[builder](ctx, **params)
    values = {
        "input": str(path),
        "name": path.name,
        "out": str(folder / "out"),
        "config": str(ctx.config),
        "dir": str(folder),
    }
    command = [part.format(**values) for part in case.command]
    expect = [part.format(**values) for part in case.expect]
    before = _files(folder)
    result = CliRunner().invoke(app, command)
    added = _changed(before, _files(folder))
    return Outcome(result.exit_code, result.stderr, result.exception, added, command, expect)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_clearly_and_leaves_nothing(case: Case, tmp_path: Path) -> None:
    outcome = run_case(case, tmp_path / case.id)
    assert outcome.exit_code == case.exit_code, outcome.message
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit), (
        f"unhandled {outcome.exception!r}"
    )
    if case.exit_code == EXIT_USAGE:
        assert outcome.message.startswith("Usage: ") and "\nError: " in outcome.message
    else:
        assert outcome.message.startswith("error: "), outcome.message
        assert len(outcome.message.strip().splitlines()) == case.lines, outcome.message
    assert "Traceback" not in outcome.message
    missing = [s for s in outcome.expect if s not in outcome.message]
    assert not missing, f"{missing} not in: {outcome.message}"
    assert not outcome.added, f"left behind: {outcome.added}"


def test_catalog_is_broad() -> None:
    """Distinct cases over every subcommand that reads user files or numbers (75 before issue
    14, which added at least one per class and subcommand)."""
    assert len(CASES) >= 120 and len({c.id for c in CASES}) == len(CASES)
    commands = {
        " ".join(c.command[:2]) if c.command[0] in ("telemetry", "controller") else c.command[0]
        for c in CASES
    }
    assert commands >= {
        "telemetry import",
        "telemetry summary",
        "windows",
        "fleet",
        "identify",
        "controller train",
        "evaluate",
        "economics",
        "report",
        "run",
        "calibrate",
        "sweep",
        "telemetry record",
    }


def test_the_console_entry_point_exits_2_with_the_message_on_stderr(tmp_path: Path) -> None:
    """One case through ``python -m grpo_power.cli``: the real exit code and stream."""
    ctx = Context(tmp_path)
    cli = [sys.executable, "-m", "grpo_power.cli"]
    path = build_trace(ctx, scale=1000.0)
    result = subprocess.run(
        [*cli, "windows", str(path), "--out", str(tmp_path / "o"), "-c", str(ctx.config)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert "looks like milliwatts" in result.stderr and "Traceback" not in result.stderr
    assert path.name in result.stderr
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------------------------
# issue 14: inputs that real logs contain and that must be read (a note says what was inferred)


def csv_trace(rows: int = 600, t0: float = 0.0, bom: bool = False) -> str:
    """A trace CSV with only t, gpu, power_w (what a user exports from their own tools)."""
    lines = ["t,gpu,power_w"] + [f"{t0 + 0.1 * i:.1f},0,{250 + (i % 7)}" for i in range(rows)]
    return ("\ufeff" if bom else "") + "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Accepted:
    """A real-world input that must be read: exit 0, the output written, and notes (stdout or
    stderr) that say what the reader inferred or repaired."""

    id: str
    input: str
    build: tuple[str, dict[str, Any]]
    command: list[str]
    notes: list[str]  # substrings of the output
    writes: list[str] = field(default_factory=list)  # paths that must exist afterwards


SMI_INSTANT = "timestamp, index, power.draw.instant [W], power.draw [W], power.default_limit [W]"
ACCEPTED: list[Accepted] = [
    Accepted(
        "import-energy-counter-restart",
        "DCGM CSV whose total-energy counter restarts (a driver reload, a GPU reset): it steps "
        "back from 5,000,250 J to 1 J",
        (
            "text",
            {
                "name": "dcgm.csv",
                "text": f"{DCGM_HEADER},DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\n"
                + "".join(
                    f"{1772366400 + i},0,NVIDIA A100-SXM4-80GB,250,{mj}\n"
                    for i, mj in enumerate((5_000_000_000, 5_000_250_000, 1_000, 251_000))
                ),
            },
        ),
        IMPORT,
        [
            "imported 4 samples of 1 GPU(s)",
            "the energy counter steps back (gpu 0: 1 time(s), first at line 4; restarted:",
            "counted on across each restart, its interval by integrated power",
        ],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "import-dcgm-nan-reading",
        "DCGM CSV with a NaN power reading (as Go and Prometheus write no value): a missing "
        "sample, as a Prometheus answer's NaN is",
        (
            "text",
            {
                "name": "dcgm.csv",
                "text": f"{DCGM_HEADER}\n"
                + "".join(
                    f"{1772366400 + i},0,NVIDIA A100-SXM4-80GB,{power}\n"
                    for i, power in enumerate(("250", "NaN", "251"))
                ),
            },
        ),
        IMPORT,
        ["imported 2 samples of 1 GPU(s)", "1 missing power reading(s)", "first at line 3"],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "summary-energy-counter-restart",
        "trace CSV whose energy counter restarts: 3 s at 250 W is 750 J, not the counter's last "
        "minus first (150 J), nor negative",
        (
            "text",
            {
                "name": "t.csv",
                "text": "t,gpu,power_w,energy_j\n0,0,250,100\n1,0,250,350\n"
                "2,0,250,0\n3,0,250,250\n",
            },
        ),
        SUMMARY,
        [
            "0 4 3.00 3.00 750.00 0.21 counter 250.00",
            "the energy counter steps back (gpu 0: 1 time(s)",
        ],
    ),
    Accepted(
        "import-byte-order-mark",
        "nvidia-smi log saved with a UTF-8 byte-order mark (Excel, PowerShell)",
        ("text", {"name": "smi.csv", "text": f"\ufeff{NVSMI_HEADER}\n{T0}{SMI_ROW}{T1}{SMI_ROW}"}),
        IMPORT,
        ["imported 2 samples of 1 GPU(s)"],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "import-one-missing-reading",
        'nvidia-smi log with one "[N/A]" power reading of three',
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T1}, 0, [N/A], 400 W\n{T2}{SMI_ROW}",
            },
        ),
        IMPORT,
        [
            "imported 2 samples",
            "1 missing power reading(s)",
            "first at line 3",
            "never interpolated",
        ],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "import-gpu-lost",
        'a GPU fallen off the bus: nvidia-smi writes "[GPU is lost]" in its every field from then '
        "on (NVIDIA Xid 79), at times its index too; a GPU lost before the log began",
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T0}, 1, 260 W, 400 W\n"
                f"{T0}, 2, [GPU is lost], [GPU is lost]\n{T1}{SMI_ROW}"
                f"{T1}, 1, [GPU is lost], [GPU is lost]\n{T1}, 2, [GPU is lost], [GPU is lost]\n"
                f"{T2}{SMI_ROW}{T2}, 1, [GPU is lost], [GPU is lost]\n"
                f"{T2}, [GPU is lost], [GPU is lost], [GPU is lost]\n",  # its index too
            },
        ),
        IMPORT,
        [
            "imported 4 samples of 2 GPU(s)",
            "gpu 1 is lost",
            "in 2 row(s) from line 6",
            "gpu 2 is lost",
            "every one of its rows: it is left out",
            "1 row(s) of a lost GPU that name no GPU ([GPU is lost] in 'index', first at line 10)",
        ],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "import-instant-column-all-na",
        'power.draw.instant "[N/A]" in every row, power.draw valid',
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{SMI_INSTANT}\n{T0}, 0, [N/A], 250 W, 400 W\n"
                f"{T1}, 0, [N/A], 251 W, 400 W\n",
            },
        ),
        IMPORT,
        [
            "imported 2 samples",
            "power from 'power.draw [W]'",
            "'power.draw.instant [W]' is [N/A] in every row",
        ],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "import-dcgm-epoch-milliseconds",
        "DCGM log with unix timestamps in milliseconds",
        (
            "text",
            {
                "name": "dcgm.csv",
                "text": f"{DCGM_HEADER}\n1741083330000,0,A100,250\n"
                "1741083331000,0,A100,251\n1741083332000,0,A100,252\n",
            },
        ),
        [*IMPORT, "--format", "dcgm", "--nameplate-w", "400"],
        ["imported 3 samples", "read as unix time in milliseconds"],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "import-split-on-clock-jumps",
        "nvidia-smi log whose clock steps back, split on request",
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T1}{SMI_ROW}{T_BACK}{SMI_ROW}{T0}{SMI_ROW}",
            },
        ),
        [*IMPORT, "--split-on-clock-jumps"],
        ["imported 4 samples", "split at 1 clock jump(s) (line(s) 4) into 2 segments"],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "import-recordings-out-of-order",
        "two recordings concatenated, the later one first, split on request",
        (
            "text",
            {
                "name": "smi.csv",
                "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T1}{SMI_ROW}"
                f"{NVSMI_HEADER}\n2025/03/04 09:00:00.000{SMI_ROW}"
                f"2025/03/04 09:00:00.500{SMI_ROW}",
            },
        ),
        [*IMPORT, "--split-on-clock-jumps"],
        ["imported 4 samples", "2 recordings concatenated out of order", "put in time order"],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "import-timezone",
        "nvidia-smi local time with --timezone Europe/Berlin",
        ("text", {"name": "smi.csv", "text": f"{NVSMI_HEADER}\n{T0}{SMI_ROW}{T1}{SMI_ROW}"}),
        [*IMPORT, "--timezone", "Europe/Berlin"],
        ["timestamps read as local time in Europe/Berlin (--timezone)"],
        ["{out}/trace.parquet"],
    ),
    Accepted(
        "windows-parquet-t-gpu-power-only",
        "Parquet trace with only t, gpu, power_w and no metadata",
        ("trace", {"only_required": True, "metadata": None}),
        WINDOWS,
        [
            "no grpo-power metadata",
            "nameplate 400 W from the config",
            "sample period 0.1 s inferred from the spacing of samples",
        ],
        ["{out}/summary.json", "{out}/bins.parquet"],
    ),
    Accepted(
        "windows-csv-t-gpu-power-only",
        "CSV trace with only t, gpu, power_w",
        ("text", {"name": "trace.csv", "text": csv_trace()}),
        WINDOWS,
        ["no grpo-power metadata", "nameplate 400 W from the config"],
        ["{out}/summary.json"],
    ),
    Accepted(
        "summary-csv-byte-order-mark-unix-time",
        "CSV trace with a byte-order mark and t in unix seconds",
        ("text", {"name": "trace.csv", "text": csv_trace(t0=1_741_083_330.0, bom=True)}),
        SUMMARY,
        ["trace", "t read as unix time; the trace starts at 1741083330"],
    ),
    Accepted(
        "windows-t-in-milliseconds",
        "trace whose t is in milliseconds (declared period 0.1 s)",
        ("trace", {"t_scale": 1000.0}),
        WINDOWS,
        ["t: read as milliseconds (samples 100 apart; the trace metadata's period 0.1 s)"],
        ["{out}/summary.json"],
    ),
    Accepted(
        "summary-split-on-clock-jumps",
        "trace whose time goes backwards once, split on request",
        ("trace", {"swap_t": 200}),
        [*SUMMARY, "--split-on-clock-jumps"],
        ["split at 1 clock jump(s) (row(s) 202) into 2 segments"],
    ),
    Accepted(
        "windows-split-on-clock-jumps",
        "trace with a repeated timestamp, split on request",
        ("trace", {"repeat_t": 200}),
        [*WINDOWS, "--split-on-clock-jumps"],
        ["split at 1 clock jump(s)", "laid end to end"],
        ["{out}/summary.json"],
    ),
    Accepted(
        "fleet-of-a-t-gpu-power-trace",
        "fleet of the windows output of a Parquet trace with only t, gpu, power_w",
        ("bins", {"trace": {"only_required": True, "metadata": None}}),
        FLEET,
        ["fleet of 16 GPUs from 1 run(s)"],
        ["{out}/fleet_windows.csv"],
    ),
]


@dataclass
class AcceptedOutcome:
    exit_code: int
    output: str
    exception: BaseException | None
    missing_files: list[str]
    command: list[str]


def run_accepted(case: Accepted, folder: Path) -> AcceptedOutcome:
    """Build the input in ``folder`` and run the command in-process."""
    folder.mkdir(parents=True, exist_ok=True)
    ctx = Context(folder)
    builder, params = case.build
    path = BUILDERS[builder](ctx, **params)
    values = {"input": str(path), "name": path.name, "out": str(folder / "out")}
    values |= {"config": str(ctx.config), "dir": str(folder)}
    command = [part.format(**values) for part in case.command]
    result = CliRunner().invoke(app, command)
    missing = [w.format(**values) for w in case.writes if not Path(w.format(**values)).exists()]
    output = result.stdout + result.stderr
    return AcceptedOutcome(result.exit_code, output, result.exception, missing, command)


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.id for c in ACCEPTED])
def test_real_world_input_is_read_with_a_note(case: Accepted, tmp_path: Path) -> None:
    outcome = run_accepted(case, tmp_path / case.id)
    assert outcome.exit_code == 0, outcome.output
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit)
    assert "Traceback" not in outcome.output
    missing = [s for s in case.notes if s not in " ".join(outcome.output.split())]
    assert not missing, f"{missing} not in: {outcome.output}"
    assert not outcome.missing_files, outcome.output


# --------------------------------------------------------------------------------------------
# the closing note's table


def _cell(text: str, root: Path) -> str:
    text = text.strip().removeprefix("error: ").replace(str(root), "<dir>")
    text = re.sub(r"\s+", " ", text)
    return text.replace("|", "\\|")


def markdown_table() -> str:
    """Run every case; one markdown row per case with its exit code and message."""
    lines = ["| # | input | command | exit code | message |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for number, case in enumerate(CASES, 1):
            outcome = run_case(case, root / case.id)
            shown = [p.replace(str(root / case.id), "<dir>") for p in outcome.command]
            command = "grpo-power " + " ".join(shown)
            lines.append(
                f"| {number} | {case.input} (`{case.id}`) | `{_cell(command, root)}` | "
                f"{outcome.exit_code} | {_cell(outcome.message, root / case.id)} |"
            )
        lines += ["", "Inputs that must be read (exit 0), and what they print:", ""]
        lines += ["| # | input | command | exit code | notes |", "|---|---|---|---|---|"]
        for number, accepted in enumerate(ACCEPTED, 1):
            folder = root / f"accepted-{accepted.id}"
            result = run_accepted(accepted, folder)
            shown = [p.replace(str(folder), "<dir>") for p in result.command]
            command = "grpo-power " + " ".join(shown)
            notes = " / ".join(
                line
                for line in result.output.splitlines()
                if line.startswith(("note:", "imported"))
            )
            lines.append(
                f"| {number} | {accepted.input} (`{accepted.id}`) | `{_cell(command, root)}` | "
                f"{result.exit_code} | {_cell(notes, folder)} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown_table())
