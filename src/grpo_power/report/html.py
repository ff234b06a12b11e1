"""HTML rendering of the report: tables with traceable numbers, figures, sections, one page.

Only rendering lives here (escaping, markup, the style sheet); what the page says is composed
in :mod:`grpo_power.report.stage`. Every :class:`~grpo_power.report.cells.Num` becomes a
``<span class="num">`` whose ``data-*`` attributes name the file (relative to the page), the row
and the column it was read from; links to the source files and the figures are relative, so the
folder can be moved or served as it is.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

from grpo_power.report.cells import Cell, Num, Table

STYLE_SHEET = """
body { font-family: system-ui, sans-serif; max-width: 75rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { font-size: 1.7rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6rem 0 0.3rem; font-size: 0.82rem; }
th, td { border: 1px solid #ddd; padding: 0.2rem 0.45rem; vertical-align: top; }
th { background: #f3f3f3; text-align: left; }
td .num { font-variant-numeric: tabular-nums; white-space: nowrap; }
.note, .sources { font-size: 0.8rem; color: #555; }
.simulated { background: #fff3cd; padding: 0.1rem 0.35rem; border-radius: 0.2rem; }
figure { margin: 1.2rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { font-size: 0.85rem; color: #333; }
.caution { border-left: 4px solid #c0392b; padding-left: 0.8rem; }
"""


def rel(path: Path, base: Path) -> str:
    """``path`` relative to the folder ``base`` (the page's folder), with forward slashes."""
    return Path(os.path.relpath(Path(path).resolve(), Path(base).resolve())).as_posix()


def esc(text: object) -> str:
    """Text escaped for HTML content and attributes."""
    return html.escape(str(text), quote=True)


def num_html(num: Num, base: Path) -> str:
    """A number with its provenance in ``data-*`` attributes."""
    attributes = {
        "data-src": rel(num.src, base),
        "data-col": num.column,
        "data-row": json.dumps(dict(num.row), sort_keys=True),
        "data-spec": num.spec,
        "data-scale": repr(num.scale),
    }
    attrs = " ".join(f'{k}="{esc(v)}"' for k, v in attributes.items())
    return f'<span class="num" {attrs}>{esc(num.text())}</span>'


def cell_html(cell: Cell, base: Path) -> str:
    """A cell's parts: text escaped, numbers with their provenance."""
    parts = cell if isinstance(cell, list) else [cell]
    return "".join(num_html(p, base) if isinstance(p, Num) else esc(p) for p in parts)


def table_html(table: Table, base: Path) -> str:
    """A titled table with its note and links to its source files."""
    head = "".join(f"<th>{esc(c)}</th>" for c in table.columns)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{cell_html(c, base)}</td>" for c in row) + "</tr>"
        for row in table.rows
    )
    sources = ", ".join(
        f'<a href="{esc(rel(s, base))}">{esc(rel(s, base))}</a>' for s in table.sources
    )
    note = f'<p class="note">{cell_html(table.note, base)}</p>' if table.note else ""
    return (
        f'<h3 id="table-{esc(table.key)}">{esc(table.title)}</h3>\n'
        f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>\n"
        f'{note}<p class="sources">source: {sources}</p>'
    )


def figure_html(title: str, caption: str, png: Path, pdf: Path, base: Path) -> str:
    """A figure: its PNG inline, its caption, a link to the PDF."""
    return (
        f'<figure id="figure-{esc(png.stem)}">\n'
        f'<img src="{esc(rel(png, base))}" alt="{esc(title)}">\n'
        f"<figcaption><strong>{esc(title)}.</strong> {esc(caption)} "
        f'(<a href="{esc(rel(pdf, base))}">PDF</a>)</figcaption>\n</figure>'
    )


def section(title: str, *blocks: str, key: str | None = None) -> str:
    """A section: a heading and its blocks of HTML."""
    anchor = f' id="{esc(key)}"' if key else ""
    return f"<section{anchor}>\n<h2>{esc(title)}</h2>\n" + "\n".join(blocks) + "\n</section>"


def paragraph(text: str, css: str = "") -> str:
    """A paragraph of escaped text."""
    klass = f' class="{esc(css)}"' if css else ""
    return f"<p{klass}>{esc(text)}</p>"


def bullet_list(items: list[Cell], base: Path, css: str = "") -> str:
    """A list whose items are cells (text and traceable numbers)."""
    klass = f' class="{esc(css)}"' if css else ""
    return f"<ul{klass}>" + "".join(f"<li>{cell_html(i, base)}</li>" for i in items) + "</ul>"


def page(title: str, subtitle: str, sections: list[str]) -> str:
    """The whole page."""
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{esc(title)}</title>\n'
        f"<style>{STYLE_SHEET}</style>\n</head>\n<body>\n<h1>{esc(title)}</h1>\n"
        f'<p class="simulated">{esc(subtitle)}</p>\n' + "\n".join(sections) + "\n</body>\n</html>\n"
    )
