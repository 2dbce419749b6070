"""What a fleet still serves after losing one failure domain (constraints.redundancy).

Pure arithmetic over replicas that the caller derived: the planner passes its compiled
configurations, the independent evaluator the ones it re-derives from the raw workload,
so the two checks share only this math, never each other's inputs.

Domains. `zone`, `region` and `provider` are places: losing one loses every replica there.
The catalogs list offers by region, not zone, so a zone is read as its region (a stronger
guarantee; the plan warns). `instance` is any one instance: the replicas of the service
that one instance can hold, however a scheduler packed them - the worst case over every
packing (a bounded knapsack over the service's replicas on that offer), so the guarantee
does not depend on the placement the plan's deployment ends up with.

Reclaimed spot (`worst_spot_loss`): a provider takes back a spot capacity pool at once; one
offer's spot instances are one pool (offers are listed by region, not zone).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

LOCATION_DOMAINS = ("zone", "region", "provider")
SPOT_POOL = "spot_pool"  # constraints.spot_interruptions: one offer's spot instances, reclaimed at once
# Loss patterns of one instance enumerated before the instance check falls back to the
# bound the optimizer uses (each configuration loses min(replicas, per instance) at once).
MAX_LOSS_PATTERNS = 20_000


@dataclass(frozen=True)
class Held:
    """Replicas of one configuration of a service."""

    offer_id: str
    place: tuple[str, ...]  # (provider, region): the offer's location
    gpus_per_instance: int
    gpus_per_replica: int
    instances_per_replica: int
    replicas: int
    throughput: tuple[float, ...]  # per class, per replica (SLO-capped)
    spot: bool = False  # on spot instances (constraints.spot_interruptions loses them a pool at a time)

    @property
    def per_instance(self) -> int:
        """Replicas of this configuration one instance can hold (1 for a replica spanning
        whole instances: losing any of them loses it)."""
        if self.instances_per_replica > 1 or self.gpus_per_replica >= self.gpus_per_instance:
            return 1
        return self.gpus_per_instance // self.gpus_per_replica


@dataclass(frozen=True)
class Survival:
    """The worst single-domain loss of one service."""

    domain: str
    serve_fraction: float  # required
    worst_domain: str  # what is lost in the worst case ("" when the service holds nothing)
    surviving_fraction: float  # of the demand (without headroom) the survivors serve in that case
    exact: bool = True  # False: the instance check used the optimizer's bound (too many patterns)

    @property
    def met(self) -> bool:
        return self.surviving_fraction >= self.serve_fraction * (1 - 1e-6) - 1e-9


def domain_key(domain: str, provider: str, region: str) -> tuple[str, ...]:
    """The place a location domain groups offers by."""
    return (provider,) if domain == "provider" else (provider, region)


def servable_fraction(held: list[tuple[Held, int]], demand: tuple[float, ...]) -> float:
    """The largest fraction of `demand` (per class) the replicas serve, each `(h, n)` being
    n replicas of h, time-shared between classes (the optimizer's capacity rows)."""
    total = sum(demand)
    if total <= 0:
        return math.inf
    live = [(h, n) for h, n in held if n > 0]
    if not live:
        return 0.0
    if len(demand) == 1:
        return sum(h.throughput[0] * n for h, n in live) / demand[0]
    first = live[0][0].throughput
    if all(h.throughput == first for h, _ in live) and len(set(first)) == 1:
        # Every replica serves every class at one rate (a mix under a percentile SLO).
        return sum(h.throughput[0] * n for h, n in live) / total
    return _lp_fraction(live, demand)


def _lp_fraction(live: list[tuple[Held, int]], demand: tuple[float, ...]) -> float:
    """max lambda: sum_i x_ik >= lambda d_k, sum_k x_ik / t_ik <= n_i, x >= 0 (GLOP)."""
    from ortools.linear_solver import pywraplp

    lp = pywraplp.Solver.CreateSolver("GLOP")
    lam = lp.NumVar(0, lp.infinity(), "lambda")
    routed: list[list] = [[] for _ in demand]
    for i, (h, n) in enumerate(live):
        share = lp.Constraint(-lp.infinity(), float(n))
        for k, t in enumerate(h.throughput):
            if t > 0 and demand[k] > 0:
                x = lp.NumVar(0, lp.infinity(), f"x{i}_{k}")
                share.SetCoefficient(x, 1.0 / t)
                routed[k].append(x)
    for k, d in enumerate(demand):
        if d <= 0:
            continue
        row = lp.Constraint(0, lp.infinity())
        row.SetCoefficient(lam, -d)
        for x in routed[k]:
            row.SetCoefficient(x, 1.0)
    lp.Maximize(lam)
    if lp.Solve() != pywraplp.Solver.OPTIMAL:
        return 0.0
    return lam.solution_value()


def worst_loss(held: list[Held], demand: tuple[float, ...], domain: str, serve_fraction: float) -> Survival:
    """The single-domain loss that leaves the least of `demand` served."""
    held = [h for h in held if h.replicas > 0]
    if not held or sum(demand) <= 0:
        return Survival(domain, serve_fraction, "", math.inf if sum(demand) <= 0 else 0.0)
    worst, name, exact = math.inf, "", True
    if domain in LOCATION_DOMAINS:
        places = sorted({domain_key(domain, *h.place) for h in held})
        for place in places:
            left = [(h, h.replicas) for h in held if domain_key(domain, *h.place) != place]
            f = servable_fraction(left, demand)
            if f < worst:
                worst, name = f, "/".join(place)
    else:
        for offer_id in sorted({h.offer_id for h in held}):
            here = [h for h in held if h.offer_id == offer_id]
            patterns, pattern_exact = _instance_losses(here)
            exact = exact and pattern_exact
            for lost in patterns:
                left = [(h, h.replicas - lost.get(id(h), 0)) for h in held]
                f = servable_fraction(left, demand)
                if f < worst:
                    worst, name = f, f"one instance of {offer_id}"
    return Survival(domain, serve_fraction, name, worst, exact)


def worst_spot_loss(held: list[Held], demand: tuple[float, ...], serve_fraction: float) -> Survival:
    """The reclaimed spot pool that leaves the least of `demand` served: every spot replica
    of one offer lost at once (constraints.spot_interruptions)."""
    held = [h for h in held if h.replicas > 0]
    if sum(demand) <= 0:
        return Survival(SPOT_POOL, serve_fraction, "", math.inf)
    pools = sorted({h.offer_id for h in held if h.spot})
    if not pools:  # nothing to reclaim: the fleet serves what it serves
        return Survival(SPOT_POOL, serve_fraction, "", servable_fraction([(h, h.replicas) for h in held], demand))
    worst, name = math.inf, ""
    for pool in pools:
        left = [(h, 0 if h.spot and h.offer_id == pool else h.replicas) for h in held]
        f = servable_fraction(left, demand)
        if f < worst:
            worst, name = f, f"the spot instances of {pool}"
    return Survival(SPOT_POOL, serve_fraction, name, worst)


def _instance_losses(here: list[Held]) -> tuple[list[dict[int, int]], bool]:
    """The maximal sets of replicas (count per configuration) that one instance of this
    offer can hold; (patterns, exact). Past MAX_LOSS_PATTERNS: each configuration loses
    min(replicas, per instance) at once - more than any one instance holds."""
    gpus = here[0].gpus_per_instance
    ranges = [range(min(h.replicas, h.per_instance) + 1) for h in here]
    if math.prod(len(r) for r in ranges) > MAX_LOSS_PATTERNS:
        return [{id(h): min(h.replicas, h.per_instance) for h in here}], False
    size = [gpus if h.per_instance == 1 else h.gpus_per_replica for h in here]
    fits = [c for c in itertools.product(*ranges) if sum(n * s for n, s in zip(c, size)) <= gpus]
    # Keep the maximal patterns: one more replica of any configuration would not fit.
    maximal = [c for c in fits if not any(
        c[i] < ranges[i][-1] and sum(n * s for n, s in zip(c, size)) + size[i] <= gpus for i in range(len(c)))]
    return [{id(h): n for h, n in zip(here, c)} for c in maximal], True
