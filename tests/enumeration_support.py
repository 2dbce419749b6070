"""The frame the enumeration tests share (failure domains, spot cover): the planner's answer
on a workload dict against an enumerator's optimum. The enumerators themselves stay in
their test files: each shares no code with the planner or with the other."""

from __future__ import annotations

import json

import pytest

from solver.errors import InfeasibleError
from solver.plan import plan
from solver.workload.documents import parse_workload

DAY_AND_NIGHT = (("day", 14, 1.0), ("night", 10, 0.5))  # (period, hours, demand factor)


def pareto(points) -> list[tuple]:
    """The points no other point is at or below in every coordinate (a dominating point has
    a smaller sum, so it is kept before the points it dominates are seen)."""
    kept: list[tuple] = []
    for p in sorted(set(points), key=lambda p: (sum(p), p)):
        if not any(all(a <= b for a, b in zip(q, p)) for q in kept):
            kept.append(p)
    return kept


def assert_plan_is_the_optimum(w: dict, want: float | None):
    """The planner's plan of `w` is proven optimal at the enumerated price `want` (None: the
    enumeration found no plan, and the planner must say infeasible). The plan, or None."""
    try:
        result = plan(parse_workload(json.loads(json.dumps(w))))
    except InfeasibleError:
        assert want is None, f"planner says infeasible, enumeration found ${want}"
        return None
    assert result.evaluation["ok"], result.evaluation["violations"]
    assert want is not None, f"planner found ${result.total_price_usd_per_hour}, enumeration none"
    assert result.status == "optimal"
    assert result.total_price_usd_per_hour == pytest.approx(want, abs=1e-6), json.dumps(w)
    return result


def assert_horizon_is_the_sum_of_single_hours(w: dict, enumerate_optimum):
    """`w` over a day and a night (demand halved at night), when nothing links the periods:
    its horizon cost is each period's enumerated single-hour optimum times its hours. The
    plan, or None where a period has no plan (and the planner said so)."""
    w = json.loads(json.dumps(w))
    w["periods"] = [{"name": name, "hours": hours} for name, hours, _ in DAY_AND_NIGHT]
    for s in w["services"]:
        s["demand"]["profile"] = {"night": 0.5}
    try:
        result = plan(parse_workload(json.loads(json.dumps(w))))
    except InfeasibleError:
        result = None
    want = 0.0
    for _, hours, factor in DAY_AND_NIGHT:
        single = json.loads(json.dumps(w))
        del single["periods"]
        for s in single["services"]:
            del s["demand"]["profile"]
            s["demand"]["items_per_min"] *= factor
        price = enumerate_optimum(single)
        if price is None:
            assert result is None
            return
        want += hours * price
    assert result is not None and result.evaluation["ok"]
    assert result.horizon.horizon_cost_usd == pytest.approx(want, abs=1e-6), json.dumps(w)
    return result
