"""Exact percentile caps, computed only where a plan needs them.

A configuration of a service with a percentile SLO enters the problem with an upper bound
on its usable rate (`Config.pending_cap` set; solver/compile/load_caps.py). The planner
solves, computes the exact cap (the queueing model's search) of every pending
configuration its plan uses, and solves again, until the plan uses none:

* the problem with upper bounds is a relaxation (every plan that meets the exact caps
  meets the bounds), so its optimum costs at most the true optimum;
* a relaxed optimum that uses only exact configurations is a plan of the true problem,
  hence optimal for it. Each round makes at least one more configuration exact, so the
  loop ends, at worst with every cap computed.

The one event the loop knows is "some configurations' caps fell" (`apply_caps`): a bound
tightened, a bound replaced by the exact cap, or an exact cap lowered after the fact (a
simulator found that a configuration misses its SLO at its cap: `lower_caps`). A cap only
ever falls, so the problem before the event is a relaxation of the one after, and every
solve's optimum stays a lower bound of the next; the loop's argument is unchanged.

Which caps are computed never changes the answer, only how soon the loop ends (and the
bounds the loop works with are all bounds: load_caps.cap_upper_bound, saturation_cap_bound,
probe_cap_bound). Before the first MIP (`settle`), each service is settled alone: its
cheapest cover of its demand (a covering knapsack over its configurations at their price
per GPU, the bound of solver/optimize/service_bounds.py) is re-solved as bounds tighten
until it uses only exact configurations - a chosen configuration gets the saturation bound
(~1 ms), then a probe (one model evaluation, ~3 ms) at the rate below which the cover
stops using its replica shape, then its cap (~8 evaluations) - and configurations whose
bound still looks cheaper per unit of rate than its best exact one get the same. Services
are independent there, so a forked child on the spare core settles some of them
(solver/compile/split_work.py). Each round then leaves out of the MIP the pending
configurations no plan cheaper than a known plan of the exact problem can use
(`ServiceFloor`, `without_dearer`: floors at the price per GPU), and probes the rest at
the rate below which they would be left out (`probe_survivors`).

Pruning never lets a pending configuration dominate another (solver/compile/pruning.py),
so nothing that could be optimal is dropped on the strength of a bound; an exact one may
dominate a pending one (whose true rate is at most its bound). The loop prunes the
current configurations afresh for each solve (`solve_configs`), so a configuration pruned
by one whose cap is later lowered comes back.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace

from solver.compile import load_caps
from solver.compile.load_caps import (_kind, cap_key, exact_cap, per_config, per_key, probe_cap_bound,
                                     saturation_cap_bound, with_bound)
from solver.compile.problem import Config, Problem, Rejection
from solver.compile.pruning import prune_configs, prune_whole_instance_configs
from solver.compile.split_work import map_split
from solver.interrupt import NEVER, Stop

# The settle step's knapsacks: a node limit keeps each one cheap (it only chooses caps to
# compute; the MIP decides), and a service is settled in at most this many passes.
KNAPSACK_NODES = 2_000
SETTLE_PASSES = 1000
# A probe (load_caps.probe_cap_bound) only where its rate is this far below the bound.
PROBE_BELOW = 0.98
PROBES = 2  # per replica shape and settle step
THRESHOLD_STEPS = 6  # bisection steps for the rate at which a service stops using a replica shape


def pending_keys(problem: Problem, config_keys) -> set[str]:
    """The configurations among `config_keys` whose cap is still an upper bound."""
    return set(problem.pending_config_keys.intersection(config_keys))


def has_pending(problem: Problem) -> bool:
    return bool(problem.pending_config_keys)


# ---------------------------------------------------------------- the event: caps fell
def apply_caps(problem: Problem, updated: Mapping[str, Config]) -> Problem:
    """The next problem after the caps of some configurations fell: each configuration whose
    key is in `updated` is replaced by the given one (a pending one with a tighter bound, its
    exact cap, or an exact cap lowered after the fact). One that can serve nothing becomes a
    rejection with its reason, as when built eagerly. Caps only fall, so `problem` is a
    relaxation of the answer and its optimum a lower bound of the answer's."""
    if not updated:
        return problem
    configs = []
    rejections = list(problem.rejections)
    for c in problem.configs:
        new = updated.get(c.key)
        if new is None:
            configs.append(c)
            continue
        if all(k.throughput <= 0 for k in new.classes):
            reason = next((k.reason for k in new.classes if k.reason), "misses its SLO under any load")
            rejections.append(Rejection(new.service, new.offer_id, problem.offer(new.offer_id).gpu,
                                        new.gpus_per_replica, new.precision, _kind(reason), reason))
            continue
        configs.append(new)
    return replace(problem, configs=tuple(configs), rejections=tuple(rejections))


