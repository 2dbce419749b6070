"""Simulation in the loop: every configuration a plan uses is checked in the simulator.

The caps under a percentile SLO come from the analytic queueing model. After a plan uses
only exact caps, each distinct configuration it uses (a service's estimated replica on an
offer) is simulated at the rate the plan routes to one of its replicas - with the same
margins the cap was sized with: the replica slowed by the service's `slo.confidence`
quantile, at the rate x (1 + RATE_MARGIN) - with enough requests that the percentile rests
on 200 tail requests, over independent seeds, with a 95 % interval
(solver/sim/verify.py). Then:

* met: the configuration is confirmed at that rate, and at any lower rate (percentiles
  rise with the load);
* missed: the simulator is the reference for queueing, so the analytic cap was too
  generous there: the configuration's cap is lowered below the rate that missed (by the
  worst bound's overshoot, at least 5 %), and the plan is solved again;
* inconclusive (the interval straddles a bound after the simulator's own extensions): not
  confirmed; the cap is lowered by 3 % and checked again.

The plan loop (solver/plan.py) repeats until every used configuration is confirmed, or the
verification's time or round budget runs out: the plan then says which configurations it
could not confirm. `Problem.verified` keeps, per configuration, the highest rate met and
the lowest missed (so a configuration is simulated again only at a rate in between).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace

from solver.compile.load_caps import _replica_of, _routed_mix
from solver.compile.problem import Config, Problem
from solver.confidence import rate_margin, slowdown

MAX_ROUNDS = 6  # plans solved again after a configuration missed
MISS_STEP = 0.95  # a missed cap moves at least this far below the rate that missed
INCONCLUSIVE_STEP = 0.97
MIN_CAP_FRACTION = 0.05  # of the first cap: below it, the configuration is ruled out


@dataclass(frozen=True)
class Check:
    """One configuration checked at one rate (what the plan reports as `verified`)."""

    config_key: str
    rate_per_s: float  # per replica, margin included: the rate simulated
    verdict: str  # "met" | "missed" | "inconclusive" | "not checked"
    requests: int = 0
    seeds: int = 0
    percentile: int = 99
    values_ms: tuple[tuple[str, float], ...] = ()  # metric -> simulated percentile
    intervals_ms: tuple[tuple[str, float, float], ...] = ()  # metric, low, high (95 %)
    bounds_ms: tuple[tuple[str, float], ...] = ()
    reason: str = ""

    def to_dict(self) -> dict:
        """The plan's `verified` (every metric named; null where it has no bound or value)."""
        values = dict(self.values_ms)
        ci = {m: (lo, hi) for m, lo, hi in self.intervals_ms}
        return {"verdict": self.verdict, "rate_per_s": round(self.rate_per_s, 6), "requests": self.requests,
                "seeds": self.seeds, "percentile": self.percentile,
                **{f"{m}_p": _ms(values.get(m)) for m in METRICS},
                "ci": {m: None if m not in ci else [_ms(ci[m][0]), _ms(ci[m][1])] for m in METRICS},
                "reason": self.reason}


METRICS = ("ttft_ms", "tpot_ms", "latency_ms")


def _ms(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 4)


def needs_check(problem: Problem, solution) -> list:
    """The plan's assignments whose configuration is an estimated LLM replica of a service
    with a percentile SLO and latency bounds (the ones capped by the queueing model)."""
    services = {s.name: s for s in problem.services}
    by_key = {c.key: c for c in problem.configs}
    out = []
    for a in solution.assignments:
        s = services[a.service]
        c = by_key.get(a.config_key)
        if c is None or c.source != "estimate" or s.model is None or s.slo.percentile is None or not s.slo.bounds():
            continue
        if a.replicas > 0 and sum(a.routed) > 0:
            out.append((a, s, c))
    return out


