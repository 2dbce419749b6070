#!/usr/bin/env python3
"""Benchmark: what `slo.percentile: 99` costs a plan, by size, against the same workload without it.

For each size and seed, the generated workload of bench/solve_scaling.py is planned with
and without percentile 99 on every LLM service that states a TTFT or TPOT bound (as
bench/queueing_speed.py does), each plan in a fresh process (caches cold, candidate cache
off; the two cases of one seed run back to back, so their ratio is the figure to read on
a shared machine). Printed per plan: wall and CPU seconds of `plan()` (CPU of this process;
`+child` is the CPU of any forked helper, reaped before the plan returns or killed), MIP
rounds of the percentile-cap loop, cap computations (`max_rate_for_slo` calls that were
not cached), seconds in caps and in the MIP solves (all rounds, tie-break included), the
plan's price; then the p99 / no-percentile ratio of wall and CPU time. "caps" counts the
searches run in the planner's process (the plan's report of nominal caps included), "loop"
the cap loop's own (a helper's included; older trees: the same as "caps").

Runs on older trees too (counts and times are taken from the planner's timings where it
reports them, else from wrappers around the MIP backend and `max_rate_for_slo`); with
`--trees A B` each case runs in each tree back to back (before/after on a shared machine).

Usage: python bench/percentile_scaling.py [--sizes 20 50 100] [--seeds 0 1 2] [--time-limit 600] [--trees A B]
                                          [--eager]   (FLEET_EAGER_CAPS=1: every cap up front)
                                          [--verify]  (simulation in the loop on: solver.verify, off by default
                                                       here - it is its own loop, measured apart)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path.cwd()  # the tree measured (PYTHONPATH points at it); this script may live in another
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))


def _one(size: int, seed: int, percentile: bool, time_limit: float, verify: bool = False) -> dict:
    """Plan one case in this process: the figures as a dict."""
    # The measured tree's solver first: the helpers below put this script's own tree on the path.
    import solver.compile.load_caps as load_caps
    from solver.optimize.backends import mathopt_backend
    from solver.plan import PlanOptions, plan
    from solver.workload.documents import parse_workload

    from solve_scaling import generate
    from queueing_speed import with_percentile
    assert Path(load_caps.__file__).resolve().is_relative_to(ROOT), (load_caps.__file__, ROOT)

    calls = {"caps": 0, "caps_s": 0.0, "mip": 0, "mip_s": 0.0}
    inner_cap = load_caps.max_rate_for_slo

    def counted_cap(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner_cap(*args, **kwargs)
        finally:
            calls["caps"] += 1
            calls["caps_s"] += time.perf_counter() - t0

    load_caps.max_rate_for_slo = counted_cap
    inner_solve = mathopt_backend.MathOptBackend.solve

    def counted_solve(self, model, options):
        t0 = time.perf_counter()
        try:
            return inner_solve(self, model, options)
        finally:
            calls["mip"] += 1
            calls["mip_s"] += time.perf_counter() - t0

    mathopt_backend.MathOptBackend.solve = counted_solve
    doc = generate(size, seed)
    if percentile:
        doc = with_percentile(doc)
    doc["solver"] = dict(doc.get("solver", {}), time_limit_s=time_limit)
    from solver.workload import schema

    if "verify" in schema.SolverOptions.model_fields:  # trees before simulation in the loop have no such field
        doc["solver"]["verify"] = verify
    workload = parse_workload(doc)
    c0, w0 = time.process_time(), time.perf_counter()
    child0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = plan(workload, PlanOptions(cache=None))
    except Exception as exc:  # noqa: BLE001 - a failed plan is a row too
        return {"error": f"{type(exc).__name__}: {exc}"[:160], "wall": time.perf_counter() - w0}
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    child1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = r.solver.timings
    return {"wall": wall, "cpu": cpu,
            "child_cpu": (child1.ru_utime + child1.ru_stime) - (child0.ru_utime + child0.ru_stime),
            "rounds": t.get("percentile_cap_rounds", 0.0) + (1 if percentile else 0),
            # The planner's own count includes caps computed in a helper process; older trees
            # compute them all here.
            "caps": calls["caps"],  # max_rate_for_slo searches in this process (the plan's report included)
            "loop_caps": int(t.get("percentile_caps", calls["caps"])),  # the cap loop's, helper included
            # Seconds computing caps and bounds: the planner's own figure where it has one (its
            # settle step, rounds and probes), else the wrapper's (older trees: caps only).
            "caps_s": t.get("percentile_caps_total_s", calls["caps_s"]),
            "mip_solves": calls["mip"], "mip_s": calls["mip_s"], "cost": r.total_price_usd_per_hour,
            "status": r.status}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 50, 100])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--eager", action="store_true", help="FLEET_EAGER_CAPS=1: every cap computed up front")
    ap.add_argument("--verify", action="store_true", help="simulation in the loop on (solver.verify)")
    ap.add_argument("--trees", nargs="+", default=[str(ROOT)],
                    help="trees to measure, each case in each tree back to back (default: the current directory)")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # "size seed 0|1": run one case here
    args = ap.parse_args()
    if args.case:
        size, seed, pct = map(int, args.case.split())
        print(json.dumps(_one(size, seed, bool(pct), args.time_limit, args.verify)))
        return 0
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    if args.eager:
        env["FLEET_EAGER_CAPS"] = "1"
    trees = [str(Path(t).resolve()) for t in args.trees]
    print(f"# trees {trees}, load {open('/proc/loadavg').read().split()[:3]}, eager caps: {args.eager}, "
          f"simulation in the loop: {args.verify}")
    print(f"{'tree':>4} {'size':>4} {'seed':>4} {'case':>5} {'wall s':>8} {'CPU s':>8} {'+child':>7} {'rounds':>6} "
          f"{'caps':>5} {'loop':>5} {'caps s':>7} {'MIPs':>4} {'MIP s':>7} {'$/hour':>9}  status")
    ratios: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for size in args.sizes:
        for seed in args.seeds:
            rows: dict[tuple[int, int], dict] = {}
            for pct in (0, 1):
                for t, tree in enumerate(trees):  # the trees back to back, case by case
                    done = subprocess.run([sys.executable, __file__, "--case", f"{size} {seed} {pct}",
                                           "--time-limit", str(args.time_limit)] + (["--verify"] if args.verify else []),
                                          capture_output=True, text=True, cwd=tree, env=dict(env, PYTHONPATH=tree))
                    name = "p99" if pct else "none"
                    if done.returncode:
                        last = (done.stderr.strip().splitlines() or ["?"])[-1]
                        print(f"{t:>4} {size:>4} {seed:>4} {name:>5} crashed: {last}", flush=True)
                        continue
                    row = json.loads(done.stdout.strip().splitlines()[-1])
                    rows[(t, pct)] = row
                    if "error" in row:
                        print(f"{t:>4} {size:>4} {seed:>4} {name:>5} {row['wall']:8.2f} failed: {row['error']}",
                              flush=True)
                        continue
                    print(f"{t:>4} {size:>4} {seed:>4} {name:>5} {row['wall']:8.2f} {row['cpu']:8.2f} "
                          f"{row['child_cpu']:7.2f} {row['rounds']:6.0f} {row['caps']:5d} {row['loop_caps']:5d} {row['caps_s']:7.2f} "
                          f"{row['mip_solves']:4d} {row['mip_s']:7.2f} {row['cost']:9.3f}  {row['status']}", flush=True)
            for t in range(len(trees)):
                a, b = rows.get((t, 0)), rows.get((t, 1))
                if a and b and "error" not in a and "error" not in b:
                    r = (b["wall"] / a["wall"], (b["cpu"] + b["child_cpu"]) / a["cpu"])
                    ratios.setdefault((t, size), []).append(r)
                    print(f"{t:>4} {size:>4} {seed:>4} ratio p99/none: wall {r[0]:.2f}x, CPU (with child) {r[1]:.2f}x",
                          flush=True)
    for (t, size), rs in ratios.items():
        print(f"tree {t} size {size}: median ratio wall {statistics.median(r[0] for r in rs):.2f}x "
              f"(max {max(r[0] for r in rs):.2f}x), CPU {statistics.median(r[1] for r in rs):.2f}x "
              f"(max {max(r[1] for r in rs):.2f}x) over {len(rs)} seed(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
