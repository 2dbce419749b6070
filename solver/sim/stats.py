"""Percentiles of simulated requests with confidence intervals, by sectioning.

A queue's output is autocorrelated: a slow request's neighbours waited in the same queue,
so the binomial (order-statistic) interval for a percentile, which assumes independent
requests, is too narrow by a factor that grows with the load. Independent replications
are independent: each seed is a separate run from an empty replica (its warm-up
discarded), so the seeds' own percentiles q_1..q_R are i.i.d., and

    CI = q_pooled +- t_{R-1, (1+c)/2} x sd(q_1..q_R) / sqrt(R)

is asymptotically valid (sectioning: Asmussen & Glynn, Stochastic Simulation, 2007,
III.5a; for quantiles Nakayama, "Confidence intervals for quantiles using sectioning",
ACM TOMACS 24(4), 2014). The point estimate is the percentile of all seeds' requests
pooled, which is less biased than the mean of the seeds' percentiles (a percentile of
n requests is biased by O(1/n)); the spread comes from the seeds. With few seeds the t
quantile is large (3.18 for 4 seeds at 95 %), which is the honest price of few
replications: more seeds narrow the interval by sqrt(R) and by a smaller t.

Percentiles are the inverted CDF (the smallest value with at least p % of the weight at
or below it), with weights: a fleet's requests from replicas that carry different
traffic weigh by the traffic each simulated request stands for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np


def weighted_percentile(values: np.ndarray, weights: np.ndarray | None, p: float) -> float:
    """Inverted-CDF percentile p (0-100) of values; weights default to equal. nan values are
    dropped; inf values count (a request that never finished is later than any that did)."""
    return weighted_percentiles(values, weights, (p,))[0]


def weighted_percentiles(values: np.ndarray, weights: np.ndarray | None, ps: Sequence[float]) -> list[float]:
    """weighted_percentile for several p at the cost of one sort."""
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    if not keep.all():
        values = values[keep]
        if weights is not None:
            weights = np.asarray(weights, dtype=float)[keep]
    if len(values) == 0:
        return [math.nan for _ in ps]
    if weights is None:
        n = len(values)
        ks = [min(max(math.ceil(p / 100.0 * n * (1 - 1e-12)) - 1, 0), n - 1) for p in ps]
        v = np.partition(values, ks)  # the k-th smallest values in place: O(n), no full sort
        return [float(v[k]) for k in ks]
    order = np.argsort(values, kind="stable")
    v = values[order]
    cum = np.cumsum(np.asarray(weights, dtype=float)[order])
    return [float(v[min(int(np.searchsorted(cum, p / 100.0 * cum[-1] * (1 - 1e-12))), len(v) - 1)]) for p in ps]


def t_quantile(prob: float, df: float) -> float:
    """Student's t quantile (0 < prob < 1, df > 0), by bisection on its CDF."""
    if not (0.0 < prob < 1.0) or not df > 0:
        raise ValueError("t_quantile needs 0 < prob < 1 and df > 0")
    if prob < 0.5:
        return -t_quantile(1.0 - prob, df)
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < prob:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _t_cdf(mid, df) < prob:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return 0.5 * (lo + hi)


def _t_cdf(x: float, df: float) -> float:
    z = df / (df + x * x)
    tail = 0.5 * _betainc(df / 2.0, 0.5, z)
    return 1.0 - tail if x >= 0 else tail


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (continued fraction, Numerical Recipes 6.4)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


@dataclass(frozen=True)
class Estimate:
    """A percentile over simulated requests: pooled value and its confidence interval (ms)."""

    value_ms: float  # all seeds' requests pooled
    ci_ms: tuple[float, float] | None  # None: one section only (no spread to measure)
    per_seed_ms: tuple[float, ...]
    confidence: float

    def to_dict(self) -> dict:
        return {"value": _num(self.value_ms), "ci": None if self.ci_ms is None else [_num(x) for x in self.ci_ms],
                "per_seed": [_num(x) for x in self.per_seed_ms]}


def _num(x: float) -> float | None:
    return round(float(x), 3) if math.isfinite(x) else None


Section = Sequence[tuple[np.ndarray, float]]  # (values, weight of each value) per source


def sectioned_percentile(sections: Sequence[Section], p: float, confidence: float = 0.95) -> Estimate | None:
    """The pooled percentile p of every section's values and the sectioning interval over
    the sections' own percentiles (see the module docstring). None without values."""
    per_section = []
    pooled_v, pooled_w = [], []
    # Equal weights everywhere (one source per section, or sources alike): the unweighted path.
    equal = len({float(w) for section in sections for _, w in section}) <= 1
    for section in sections:
        vs = [np.asarray(v, dtype=float) for v, _ in section]
        v = np.concatenate(vs) if vs else np.empty(0)
        w = None if equal else np.concatenate([np.full(len(a), float(wt)) for a, (_, wt) in zip(vs, section)])
        if np.all(np.isnan(v)):
            continue
        per_section.append(weighted_percentile(v, w, p))
        pooled_v.append(v)
        pooled_w.append(w)
    if not per_section:
        return None
    value = weighted_percentile(np.concatenate(pooled_v), None if equal else np.concatenate(pooled_w), p)
    r = len(per_section)
    ci = None
    if r >= 2:
        q = np.asarray(per_section)
        if np.all(np.isfinite(q)) and math.isfinite(value):
            half = t_quantile(0.5 + confidence / 2.0, r - 1) * float(np.std(q, ddof=1)) / math.sqrt(r)
            ci = (value - half, value + half)
        else:
            # Some seed never finished a request in its tail: no finite upper end.
            finite = q[np.isfinite(q)]
            ci = (float(finite.min()) if len(finite) else math.inf, math.inf)
    return Estimate(value, ci, tuple(per_section), confidence)


def verdict(estimate: Estimate | None, bound_ms: float) -> str:
    """"met": the interval lies at or below the bound; "missed": above it (or the pooled
    value is infinite); "inconclusive": it straddles the bound (or there is no interval)."""
    if estimate is None:
        return "inconclusive"
    if not math.isfinite(estimate.value_ms):
        return "missed"
    if estimate.ci_ms is None:
        return "inconclusive"
    lo, hi = estimate.ci_ms
    if hi <= bound_ms:
        return "met"
    if lo > bound_ms:
        return "missed"
    return "inconclusive"


def overall(verdicts: Sequence[str]) -> str:
    if "missed" in verdicts:
        return "missed"
    if "inconclusive" in verdicts:
        return "inconclusive"
    return "met"
