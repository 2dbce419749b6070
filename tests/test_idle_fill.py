"""Idle GPUs of the chosen fleet carry extra replicas (solver/optimize/headroom.py).

A plan without an idle GPU (most plans) is returned as it is before any index over the
model's configurations is made; a plan with idle GPUs is still filled.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from solver.compile.candidates import build_problem
from solver.compile.resolve import resolve_catalog
from solver.optimize import formulation
from solver.optimize.greedy import greedy_solution
from solver.optimize.headroom import fill_idle_gpus
from solver.optimize.solution import Solution
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from solve_scaling import generate  # noqa: E402


def _idle(problem, sol: Solution) -> dict[str, int]:
    free = {o: n * problem.offer(o).gpus_per_instance for o, n in sol.fleet}
    for a in sol.assignments:
        free[a.offer_id] -= a.replicas * a.gpus_per_replica
    return {o: g for o, g in free.items() if g > 0}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_plans_without_idle_gpus_come_back_as_they_are_and_idle_ones_are_filled(seed):
    workload = parse_workload(generate(6, seed))
    problem = build_problem(workload, resolve_catalog(workload), cache=None)
    form = formulation.build(problem)
    sol = greedy_solution(problem)
    assert sol is not None and not _idle(problem, sol)
    same, added = fill_idle_gpus(form, sol)
    assert same is sol and added == 0
    # One more instance of each offer the plan uses, in turn: its GPUs are idle, and the
    # fill gives them replicas where a configuration fits (as it always did).
    filled_any = False
    for offer_id, _ in sol.fleet:
        fleet = tuple((o, n + 1 if o == offer_id else n) for o, n in sol.fleet)
        roomy = Solution(fleet, sol.assignments)
        assert _idle(problem, roomy)
        filled, added = fill_idle_gpus(form, roomy)
        assert filled.fleet == fleet
        replicas = sum(a.replicas for a in filled.assignments)
        assert replicas == sum(a.replicas for a in sol.assignments) + added
        filled_any = filled_any or added > 0
    assert filled_any
