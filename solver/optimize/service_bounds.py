"""Per-service lower bounds: a proven bound on any plan's cost, and plans to start from.

Any fleet costs at least what its replicas' GPUs cost at the cheapest price per GPU of
the offers each could run on: cost = sum_o price_o n_o >= sum_G c_G R_G, where
c_G = g_G x min over G's offers of price_o / G_o (the pack and host rows imply this in
the LP). Each service alone must still cover its demand with *integer* replicas, so

    lb[s]:  sum_{G of s} c_G R_G >= LB_s,   LB_s = min sum_G c_G R_G  s.t. s's own rows
                                            (demand, time-shared classes, min/max replicas)

is valid for every plan (quotas, limits, the budget and regions only remove plans), and so
is sum_s LB_s <= cost of any plan. The MIP's LP relaxation rounds nothing: on the
1,000-service benchmark of 2026-12-03 (that day's catalog) its root bound was 4,034.6 $/h,
while sum_s LB_s was 4,450.03 against an optimum of 4,450.32 (0.007 %). The planner uses it as a certificate: with
`solver.relative_gap` set, the solve stops as soon as a plan within that gap of it is
found, and the reported gap counts it. (Added to the model as cuts, these rows gave the
same bound at the root but stalled SCIP's own search for good plans: docs/benchmarks.md
of 2026-12-03, in git history.)

LB_s is solved exactly: single-class services by a small branch and bound over the
replica counts (a covering knapsack with a few items), services with several classes by
the MIP backend on their own rows. A node limit keeps the branch and bound bounded; when
it stops early, its best proven bound (still valid) is used instead.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

from solver.compile.problem import ServiceDemand
from solver.interrupt import NEVER, Stop

NODE_LIMIT = 20_000
_EPS = 1e-9


def group_cost(group, problem) -> float:
    """c_G: the cheapest cost of one replica of the group over its offers, per hour."""
    best = math.inf
    for c in group.configs:
        offer = problem.offer(c.offer_id)
        best = min(best, offer.price_usd_per_hour * c.gpus_per_replica / offer.gpus_per_instance)
    return best


def _group_cost(group, offers: dict[str, tuple[float, int]]) -> float:
    """`group_cost` with the offers' (price, GPUs per instance) looked up in `offers`."""
    best = math.inf
    for c in group.configs:
        price, gpus = offers[c.offer_id]
        cost = price * c.gpus_per_replica / gpus
        if cost < best:
            best = cost
    return best


def single_class_bound(demand: float, items: list[tuple[float, float, int]], min_replicas: int,
                       max_replicas: int | None, node_limit: int = NODE_LIMIT) -> float | None:
    bound, _ = single_class_solution(demand, items, min_replicas, max_replicas, node_limit)
    return bound


def single_class_solution(demand: float, items: list[tuple[float, float, int]], min_replicas: int,
                          max_replicas: int | None, node_limit: int = NODE_LIMIT
                          ) -> tuple[float | None, list[int] | None]:
    """min sum c_i r_i  s.t.  sum t_i r_i >= demand, min <= sum r_i <= max, 0 <= r_i <= u_i integer.

    Remembered by its exact input (`_solved`): review scenarios that leave a service's
    demand, offers and prices as they were ask again for the same numbers."""
    bound, counts = _solved(demand, tuple(items), min_replicas, max_replicas, node_limit)
    return bound, (list(counts) if counts is not None else None)


@functools.lru_cache(maxsize=8192)
def _solved(demand: float, items: tuple[tuple[float, float, int], ...], min_replicas: int, max_replicas: int | None,
            node_limit: int) -> tuple[float | None, tuple[int, ...] | None]:
    bound, counts = _single_class_solution(demand, list(items), min_replicas, max_replicas, node_limit)
    return bound, (tuple(counts) if counts is not None else None)


