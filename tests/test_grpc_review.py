"""The Review RPC end to end: the real server on a loopback port, driven by the real client.

A tiny review (measured profiles on an inline catalog: each scenario solves in
milliseconds) streams one event per scenario with the same $/hour a local plan() of
that scenario gives; an infeasible scenario comes with its reasons and the others
still arrive; a review naming a file is refused; a cancelled review frees its slot
and its worker process, and leaves no temporary folder behind.
"""

from __future__ import annotations

import copy
import json
import multiprocessing
import tempfile
import time

import grpc
import pytest
import yaml

from grpc_support import running_server, slow_workload
from planner_client import PlannerClient, PlannerClientError
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
from solver.plan import PlanOptions, plan
from solver.review import parse_review
from solver.review.changes import apply_changes

# examples/s1-throughput.json with its catalog file inline (the service reads no files).
BASE = {
    "name": "s1-inline",
    "services": [{"name": "stable-diffusion", "demand": {"items_per_min": 1000},
                  "profiles": [{"gpu": "A10", "items_per_min": 34, "latency_ms": 1765},
                               {"gpu": "A100-80GB", "items_per_min": 67, "latency_ms": 896}]}],
    "catalog": {"offers": [
        {"provider": "seed", "name": "1xA10", "gpu": "A10", "gpus_per_instance": 1, "price_usd_per_minute": 0.02012},
        {"provider": "seed", "name": "2xA10", "gpu": "A10", "gpus_per_instance": 2, "price_usd_per_minute": 0.05672},
        {"provider": "seed", "name": "1xA100-80GB", "gpu": "A100-80GB", "gpus_per_instance": 1,
         "price_usd_per_minute": 0.10240}]},
}
REVIEW = {
    "name": "tiny",
    "base": {"workload": BASE},
    "time_limit_per_scenario_s": 20,
    "sensitivity": {"enabled": False},
    "scenarios": [
        {"name": "double", "changes": [{"demand": {"factor": 2}}]},
        {"name": "cheap a100", "changes": [{"price": {"gpu": "A100-80GB", "factor": 0.3}}]},
        {"name": "broke", "changes": [{"budget": {"usd_per_hour": 1}}]},
    ],
}


@pytest.fixture(scope="module")
def server():
    with running_server(max_concurrent_solves=1, max_queue=2) as (planner, target):
        yield planner, target


@pytest.fixture(scope="module")
def streamed(server):
    with PlannerClient(server[1], timeout_s=60) as client:
        return list(client.review(REVIEW))


def local_usd_per_hour(scenario_id: str) -> float:
    review = parse_review(copy.deepcopy(REVIEW))
    workload, catalog = apply_changes(review.workload, review.catalog, review.scenario(scenario_id).changes)
    return plan(workload, PlanOptions(catalog=catalog)).to_dict()["total_price_usd_per_hour"]


def test_one_event_per_scenario_then_a_summary(streamed):
    *scenarios, summary = streamed
    assert [e["event"] for e in scenarios] == ["scenario"] * 4
    assert sorted(e["id"] for e in scenarios) == ["base", "broke", "cheap-a100", "double"]
    assert summary == {"event": "summary", "review": "tiny", "scenarios": 4,
                       "statuses": {"optimal": 3, "infeasible": 1}}


def test_each_planned_scenario_costs_what_a_local_plan_costs(streamed):
    planned = [e for e in streamed if e["event"] == "scenario" and e["status"] == "optimal"]
    assert len(planned) == 3
    for e in planned:
        assert e["usd_per_hour"] == pytest.approx(local_usd_per_hour(e["id"]), abs=1e-9), e["id"]
        # The typed fields and the full result agree; the full result carries the plan.
        result = e["result"]
        assert (result["id"], result["status"], result["usd_per_hour"], result["gpus"]) == \
               (e["id"], e["status"], e["usd_per_hour"], e["gpus"])
        assert result["plan"]["total_price_usd_per_hour"] == e["usd_per_hour"]
        assert e["gpus"] > 0 and e["reasons"] == [] and e["error"] == ""
    by_id = {e["id"]: e for e in planned}
    assert by_id["double"]["usd_per_hour"] > by_id["base"]["usd_per_hour"] > by_id["cheap-a100"]["usd_per_hour"]


