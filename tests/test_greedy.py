"""The greedy baseline (solver/optimize/greedy.py): each service alone on its cheapest
configuration, topped up to min_replicas.

* A service's configurations may come in any order or interleaved with other services'
  (they are gathered per service in list order): the same plan as the list grouped by service.
* min_replicas above what the demand needs is still met (the count over every
  configuration is skipped only when the replicas placed already reach it).
"""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from solver.compile.candidates import build_problem
from solver.compile.resolve import resolve_catalog
from solver.optimize.greedy import greedy_solution
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from solve_scaling import generate  # noqa: E402


def _problem(n: int, seed: int):
    workload = parse_workload(generate(n, seed))
    return build_problem(workload, resolve_catalog(workload), cache=None)


@pytest.mark.parametrize("seed", [0, 1])
def test_interleaved_configurations_give_the_plan_of_the_grouped_list(seed):
    problem = _problem(8, seed)
    configs = list(problem.configs)
    random.Random(seed).shuffle(configs)
    grouped = sorted(configs, key=lambda c: c.service)  # stable: each service's own order kept
    assert greedy_solution(problem, configs) == greedy_solution(problem, grouped)


@pytest.mark.parametrize("seed", [2, 3])
def test_min_replicas_above_the_demand_are_met(seed):
    problem = _problem(6, seed)
    base = greedy_solution(problem)
    assert base is not None

    def replicas(sol, name):
        return sum(a.replicas for a in sol.assignments if a.service == name)

    first = problem.services[0]
    need = replicas(base, first.name)
    for extra in (0, 1, 3):
        services = (replace(first, min_replicas=need + extra),) + tuple(problem.services[1:])
        sol = greedy_solution(replace(problem, services=services))
        assert replicas(sol, first.name) == need + extra
        for s in problem.services[1:]:
            assert replicas(sol, s.name) == replicas(base, s.name)
    # Nothing to serve and min_replicas 2: two replicas of its cheapest configuration.
    idle = replace(first, class_demand=tuple(0.0 for _ in first.class_demand), min_replicas=2)
    sol = greedy_solution(replace(problem, services=(idle,) + tuple(problem.services[1:])))
    assert replicas(sol, first.name) == 2