def _single_class_solution(demand: float, items: list[tuple[float, float, int]], min_replicas: int,
                           max_replicas: int | None, node_limit: int = NODE_LIMIT
                           ) -> tuple[float | None, list[int] | None]:
    """`single_class_solution`, computed.

    items: (cost c_i, throughput t_i, upper bound u_i). Returns the bound and the best
    replica counts found (per item, in the given order); (None, None) when infeasible. Depth-first
    branch and bound over the items in order of cost per throughput, bounded by the LP
    (fractional) completion; the answer is exact unless the node limit ends the search,
    in which case the smallest bound still open is returned (a valid lower bound)."""
    order = sorted((j for j, i in enumerate(items) if i[2] > 0),
                   key=lambda j: (items[j][0] / items[j][1] if items[j][1] > 0 else math.inf, items[j][0]))
    original = items
    items = [original[j] for j in order]
    if not items:
        ok = demand <= _EPS and min_replicas == 0
        return (0.0, [0] * len(original)) if ok else (None, None)
    n = len(items)
    # Every item left has room for a replica (u > 0): the cheapest replica cost from item k
    # on is a suffix minimum, and the items from k on a slice, both made once.
    cheapest_from = [math.inf] * (n + 1)
    for k in range(n - 1, -1, -1):
        cheapest_from[k] = min(items[k][0], cheapest_from[k + 1])
    rests = [items[k:] for k in range(n + 1)]
    best = [math.inf]
    best_counts: list[list[int] | None] = [None]
    counts = [0] * n
    nodes = [0]
    open_bound = [math.inf]  # smallest LP bound of a subtree left unexplored at the limit

    def lp_rest(k: int, need: float, count_need: int) -> float:
        """A lower bound on completing from item k: fractional cover of `need`, and at
        least `count_need` more replicas at the cheapest remaining replica cost."""
        cover = 0.0
        left = need
        for c, t, u in rests[k]:
            if left <= _EPS:
                break
            if t <= 0:
                continue
            take = min(u, left / t)
            cover += take * c
            left -= take * t
        if left > _EPS:
            return math.inf
        return max(cover, count_need * cheapest_from[k] if count_need > 0 else 0.0)

    def search(k: int, cost: float, need: float, count: int) -> None:
        nodes[0] += 1
        if nodes[0] > node_limit:
            open_bound[0] = min(open_bound[0], cost + lp_rest(k, need, max(min_replicas - count, 0)))
            return
        if need <= _EPS and count >= min_replicas:
            if cost < best[0]:
                best[0] = cost
                best_counts[0] = counts[:k] + [0] * (n - k)
            return
        if k == n or (max_replicas is not None and count >= max_replicas):
            return
        if cost + lp_rest(k, need, max(min_replicas - count, 0)) >= best[0] - _EPS:
            return
        c, t, u = items[k]
        room = u if max_replicas is None else min(u, max_replicas - count)
        most = min(room, max(math.ceil(need / t - _EPS), min_replicas - count, 0)) if t > 0 else \
            min(room, max(min_replicas - count, 0))
        for r in range(most, -1, -1):  # the greedy count first: good plans early, tight pruning
            counts[k] = r
            search(k + 1, cost + r * c, max(need - r * t, 0.0), count + r)
            if nodes[0] > node_limit and r > 0:
                # Out of nodes: the smaller counts left here are not explored; this node's
                # own LP bound covers them all (a loop over up to `most` - millions of
                # replicas at absurd demand - would otherwise go on, one call per count).
                open_bound[0] = min(open_bound[0], cost + lp_rest(k, need, max(min_replicas - count, 0)))
                break
        counts[k] = 0

    try:
        search(0, 0.0, max(demand, 0.0), 0)
    finally:
        # `search` calls itself through its closure cell: a reference cycle (the function,
        # its cells, `rests`...) that only the cyclic collector would free. Emptying the
        # cell lets reference counting free it all now (plans make no cycles:
        # solver/collector.py).
        search = None  # noqa: F841 - read through the closure
    if best[0] == math.inf and open_bound[0] == math.inf:
        return None, None
    solution = None
    if best_counts[0] is not None:
        solution = [0] * len(original)
        for j, r in zip(order, best_counts[0]):
            solution[j] = r
    return min(best[0], open_bound[0]), solution


