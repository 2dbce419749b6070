"""Request-size routing with many classes (Mélange-style input x output buckets)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from many_classes import workload  # noqa: E402


def test_a_144_bucket_service_is_planned_optimally_and_routes_every_bucket():
    doc = workload(12, 12, 30)
    r = plan(parse_workload(doc), PlanOptions())
    assert r.status == "optimal" and r.evaluation["ok"]
    (svc,) = r.services
    assert len(svc.classes) == 144
    for k, cls in enumerate(doc["services"][0]["demand"]["classes"]):
        routed = sum(a.routed[k] for a in svc.assignments)
        assert abs(routed - 30 * cls["share"]) <= 1e-6 * max(1.0, routed)


def test_routing_heavy_models_go_to_highs_under_auto():
    r = plan(parse_workload(workload(10, 10, 40)), PlanOptions())
    assert r.solver.backend == "highs"  # 4,500 routing variables over 79 integers


def test_more_than_256_classes_is_bad_input(solver_cli, tmp_path):
    doc = workload(16, 17, 10)  # 272 classes
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "services[0].demand.classes" in proc.stderr and "Traceback" not in proc.stderr
