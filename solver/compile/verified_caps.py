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
    # Missed or inconclusive: the rate (same scale as rate_per_s) where the queueing model,
    # scaled by what the simulator found here, meets the bounds (`corrected_rate`).
    corrected_rate_per_s: float | None = None

    def view(self):
        """The plan's `verified` (every metric named; None where it has no bound or value)."""
        from solver.output.result import LoadBand, Verification

        values = dict(self.values_ms)
        ci = {m: [_ms(lo), _ms(hi)] for m, lo, hi in self.intervals_ms}
        return Verification(self.verdict, round(self.rate_per_s, 6), self.requests, self.seeds, self.percentile,
                            **{f"{m}_p": _ms(values.get(m)) for m in METRICS},
                            ci=LoadBand(**{m: ci.get(m) for m in METRICS}) if ci else None, reason=self.reason)


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
        # Disaggregated pools (s.role) are not simulated: the simulator models aggregated
        # replicas; their percentile comes from the worker physics (solver/perf/disagg.py).
        if c is None or c.source != "estimate" or s.model is None or s.slo.percentile is None or not s.slo.bounds() \
                or s.role:
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
        mix = _routed_mix(s, a.routed)
        v = verify_replica(replica, mix, rate, arrival_cv=float(s.arrival_cv),
                           percentile=s.slo.percentile, bounds=bounds, deadline=deadline)
        values = tuple((m, e.value_ms) for m, e in v.estimates.items() if e is not None and m in bounds)
        intervals = tuple((m, e.ci_ms[0], e.ci_ms[1]) for m, e in v.estimates.items()
                          if e is not None and m in bounds and e.ci_ms is not None)
        corrected = None
        if v.verdict in ("missed", "inconclusive") and v.requests > 0:
            # A clear miss aims at the simulated value, an inconclusive check at its interval's
            # upper end (the value alone sits on the bound already).
            aim = tuple((m, x) for m, x in values) if v.verdict == "missed" else \
                tuple((m, hi) for m, _, hi in intervals)
            corrected = corrected_rate(replica, mix, rate, s, aim)
        out[c.key] = Check(c.key, rate, v.verdict, v.requests, v.seeds, v.percentile, values, intervals,
                           tuple(bounds.items()), v.reason, corrected)
    return out


def corrected_rate(replica, mix, rate: float, s, simulated) -> float | None:
    """Where the cap should move after the simulator refuted `rate`: the queueing model's
    value of each bounded metric at `rate` is scaled up to the simulator's (`simulated`:
    metric -> ms), and the rate is found where that scaled model meets the bounds. A
    percentile rises steeply near saturation, so the rate needed is further below than the
    overshoot alone says (TTFT 8 % over can take 15 % less traffic). None where the model
    cannot answer."""
    from solver.compile.load_caps import _llm_at, _llm_cap

    p = s.slo.percentile
    model = _llm_at(replica, mix, rate, float(s.arrival_cv), p)
    bounds = []
    for m, bound in s.slo.bounds():
        sim_high = next((x for n, x in simulated if n == m), None)
        ours = model.get(m)
        if sim_high is None or ours is None or not (ours > 0 and math.isfinite(ours)):
            return None
        ratio = sim_high / ours if math.isfinite(sim_high) else math.inf
        if not math.isfinite(ratio):
            return None
        bounds.append((m, bound / max(ratio, 1.0)))
    cap = _llm_cap(replica, mix, p, tuple(bounds), float(s.arrival_cv))
    return cap if cap > 0 and math.isfinite(cap) else None


def same_replicas(problem: Problem, catalog, keys) -> dict[str, tuple[str, ...]]:
    """Per configuration key in `keys`, every configuration of its service that runs the very
    same replica (an equal `Replica`: the same GPU, size, precision, engine and links, on
    another offer or provider): what the simulator says of one holds for all of them.
    Without this, a miss moves the plan to an identical replica on the next offer, one
    round per offer."""
    services = {s.name: s for s in problem.services}
    by_key = {c.key: c for c in problem.configs}
    out: dict[str, tuple[str, ...]] = {}
    replicas: dict[str, object] = {}

    def replica(c: Config):
        if c.key not in replicas:
            replicas[c.key] = _replica_of(catalog, problem.calibration, services[c.service], c)
        return replicas[c.key]

    for key in keys:
        c = by_key.get(key)
        if c is None:
            continue
        gpu = problem.offer(c.offer_id).gpu
        twins = [o.key for o in problem.configs
                 if o.service == c.service and o.source == "estimate" and o.key != key
                 and o.gpus_per_replica == c.gpus_per_replica and o.instances_per_replica == c.instances_per_replica
                 and o.precision == c.precision and problem.offer(o.offer_id).gpu == gpu
                 and replica(o) == replica(c)]
        out[key] = (key, *twins)
    return out


def verify_round(problem: Problem, solution, catalog, deadline: float, stop, checks: dict[str, Check]
                 ) -> tuple[Problem, Problem | None]:
    """One round of simulation in the loop, for a single hour and a horizon alike: the
    configurations `solution` uses are checked (stopping in time to leave the solve that may
    follow 40 % of what is left before `deadline`) and recorded in `checks`. Returns (kept,
    lowered): `kept` is the problem as it was solved, with what the simulator found recorded
    (the answer when no further round runs); `lowered` has the refuted caps lowered, None
    when none moved. A cancel raises (`stop`)."""
    t = time.monotonic()
    found = check_plan(problem, solution, catalog, deadline=t + 0.6 * max(deadline - t, 0.0), cancel=stop.cancel)
    checks.update(found)
    tight, moved = tightened(problem, found, catalog)
    if stop.cancelled:
        stop.check("the verification")
    return replace(problem, verified=tight.verified), (tight if moved else None)


def tightened(problem: Problem, checks: dict[str, Check], catalog=None) -> tuple[Problem, set[str]]:
    """The problem with what `checks` found: each configuration's confirmed and refuted
    rates recorded, and the cap of every configuration that missed (or stayed
    inconclusive) lowered below the rate checked - for every configuration running the same
    replica too, where `catalog` is given (`same_replicas`). Returns the keys whose cap
    moved."""
    verified = dict(problem.verified)
    lower: dict[str, float] = {}
    twins = same_replicas(problem, catalog, checks) if catalog is not None else {k: (k,) for k in checks}
    for key, ch in checks.items():
        for twin in twins.get(key, (key,)):
            met, missed = verified.get(twin, (0.0, math.inf))
            if ch.verdict == "met":
                verified[twin] = (max(met, ch.rate_per_s), missed)
            elif ch.verdict in ("missed", "inconclusive") and ch.requests > 0:
                verified[twin] = (met, min(missed, ch.rate_per_s))
                step = INCONCLUSIVE_STEP
                if ch.verdict == "missed":
                    over = max((v / b for m, v in ch.values_ms for n, b in ch.bounds_ms if m == n and b > 0),
                               default=1.0 / MISS_STEP)
                    step = min(MISS_STEP, 1.0 / over) if math.isfinite(over) and over > 0 else 0.5
                new = step * ch.rate_per_s
                if ch.corrected_rate_per_s is not None:
                    new = min(new, ch.corrected_rate_per_s)
                lower[twin] = min(lower.get(twin, math.inf), max(new, 0.5 * ch.rate_per_s))
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
