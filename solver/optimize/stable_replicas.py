"""A re-plan's replicas where they run: among plans of the optimal fleet, the fewest stops.

The cost of a re-plan depends on its fleet only (instances x prices, plus the instances
added and removed), so at the optimal fleet many placements of the replicas cost the same;
the MIP returns whichever it met. Each running replica it moves is a model server stopped
and started elsewhere: on the 100-service re-plan benchmark 41 replicas moved where one
instance was added. This step keeps the fleet (and so the cost) fixed and, over the same
rows, minimises the running replicas stopped (groups g: identical replicas of one service
and shape over the offers they may run on):

    maximise  sum_(g,o) z_go   0 <= z_go <= C_go,  sum_o z_go <= r_g,  sum_(g in P) z_go <= y_Po,
                               n_o fixed at the plan's

z_go: the replicas of group g that stay on offer o, where C_go run now; a pool P of several
offers holds its groups' replicas in y_Po slots per offer (one offer: r_g itself). The
decoding then puts each group first where it runs; the stops reported are the decoded plan's.

Like the tie-break it has a fixed effort (a node limit, never the clock: the same input gives
the same plan) and keeps the plan it was given when it finds nothing better
(`Formulation.solution_from(..., running=...)` is the decoding).
"""

from __future__ import annotations

import time

from solver.compile.problem import Problem
from solver.optimize.backends import SolveOptions
from solver.optimize.formulation import Formulation
from solver.optimize.keep_start import running_config

# Nodes of the placement MIP. On the 100-service re-plan benchmark's three seeds (0.5 % gap)
# 1,000 nodes gave 60 -> 48, 43 -> 21 and 41 -> 29 moves in ~3.4 s each.
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
    the values given when none stop or nothing better is found within the effort. Stops are
    counted on the decoded plan (each group first on the offers where it runs)."""
    now = _placed(form, values, running)
    stops = sum(max(0, n - now.get(key, 0)) for key, n in running.items())
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
        by_group: dict[str, list[int]] = {}
        by_slot: dict[tuple, list[int]] = {}
        hint = list(values[:saved_variables])
        for (group_key, offer_id), n in sorted(running.items()):
            if group_key not in form.r:
                continue
            # z: the replicas of the group that stay on the offer where they run
            z = lm.var(f"stays[{group_key}|{offer_id}]", 0.0, float(n))
            objective[z] = -1.0
            hint.append(float(min(n, now.get((group_key, offer_id), 0))))
            by_group.setdefault(group_key, []).append(z)
            pool = form.pool_of[group_key]
            if (pool.key, offer_id) in form.y:
                by_slot.setdefault((pool.key, offer_id), []).append(z)
        for group_key, zs in by_group.items():  # no more stay than the group keeps
            lm.row(f"stays[{group_key}]", [(z, 1.0) for z in zs] + [(form.r[group_key], -1.0)], ub=0.0)
        for key, zs in by_slot.items():  # nor more than the pool's slots on the offer hold
            lm.row(f"stays[{key[0]}|{key[1]}]", [(z, 1.0) for z in zs] + [(form.y[key], -1.0)], ub=0.0)
        lm.objective = objective
        out = backend.solve(lm, SolveOptions(time_limit_s=max(deadline - time.monotonic(), 0.05), hint=hint,
                                             absolute_gap=0.5, node_limit=STABLE_NODES, cancel=cancel))
    finally:
        lm.objective = saved_objective
        del lm.rows[saved_rows:]
        del lm.variables[saved_variables:]
        for i, (lb, ub) in saved_bounds.items():
            lm.variables[i].lb, lm.variables[i].ub = lb, ub
    found = out.values[:saved_variables] if out.values is not None else None
    after = moved(form, found, running) if found is not None else stops
    if after >= stops:
        return values, f"{stops} running replica(s) moved (no placement at this fleet moving fewer found)"
    proof = "" if out.status == "optimal" else " (best within the effort limit)"
    return found, f"running replicas moved {stops} -> {after}{proof}"


def moved(form: Formulation, values: list[float], running: dict[tuple[str, str], int]) -> int:
    """Running replicas the decoded plan no longer has where they run."""
    placed = _placed(form, values, running)
    return sum(max(0, n - placed.get(key, 0)) for key, n in running.items())


def _placed(form: Formulation, values: list[float], running: dict[tuple[str, str], int]) -> dict[tuple[str, str], int]:
    """(group key, offer id) -> replicas of the decoded plan (each group first where it runs)."""
    placed: dict[tuple[str, str], int] = {}
    for a in form.solution_from(values, running=running).assignments:
        group = form.group_of.get(a.config_key)
        if group is not None:
            placed[(group.key, a.offer_id)] = placed.get((group.key, a.offer_id), 0) + a.replicas
    return placed