def lower_caps(problem: Problem, caps: Mapping[str, float], reason: str = "") -> Problem:
    """The problem with the rate per replica of each configuration in `caps` (config key ->
    requests/s, the service's unit) lowered to that cap, made exact: what a check after the
    solve (a simulator that finds a configuration missing its SLO at its cap) feeds back
    before the next solve. A cap at or above the current one changes nothing; a cap of 0
    rules the configuration out with `reason`. Keys not in the problem are ignored."""
    by_key = {c.key: c for c in problem.configs}
    updated = {}
    for key, cap in caps.items():
        c = by_key.get(key)
        if c is None:
            continue
        if c.pending_cap is not None:
            c = exact_cap(c)  # the model's cap first: the new one is the lower of the two
        cap = max(float(cap), 0.0)
        if c.pending_cap is None and cap >= c.classes[0].throughput and key not in problem.pending_config_keys:
            continue
        why = reason or "misses its SLO under load at its planned rate"
        updated[key] = replace(c, pending_cap=None, classes=tuple(
            replace(k, throughput=min(k.throughput, cap), reason=k.reason if cap > 0 else why)
            for k in c.classes))
    return apply_caps(problem, updated)


def resolve_caps(problem: Problem, keys: Iterable[str] | None = None, *, helper: bool = False,
                 stop: Stop = NEVER, stats: dict | None = None) -> Problem:
    """The problem with the exact cap of each pending configuration in `keys` (all when
    None); one that meets the SLO at no load becomes a rejection, as when built eagerly.
    Distinct caps are computed once (configurations of one replica shape on several offers
    share theirs), with a helper process where `helper` allows (solver/compile/split_work.py)."""
    wanted = problem.pending_config_keys if keys is None else problem.pending_config_keys.intersection(keys)
    if not wanted:
        return problem
    todo = [c for c in problem.configs if c.key in wanted]
    _compute_exact(todo, helper, stop, stats)
    return apply_caps(problem, {c.key: exact_cap(c) for c in todo})


def _compute_exact(configs: list[Config], helper: bool, stop: Stop, stats: dict | None) -> None:
    """The caps of `configs` into load_caps' memo (those not there yet), shared with a helper."""
    keys = []
    seen = set()
    for c in configs:
        k = cap_key(c.pending_cap)
        if k not in seen and load_caps._llm_cap.known(k) is None:
            seen.add(k)
            keys.append(k)
    if not keys:
        return
    t0 = time.monotonic()
    values = map_split(_exact_value, keys, helper=helper, stop=stop, stats=stats)
    for k, v in zip(keys, values):
        load_caps._llm_cap.put(k, v)
    if stats is not None:
        stats["caps"] = stats.get("caps", 0) + len(keys)
        stats["caps_s"] = stats.get("caps_s", 0.0) + time.monotonic() - t0


def _exact_value(key: tuple) -> float:
    return load_caps._llm_cap(*key)


# ---------------------------------------------------------------- what each solve gets
def solve_configs(problem: Problem) -> list[Config]:
    """The configurations the next solve needs: the problem's, less those an exact
    configuration dominates (pruning rules 2 and 3 of docs/formulation.md; a pending
    configuration never dominates, its rate being only a bound). Recomputed for every solve
    from the problem's configurations, so nothing stays pruned by a cap that later falls."""
    by_service: dict[str, list[Config]] = defaultdict(list)
    for c in problem.configs:
        by_service[c.service].append(c)
    offers = {o.id: o for o in problem.offers}
    by_location = bool(problem.same_region) or problem.redundancy_by_location
    pools = problem.spot_pools()
    out: list[Config] = []
    for s in problem.services:
        mine = by_service.get(s.name, [])
        if not mine or all(c.pending_cap is not None for c in mine):
            out.extend(mine)  # nothing exact: nothing can be dominated
            continue
        kept = prune_configs(mine, s)
        if s.redundancy_domain != "instance":  # see add_candidates
            kept = prune_whole_instance_configs(kept, offers, problem.offer_limits, problem.gpu_quotas,
                                                by_location=by_location, keep=pools)
        keep = {id(c) for c in kept}
        out.extend(c for c in mine if id(c) in keep)  # in the problem's order
    return out


