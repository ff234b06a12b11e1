"""Importers read nvidia-smi, DCGM exporter and Prometheus logs in their documented formats."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grpo_power.telemetry.engine import EngineLog, align_engine
from grpo_power.telemetry.importers import ImportError_, import_log
from grpo_power.telemetry.store import read_trace
from tests.conftest import DATA


def test_nvidia_smi_full_query_with_units_na_and_repeated_header() -> None:
    frame, meta = import_log(DATA / "nvidia-smi-a100.csv", "nvidia-smi")
    assert len(frame) == 6  # the repeated header line is dropped
    assert meta.source == "imported" and meta.nameplate_w == 400.0
    assert meta.gpu_name == "NVIDIA A100-SXM4-40GB"
    assert meta.sample_period_s == pytest.approx(0.1)
    gpu0 = frame[frame["gpu"] == 0]
    assert gpu0["t"].tolist() == pytest.approx([0.0, 0.1, 0.2])
    assert gpu0["power_w"].tolist() == [251.32, 389.75, 310.0]  # power.draw.instant preferred
    assert gpu0["sm_clock_mhz"].tolist() == [1410.0, 1395.0, 1410.0]
    gpu1 = frame[frame["gpu"] == 1]
    assert np.isnan(gpu1["power_avg_w"].iloc[1])  # [N/A] -> null
    assert frame["energy_j"].isna().all()  # nvidia-smi logs have no energy counter


def test_a_log_powershell_wrote_in_utf16_reads_as_its_utf8_self(tmp_path: Path) -> None:
    """Windows PowerShell 5 redirects `nvidia-smi ... > smi.csv` as UTF-16 with CRLF lines."""
    text = (DATA / "nvidia-smi-a100.csv").read_text()
    log = tmp_path / "smi.csv"
    log.write_bytes(b"\xff\xfe" + text.replace("\n", "\r\n").encode("utf-16-le"))
    frame, meta = import_log(log, "nvidia-smi", timezone="UTC")
    expected, _ = import_log(DATA / "nvidia-smi-a100.csv", "nvidia-smi", timezone="UTC")
    assert frame.equals(expected) and meta.nameplate_w == 400.0
    from grpo_power.telemetry.formats import log_format

    assert log_format(log) == ("nvidia-smi", "")


def test_nvidia_smi_minimal_query_needs_a_nameplate() -> None:
    with pytest.raises(
        ImportError_,
        match=r"no power\.default_limit column; give .* --nameplate-w",
    ):
        import_log(DATA / "nvidia-smi-basic.csv", "nvidia-smi")
    frame, meta = import_log(DATA / "nvidia-smi-basic.csv", "nvidia-smi", nameplate_w=400.0)
    assert frame["power_w"].tolist() == [70.1, 240.5, 245.0]
    assert meta.sample_period_s == pytest.approx(0.5)
    assert frame["power_avg_w"].isna().all()


def test_nvidia_smi_dmon_log_with_repeated_headers_and_a_missing_reading() -> None:
    frame, meta = import_log(
        DATA / "nvidia-smi-dmon.log", "nvidia-smi-dmon", nameplate_w=400.0, timezone="UTC"
    )
    assert meta.import_format == "nvidia-smi-dmon" and meta.sample_period_s == 1.0
    assert meta.start_unix_s == 1741083330.0  # 2025-03-04 10:15:30 UTC
    gpu0, gpu1 = frame[frame["gpu"] == 0], frame[frame["gpu"] == 1]
    assert gpu0["t"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert gpu0["power_w"].tolist() == [62.0, 250.0, 301.0, 305.0]
    assert gpu0["sm_util"].tolist() == [0.0, 87.0, 99.0, 99.0]
    assert gpu0["sm_clock_mhz"].tolist() == [210.0, 1410.0, 1395.0, 1395.0]
    assert gpu1["t"].tolist() == [0.0, 1.0, 3.0]  # its '-' at 10:15:32 is a gap (line 8)
    assert any("first at line 8" in note for note in meta.model_extra["notes"])


def test_nvidia_smi_dmon_log_written_as_csv_reads_the_same(tmp_path: Path) -> None:
    spaced = (DATA / "nvidia-smi-dmon.log").read_text().splitlines()
    log = tmp_path / "dmon.csv"  # nvidia-smi dmon --format csv: the same fields, commas
    log.write_text("\n".join(re.sub(r"(?<=\S)\s+(?=\S)", ", ", line) for line in spaced))
    read = [
        import_log(p, "nvidia-smi-dmon", nameplate_w=400.0)
        for p in (DATA / "nvidia-smi-dmon.log", log)
    ]
    assert read[0][0].equals(read[1][0])


def test_nvidia_smi_dmon_log_without_time_columns_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "dmon.log"
    log.write_text("# gpu   pwr  gtemp\n# Idx     W      C\n    0    62     34\n")
    with pytest.raises(ImportError_, match=r"line 1: no Date and Time columns .* -o DT"):
        import_log(log, "nvidia-smi-dmon", nameplate_w=400.0)
    log.write_text("timestamp, index, power.draw [W]\n")
    with pytest.raises(ImportError_, match=r"line 1: expected an nvidia-smi dmon log"):
        import_log(log, "nvidia-smi-dmon", nameplate_w=400.0)


def test_one_reading_no_board_draws_is_named_by_its_line_and_not_called_milliwatts(
    tmp_path: Path,
) -> None:
    """A log of plausible watts with one corrupt reading was told to divide its whole power
    column by 1000 (the hint looked only at the highest reading), and the error named no line;
    a log in milliwatts throughout still gets that hint. A dmon log's power is its ``pwr``."""
    readings = [250.0 + s for s in range(40)]
    readings[20] = 3000.0
    rows = [f"2026/12/06 10:00:{s:02d}.000, 0, {w:.2f} W" for s, w in enumerate(readings)]
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, index, power.draw [W]\n" + "\n".join(rows) + "\n")
    with pytest.raises(ValueError) as spike:
        import_log(log, "nvidia-smi", nameplate_w=400.0)
    message = str(spike.value)
    assert "got 3000 on gpu 0 at t = 20 s, line 22 (1 such sample(s) of 40)" in message
    assert "drop or repair those rows" in message and "milliwatts" not in message
    log.write_text(
        "timestamp, index, power.draw [W]\n"
        + "\n".join(f"2026/12/06 10:00:{s:02d}.000, 0, {1000 * (250 + s)}" for s in range(40))
        + "\n"
    )
    with pytest.raises(
        ValueError, match=r"line 2 \(40 such sample\(s\) of 40\); it looks like milliwatts"
    ):
        import_log(log, "nvidia-smi", nameplate_w=400.0)
    dmon = tmp_path / "dmon.log"
    body = [f" 20261206  10:00:{s:02d}    0  {w:.0f}" for s, w in enumerate(readings)]
    dmon.write_text(
        "#Date      Time      gpu   pwr\n#YYYYMMDD HH:MM:SS  Idx     W\n" + "\n".join(body)
    )
    with pytest.raises(ValueError, match=r": pwr: expected watts .* line 23 "):
        import_log(dmon, "nvidia-smi-dmon", nameplate_w=400.0)


def test_a_split_log_names_a_bad_cell_by_its_own_line(tmp_path: Path) -> None:
    """With --split-on-clock-jumps the rows are put in time order; a bad nameplate cell on line 5
    was named by the line of the row that took its place (line 15)."""
    rows = []
    for k, s in enumerate([*range(10, 20), *range(10)]):  # the clock stepped back 20 s
        limit = "abc W" if k == 3 else "400.00 W"
        rows.append(f"2026/12/06 10:00:{s:02d}.000, 0, {250 + k:.2f} W, {limit}")
    log = tmp_path / "smi.csv"
    log.write_text("timestamp, index, power.draw [W], power.default_limit [W]\n" + "\n".join(rows))
    with pytest.raises(ImportError_, match=r"non-numeric value 'abc W' \(line 5\)"):
        import_log(log, "nvidia-smi", split_on_clock_jumps=True)