@dataclass
class ServiceBound:
    terms: list[tuple[int, float]]  # sum_G c_G R_G as (variable index, c_G)
    bound: float  # LB_s
    replicas: dict[str, int] = field(default_factory=dict)  # group key -> replicas of the best plan found
    routed: dict[tuple[str, int], float] = field(default_factory=dict)  # (group key, class) -> traffic
    # Services with disaggregated pools: a lower bound on the service's cost in any plan that
    # uses its pools (None: not known; inf: no such plan).
    with_pools: float | None = None


def service_lower_bounds(form, stop: Stop = NEVER) -> dict[str, ServiceBound]:
    """Service name -> its bound (and the best replicas found for it alone), for every
    service with replicas to place."""
    from solver.optimize.backends import SolveOptions, get_backend
    from solver.optimize.linear import INF, LinearModel

    p = form.problem
    out: dict[str, ServiceBound] = {}
    offers = {o.id: (o.price_usd_per_hour, o.gpus_per_instance) for o in p.offers}
    # A service that may send traffic to disaggregated pools can cost less than its replicas
    # alone: its replicas' best plan is still a plan to start from, but no bound. Its pools
    # serve what is routed to them, possibly nothing: no bound, no plan of their own.
    split = {s.feeds for s in p.services if s.role and form.by_service.get(s.name)}  # pools in this model
    pools_of: dict[str, set[str]] = {}
    for s in p.services:
        if s.role:
            pools_of.setdefault(s.feeds, set()).add(s.name)
    red_stop: Stop | None = None  # the budget of the services with failure domains
    for i, s in enumerate(p.services):
        if i % 64 == 0:
            stop.check("model building")
        groups = form.by_service.get(s.name, [])
        if s.role or (not groups and s.name not in split) or (s.total_demand <= 0 and not s.min_replicas):
            continue
        costs = {g.key: _group_cost(g, offers) for g in groups}
        ubs = {g.key: int(form.model.variables[form.r[g.key]].ub) for g in groups}
        replicas: dict[str, int] = {}
        routed: dict[tuple[str, int], float] = {}
        if s.redundancy_domain and sum(s.redundancy_demand) > 0:
            from solver.optimize.redundancy import service_bound

            if red_stop is None:
                # A service's own MIP with its survive rows takes ~1 s where it has many
                # configurations (instance domains keep them all): together at most a quarter
                # of the time left, each at most 1 s (a bound cut short is still valid; past
                # the quarter a service has none, and the sum over the others still holds).
                share = stop.seconds_left(3600.0) * 0.25
                red_stop = Stop(stop.cancel, time.monotonic() + share)
            if red_stop.seconds_left(1.0) <= 0.01:
                continue
            bound, replicas, routed = service_bound(form, s, groups, costs, ubs, red_stop)
        elif len(s.class_demand) == 1:
            bound, counts = single_class_solution(
                s.class_demand[0], [(costs[g.key], g.rep.classes[0].throughput, ubs[g.key]) for g in groups],
                s.min_replicas, s.max_replicas)
            if counts is not None:
                replicas = {g.key: r for g, r in zip(groups, counts) if r}
        else:
            bound, replicas, routed = _multi_class_bound(s, groups, costs, ubs, get_backend("scip"), SolveOptions,
                                                         LinearModel, INF, stop)
        if s.name in split:
            bound, replicas, used = _split_bound(form, s, groups, costs, offers, stop)
            pool_groups = [g for g in form.groups if g.service in pools_of.get(s.name, ())]
            out[s.name] = ServiceBound([(form.r[g.key], costs[g.key]) for g in groups]
                                       + [(form.r[g.key], _group_cost(g, offers)) for g in pool_groups],
                                       bound or 0.0, replicas, routed, used)
        elif bound is not None and bound > 0:
            out[s.name] = ServiceBound([(form.r[g.key], costs[g.key]) for g in groups], bound, replicas, routed)
    return out