# ---------------------------------------------------------------- configurations no cheaper plan uses
class ServiceFloor:
    """A lower bound on what one service's replicas cost in any plan, and on what they cost
    when a given configuration has a replica.

    Any plan pays, on each offer o, at least price_o / G_o per GPU its replicas take
    (pack[o]), so its cost is at least sum_s K_s, K_s = sum over s's replicas of their
    price per GPU x GPUs (`_replica_cost`, each replica's own offer). K_s is at least LB_s,
    the cheapest integer cover of s's demand (and min/max replicas) at those costs and at
    the configurations' current rates - caps or upper bounds on them, so LB_s bounds the
    exact problem too; quotas, limits, the budget and regions only remove plans. A plan
    with a replica of configuration c pays at least LB_s(c) = cost(c) + the cheapest cover
    of what is left. So with a plan of the exact problem at cost U, a configuration with
    sum_s LB_s + LB_s(c) - LB_s > U is in no plan cheaper than U: the MIP can do without it
    (`without_dearer`). The same bound as solver/optimize/service_bounds.py, per
    configuration instead of per group.

    Knapsacks over the configurations that no other beats on both rate and cost (`front`;
    a cover never needs a beaten one), by solver/optimize/service_bounds.py's branch and
    bound, which returns a valid lower bound when its node limit stops it."""

    def __init__(self, problem: Problem, s, configs: list[Config]):
        self.service = s
        self.cost = {c.key: _replica_cost(problem, c) for c in configs}
        self.rate = {c.key: (c.classes[0].throughput if len(c.classes) == 1 or s.mixed_routing
                             else None) for c in configs}
        usable = [c for c in configs if self.rate[c.key] is not None and self.rate[c.key] > 0]
        usable.sort(key=lambda c: (-self.rate[c.key], self.cost[c.key], c.key))
        front: list[Config] = []
        cheapest = math.inf
        for c in usable:
            if self.cost[c.key] < cheapest:
                front.append(c)
                cheapest = self.cost[c.key]
        self.front = front
        self.items = [(self.cost[c.key], self.rate[c.key], 0) for c in front]
        self.demand = s.total_demand if (len(s.class_demand) == 1 or s.mixed_routing) else None
        self.ratio = min((a / t for a, t, _ in self.items), default=math.inf)  # $/rate at best
        self.cheapest = min((a for a, _, _ in self.items), default=math.inf)  # one replica at least
        # Covers by (demand, min, max): the configurations of one replica shape on many offers
        # share a rate, so the demand left beside one replica repeats across them.
        self._covers: dict[tuple, float] = {}
        self.bound = self._cover(self.demand, s.min_replicas, s.max_replicas) if self.demand is not None else 0.0

    def _cover(self, demand: float | None, min_replicas: int, max_replicas: int | None) -> float:
        """The cheapest cover of `demand` (a lower bound on it), 0 when nothing is needed,
        inf when no cover exists."""
        key = (demand, min_replicas, max_replicas)
        if key not in self._covers:
            self._covers[key] = self._cover_once(demand, min_replicas, max_replicas)
        return self._covers[key]

    def _cover_once(self, demand: float | None, min_replicas: int, max_replicas: int | None) -> float:
        from solver.optimize.service_bounds import _single_class_solution

        if demand is None:
            return 0.0
        if demand <= 1e-9 and min_replicas <= 0:
            return 0.0
        if max_replicas is not None and max_replicas < 0:
            return math.inf
        items = [(a, t, max(math.ceil(max(demand, 0.0) / t - 1e-9), min_replicas, 1)) for a, t, _ in self.items]
        bound, _ = _single_class_solution(max(demand, 0.0), items, max(min_replicas, 0), max_replicas, KNAPSACK_NODES)
        return math.inf if bound is None else bound

    def _quick(self, a: float, t: float) -> float:
        """A lower bound on LB_s(c) for a configuration of replica cost `a` and rate `t`:
        the rest of the demand at the best price per unit of rate; at least one more replica
        where `t` alone falls short of the demand; min_replicas - 1 more replicas."""
        s = self.service
        rest = max(self.demand - t, 0.0)
        more = max(s.min_replicas - 1, 1 if rest > 1e-9 else 0, 0)
        return a + max(rest * self.ratio, more * self.cheapest)

    def extra(self, c: Config, limit: float) -> float:
        """A lower bound on LB_s(c) - LB_s (what one replica of `c` adds to the service's
        floor); a quick one first, the knapsack only when that one is not above `limit`."""
        s = self.service
        a, t = self.cost[c.key], self.rate[c.key]
        if self.demand is None or t is None or t <= 0:
            return 0.0
        quick = self._quick(a, t) - self.bound
        if quick > limit:
            return quick
        if s.max_replicas is not None and s.max_replicas < 1:
            return math.inf
        rest = max(self.demand - t, 0.0)
        forced = a + self._cover(rest, s.min_replicas - 1, None if s.max_replicas is None else s.max_replicas - 1)
        return max(quick, forced - self.bound)

    def threshold(self, c: Config, limit: float) -> float | None:
        """A rate below which `c`'s quick floor (`extra`'s first bound) is above `limit`:
        if c's cap is below it, c is in no plan cheaper than the one `limit` was left by.
        None where no positive rate is (or every rate is)."""
        a, t = self.cost[c.key], self.rate[c.key]
        if self.demand is None or t is None or t <= 0 or not math.isfinite(self.ratio):
            return None
        need = limit + self.bound - a  # quick - bound > limit  <=>  the terms after a exceed need
        s = self.service
        if max(s.min_replicas - 1, 0) * self.cheapest > need:
            return None  # above the limit at any rate: `extra` says so already
        below = []
        if self.ratio > 0:
            below.append(self.demand - need / self.ratio)  # rest x ratio > need
        if self.cheapest > need:
            below.append(self.demand)  # one more replica needed below the demand
        r = max(below, default=0.0) * (1 - 1e-9)
        return r if 0 < r < t else None