def test_the_infeasible_scenario_comes_with_its_reasons(streamed):
    (broke,) = [e for e in streamed if e.get("id") == "broke"]
    assert broke["status"] == "infeasible"
    assert broke["usd_per_hour"] is None and broke["gpus"] is None
    assert broke["reasons"], "an infeasible scenario says why"
    assert {r["constraint"] for r in broke["reasons"]} == {r["constraint"] for r in broke["result"]["reasons"]}
    assert any("budget" in r["constraint"] for r in broke["reasons"])
    assert broke["result"]["plan"] is None


def test_yaml_text_and_a_time_limit_override_give_the_same_costs(server, streamed):
    small = copy.deepcopy(REVIEW)
    small["scenarios"] = small["scenarios"][:1]
    with PlannerClient(server[1]) as client:
        events = list(client.review(yaml.safe_dump(small), time_limit_per_scenario_s=5))
    costs = {e["id"]: e["usd_per_hour"] for e in events if e["event"] == "scenario"}
    assert costs == {e["id"]: e["usd_per_hour"] for e in streamed if e.get("id") in ("base", "double")}
    assert events[-1]["statuses"] == {"optimal": 2}


@pytest.mark.parametrize("base, field", [
    ({"workload": "workload.json"}, "review.base.workload"),
    ({"workload": BASE, "catalog": "catalog.yaml"}, "review.base.catalog"),
    ({"workload": {**BASE, "catalog": {"file": "/etc/passwd"}}}, "review.base.workload.catalog.file"),
])
def test_a_review_naming_a_file_is_invalid_argument(server, base, field):
    bad = {**copy.deepcopy(REVIEW), "base": base}
    with PlannerClient(server[1], retries=0) as client, pytest.raises(PlannerClientError) as exc:
        list(client.review(bad))
    assert exc.value.code == "INVALID_ARGUMENT"
    assert [v["field"] for v in exc.value.violations] == [field]
    assert "cannot be read here" in exc.value.violations[0]["message"]


def test_bad_requests_are_invalid_argument(server):
    stub = pb_grpc.PlannerServiceStub(grpc.insecure_channel(server[1]))
    for request in (pb.ReviewRequest(), pb.ReviewRequest(json="{"), pb.ReviewRequest(json="[1]"),
                    pb.ReviewRequest(json=json.dumps(REVIEW), time_limit_per_scenario_s=-1)):
        with pytest.raises(grpc.RpcError) as exc:
            list(stub.Review(request, timeout=10))
        assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT, request


def test_the_review_takes_a_solver_slot_and_a_cancel_stops_it(server, monkeypatch, tmp_path):
    planner, target = server
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the server makes its review folder
    slow = {"name": "slow", "base": {"workload": slow_workload(time_limit_s=60)},
            "sensitivity": {"enabled": False}, "scenarios": [{"name": "double", "changes": [{"demand": {"factor": 2}}]}]}
    stub = pb_grpc.PlannerServiceStub(grpc.insecure_channel(target))
    call = stub.Review(pb.ReviewRequest(json=json.dumps(slow)), timeout=60)

    def review_workers() -> list:  # the review runner's processes, not the server's worker pool
        pool = set(planner.pool.pids())
        return [p for p in multiprocessing.active_children() if p.pid not in pool]

    deadline = time.monotonic() + 10
    while not review_workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert planner.gate.running == 1 and review_workers(), "the review runs in a worker"
    assert [p.name for p in tmp_path.iterdir()][0].startswith("planner-review-")
    # The only slot is the review's: a solve now waits behind it (and its deadline passes).
    with PlannerClient(target, timeout_s=0.5, retries=0) as client, pytest.raises(PlannerClientError) as exc:
        client.solve(BASE)
    assert exc.value.code == "DEADLINE_EXCEEDED"
    time.sleep(1.0)  # let the worker get into the solve
    t0 = time.monotonic()
    call.cancel()
    while (planner.gate.running or review_workers()) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    stopped_s = time.monotonic() - t0
    assert planner.gate.running == 0 and not review_workers()
    assert stopped_s < 3, f"the review stopped {stopped_s:.2f} s after the cancel"
    assert list(tmp_path.iterdir()) == [], "the review's temporary folder is removed"
