"""The price and solve time of N+1 (constraints.redundancy), issue 27's targets.

For the README example (examples/llm-platform.json) and generated mixes of services
(bench/solve_scaling.py's generator, no-load SLOs), each workload is solved without a
failure domain and with N+1 by instance, zone and region; the script prints the price,
its increase, the solve's wall time and status. Every plan is checked by the evaluator
(a failed check raises).

Two more "domains" price reclaimed spot capacity (constraints.spot_interruptions):
`spot-uncovered` buys from on-demand and spot with no cover, `spot` the same with every
service still served in full after any one offer's spot instances are reclaimed.

    PYTHONPATH=. .venv/bin/python bench/redundancy.py [--sizes 20 100] [--seed 0]
        [--domains instance zone region spot-uncovered spot] [--time-limit 300] [--skip-example]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from solve_scaling import generate  # noqa: E402

from solver.errors import InfeasibleError, SolverTimeout  # noqa: E402
from solver.plan import PlanOptions, plan  # noqa: E402
from solver.workload.documents import parse_workload  # noqa: E402


def solve(doc: dict, domain: str | None, time_limit_s: float) -> dict:
    doc = copy.deepcopy(doc)
    doc.setdefault("constraints", {})
    if domain in ("spot", "spot-uncovered"):
        doc["constraints"]["pricing_tiers"] = ["on_demand", "spot"]
        if domain == "spot":
            doc["constraints"]["spot_interruptions"] = {"serve_fraction": 1.0}
    elif domain:
        doc["constraints"]["redundancy"] = {"domain": domain}
    doc.setdefault("solver", {})["time_limit_s"] = time_limit_s
    t0 = time.monotonic()
    try:
        result = plan(parse_workload(doc), PlanOptions(verify=False))
    except (InfeasibleError, SolverTimeout) as exc:
        return {"domain": domain or "none", "status": type(exc).__name__, "price": None,
                "wall_s": time.monotonic() - t0, "gpus": None}
    worst = min((v.surviving_fraction for s in result.services for v in (s.redundancy, s.spot_interruptions)
                 if v is not None), default=None)
    return {"domain": domain or "none", "status": result.status, "price": result.total_price_usd_per_hour,
            "wall_s": time.monotonic() - t0, "gpus": result.gpus, "worst_surviving": worst,
            "evaluation_ok": result.evaluation["ok"], "bound": result.solver.bound_usd_per_hour}


def report(name: str, rows: list[dict]) -> None:
    base = rows[0]["price"]
    print(f"\n{name}")
    print(f"{'domain':10} {'status':16} {'$/hour':>10} {'bound':>10} {'vs none':>9} {'GPUs':>6} {'wall s':>8} "
          f"{'worst left':>10}")
    for r in rows:
        price = "-" if r["price"] is None else f"{r['price']:.4f}"
        extra = "-" if r["price"] is None or not base else f"{(r['price'] / base - 1) * 100:+.1f} %"
        worst = "-" if r.get("worst_surviving") is None else f"{r['worst_surviving']:.1%}"
        bound = "-" if r.get("bound") is None else f"{r['bound']:.4f}"
        print(f"{r['domain']:10} {r['status']:16} {price:>10} {bound:>10} {extra:>9} {str(r['gpus'] or '-'):>6} "
              f"{r['wall_s']:8.2f} {worst:>10}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[20, 100])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--domains", nargs="*", default=["instance", "zone", "region"])
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--skip-example", action="store_true")
    args = ap.parse_args()
    cases = []
    if not args.skip_example:
        cases.append(("examples/llm-platform.json", json.loads((ROOT / "examples/llm-platform.json").read_text())))
    for n in args.sizes:
        doc = generate(n, args.seed)
        for s in doc["services"]:  # N+1 needs more than one replica: no service pinned to one
            if s.get("max_replicas") == 1:
                s.pop("max_replicas")
        cases.append((f"generate({n}, {args.seed})", doc))
    for name, doc in cases:
        rows = [solve(doc, None, args.time_limit)]
        rows += [solve(doc, d, args.time_limit) for d in args.domains]
        report(name, rows)
        sys.stdout.flush()


if __name__ == "__main__":
    main()
