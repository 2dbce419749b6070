"""Tie-break among fleets of the optimal cost: fewest GPUs, fewest instances, offers in id
order, then idle GPUs carry replicas.

Tie-breaking never changes the cost, so it gets a small effort that never depends on the
clock (a scheduler calling in a loop must get the same plan for the same input):
1. the LP relaxation of "fewest GPUs at the optimal cost" often proves the plan already
   has the fewest (its bound leaves no room for one GPU less);
2. otherwise, on small models only, a second MIP from the plan as a hint under a node
   limit; on larger ones the cost MIP's fleet stands and the plan says so. Measured on
   the 100-service benchmark and 20-service review scenarios (docs/benchmarks.md of 2026-12-03, in git): the
   second MIP never proved fewer GPUs within 200 nodes and never changed the fleet, while
   costing as much as the cost MIP itself;
3. on small models only, among those fleets the fewest instances, then instances on offers
   earlier in id order (`_fewest_instances`): one MIP from the plan as a hint under the node
   limit. Without it two equally cheap fleets (2 x a 1-GPU offer or 1 x its 2-GPU sibling
   at twice the price) came out of whichever the solver met first, which depends on the
   hint, and so on what earlier solves in the same process had cached;
4. idle GPUs of the chosen fleet carry extra replicas (solver/optimize/headroom.py).
Tried and dropped: reduced-cost fixing from the cost LP before the second MIP. The root
LP is 10-12 % below the optimum on the 100-service benchmark, so it fixed no variable.

Step 1 without the LP: when the plan itself, with its spare capacity taken off fractionally
(replicas beyond the demand, instances beyond the GPUs their replicas take), is a point of
that LP with at least one GPU less (`_fewer_gpus_point`, every row and bound checked), the
LP's optimum is at most that point's GPUs, so it cannot prove the plan has the fewest: the
LP is not solved, and what follows is what follows its failing to prove (review scenarios:
~6 ms a plan, in nearly every one of them).
"""

from __future__ import annotations

import math
import time

from solver.optimize.backends import SolveOptions
from solver.optimize.formulation import Formulation, gpu_objective
from solver.optimize.linear import SolveOutcome

TIE_BREAK_NODES = 200
TIE_BREAK_MAX_INTEGER_VARIABLES = 200  # the second MIP only below this model size
COST_TOLERANCE_USD_PER_HOUR = 1e-6  # the cost MIP's absolute gap: "the same cost"


def tie_break(form: Formulation, backend, first: SolveOutcome, deadline: float, cancel) -> tuple[SolveOutcome, list[str]]:
    """Among fleets of the optimal cost, the one with the fewest GPUs (as far as the effort
    allows); returns it and notes on what was established."""
    lm = form.model
    saved_objective, saved_rows = lm.objective, len(lm.rows)
    notes = []
    values = first.values
    cutoff = first.objective + COST_TOLERANCE_USD_PER_HOUR

    def remaining(cap: float) -> float:
        return max(min(deadline - time.monotonic(), cap), 0.05)

    try:
        lm.row("tie_break_cost", form.cost_terms, ub=cutoff)
        lm.objective = gpu_objective(form)
        gpus = sum(c * values[i] for i, c in form.gpu_terms)
        # The LP relaxation bounds the GPUs of any cheapest fleet in milliseconds; when it
        # leaves no room below the plan's GPU count, the plan already has the fewest. A point
        # of that LP with a GPU less says beforehand that it would not.
        lp = None
        if not _fewer_gpus_point(form, values, gpus):
            lp = backend.solve(lm, SolveOptions(time_limit_s=remaining(5.0), relax_integrality=True, cancel=cancel))
        if lp is not None and lp.status == "optimal" and lp.objective is not None and lp.objective > gpus - 1 + 1e-6:
            notes.append("fewest GPUs")
        elif lm.size["integer_variables"] > TIE_BREAK_MAX_INTEGER_VARIABLES:
            notes.append("fewest GPUs not searched (large model)")
        elif not (cancel is not None and cancel.is_set()):
            second = backend.solve(lm, SolveOptions(time_limit_s=remaining(3600.0), hint=values,
                                                    absolute_gap=0.5, node_limit=TIE_BREAK_NODES, cancel=cancel))
            if second.values is not None:
                values = second.values
                notes.append("fewest GPUs" + ("" if second.status == "optimal" else " (best within the effort limit)"))
        if lm.size["integer_variables"] <= TIE_BREAK_MAX_INTEGER_VARIABLES and not (cancel is not None and cancel.is_set()):
            values = _fewest_instances(form, backend, values, remaining, cancel, notes)
    finally:
        lm.objective = saved_objective
        del lm.rows[saved_rows:]
    merged = SolveOutcome(first.status, values, sum(c * values[i] for i, c in form.cost_terms),
                          first.bound, first.solve_time_s, first.backend, first.detail)
    return merged, notes


