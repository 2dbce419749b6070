"""A re-plan's replicas where they run: among plans of the optimal fleet, the fewest stops.

The cost of a re-plan depends on its fleet only (instances x prices, plus the instances
added and removed), so at the optimal fleet many placements of the replicas cost the same;
the MIP returns whichever it met. Each running replica it moves is a model server stopped
and started elsewhere: on the 100-service re-plan benchmark 41 replicas changed where one
instance was added. This step keeps the fleet (and so the cost) fixed and, over the same
rows, minimises the running replicas stopped: per group g of identical replicas (one
service, one replica shape, the offers it may run on) with C_g running now,

    minimise  sum_g s_g     s_g >= C_g - r_g,  0 <= s_g <= C_g,  n_o fixed at the plan's

Like the tie-break it has a fixed effort (a node limit, never the clock: the same input gives
the same plan) and keeps the plan it was given when it finds nothing better. The decoding
then puts each group's replicas on the offers where they run first
(`Formulation.solution_from(..., running=...)`).
"""

from __future__ import annotations

import time

from solver.compile.problem import Problem
from solver.optimize.backends import SolveOptions
from solver.optimize.formulation import Formulation
from solver.optimize.keep_start import running_config

# Nodes of the placement MIP. On the 100-service re-plan benchmark's three seeds 1,000 nodes
# gave 41 -> 28, 57 -> 48 and 43 -> 21 moves in 3.5 / 2.3 / 0.8 s (200: 41 -> 33 in 1.7 s).
STABLE_NODES = 1000
COST_TOLERANCE_USD = 1e-6


def running_replicas(problem: Problem, form: Formulation, spot: bool = False) -> dict[tuple[str, str], int]:
    """(group key, offer id) -> running replicas of the market that the model's groups hold."""
    h = problem.horizon
    out: dict[tuple[str, str], int] = {}
    if h is None or not h.current_fleet:
        return out
    by_service: dict[str, list] = {}
    for c in form.configs:
        by_service.setdefault(c.service, []).append(c)
    for f in h.current_fleet:
        if f.spot != spot:
            continue
        for rep in f.replicas:
            c = running_config(by_service.get(rep.service, ()), f.offer_id, rep.gpus_per_replica, rep.precision)
            group = form.group_of.get(c.key) if c is not None else None
            if group is not None and rep.count > 0:
                key = (group.key, f.offer_id)
                out[key] = out.get(key, 0) + rep.count
    return out


def fewest_stops(form: Formulation, backend, values: list[float], running: dict[tuple[str, str], int],
                 deadline: float, cancel) -> tuple[list[float], str | None]:
    """(the values with the fewest running replicas stopped at the plan's fleet, a note), or
    the values given when none stop or nothing better is found within the effort."""
    per_group: dict[str, int] = {}
    for (group_key, _), n in running.items():
        per_group[group_key] = per_group.get(group_key, 0) + n
    per_group = {g: n for g, n in per_group.items() if g in form.r}
    stops = sum(max(0, n - round(values[form.r[g]])) for g, n in per_group.items())
    if stops == 0:
        return values, None
    lm = form.model
    saved_objective, saved_rows, saved_variables = lm.objective, len(lm.rows), len(lm.variables)
    saved_bounds = {i: (lm.variables[i].lb, lm.variables[i].ub) for i in form.n.values()}
    try:
        for i in form.n.values():
            lm.variables[i].lb = lm.variables[i].ub = float(round(values[i]))
        cost = sum(c * values[i] for i, c in form.cost_terms)
        lm.row("stable_cost", form.cost_terms, ub=cost + COST_TOLERANCE_USD)
        objective: dict[int, float] = {}
        hint = list(values[:saved_variables])
        for g, n in sorted(per_group.items()):
            s = lm.var(f"stopped[{g}]", 0.0, float(n), integer=True)
            lm.row(f"stopped[{g}]", [(s, 1.0), (form.r[g], 1.0)], lb=float(n))
            objective[s] = 1.0
            hint.append(float(max(0, n - round(values[form.r[g]]))))
        lm.objective = objective
        out = backend.solve(lm, SolveOptions(time_limit_s=max(deadline - time.monotonic(), 0.05), hint=hint,
                                             absolute_gap=0.5, node_limit=STABLE_NODES, cancel=cancel))
    finally:
        lm.objective = saved_objective
        del lm.rows[saved_rows:]
        del lm.variables[saved_variables:]
        for i, (lb, ub) in saved_bounds.items():
            lm.variables[i].lb, lm.variables[i].ub = lb, ub
    if out.values is None or out.objective is None or out.objective > stops - 0.5:
        return values, f"{stops} running replica(s) moved (no placement at this fleet moving fewer found)"
    kept = round(out.objective)
    proof = "" if out.status == "optimal" else " (best within the effort limit)"
    return out.values[:saved_variables], f"running replicas moved {stops} -> {kept}{proof}"
