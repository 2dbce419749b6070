"""Per-service lower bounds (the pooled model's `lb[s]` cuts): exact and valid."""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

import pytest

from solver.optimize import formulation
from solver.optimize.service_bounds import single_class_bound
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from solve_scaling import generate  # noqa: E402


def brute(demand, items, lo, hi):
    best = None
    for counts in itertools.product(*(range(u + 1) for _, _, u in items)):
        n = sum(counts)
        if n < lo or (hi is not None and n > hi):
            continue
        if sum(r * t for r, (_, t, _) in zip(counts, items)) < demand - 1e-9:
            continue
        cost = sum(r * c for r, (c, _, _) in zip(counts, items))
        best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(300))
def test_branch_and_bound_equals_exhaustive_search(seed):
    rng = random.Random(seed)
    items = [(round(rng.uniform(0.5, 10), 3), round(rng.uniform(0.2, 9), 3), rng.randint(0, 5))
             for _ in range(rng.randint(1, 4))]
    demand = round(rng.uniform(0, 25), 2)
    lo = rng.choice([0, 0, 1, 2, 4])
    hi = rng.choice([None, None, 3, 6, 12])
    expected = brute(demand, items, lo, hi)
    got = single_class_bound(demand, items, lo, hi)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-9)


def test_node_limit_still_gives_a_valid_lower_bound():
    rng = random.Random(5)
    items = [(rng.uniform(1, 3), rng.uniform(1, 3), 9) for _ in range(6)]
    exact = single_class_bound(40.0, items, 0, None)
    cut_short = single_class_bound(40.0, items, 0, None, node_limit=5)
    assert cut_short is not None and cut_short <= exact + 1e-9


@pytest.mark.parametrize("seed", [0, 3])
def test_the_services_bound_never_exceeds_the_optimum(seed, monkeypatch):
    from solver.compile.candidates import build_problem
    from solver.compile.resolve import resolve_catalog

    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    workload = parse_workload(generate(40, seed))
    exact = plan(workload, PlanOptions())
    form = formulation.build(build_problem(workload, resolve_catalog(workload)))
    assert exact.status == "optimal" and form.lower_bound is not None
    assert form.lower_bound <= exact.total_price_usd_per_hour + 1e-6
    # It is tight: within 1 % of the optimum on these workloads.
    assert form.lower_bound >= 0.99 * exact.total_price_usd_per_hour


def test_relative_gap_stops_within_it_of_the_optimum(monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    doc = generate(40, 1)
    exact = plan(parse_workload(doc), PlanOptions())
    doc["solver"]["relative_gap"] = 0.001
    loose = plan(parse_workload(doc), PlanOptions())
    assert loose.status == "optimal" and loose.evaluation["ok"]
    assert loose.solver.gap is not None and loose.solver.gap <= 0.001
    assert loose.total_price_usd_per_hour <= exact.total_price_usd_per_hour * 1.001 + 1e-9
