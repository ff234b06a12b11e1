"""The ``config`` commands: ``schema`` writes the config's JSON schema (generated from the
pydantic schema), the file the Snakefile validates the config with."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from grpo_power.cli.base import config_app, user_errors


@config_app.command("schema")
@user_errors
def config_schema(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the schema to this file (atomically); default: print it. The "
            "repository's copy is workflow/schemas/config.schema.json.",
        ),
    ] = None,
) -> None:
    """The config's JSON schema (draft 2020-12), generated from the pydantic schema."""
    from grpo_power.atomic import write_text_atomic
    from grpo_power.config.json_schema import config_json_schema_text

    text = config_json_schema_text()
    if out is None:
        typer.echo(text, nl=False)
        return
    write_text_atomic(out, text)
    typer.echo(f"config JSON schema -> {out}")
