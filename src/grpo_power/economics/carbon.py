"""Location-based emissions of energy drawn in a carbon region.

The region's intensity is looked up by :mod:`grpo_power.config.carbon_region` (CodeCarbon's
packaged data, offline), where the config's region values are checked too.
"""

from __future__ import annotations

from grpo_power.config.carbon_region import CarbonIntensity


def carbon_kg(energy_kwh: float, intensity: CarbonIntensity) -> float:
    """Location-based emissions of ``energy_kwh`` (GPU energy x PUE) in ``intensity``'s grid, kg."""
    return energy_kwh * intensity.g_per_kwh / 1000.0
