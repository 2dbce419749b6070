"""The public functions: percentiles at a rate, saturation, the largest rate for an SLO."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

from solver.perf.queueing.model import PERCENTILES, LoadPercentiles, ReplicaLoadModel
from solver.perf.queueing.physics import Replica, TrafficClass

DEFAULT_MAX_UTILIZATION = 0.9  # the planner never fills a replica beyond this share of its saturation rate


@lru_cache(maxsize=4096)
def load_model(replica: Replica, classes: tuple[TrafficClass, ...], arrival_cv: float = 1.0) -> ReplicaLoadModel:
    """A cached model: the planner asks the same configuration and mix many times."""
    return ReplicaLoadModel(replica, classes, arrival_cv)


def percentiles_at_rate(replica: Replica, classes: Sequence[TrafficClass], rate_per_s: float,
                        arrival_cv: float = 1.0, percentiles: Sequence[int] = PERCENTILES) -> LoadPercentiles:
    """TTFT/TPOT/latency percentiles (ms) with `rate_per_s` requests/s routed to one replica
    (only those in `percentiles`: each costs a quantile search per metric)."""
    return _at_rate(replica, tuple(classes), float(rate_per_s), float(arrival_cv), tuple(percentiles))


@lru_cache(maxsize=20_000)
def _at_rate(replica: Replica, classes: tuple[TrafficClass, ...], rate_per_s: float, arrival_cv: float,
             percentiles: tuple[int, ...]) -> LoadPercentiles:
    # A scheduler re-planning in a loop gets the same plan, hence the same rates, most times.
    return load_model(replica, classes, arrival_cv).at_rate(rate_per_s, percentiles)


def percentiles_slowed(replica: Replica, classes: Sequence[TrafficClass], rate_per_s: float, factor: float,
                       arrival_cv: float = 1.0, percentiles: Sequence[int] = PERCENTILES) -> LoadPercentiles:
    """`percentiles_at_rate(replica.slowed(factor), ...)`, read off the replica's own model:
    every time of the slowed replica is the model's x factor, so at rate r it is the same
    queue as the model at r x factor, in time x factor (tests/test_confidence.py checks
    the two within 0.5 %: the numerics' tolerances are relative, not exactly scale-free).
    Cheaper than a model of the slowed replica: the model's per-rate state is cached.
    For bands; a check that must agree with a cap searched on `replica.slowed(factor)`
    uses that replica itself."""
    if factor == 1:
        return percentiles_at_rate(replica, classes, rate_per_s, arrival_cv, percentiles)
    at = percentiles_at_rate(replica, classes, rate_per_s * factor, arrival_cv, percentiles)
    return LoadPercentiles(rate_per_s, at.utilization, at.saturation_rate_per_s / factor, at.mean_batch, at.slots,
                           at.wait_probability, *({p: v * factor for p, v in d.items()}
                                                  for d in (at.ttft_ms, at.tpot_ms, at.latency_ms)))


def saturation_rate(replica: Replica, classes: Sequence[TrafficClass]) -> float:
    """Requests/s one replica sustains with every KV slot busy (utilization 1)."""
    return load_model(replica, tuple(classes), 1.0).saturation_rate()


# Where below a cap its rates are checked again (fractions of the cap).
_BELOW = (0.01, 0.03, 0.06)
_MAX_PASSES = 50  # searches below a miss, each at least 1 % lower: a pathological model ends


def _passes(margin: float) -> bool:
    """A rate passes where the CDF at each bound clears p by more than rounding. At exactly p
    it does not: a mixture whose other class is complete can leave the CDF flat at p between
    two values (0.6 + 0.4 x a tail bin's edge 0.975 = 0.99), and there the reported
    percentile is the flat stretch's far end, above the bound."""
    return margin > 1e-9


def max_rate_for_slo(replica: Replica, classes: Sequence[TrafficClass], percentile: int, *,
                     ttft_ms: float | None = None, tpot_ms: float | None = None, latency_ms: float | None = None,
                     arrival_cv: float = 1.0, max_utilization: float = DEFAULT_MAX_UTILIZATION,
                     rel_tol: float = 0.005) -> float:
    """The largest rate per replica (requests/s) at which every stated bound holds at `percentile`.

    Monotone search: the percentiles rise with the rate, so bisection on the rate finds the
    edge; the answer is the largest rate found to pass (within `rel_tol` of the saturation
    rate below the edge), never above `max_utilization` x saturation, and the bounds hold
    1, 3 and 6 % below it too (`_BELOW`). 0.0 when even a trickle misses a bound. With
    several classes the percentile is over the mixture at their shares - exact for that mix
    (see docs/formulation.md for mixes that vary).
    """
    if percentile not in PERCENTILES:
        raise ValueError(f"percentile must be one of {', '.join(map(str, PERCENTILES))}, got {percentile}")
    bounds = {m: float(v) for m, v in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("latency_ms", latency_ms))
              if v is not None}
    for m, v in bounds.items():
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"{m} must be a positive number, got {v}")
    if not (0 < max_utilization <= 1):
        raise ValueError(f"max_utilization must be in (0, 1], got {max_utilization}")
    model = load_model(replica, tuple(classes), float(arrival_cv))
    sat = model.saturation_rate()
    if sat <= 0:
        return 0.0
    top = max_utilization * sat
    if not bounds:
        return top
    # The percentiles rise with the rate up to noise, not everywhere exactly (a batch's
    # spread narrowing as load grows, a law changing method), and a cap is a promise for
    # every rate below it - the plan routes any rate up to it: the rates just below the
    # edge found (_BELOW) are checked too, and a miss there starts the search below it.
    for _ in range(_MAX_PASSES):
        cap = _edge(model, sat, top, percentile, bounds, rel_tol)
        if cap <= 0.0:
            return 0.0
        miss = next((r for r in (cap * (1.0 - below) for below in _BELOW)
                     if r > 1e-6 * sat and not _passes(model.margin_and_gap(r, percentile, bounds)[0])), None)
        if miss is None:
            return cap
        top = miss * (1.0 - 1e-9)
    return 0.0  # no rate below which the bounds hold throughout was found


