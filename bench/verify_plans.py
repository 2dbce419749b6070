#!/usr/bin/env python3
"""Benchmark: simulation in the loop on real plans - is every configuration a plan uses confirmed by the simulator?

What it measures: after the planner's solve, every configuration a plan uses for a
service with a percentile SLO is simulated at the rate the plan routes to one replica
(solver/compile/verified_caps.py; `solver.verify`, on by default); a miss lowers that
configuration's cap and the plan is solved again. Per plan this prints each used
configuration's verdict (met / missed / inconclusive / not checked), the rounds of
re-solving, the plan's cost with verification against the same workload with
`solver.verify: false`, and the plan time (wall and CPU) both ways. Target: every used
configuration confirmed ("met").

How (each plan in a worker process, candidate caches shared within a worker, values
under load computed in the planner's own process - `prefetch_at_load` off, so two jobs
use two cores):
* every workload in examples/ (the review's inline base workload included): as shipped
  where it states a percentile SLO, and with `percentile: 99` added to each LLM service
  that has none (a service without latency bounds gets no cap and nothing to verify:
  said so); examples without LLM services are listed as not applicable;
* 50 generated workloads (bench/solve_scaling.py `generate(n, seed)`, percentile 99 on
  every LLM service): sizes 3, 4, 5, 6, 8, 10, 12, 15, 18 and 20 services, seeds 0-4.

Command (about 20 minutes on 2 cores with --jobs 2; --quick: the examples' llm-platform
and four generated workloads of 3-8 services, about 2 minutes):

    PYTHONPATH=. .venv/bin/python bench/verify_plans.py --jobs 2 [--csv out.csv]
    PYTHONPATH=. .venv/bin/python bench/verify_plans.py --quick
    PYTHONPATH=. .venv/bin/python bench/verify_plans.py --only gen-12-3     # one case again

Not a test: record the figures in docs/benchmarks.md and docs/queueing.md.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

SIZES = (3, 4, 5, 6, 8, 10, 12, 15, 18, 20)
SEEDS = range(5)
QUICK_GENERATED = ((3, 0), (5, 1), (8, 2), (6, 3))
VERDICTS = ("met", "missed", "inconclusive", "not checked")


def load_doc(path: Path) -> dict:
    import yaml

    text = path.read_text()
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def with_percentile(doc: dict, p: int = 99) -> tuple[dict, int]:
    """A copy with `percentile: p` on every LLM service without one; how many were added."""
    d = copy.deepcopy(doc)
    added = 0
    for s in d.get("services", []):
        if s.get("model"):
            slo = s.setdefault("slo", {})
            if slo.get("percentile") is None:
                slo["percentile"] = p
                added += 1
    return d, added


def example_cases() -> tuple[list[tuple[str, dict, str]], list[str]]:
    """(name, document, base dir) per example plan to make; and why others are left out."""
    cases, notes = [], []
    for path in sorted((ROOT / "examples").rglob("*")):
        if path.suffix not in (".json", ".yaml", ".yml") or "traces" in path.parts or "catalogs" in path.parts:
            continue
        if "errors" in path.relative_to(ROOT / "examples").parts:  # refused or infeasible by design (the docs show why)
            notes.append(f"{path.relative_to(ROOT / 'examples')}: an input the docs show refused or infeasible")
            continue
        doc = load_doc(path)
        rel = str(path.relative_to(ROOT / "examples"))
        if isinstance(doc, dict) and "base" in doc:  # a review: plan its base workload
            base = doc.get("base", {}).get("workload")
            if not isinstance(base, dict):
                notes.append(f"{rel}: a review whose base workload is a file (planned where it is listed)")
                continue
            doc, rel = base, rel + " (base workload)"
        if not isinstance(doc, dict) or "services" not in doc:
            notes.append(f"{rel}: not a workload (a running fleet or a forecast)")
            continue
        llm = [s for s in doc["services"] if s.get("model")]
        if not llm:
            notes.append(f"{rel}: no LLM service (measured profiles only): nothing the queueing model caps")
            continue
        base_dir = str(path.parent)
        if doc.get("change_costs") is not None and doc.get("current_fleet") is None:
            # A scheduler loop's base workload: its first step runs with nothing running yet.
            doc = dict(doc, current_fleet=[])
            rel += " (current_fleet [])"
        if doc.get("change_costs") is not None or doc.get("periods") is not None or \
                len((doc.get("constraints") or {}).get("pricing_tiers", ["on_demand"])) > 1:
            # The multi-period planner; the same services as one static hour as well.
            static = copy.deepcopy(doc)
            for k in ("change_costs", "current_fleet", "periods"):
                static.pop(k, None)
            # On demand only: what sizes spot capacity goes with the spot tier.
            for k in ("pricing_tiers", "max_spot_share", "spot_interruptions"):
                (static.get("constraints") or {}).pop(k, None)
            for svc in static.get("services") or []:
                if isinstance(svc, dict):
                    svc.pop("spot_interruptions", None)
            cases.extend(_variants(rel.split(" (")[0] + " static", static, base_dir))
        cases.extend(_variants(rel, doc, base_dir))
    return cases, notes


def _variants(rel: str, doc: dict, base_dir: str) -> list[tuple[str, dict, str]]:
    """The workload as shipped where it states a percentile SLO, and with p99 added."""
    cases = []
    llm = [s for s in doc["services"] if s.get("model")]
    if any((s.get("slo") or {}).get("percentile") is not None for s in llm):
        cases.append((f"{rel}", doc, base_dir))
    with_p, added = with_percentile(doc)
    if added:
        cases.append((f"{rel} +p99", with_p, base_dir))
    return cases


def generated_cases(pairs) -> list[tuple[str, dict, str]]:
    from solve_scaling import generate

    out = []
    for n, seed in pairs:
        doc, _ = with_percentile(generate(n, seed))
        out.append((f"gen-{n}-{seed}", doc, str(ROOT)))
    return out


def run_case(args: tuple) -> dict:
    name, doc, base_dir = args
    try:
        return _run_case(name, doc, base_dir)
    except Exception as exc:  # one broken case must not lose the others
        import traceback

        return {"case": name, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}


def _run_case(name: str, doc: dict, base_dir: str) -> dict:
    from solver.caches import clear_all
    from solver.errors import InfeasibleError, SolverTimeout
    from solver.plan import PlanOptions, plan
    from solver.workload.documents import parse_workload

    out = {"case": name}
    services = doc.get("services", [])
    out["services"] = len(services)
    out["percentile_llm"] = sum(1 for s in services if s.get("model") and (s.get("slo") or {}).get("percentile")
                                is not None and any(k in (s.get("slo") or {}) for k in ("ttft_ms", "tpot_ms",
                                                                                         "latency_ms")))
    _warm_simulator()
    for verify in (False, True):
        d = copy.deepcopy(doc)
        d.setdefault("solver", {})["verify"] = verify
        if TIME_LIMIT_S is not None:
            d["solver"]["time_limit_s"] = TIME_LIMIT_S
        workload = parse_workload(d)
        clear_all()  # both plans cold: neither reuses the other's caps or candidates
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            r = plan(workload, PlanOptions(base_dir=base_dir, prefetch_at_load=False, cache=None))
        except (InfeasibleError, SolverTimeout) as exc:
            kind = "infeasible" if isinstance(exc, InfeasibleError) else "timeout"
            out["verify" if verify else "plain"] = {"status": kind, "reason": str(exc)[:300],
                                                    "wall_s": time.perf_counter() - t0,
                                                    "cpu_s": time.process_time() - c0}
            continue
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        d = r.to_dict()
        t = d["solver"]["timings"]
        res = {"status": d.get("status", ""), "cost": d["total_price_usd_per_hour"], "wall_s": wall, "cpu_s": cpu,
               "verify_rounds": t.get("verify_rounds"), "verify_s": t.get("verify_s"),
               "cap_rounds": t.get("percentile_cap_rounds"), "horizon": "periods" in d or "rollout" in d,
               "checks": []}
        capped = {s["name"] for s in services if s.get("model") and (s.get("slo") or {}).get("percentile") is not None
                  and any(k in s["slo"] for k in ("ttft_ms", "tpot_ms", "latency_ms"))}
        for s in d.get("services", []):
            for a in s.get("assignments", []):
                v = a.get("verified")
                if v is None:
                    if s["name"] in capped and not str(a.get("config", "")).endswith(":measured"):
                        # A configuration the queueing model capped, without a verdict.
                        v = {"verdict": "not checked", "rate_per_s": float("nan"),
                             "reason": "no verification reported for this assignment"
                             + (" (the multi-period planner)" if res["horizon"] else "")}
                    else:
                        continue
                res["checks"].append({"service": s["name"], "config": a.get("config"), "replicas": a.get("replicas"),
                                      **v})
        out["verify" if verify else "plain"] = res
    return out


TIME_LIMIT_S: float | None = None  # --time-limit (None: the workload's own)
_WARM = []


def _warm_simulator() -> None:
    """Load the compiled simulator once per worker (numba import and cache load, ~1-2 s),
    so that neither plan of the first case pays it."""
    if _WARM:
        return
    from solver.perf.queueing import TrafficClass
    from solver.sim.verify import verify_replica
    from queueing_vs_sim import replica_of

    rep = replica_of(("warm", "llama-3.1-8b", "H100-SXM", 1, "fp16", "vllm", None))
    verify_replica(rep, (TrafficClass(1.0, 256, 128),), 1.0, bounds={"ttft_ms": 1e6}, seeds=2, min_tail_requests=10)
    _WARM.append(True)


def _init(time_limit) -> None:
    global TIME_LIMIT_S
    TIME_LIMIT_S = time_limit


def brief(r: dict) -> str:
    """One line per finished case (progress on stderr: a run cut short keeps its figures)."""
    if "error" in r:
        return f"{r['case']}: ERROR {r['error']}"
    parts = []
    for key in ("plain", "verify"):
        v = r.get(key, {})
        if v.get("status") in ("infeasible", "timeout"):
            parts.append(f"{key} {v['status']} after {v['wall_s']:.0f} s ({v['cpu_s']:.0f} CPU-s)")
        elif v:
            verdicts = {k: sum(c["verdict"] == k for c in v.get("checks", [])) for k in VERDICTS}
            parts.append(f"{key} ${v['cost']:.4f}/h in {v['wall_s']:.0f} s ({v['cpu_s']:.0f} CPU-s)"
                         + (f", rounds {v['verify_rounds'] if v.get('verify_rounds') is not None else '-'}, "
                            + " ".join(f"{k} {n}" for k, n in verdicts.items() if n)
                            if key == "verify" else ""))
    return f"{r['case']}: " + "; ".join(parts)


def fmt_cost(x) -> str:
    return "-" if x is None else f"{x:.4f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="llm-platform and four small generated workloads")
    ap.add_argument("--only", help="only cases whose name contains this (or, comma-separated, are one of these)")
    ap.add_argument("--csv", help="write one row per checked configuration to this CSV")
    ap.add_argument("--time-limit", type=float, help="solver.time_limit_s for every plan (default: the workload's; "
                    "the generated ones: 120 s)")
    a = ap.parse_args()
    ex, notes = example_cases()
    if a.quick:
        ex = [c for c in ex if c[0].startswith("llm-platform")]
        gen = generated_cases(QUICK_GENERATED)
    else:
        gen = generated_cases([(n, s) for n in SIZES for s in SEEDS])
    names = set(a.only.split(",")) if a.only and "," in a.only else None
    cases = [c for c in ex + gen if not a.only or (c[0] in names if names else a.only in c[0])]
    print(f"$ {' '.join(['bench/verify_plans.py'] + sys.argv[1:])}  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}); {len(cases)} workloads", flush=True)
    t0 = time.time()
    results = {}
    # Largest first: the pool's two workers end together.
    order = sorted(cases, key=lambda c: -len(c[1].get("services", [])))
    with ProcessPoolExecutor(max_workers=a.jobs, initializer=_init, initargs=(a.time_limit,)) as pool:
        futures = {pool.submit(run_case, c): c[0] for c in order}
        for i, f in enumerate(as_completed(futures)):
            r = f.result()
            results[r["case"]] = r
            print(f"[{i + 1}/{len(cases)}] {time.time() - t0:.0f} s: {brief(r)}", file=sys.stderr, flush=True)
            if "trace" in r:
                print(r["trace"], file=sys.stderr)
    wall = time.time() - t0
    rows = [results[c[0]] for c in cases]

    print(f"\n{'workload':40s} {'svc':>3s} {'p-LLM':>5s} {'used':>4s} {'met':>4s} {'miss':>4s} {'inc':>4s} {'n/c':>4s} "
          f"{'rounds':>6s} {'$/h verified':>12s} {'$/h verify off':>14s} {'+cost':>7s} {'plan s (cpu)':>13s} "
          f"{'off s (cpu)':>12s} {'verify s':>8s}")
    totals = {v: 0 for v in VERDICTS}
    csv_rows = []
    cost_up, times_on, times_off = [], [], []
    errors, failed = [], []
    for r in rows:
        if "error" in r:
            errors.append(r)
            print(f"{r['case']:40s} ERROR {r['error']}")
            continue
        v, p = r.get("verify", {}), r.get("plain", {})
        if v.get("status") in ("infeasible", "timeout"):
            failed.append(r)
            print(f"{r['case']:40s} {r['services']:3d} {r['percentile_llm']:5d} {v['status']} with verification "
                  f"after {v['wall_s']:.0f} s ({v['cpu_s']:.0f} CPU-s): {v['reason'][:150]}"
                  + (f" (verify off: {fmt_cost(p.get('cost'))} $/h in {p['wall_s']:.1f} s)" if p.get("cost")
                     else f" (verify off: {p.get('status')})"))
            continue
        checks = v["checks"]
        counts = {k: sum(c["verdict"] == k for c in checks) for k in VERDICTS}
        for k in VERDICTS:
            totals[k] += counts[k]
        rise = (v["cost"] / p["cost"] - 1) if p.get("cost") else None
        if rise is not None:
            cost_up.append(rise)
        times_on.append(v["cpu_s"])
        if p.get("cpu_s"):
            times_off.append(p["cpu_s"])
        rounds = "-" if v.get("verify_rounds") is None else f"{v['verify_rounds']:.0f}"
        note = " (multi-period planner: no check)" if v.get("horizon") and not checks else ""
        print(f"{r['case']:40s} {r['services']:3d} {r['percentile_llm']:5d} {len(checks):4d} {counts['met']:4d} "
              f"{counts['missed']:4d} {counts['inconclusive']:4d} {counts['not checked']:4d} {rounds:>6s} "
              f"{fmt_cost(v['cost']):>12s} {fmt_cost(p.get('cost')):>14s} "
              f"{'-' if rise is None else format(100 * rise, '+6.2f') + '%':>7s} "
              f"{v['wall_s']:6.1f} ({v['cpu_s']:4.1f}) {p.get('wall_s', 0):5.1f} ({p.get('cpu_s', 0):4.1f}) "
              f"{(v.get('verify_s') or 0):8.1f}{note}")
        for c in checks:
            csv_rows.append({"case": r["case"], **{k: c.get(k) for k in ("service", "config", "replicas", "verdict",
                                                                         "rate_per_s", "requests", "seeds",
                                                                         "ttft_ms_p", "tpot_ms_p", "reason")}})
    for n in notes:
        print(f"not planned: {n}")
    used = sum(totals.values())
    print(f"\n{len(rows)} workloads, {wall:.0f} s wall with {a.jobs} jobs; {len(errors)} errors; "
          f"{len(failed)} without a plan when verifying ("
          + ", ".join(f"{r['case']}: {r['verify']['status']}" for r in failed) + ")")
    print(f"Used configurations checked in the final plans: {used}: " + ", ".join(f"{k} {totals[k]}" for k in VERDICTS)
          + f" -> confirmed {totals['met']}/{used} ({100 * totals['met'] / max(used, 1):.1f} %); target: all "
          f"({'met' if used and totals['met'] == used else 'NOT met'})")
    rounds = [r["verify"].get("verify_rounds") or 0 for r in rows if "verify" in r and r["verify"].get("checks")]
    if rounds:
        print(f"Re-solving rounds after a miss: {sum(1 for x in rounds if x > 0)} of {len(rounds)} plans needed any "
              f"(max {max(rounds):.0f}, total {sum(rounds):.0f})")
    if cost_up:
        print(f"Cost with verification vs verify off: median {100 * statistics.median(cost_up):+.2f} %, max "
              f"{100 * max(cost_up):+.2f} %, {sum(1 for x in cost_up if x > 1e-9)} of {len(cost_up)} plans dearer, "
              f"{sum(1 for x in cost_up if x < -1e-9)} cheaper")
    if times_on and times_off:
        print(f"Plan CPU time: median {statistics.median(times_on):.1f} s with verification, "
              f"{statistics.median(times_off):.1f} s without (ratio of medians "
              f"{statistics.median(times_on) / statistics.median(times_off):.2f}); total {sum(times_on):.0f} vs "
              f"{sum(times_off):.0f} CPU-s")
    bad = [(r["case"], c) for r in rows if "verify" in r and "checks" in r.get("verify", {})
           for c in r["verify"]["checks"] if c["verdict"] != "met"]
    if bad:
        print("\nConfigurations not confirmed (with the command that replans the workload):")
        for case, c in bad:
            print(f"  {case}: {c['service']} on {c['config']} x{c['replicas']} @ {c['rate_per_s']:.4g}/replica: "
                  f"{c['verdict']}: {c['reason'][:300]}\n      PYTHONPATH=. python bench/verify_plans.py --only '{case}'")
    if a.csv and csv_rows:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(csv_rows[0]))
            w.writeheader()
            w.writerows(csv_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