def test_a_refused_cell_is_quoted_as_the_log_wrote_it(tmp_path: Path) -> None:
    """A power cell of another unit was quoted with part of its unit cut off ('1.2 k')."""
    log = tmp_path / "smi.csv"
    log.write_text(
        "timestamp, index, power.draw [W]\n2026/12/06 10:00:00.000, 0, 250.00 W\n"
        "2026/12/06 10:00:01.000, 0, 1.2 kW\n"
    )
    with pytest.raises(ImportError_, match=r"non-numeric value '1.2 kW' \(line 3\)"):
        import_log(log, "nvidia-smi", nameplate_w=400.0)


def test_the_nameplate_of_a_log_without_one_comes_from_its_gpu_name(tmp_path: Path) -> None:
    log = tmp_path / "h100.csv"
    rows = [(30, 0, 250), (30, 1, 251), (31, 0, 650), (31, 1, 660)]
    log.write_text(
        "timestamp, index, name, power.draw [W]\n"
        + "".join(
            f"2025/03/04 10:15:{s}.000, {g}, NVIDIA H100 80GB HBM3, {w} W\n" for s, g, w in rows
        )
    )
    _, meta = import_log(log, "nvidia-smi", fallback_nameplate_w=400.0)
    assert meta.nameplate_w == 700.0  # the part's board power, not the config's 400 W
    assert any(
        "700 W, the default board power of NVIDIA H100" in n for n in meta.model_extra["notes"]
    )
    _, meta = import_log(log, "nvidia-smi", nameplate_w=650.0)
    assert meta.nameplate_w == 650.0  # --nameplate-w first
    anonymous = tmp_path / "anonymous.csv"  # no name: the config's, and a note on the readings
    anonymous.write_text(
        "\n".join(
            ",".join(row.split(",")[:2] + row.split(",")[3:])
            for row in log.read_text().splitlines()
        )
    )
    _, meta = import_log(anonymous, "nvidia-smi", fallback_nameplate_w=400.0)
    assert meta.nameplate_w == 400.0
    assert any(
        "readings reach 660 W, above the nameplate 400 W" in n for n in meta.model_extra["notes"]
    )
    _, meta = import_log(anonymous, "nvidia-smi", gpu_name="NVIDIA H200")
    assert (meta.nameplate_w, meta.gpu_name) == (700.0, "NVIDIA H200")


def test_a_part_neither_known_nor_the_configs_never_takes_the_configs_nameplate(
    tmp_path: Path,
) -> None:
    """A planner folder's A100 PCIe log (250 W) under the default A100 SXM config (400 W): it
    was provisioned at 400 W, its fleet peak 48 % of nameplate instead of 77 %. Its enforced
    power limit is the nameplate now (noted); without one it is refused; a log of the config's
    own part, or of no named part, still takes the config's."""

    def log(name: str, part: str, limit: bool) -> Path:
        path = tmp_path / name
        header = "timestamp, index, name, power.draw [W]" + (", power.limit [W]" if limit else "")
        rows = [
            f"2025/03/04 10:15:{s}.000, {g}, {part}, {w} W" + (", 250.00 W" if limit else "")
            for s, g, w in ((30, 0, 100), (30, 1, 110), (31, 0, 240), (31, 1, 230))
        ]
        path.write_text("\n".join([header, *rows]) + "\n")
        return path

    config = {"fallback_nameplate_w": 400.0, "fallback_gpu_name": "NVIDIA A100-SXM4-80GB"}
    _, meta = import_log(log("pcie.csv", "NVIDIA A100-PCIE-40GB", True), "nvidia-smi", **config)
    assert meta.nameplate_w == 250.0
    assert any("250 W, the highest enforced power limit" in n for n in meta.model_extra["notes"])
    with pytest.raises(ImportError_, match=r"nolimit.csv: no power.default_limit or power.limit"):
        import_log(log("nolimit.csv", "NVIDIA A100-PCIE-40GB", False), "nvidia-smi", **config)
    own = {"fallback_nameplate_w": 350.0, "fallback_gpu_name": "NVIDIA L40S"}
    _, meta = import_log(log("l40s.csv", "NVIDIA L40S", False), "nvidia-smi", **own)
    assert meta.nameplate_w == 350.0  # the part the config describes


def test_dcgm_csv_one_missing_reading_becomes_a_gap() -> None:
    """The last row's power is [N/A]: a missing sample (never interpolated), counted in a note;
    the energy counter of the rows kept is still read in mJ and becomes J since the start."""
    frame, meta = import_log(DATA / "dcgm-exporter-a100.csv", "dcgm", nameplate_w=400.0)
    assert frame["t"].tolist() == [0.0, 1.0]  # the 2 s row is left out, not filled in
    assert frame["power_w"].tolist() == [300.0, 320.0]
    assert frame["energy_j"].tolist() == pytest.approx([0.0, 310.0])
    assert meta.model_extra["missing_readings"] == 1
    (note,) = [n for n in meta.model_extra["notes"] if "missing power reading" in n]
    assert "1 missing power reading(s)" in note and "line 4" in note
    assert "never interpolated" in note


def test_dcgm_csv_import(tmp_path: Path) -> None:
    log = tmp_path / "dcgm.csv"
    lines = (DATA / "dcgm-exporter-a100.csv").read_text().splitlines()[:3]
    log.write_text("\n".join(lines) + "\n")
    frame, meta = import_log(log, "dcgm", nameplate_w=400.0)
    assert frame["t"].tolist() == [0.0, 1.0]
    assert frame["energy_j"].tolist() == pytest.approx([0.0, 310.0])  # (987964321-987654321) mJ
    assert frame["power_limit_w"].tolist() == [400.0, 400.0]
    assert meta.gpu_name == "NVIDIA A100-SXM4-80GB"


def test_a_dcgm_csv_of_several_hosts_tells_their_gpus_apart(tmp_path: Path) -> None:
    """A fleet's DCGM export holds gpu 0 of every host: GPUs are (host, index) pairs, numbered
    in host order and named in the metadata, not one GPU whose clock repeats."""
    log = tmp_path / "fleet.csv"
    rows = [
        f"2026-11-01T10:00:{s:02d}Z,{host},{g},{200 + 10 * g + s + (50 if host == 'b2' else 0)}"
        for s in range(3)
        for host in ("b2", "a1")
        for g in (0, 1)
    ]
    log.write_text("timestamp,Hostname,gpu,DCGM_FI_DEV_POWER_USAGE\n" + "\n".join(rows) + "\n")
    frame, meta = import_log(log, "dcgm", nameplate_w=400.0)
    assert meta.model_extra["gpu_ids"] == {"0": "a1:0", "1": "a1:1", "2": "b2:0", "3": "b2:1"}
    assert meta.host == "2 hosts"
    at_2s = frame[frame["t"] == 2.0].set_index("gpu")["power_w"]
    assert at_2s.to_dict() == {0: 202.0, 1: 212.0, 2: 252.0, 3: 262.0}
    one_host = tmp_path / "one.csv"
    one_host.write_text("\n".join(log.read_text().splitlines()[:3]) + "\n")
    _, meta = import_log(one_host, "dcgm", nameplate_w=400.0)
    assert meta.host == "b2" and "gpu_ids" not in meta.model_extra