def service_floors(problem: Problem, configs: list[Config] | None = None) -> dict[str, ServiceFloor]:
    """`ServiceFloor` of every service (over `configs`, the problem's when None)."""
    by_service: dict[str, list[Config]] = defaultdict(list)
    for c in (problem.configs if configs is None else configs):
        by_service[c.service].append(c)
    return {s.name: ServiceFloor(problem, s, by_service.get(s.name, [])) for s in problem.services}


def probe_survivors(problem: Problem, configs: list[Config], floors: dict[str, ServiceFloor], upper: float, *,
                    helper: bool = False, stop: Stop = NEVER, stats: dict | None = None) -> Problem:
    """The pending configurations among `configs` that `without_dearer` keeps, each probed
    once (load_caps.probe_cap_bound: one model evaluation) at the rate below which its
    floor would leave it out: where the model misses a bound there, that rate is its new
    bound and it is left out; where not, it is a real candidate (the MIP decides). Per
    replica shape, at the lowest such rate of its configurations."""
    total = sum(f.bound for f in floors.values())
    slack = upper - total + 1e-7 + 1e-9 * abs(upper)
    if not math.isfinite(slack) or slack < 0:
        return problem
    probe_at: dict[tuple, float] = {}
    for c in configs:
        if c.pending_cap is None:
            continue
        f = floors[c.service]
        if f.extra(c, slack) > slack:
            continue  # left out already
        r = f.threshold(c, slack)
        if r is None:
            continue
        k = cap_key(c.pending_cap)
        at = per_key(c.pending_cap, r)
        if load_caps._llm_cap.known(k) is None and at < probe_at.get(k, math.inf):
            probe_at[k] = at
    if not probe_at:
        return problem
    t0 = time.monotonic()
    keys = list(probe_at)
    found = map_split(_probe, [(k, probe_at[k]) for k in keys], helper=helper, stop=stop, min_items=32, stats=stats)
    for k, b in zip(keys, found):
        if b is not None:
            known = load_caps._sat_bounds.known(k)
            load_caps._sat_bounds.put(k, b if known is None else min(known, b))
    if stats is not None:
        stats["probes"] = stats.get("probes", 0) + len(keys)
        stats["probes_s"] = stats.get("probes_s", 0.0) + time.monotonic() - t0
    return known_caps(problem)


