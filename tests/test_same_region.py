"""constraints.same_region: one region per service, or for the whole fleet."""

from __future__ import annotations

import pytest

from solver.errors import InfeasibleError
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload


def _offer(provider, name, region, price, available=None):
    o = {"provider": provider, "name": name, "region": region, "gpu": "L4", "gpus_per_instance": 1,
         "price_usd_per_hour": price}
    if available is not None:
        o["available_instances"] = available
    return o


# The cheapest region has only 2 instances; each service needs 3 replicas of 100/min.
OFFERS = [_offer("p", "cheap-east", "east", 1.0, available=2), _offer("p", "west", "west", 1.5),
          _offer("p", "north", "north", 1.25)]


def _workload(same_region=None, services=("a",), offers=OFFERS):
    w = {"name": "r", "services": [
        {"name": n, "demand": {"items_per_min": 300},
         "profiles": [{"gpu": "L4", "items_per_min": 100, "latency_ms": 50}]} for n in services],
         "catalog": {"offers": offers}}
    if same_region:
        w["constraints"] = {"same_region": same_region}
    return parse_workload(w)


def _regions(result, service=None):
    by_offer = {f.offer_id: f.region for f in result.fleet}
    if service is None:
        return {f.region for f in result.fleet}
    s = next(s for s in result.services if s.name == service)
    return {by_offer[a.offer_id] for a in s.assignments}


def test_without_it_a_service_spreads_over_regions_for_the_cheapest_plan():
    r = plan(_workload())
    assert _regions(r, "a") == {"east", "north"}
    assert r.total_price_usd_per_hour == pytest.approx(2 * 1.0 + 1.25)


def test_service_mode_keeps_each_service_in_one_region():
    r = plan(_workload("service"))
    assert r.evaluation["ok"]
    assert _regions(r, "a") == {"north"}  # 3 x 1.25 beats 3 x 1.5; east has only 2
    assert r.total_price_usd_per_hour == pytest.approx(3 * 1.25)


def test_service_mode_lets_different_services_use_different_regions():
    r = plan(_workload("service", services=("a", "b")))
    assert r.evaluation["ok"]
    assert len(_regions(r, "a")) == 1 and len(_regions(r, "b")) == 1
    assert r.total_price_usd_per_hour == pytest.approx(6 * 1.25)


def test_fleet_mode_puts_everything_in_one_region():
    offers = OFFERS + [_offer("p", "cheap-east-2", "east", 1.1)]
    r = plan(_workload("fleet", services=("a", "b"), offers=offers))
    assert r.evaluation["ok"]
    assert _regions(r) == {"east"}  # 2 x 1.0 + 4 x 1.1 = 6.4 < 6 x 1.25
    assert r.total_price_usd_per_hour == pytest.approx(2 * 1.0 + 4 * 1.1)


def test_providers_with_the_same_region_name_are_different_regions():
    offers = [_offer("p", "x", "east", 1.0, available=2), _offer("q", "y", "east", 1.0)]
    r = plan(_workload("service", offers=offers))
    assert {f.provider for f in r.fleet} == {"q"}


def test_pooled_model_respects_it_too(monkeypatch):
    from solver.optimize import formulation

    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    r = plan(_workload("service", services=("a", "b")))
    assert r.evaluation["ok"] and len(_regions(r, "a")) == 1 and len(_regions(r, "b")) == 1


def test_infeasible_when_no_single_region_has_room():
    offers = [_offer("p", "e", "east", 1.0, available=2), _offer("p", "w", "west", 1.0, available=2)]
    with pytest.raises(InfeasibleError):
        plan(_workload("service", offers=offers), PlanOptions())


def test_the_independent_evaluator_catches_a_plan_that_spreads():
    from solver.compile.resolve import resolve_catalog
    from solver.evaluate import evaluate
    from solver.optimize.solution import Assignment, Solution

    w = _workload("service")
    spread = Solution((("p/cheap-east", 2), ("p/north", 1)), (
        Assignment("a@p/cheap-east:1gpu:measured", "a", "p/cheap-east", 1, None, 2, (200.0,)),
        Assignment("a@p/north:1gpu:measured", "a", "p/north", 1, None, 1, (100.0,))))
    report = evaluate(w, resolve_catalog(w), spread)
    assert any("same_region" in v for v in report.violations), report.violations
