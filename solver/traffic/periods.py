"""Periods of the day and each service's demand profile, from hourly levels.

A trace that spans more than a day is folded onto the hours of the day, counted from the
trace's start: each hour's level is its highest over the days. Then the hours are cut into
contiguous periods, each planned for its own peak (the highest level among its hours), with
the fewest periods (at most `max_periods`) whose over-provisioning stays within `waste` of
the demand: sum over services and hours of (period peak - hour level) x hours, each service
measured against its own peak so a small service counts as much as a large one, at most
`waste` times sum over services and hours of hour level x hours. The cut that wastes least
for a given number of periods is exact (dynamic programming over the cut points).

A service's demand is its peak rate (the highest level), and its profile gives each
period's peak over that, rounded up to 3 decimals (a period at the peak is left out: 1.0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DAY_HOURS = 24


@dataclass(frozen=True)
class Period:
    name: str
    hours: float
    start_hour: float  # from the trace's start (of the day, when folded)
    bins: tuple[int, ...]


def fold_to_day(levels: np.ndarray, bin_start_s: np.ndarray, bin_hours: np.ndarray):
    """Levels per bin (services x bins) onto the hours of the day when the bins run past a
    day: (levels, hours per bin, start hour per bin, folded?)."""
    if len(bin_start_s) <= DAY_HOURS:
        return levels, bin_hours, bin_start_s / 3600.0, False
    hour = (bin_start_s // 3600).astype(np.int64) % DAY_HOURS
    folded = np.zeros((levels.shape[0], DAY_HOURS))
    for h in range(DAY_HOURS):
        folded[:, h] = levels[:, hour == h].max(axis=1)
    return folded, np.ones(DAY_HOURS), np.arange(DAY_HOURS, dtype=np.float64), True


def _segment_cost(norm: np.ndarray, hours: np.ndarray, i: int, j: int) -> float:
    seg = norm[:, i:j]
    return float(((seg.max(axis=1, keepdims=True) - seg) * hours[i:j]).sum())


def cut_into_periods(levels: np.ndarray, hours: np.ndarray, start_hour: np.ndarray, max_periods: int = 6,
                     waste: float = 0.10) -> tuple[list[Period], float]:
    """Periods over the bins (see the module docstring) and the waste they leave, as a
    fraction of the demand."""
    peaks = levels.max(axis=1, keepdims=True)
    norm = np.divide(levels, peaks, out=np.zeros_like(levels, dtype=np.float64), where=peaks > 0)
    n = norm.shape[1]
    demand = float((norm * hours).sum())
    cost = [[_segment_cost(norm, hours, i, j) if j > i else 0.0 for j in range(n + 1)] for i in range(n + 1)]
    top = min(max_periods, n)
    best = [[math.inf] * (n + 1) for _ in range(top + 1)]
    cut = [[0] * (n + 1) for _ in range(top + 1)]
    best[0][0] = 0.0
    for k in range(1, top + 1):
        for j in range(1, n + 1):
            for i in range(k - 1, j):
                c = best[k - 1][i] + cost[i][j]
                if c < best[k][j] - 1e-12:
                    best[k][j], cut[k][j] = c, i
    k = next((k for k in range(1, top + 1) if best[k][n] <= waste * demand + 1e-12), top)
    bounds, j = [], n
    for kk in range(k, 0, -1):
        i = cut[kk][j]
        bounds.append((i, j))
        j = i
    periods = []
    for i, j in reversed(bounds):
        a = float(start_hour[i])
        b = a + float(hours[i:j].sum())
        periods.append(Period(f"h{_hour(a)}-{_hour(b)}", round(float(hours[i:j].sum()), 6), a, tuple(range(i, j))))
    return periods, (best[k][n] / demand if demand > 0 else 0.0)


def _hour(h: float) -> str:
    return f"{int(round(h)):02d}" if abs(h - round(h)) < 1e-6 else f"{h:.2f}".rstrip("0").rstrip(".")


def profile(levels: np.ndarray, periods: list[Period], rate_per_s: float) -> dict[str, float]:
    """One service's multipliers: each period's peak over the service's demand rate, rounded
    up to 3 decimals; periods at the full rate are left out."""
    out = {}
    for p in periods:
        m = math.ceil(float(levels[list(p.bins)].max()) / rate_per_s * 1000 - 1e-9) / 1000 if rate_per_s > 0 else 0.0
        if m < 1.0:
            out[p.name] = m
    return out
