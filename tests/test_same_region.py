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


def test_idle_gpus_of_another_region_carry_no_extra_replicas():
    """A re-plan that may change no instance keeps a running fleet in two providers' regions
    with idle GPUs: the last tie-break (idle GPUs carry extra replicas, solver/optimize/
    headroom.py) gave a service planned in one provider's region replicas on the other's idle
    GPUs, and the plan failed its own evaluation ("internal error": svc1 uses [('p', 'any'),
    ('q', 'any')]).
    An independent review found it (tests/test_replan_enumeration.py's case 2 with
    constraints.same_region "service")."""
    profile = {"items_per_min": 20.0, "latency_ms": 50.0}
    w = {"name": "two-regions", "periods": [{"name": "now", "hours": 1.0}],
         "services": [{"name": "svc0", "demand": {"items_per_min": 10.0},
                       "profiles": [{"gpu": "T4", "gpus_per_replica": 1, **profile}]},
                      {"name": "svc1", "demand": {"items_per_min": 33.0},
                       "profiles": [{"gpu": "A10", "gpus_per_replica": 1, "items_per_min": 19.0, "latency_ms": 50.0},
                                    {"gpu": "T4", "gpus_per_replica": 1, **profile}]}],
         "catalog": {"offers": [
             {"provider": "p", "name": "t4x4", "gpu": "T4", "gpus_per_instance": 4, "price_usd_per_hour": 1.5},
             {"provider": "q", "name": "a10x2", "gpu": "A10", "gpus_per_instance": 2, "price_usd_per_hour": 2.0}]},
         "constraints": {"same_region": "service"},
         "current_fleet": [{"offer_id": "p/t4x4", "instances": 1, "replicas": []},
                           {"offer_id": "q/a10x2", "instances": 1, "replicas": []}],
         "change_costs": {"add_instance_usd": 0.0, "remove_instance_usd": 2.0, "max_changed_instances": 0}}
    r = plan(parse_workload(w))
    assert r.status == "optimal" and r.evaluation["ok"]
    d = r.to_dict()
    regions = {s["name"]: {a["offer_id"].split("/")[0] for a in s["assignments"]} for s in d["services"]}
    assert all(len(v) == 1 for v in regions.values()), regions
