"""Multi-period plans over gRPC: the real server on a loopback port, the real client, and
the scheduler-loop example run as a subprocess against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grpc_support import ROOT, running_server, without_timings
from planner_client import PlannerClient, PlannerClientError
from server import convert
from solver.plan import plan
from solver.workload.documents import parse_workload

OFFERS = [{"provider": "x", "name": "l4", "region": "r1", "gpu": "L4", "gpus_per_instance": 1,
           "price_usd_per_hour": 10.0, "spot_price_usd_per_hour": 3.0, "reserved_3y_price_usd_per_hour": 4.0}]
DAY = {"name": "day", "periods": [{"name": "peak", "hours": 8}, {"name": "off", "hours": 16}],
       "services": [{"name": "a", "demand": {"items_per_min": 100.0, "profile": {"peak": 2.0}},
                     "profiles": [{"gpu": "L4", "items_per_min": 50.0}]}],
       "constraints": {"pricing_tiers": ["on_demand", "spot", "reserved_3y"], "max_spot_share": 0.5},
       "change_costs": {"add_instance_usd": 1.0},
       "catalog": {"offers": OFFERS}}
RUNNING = [{"offer_id": "x/l4", "instances": 3, "replicas": [{"service": "a", "count": 3}]}]


@pytest.fixture(scope="module")
def server():
    with running_server() as (planner, target):
        yield target


def test_solve_with_current_fleet_matches_the_local_plan(server) -> None:
    with PlannerClient(server, timeout_s=60) as client:
        remote = client.solve(DAY, current_fleet=RUNNING)
    local = plan(parse_workload({**DAY, "current_fleet": RUNNING})).to_dict()
    assert without_timings(remote) == without_timings(local)
    for key in ("periods", "reservations", "horizon_cost_usd", "changes", "rollout"):
        assert key in remote
    assert remote["reservations"] and remote["changes"]


def test_current_fleet_in_the_request_replaces_the_workloads(server) -> None:
    with PlannerClient(server, timeout_s=60) as client:
        none = client.solve({**DAY, "current_fleet": RUNNING}, current_fleet=[])
    assert all(c["action"] == "add" for c in none["changes"])


def test_a_plan_without_periods_has_no_horizon_keys_on_the_wire(server) -> None:
    single = {k: v for k, v in DAY.items() if k not in ("periods", "constraints", "change_costs")}
    single = json.loads(json.dumps(single))
    del single["services"][0]["demand"]["profile"]
    with PlannerClient(server, timeout_s=60) as client:
        d = client.solve(single)
    assert not {"periods", "reservations", "changes", "rollout", "horizon_cost_usd"} & set(d)
    assert all("spot" not in p for p in d["placements"])


def test_unknown_offer_in_the_current_fleet_is_invalid_argument(server) -> None:
    with PlannerClient(server, timeout_s=60) as client:
        with pytest.raises(PlannerClientError) as err:
            client.solve(DAY, current_fleet=[{"offer_id": "x/l44", "instances": 1}])
    assert err.value.code == "INVALID_ARGUMENT" and err.value.exit_code == 2
    assert any(v["field"] == "current_fleet[0].offer_id" for v in err.value.violations), err.value.violations


def test_current_fleet_round_trip() -> None:
    fleet = [{"offer_id": "x/l4", "instances": 2, "spot": True,
              "replicas": [{"service": "a", "count": 1, "gpus_per_replica": 2, "precision": "fp8"}]},
             {"offer_id": "x/l4", "instances": 1}]
    assert convert.current_fleet_from_proto(convert.current_fleet_to_proto(fleet)) == fleet
    with pytest.raises(ValueError, match="current_fleet.instances\\[0\\].gpu"):
        convert.current_fleet_to_proto([{"offer_id": "x", "instances": 1, "gpu": "L4"}])


def test_scheduler_loop_example_replans_from_its_own_fleet(server, tmp_path) -> None:
    """Two iterations of clients/python/examples/scheduler_loop.py against the real server:
    the second re-plans from the fleet the first applied."""
    state = tmp_path / "state.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "clients" / "python") + os.pathsep + str(ROOT))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "clients" / "python" / "examples" / "scheduler_loop.py"), "--server", server,
         "--workload", str(ROOT / "examples" / "scheduler" / "workload.yaml"),
         "--forecast", str(ROOT / "examples" / "scheduler" / "forecast.json"),
         "--every-minutes", "0", "--iterations", "2", "--state", str(state)],
        capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert len(lines) == 2 and lines[0].startswith("step 0: optimal") and lines[1].startswith("step 1:")
    assert "launch" in proc.stdout  # the first iteration starts from nothing
    saved = json.loads(state.read_text())
    assert saved["step"] == 2 and saved["fleet"]
    assert all(line["replicas"] for line in saved["fleet"])
