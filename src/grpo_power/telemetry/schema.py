"""The trace data contract (docs/design.md section 7): columns and file metadata."""

from __future__ import annotations

import json
import socket
import time
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grpo_power.config.base import validation_problems
from grpo_power.layout import TRACE_METADATA_KEY
from grpo_power.version import __version__

TRACE_SCHEMA = pa.schema(
    [
        pa.field("t", pa.float64(), nullable=False),  # s since run start, monotonic
        pa.field("gpu", pa.int32(), nullable=False),  # GPU index (NVML numbering)
        pa.field("power_w", pa.float64(), nullable=False),  # instantaneous power, W
        pa.field("power_avg_w", pa.float64()),  # NVML 1 s average, W, or null
        pa.field("energy_j", pa.float64()),  # cumulative energy since run start, J, or null
        pa.field("sm_util", pa.float32()),  # SM utilisation, %
        pa.field("mem_util", pa.float32()),  # memory utilisation, %
        pa.field("sm_clock_mhz", pa.float32()),
        pa.field("temp_c", pa.float32()),
        pa.field("power_limit_w", pa.float64()),  # enforced power limit, W
        # the workload at the sample (an engine's metrics, or the step log's generation), or null
        pa.field("concurrency", pa.float64()),  # sequences decoded together
        pa.field("tokens_per_s", pa.float64()),  # generated tokens per second
    ]
)
TRACE_COLUMNS: tuple[str, ...] = tuple(TRACE_SCHEMA.names)
# Every reader needs these; the others are optional (absent: null, as a sensor without them).
REQUIRED_COLUMNS: tuple[str, ...] = ("t", "gpu", "power_w")
OPTIONAL_COLUMNS: tuple[str, ...] = tuple(c for c in TRACE_COLUMNS if c not in REQUIRED_COLUMNS)

TraceSource = Literal["nvml", "simulated", "imported"]


class TraceMetadata(BaseModel):
    """File-level metadata of a trace, stored as JSON in the Parquet schema metadata."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    run_id: str
    source: TraceSource
    gpu_name: str
    nameplate_w: float = Field(gt=0)
    sample_period_s: float = Field(gt=0)
    host: str = Field(default_factory=socket.gethostname)
    start_unix_s: float = Field(default_factory=time.time, description="Wall clock at t = 0, s.")
    tool_version: str = __version__
    simulated: bool = Field(
        False, description="True when power values come from a model, never from a meter."
    )
    gpu_uuids: dict[str, str] = Field(
        default_factory=dict,
        description="Each GPU number's UUID where the source names it (NVML, nvidia-smi's uuid, "
        "DCGM's UUID): the GPU's identity across traces.",
    )

    def to_schema(self) -> pa.Schema:
        """The trace schema carrying this metadata."""
        return TRACE_SCHEMA.with_metadata({TRACE_METADATA_KEY: self.model_dump_json().encode()})

    @classmethod
    def raw_from_schema(cls, schema: pa.Schema, path: str) -> dict[str, Any] | None:
        """The metadata stored in a trace file's schema, unvalidated; None when it has none."""
        raw = (schema.metadata or {}).get(TRACE_METADATA_KEY)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{path}: trace metadata is not valid JSON: {error}") from None
        if not isinstance(data, dict):
            raise ValueError(
                f"{path}: trace metadata: expected a JSON object, got {type(data).__name__}"
            )
        return data

    @classmethod
    def validated(cls, data: dict[str, Any], path: str) -> TraceMetadata:
        """Metadata from a mapping; errors name the file and every bad field, on one line."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            problems = "; ".join(validation_problems(error))
            raise ValueError(f"{path}: trace metadata: {problems}") from None

    @classmethod
    def from_schema(cls, schema: pa.Schema, path: str) -> TraceMetadata:
        """Read metadata back from a trace file's schema; errors name the file."""
        data = cls.raw_from_schema(schema, path)
        if data is None:
            raise ValueError(
                f"{path}: not a grpo-power trace (no '{TRACE_METADATA_KEY.decode()}' metadata); "
                "use `grpo-power telemetry import` for nvidia-smi or DCGM logs"
            )
        return cls.validated(data, path)

    def describe(self) -> dict[str, Any]:
        """Metadata as a plain dict, for manifests and reports."""
        return self.model_dump(mode="json")
