"""Config section of the economics stage: ``economics`` (sourced prices, PUE, capacity cost,
the carbon region, the sensitivity ranges and the pilot)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import (
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from grpo_power.config.arms import SimArmName
from grpo_power.config.base import (
    PositiveFloat,
    Strict,
)
from grpo_power.config.carbon_region import CarbonRegion


class SourcedValue(Strict):
    """A constant with where it comes from and the year it describes (the report lists both)."""

    unit: ClassVar[str] = ""
    value: float

    source: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] = Field(
        description="Publication or table the value comes from."
    )
    year: Annotated[int, Field(ge=1990, le=2100)] = Field(description="Year the value describes.")


HOST_MIN_W = 10.0  # a host share below this is kW written for W (a DGX A100's: 412.5 W)
GPU_HOUR_MAX_USD = 100.0  # above this, a GPU-hour price is cents written for dollars
CARBON_MAX_G_PER_KWH = 2000.0  # twice a coal-only grid's intensity


def _price_usd_per_kwh(value: float) -> float:
    """``value`` if a plausible electricity price in $/kWh (above 0, at most 2: cents are not)."""
    if not 0 < value <= 2:
        raise ValueError(
            f"{value:g} $/kWh is implausible (expected above 0 and at most 2 $/kWh): is it in "
            f"cents? {value:g} c/kWh is {value / 100:g} $/kWh"
        )
    return value


def _pue(value: float) -> float:
    """``value`` if a plausible PUE (1 to 3)."""
    if not 1 <= value <= 3:
        raise ValueError(f"PUE {value:g} is implausible: expected 1 to 3")
    return value


def _capacity_usd_per_mw(value: float) -> float:
    """``value`` if a plausible capacity cost in $/MW (1e5 to 1e9: dollars, not millions)."""
    if not 1e5 <= value <= 1e9:
        raise ValueError(
            f"{value:g} $/MW is implausible (outside 1e5-1e9 $/MW): write dollars, e.g. "
            "11.7e6 for $11.7 million per MW"
        )
    return value


def _gpu_hour_usd(value: float) -> float:
    """``value`` if a plausible GPU-hour price in $ (above 0, at most 100: cents are not)."""
    if not 0 < value <= GPU_HOUR_MAX_USD:
        raise ValueError(
            f"{value:g} $ per GPU-hour is implausible (expected above 0 and at most "
            f"{GPU_HOUR_MAX_USD:g} $): is it in cents? {value:g} c is {value / 100:g} $"
        )
    return value


class ElectricityPrice(SourcedValue):
    """Electricity price paid by the datacenter, $/kWh (not cents)."""

    unit: ClassVar[str] = "$/kWh"

    value: PositiveFloat = Field(description="$/kWh (0.0806, not 8.06 cents).")

    @field_validator("value")
    @classmethod
    def _not_cents(cls, value: float) -> float:
        return _price_usd_per_kwh(value)


class PowerUsageEffectiveness(SourcedValue):
    """Power usage effectiveness: facility energy / IT energy (1.0 = no overhead)."""

    unit: ClassVar[str] = "facility / IT energy"

    value: Annotated[float, Field(ge=1, le=3)] = Field(description="PUE, at least 1.")


class CapacityCost(SourcedValue):
    """Capital cost of one MW of datacenter critical (IT) capacity, $/MW."""

    unit: ClassVar[str] = "$/MW"

    value: PositiveFloat = Field(description="$ per MW of critical load (11.7e6, not 11.7).")

    @field_validator("value")
    @classmethod
    def _whole_dollars(cls, value: float) -> float:
        return _capacity_usd_per_mw(value)


class HostPower(SourcedValue):
    """Provisioned non-GPU IT power per GPU (CPUs, memory, network, fans of its server), W."""

    unit: ClassVar[str] = "W per GPU"

    value: Annotated[float, Field(ge=0, le=5000)] = Field(description="W per GPU; 0 = GPUs only.")

    @field_validator("value")
    @classmethod
    def _watts(cls, value: float) -> float:
        if 0 < value < HOST_MIN_W:
            raise ValueError(
                f"{value:g} W per GPU is implausible (expected 0, GPUs only, or at least "
                f"{HOST_MIN_W:g} W): is it in kW? {value:g} kW is {value * 1000:g} W"
            )
        return value


class GpuHourPrice(SourcedValue):
    """Rental price of one GPU for one hour, $."""

    unit: ClassVar[str] = "$ per GPU-hour"

    value: PositiveFloat = Field(description="$ per GPU-hour (4.10, not 410 cents).")

    @field_validator("value")
    @classmethod
    def _not_cents(cls, value: float) -> float:
        return _gpu_hour_usd(value)


class OwnCarbonIntensity(SourcedValue):
    """A grid carbon intensity of your own (a utility's or a contract's figure), gCO2eq/kWh,
    used instead of the carbon region's."""

    unit: ClassVar[str] = "gCO2eq/kWh"

    value: Annotated[float, Field(ge=0)] = Field(description="gCO2eq per kWh (380, not 0.38 kg).")

    @field_validator("value")
    @classmethod
    def _grams(cls, value: float) -> float:
        if 0 < value < 2:
            raise ValueError(
                f"{value:g} gCO2eq/kWh is implausible for a grid (expected grams, 2 to "
                f"{CARBON_MAX_G_PER_KWH:g}): is it in kg/kWh? {value:g} kg is {value * 1000:g} g"
            )
        if value > CARBON_MAX_G_PER_KWH:
            raise ValueError(
                f"{value:g} gCO2eq/kWh is implausible (the most carbon-intensive grids are "
                f"about 1,000): expected at most {CARBON_MAX_G_PER_KWH:g}"
            )
        return value