def _probe(item: tuple) -> float | None:
    return probe_cap_bound(*item)


def without_dearer(configs: list[Config], floors: dict[str, ServiceFloor], upper: float,
                   stats: dict | None = None) -> list[Config]:
    """`configs` less the pending ones that no plan cheaper than `upper` (the cost of a plan
    of the exact problem) can use (`ServiceFloor`). The exact problem's optimum costs at most
    `upper`, so it uses none of them: the MIP over the rest has the same optimum."""
    total = sum(f.bound for f in floors.values())
    slack = upper - total + 1e-7 + 1e-9 * abs(upper)
    if not math.isfinite(slack) or slack < 0:
        return configs
    out = []
    dropped = 0
    for c in configs:
        if c.pending_cap is not None and floors[c.service].extra(c, slack) > slack:
            dropped += 1
            continue
        out.append(c)
    if stats is not None:
        stats["excluded"] = stats.get("excluded", 0) + dropped
    return out


# ---------------------------------------------------------------- which caps to compute
def _replica_cost(problem: Problem, c: Config) -> float:
    """One replica's share of its instances' price, per hour (at the price per GPU)."""
    o = problem.offer(c.offer_id)
    return o.price_usd_per_hour * c.instances_per_replica * min(c.gpus_per_replica / o.gpus_per_instance, 1.0)


def known_caps(problem: Problem) -> Problem:
    """The problem with what this process already knows: the exact cap of every pending
    configuration whose cap was computed (by an earlier round, plan or helper), and the
    saturation bound where only that is known. A re-plan of the same workload starts from
    every cap the last one needed."""
    updated = {}
    for c in problem.configs:
        if c.pending_cap is None:
            continue
        k = cap_key(c.pending_cap)
        if load_caps._llm_cap.known(k) is not None:
            updated[c.key] = exact_cap(c)
            continue
        b = load_caps._sat_bounds.known(k)
        if b is not None:
            new = with_bound(c, per_config(c.pending_cap, b))
            if new is not c:
                updated[c.key] = new
    return apply_caps(problem, updated)


def tighten(problem: Problem, keys: Iterable[str], *, helper: bool = False, stop: Stop = NEVER,
            stats: dict | None = None) -> Problem:
    """The pending configurations in `keys` with their saturation bound (~1 ms per distinct
    replica shape; load_caps.saturation_cap_bound) where it is tighter than their bound."""
    keys = problem.pending_config_keys.intersection(keys)
    todo = {}
    for c in problem.configs:
        if c.key in keys:
            k = cap_key(c.pending_cap)
            if load_caps._sat_bounds.known(k) is None and load_caps._llm_cap.known(k) is None:
                todo[k] = None
    if todo:
        t0 = time.monotonic()
        todo_keys = list(todo)
        for k, v in zip(todo_keys, map_split(saturation_cap_bound, todo_keys, helper=helper, stop=stop, min_items=64,
                                             stats=stats)):
            load_caps._sat_bounds.put(k, v)
        if stats is not None:
            stats["bounds"] = stats.get("bounds", 0) + len(todo_keys)
            stats["bounds_s"] = stats.get("bounds_s", 0.0) + time.monotonic() - t0
    return known_caps(problem)


