"""Checks of power samples shared by every reader of power (import, summary, windows).

Power in a trace is instantaneous board power in watts (DESIGN.md section 7). A sample is
refused when it is NaN or infinite, negative, or implausibly high: above
:data:`MAX_NAMEPLATE_MULTIPLE` times the GPU's nameplate (board) power. Sourced readings stay near
nameplate (prefill peaks about 1.09x, CALIBRATION.md 'prefill'), so 3x leaves ample room for
millisecond excursions while catching a log in the wrong unit: milliwatts (NVML's raw unit, which
some exporters pass through) are 1000x too large, and the message says so.

Every error names the file, the column, the GPU and the time of the first bad sample, and what
was expected, in the form ``<file>: <column>: expected ..., got ...``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MAX_NAMEPLATE_MULTIPLE = 3.0  # power above this many times nameplate is not a real reading


def power_limit_w(nameplate_w: float) -> float:
    """The highest plausible power reading of a GPU with this nameplate, W."""
    return MAX_NAMEPLATE_MULTIPLE * nameplate_w


def check_power(
    gpu: int,
    t_s: np.ndarray,
    power_w: np.ndarray,
    where: str,
    nameplate_w: float | None = None,
    column: str = "power_w",
) -> None:
    """Raise if any power sample of one GPU is NaN, infinite, negative or implausibly high.

    Args:
        gpu: GPU index (for the message).
        t_s: sample times, s (for the message), same length as ``power_w``.
        power_w: power samples, W.
        where: the file name used in messages.
        nameplate_w: the GPU's nameplate power, W; None skips the upper bound.
        column: the column the samples came from (for the message).

    Raises:
        ValueError: naming the file, the column, the GPU, the first bad sample's time and value,
            and what was expected.
    """
    power_w = np.asarray(power_w, dtype=np.float64)
    if len(power_w) == 0:
        return
    # Two cheap whole-array reductions; the slow diagnosis runs only when one fails.
    low, high = float(power_w.min()), float(power_w.max())  # NaN propagates to both
    limit_w = np.inf if nameplate_w is None else power_limit_w(nameplate_w)
    if low >= 0 and high <= limit_w and np.isfinite(high):
        return
    t_s = np.asarray(t_s, dtype=np.float64)
    bad = ~np.isfinite(power_w)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"{where}: {column}: expected finite watts, got {int(bad.sum())} sample(s) with NaN "
            f"or infinite power on gpu {gpu} (first at t = {t_s[i]:.6g} s); drop or repair "
            "those rows"
        )
    if low < 0:
        i = int(np.argmax(power_w < 0))
        raise ValueError(
            f"{where}: {column}: expected watts >= 0, got negative power {power_w[i]:.6g} W on "
            f"gpu {gpu} at t = {t_s[i]:.6g} s"
        )
    assert nameplate_w is not None  # only an upper bound is left
    i = int(np.argmax(power_w > limit_w))
    hint = (
        "it looks like milliwatts: convert the column to watts (divide by 1000)"
        if high / 1000.0 <= limit_w
        else "check the column's unit and the nameplate"
    )
    raise ValueError(
        f"{where}: {column}: expected watts at most {MAX_NAMEPLATE_MULTIPLE:g} x the nameplate "
        f"{nameplate_w:g} W = {limit_w:g} W, got {power_w[i]:.6g} on gpu {gpu} at "
        f"t = {t_s[i]:.6g} s ({int((power_w > limit_w).sum())} such sample(s)); {hint}"
    )


def check_frame_power(
    frame: pd.DataFrame, where: str, nameplate_w: float | None, column: str = "power_w"
) -> None:
    """:func:`check_power` on every GPU of a trace frame (columns ``gpu``, ``t``, ``power_w``);
    ``column`` is the name messages give the power (an imported log's own column name)."""
    for gpu, rows in frame.groupby("gpu", sort=True):
        check_power(
            int(gpu), rows["t"].to_numpy(), rows["power_w"].to_numpy(), where, nameplate_w, column
        )
