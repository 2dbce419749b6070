"""Warm starts for gap-limited pooled solves (solver/optimize/warm_start.py): every hint is
a plan of the full model, no dearer than the start it improves and never below the proven
bound; plans solved with them stay within the requested gap of the exact optimum."""

from __future__ import annotations

import math
import sys
import threading
from pathlib import Path

import pytest

from solver.compile.candidates import build_problem
from solver.compile.resolve import resolve_catalog
from solver.interrupt import Stop
from solver.optimize import formulation
from solver.optimize.backends import get_backend
from solver.optimize.service_bounds import bound_plan_values, group_cost
from solver.optimize.warm_start import NEIGHBOURHOOD, _neighbourhood_solve, closed_groups, warm_starts
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from solve_scaling import generate  # noqa: E402


def _violations(model, values, tol=1e-6):
    bad = []
    for i, v in enumerate(model.variables):
        x = values[i]
        if x < v.lb - tol or x > v.ub + tol or (v.integer and abs(x - round(x)) > tol):
            bad.append(v.name)
    for r in model.rows:
        lhs = sum(c * values[i] for i, c in r.terms)
        if lhs < r.lb - tol * max(1.0, abs(r.lb)) or lhs > r.ub + tol * max(1.0, abs(r.ub)):
            bad.append(r.name)
    return bad


def _cost(model, values):
    return sum(c * values[i] for i, c in model.objective.items())


def _pooled_form(n, seed, monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    workload = parse_workload(generate(n, seed))
    return formulation.build(build_problem(workload, resolve_catalog(workload)))


@pytest.mark.parametrize("seed", [0, 5])
def test_every_warm_start_is_a_plan_no_dearer_than_its_start(seed, monkeypatch):
    form = _pooled_form(40, seed, monkeypatch)
    start = bound_plan_values(form, form.service_bounds)
    assert start is not None and not _violations(form.model, start)
    hints = warm_starts(form, get_backend("scip"), start, 1e-4, Stop(None, None, None))
    assert hints  # these workloads' own best plans leave instances partly filled: packing them is cheaper
    for values in hints:
        assert not _violations(form.model, values)
        assert form.lower_bound - 1e-6 <= _cost(form.model, values) <= _cost(form.model, start) + 1e-9
    costs = [_cost(form.model, v) for v in hints]
    assert costs == sorted(costs)  # best first


def test_a_cancelled_call_stops_after_the_packing_solve_without_error(monkeypatch):
    form = _pooled_form(20, 1, monkeypatch)
    start = bound_plan_values(form, form.service_bounds)
    cancel = threading.Event()
    cancel.set()
    hints = warm_starts(form, get_backend("scip"), start, 1e-4, Stop(cancel, None, None))
    assert len(hints) <= 1  # the neighbourhood MIP never starts once the call is cancelled
    for values in hints:
        assert not _violations(form.model, values)


@pytest.mark.parametrize("seed", [3])
def test_gap_limited_plans_stay_within_the_gap_of_the_exact_optimum(seed, monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    doc = generate(40, seed)
    exact = plan(parse_workload(doc), PlanOptions())
    doc["solver"]["relative_gap"] = 1e-4
    loose = plan(parse_workload(doc), PlanOptions())
    assert exact.status == loose.status == "optimal" and loose.evaluation["ok"]
    assert "warm_start_s" in loose.solver.timings
    assert loose.solver.gap is not None and loose.solver.gap <= 1e-4
    assert exact.total_price_usd_per_hour - 1e-6 <= loose.total_price_usd_per_hour \
        <= exact.total_price_usd_per_hour * (1 + 1e-4) + 1e-9


def test_the_widened_neighbourhood_only_opens_groups_and_keeps_each_services_cheapest_alone(monkeypatch):
    form = _pooled_form(40, 2, monkeypatch)
    start = bound_plan_values(form, form.service_bounds)
    narrow = closed_groups(form, start, widened=False)
    wide = closed_groups(form, start, widened=True)
    assert set(wide) <= set(narrow) and all(b == (0.0, 0.0) for b in wide.values())
    assert not any(start[i] > 0 for i in narrow)  # the start plan's groups stay open
    services = {s.name: s for s in form.problem.services}
    for name, groups in form.by_service.items():
        if any(len(g.rep.classes) > 1 for g in groups):
            assert not any(form.r[g.key] in narrow for g in groups)  # several classes: never restricted
            continue
        s = services[name]
        alone = {g.key: group_cost(g, form.problem) * max(math.ceil(s.class_demand[0] / g.rep.classes[0].throughput - 1e-9),
                                                          s.min_replicas, 1)
                 for g in groups if g.rep.classes[0].throughput > 0}
        assert form.r[min(alone, key=alone.get)] not in wide  # each service's cheapest way to serve it alone
        for g in groups:
            if form.r[g.key] in narrow and form.r[g.key] not in wide:  # reopened: within 30 % of that
                assert alone[g.key] <= min(alone.values()) * (1 + NEIGHBOURHOOD) + 1e-9
    # On this workload some groups are opened only by the cost of serving a service alone.
    assert len(wide) < len(narrow)


def test_the_widened_neighbourhood_solve_returns_a_plan_no_dearer_than_its_start(monkeypatch):
    form = _pooled_form(40, 2, monkeypatch)
    start = bound_plan_values(form, form.service_bounds)
    found = _neighbourhood_solve(form, get_backend("scip"), start, 0.0, None, Stop(None, None, None), widened=True)
    assert found is not None
    values, cost = found
    assert not _violations(form.model, values)
    assert cost == pytest.approx(_cost(form.model, values))
    assert form.lower_bound - 1e-6 <= cost <= _cost(form.model, start) + 1e-9
