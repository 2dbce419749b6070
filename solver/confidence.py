"""Confidence under load: how much slower than modelled a real replica may run.

The queueing model is optimistic against real serving systems (docs/queueing.md). The
planner expresses that uncertainty as one factor s on the replica: the real replica
behaves like the modelled one with every step time and the per-request overhead
multiplied by s (`Replica.slowed`). The distribution of s is fitted on held-out
measurements and stored as quantiles (`Calibration.under_load_slowdown`). A service's
`slo.confidence` c asks for caps that hold on a replica as slow as the c-quantile of s,
at a rate `RATE_MARGIN` above the one planned (demand is measured, not known).

Light on purpose (no numpy): the workload schema reads the constants at every CLI start.
"""

from __future__ import annotations

import math

DEFAULT_CONFIDENCE = 0.9  # slo.confidence when a percentile SLO states none: conservative
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.5, 0.99
# The bands of services that size nominally (no percentile SLO, or confidence "nominal"):
# the same coverage as the performance model's error bands (docs/performance-model.md).
BAND_CONFIDENCE = 0.8
# A robust cap holds at this much more than the rate it allows: demand is a measurement
# too, and a cap that sits exactly at the edge breaks on the first few percent of error.
RATE_MARGIN = 0.03
NOMINAL = "nominal"


def slowdown(confidence: float | str | None, calibration=None) -> float:
    """The factor a replica is slowed by for `confidence`: 1.0 for "nominal" (or None),
    else the `confidence`-quantile of the fitted slowdown distribution."""
    if confidence is None or confidence == NOMINAL:
        return 1.0
    return quantile(float(confidence), _table(calibration))


def quantile(level: float, table: tuple[tuple[float, float], ...]) -> float:
    """The slowdown factor at quantile `level`, linear between the table's levels. Above
    the last level the last segment's line goes on (more slowdown, the conservative side:
    a 0.99 confidence must cost more than 0.95, not the same); below the first level the
    first factor holds (the optimistic side of a band is never stretched past the data)."""
    if not 0 < level < 1:
        raise ValueError(f"a quantile level must be between 0 and 1, got {level:g}")
    if level <= table[0][0]:
        return table[0][1]
    for (q0, f0), (q1, f1) in zip(table, table[1:]):
        if level <= q1:
            return f0 + (f1 - f0) * (level - q0) / (q1 - q0)
    if len(table) < 2:
        return table[-1][1]
    (q0, f0), (q1, f1) = table[-2], table[-1]
    return f1 + (f1 - f0) * (level - q1) / (q1 - q0)


def band_levels(confidence: float) -> tuple[float, float]:
    """The two-sided band's quantile levels for confidence c: (1 - c) / 2 and (1 + c) / 2."""
    return (1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0


def band_confidence(confidence: float | str | None) -> float:
    """The band's confidence for a service's setting (BAND_CONFIDENCE where it sizes nominally)."""
    return BAND_CONFIDENCE if confidence is None or confidence == NOMINAL else float(confidence)


def rate_margin(confidence: float | str | None) -> float:
    """The rate margin a cap keeps: none at "nominal" (today's caps, exactly)."""
    return 0.0 if confidence is None or confidence == NOMINAL else RATE_MARGIN


def checked_confidence(value) -> float | str:
    """A user's confidence: "nominal" or a number in [MIN_CONFIDENCE, MAX_CONFIDENCE];
    ValueError (with the fix) otherwise."""
    if isinstance(value, str) and value == NOMINAL:
        return value
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and MIN_CONFIDENCE <= value <= MAX_CONFIDENCE
    if not ok:
        raise ValueError(f"confidence must be \"nominal\" or a number from {MIN_CONFIDENCE:g} to {MAX_CONFIDENCE:g}, "
                         f"got {value!r}. To fix: e.g. {DEFAULT_CONFIDENCE:g} (the default: 9 in 10 real replicas are "
                         f"no slower than the one the plan is sized for), or \"nominal\" to size for the model as it is")
    return float(value)


def _table(calibration) -> tuple[tuple[float, float], ...]:
    if calibration is not None:
        return calibration.under_load_slowdown
    from solver.perf.calibration import UNDER_LOAD_SLOWDOWN

    return UNDER_LOAD_SLOWDOWN
