"""The Node.js client (clients/node) against a real server on a loopback port: Health,
GetCatalog and Solve, including the rich error details, agree with the Python client.

Skips when node or the client's packages are missing (run `npm ci` in clients/node);
CI installs them and sets NODE_CLIENT_REQUIRED=1, which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from grpc_support import INFEASIBLE, SMALL, running_server
from planner_client import PlannerClient, PlannerClientError

NODE_DIR = Path(__file__).resolve().parents[1] / "clients" / "node"


def _node() -> str:
    node = shutil.which("node")
    reason = None
    if node is None:
        reason = "node is not installed"
    elif not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").exists():
        reason = "the Node client's packages are not installed: run `npm ci` in clients/node"
    if reason:
        if os.environ.get("NODE_CLIENT_REQUIRED"):
            pytest.fail(reason + " (NODE_CLIENT_REQUIRED is set)")
        pytest.skip(reason)
    return node


@pytest.fixture(scope="module")
def server():
    with running_server() as (_planner, target):
        yield target


def _example(node: str, target: str, workload: dict, tmp_path: Path, *flags: str) -> dict:
    path = tmp_path / "workload.json"
    path.write_text(json.dumps(workload))
    proc = subprocess.run([node, str(NODE_DIR / "example.js"), target, str(path), *flags], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_node_client_health_catalog_and_solve_match_the_python_client(server, tmp_path):
    out = _example(_node(), server, SMALL, tmp_path)
    with PlannerClient(server) as client:
        plan = client.solve(SMALL)
        catalog = client.get_catalog()
    assert out["health"] == "SERVING"
    assert out["catalog"]["offers"] > 0 and out["catalog"]["gpus"] > 0
    assert out["catalog"]["offers"] == len(catalog["offers"]) and out["catalog"]["gpus"] == len(catalog["gpus"])
    assert out["plan"]["status"] == plan["status"] == "optimal"
    assert out["plan"]["total_price_usd_per_hour"] == pytest.approx(plan["total_price_usd_per_hour"])
    assert out["plan"]["gpus"] == plan["gpus"]
    assert {f["offer_id"]: f["instances"] for f in out["plan"]["fleet"]} == \
        {f["offer_id"]: f["instances"] for f in plan["fleet"]}


def test_node_client_plans_under_a_percentile_slo_read_as_the_python_clients(server, tmp_path):
    """The shapes the client rewrites (a number for slo.confidence's level, [low, high] for
    each metric of at_load.band and verified.ci) give the Python client's services exactly."""
    workload = json.loads(json.dumps(SMALL))
    workload["services"][0]["slo"].update(percentile=99, confidence=0.9)
    workload["constraints"] = {"gpu_types": ["L4", "L40S"]}
    out = _example(_node(), server, workload, tmp_path, "--full")
    with PlannerClient(server) as client:
        plan = client.solve(workload)
    assignments = [a for s in plan["services"] for a in s["assignments"]]
    assert any(a["at_load"]["band"]["ttft_ms"] for a in assignments)
    assert any(a["verified"] and a["verified"]["ci"] for a in assignments), assignments
    # The Node client leaves unset fields out (protobufjs defaults: false) where the Python
    # client writes null or []; everything set is the same.
    assert _present(out["plan"]["services"]) == _present(plan["services"])


def _present(value):
    if isinstance(value, dict):
        return {k: _present(v) for k, v in value.items() if v is not None and v != []}
    if isinstance(value, list):
        return [_present(v) for v in value]
    return value


def test_node_client_decodes_field_violations(server, tmp_path):
    bad = {"services": [{"name": "chat", "model": "llama-3.1-8b",
                         "demand": {"requests_per_s": -1, "prompt_tokens": 512, "output_tokens": 256}}]}
    out = _example(_node(), server, bad, tmp_path)
    assert out["error"]["code"] == "INVALID_ARGUMENT" and out["error"]["reason"] == "INVALID_WORKLOAD"
    assert out["error"]["violations"][0]["field"] == "services[0].demand.requests_per_s"
    assert "To fix:" in out["error"]["violations"][0]["description"]
    assert out["error"]["request_id"]


def test_node_client_decodes_the_infeasibility_explanation(server, tmp_path):
    out = _example(_node(), server, INFEASIBLE, tmp_path)
    with PlannerClient(server) as client, pytest.raises(PlannerClientError) as err:
        client.solve(INFEASIBLE)
    assert out["error"]["code"] == "FAILED_PRECONDITION"
    assert [r["constraint"] for r in out["error"]["infeasibility"]] == \
        [r["constraint"] for r in err.value.infeasibility]