class Range(Strict):
    """A low and a high value a headline number is recomputed at (sensitivity), and where
    they come from (the constants table cites it)."""

    low: float
    high: float
    source: str = Field("", description="Where the two ends come from (empty: not given).")

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.low >= self.high:
            raise ValueError(
                f"low ({self.low:g}) must be below high ({self.high:g}): a range recomputes the "
                "headline at its two ends"
            )
        return self


# a 3-year committed GPU-hour price as a share of on-demand: an assumed case (not sourced
# offline), the low end of the GPU-hour range where the config gives none
COMMITTED_SHARE = 0.37


class SensitivityConfig(Strict):
    """One-at-a-time sensitivity of the headline economics to electricity price, PUE, capacity
    cost, GPU-hour price and carbon intensity."""

    electricity_usd_per_kwh: Range = Field(
        default_factory=lambda: Range(
            low=0.0575,
            high=0.1864,
            source="US EIA, Electric Power Annual 2023 (released 2024), average revenue per kWh "
            "from industrial customers by state: low New Mexico 5.75 c (the lowest state), high "
            "case California 18.64 c (a high case, not the highest state: Hawaii's is higher) "
            "(2023)",
        ),
        description="$/kWh, a low and a high price the fleet could pay.",
    )
    pue: Range = Field(
        default_factory=lambda: Range(
            low=1.10,
            high=2.0,
            source="Low: Google's fleet-wide trailing-twelve-month PUE, about 1.10 (Google 2024 "
            "Environmental Report, 2023 data); high: an assumption for older air-cooled "
            "enterprise rooms",
        ),
        description="PUE, the most and least efficient facility considered.",
    )
    capacity_usd_per_mw: Range = Field(
        default_factory=lambda: Range(
            low=9.3e6,
            high=15.0e6,
            source="Cushman & Wakefield, Data Center Development Cost Guide 2025 (2024 data): "
            "the cheapest (San Antonio) and dearest (Reno) of 19 US markets",
        ),
        description="$/MW of critical load, the cheapest and dearest site considered.",
    )
    gpu_hour_usd: Range | None = Field(
        None,
        description="$ per GPU-hour, a committed price and the on-demand one: moves the GPU-time "
        "$ figures. null: from the configured gpu_hour down to "
        f"{COMMITTED_SHARE:g} of it (EconomicsConfig.gpu_hour_range), so a price of one's own "
        "needs no range of its own.",
    )
    carbon_regions: list[CarbonRegion] = Field(
        default_factory=lambda: ["FRA", "IND"],
        min_length=1,
        description="Carbon regions (same forms as carbon_region) the carbon figures are "
        "recomputed at: default a low-carbon grid (France) and a coal-heavy one (India).",
    )

    @model_validator(mode="after")
    def _valid(self) -> SensitivityConfig:
        """Each end of a range passes the checks its base value does (a price in cents, a PUE
        of 20 or a capacity cost in millions was recomputed at without a word)."""
        for name, check in (
            ("electricity_usd_per_kwh", _price_usd_per_kwh),
            ("pue", _pue),
            ("capacity_usd_per_mw", _capacity_usd_per_mw),
            ("gpu_hour_usd", _gpu_hour_usd),
        ):
            bounds: Range | None = getattr(self, name)
            if bounds is None:  # the GPU-hour price's: EconomicsConfig.gpu_hour_range
                continue
            for end in ("low", "high"):
                try:
                    check(getattr(bounds, end))
                except ValueError as error:
                    raise ValueError(f"{name}.{end}: {error}") from None
        return self


