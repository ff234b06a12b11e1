"""The config's JSON schema, generated from :class:`Config` (pydantic's ``model_json_schema``),
so the Snakefile (``snakemake.utils.validate``), editors and the Snakemake workflow catalog see
the same parameters, types, ranges and descriptions as the CLI: one source of truth.

``grpo-power config schema --out workflow/schemas/config.schema.json`` writes it; a test checks
that the committed file is current.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo_power.config.schema import Config

SCHEMA_PATH = Path("workflow/schemas/config.schema.json")  # in the repository
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def config_json_schema() -> dict[str, Any]:
    """The JSON schema of a config file (draft 2020-12), as validation reads it."""
    schema = Config.model_json_schema(mode="validation")
    return {"$schema": SCHEMA_DIALECT, **schema}


def config_json_schema_text() -> str:
    """The schema as the committed file holds it: sorted keys, two-space indent, a newline."""
    return json.dumps(config_json_schema(), indent=2, sort_keys=True) + "\n"
