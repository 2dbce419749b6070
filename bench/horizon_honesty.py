"""Are multi-period answers honest under a short time limit? (issue 26)

Each workload (bench/solve_scaling.py's generator, on-demand and spot tiers, a day and a
night period, some with a spot share limit or spot cover) is solved twice: with a short
time limit and a long one. A status is a claim: the short answer's bound must not exceed
the long answer's cost (a bound is a proof that nothing is cheaper), and a short answer
called "optimal" must cost no more than the long one. The script prints every workload's
two answers and counts the contradictions (the target is none).

    PYTHONPATH=. .venv/bin/python bench/horizon_honesty.py [--sizes 8 15 20] [--seeds 0 1]
        [--short 4] [--long 90]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from solve_scaling import generate  # noqa: E402

from solver.errors import InfeasibleError, SolverTimeout  # noqa: E402
from solver.plan import PlanOptions, plan  # noqa: E402
from solver.workload.documents import parse_workload  # noqa: E402

TOL = 1e-6


def workload(n: int, seed: int, variant: str) -> dict:
    doc = generate(n, seed)
    c = doc.setdefault("constraints", {})
    c["pricing_tiers"] = ["on_demand", "spot"]
    if variant == "share":
        c["max_spot_share"] = 0.5
    elif variant == "cover":
        c["spot_interruptions"] = {"serve_fraction": 1.0}
    doc["periods"] = [{"name": "day", "hours": 14}, {"name": "night", "hours": 10}]
    for s in doc["services"]:
        s["demand"]["profile"] = {"night": 0.5}
    return doc


def solve(doc: dict, limit_s: float) -> dict:
    doc = {**doc, "solver": {**doc.get("solver", {}), "time_limit_s": limit_s}}
    t0 = time.monotonic()
    try:
        r = plan(parse_workload(doc), PlanOptions(verify=False))
    except (InfeasibleError, SolverTimeout) as exc:
        return {"status": type(exc).__name__, "cost": None, "bound": None, "wall_s": time.monotonic() - t0}
    h = r.horizon
    return {"status": r.status, "cost": h.horizon_cost_usd, "bound": h.solver.bound_usd,
            "wall_s": time.monotonic() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[8, 15, 20])
    ap.add_argument("--seeds", type=int, nargs="*", default=[0, 1])
    ap.add_argument("--variants", nargs="*", default=["plain", "share", "cover"])
    ap.add_argument("--short", type=float, default=4.0)
    ap.add_argument("--long", type=float, default=90.0)
    args = ap.parse_args()
    print(f"{'workload':26} {'short: status':>14} {'cost':>11} {'bound':>11} {'s':>5}   "
          f"{'long: status':>13} {'cost':>11} {'bound':>11} {'s':>5}  verdict")
    bad = 0
    for n in args.sizes:
        for seed in args.seeds:
            for variant in args.variants:
                doc = workload(n, seed, variant)
                a, b = solve(doc, args.short), solve(doc, args.long)
                verdict = "ok"
                if a["bound"] is not None and b["cost"] is not None and a["bound"] > b["cost"] * (1 + TOL) + TOL:
                    verdict = "BOUND ABOVE A PLAN"
                elif a["status"] == "optimal" and b["cost"] is not None and a["cost"] > b["cost"] * (1 + TOL) + TOL:
                    verdict = "FALSE OPTIMAL"
                elif a["status"] == "InfeasibleError" and b["cost"] is not None:
                    verdict = "FALSE INFEASIBLE"
                bad += verdict != "ok"

                def show(x):
                    f = (lambda v: "-" if v is None else f"{v:.4f}")
                    return f"{x['status']:>14} {f(x['cost']):>11} {f(x['bound']):>11} {x['wall_s']:5.1f}"
                print(f"generate({n},{seed}) {variant:7} {show(a)}   {show(b)}  {verdict}", flush=True)
    print(f"\ncontradictions: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
