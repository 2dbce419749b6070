"""Better starting plans for large pooled models solved to a relative gap.

On large models the cost MIP's time goes into finding a plan within the requested gap of
the services' proven bound (solver/optimize/service_bounds.py), not into the bound: the
services' own best plans, each group's replicas on its cheapest offer, leave partly filled
instances (0.64 % above the bound on the 1,000-service benchmark, where the optimum is
0.007 % above it). Two small MIPs close most of that before the full one starts:

1. packing: the services' best replica counts fixed, only where they run (pool -> offer)
   and how many instances free: the cheapest way to host exactly those replicas;
2. neighbourhood: every group allowed whose cost per unit of throughput is within
   NEIGHBOURHOOD of the service's best, and the groups of the start plan, started from (1).

Both are restrictions of the full model, so any plan they find is a plan of it; they only
give the full MIP its incumbents (hints). Optimality claims are unchanged: the full MIP
still proves its status, against its own bound and the services' certificate. Measured in
docs/benchmarks.md ("1,000 services to a 0.01 % gap").
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
    closed = {}
    for groups in form.by_service.values():
        if any(len(g.rep.classes) > 1 for g in groups):
            continue  # several request classes: no single throughput to compare by
        ratio = {g.key: group_cost(g, form.problem) / g.rep.classes[0].throughput
                 if g.rep.classes[0].throughput > 0 else math.inf for g in groups}
        top = min(ratio.values()) * (1 + NEIGHBOURHOOD)
        for g in groups:
            i = form.r[g.key]
            if ratio[g.key] > top and best[i] == 0:
                closed[i] = (0.0, 0.0)
    near = backend.solve(_with_bounds(form.model, closed), SolveOptions(
        time_limit_s=max(stop.seconds_left(_CAP_S) * NEIGHBOURHOOD_SHARE, 0.05), hint=best,
        relative_gap=relative_gap, objective_limit=limit, cancel=stop.cancel))
    if near.values is not None and _cost(form.model, near.values) < best_cost - 1e-9:
        found.insert(0, near.values)
    return found