def check_plan(problem: Problem, solution, catalog, deadline: float | None = None, cancel=None) -> dict[str, Check]:
    """Simulate every configuration the plan uses at its planned rate (see the module
    docstring); the answers by configuration key. A check already known at this rate (a
    rate at or below one met, or at or above one missed) is not run again. Past
    `deadline` (time.monotonic()) the rest are "not checked"."""
    from solver.sim.verify import verify_replica

    known = dict(problem.verified)
    out: dict[str, Check] = {}
    for a, s, c in needs_check(problem, solution):
        margin = rate_margin(s.slo.confidence)
        rate = sum(a.routed) / a.replicas * (1 + margin)
        met, missed = known.get(c.key, (0.0, math.inf))
        if c.key in out and out[c.key].rate_per_s >= rate:
            continue
        if rate <= met * (1 + 1e-9):
            out[c.key] = Check(c.key, rate, "met", reason="confirmed at a higher rate before")
            continue
        if rate >= missed * (1 - 1e-9):
            out[c.key] = Check(c.key, rate, "missed", reason="missed at a lower rate before")
            continue
        if (deadline is not None and time.monotonic() > deadline) or (cancel is not None and cancel.is_set()):
            out[c.key] = Check(c.key, rate, "not checked", reason="the verification's time ran out")
            continue
        replica = _replica_of(catalog, problem.calibration, s, c).slowed(slowdown(s.slo.confidence,
                                                                                  problem.calibration))
        bounds = dict(s.slo.bounds())
        v = verify_replica(replica, _routed_mix(s, a.routed), rate, arrival_cv=float(s.arrival_cv),
                           percentile=s.slo.percentile, bounds=bounds)
        values = tuple((m, e.value_ms) for m, e in v.estimates.items() if e is not None and m in bounds)
        intervals = tuple((m, e.ci_ms[0], e.ci_ms[1]) for m, e in v.estimates.items()
                          if e is not None and m in bounds and e.ci_ms is not None)
        out[c.key] = Check(c.key, rate, v.verdict, v.requests, v.seeds, v.percentile, values, intervals,
                           tuple(bounds.items()), v.reason)
    return out


def tightened(problem: Problem, checks: dict[str, Check]) -> tuple[Problem, set[str]]:
    """The problem with what `checks` found: each configuration's confirmed and refuted
    rates recorded, and the cap of every configuration that missed (or stayed
    inconclusive) lowered below the rate checked. Returns the keys whose cap moved."""
    verified = dict(problem.verified)
    lower: dict[str, float] = {}
    for key, ch in checks.items():
        met, missed = verified.get(key, (0.0, math.inf))
        if ch.verdict == "met":
            verified[key] = (max(met, ch.rate_per_s), missed)
        elif ch.verdict in ("missed", "inconclusive") and ch.requests > 0:
            verified[key] = (met, min(missed, ch.rate_per_s))
            step = INCONCLUSIVE_STEP
            if ch.verdict == "missed":
                over = max((v / b for m, v in ch.values_ms for n, b in ch.bounds_ms if m == n and b > 0),
                           default=1.0 / MISS_STEP)
                step = min(MISS_STEP, 1.0 / over) if math.isfinite(over) and over > 0 else 0.5
            lower[key] = max(step, 0.5) * ch.rate_per_s
    if not lower:
        return replace(problem, verified=verified), set()
    # The caps fall: the one event the planner's loop knows (solver/compile/lazy_caps.py,
    # apply_caps), whoever lowers them.
    from solver.compile.lazy_caps import apply_caps

    services = {s.name: s for s in problem.services}
    updated: dict[str, Config] = {}
    for c in problem.configs:
        if c.key not in lower:
            continue
        margin = rate_margin(services[c.service].slo.confidence)
        new = min(lower[c.key] / (1 + margin), min(k.throughput for k in c.classes) * MISS_STEP)
        first = problem.first_caps.get(c.key, max(k.throughput for k in c.classes))
        # Below a twentieth of its first cap the configuration is ruled out (a rejection).
        updated[c.key] = _with_cap(c, new) if new >= MIN_CAP_FRACTION * first else _ruled_out(c)
    first_caps = dict(problem.first_caps)
    for c in problem.configs:
        if c.key in updated:
            first_caps.setdefault(c.key, max(k.throughput for k in c.classes))
    return replace(apply_caps(problem, updated), verified=verified, first_caps=first_caps), set(updated)


def _with_cap(c: Config, cap: float) -> Config:
    return replace(c, pending_cap=None,
                   classes=tuple(replace(k, throughput=cap, binding_limit="slo_simulated") for k in c.classes))


def _ruled_out(c: Config) -> Config:
    reason = "misses its percentile SLO in the simulator at every rate the queueing model allowed"
    return replace(c, pending_cap=None, classes=tuple(replace(k, throughput=0.0, reason=reason) for k in c.classes))
