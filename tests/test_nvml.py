"""The NVML source against a fake NVML module (the project's one mock: no GPU on CI machines)."""

from __future__ import annotations

import pytest

from grpo_power.config import load_config
from grpo_power.telemetry.nvml import NvmlSource, visible_gpu_ids
from grpo_power.telemetry.record import trace_metadata
from grpo_power.telemetry.signals import WorkloadSignal
from grpo_power.telemetry.simulated import SimulatedGpuSource
from grpo_power.telemetry.source import TelemetryUnavailable
from tests.conftest import FakeGpu, fake_nvml


def test_field_value_path_gives_instant_average_and_energy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpus = [
        FakeGpu(0, "GPU-a", 312_500, 298_000, 5_000_000),
        FakeGpu(1, "GPU-b", 61_000, 60_000, 9_000),
    ]
    source = NvmlSource(nvml=fake_nvml(gpus))
    assert [g.index for g in source.gpus] == [0, 1]
    assert source.gpus[0].nameplate_w == 400.0
    assert "NVML_FI_DEV_POWER_INSTANT" in source.power_w_semantics
    gpus[0].energy_mj += 150_000  # 150 J spent since the source opened
    rows = source.read(0.0)
    assert rows[0]["power_w"] == 312.5 and rows[0]["power_avg_w"] == 298.0
    assert rows[0]["energy_j"] == pytest.approx(150.0)
    assert rows[1]["energy_j"] == 0.0
    assert rows[0]["power_limit_w"] == 350.0 and rows[0]["sm_util"] == 97.0
    assert "usage" not in gpus[0].calls


def test_a_trace_of_real_gpus_names_each_by_its_uuid() -> None:
    """What `telemetry record`, `PowerMonitor` and a run write names each NVML GPU by its UUID,
    so the planner knows the GPU in any other trace or log of it; a simulated GPU has none."""
    gpus = [FakeGpu(2, "GPU-c", 100_000, 100_000, 0), FakeGpu(3, "GPU-d", 100_000, 100_000, 0)]
    source = NvmlSource(["GPU-d", "GPU-c"], nvml=fake_nvml(gpus))
    assert trace_metadata(source, "run", 0.1).gpu_uuids == {"3": "GPU-d", "2": "GPU-c"}
    config = load_config()
    simulated = SimulatedGpuSource(config.gpu, config.telemetry.simulated, WorkloadSignal(), [0])
    assert trace_metadata(simulated, "run", 0.1).gpu_uuids == {}


def test_a_simulated_trace_says_what_its_power_is_for_the_part_simulated() -> None:
    """A simulated H100 gives the 1 s average as power_w, as NVML's power usage does on it: its
    trace says so (every simulated trace said "instantaneous (simulated A100)")."""
    config = load_config(overrides={"gpu": {"name": "NVIDIA H100 80GB HBM3"}, "cap_w": 500})
    signal = WorkloadSignal()
    h100 = SimulatedGpuSource(config.gpu, config.telemetry.simulated, signal, [0])
    meta = trace_metadata(h100, "run", 0.1)
    assert meta.model_extra["power_w_semantics"] == (
        "1 s average, as nvmlDeviceGetPowerUsage gives it on the NVIDIA H100 80GB HBM3 (simulated)"
    )
    signal.set("generate", 32)
    rows = [h100.read(0.1 * i)[0] for i in range(1, 30)]
    assert all(row["power_w"] == row["power_avg_w"] for row in rows)
    a100 = SimulatedGpuSource(load_config().gpu, config.telemetry.simulated, signal, [0])
    assert trace_metadata(a100, "run", 0.1).model_extra["power_w_semantics"] == (
        "instantaneous (simulated NVIDIA A100-SXM4-80GB)"
    )


def test_falls_back_to_power_usage_when_fields_are_unsupported() -> None:
    gpu = FakeGpu(0, "GPU-a", 0, 0, 1000, supports_fields=False, usage_mw=251_000)
    source = NvmlSource(["0"], nvml=fake_nvml([gpu]))
    assert "nvmlDeviceGetPowerUsage" in source.power_w_semantics
    row = source.read(0.0)[0]
    assert row["power_w"] == 251.0 and row["power_avg_w"] is None