def test_a_gpu_whose_exporter_moved_hosts_stays_one_gpu_by_its_uuid(tmp_path: Path) -> None:
    """A dcgm-exporter pod rescheduled part way (Kubernetes): its Hostname label changes, each
    GPU's UUID does not. The GPUs were (host, index) pairs, 2 GPUs read as 4 whose UUIDs
    clashed and were dropped, and the planner's fleet then found no bin where all 4 had
    readings and stopped the whole run. Each UUID is one GPU, named by its first host."""
    log = tmp_path / "node04.csv"
    rows = [
        f"2026-11-01T10:00:{s:02d}Z,{'exp-a' if s < 3 else 'exp-b'},{g},GPU-{g}aa,{200 + g + s}"
        for s in range(6)
        for g in (0, 1)
    ]
    log.write_text("timestamp,Hostname,gpu,UUID,DCGM_FI_DEV_POWER_USAGE\n" + "\n".join(rows) + "\n")
    frame, meta = import_log(log, "dcgm", nameplate_w=400.0)
    assert sorted(frame["gpu"].unique()) == [0, 1]
    assert meta.gpu_uuids == {"0": "GPU-0aa", "1": "GPU-1aa"}
    assert meta.model_extra["gpu_ids"] == {"0": "exp-a:0", "1": "exp-a:1"}
    assert frame[frame["gpu"] == 1]["power_w"].tolist() == [201.0 + s for s in range(6)]
    (note,) = [n for n in meta.model_extra["notes"] if "names in column" in n]
    assert "2 names in column 'Hostname', 2 GPU UUID(s) under more than one" in note
    # two hosts' GPUs, each under its own host throughout, stay two hosts' GPUs
    two = tmp_path / "two.csv"
    two.write_text(
        log.read_text()
        .replace("exp-b,0,GPU-0aa", "exp-b,0,GPU-0bb")
        .replace("exp-b,1,GPU-1aa", "exp-b,1,GPU-1bb")
        .replace("exp-a,0,GPU-0aa", "exp-a,0,GPU-0aa")
    )
    frame, meta = import_log(two, "dcgm", nameplate_w=400.0)
    assert sorted(frame["gpu"].unique()) == [0, 1, 2, 3]
    assert meta.gpu_uuids == {"0": "GPU-0aa", "1": "GPU-1aa", "2": "GPU-0bb", "3": "GPU-1bb"}


def test_a_log_without_an_index_names_its_gpus_by_bus_id_or_uuid(tmp_path: Path) -> None:
    """NVIDIA's example queries log pci.bus_id, not index: GPUs are numbered in bus order and
    named in the metadata; a log naming GPUs in no way is refused, saying which columns do."""
    log = tmp_path / "bus.csv"
    log.write_text(
        "timestamp, name, pci.bus_id, pstate, power.draw [W]\n"
        "2026/11/02 09:00:00.000, NVIDIA A100-SXM4-40GB, 00000000:0F:00.0, P0, 297.80 W\n"
        "2026/11/02 09:00:00.000, NVIDIA A100-SXM4-40GB, 00000000:07:00.0, P0, 301.20 W\n"
        "2026/11/02 09:00:05.000, NVIDIA A100-SXM4-40GB, 00000000:0F:00.0, P0, 288.50 W\n"
        "2026/11/02 09:00:05.000, NVIDIA A100-SXM4-40GB, 00000000:07:00.0, P0, 310.00 W\n"
    )
    frame, meta = import_log(log, "nvidia-smi", timezone="UTC")
    assert meta.model_extra["gpu_ids"] == {"0": "00000000:07:00.0", "1": "00000000:0F:00.0"}
    assert frame[frame["gpu"] == 0]["power_w"].tolist() == [301.2, 310.0]
    assert (meta.sample_period_s, meta.nameplate_w) == (5.0, 400.0)
    uuid = tmp_path / "uuid.csv"
    uuid.write_text(log.read_text().replace("pci.bus_id", "uuid").replace("00000000:", "GPU-"))
    _, meta = import_log(uuid, "nvidia-smi", timezone="UTC")
    assert meta.model_extra["gpu_ids"] == {"0": "GPU-07:00.0", "1": "GPU-0F:00.0"}
    bare = tmp_path / "bare.csv"
    bare.write_text("timestamp, power.draw [W]\n2026/11/02 09:00:00.000, 297.80 W\n")
    with pytest.raises(ImportError_, match=r"missing column 'index', expected in every") as err:
        import_log(bare, "nvidia-smi", nameplate_w=400.0)
    message = str(err.value)
    assert "--query-gpu=timestamp,index,power.draw" in message
    assert message.count("pci.bus_id") == 1  # the alternatives, named once


def test_each_gpu_number_keeps_the_uuid_the_log_names(tmp_path: Path) -> None:
    """A log naming its GPUs by UUID beside their index (nvidia-smi's uuid, dcgm-exporter's
    UUID label) keeps each number's UUID in the metadata: the GPU's name in any other log of it.
    A log whose index names two UUIDs (GPUs renumbered) keeps none, and says why."""
    log = tmp_path / "smi.csv"
    log.write_text(
        "timestamp, index, uuid, power.draw [W]\n"
        "2026/11/02 09:00:00.000, 0, GPU-aaa, 297.80 W\n"
        "2026/11/02 09:00:00.000, 1, GPU-bbb, 301.20 W\n"
        "2026/11/02 09:00:01.000, 0, GPU-aaa, 288.50 W\n"
        "2026/11/02 09:00:01.000, 1, GPU-bbb, 310.00 W\n"
    )
    _, meta = import_log(log, "nvidia-smi", timezone="UTC", nameplate_w=400.0)
    assert meta.gpu_uuids == {"0": "GPU-aaa", "1": "GPU-bbb"}
    assert "gpu_ids" not in meta.model_extra  # numbered by index, as before
    _, meta = import_log(DATA / "prometheus-dcgm.json", "prometheus")
    assert meta.gpu_uuids == {
        "0": "GPU-dgx-a-0",
        "1": "GPU-dgx-a-1",
        "2": "GPU-dgx-b-0",
        "3": "GPU-dgx-b-1",
    }
    _, meta = import_log(DATA / "nvidia-smi-a100.csv", "nvidia-smi", timezone="UTC")
    assert meta.gpu_uuids == {}  # no uuid column: no GPU of it is known elsewhere
    renumbered = tmp_path / "renumbered.csv"
    renumbered.write_text(  # after a reboot, NVML numbers the two GPUs the other way round
        log.read_text()
        + "2026/11/02 09:10:00.000, 0, GPU-bbb, 99.80 W\n"
        + "2026/11/02 09:10:00.000, 1, GPU-aaa, 98.20 W\n"
    )
    _, meta = import_log(renumbered, "nvidia-smi", timezone="UTC", nameplate_w=400.0)
    assert meta.gpu_uuids == {}
    assert any("more than one UUID" in note for note in meta.model_extra["notes"])


def test_prometheus_range_query_of_dcgm_series() -> None:
    """The JSON of /api/v1/query_range: two hosts of two A100s, power and utilisation series,
    one GPU's power in two series (it changed pods), one NaN reading (a gap)."""
    frame, meta = import_log(DATA / "prometheus-dcgm.json", "prometheus")
    assert meta.model_extra["gpu_ids"] == {
        "0": "dgx-a:0",
        "1": "dgx-a:1",
        "2": "dgx-b:0",
        "3": "dgx-b:1",
    }
    assert (meta.gpu_name, meta.nameplate_w) == ("NVIDIA A100-SXM4-80GB", 400.0)
    assert (meta.sample_period_s, meta.start_unix_s) == (15.0, 1764590400.0)
    gpu0 = frame[frame["gpu"] == 0]  # both pods' series, one after the other
    assert gpu0["power_w"].tolist() == [62.5, 63.5, 264.5, 265.5, 266.5, 267.5]
    assert gpu0["t"].tolist() == [0.0, 15.0, 30.0, 45.0, 60.0, 75.0]
    assert gpu0["sm_util"].tolist() == [0, 0, 97, 97, 97, 97]
    gpu3 = frame[frame["gpu"] == 3]
    assert gpu3["t"].tolist() == [0.0, 15.0, 30.0, 60.0, 75.0]  # the NaN at 45 s: a gap
    assert meta.model_extra["missing_readings"] == 1


