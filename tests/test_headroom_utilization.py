"""Utilization is reported against the real demand (constraints.headroom apart), the same
figure in the JSON, the table and the warnings; the values under load are at the real
demand's rate (issue 25, part 5)."""

from __future__ import annotations

from pathlib import Path

from solver.output.render import render_plan
from solver.plan import plan
from solver.workload.documents import parse_workload

CATALOG = str(Path(__file__).resolve().parents[1] / "examples" / "catalogs" / "seed-a10-a100.json")


def _measured(headroom: float) -> dict:
    return {"name": "headroom", "constraints": {"headroom": headroom}, "catalog": {"file": CATALOG},
            "services": [{"name": "sd", "demand": {"items_per_min": 1000},
                          "profiles": [{"gpu": "A10", "items_per_min": 34, "latency_ms": 1765}]}]}


def test_measured_service_with_headroom_reports_the_real_demand_over_capacity():
    s = plan(parse_workload(_measured(0.2))).services[0]
    assert s.demand == 1000 and s.demand_with_headroom == 1200
    assert abs(s.utilization - s.demand / s.capacity) < 1e-3  # not 1200 / capacity
    assert abs(s.headroom_utilization - (s.demand_with_headroom - s.demand) / s.capacity) < 1e-3
    a = s.assignments[0]
    rate_per_replica = sum(a.routed) / 1.2 / a.replicas
    assert abs(a.utilization - rate_per_replica / a.throughput_per_replica[0]) < 1e-3
    assert abs(a.utilization + a.headroom_utilization - sum(a.routed) / a.replicas / a.throughput_per_replica[0]) < 1e-3
    # At load: the real demand's rate, far from saturation (1000 items/min on 1224 of capacity).
    assert abs(a.at_load.utilization - a.utilization) < 1e-3 and a.at_load.utilization < 0.9


def test_without_headroom_nothing_changes():
    s = plan(parse_workload(_measured(0.0))).services[0]
    assert s.headroom_utilization is None and s.assignments[0].headroom_utilization is None
    assert abs(s.utilization - s.demand / s.capacity) < 1e-3


def test_the_table_shows_the_json_figure_and_the_headroom_apart():
    result = plan(parse_workload(_measured(0.2)))
    s = result.services[0]
    text = render_plan(result.to_dict())
    assert f"{s.utilization:.0%} (+{s.assignments[0].headroom_utilization:.0%} headroom)" in text
    assert f"(utilization {s.utilization:.0%}, +{s.headroom_utilization:.0%} headroom)" in text
    assert "saturated" not in text


def test_the_low_utilization_warning_quotes_the_tables_figure():
    doc = {"name": "low-utilization", "constraints": {"headroom": 0.2}, "services": [{
        "name": "chat", "model": "llama-3.1-70b", "precisions": ["fp8"],
        "demand": {"requests_per_s": 20, "prompt_tokens": 6000, "output_tokens": 200},
        "slo": {"ttft_ms": 225, "tpot_ms": 40, "percentile": 99}}]}
    s = plan(parse_workload(doc)).services[0]
    warning = next(w for w in s.warnings if "could sustain" in w)
    assert f"utilization {s.utilization:.1%} of the planned capacity" in warning
    assert "for 20 requests/s" in warning  # the real demand, not 24 with headroom
    assert abs(s.utilization - s.demand / s.capacity) < 2e-3


def test_disaggregated_pools_report_the_real_demand_too(tmp_path):
    import json

    from solver.workload.documents import load_workload

    examples = Path(__file__).resolve().parents[1] / "examples"
    doc = json.loads((examples / "disaggregated.json").read_text())
    doc.setdefault("constraints", {})["headroom"] = 0.25
    path = examples / f".headroom-{tmp_path.name}.json"  # beside the example: its catalog path is relative
    path.write_text(json.dumps(doc))
    try:
        result = plan(load_workload(path))
    finally:
        path.unlink()
    pools = [s for s in result.services if s.role]
    assert pools, "the example plans a disaggregated deployment"
    for s in result.services:
        if s.capacity > 0:
            assert abs(s.utilization - s.demand / s.capacity) < 2e-3, s.name
            assert abs(s.headroom_utilization - (s.demand_with_headroom - s.demand) / s.capacity) < 2e-3, s.name
    for pool in pools:
        assert abs(pool.demand * 1.25 - pool.demand_with_headroom) < 1e-3 * pool.demand_with_headroom