class PilotConfig(Strict):
    """The low-cost pilot that would confirm the controller's gain and the oversubscription
    headroom on real hardware (``economics/pilot.py``)."""

    gpus_per_node: Annotated[int, Field(ge=1)] = Field(
        8, description="GPUs per node (NVIDIA DGX/HGX A100: 8)."
    )
    run_steps: Annotated[int, Field(ge=1)] = Field(
        500, description="GRPO steps per pilot run (the study's runs: 500 steps)."
    )
    confidence: Annotated[float, Field(gt=0.5, lt=1)] = Field(
        0.95, description="Confidence of the pilot's conclusions (two-sided for the gain)."
    )
    power: Annotated[float, Field(gt=0.5, lt=1)] = Field(
        0.8, description="Probability that the pilot detects the gain when it is there."
    )
    min_effect_share: Annotated[float, Field(gt=0, le=1)] = Field(
        0.5,
        description="The pilot is sized to detect a gain this share of the simulated one "
        "(the real gain may be smaller than the simulator's).",
    )
    sd_inflation: Annotated[float, Field(ge=1)] = Field(
        2.0,
        description="Seed-to-seed spread of real runs relative to the simulator's (an "
        "assumption: the simulator's noise is narrower than a real cluster's).",
    )
    min_seeds: Annotated[int, Field(ge=2)] = Field(
        3, description="Seeds per arm at least, whatever the power calculation says."
    )
    exceedance_target: Annotated[float, Field(gt=0, lt=1)] = Field(
        0.001,
        description="Fleet exceedance rate at fleet.window_s the pilot must bound: with no "
        "exceedance in n independent windows, the rate is below -ln(1 - confidence) / n.",
    )