def test_prometheus_results_in_every_shape_and_refusals(tmp_path: Path) -> None:
    """promtool's bare list and an instant vector read as the API's matrix; a result that
    cannot name its GPUs or says the query failed is refused in one line naming the file."""
    document = json.loads((DATA / "prometheus-dcgm.json").read_text())
    series = document["data"]["result"]
    bare = tmp_path / "promtool.json"
    bare.write_text(json.dumps(series))
    frame, _ = import_log(bare, "prometheus")
    assert len(frame) == 23  # 4 GPUs x 6 samples, one NaN
    now = series[1]["values"][-1][0]  # an instant query: each live series' value then
    vector = [{"metric": s["metric"], "value": [now, s["values"][-1][1]]} for s in series[1:]]
    one = tmp_path / "vector.json"
    one.write_text(
        json.dumps({"status": "success", "data": {"resultType": "vector", "result": vector}})
    )
    frame, meta = import_log(one, "prometheus")
    assert (len(frame), meta.sample_period_s) == (4, 1.0)
    cases = {
        "failed.json": (
            {"status": "error", "error": "bad_data: parse error"},
            "expected 'success'",
        ),
        "summed.json": (
            [{"metric": {}, "values": [[1764590400, "900"]]}],
            r"series 1 \(\): no '__name__' label",
        ),
        "nogpu.json": (
            [{"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE"}, "values": [[1, "9"]]}],
            "no 'gpu' label",
        ),
        "twice.json": (
            [
                {
                    "metric": {
                        k: v for k, v in s["metric"].items() if k not in ("Hostname", "instance")
                    },
                    "values": s["values"],
                }
                for s in series
            ],
            "two series give DCGM_FI_DEV_POWER_USAGE of gpu 0 at unix time 1764590400.000",
        ),
        "text.json": (
            [{"metric": series[1]["metric"], "values": [[1764590400, "many"]]}],
            r"series 1 \(DCGM_FI_DEV_POWER_USAGE, gpu 0\), sample 1: expected a sample",
        ),
        "nopower.json": (
            [s for s in series if "UTIL" in s["metric"]["__name__"]],
            "missing power column",
        ),
    }
    for name, (content, message) in cases.items():
        log = tmp_path / name
        log.write_text(json.dumps(content))
        with pytest.raises(ImportError_, match=rf"^{tmp_path}/{name}: .*{message}"):
            import_log(log, "prometheus", nameplate_w=400.0)
    broken = tmp_path / "broken.json"
    broken.write_text('{"status": "success",\n "data": ')
    with pytest.raises(ImportError_, match=r"broken\.json: line 2: expected a Prometheus query"):
        import_log(broken, "prometheus")


def test_missing_power_column_and_bad_values_are_named(tmp_path: Path) -> None:
    log = tmp_path / "nopower.csv"
    log.write_text("timestamp, index, utilization.gpu [%]\n2025/03/04 10:00:00.000, 0, 5 %\n")
    with pytest.raises(ImportError_, match=r"nopower\.csv: missing power column 'power.draw'"):
        import_log(log, "nvidia-smi", nameplate_w=400)
    log.write_text("timestamp, index, power.draw [W]\n2025/03/04 10:00:00.000, 0, lots W\n")
    with pytest.raises(
        ImportError_, match=r"column 'power.draw \[W\]' has a non-numeric value 'lots W'"
    ):
        import_log(log, "nvidia-smi", nameplate_w=400)
    log.write_text("timestamp, index, power.draw [W]\n2025/03/04 10:00:00.000, 0\n")
    with pytest.raises(ImportError_, match="line 2 has a different number of fields"):
        import_log(log, "nvidia-smi", nameplate_w=400)