class _Settle:
    """One service's settle step (see the module's docstring); returns what it computed
    (caps and saturation bounds by cap key, and how many caps were not known before), to
    be put in this process's memos: it may run in the helper process."""

    def __init__(self, problem: Problem, configs_of: dict[str, list[Config]]):
        self.problem = problem
        self.configs_of = configs_of

    def __call__(self, name: str) -> tuple[dict[str, float], dict[str, float], int]:
        p = self.problem
        s = p.service(name)
        mine = [c for c in self.configs_of.get(name, ()) if c.classes[0].throughput > 0]
        if not any(c.pending_cap is not None for c in mine):
            return {}, {}, 0
        # Configurations by index; each pending one's cap key hashed once (a key holds the
        # replica's physics: hashing it is not cheap), its distinct keys by index.
        keys: list[tuple] = []
        index: dict[tuple, int] = {}
        kid = []
        pend = []  # each configuration's pending tuple (None: exact)
        for c in mine:
            if c.pending_cap is None:
                kid.append(-1)
                pend.append(None)
                continue
            k = cap_key(c.pending_cap)
            j = index.get(k)
            if j is None:
                j = index[k] = len(keys)
                keys.append(k)
            kid.append(j)
            pend.append(c.pending_cap)
        n = len(mine)
        cost = [_replica_cost(p, c) for c in mine]
        rate = [c.classes[0].throughput for c in mine]
        exact_at = [c.pending_cap is None for c in mine]
        # Per distinct key: 0 first bound, 1 saturation bound, 2 exact.
        level = [0] * len(keys)
        value = [0.0] * len(keys)
        for j, k in enumerate(keys):
            cap = load_caps._llm_cap.known(k)
            if cap is not None:
                level[j], value[j] = 2, cap
            else:
                b = load_caps._sat_bounds.known(k)
                if b is not None:
                    level[j], value[j] = 1, b
        members: list[list[int]] = [[] for _ in keys]
        for i in range(n):
            if kid[i] >= 0:
                members[kid[i]].append(i)

        def refresh(j: int) -> None:
            for i in members[j]:
                v = per_config(pend[i], value[j])
                if level[j] == 2:
                    rate[i], exact_at[i] = v, True
                elif v < rate[i]:
                    rate[i] = v

        for j in range(len(keys)):
            if level[j]:
                refresh(j)
        exact: dict[tuple, float] = {}
        bounds: dict[tuple, float] = {}
        computed = 0

        probed: dict[int, int] = {}  # probes per shape

        def tighten_one(i: int, to_exact: bool, target: float | None = None) -> None:
            """Configuration i's bound made tighter: first the saturation bound (unless
            `to_exact`), then - where `target` (a rate below which i is no better than what
            else the service has) lies under its bound - one evaluation of the model at
            `target`; only where neither moves it, the cap itself."""
            nonlocal computed
            j = kid[i]
            if level[j] == 2:
                return
            before = rate[i]
            if not to_exact and level[j] == 0:
                value[j] = bounds[keys[j]] = saturation_cap_bound(keys[j])
                level[j] = 1
                refresh(j)
                if rate[i] < before:
                    return  # tighter: the caller looks again
            if target is not None and probed.get(j, 0) < PROBES and 0 < target < rate[i] * PROBE_BELOW:
                probed[j] = probed.get(j, 0) + 1
                b = probe_cap_bound(keys[j], per_key(pend[i], target))
                if b is not None and b < value[j]:
                    value[j] = bounds[keys[j]] = b
                    level[j] = max(level[j], 1)
                    refresh(j)
                    if rate[i] < before:
                        return
            k = keys[j]
            if load_caps._llm_cap.known(k) is None:
                computed += 1
            value[j] = exact[k] = load_caps._llm_cap(*k)
            level[j] = 2
            refresh(j)

        def threshold(i: int) -> float | None:
            """The rate (of configuration i) below which the service's cover no longer uses
            i's replica shape, the other configurations as they are: bisection on the rate
            shared by the shape's configurations (a few knapsacks of ~10 items)."""
            j = kid[i]
            saved = [(m, rate[m]) for m in members[j]]
            top = value[j]  # under the cap key

            def uses(x: float) -> bool:
                for m in members[j]:
                    rate[m] = per_config(pend[m], x)
                return any(kid[m] == j for m in self._knapsack(s, mine, cost, rate, exact_at))

            lo, hi = 0.0, top
            try:
                if not uses(hi):
                    return None
                for _ in range(THRESHOLD_STEPS):
                    mid = 0.5 * (lo + hi)
                    if uses(mid):
                        hi = mid
                    else:
                        lo = mid
            finally:
                for m, r in saved:
                    rate[m] = r
            return per_config(pend[i], lo)

        if s.total_demand > 0 or s.min_replicas:
            for _ in range(SETTLE_PASSES):
                todo = [i for i in self._knapsack(s, mine, cost, rate, exact_at) if not exact_at[i]]
                if not todo:
                    break
                for i in todo:
                    # A configuration chosen on its first bound gets the tighter one first
                    # (it may drop out); chosen again on that, a probe at the rate where it
                    # stops being the cheapest per unit of rate, then its cap.
                    tighten_one(i, to_exact=level[kid[i]] >= 1,
                                target=threshold(i) if level[kid[i]] >= 1 else None)
        # Configurations that still look cheaper per unit of rate than the best exact one.
        best = min((cost[i] / rate[i] for i in range(n) if exact_at[i] and rate[i] > 0), default=math.inf)
        if best < math.inf:
            for i in sorted((i for i in range(n) if not exact_at[i] and rate[i] > 0),
                            key=lambda i: (cost[i] / rate[i], mine[i].key)):
                if not cost[i] / rate[i] < best:
                    break
                tighten_one(i, to_exact=False)
                if rate[i] > 0 and cost[i] / rate[i] < best:
                    tighten_one(i, to_exact=True, target=cost[i] / best)
                    if exact_at[i] and rate[i] > 0:
                        best = min(best, cost[i] / rate[i])
        # By a configuration's key, not the cap key: a cap key holds the replica's step
        # function, which does not pickle (the helper process sends these back).
        name_of = {}
        for j, k in enumerate(keys):
            name_of[k] = mine[members[j][0]].key
        return ({name_of[k]: v for k, v in exact.items()},
                {name_of[k]: v for k, v in bounds.items() if k not in exact}, computed)

    @staticmethod
    def _knapsack(s, mine: list[Config], cost: list[float], rate: list[float], exact_at: list[bool]) -> list[int]:
        """The service alone: its cheapest cover at the price per GPU, over the configurations
        no other one beats on both rate and cost (exact first on ties): the indices it uses."""
        from solver.optimize.service_bounds import _single_class_solution

        order = sorted((i for i in range(len(mine)) if rate[i] > 0),
                       key=lambda i: (-rate[i], cost[i], not exact_at[i], mine[i].key))
        front: list[int] = []
        cheapest = math.inf
        for i in order:
            if cost[i] < cheapest:
                front.append(i)
                cheapest = cost[i]
        need = s.total_demand
        items = [(cost[i], rate[i], max(math.ceil(need / rate[i] - 1e-9), s.min_replicas, 1)) for i in front]
        _, counts = _single_class_solution(need, items, s.min_replicas, s.max_replicas, KNAPSACK_NODES)
        if counts is None:
            return []
        return [i for i, r in zip(front, counts) if r > 0]