def _fewest_instances(form: Formulation, backend, values: list[float], remaining, cancel, notes: list[str]) -> list[float]:
    """Among fleets of the plan's cost and GPUs, the fewest instances, then the instances on
    offers earliest in id order: one integer objective sum((B + rank_o) n_o) with B above
    any sum(rank_o n_o) of a fleet with no more instances than the plan, so the instance
    count comes first and every tie after it has one answer. The model's rows are the
    caller's to restore."""
    lm = form.model
    gpus = sum(c * values[i] for i, c in form.gpu_terms)
    instances = sum(values[i] for i in form.n.values())
    ranked = sorted(form.n)
    base = (len(ranked) - 1) * round(instances) + 1
    lm.row("tie_break_gpus", form.gpu_terms, ub=gpus + 0.5)
    lm.objective = {form.n[oid]: float(base + rank) for rank, oid in enumerate(ranked)}
    third = backend.solve(lm, SolveOptions(time_limit_s=remaining(3600.0), hint=values,
                                           absolute_gap=0.5, node_limit=TIE_BREAK_NODES, cancel=cancel))
    if third.values is None:
        return values
    notes.append("fewest instances" + ("" if third.status == "optimal" else " (best within the effort limit)"))
    return third.values


# A point's GPUs must be this far below the plan's minus one to stand for the LP: the LP's
# own answer (within its tolerances, ~1e-9) then cannot pass the test above.
POINT_MARGIN_GPUS = 1e-3
_ROW_TOL = 1e-9


def _fewer_gpus_point(form: Formulation, values: list[float], gpus: float) -> bool:
    """Whether a point of the tie-break LP (the model as it is now, integrality relaxed,
    the cost row included) has at most gpus - 1 - POINT_MARGIN_GPUS GPUs: then the LP's
    optimum does too. The point is the plan less its spare capacity: each single-class (or
    mixed) service's replicas cut fractionally down to its demand and min_replicas, the
    hosting of what was cut taken off with it, and every instance count set to the GPUs its
    replicas take over the instance's GPUs. Every row and bound of the model is checked on
    it (so whatever the model holds, the answer is only ever a true point)."""
    lm, p = form.model, form.problem
    v = list(values)
    pool_of, r = form.pool_of, form.r
    for s in p.services:
        if not (len(s.class_demand) == 1 or s.mixed_routing):
            continue  # routed classes: their capacity rows tie the replicas to the routing; left as they are
        groups = [g for g in form.by_service.get(s.name, ()) if v[r[g.key]] > 0]
        if not groups:
            continue
        # A group's throughput: its first configuration's first class (g.rep.classes[0]).
        slack = (sum(g.configs[0].throughputs[0] * v[r[g.key]] for g in groups) - s.total_demand
                 if s.total_demand > 0 else math.inf)
        spare = sum(v[r[g.key]] for g in groups) - s.min_replicas if s.min_replicas else math.inf
        # The most GPUs per unit of throughput first: the largest cut in GPUs.
        for g in sorted(groups, key=_most_gpus_per_throughput_first):
            if slack <= 0 or spare <= 0:
                break
            i = r[g.key]
            t = g.configs[0].throughputs[0]
            cut = min(v[i], spare, slack / t if t > 0 else math.inf)
            if cut <= 0:
                continue
            v[i] -= cut
            spare -= cut
            if t > 0:
                slack -= cut * t
            pool = pool_of[g.key]
            if len(pool.offer_ids) > 1:  # its pool's hosted replicas go down as much, on any offers
                left = cut
                for oid in pool.offer_ids:
                    j = form.y[(pool.key, oid)]
                    take = min(v[j], left)
                    v[j] -= take
                    left -= take
                    if left <= 0:
                        break
    hosted: dict[str, float] = {}
    for pool in form.pools:
        g = pool.gpus_per_replica
        if len(pool.offer_ids) == 1:
            oid = pool.offer_ids[0]
            hosted[oid] = hosted.get(oid, 0.0) + g * sum(v[form.r[grp.key]] for grp in pool.groups)
        else:
            for oid in pool.offer_ids:
                hosted[oid] = hosted.get(oid, 0.0) + g * v[form.y[(pool.key, oid)]]
    for o in p.offers:
        i = form.n.get(o.id)
        if i is not None:
            v[i] = min(v[i], hosted.get(o.id, 0.0) / o.gpus_per_instance)
    point = sum(c * v[i] for i, c in form.gpu_terms)
    if not point <= gpus - 1 - POINT_MARGIN_GPUS:
        return False
    # Tolerances _ROW_TOL x max(1, |bound|), written out (the same numbers as max() gives).
    tol = _ROW_TOL
    for x, var in zip(v, lm.variables):
        ub = var.ub
        size = abs(ub)
        if not (var.lb - tol <= x <= ub + tol * (size if size > 1.0 else 1.0)):
            return False
    for row in lm.rows:
        activity = sum([c * v[i] for i, c in row.terms])
        lb, ub = row.lb, row.ub
        size_lb, size_ub = abs(lb), abs(ub)
        if activity < lb - tol * (size_lb if size_lb > 1.0 else 1.0) or \
                activity > ub + tol * (size_ub if size_ub > 1.0 else 1.0):
            return False
    return True


def _most_gpus_per_throughput_first(g) -> tuple[float, str]:
    """Groups by GPUs per unit of throughput (of their first configuration's first class),
    most first, then by key."""
    c = g.configs[0]
    t = c.throughputs[0]
    return (-(c.gpus_per_replica / t if t > 0 else 0.0), g.key)
