"""Figures the fleet stage compares against, each with its source.

Two kinds:
- the reference study's windowed-exceedance and fleet figures (docs/design.md section 1), which the
  pipeline reproduces side by side with its own measurements or simulations;
- published power-oversubscription results from production systems, shown beside the study's
  "about 2x" so a reader sees how strong that claim is.

Values are stored in the unit of the comparison table: shares in percent, factors in "x"
(nameplate watts per provisioned watt: +30 % servers on the same power = 1.30 x).
"""

from __future__ import annotations

from dataclasses import dataclass

STUDY_SOURCE = (
    "Reference study: arXiv 2608.11226 (2026), on the power behaviour of RL (GRPO) post-training: "
    "its abstract and a secondary summary, as listed in docs/design.md section 1"
)
# Where a study figure comes from (docs/design.md section 1): the paper's abstract, or the
# secondary summary that adds the setup (A100 at 400 W, the fleet's mix and its kW peaks).
ABSTRACT = "abstract"
SUMMARY = "summary"


@dataclass(frozen=True)
class ReferenceFigure:
    """One published figure: a value or a range [low, high] in ``unit``."""

    key: str
    quantity: str
    low: float
    high: float
    unit: str  # "%" or "x"
    source: str
    setting: str
    window_s: float | None = None
    origin: str = ""  # a study figure's: ABSTRACT or SUMMARY; a published result's: "paper"

    @property
    def is_range(self) -> bool:
        return self.low != self.high

    @property
    def name(self) -> str:
        """Who published it: the quantity before its colon (``POLCA (Microsoft Azure)``)."""
        return self.quantity.split(":")[0]

    def shown(self) -> str:
        """The figure as text, e.g. ``23.6 %`` or ``50-56 %``."""
        fmt = (lambda v: f"{v:g}") if self.unit == "%" else (lambda v: f"{v:.2f}")
        value = f"{fmt(self.low)}-{fmt(self.high)}" if self.is_range else fmt(self.low)
        return f"{value} {self.unit}"

    def difference(self, measured: float) -> float:
        """``measured`` minus the figure; 0 inside a range, else the distance to its nearer end."""
        if measured != measured:  # NaN
            return float("nan")
        if measured < self.low:
            return measured - self.low
        if measured > self.high:
            return measured - self.high
        return 0.0


STUDY_EXCEEDANCE_72B: tuple[ReferenceFigure, ...] = (
    ReferenceFigure(
        "exceedance_72b_0.5s",
        "72B over-cap share, 0.5 s window",
        23.6,
        23.6,
        "%",
        STUDY_SOURCE,
        "72B GRPO, A100, power every 0.5 s",
        0.5,
        ABSTRACT,
    ),
    ReferenceFigure(
        "exceedance_72b_30s",
        "72B over-cap share, 30 s window",
        1.6,
        1.6,
        "%",
        STUDY_SOURCE,
        "72B GRPO, A100, power every 0.5 s",
        30.0,
        ABSTRACT,
    ),
    ReferenceFigure(
        "exceedance_72b_300s",
        "72B over-cap share, 5 min window",
        0.0,
        0.0,
        "%",
        STUDY_SOURCE,
        "72B GRPO, A100, power every 0.5 s",
        300.0,
        ABSTRACT,
    ),
)

STUDY_FLEET_EXCEEDANCE = ReferenceFigure(
    "fleet_exceedance_ge30s",
    "16-GPU fleet exceedance, windows >= 30 s (worst window)",
    0.0,
    0.0,
    "%",
    STUDY_SOURCE,
    "16-GPU fleet",
    30.0,
    ABSTRACT,
)
STUDY_FLEET_PEAK = ReferenceFigure(
    "fleet_peak_share",
    "16-GPU fleet peak demand, share of nameplate",
    50.0,
    56.0,
    "%",
    STUDY_SOURCE,
    "16-GPU fleet",
    30.0,
    ABSTRACT,
)
STUDY_FLEET_PEAK_KW = ReferenceFigure(
    "fleet_peak_kw",
    "16-GPU fleet 30 s peak demand",
    3.17,
    3.59,
    "kW",
    STUDY_SOURCE,
    "16-GPU fleet of 2 x 72B (4 GPUs each) + 2 x 14B (2) + 4 x 7B (1), A100 at 400 W: "
    "peaks of 3.59, 3.44, 3.38 and 3.17 kW",
    30.0,
    SUMMARY,
)
STUDY_OVERSUBSCRIPTION = ReferenceFigure(
    "oversubscription_factor",
    "oversubscription factor (nameplate / provisioned power)",
    2.0,
    2.0,
    "x",
    STUDY_SOURCE,
    "16-GPU fleet, 'about 2x nameplate looks feasible'",
    30.0,
    ABSTRACT,
)
STUDY_SAMPLE_PERIOD_S = 0.5  # NVML every 500 ms (abstract)
STUDY_FLEET_GPUS = 16  # the study's fleet: 2 x 72B (4 GPUs) + 2 x 14B (2) + 4 x 7B (1)
STUDY_GPU_NAME = "A100"  # the study's GPUs: A100 SXM at 400 W (secondary summary)
STUDY_NAMEPLATE_W = 400.0

PUBLISHED_OVERSUBSCRIPTION: tuple[ReferenceFigure, ...] = (
    ReferenceFigure(
        "polca",
        "POLCA (Microsoft Azure): +30 % servers, LLM inference",
        1.30,
        1.30,
        "x",
        "Patel et al., 'POLCA: Power Oversubscription in LLM Cloud Providers', "
        "arXiv:2308.12908 (2023)",
        "LLM inference GPU clusters, simulated from production power patterns",
        None,
        "paper",
    ),
    ReferenceFigure(
        "thunderbolt",
        "Google Thunderbolt: 9-25 % oversubscription gains",
        1.09,
        1.25,
        "x",
        "Li et al., 'Thunderbolt: Throughput-Optimized, Quality-of-Service-Aware Power Capping "
        "at Scale', OSDI 2020",
        "production CPU clusters with QoS-aware power capping",
        None,
        "paper",
    ),
    ReferenceFigure(
        "flex",
        "Microsoft Flex: up to +33 % servers",
        1.33,
        1.33,
        "x",
        "Zhang et al., 'Flex: High-Availability Datacenters With Zero Reserved Power', ISCA 2021",
        "datacenters using reserved (redundant) power, production",
        None,
        "paper",
    ),
)

STUDY_LIVE_SOURCE = (
    "arXiv 2608.11226, its secondary summary (the abstract gives none of the live arms' figures; "
    "not checked against the paper's own table)"
)
STUDY_7B_CAP_W = 314.6  # the study's 7B cap, W (same source)


@dataclass(frozen=True)
class StudyLiveArm:
    """One of the study's live 7B arms (Qwen2.5-7B GRPO on one A100-SXM4-80GB under the 314.6 W
    cap, a fixed time budget): its output and share of NVML samples over the cap."""

    arm: str  # the study's name for it
    tokens: int
    violation_pct: float
    source: str = STUDY_LIVE_SOURCE
    origin: str = SUMMARY


STUDY_LIVE_ARMS: tuple[StudyLiveArm, ...] = (
    StudyLiveArm("static generation batch 8", 222_472, 17.72),
    StudyLiveArm("static generation batch 4", 134_860, 0.01),
    StudyLiveArm("hysteresis controller", 166_189, 1.96),
    StudyLiveArm("PPO", 183_069, 2.27),
)
