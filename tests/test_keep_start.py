"""The re-plan's start (solver/optimize/keep_start.py), by hand: running replicas stay, a
shortfall goes to free GPU slots before new instances, replicas the demand no longer needs
free their slots, instances of offers the plan may not use (or beyond a limit) go, and the
MIP's optimum does not depend on the start (tests/test_replan_enumeration.py checks that
on random cases)."""

from __future__ import annotations

import pytest

from solver.compile.candidates import build_problem
from solver.compile.resolve import resolve_catalog
from solver.optimize.keep_start import keep_start
from solver.optimize.quick_check import evaluate_quick
from solver.plan import plan
from solver.workload.documents import parse_workload


def _workload(demand: float, fleet: list[dict], **constraints) -> dict:
    """One service at 50 items/min per replica on an L4; a 4-GPU L4 offer ($4/h) and a
    1-GPU one ($1.20/h)."""
    return {
        "services": [{"name": "a", "demand": {"items_per_min": demand},
                      "profiles": [{"gpu": "L4", "items_per_min": 50.0}]}],
        "catalog": {"offers": [
            {"provider": "x", "name": "l4x4", "gpu": "L4", "gpus_per_instance": 4, "price_usd_per_hour": 4.0},
            {"provider": "x", "name": "l4x1", "gpu": "L4", "gpus_per_instance": 1, "price_usd_per_hour": 1.2}]},
        "constraints": constraints,
        "current_fleet": fleet,
        "change_costs": {"add_instance_usd": 1.0, "remove_instance_usd": 1.0},
    }


def _start(w: dict):
    workload = parse_workload(w)
    problem = build_problem(workload, resolve_catalog(workload))
    return problem, keep_start(problem, list(problem.configs))


def _replicas(sol) -> dict[str, int]:
    return {a.offer_id: a.replicas for a in sol.assignments}


RUNNING = [{"offer_id": "x/l4x4", "instances": 1, "replicas": [{"service": "a", "count": 2, "gpus_per_replica": 1}]}]


def test_a_shortfall_goes_to_the_running_instances_free_slots():
    """120/min needs 3 replicas; 2 run on a 4-GPU instance with 2 GPUs free: the third goes
    there, no instance is bought."""
    problem, sol = _start(_workload(120.0, RUNNING))
    assert dict(sol.fleet) == {"x/l4x4": 1}
    assert _replicas(sol) == {"x/l4x4": 3}
    assert sum(a.routed[0] for a in sol.assignments) == pytest.approx(120.0)
    assert evaluate_quick(problem, sol)


def test_a_shortfall_beyond_the_free_slots_buys_at_the_lowest_price_per_gpu():
    """270/min needs 6 replicas: 2 run, 2 fit the free slots; the other 2 go where a GPU costs
    least ($1/GPU on the 4-GPU offer against $1.20), so a second 4-GPU instance."""
    _, sol = _start(_workload(270.0, RUNNING))
    assert dict(sol.fleet) == {"x/l4x4": 2}
    assert _replicas(sol) == {"x/l4x4": 6}


def test_replicas_the_demand_no_longer_needs_are_dropped_but_the_instance_stays():
    """40/min needs 1 replica of the 2 running; the instance stays (changes cost)."""
    _, sol = _start(_workload(40.0, RUNNING))
    assert dict(sol.fleet) == {"x/l4x4": 1}
    assert _replicas(sol) == {"x/l4x4": 1}


def test_min_replicas_keeps_replicas_the_demand_does_not_need():
    w = _workload(40.0, RUNNING)
    w["services"][0]["min_replicas"] = 2
    _, sol = _start(w)
    assert _replicas(sol) == {"x/l4x4": 2}


def test_instances_of_an_excluded_offer_or_beyond_a_limit_are_not_kept():
    fleet = RUNNING + [{"offer_id": "y/l4x1", "instances": 3, "replicas": []}]
    w = _workload(120.0, fleet, providers=["x"])
    w["catalog"]["offers"].append({"provider": "y", "name": "l4x1", "gpu": "L4", "gpus_per_instance": 1,
                                   "price_usd_per_hour": 1.0})
    _, sol = _start(w)
    assert dict(sol.fleet) == {"x/l4x4": 1}  # provider y is filtered out: its instances go
    fleet = RUNNING + [{"offer_id": "x/l4x1", "instances": 3, "replicas": []}]
    _, sol = _start(_workload(120.0, fleet, offer_quotas={"x/l4x1": 1}))
    assert dict(sol.fleet) == {"x/l4x4": 1, "x/l4x1": 1}


def test_the_other_markets_instances_are_not_kept():
    fleet = [{**RUNNING[0], "spot": True}]
    _, sol = _start(_workload(120.0, fleet))
    # Nothing on-demand runs: the demand is placed from scratch at the lowest price per GPU.
    assert dict(sol.fleet) == {"x/l4x4": 1} and _replicas(sol) == {"x/l4x4": 3}


def test_without_a_running_fleet_there_is_no_start():
    _, sol = _start(_workload(120.0, []))
    assert sol is None


def test_a_service_over_max_replicas_gives_no_start():
    """120/min needs 3 replicas, max_replicas is 2: no start (the MIP says why there is no plan)."""
    w = _workload(120.0, RUNNING)
    w["services"][0]["max_replicas"] = 2
    _, sol = _start(w)
    assert sol is None


def test_the_replan_is_optimal_from_the_start():
    """The plan keeps the instance and adds the replica in its free slot: $4/h, no change."""
    d = plan(parse_workload(_workload(120.0, RUNNING))).to_dict()
    assert d["status"] == "optimal" and d["evaluation"]["ok"]
    assert d["horizon_cost_usd"] == pytest.approx(4.0)
    assert [c["action"] for c in d["changes"]] == ["keep"]


def test_a_running_replica_without_a_precision_is_a_measured_one():
    """The schema's meaning (and the rollout's): no guess among a model's precisions."""
    from types import SimpleNamespace

    from solver.optimize.keep_start import running_config

    configs = [SimpleNamespace(offer_id="x/h100", gpus_per_replica=1, precision=p, key=f"m@x/h100:1gpu:{p}")
               for p in ("fp16", "fp8")]
    assert running_config(configs, "x/h100", 1, None) is None
    assert running_config(configs, "x/h100", 1, "fp8").precision == "fp8"
    measured = [SimpleNamespace(offer_id="x/h100", gpus_per_replica=1, precision=None, key="s@x/h100:1gpu:measured")]
    assert running_config(measured, "x/h100", 1, None) is measured[0]
