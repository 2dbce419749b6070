"""Capacity reviews of multi-period workloads: sweeps over the reserved GPUs and the spot
share ("how much should we reserve?"), with the cost plotted against reserved capacity."""

from __future__ import annotations

import json

from solver.review import run_review, write_report
from solver.review.expand import parse_review

OFFERS = [{"provider": "x", "name": "l4", "region": "r1", "gpu": "L4", "gpus_per_instance": 1,
           "price_usd_per_hour": 10.0, "spot_price_usd_per_hour": 3.0, "reserved_3y_price_usd_per_hour": 4.0}]
REVIEW = {
    "name": "reserve",
    "base": {"workload": {
        "periods": [{"name": "peak", "hours": 8}, {"name": "off", "hours": 16}],
        "services": [{"name": "a", "demand": {"items_per_min": 100.0, "profile": {"peak": 2.0}},
                      "profiles": [{"gpu": "L4", "items_per_min": 50.0}]}],
        "constraints": {"pricing_tiers": ["on_demand", "spot", "reserved_3y"], "max_spot_share": 0.0},
        "catalog": {"offers": OFFERS}}},
    "sweeps": [{"name": "reserved", "change": "reservation", "values": [0, 1, 2, 3, 4]},
               {"name": "spot", "change": "spot_share", "values": [0, 0.5, 1.0]}],
    "sensitivity": {"enabled": False},
}


def test_reservation_and_spot_share_sweeps(tmp_path) -> None:
    """Peak 8 h needs 4 instances, off-peak 16 h needs 2 (on-demand $10, 3-year $4, spot $3).
    With no spot: R reserved costs 96 R + 8 x 10 x (4 - R) + 16 x 10 x max(2 - R, 0):
    R=0 640, 1 496, 2 352, 3 368, 4 384; the planner's own choice (base) is R=2."""
    review = parse_review(json.loads(json.dumps(REVIEW)), base_dir=str(tmp_path))
    results = {r.id: r for r in run_review(review, str(tmp_path / "out"), workers=1, backend="local")}
    base = results["base"]
    assert base.status == "optimal" and base.horizon_cost_usd == 352.0 and base.reserved_gpus == 2
    sweep = [results[f"reserved-{n}"] for n in range(5)]
    assert [r.horizon_cost_usd for r in sweep] == [640.0, 496.0, 352.0, 368.0, 384.0]
    assert [r.reserved_gpus for r in sweep] == [0, 1, 2, 3, 4]
    assert all(abs(r.usd_per_hour - r.horizon_cost_usd / 24) < 1e-6 for r in sweep)
    spot = [results[f"spot-{v:g}"].horizon_cost_usd for v in (0, 0.5, 1.0)]
    assert spot[0] == 352.0 and spot[0] >= spot[1] >= spot[2]
    write_report(review, list(results.values()), tmp_path / "out")
    assert (tmp_path / "out" / "plots" / "sweep-reserved.png").stat().st_size > 1000
    assert "Cost against reserved capacity" in (tmp_path / "out" / "report.md").read_text()