def test_cuda_visible_devices_selects_gpus_by_index_or_uuid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpus = [FakeGpu(i, f"GPU-{i}", 100_000, 100_000, 0) for i in range(4)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-3")
    assert visible_gpu_ids() == ["2", "GPU-3"]
    source = NvmlSource(nvml=fake_nvml(gpus))
    assert [g.index for g in source.gpus] == [2, 3]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-unknown")
    with pytest.raises(TelemetryUnavailable, match="GPU 'GPU-unknown' from CUDA_VISIBLE_DEVICES"):
        NvmlSource(nvml=fake_nvml(gpus))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(TelemetryUnavailable, match="CUDA_VISIBLE_DEVICES is empty"):
        NvmlSource(nvml=fake_nvml(gpus))


def test_gpus_are_cuda_devices_numbered_through_cuda_visible_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Slurm job given GPUs 2 and 3 of a shared node (CUDA_VISIBLE_DEVICES=2,3) asks for its
    cuda:1 as gpus=[1], as torch numbers it and Zeus's monitor takes it: NVML's GPU 3, not
    another job's GPU 1; samples name it by its NVML index. A device beyond the visible ones is
    refused in one line."""
    gpus = [FakeGpu(i, f"GPU-{i}", 100_000 * (i + 1), 100_000, 0) for i in range(4)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    source = NvmlSource(["1"], nvml=fake_nvml(gpus))
    assert [g.index for g in source.gpus] == [3]
    assert source.read(0.0)[0]["power_w"] == 400.0  # GPU 3's reading
    with pytest.raises(
        TelemetryUnavailable,
        match=r"^gpus: CUDA device 2 is not visible: "
        r"CUDA_VISIBLE_DEVICES='2,3' makes 2 GPU\(s\) visible",
    ):
        NvmlSource(["0", "2"], nvml=fake_nvml(gpus))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-3,GPU-1")  # UUIDs, in CUDA's order
    assert [g.index for g in NvmlSource(["0"], nvml=fake_nvml(gpus)).gpus] == [3]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert [g.index for g in NvmlSource(["1"], nvml=fake_nvml(gpus)).gpus] == [1]


def test_the_simulated_gpus_are_numbered_as_nvml_would_number_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a GPU, ``PowerMonitor(gpus=[0])`` in a job given GPUs 2 and 3 samples a
    simulated GPU 2, as NVML would sample and name its GPU (it was GPU 0); a device beyond the
    visible ones is refused as NVML refuses it, and a GPU named twice in one line (it was
    sampled twice)."""
    from grpo_power import PowerMonitor

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert [g.index for g in PowerMonitor(gpus=[0], source="simulated").source.gpus] == [2]
    assert [g.index for g in PowerMonitor(source="simulated").source.gpus] == [2, 3]
    with pytest.raises(TelemetryUnavailable, match=r"^gpus: CUDA device 5 is not visible"):
        PowerMonitor(gpus=[5], source="simulated")
    with pytest.raises(ValueError, match=r"^PowerMonitor: gpus: expected each GPU once"):
        PowerMonitor(gpus=[1, 1], source="simulated")
    # a job given its GPUs by UUID: one simulated GPU each, by CUDA device number (it was one)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-3,GPU-1")
    assert [g.index for g in PowerMonitor(source="simulated").source.gpus] == [0, 1]
    assert [g.index for g in PowerMonitor(gpus=[1], source="simulated").source.gpus] == [1]
    with pytest.raises(TelemetryUnavailable, match=r"^gpus: CUDA device 2 is not visible"):
        PowerMonitor(gpus=[2], source="simulated")


def test_missing_library_says_what_to_do() -> None:
    with pytest.raises(
        TelemetryUnavailable, match=r"libnvidia-ml.so.1\) not found.*source: simulated"
    ):
        NvmlSource(nvml=fake_nvml([], library_present=False))


def test_real_pynvml_without_a_driver_gives_the_same_clear_error() -> None:
    """On machines without an NVIDIA driver (CI) the real pynvml raises LibraryNotFound."""
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        with pytest.raises(TelemetryUnavailable, match="not found"):
            NvmlSource()
    else:  # a machine with a driver: the source opens for real
        pynvml.nvmlShutdown()
        source = NvmlSource()
        assert source.gpus and source.read(0.0)[0]["power_w"] > 0
        source.close()
