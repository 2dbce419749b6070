"""A re-plan's restricted start (solver/optimize/restricted_start.py, as replan.py uses it): the MIP over
the replica groups the LP relaxation or a start uses. Its values are a plan of the whole
model (every row holds, integers are integers), no dearer than the starts it was given, and
the re-plan's optimum is the same with it and without it (it is only a start). Optimality
itself is checked against exhaustive enumeration in tests/test_replan_enumeration.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import solver.optimize.replan as replan
from solver.plan import plan
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from horizon_scaling import replan_workload  # noqa: E402  (bench/horizon_scaling.py --case replan's workloads)


def _check_plan_of_the_model(lm, values, tol=1e-6):
    assert len(values) == len(lm.variables)
    for v, x in zip(lm.variables, values):
        assert v.lb - tol <= x <= v.ub + tol, v.name
        if v.integer:
            assert abs(x - round(x)) <= tol, v.name
    for r in lm.rows:
        activity = sum(c * values[i] for i, c in r.terms)
        assert r.lb - tol * max(1.0, abs(r.lb)) <= activity <= r.ub + tol * max(1.0, abs(r.ub)), r.name


@pytest.mark.parametrize("seed", [0, 1])
def test_the_restricted_start_is_a_plan_and_changes_no_optimum(seed, monkeypatch):
    w = replan_workload(30, seed, 120)
    seen = []
    inner = replan.restricted_start

    def watched(form, backend, hints, deadline, cancel):
        bounds = [(v.lb, v.ub) for v in form.model.variables]
        out = inner(form, backend, hints, deadline, cancel)
        restored = [(v.lb, v.ub) for v in form.model.variables] == bounds
        seen.append((form.model, list(hints), out, restored))
        return out

    monkeypatch.setattr(replan, "restricted_start", watched)
    with_start = plan(parse_workload(w)).to_dict()
    (lm, hints, values, restored), = seen
    assert restored  # every variable's bounds as they were before it
    assert values is not None
    _check_plan_of_the_model(lm, values)

    def cost(v):
        return sum(c * v[i] for i, c in lm.objective.items())

    assert hints and cost(values) <= min(cost(h) for h in hints) + 1e-6
    monkeypatch.setattr(replan, "restricted_start", lambda *a: None)
    without = plan(parse_workload(w)).to_dict()
    assert with_start["status"] == without["status"] == "optimal"
    assert with_start["horizon_cost_usd"] == pytest.approx(without["horizon_cost_usd"], abs=1e-6)