def settle(problem: Problem, services: Iterable[str] | None = None, *, helper: bool = False, stop: Stop = NEVER,
           stats: dict | None = None) -> Problem:
    """The settle step for `services` (every service with a pending configuration when
    None): see the module's docstring. Only chooses which caps to compute and which bounds
    to tighten: the answer does not depend on it."""
    problem = known_caps(problem)
    configs_of: dict[str, list[Config]] = defaultdict(list)
    for c in problem.configs:
        configs_of[c.service].append(c)
    wanted = set(services) if services is not None else None
    names = [s.name for s in problem.services
             if (wanted is None or s.name in wanted) and any(c.pending_cap is not None for c in configs_of[s.name])]
    if not names:
        return problem
    # The biggest first: the two processes then end at about the same time.
    names.sort(key=lambda n: -len(configs_of[n]))
    t0 = time.monotonic()
    results = map_split(_Settle(problem, configs_of), names, helper=helper, stop=stop, stats=stats)
    computed = 0
    by_key = {c.key: c for c in problem.configs}
    for exact, bounds, n in results:
        for k, v in exact.items():
            load_caps._llm_cap.put(cap_key(by_key[k].pending_cap), v)
        for k, v in bounds.items():
            load_caps._sat_bounds.put(cap_key(by_key[k].pending_cap), v)
        computed += n
        if stats is not None:
            stats["bounds"] = stats.get("bounds", 0) + len(bounds)
    if stats is not None:
        stats["caps"] = stats.get("caps", 0) + computed
        stats["settle_s"] = stats.get("settle_s", 0.0) + time.monotonic() - t0
    return known_caps(problem)


def refine(problem: Problem, used: set[str], *, helper: bool = False, stop: Stop = NEVER,
           stats: dict | None = None) -> Problem:
    """After a solve whose plan used the pending configurations `used`: their exact caps,
    then the settle step again for their services (whose best exact configurations may have
    changed)."""
    services = {c.service for c in problem.configs if c.key in used}
    problem = resolve_caps(problem, used, helper=helper, stop=stop, stats=stats)
    return settle(problem, services, helper=helper, stop=stop, stats=stats)
