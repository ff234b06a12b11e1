"""Carbon regions: the intensity of a grid region, looked up offline in CodeCarbon's packaged
data, and the config value type :data:`CarbonRegion` (a region CodeCarbon knows).

Two kinds of region, as CodeCarbon ships them:

- a country, by ISO 3166 alpha-3 code (``USA``, ``FRA``): ``data/private_infra/
  global_energy_mix.json``, the grid's average intensity for the year stated per country
  (CodeCarbon compiles it from Our World in Data's energy data);
- a cloud region, as ``<provider>:<region>`` (``gcp:us-central1``): ``data/cloud/impact.csv``,
  the provider's published figure, with its source URL.

The files are read directly (CodeCarbon itself is not imported: it would start logging and
probing hardware), so a config is validated in milliseconds. An unknown region raises
:class:`UnknownRegion` with the closest valid names; nothing falls back to a world average.
"""

from __future__ import annotations

import csv
import difflib
import functools
import json
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

COUNTRY_FILE = "data/private_infra/global_energy_mix.json"
CLOUD_FILE = "data/cloud/impact.csv"


class UnknownRegion(ValueError):
    """CodeCarbon's data has no intensity for a region (or CodeCarbon's data is missing)."""


@dataclass(frozen=True)
class CarbonIntensity:
    """Grid carbon intensity of one region, gCO2eq per kWh, with where it comes from."""

    region: str
    name: str
    g_per_kwh: float
    source: str
    year: int | None


def _codecarbon_file(relative: str) -> Path:
    """A data file of the installed CodeCarbon package (found without importing it)."""
    spec = find_spec("codecarbon")
    if spec is None or not spec.submodule_search_locations:
        raise UnknownRegion("CodeCarbon is not installed: `pip install 'codecarbon>=3.0'`")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise UnknownRegion(
            f"this CodeCarbon ({_codecarbon_version()}) has no {relative}; install codecarbon 3.x"
        )
    return path


def _codecarbon_version() -> str:
    try:
        return version("codecarbon")
    except PackageNotFoundError:
        return "not installed"


@functools.cache
def _regions() -> dict[str, CarbonIntensity]:
    """Every region CodeCarbon knows, keyed by its case-folded name."""
    release = f"CodeCarbon {_codecarbon_version()}"
    regions: dict[str, CarbonIntensity] = {}
    countries = json.loads(_codecarbon_file(COUNTRY_FILE).read_text())
    for code, row in countries.items():
        if row.get("carbon_intensity") is None:
            continue
        regions[code.casefold()] = CarbonIntensity(
            region=code,
            name=row.get("country_name", code),
            g_per_kwh=float(row["carbon_intensity"]),
            source=f"{release} {COUNTRY_FILE} (Our World in Data energy mix)",
            year=int(row["year"]) if row.get("year") else None,
        )
    with _codecarbon_file(CLOUD_FILE).open(newline="", encoding="utf-8-sig") as handle:
        for row in csv.DictReader(handle):
            key = f"{row['provider']}:{row['region']}"
            where = ", ".join(v for v in (row.get("city"), row.get("country_name")) if v)
            regions[key.casefold()] = CarbonIntensity(
                region=key,
                name=f"{row['providerName']} {row['region']} ({where})",
                g_per_kwh=float(row["impact"]),
                source=f"{release} {CLOUD_FILE}: {row['source']} (the table gives no year)",
                year=None,
            )
    return regions


def carbon_intensity(region: str) -> CarbonIntensity:
    """The intensity of ``region`` (country code or ``provider:region``, any case).

    Raises:
        UnknownRegion: CodeCarbon has no such region; the message lists the closest valid ones.
    """
    regions = _regions()
    asked = region.strip().casefold()
    found = regions.get(asked)
    if found is not None:
        return found
    provider, _, _ = asked.rpartition(":")
    providers = sorted({k.partition(":")[0] for k in regions if ":" in k})
    if provider and provider not in providers:
        raise UnknownRegion(
            f"unknown carbon region {region!r}: CodeCarbon {_codecarbon_version()}'s cloud table "
            f"has no {provider} regions (its providers: {', '.join(providers)}); use the country "
            "code of where the region is (DEU for a Frankfurt region), or give the provider's "
            "own figure as economics.carbon_intensity (value g/kWh, source, year)"
        )
    # a cloud region is matched among its provider's; a country by its code or by its name
    keys = [k for k in regions if k.startswith(f"{provider}:")] if provider else list(regions)
    names = {regions[k].name.casefold(): k for k in keys if ":" not in k}
    close = difflib.get_close_matches(asked, keys, n=5, cutoff=0.5)
    close += [names[n] for n in difflib.get_close_matches(asked, list(names), n=3, cutoff=0.6)]
    shown = [f"{regions[k].region} ({regions[k].name})" if ":" not in k else regions[k].region
             for k in dict.fromkeys(close)]  # fmt: skip
    suggestions = ", ".join(shown) or "none close"
    raise UnknownRegion(
        f"unknown carbon region {region!r} (closest: {suggestions}). Use an ISO 3166 alpha-3 "
        f"country code such as USA or FRA, or a cloud region such as gcp:us-central1; CodeCarbon "
        f"{_codecarbon_version()} knows {len(regions)} regions"
    )


def known_regions() -> list[str]:
    """Every region name :func:`carbon_intensity` accepts, sorted."""
    return sorted(r.region for r in _regions().values())


def _known_region(region: str) -> str:
    """``region`` when CodeCarbon's data has its intensity; else :class:`UnknownRegion` (a
    ValueError, so pydantic reports it on the field) naming the closest regions."""
    carbon_intensity(region)
    return region


# A config value naming a carbon region (``economics.carbon_region``): checked when validated.
CarbonRegion = Annotated[str, AfterValidator(_known_region)]
