"""Better starting plans for large pooled models solved to a relative gap.

On large models the cost MIP's time goes into finding a plan within the requested gap of
the services' proven bound (solver/optimize/service_bounds.py), not into the bound: the
services' own best plans, each group's replicas on its cheapest offer, leave partly filled
instances (0.64 % above the bound on the 1,000-service benchmark, where the optimum is
0.007 % above it). Two small MIPs close most of that before the full one starts:

1. packing: the services' best replica counts fixed, only where they run (pool -> offer)
   and how many instances free: the cheapest way to host exactly those replicas;
2. neighbourhood: every group allowed whose cost per unit of throughput is within
   NEIGHBOURHOOD of the service's best, and the groups of the start plan, started from (1);
3. when (2) ends above the gap: the neighbourhood widened by each service's groups whose
   cost to serve the service alone (one replica's cost x the replicas its demand and
   min_replicas need) is within NEIGHBOURHOOD of the cheapest such group's, solved to its
   optimum or to the first plan within the gap, started from (2). Cost per throughput
   misjudges services that need fewer replicas than one of their best group serves
   (min_replicas, small demand): there, the cheapest replica is what counts. On the
   1,000-service benchmark of 2026-12-03 the optimum used such a group and (3) found the
   optimum itself; on today's catalog (3) stops short of the gap and the full MIP takes
   ~20 s from its plan, against ~80 s without these starts (docs/benchmarks.md,
   `solve_1000_gap`).

Both are restrictions of the full model, so any plan they find is a plan of it; they only
give the full MIP its incumbents (hints). Optimality claims are unchanged: the full MIP
still proves its status, against its own bound and the services' certificate.
"""

from __future__ import annotations

import math
from dataclasses import replace

from solver.interrupt import Stop
from solver.optimize.backends.base import SolveOptions
from solver.optimize.linear import LinearModel
from solver.optimize.service_bounds import group_cost

# A group is in the neighbourhood when its cost per request/s is at most this much above
# its service's best group's (1,000-service benchmark: 0.3 kept 3,027 of 17,450 groups).
NEIGHBOURHOOD = 0.3
# Shares of the time left that each small MIP may take (the full MIP keeps the rest).
PACKING_SHARE, NEIGHBOURHOOD_SHARE = 0.1, 0.25
_CAP_S = 600.0  # the share of at most this much when the call has no deadline


def _with_bounds(model: LinearModel, bounds: dict[int, tuple[float, float]]) -> LinearModel:
    """The model with some variables' bounds replaced (rows and objective shared, not copied)."""
    variables = list(model.variables)
    for i, (lb, ub) in bounds.items():
        variables[i] = replace(variables[i], lb=lb, ub=ub)
    return LinearModel(variables, model.rows, model.objective)


def _cost(model: LinearModel, values: list[float]) -> float:
    return sum(c * values[i] for i, c in model.objective.items())


def warm_starts(form, backend, start: list[float], relative_gap: float, stop: Stop) -> list[list[float]]:
    """Hints better than `start` (the services' own best plans), best first; [] when the
    small MIPs find nothing better in their time."""
    limit = form.lower_bound * (1 + relative_gap) if form.lower_bound is not None else None
    fixed = {i: (start[i], start[i]) for i in form.r.values()}
    packed = backend.solve(_with_bounds(form.model, fixed), SolveOptions(
        time_limit_s=max(stop.seconds_left(_CAP_S) * PACKING_SHARE, 0.05), hint=start, cancel=stop.cancel))
    best, best_cost = start, _cost(form.model, start)
    if packed.values is not None and _cost(form.model, packed.values) < best_cost - 1e-9:
        best, best_cost = packed.values, _cost(form.model, packed.values)
    found = [best] if best is not start else []
    if stop.cancelled or (limit is not None and best_cost <= limit):
        return found
    near = _neighbourhood_solve(form, backend, best, relative_gap, limit, stop, widened=False)
    if near is not None and near[1] < best_cost - 1e-9:
        best, best_cost = near
        found.insert(0, best)
    if stop.cancelled or (limit is not None and best_cost <= limit):
        return found
    wide = _neighbourhood_solve(form, backend, best, 0.0, limit, stop, widened=True)
    if wide is not None and wide[1] < best_cost - 1e-9:
        found.insert(0, wide[0])
    return found


def _neighbourhood_solve(form, backend, best: list[float], relative_gap: float, limit: float | None, stop: Stop,
                         widened: bool) -> tuple[list[float], float] | None:
    """The model restricted to the neighbourhood of step 2 (or 3 when `widened`), from `best`:
    its plan and cost, or None when it found none in its time."""
    closed = closed_groups(form, best, widened)
    if stop.cancelled:
        return None
    near = backend.solve(_with_bounds(form.model, closed), SolveOptions(
        time_limit_s=max(stop.seconds_left(_CAP_S) * NEIGHBOURHOOD_SHARE, 0.05), hint=best,
        relative_gap=relative_gap, objective_limit=limit, cancel=stop.cancel))
    return None if near.values is None else (near.values, _cost(form.model, near.values))


def closed_groups(form, best: list[float], widened: bool) -> dict[int, tuple[float, float]]:
    """The replica variables a neighbourhood fixes at 0: groups of single-class services
    outside NEIGHBOURHOOD of their service's best by cost per throughput (and, `widened`,
    by cost to serve the service alone) that `best` does not use."""
    closed = {}
    demand = {s.name: s for s in form.problem.services}
    for name, groups in form.by_service.items():
        if any(len(g.rep.classes) > 1 for g in groups):
            continue  # several request classes: no single throughput to compare by
        cost = {g.key: group_cost(g, form.problem) for g in groups}
        ratio = {g.key: cost[g.key] / g.rep.classes[0].throughput if g.rep.classes[0].throughput > 0 else math.inf
                 for g in groups}
        top = min(ratio.values()) * (1 + NEIGHBOURHOOD)
        alone = _alone_cost(groups, cost, demand[name]) if widened else {}
        alone_top = min(alone.values()) * (1 + NEIGHBOURHOOD) if alone else -math.inf
        for g in groups:
            i = form.r[g.key]
            if ratio[g.key] > top and best[i] == 0 and not alone.get(g.key, math.inf) <= alone_top:
                closed[i] = (0.0, 0.0)
    return closed


def _alone_cost(groups, cost: dict[str, float], service) -> dict[str, float]:
    """Per group: what serving the service with that group alone costs (its replicas at the
    cheapest price per GPU), counting the replicas the demand and min_replicas need."""
    demand = service.class_demand[0]
    out = {}
    for g in groups:
        throughput = g.rep.classes[0].throughput
        if throughput > 0:
            out[g.key] = cost[g.key] * max(math.ceil(demand / throughput - 1e-9), service.min_replicas, 1)
    return out