class EconomicsConfig(Strict):
    """Energy cost, carbon, oversubscription value and the pilot (the economics stage).

    Every constant carries its source and year; the carbon intensity is looked up offline in
    CodeCarbon's packaged data (location-based), never defaulted to a world average.
    """

    electricity_price: ElectricityPrice = Field(
        default_factory=lambda: ElectricityPrice(
            value=0.0806,
            source="US EIA, Electric Power Annual 2023 (released October 2024): average retail "
            "price to industrial customers, US, 8.06 c/kWh",
            year=2023,
        )
    )
    pue: PowerUsageEffectiveness = Field(
        default_factory=lambda: PowerUsageEffectiveness(
            value=1.58,
            source="Uptime Institute Global Data Center Survey 2023: industry average PUE",
            year=2023,
        )
    )
    carbon_region: CarbonRegion = Field(
        "USA",
        description="Where the fleet draws power: an ISO 3166 alpha-3 country code (CodeCarbon's "
        "global_energy_mix.json: Our World in Data / Ember, the year per country) or "
        "'<provider>:<region>' for a cloud region (CodeCarbon's cloud/impact.csv, the "
        "provider's published figure), e.g. 'gcp:us-central1'. Location-based intensity.",
    )
    carbon_intensity: OwnCarbonIntensity | None = Field(
        None,
        description="Your own grid intensity (value gCO2eq/kWh, source, year), used instead of "
        "carbon_region's; give one of the two.",
    )
    capacity_cost: CapacityCost = Field(
        default_factory=lambda: CapacityCost(
            value=11.7e6,
            source="Cushman & Wakefield, Data Center Development Cost Guide 2025: average cost "
            "to develop 1 MW of critical load across 19 US markets ($9.3M-$15.0M), data "
            "through October 2024",
            year=2024,
        )
    )
    host_power: HostPower = Field(
        default_factory=lambda: HostPower(
            value=412.5,
            source="NVIDIA DGX A100 datasheet: 6.5 kW maximum system power for 8 A100 "
            "(8 x 400 W on GPUs) -> (6500 - 3200) / 8 W per GPU, provisioned at nameplate",
            year=2020,
        )
    )
    gpu_hour: GpuHourPrice = Field(
        description="What a GPU-hour costs: prices the GPU time a token takes and the pilot.",
        default_factory=lambda: GpuHourPrice(
            value=4.10,
            source="AWS EC2 p4d.24xlarge (8x A100 40 GB) on-demand, us-east-1: "
            "$32.77 per hour / 8 GPUs (a 2024 list price: AWS cut P4 and P5 on-demand prices in "
            "June 2025, P5 by up to 45 %; re-source before quoting)",
            year=2024,
        ),
    )
    fleet_gpus: Annotated[int, Field(ge=1)] = Field(
        10_000, description="GPUs of the fleet the annual cost and carbon are scaled to."
    )
    year: Annotated[int, Field(ge=2000, le=2100)] = Field(
        2025, description="Calendar year the annual figures cover (8784 h in leap years)."
    )
    utilization: Annotated[float, Field(gt=0, le=1)] = Field(
        1.0,
        description="Share of the year's hours the fleet runs GRPO training; the fleet-year "
        "figures count those hours only (the rest of the year's energy, other work or idle, is "
        "not GRPO's and not counted).",
    )
    controller_arm: SimArmName = Field(
        "ppo", description="The arm whose savings the headline reports."
    )
    baseline_arm: SimArmName = Field(
        "fixed", description="The arm the headline savings are measured against."
    )
    sensitivity: SensitivityConfig = Field(default_factory=SensitivityConfig)
    pilot: PilotConfig = Field(default_factory=PilotConfig)

    @model_validator(mode="after")
    def _arms_differ(self) -> EconomicsConfig:
        if self.controller_arm == self.baseline_arm:
            raise ValueError(
                f"controller_arm and baseline_arm are both {self.controller_arm!r}: the headline "
                "compares two different arms"
            )
        return self

    @model_validator(mode="after")
    def _one_carbon_figure(self) -> EconomicsConfig:
        if self.carbon_intensity is not None and "carbon_region" in self.model_fields_set:
            raise ValueError(
                f"carbon_region ({self.carbon_region}) and carbon_intensity "
                f"({self.carbon_intensity.value:g} g/kWh) both given: expected one of them"
            )
        return self

    def gpu_hour_range(self) -> Range:
        """The GPU-hour price's sensitivity range: ``sensitivity.gpu_hour_usd`` where given,
        else the configured ``gpu_hour`` (on-demand) down to :data:`COMMITTED_SHARE` of it."""
        given = self.sensitivity.gpu_hour_usd
        if given is not None:
            return given
        price = self.gpu_hour.value
        return Range(
            low=round(price * COMMITTED_SHARE, 4),
            high=price,
            source=f"Low: assumed case, a 3-year committed price at {COMMITTED_SHARE:g} of "
            "on-demand (not sourced offline); high: the configured gpu_hour, the base case",
        )

    @model_validator(mode="after")
    def _ranges_hold_the_base(self) -> EconomicsConfig:
        """Each sensitivity range holds its base value (a price raised above the default
        range was recomputed at two lower prices, as its "low" and "high")."""
        s = self.sensitivity
        for base_name, base, range_name, bounds, unit in (
            ("electricity_price", self.electricity_price.value, "electricity_usd_per_kwh",
             s.electricity_usd_per_kwh, " $/kWh"),
            ("pue", self.pue.value, "pue", s.pue, ""),
            ("capacity_cost", self.capacity_cost.value, "capacity_usd_per_mw",
             s.capacity_usd_per_mw, " $/MW"),
            ("gpu_hour", self.gpu_hour.value, "gpu_hour_usd", self.gpu_hour_range(),
             " $/GPU-hour"),
        ):  # fmt: skip
            if not bounds.low <= base <= bounds.high:
                raise ValueError(
                    f"sensitivity.{range_name}: the range {bounds.low:g}-{bounds.high:g}{unit} "
                    f"does not hold {base_name}.value {base:g}{unit}: expected low <= "
                    f"{base:g} <= high (set the range around the value)"
                )
        return self