def test_import_cli_writes_a_trace(tmp_path: Path) -> None:
    out = tmp_path / "imported.parquet"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpo_power.cli",
            "telemetry",
            "import",
            str(DATA / "nvidia-smi-a100.csv"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "imported 6 samples of 2 GPU(s)" in result.stdout
    trace = read_trace(out)
    assert trace.metadata.source == "imported" and len(trace.frame) == 6
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpo_power.cli",
            "telemetry",
            "import",
            str(DATA / "nvidia-smi-basic.csv"),
            "--out",
            str(tmp_path / "x.parquet"),
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert "--nameplate-w" in bad.stderr and not (tmp_path / "x.parquet").exists()


def test_import_tells_the_format_from_the_file(tmp_path: Path) -> None:
    """Without --format, every committed log imports as the planner reads it, saying which
    format it took; a wrong --format is refused with the format the file looks like."""
    from typer.testing import CliRunner

    from grpo_power.cli import app

    logs = {
        "prometheus-dcgm.json": "prometheus",
        "nvidia-smi-dmon.log": "nvidia-smi-dmon",
        "dcgm-exporter-a100.csv": "dcgm",
        "nvidia-smi-a100.csv": "nvidia-smi",
    }
    runner = CliRunner()
    for name, fmt in logs.items():
        out = tmp_path / f"{name}.parquet"
        command = ["telemetry", "import", str(DATA / name), "--nameplate-w", "400", "-o", str(out)]
        result = runner.invoke(app, command)
        assert result.exit_code == 0, result.output
        assert f"format {fmt} (told from the file; --format to choose)" in result.output
        assert read_trace(out).metadata.model_extra["import_format"] == fmt
    wrong = ["telemetry", "import", str(DATA / "nvidia-smi-dmon.log"), "--format", "nvidia-smi"]
    result = runner.invoke(app, [*wrong, "-o", str(tmp_path / "wrong.parquet")])
    assert result.exit_code == 2
    assert "(the file looks like a nvidia-smi-dmon log: --format nvidia-smi-dmon)" in result.output
    assert len(result.output.strip().splitlines()) == 1  # one line, the long header cut short


def test_import_never_writes_over_another_trace(tmp_path: Path) -> None:
    """A researcher's finding: `telemetry import --out` replaced a `telemetry record` trace
    without a word (record itself never overwrites). It now replaces only its own earlier
    import of the same log, with a note, and refuses anything else in one line."""
    import shutil

    from typer.testing import CliRunner

    from grpo_power.cli import app

    runner = CliRunner()
    log, other = tmp_path / "node.csv", tmp_path / "other.csv"
    shutil.copy(DATA / "nvidia-smi-a100.csv", log)
    shutil.copy(DATA / "nvidia-smi-a100.csv", other)
    out = tmp_path / "mine.parquet"

    def imported(source: Path) -> Any:
        return runner.invoke(app, ["telemetry", "import", str(source), "-o", str(out)])

    assert imported(log).exit_code == 0
    again = imported(log)  # options fixed, the same log again: replaced, and said so
    assert again.exit_code == 0 and f"note: {out}: an earlier import of {log}, replaced" in (
        again.output
    )
    before = out.read_bytes()
    refused = imported(other)
    assert refused.exit_code == 2 and out.read_bytes() == before
    assert refused.output.strip() == (
        f"error: {out}: a trace imported from {log} is already there; expected a path where no "
        "file is (an import replaces only its own earlier import of the same log): give "
        "another --out, or remove it"
    )
    recorded = tmp_path / "recorded.parquet"
    shutil.copy(out, recorded)  # stands in for any trace that is not this log's import
    done = runner.invoke(app, ["telemetry", "import", str(other), "-o", str(recorded)])
    assert done.exit_code == 2 and "is already there" in done.output


def test_import_tells_a_prometheus_answer_without_labels_by_its_shape(tmp_path: Path) -> None:
    """A query whose sum() dropped the labels names no power series: auto-detection took the
    answer for an nvidia-smi CSV ("missing column 'timestamp' ... 163 columns"); it is told by
    its shape, and the Prometheus importer says what is wrong with it."""
    from typer.testing import CliRunner

    from grpo_power.cli import app

    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {}, "values": [[1793700000 + 15 * i, "600.000"] for i in range(9)]}
            ],
        },
    }
    log = tmp_path / "sum.json"
    log.write_text(json.dumps(answer))
    out = tmp_path / "sum.parquet"
    result = CliRunner().invoke(app, ["telemetry", "import", str(log), "-o", str(out)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "timestamp" not in lines[0]
    assert f"{log}: series 1 (): no '__name__' label" in lines[0]
    assert "sum() or rate() drops the labels" in lines[0]


def _engine_run(
    drift_s: float, length_s: float = 2400.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, EngineLog]:
    """A synthetic run of ``length_s``: concurrency changes every 2-6 s, power follows it (the
    decode line plus 2 W of noise), the power log at 250 ms on local time read as UTC, the engine's
    samples at 250 ms on a clock 7 h (a time zone) and 0.3 s ahead that gains ``drift_s`` over
    the run. Returns the power log's times and power, the true concurrency at each power sample,
    and the engine log."""
    rng = np.random.default_rng(0)
    start_s, period_s = 1_784_400_000.0, 0.25
    changes_s = start_s + np.cumsum(rng.uniform(2.0, 6.0, 1000))
    levels = 2 ** rng.integers(0, 7, len(changes_s) + 1)

    def concurrency_at(t_s: np.ndarray) -> np.ndarray:
        return levels[np.searchsorted(changes_s, t_s)].astype(float)

    power_t_s = start_s + np.arange(0.0, length_s, period_s)
    true_c = concurrency_at(power_t_s)
    power_w = 277.5 + 6.55 * np.log2(true_c) + rng.normal(0.0, 2.0, len(power_t_s))
    engine_true_s = start_s + 0.1 + np.arange(0.0, length_s, period_s)
    engine_clock_s = engine_true_s + 25_200.0 + 0.3 + drift_s * (engine_true_s - start_s) / length_s
    log = EngineLog(
        engine_clock_s,
        concurrency_at(engine_true_s),
        np.zeros(len(engine_true_s)),
        "vllm",
        Path("engine.csv"),
        float(np.median(np.diff(engine_clock_s))),
    )
    return power_t_s, power_w, true_c, log


def test_an_engine_clock_that_drifts_is_followed() -> None:
    """Clocks at different rates (2 s in 40 minutes: 830 ppm, a poor quartz): the drift over
    the run is found and followed, so the concurrency matched to each power sample is the one
    the engine ran at that moment (a constant offset would leave the run's ends 1 s off, four
    samples); a faster apparent drift is no clock's and is left alone."""
    matched_share = {}
    for drift_s in (0.0, 2.0, -2.0):
        power_t_s, power_w, true_c, log = _engine_run(drift_s)
        columns, info, notes = align_engine(power_t_s, power_w, log)
        assert info["zone_offset_s"] == 25_200.0
        assert info["offset_s"] == pytest.approx(25_200.4, abs=0.25)
        matched_share[drift_s] = float(np.mean(columns["concurrency"].to_numpy() == true_c))
        if drift_s:
            assert info["drift_corrected"] and info["drift_s"] == pytest.approx(drift_s, abs=0.3)
            assert "followed linearly" in notes[0]
        else:
            assert not info["drift_corrected"]
            assert "not followed: within the segments' scatter" in notes[0]  # its one reason
    assert matched_share[0.0] > 0.95
    assert min(matched_share.values()) > matched_share[0.0] - 0.03
    power_t_s, power_w, _, log = _engine_run(2.0, length_s=120.0)  # 17,000 ppm
    _, info, notes = align_engine(power_t_s, power_w, log)
    assert info["drift_s"] > 1.0 and not info["drift_corrected"]
    assert "ppm is faster than a clock drifts" in notes[0]
    assert "within the segments' scatter" not in notes[0]


def test_a_regular_log_and_one_read_line_by_line_import_alike(tmp_path: Path) -> None:
    """A regular log is read by pandas' C parser, a log with a quoted cell line by line: the
    same rows give the same trace (a repeated header and blank lines dropped), and a bad cell
    is refused on the same line in both."""
    import pandas as pd

    from grpo_power.telemetry.logrows import read_csv_log

    header = "timestamp, index, power.draw [W], utilization.gpu [%]"
    rows = [
        f"2026/11/02 09:00:0{s}.000, {g}, {250 + s + g}.5 W, {10 * g} %"
        for s in range(5)
        for g in range(2)
    ]
    text = "\n".join([header, *rows[:4], "", header, *rows[4:]]) + "\n\n"
    regular, quoted = tmp_path / "regular.csv", tmp_path / "quoted.csv"
    regular.write_text(text)
    quoted.write_text(text.replace("timestamp,", '"timestamp",', 1))
    (plain, plain_lines, _), (csv_rows, csv_lines, _) = (
        read_csv_log(regular, "nvidia-smi"),
        read_csv_log(quoted, "nvidia-smi"),
    )
    pd.testing.assert_frame_equal(plain, csv_rows)
    assert plain_lines.tolist() == csv_lines.tolist() == [2, 3, 4, 5, *range(8, 14)]
    frames = [
        import_log(p, "nvidia-smi", nameplate_w=400.0, timezone="UTC")[0] for p in (regular, quoted)
    ]
    pd.testing.assert_frame_equal(*frames)
    assert len(frames[0]) == 10 and frames[0]["power_w"].max() == 255.5
    messages = []
    for path in (regular, quoted):
        path.write_text(path.read_text().replace("252.5 W", "lots W"))  # s=1, gpu 1: line 5
        with pytest.raises(ImportError_) as error:
            import_log(path, "nvidia-smi", nameplate_w=400.0, timezone="UTC")
        messages.append(str(error.value).replace(path.name, "LOG"))
    assert messages[0] == messages[1]
    assert "non-numeric value 'lots W' (line 5)" in messages[0]


def _real_uuid(fake: str) -> str:
    """A UUID of NVIDIA's form for the test data's ``GPU-dgx-a-0``, in the same order, and
    opening with digits (``GPU-50f2b1c3-...``), as a legend could misread for an index."""
    host, index = fake.removeprefix("GPU-dgx-").split("-")
    return f"GPU-{5 + ord(host) - ord('a')}{index}f2b1c3-1111-2222-3333-444455556666"


def _grafana_downloads(tmp_path: Path) -> dict[str, Path]:
    """The power series of ``prometheus-dcgm.json`` as a Grafana panel downloads them, in each
    of its shapes (the same readings, so each must import as the query result does)."""
    document = json.loads((DATA / "prometheus-dcgm.json").read_text())
    series = [s for s in document["data"]["result"] if s["metric"]["__name__"].endswith("USAGE")]
    times = sorted({unix_s for s in series for unix_s, _ in s["values"]})
    at = [{unix_s: v for unix_s, v in s["values"] if v != "NaN"} for s in series]

    def labels(metric: dict[str, str]) -> str:  # no legend: Grafana names a series by them
        inner = ", ".join(f'{k}="{v}"' for k, v in metric.items() if k != "__name__")
        return f"{metric['__name__']}{{{inner}}}"

    def berlin(unix_s: int) -> str:  # "Formatted data": the dashboard's zone, to the second
        stamp = np.datetime64(unix_s + 3600, "s")  # CET in December
        return str(stamp).replace("T", " ")

    def wide(names: list[str], time: Any, value: Any, sep: str = ",") -> str:
        header = sep.join('"' + n.replace('"', '""') + '"' for n in ["Time", *names])
        rows = [sep.join([time(t), *(value(a[t]) if t in a else "" for a in at)]) for t in times]
        return "\r\n".join([header, *rows]) + "\r\n"

    legend = [f"{s['metric']['Hostname']} GPU {s['metric']['gpu']}" for s in series]
    uuid = [_real_uuid(s["metric"]["UUID"]) for s in series]
    by_uuid = [f"{s['metric']['Hostname']} {u}" for s, u in zip(series, uuid, strict=True)]
    both = [f"{n} {u}" for n, u in zip(legend, uuid, strict=True)]
    table = ['"Time","Hostname","gpu","modelName","UUID","Value"'] + [
        f"{berlin(t)},{s['metric']['Hostname']},{s['metric']['gpu']},"
        f"{s['metric']['modelName']},{s['metric']['UUID']},{a[t]} W"
        for t in times
        for s, a in zip(series, at, strict=True)
        if t in a
    ]
    uuid_table = ['"Time","Hostname","modelName","UUID","Value"'] + [
        ",".join(row.split(",")[:2] + row.split(",")[3:]) for row in table[1:]
    ]  # a table of a query by UUID, without the gpu label
    texts = {
        "labels": wide([labels(s["metric"]) for s in series], berlin, lambda v: f"{v} W"),
        "legend": wide(legend, berlin, lambda v: f"{float(v) / 1000:g} kW"),
        "excel": "sep=;\r\n" + wide(legend, lambda t: str(t * 1000), str, sep=";"),
        "table": "\n".join(table) + "\n",
        "uuid-legend": wide(by_uuid, berlin, lambda v: f"{v} W"),  # {{Hostname}} {{UUID}}
        "index-uuid-legend": wide(both, berlin, lambda v: f"{v} W"),
        "uuid-table": "\n".join(uuid_table) + "\n",
    }
    paths = {}
    for name, text in texts.items():
        paths[name] = tmp_path / f"{name}.csv"
        paths[name].write_bytes(text.encode("utf-8-sig" if name == "excel" else "utf-8"))
    return paths


def test_a_grafana_download_reads_as_the_prometheus_query_it_shows(tmp_path: Path) -> None:
    """A panel's Download CSV (series named by their labels or by a legend, a table panel,
    Excel's variant with ``sep=;``, formatted times in the dashboard's zone or unix ms, values
    in W, kW or bare) imports as the same series queried from Prometheus: the same GPUs and
    hosts, times and watts; one GPU's two series (its pod changed) are one GPU. A legend of
    ``{{Hostname}} {{UUID}}`` names each GPU by its UUID (one opening with digits is not an
    index: ``GPU-50f2...`` once read as GPU 50 of a host ``f2...``), numbered by host and
    UUID, as does a table panel of a query by UUID without the ``gpu`` label (once refused)."""
    from grpo_power.telemetry.formats import log_format

    expected, query = import_log(DATA / "prometheus-dcgm.json", "prometheus")
    real = {n: _real_uuid(u) for n, u in query.gpu_uuids.items()}  # the legends' UUIDs
    uuids_of = {
        **dict.fromkeys(("labels", "table", "uuid-table"), query.gpu_uuids),
        **dict.fromkeys(("uuid-legend", "index-uuid-legend"), real),
    }
    for name, path in _grafana_downloads(tmp_path).items():
        assert log_format(path) == ("grafana", ""), name
        frame, meta = import_log(path, "grafana", timezone="Europe/Berlin", nameplate_w=400.0)
        columns = ["t", "gpu", "power_w"]
        assert frame[columns].equals(expected[columns]), name
        assert meta.start_unix_s == query.start_unix_s, name
        # the series' labels, a table's label columns and a legend giving it name each GPU's
        # UUID; a legend without it none
        uuids = uuids_of.get(name, {})
        assert meta.gpu_uuids == uuids, name
        ids = query.model_extra["gpu_ids"]
        if name in ("uuid-legend", "uuid-table"):  # numbered by host and UUID (the same order)
            ids = {n: f"{ids[n].split(':')[0]}:{uuids[n]}" for n in ids}
        assert meta.model_extra["gpu_ids"] == ids, name
        assert meta.sample_period_s == 15.0
    _, meta = import_log(tmp_path / "labels.csv", "grafana", timezone="Europe/Berlin")
    assert (meta.gpu_name, meta.nameplate_w) == ("NVIDIA A100-SXM4-80GB", 400.0)


@pytest.mark.parametrize(
    ("legend", "hosts"),
    [
        ("{host} GPU {gpu}", ("gpu01", "gpu02")),
        ("GPU {gpu} {host}", ("gpu-01", "gpu-02")),
        ("{host}:gpu{gpu}", ("gpu-01", "gpu-02")),
        ("gpu{gpu} {host}", ("gpu-01", "gpu-02")),
    ],
)
def test_a_grafana_legend_numbers_the_gpu_not_the_host(
    tmp_path: Path, legend: str, hosts: tuple[str, str]
) -> None:
    """Hosts are often named with numbers: in legends of hosts such as ``gpu01`` or ``gpu-01``
    the GPU is the number after ``GPU`` the host name cannot hold (``{{Hostname}} GPU {{gpu}}``
    read GPUs 1 and 2 of hosts ``GPU 0`` and ``GPU 1``, and ``GPU {{gpu}} {{Hostname}}`` still
    did); beside a UUID, a host's last number (``node-3``) numbers nothing."""
    log = tmp_path / "grafana.csv"
    series = [legend.format(host=host, gpu=gpu) for host in hosts for gpu in (0, 1)]
    log.write_text(
        '"Time",' + ",".join(f'"{name}"' for name in series) + "\n"
        "1764583200000,250,251,252,253\n1764583215000,252,253,254,255\n"
    )
    frame, meta = import_log(log, "grafana", nameplate_w=400.0)
    assert meta.model_extra["gpu_ids"] == {
        "0": f"{hosts[0]}:0",
        "1": f"{hosts[0]}:1",
        "2": f"{hosts[1]}:0",
        "3": f"{hosts[1]}:1",
    }
    assert frame.groupby("gpu")["power_w"].first().tolist() == [250.0, 251.0, 252.0, 253.0]
    uuids = [f"GPU-{n}f2b1c3d-1111-2222-3333-444455556666" for n in (5, 6)]
    log.write_text(f'"Time","{uuids[0]} node-3","{uuids[1]} node-3"\n1764583200000,250,251\n')
    _, meta = import_log(log, "grafana", nameplate_w=400.0)
    assert (meta.host, meta.gpu_uuids) == ("node-3", {"0": uuids[0], "1": uuids[1]})


def test_a_grafana_download_that_cannot_be_read_is_refused_naming_why(tmp_path: Path) -> None:
    """Series that cannot be told apart or are not power are refused in one line naming the
    file, the column and the line; series of other fields beside the power ones are left out."""
    cases = {
        '"Time","GPU 0","gpu0"\n1764583200000,250,251\n': r"two columns give the power of gpu 0 at "
        r"1764583200000 \(line 2\)",
        '"Time","A100 power"\n1764583200000,250\n': r"column 'A100 power': no GPU named",
        '"Time","GPU 0"\n1764583200000,1.41 GHz\n': r"column 'GPU 0' has the value '1.41 GHz' "
        r"\(line 2\); expected power",
        '"Time","GPU 0","GPU 1"\n1764583200000,250,251\n1764583215000,250\n': r"line 3 has a "
        r"different number of fields than the header",
        '"Time","DCGM_FI_DEV_GPU_TEMP{gpu=""0""}"\n1764583200000,45\n': r"expected power "
        r"readings \(DCGM_FI_DEV_POWER_USAGE",
        '"Time","GPU 0","GPU-7a9e0b12-aaaa-bbbb-cccc-ddddeeeeffff"\n1764583200000,250,251\n': (
            r"column 'GPU-7a9e0b12-aaaa-bbbb-cccc-ddddeeeeffff' names its GPU by UUID alone, "
            r"column 'GPU 0' by index"
        ),
    }
    log = tmp_path / "grafana.csv"
    for text, message in cases.items():
        log.write_text(text)
        with pytest.raises(ImportError_, match=rf"^{re.escape(str(log))}: {message}"):
            import_log(log, "grafana", nameplate_w=400.0)
    log.write_text(
        '"Time","DCGM_FI_DEV_GPU_TEMP{gpu=""0""}","DCGM_FI_DEV_POWER_USAGE{gpu=""0""}"\n'
        "1764583200000,45,250\n1764583215000,46,\n1764583230000,47,252.5\n"
    )
    frame, _ = import_log(log, "grafana", nameplate_w=400.0)
    assert frame["power_w"].tolist() == [250.0, 252.5]  # the empty cell: no sample then
    assert frame["t"].tolist() == [0.0, 30.0]


# 01:30 summer time in Europe/Berlin on the night its clocks go back (2026-10-25)
FALL_BACK_START = datetime(2026, 10, 24, 23, 30, tzinfo=UTC)


def _berlin_fall_back(layout: str) -> str:
    """A log of two GPUs, a sample a minute from 01:30 summer time to 02:30 winter time on the
    night Europe/Berlin's clocks go back (2026-10-25): local 02:00-02:59 twice, as ``layout``
    writes it."""
    from datetime import UTC, datetime, timedelta
    from zoneinfo import ZoneInfo

    start = datetime(2026, 10, 24, 23, 30, tzinfo=UTC)
    local = [
        (start + timedelta(minutes=i)).astimezone(ZoneInfo("Europe/Berlin")) for i in range(121)
    ]
    if layout == "nvidia-smi":
        rows = [
            f"{t:%Y/%m/%d %H:%M:%S}.000, {g}, {250 + 50 * g}.00 W" for t in local for g in (0, 1)
        ]
        return "timestamp, index, power.draw [W]\n" + "\n".join(rows) + "\n"
    if layout == "nvidia-smi-dmon":
        rows = [
            f" {t:%Y%m%d   %H:%M:%S}   {g}   {250 + 50 * g}   40" for t in local for g in (0, 1)
        ]
        return (
            "#Date       Time        gpu    pwr  gtemp\n#YYYYMMDD   HH:MM:SS    Idx      W      C\n"
            + "\n".join(rows)
            + "\n"
        )
    if layout == "grafana":  # series joined by time, as the dashboard shows local time
        rows = [f'"{t:%Y-%m-%d %H:%M:%S}","250 W","300 W"' for t in local]
        return '"Time","GPU 0","GPU 1"\n' + "\n".join(rows) + "\n"
    rows = [f'"{t:%Y-%m-%d %H:%M:%S}","{g}","{250 + 50 * g}"' for t in local for g in (0, 1)]
    return '"Time","gpu","Value"\n' + "\n".join(rows) + "\n"  # a table panel


@pytest.mark.parametrize("layout", ["nvidia-smi", "nvidia-smi-dmon", "grafana", "grafana-table"])
def test_local_times_through_the_hour_the_clocks_go_back_are_placed_by_the_log_order(
    tmp_path: Path, layout: str
) -> None:
    """Each GPU's local times run through 02:00-02:59 twice, once in summer and once in winter
    time: the log's order places them, with several GPUs' rows interleaved too (a log of two
    GPUs was refused as times that do not exist or repeat, a Grafana download as two series of
    one GPU), so each GPU has its 121 samples a minute apart over two hours."""
    log = tmp_path / "power.log"
    log.write_text(_berlin_fall_back(layout))
    fmt = layout.removesuffix("-table")
    frame, meta = import_log(log, fmt, nameplate_w=400.0, timezone="Europe/Berlin")
    assert meta.start_unix_s == FALL_BACK_START.timestamp()
    for gpu in (0, 1):
        t = frame[frame["gpu"] == gpu]["t"].to_numpy()
        assert len(t) == 121 and set(np.diff(t)) == {60.0}, gpu
    assert frame.groupby("gpu")["power_w"].first().tolist() == [250.0, 300.0]


def test_a_mig_gpus_power_repeated_per_instance_is_read_once(tmp_path: Path) -> None:
    """dcgm-exporter gives a MIG GPU's power in the series of each of its instances (labels
    ``GPU_I_ID``, ``GPU_I_PROFILE``, and in Kubernetes the ``pod`` each serves), beside fields
    of the instance's own (``DCGM_FI_DEV_FB_USED``): in its CSV and in a Prometheus answer each
    GPU's reading is read once, noted (both were refused: as a duplicated timestamp, as two
    series of one GPU; the CSV even where the instances' own columns differed). Instances that
    disagree on the GPU's power are refused naming both lines, and a log concatenated with
    itself is still a clock that stepped back."""
    uuid = "GPU-265c9814-6156-355b-e589-ff20648900{}"
    rows = [
        f"{1772366400 + 15 * i},{g},{uuid.format(g)},{mig},pod-{mig},{100 + 20 * g + i},{mig}000"
        for i in range(4)
        for g in (0, 1)
        for mig in (3, 4, 5)
    ]
    header = "timestamp,gpu,UUID,GPU_I_ID,pod,DCGM_FI_DEV_POWER_USAGE,DCGM_FI_DEV_FB_USED\n"
    log = tmp_path / "dcgm.csv"
    log.write_text(header + "\n".join(rows))
    series = [
        {
            "metric": {
                "__name__": field,
                "gpu": str(g),
                "UUID": uuid.format(g),
                "GPU_I_ID": str(mig),
                "GPU_I_PROFILE": "1g.6gb",
                "pod": f"pod-{mig}",
            },
            "values": [[1772366400 + 15 * i, str(value(g, i, mig))] for i in range(4)],
        }
        for g in (0, 1)
        for mig in (3, 4, 5)
        for field, value in (
            ("DCGM_FI_DEV_POWER_USAGE", lambda g, i, mig: 100 + 20 * g + i),
            ("DCGM_FI_DEV_FB_USED", lambda g, i, mig: 1000 * mig),
        )
    ]
    answer = tmp_path / "prometheus.json"
    answer.write_text(
        json.dumps({"status": "success", "data": {"resultType": "matrix", "result": series}})
    )
    for path, fmt, repeated in ((log, "dcgm", "16 row(s)"), (answer, "prometheus", "16 read")):
        frame, meta = import_log(path, fmt, nameplate_w=165.0)
        assert frame.groupby("gpu")["power_w"].apply(list).to_dict() == {
            0: [100.0, 101.0, 102.0, 103.0],
            1: [120.0, 121.0, 122.0, 123.0],
        }
        assert any(repeated in note and "MIG" in note for note in meta.model_extra["notes"])
    disagree = f"1772366400,0,{uuid.format(0)},4,pod-4,"  # one instance reads other power
    log.write_text(log.read_text().replace(f"{disagree}100", f"{disagree}190"))
    with pytest.raises(ImportError_, match="lines 2 and 3: gpu 0 at one time, under other "):
        import_log(log, "dcgm", nameplate_w=165.0)
    log.write_text(header + "\n".join(rows + rows))
    with pytest.raises(ImportError_, match="gpu 0: decreasing timestamp at line 26"):
        import_log(log, "dcgm", nameplate_w=165.0)


def test_a_compressed_log_imports_as_the_log_beneath(tmp_path: Path) -> None:
    """Log rotation compresses old logs (``.gz``; bzip2, xz and zstd too): each format reads
    through the compression, named and told by the suffix beneath; a file that its suffix
    calls compressed but is not is refused in one line naming the file."""
    import bz2
    import gzip
    import lzma

    import pyarrow as pa

    from grpo_power.telemetry.formats import log_format

    def zstd(data: bytes) -> bytes:  # as `zstd` writes it (one frame)
        return pa.Codec("zstd").compress(data, asbytes=True)

    logs = {
        "nvidia-smi-a100.csv": ("nvidia-smi", gzip.compress, ".gz"),
        "dcgm-exporter-a100.csv": ("dcgm", bz2.compress, ".bz2"),
        "prometheus-dcgm.json": ("prometheus", lzma.compress, ".xz"),
        "grafana-dcgm.csv": ("grafana", gzip.compress, ".gz"),
        "nvidia-smi-dmon.log": ("nvidia-smi-dmon", zstd, ".zst"),
    }
    for name, (fmt, compress, suffix) in logs.items():
        packed = tmp_path / f"{name}{suffix}"
        packed.write_bytes(compress((DATA / name).read_bytes()))
        assert log_format(packed) == (fmt, ""), name
        frame, meta = import_log(packed, fmt, nameplate_w=400.0, timezone="UTC")
        plain, _ = import_log(DATA / name, fmt, nameplate_w=400.0, timezone="UTC")
        assert frame.equals(plain), name
        assert meta.run_id == Path(name).stem
    for suffix in (".gz", ".zst"):
        bad = tmp_path / f"smi.csv{suffix}"
        bad.write_text((DATA / "nvidia-smi-a100.csv").read_text())  # not compressed at all
        with pytest.raises(ImportError_, match=rf"^{re.escape(str(bad))}: cannot be decompre"):
            import_log(bad, "nvidia-smi")


def test_a_victoriametrics_export_reads_as_the_query_result(tmp_path: Path) -> None:
    """VictoriaMetrics' /api/v1/export (JSON lines: labels, values, timestamps in ms) of the
    same series imports as the Prometheus query result does, one series a line or one alone;
    a broken later line is refused naming it."""
    from grpo_power.telemetry.formats import log_format

    document = json.loads((DATA / "prometheus-dcgm.json").read_text())
    lines = []
    for series in document["data"]["result"]:
        kept = [(t, v) for t, v in series["values"] if v != "NaN"]  # JSON holds no NaN
        lines.append(
            json.dumps(
                {
                    "metric": series["metric"],
                    "values": [float(v) for _, v in kept],
                    "timestamps": [int(t * 1000) for t, _ in kept],
                }
            )
        )
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(lines) + "\n")
    assert log_format(export) == ("prometheus", "")
    frame, meta = import_log(export, "prometheus")
    expected, query = import_log(DATA / "prometheus-dcgm.json", "prometheus")
    columns = ["t", "gpu", "power_w", "sm_util"]
    assert frame[columns].equals(expected[columns])
    assert (meta.start_unix_s, meta.model_extra["gpu_ids"]) == (
        query.start_unix_s,
        query.model_extra["gpu_ids"],
    )
    alone = tmp_path / "alone.json"
    alone.write_text(lines[0])
    frame, _ = import_log(alone, "prometheus", nameplate_w=400.0)
    assert frame["power_w"].tolist() == [62.5, 63.5, 264.5]
    export.write_text(lines[0] + "\n{not json\n")
    with pytest.raises(ImportError_, match=r"line 2: expected a series of a JSON-lines export"):
        import_log(export, "prometheus")


def test_an_instant_column_without_readings_falls_back_to_the_average(tmp_path: Path) -> None:
    """A log of power.draw.average and power.draw.instant (no power.draw) whose instant column
    is [N/A] in every row (a part or driver without it) was refused for missing readings; it
    reads the average, as a log of power.draw beside it reads power.draw, and says so. The
    order preferred stays: instant, then power.draw, then the average."""
    header = "timestamp, index, power.draw.average [W], power.draw.instant [W]"
    rows = [f"2026/11/03 10:00:0{s}.000, 0, {250 + s}.00 W, [N/A]" for s in range(4)]
    log = tmp_path / "smi.csv"
    log.write_text("\n".join([header, *rows]) + "\n")
    frame, meta = import_log(log, "nvidia-smi", nameplate_w=400.0)
    assert frame["power_w"].tolist() == [250.0, 251.0, 252.0, 253.0]
    assert meta.power_column == "power.draw.average [W]"
    assert (
        f"{log}: power from 'power.draw.average [W]': 'power.draw.instant [W]' is [N/A] in "
        "every row" in meta.model_extra["notes"]
    )
    both = "timestamp, index, power.draw.average [W], power.draw.instant [W], power.draw [W]"
    rows = [f"2026/11/03 10:00:0{s}.000, 0, {250 + s}.00 W, [N/A], [N/A]" for s in range(4)]
    log.write_text("\n".join([both, *rows]) + "\n")
    _, meta = import_log(log, "nvidia-smi", nameplate_w=400.0)
    assert meta.power_column == "power.draw.average [W]"
    assert (
        f"{log}: power from 'power.draw.average [W]': 'power.draw.instant [W]', "
        "'power.draw [W]' are [N/A] in every row" in meta.model_extra["notes"]
    )
    rows = [f"2026/11/03 10:00:0{s}.000, 0, 250.00 W, [N/A], {300 + s}.00 W" for s in range(4)]
    log.write_text("\n".join([both, *rows]) + "\n")
    frame, meta = import_log(log, "nvidia-smi", nameplate_w=400.0)
    assert meta.power_column == "power.draw [W]"  # power.draw before the average
    assert frame["power_w"].tolist() == [300.0, 301.0, 302.0, 303.0]


@pytest.mark.parametrize(
    ("last", "kept"),
    [
        ("2026/11/03 10:00:04.000, 0", False),  # one field short
        ("2026/11/03 10:00:04.000, 0, 25", False),  # a value cut before its unit
        ("2026/11/03 10:00:04.000, 0, [N/", False),  # [N/A] cut
        ("2026/11/03 10:00:04.000, 0, 254.00 W", True),  # complete, only the newline to come
    ],
)
def test_a_live_logs_line_being_written_is_left_out_and_noted(
    tmp_path: Path, last: str, kept: bool
) -> None:
    """A log copied while nvidia-smi writes it ends in a line without its newline: one field
    short, it refused the log ("a different number of fields"); cut before its unit, it read
    as 25 W. Such a line is left out and noted; a complete one is kept. The same for a rotated
    log's newest part and a DCGM CSV, which the same reader reads."""
    rows = [f"2026/11/03 10:00:0{s}.000, 0, {250 + s}.00 W" for s in range(4)]
    log = tmp_path / "smi.csv"
    log.write_text("\n".join(["timestamp, index, power.draw [W]", *rows, last]))
    frame, meta = import_log(log, "nvidia-smi", nameplate_w=400.0)
    notes = meta.model_extra["notes"]
    being_written = [n for n in notes if "a line being written" in n]
    assert frame["power_w"].tolist() == [250.0, 251.0, 252.0, 253.0] + [254.0] * kept
    if kept:
        assert not being_written
    else:
        assert being_written == [
            f"{log}: line 6 ({last!r}) ends the file without a newline and does not parse like "
            "the line before it: a line being written when the log was read, left out"
        ]
    if kept:
        return
    older = tmp_path / "smi.csv.1"
    older.write_text("timestamp, index, power.draw [W]\n2026/11/03 09:59:59.000, 0, 249.00 W\n")
    (joined,) = [p for p in tmp_path.iterdir() if p.name == "smi.csv"]
    from grpo_power.telemetry.rotation import RotatedLog

    frame, meta = import_log(RotatedLog((older, joined)), "nvidia-smi", nameplate_w=400.0)
    assert len(frame) == 5 and any("a line being written" in n for n in meta.model_extra["notes"])
    dcgm = tmp_path / "dcgm.csv"
    dcgm.write_text("timestamp,gpu,DCGM_FI_DEV_POWER_USAGE\n1800000000,0,250.5\n1800000001,0")
    frame, meta = import_log(dcgm, "dcgm", nameplate_w=400.0)
    assert len(frame) == 1 and any("a line being written" in n for n in meta.model_extra["notes"])


def test_a_log_of_two_power_fields_says_which_it_read_and_only_of_one_it_left(
    tmp_path: Path,
) -> None:
    """A DCGM log of both power fields reads the instantaneous one, and says the averaged one
    is not read; an nvidia-smi log's 1 s average is kept as the trace's power_avg_w, so no such
    note is made of it."""
    dcgm = tmp_path / "dcgm.csv"
    dcgm.write_text(
        "timestamp,gpu,DCGM_FI_DEV_POWER_USAGE,DCGM_FI_DEV_POWER_USAGE_INSTANT\n"
        "2026-11-01T10:00:00Z,0,200,250\n2026-11-01T10:00:01Z,0,210,260\n"
    )
    frame, meta = import_log(dcgm, "dcgm", nameplate_w=400.0)
    assert frame["power_w"].tolist() == [250.0, 260.0]
    (note,) = [n for n in meta.model_extra["notes"] if "not read" in n]
    assert "power from 'DCGM_FI_DEV_POWER_USAGE_INSTANT'" in note
    assert "'DCGM_FI_DEV_POWER_USAGE', in the log too, not read" in note
    smi = tmp_path / "smi.csv"
    smi.write_text(
        "timestamp, index, power.draw.instant [W], power.draw.average [W]\n"
        "2026/11/02 09:00:00.000, 0, 250.00 W, 240.00 W\n"
        "2026/11/02 09:00:01.000, 0, 260.00 W, 245.00 W\n"
    )
    frame, meta = import_log(smi, "nvidia-smi", nameplate_w=400.0, timezone="UTC")
    assert frame["power_w"].tolist() == [250.0, 260.0]
    assert frame["power_avg_w"].tolist() == [240.0, 245.0]
    assert not [n for n in meta.model_extra["notes"] if "not read" in n]