def _split_bound(form, s: ServiceDemand, groups, costs, offers, stop: Stop
                 ) -> tuple[float | None, dict[str, int], float | None]:
    """LB_s for a service that may also send traffic to disaggregated pools: its own MIP
    over its replicas and its pools' workers (each at its GPUs' share of the cheapest
    member offer's price: instances shared with other services cost no less), the rates of
    each tier matched as in the full model. Returns (a valid lower bound or None, the
    replicas of the best plan found: its own groups and its pools' groups, a lower bound
    on its cost when it uses its pools at all)."""
    from solver.optimize.backends import SolveOptions, get_backend
    from solver.optimize.linear import LinearModel

    p = form.problem
    lm = LinearModel()
    chosen = list(groups)
    cost = dict(costs)
    served = [(None, g) for g in groups]
    tiers: dict[str, int] = {}
    for pool in p.services:
        if pool.feeds != s.name:
            continue
        if pool.link not in tiers:
            tiers[pool.link] = lm.var(f"x{len(tiers)}", 0, s.total_demand)
        for g in form.by_service.get(pool.name, []):
            chosen.append(g)
            cost[g.key] = _group_cost(g, offers)
            served.append((pool.link, g))
    r = {g.key: lm.var(f"r{j}", 0, int(form.model.variables[form.r[g.key]].ub), integer=True)
         for j, g in enumerate(chosen)}
    lm.row("d", [(r[g.key], g.rep.classes[0].throughput) for link, g in served if link is None]
           + [(x, 1.0) for x in tiers.values()], lb=s.total_demand)
    for link, x in tiers.items():
        for role in ("prefill", "decode"):
            terms = [(r[g.key], g.rep.classes[0].throughput) for tier, g in served
                     if tier == link and g.service.split("#", 1)[1].startswith(role)]
            lm.row(f"{role}:{link}", terms + [(x, -1.0)], lb=0.0)
    lm.objective = {r[g.key]: cost[g.key] for g in chosen}
    backend = get_backend("highs")  # these small MIPs: ~4x quicker than SCIP's start-up and search
    out = backend.solve(lm, SolveOptions(time_limit_s=max(stop.seconds_left(5.0), 0.05), cancel=stop.cancel))
    replicas = {}
    if out.values is not None:
        replicas = {g.key: int(round(out.values[r[g.key]])) for g in chosen if round(out.values[r[g.key]]) > 0}
    # The dual bound, not the objective: "optimal" is within the solver's absolute gap, and
    # this bound proves plans (plan.py) and drops pools, so it must never exceed the optimum.
    bound = _dual_bound(out)
    # The same with at least one worker: what any plan that uses this service's pools costs
    # it at least (plan.py drops the pools when that cannot beat a plan in hand).
    workers = [(r[g.key], 1.0) for tier, g in served if tier is not None]
    used = None
    if workers:
        lm.row("uses pools", workers, lb=1.0)
        forced = backend.solve(lm, SolveOptions(time_limit_s=max(stop.seconds_left(5.0), 0.05), cancel=stop.cancel))
        used = math.inf if forced.status == "infeasible" else _dual_bound(forced)
    return bound, replicas, used


def _dual_bound(out) -> float | None:
    """A solve's proven lower bound (None: none)."""
    if out.bound is not None and math.isfinite(out.bound):
        return out.bound
    return None


def service_model(s: ServiceDemand, groups, ubs, one_row: bool = False):
    """One service's own rows over its groups: (model, replica vars, routed vars). Demand
    per class with time-shared replicas (`one_row`: one demand row on the first class's
    rate, for one class or the service's mix on every replica), min and max replicas."""
    from solver.optimize.linear import INF, LinearModel

    lm = LinearModel()
    r = {g.key: lm.var(f"r{j}", 0, ubs[g.key], integer=True) for j, g in enumerate(groups)}
    x = {}
    if one_row:
        if s.total_demand > 0:
            lm.row("d", [(r[g.key], g.rep.classes[0].throughput) for g in groups], lb=s.total_demand)
    else:
        for k, d in enumerate(s.class_demand):
            terms = []
            for g in groups:
                if g.rep.classes[k].throughput > 0:
                    x[(g.key, k)] = lm.var(f"x{len(x)}", 0, INF)
                    terms.append((x[(g.key, k)], 1.0))
            if d > 0:
                lm.row(f"d{k}", terms, lb=d)
        for g in groups:
            share = [(x[(g.key, k)], 1.0 / g.rep.classes[k].throughput) for k in range(len(s.class_demand))
                     if (g.key, k) in x]
            lm.row(f"c{len(lm.rows)}", share + [(r[g.key], -1.0)], ub=0.0)
    every = [(v, 1.0) for v in r.values()]
    if s.min_replicas:
        lm.row("min", every, lb=s.min_replicas)
    if s.max_replicas is not None:
        lm.row("max", every, ub=s.max_replicas)
    return lm, r, x


