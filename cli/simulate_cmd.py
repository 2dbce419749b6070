"""`solver-cli simulate WORKLOAD`: plan the fleet, then replay it at the demand in a simulator.

Each replica receives the rate the plan routes to it (at the demand, without headroom)
for `--duration-s` simulated seconds; the report gives every service's achieved
p50/p90/p99 TTFT, TPOT and end-to-end latency against its SLO and names any service
that misses (a MISSED line; the exit code stays 0 - the plan itself was found).

Exit codes as `solve`: 0 replayed; 2 bad input; 3 no feasible fleet; 4 no plan within
the time limit; 5 cancelled or internal error.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

EXIT_OK, EXIT_INPUT, EXIT_INFEASIBLE, EXIT_TIMEOUT, EXIT_OTHER = 0, 2, 3, 4, 5
METRIC_LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("simulate", help="plan the fleet, then replay it at the demand in a discrete-event "
                              "simulator and check each service's latency percentiles against its SLO",
                              description=__doc__.split("\n\n")[1])
    p.add_argument("workload")
    p.add_argument("--duration-s", type=float, default=600.0, metavar="SECONDS",
                   help="simulated seconds per replica (default 600)")
    p.add_argument("--seed", type=int, default=0, help="random seed: the same seed gives the same replay")
    p.add_argument("--percentile", type=float, default=None, metavar="P",
                   help="50, 90, 95 or 99: the percentile SLOs are checked at (default 99, or the service's own)")
    p.add_argument("--arrival-cv", type=float, default=None, metavar="CV",
                   help="coefficient of variation of inter-arrival times (1 = Poisson, the default; >1 bursty)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS", help="for the planning solve")
    p.add_argument("--backend", choices=["auto", "scip", "highs", "cp-sat"], default=None)
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_INPUT


def run(args) -> int:
    from solver.perf.queueing import PERCENTILES

    # Cheap checks before any planning.
    if not (math.isfinite(args.duration_s) and 0 < args.duration_s <= 1e6):
        return _fail(f"--duration-s must be a positive number of seconds (at most 1e6), got {args.duration_s:g}. "
                     "To fix: e.g. --duration-s 600")
    if args.percentile is not None and args.percentile not in PERCENTILES:
        return _fail(f"--percentile must be one of {', '.join(map(str, PERCENTILES))}, got {args.percentile:g}. "
                     "To fix: e.g. --percentile 99")
    if args.arrival_cv is not None and not (math.isfinite(args.arrival_cv) and 0 <= args.arrival_cv <= 100):
        return _fail(f"--arrival-cv must be a non-negative number (1 = Poisson arrivals), got {args.arrival_cv:g}. "
                     "To fix: e.g. --arrival-cv 1")
    if args.time_limit is not None and not (math.isfinite(args.time_limit) and args.time_limit > 0):
        return _fail(f"--time-limit must be a positive number of seconds, got {args.time_limit:g}")
    if args.seed < 0:
        return _fail(f"--seed must be a non-negative whole number, got {args.seed}")

    from solver.compile.resolve import resolve_catalog
    from solver.errors import Cancelled, InfeasibleError, InputError, PlannerError, SolverTimeout
    from solver.output.render import render_infeasible
    from solver.plan import PlanOptions, plan
    from solver.sim.fleet import simulate_plan
    from solver.workload.documents import load_document, parse_workload

    try:
        data = load_document(Path(args.workload))
        workload = parse_workload(data)
        base_dir = str(Path(args.workload).parent)
        catalog = resolve_catalog(workload, base_dir)
        result = plan(workload, PlanOptions(time_limit_s=args.time_limit, backend=args.backend, base_dir=base_dir,
                                            catalog=catalog))
    except InputError as exc:
        print("error: invalid input", file=sys.stderr)
        for v in exc.violations:
            print(f"  - {v}", file=sys.stderr)
        return EXIT_INPUT
    except InfeasibleError as exc:
        from dataclasses import asdict

        reasons = [asdict(r) for r in exc.reasons]
        if args.format == "json":
            print(json.dumps({"status": "infeasible", "infeasibility": reasons}, indent=2))
        else:
            print(render_infeasible(reasons))
        return EXIT_INFEASIBLE
    except SolverTimeout as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_TIMEOUT
    except (Cancelled, PlannerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_OTHER
    plan_dict = result.to_dict()
    replay = simulate_plan(workload, plan_dict, catalog, duration_s=args.duration_s, seed=args.seed,
                           percentile=int(args.percentile) if args.percentile is not None else None,
                           arrival_cv=args.arrival_cv)
    replay["total_price_usd_per_hour"] = plan_dict.get("total_price_usd_per_hour")
    if args.format == "json":
        print(json.dumps(replay, indent=2))
    else:
        print(render(replay))
    return EXIT_OK


def render(replay: dict) -> str:
    from solver.output.render import _table

    def trio(values: dict, scale: float = 1.0, fmt: str = ".0f") -> str:
        out = []
        for p in (50, 90, 99):
            v = values.get(f"p{p}")
            out.append("-" if v is None else format(v / scale, fmt))
        return "/".join(out)

    rows = []
    for s in replay["services"]:
        a = s["achieved"]
        slo = ", ".join(f"{METRIC_LABELS[m]} {v:g} ms" for m, v in s["slo"].items()) or "none"
        rows.append([s["name"], str(s["requests_simulated"]), trio(a["ttft_ms"]), trio(a["tpot_ms"], fmt=".1f"),
                     trio(a["latency_ms"], 1e3, ".2f"), f"{slo} @p{s['percentile']}",
                     "MISSED" if not s["meets_slo"] else "met"])
    head = (f"Replay of the plan for {replay.get('workload')}: {replay['duration_s']:g} s simulated per replica "
            f"(seed {replay['seed']}), at the demand without headroom, split as the plan routes it")
    table = _table(["service", "requests", "TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "latency p50/p90/p99 s",
                    "SLO", "verdict"], rows)
    lines = [head, table]
    for s in replay["services"]:
        if not s["meets_slo"]:
            lines.append(f"MISSED: {s['name']}: " + "; ".join(s["misses"]))
    if not replay["missed"]:
        lines.append("Every service meets its SLO in this replay.")
    lines.append("One simulated replica stands for each assignment's identical replicas; '-' = no such metric "
                 "(measured profiles give latency only).")
    return "\n".join(lines)