def _edge(model, sat: float, top: float, percentile: int, bounds: dict, rel_tol: float) -> float:
    """The largest rate found to pass, up to `top` (within rel_tol x saturation of the edge
    below which the bounds hold); 0.0 when even a trickle misses."""
    ok_hi, g_hi = model.margin_and_gap(top, percentile, bounds)
    if _passes(ok_hi):
        return top
    lo = 1e-6 * sat
    if lo >= top:
        return 0.0
    ok_lo, g_lo = model.margin_and_gap(lo, percentile, bounds)
    if not _passes(ok_lo):
        return 0.0
    hi = top
    # The margin (CDF at the bound - p) decides pass/fail, as `meets` does; it is flat
    # (the CDF at 1) well below the edge, so the next rate comes from a secant on the gap
    # (bound / percentile value - 1), which crosses zero at the same edge and is smooth
    # where the margin is flat, through the two latest rates. Safeguards: two steps that
    # did not halve the bracket (the secant creeping in from one side) overshoot the
    # estimate to the open side; three bisect (the gap jumps where a CDF has a flat part
    # at p). Once the estimate moves less than the resolution, the probe sits 0.45 x the
    # resolution beyond it on the open side, closing the bracket. The answer keeps the old
    # guarantee: a passing rate with a failing one within rel_tol x saturation above it.
    step = rel_tol * sat
    last = [(lo, g_lo), (hi, g_hi)]
    widths = [math.inf] * 3 + [hi - lo]  # the first step may take the secant
    estimate = None
    while hi - lo > step:
        (x1, g1), (x2, g2) = last[-2], last[-1]
        guess = x2 - g2 * (x2 - x1) / (g2 - g1) if g2 != g1 else None
        far_side = -1.0 if guess is not None and guess - lo > hi - guess else 1.0
        if guess is None or not (lo < guess < hi) or hi - lo > 0.5 * widths[-4]:
            mid = 0.5 * (lo + hi)  # three steps have not halved the bracket
            estimate = None
        elif hi - lo > 0.5 * widths[-3]:
            # Two steps from one side: overshoot the estimate towards the open side.
            mid = guess + far_side * max(0.45 * step, 2.0 * abs(guess - x2))
            estimate = guess
        else:
            settled = estimate is not None and abs(guess - estimate) < step
            estimate = guess
            mid = guess + far_side * 0.45 * step if settled or hi - lo < 2.0 * step else guess
        mid = min(max(mid, lo + 0.25 * step), hi - 0.25 * step)
        ok, g = model.margin_and_gap(mid, percentile, bounds)
        if _passes(ok):
            lo = mid
        else:
            hi = mid
        last.append((mid, g))
        widths.append(hi - lo)
    return lo


def class_rate_caps(replica: Replica, classes: Sequence[TrafficClass], percentile: int, *,
                    ttft_ms: float | None = None, tpot_ms: float | None = None, latency_ms: float | None = None,
                    arrival_cv: float = 1.0, max_utilization: float = DEFAULT_MAX_UTILIZATION) -> tuple[float, ...]:
    """Per-class caps c_k for a linear capacity row sum_k x_k / c_k <= replicas, when the
    planner routes a replica any mix of the classes.

    c_k starts as class k's own `max_rate_for_slo`; the row then allows, for a mix w, a
    total rate 1 / sum_k (w_k / c_k). Every cap is scaled by the smallest ratio of the
    model's true cap to that allowance over the checked mixes (each class alone, every pair
    at 1/4, 1/2, 3/4, all classes at their shares), so the row never allows more than the
    model does at those mixes (docs/formulation.md, "Several classes on one replica").
    """
    bounds = dict(ttft_ms=ttft_ms, tpot_ms=tpot_ms, latency_ms=latency_ms, arrival_cv=arrival_cv,
                  max_utilization=max_utilization)
    alone = [max_rate_for_slo(replica, (TrafficClass(1.0, c.prompt_tokens, c.output_tokens, c.name),), percentile,
                              **bounds) for c in classes]
    if len(classes) == 1:
        return tuple(alone)
    mixes = [tuple(c.share for c in classes)]
    for i in range(len(classes)):
        for j in range(i + 1, len(classes)):
            for a in (0.25, 0.5, 0.75):
                w = [0.0] * len(classes)
                w[i], w[j] = a, 1.0 - a
                mixes.append(tuple(w))
    scale = 1.0
    for w in mixes:
        if any(wk > 0 and ck <= 0 for wk, ck in zip(w, alone)):
            continue  # the row already forbids this mix
        allowed = 1.0 / sum(wk / ck for wk, ck in zip(w, alone) if wk > 0)
        mix = tuple(TrafficClass(wk, c.prompt_tokens, c.output_tokens, c.name) for wk, c in zip(w, classes) if wk > 0)
        true = max_rate_for_slo(replica, mix, percentile, **bounds)
        scale = min(scale, true / allowed)
    return tuple(scale * c for c in alone)
