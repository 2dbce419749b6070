"""Whether a plan in hand (the greedy plan, a hint, a period's plan) keeps the constraints the
greedy construction does not look at - budget, quotas, max_replicas, power caps, same
region, failure domains - before it serves as a MIP's start and bound. Cheap: no model."""

from __future__ import annotations

from solver.compile.power import power_violations
from solver.compile.problem import Problem
from solver.optimize import redundancy
from solver.optimize.formulation import region_violations
from solver.optimize.greedy import solution_cost
from solver.optimize.solution import Solution


def evaluate_quick(problem: Problem, sol: Solution) -> bool:
    """Budget, quotas and max_replicas of the greedy plan (it already covers demand and packs alone)."""
    cost = solution_cost(problem, sol)
    replicas: dict[str, int] = {}
    for a in sol.assignments:
        replicas[a.service] = replicas.get(a.service, 0) + a.replicas
    for s in problem.services:
        if s.max_replicas is not None and replicas.get(s.name, 0) > s.max_replicas:
            return False
    if problem.budget_usd_per_hour is not None and cost > problem.budget_usd_per_hour + 1e-9:
        return False
    for offer_id, n in sol.fleet:
        if offer_id in problem.offer_limits and n > problem.offer_limits[offer_id]:
            return False
    for gpu, quota in problem.gpu_quotas.items():
        used = sum(problem.offer(o).gpus_per_instance * n for o, n in sol.fleet if problem.offer(o).gpu == gpu)
        if used > quota:
            return False
    if power_violations(problem, dict(sol.fleet)):
        return False
    if region_violations(problem, sol):
        return False
    return not (redundancy.active(problem) and redundancy.violations(problem, sol))