def best_found(out, groups, r, x) -> tuple[dict[str, int], dict]:
    """The replicas (and routed traffic) of a sub-solve's best plan; empty without one."""
    if out.values is None:
        return {}, {}
    replicas = {g.key: int(round(out.values[r[g.key]])) for g in groups if round(out.values[r[g.key]]) > 0}
    return replicas, {key: out.values[i] for key, i in x.items() if out.values[i] > 0}


def _multi_class_bound(s: ServiceDemand, groups, costs, ubs, backend, SolveOptions, LinearModel, INF, stop: Stop):
    """LB_s for a service with several request classes: its own MIP (time-shared replicas)."""
    lm, r, x = service_model(s, groups, ubs)
    lm.objective = {r[g.key]: costs[g.key] for g in groups}
    out = backend.solve(lm, SolveOptions(time_limit_s=max(stop.seconds_left(5.0), 0.05), cancel=stop.cancel))
    replicas, routed = best_found(out, groups, r, x)
    bound = out.objective if out.status == "optimal" else out.bound  # a valid lower bound (None: no cut)
    return bound, replicas, routed


def bound_plan_values(form, bounds: dict[str, ServiceBound]) -> list[float] | None:
    """A MIP hint from the services' own best plans: each group's replicas on its cheapest
    offer (by price per GPU), instances counted per offer. Usually within a few instances
    of the optimum, which gives the solver a strong incumbent from the start. None when a
    service has no such plan."""
    p = form.problem
    values = [0.0] * len(form.model.variables)
    gpus: dict[str, int] = {}
    pool_of = form.pool_of
    by_key = {g.key: g for g in form.groups}
    for s in p.services:
        if s.role or (s.total_demand <= 0 and not s.min_replicas):
            continue  # disaggregated pools start empty: the plan serves their parent with replicas
        b = bounds.get(s.name)
        replicas = b.replicas if b is not None else None
        if not replicas and s.redundancy_domain:
            from solver.optimize.redundancy import start_replicas

            replicas = start_replicas(form, s)  # its own MIP had no time: a simple plan of its own
        if not replicas:
            return None
        for key, count in replicas.items():
            group = by_key.get(key)
            if group is None:  # a pool left out of this model (plan.py: it cannot pay)
                return None
            group = by_key[key]
            config = min(group.configs, key=lambda c: (p.offer(c.offer_id).price_usd_per_gpu_hour, c.offer_id))
            values[form.r[key]] += count
            pool = pool_of[key]
            if (pool.key, config.offer_id) in form.y:
                values[form.y[(pool.key, config.offer_id)]] += count
            gpus[config.offer_id] = gpus.get(config.offer_id, 0) + count * config.gpus_per_replica
        for (key, k), traffic in (b.routed.items() if b is not None else ()):
            if (key, k) in form.x:
                values[form.x[(key, k)]] = traffic
    # Disaggregated tiers: each carries what its smaller pool serves (rates matched).
    capacity: dict[str, float] = {}
    for g in form.groups:
        if "#" in g.service and values[form.r[g.key]] > 0:
            capacity[g.service] = capacity.get(g.service, 0.0) + g.rep.classes[0].throughput * values[form.r[g.key]]
    if form.split:
        from solver.compile.disagg import pool_name

        for (parent, link), i in form.split.items():
            values[i] = min(capacity.get(pool_name(parent, "prefill", link), 0.0),
                            capacity.get(pool_name(parent, "decode", link), 0.0), form.model.variables[i].ub)
    for offer_id, used in gpus.items():
        if offer_id not in form.n:
            return None
        values[form.n[offer_id]] = math.ceil(used / p.offer(offer_id).gpus_per_instance - 1e-9)
    for i, v in enumerate(form.model.variables):
        if values[i] > v.ub + 1e-9:
            return None
    from solver.optimize.redundancy import complete_hint

    return complete_hint(form, values)
