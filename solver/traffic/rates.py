"""Rates from running counts: the peak rate, hourly levels and the arrival CV.

Peak rate: the most requests in any window of `window_s` seconds that starts on a whole
second of the trace, divided by `window_s` (a sliding window, so a burst is not split
between two fixed windows). A trace shorter than the window has one window: all of it.

Hourly levels: for each bin of `bin_s` seconds from the trace's start, the peak rate of
the windows centred in it (a window across two hours counts for the hour that holds its
middle, so a rise is neither moved early nor late); the peak rate is the highest level.
A last stretch where no window is centred is merged into the bin before it.

Arrival CV: within each window of `cv_window_s`, the gaps between consecutive arrivals are
compared with that window's own mean gap, so a rate that changes over the day (a daily
swing, a ramp) does not read as burstiness: the result is the square root of the
gap-weighted mean of the windows' squared CVs, sum_w (n_w - 1) cv_w^2 / sum_w (n_w - 1),
with cv_w^2 = s_w^2 / m_w^2 (sample variance over squared mean of window w's n_w gaps).
Windows with fewer than 2 gaps, or a zero mean gap, carry no information and are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Peak:
    rate_per_s: float
    window_s: float  # the window the rate is measured over (the trace's span when shorter)
    start_s: float  # where the busiest window starts


@dataclass(frozen=True)
class Levels:
    """Peak rate per bin of the trace; bin_start_s and bin_hours describe the bins."""

    rate_per_s: np.ndarray
    bin_start_s: np.ndarray
    bin_hours: np.ndarray


def sliding_counts(per_second: np.ndarray, window_s: int) -> np.ndarray:
    """Requests in [i, i + window_s) for every whole second i where the window fits."""
    cum = np.concatenate([[0], np.cumsum(per_second)])
    return cum[window_s:] - cum[:-window_s]


def peak_rate(per_second: np.ndarray, span_s: float, window_s: int) -> Peak:
    if len(per_second) < window_s:  # one window: the whole trace
        return Peak(float(per_second.sum()) / span_s, span_s, 0.0)
    sums = sliding_counts(per_second, window_s)
    at = int(np.argmax(sums))
    return Peak(float(sums[at]) / window_s, float(window_s), float(at))


def hourly_levels(per_second: np.ndarray, window_s: int, bin_s: int) -> Levels:
    """Peak rate of the windows centred in each bin (see the module docstring)."""
    sums = sliding_counts(per_second, window_s)
    mid_bin = (np.arange(len(sums)) + window_s / 2) // bin_s  # the bin of each window's midpoint
    bins = int(mid_bin[-1]) + 1
    first = np.searchsorted(mid_bin, np.arange(bins))  # every bin up to the last holds midpoints
    rates = np.maximum.reduceat(sums, first).astype(np.float64) / window_s
    starts = np.arange(bins, dtype=np.float64) * bin_s
    # Each bin is bin_s long, the last one too (the trace's end is its last arrival, not a
    # boundary), or longer: a last stretch where no window is centred belongs to it.
    ends = np.append(starts[1:], max(starts[-1] + bin_s, float(len(per_second))))
    return Levels(rates, starts, (ends - starts) / 3600.0)


@dataclass(frozen=True)
class ArrivalCV:
    value: float | None  # None: no window held two gaps
    gaps: int  # gaps the value rests on
    windows: int  # windows that contributed


def arrival_cv(gap_n: np.ndarray, gap_sum: np.ndarray, gap_sq: np.ndarray) -> ArrivalCV:
    use = (gap_n >= 2) & (gap_sum > 0)
    if not use.any():
        return ArrivalCV(None, 0, 0)
    n, s1, s2 = gap_n[use], gap_sum[use], gap_sq[use]
    # (n - 1) cv^2 = (s2 - s1^2 / n) / (s1 / n)^2 for each window (sample variance over squared mean).
    weighted = np.maximum(s2 - s1 * s1 / n, 0.0) * n * n / (s1 * s1)
    dof = float((n - 1).sum())
    return ArrivalCV(math.sqrt(float(weighted.sum()) / dof), int(n.sum()), int(use.sum()))
