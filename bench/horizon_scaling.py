#!/usr/bin/env python3
"""Benchmark: multi-period plans and re-plans against the full default catalog.

Cases (issue 9's targets):
  day     24 hourly periods x 20 services, tiers on-demand / spot / reserved 1y and 3y
  week    168 hourly periods x 50 services, the same tiers: best plan and gap in 60 s
  replan  one period, 100 services, re-planned from the fleet a first plan gave
          (demand moved by up to 10 %), with change costs

Services come from bench/solve_scaling.py's generator. Each service gets its own daily
curve: demand x (1 - a/2 + a/2 cos(2 pi (h - phase) / 24)), a in [0.3, 0.7], so the 24 (or
168) periods all differ. The default catalog has spot prices but no public reserved
prices (solver/catalog/data/offer_tiers.csv is empty), so this benchmark ASSUMES reserved
prices of 65 % (1 year) and 45 % (3 years) of on-demand on every offer: a benchmark of the
solver, not a price list. Spot share at most 30 %.

Not a test: run it and record the figures in docs/benchmarks.md.

Usage: python bench/horizon_scaling.py [--case day week replan] [--seeds 1] [--time-limit 60] [--relative-gap 0]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from solve_scaling import generate  # noqa: E402

from solver.catalog.loader import default_catalog  # noqa: E402
from solver.catalog.types import Catalog  # noqa: E402
from solver.plan import PlanOptions, plan  # noqa: E402
from solver.workload.documents import parse_workload  # noqa: E402

RESERVED_1Y, RESERVED_3Y = 0.65, 0.45  # ASSUMED shares of on-demand (see the docstring)


def tier_catalog() -> Catalog:
    base = default_catalog()
    offers = tuple(replace(o, reserved_1y_price_usd_per_hour=round(RESERVED_1Y * o.price_usd_per_hour, 4),
                           reserved_3y_price_usd_per_hour=round(RESERVED_3Y * o.price_usd_per_hour, 4),
                           tier_sources="bench/horizon_scaling.py: assumed shares of on-demand")
                   for o in base.offers)
    return replace(base, offers=offers, description="default catalog + ASSUMED reserved prices (benchmark)")


def with_periods(w: dict, periods: int, seed: int) -> dict:
    rng = random.Random(seed)
    w["periods"] = [{"name": f"h{p:03d}", "hours": 1.0} for p in range(periods)]
    for s in w["services"]:
        phase, amp = rng.uniform(0, 24), rng.uniform(0.3, 0.7)
        s["demand"]["profile"] = {f"h{p:03d}": round(1 - amp / 2 + amp / 2 * math.cos(2 * math.pi * (p - phase) / 24), 3)
                                  for p in range(periods)}
    w["constraints"] = {"pricing_tiers": ["on_demand", "spot", "reserved_1y", "reserved_3y"], "max_spot_share": 0.3}
    return w


def horizon_case(services: int, periods: int, seed: int, limit: float, catalog: Catalog) -> None:
    w = with_periods(generate(services, seed), periods, seed)
    w["solver"] = {"time_limit_s": limit}
    t0 = time.perf_counter()
    d = plan(parse_workload(w), PlanOptions(catalog=catalog)).to_dict()
    total = time.perf_counter() - t0
    hs = d["horizon_solver"]
    t = d["solver"]["timings"]
    reserved = sum(r["gpus"] for r in d["reservations"])
    print(f"{periods:>7} {services:>8} {seed:>4} {hs['distinct_periods']:>8} {t.get('candidates_s', 0):>7.2f} "
          f"{t.get('solve_s', 0):>8.2f} {total:>8.2f} {d['status']:>8} {hs['gap']:>8.4f} {hs['period_solves']:>6} "
          f"{hs['nodes']:>6} {d['horizon_cost_usd']:>12.2f} {hs['bound_usd']:>12.2f} {reserved:>6} "
          f"{d['savings']['savings_fraction'] if d['savings'] else float('nan'):>8.3f}", flush=True)


def replan_workload(services: int, seed: int, limit: float, relative_gap: float = 0.0) -> dict:
    """The re-plan case's workload: a first plan's fleet and replicas running, then each
    service's demand moved by up to 10 % (tests/test_replan_restricted_start.py plans it too)."""
    rng = random.Random(seed)
    w = generate(services, seed)
    w["constraints"] = {"pricing_tiers": ["on_demand"]}
    w["current_fleet"] = []
    w["solver"] = {"time_limit_s": limit}
    first = plan(parse_workload(w)).to_dict()
    fleet = []
    gpus = {a["config"]: (a["gpus_per_replica"], a["precision"]) for s in first["services"] for a in s["assignments"]}
    for line in first["periods"][0]["fleet"]:
        fleet.append({"offer_id": line["offer_id"], "instances": line["instances"], "replicas": []})
    by_offer = {f["offer_id"]: f for f in fleet}
    for s in first["periods"][0]["services"]:
        for a in s["assignments"]:
            g, precision = gpus[a["config"]]
            rep = {"service": s["name"], "count": a["replicas"], "gpus_per_replica": g}
            if precision:
                rep["precision"] = precision
            by_offer[a["offer_id"]]["replicas"].append(rep)
    for s in w["services"]:
        d = s["demand"]
        key = "requests_per_s" if "requests_per_s" in d else "items_per_min"
        d[key] = round(d[key] * rng.uniform(0.9, 1.1), 2)
    w["current_fleet"] = fleet
    w["change_costs"] = {"add_instance_usd": 2.0, "remove_instance_usd": 1.0}
    w["solver"]["relative_gap"] = relative_gap
    return w


def replan_case(services: int, seed: int, limit: float, relative_gap: float = 0.0) -> None:
    """A first plan (fleet and replicas), then demand moves by up to 10 %: re-plan from it
    (to solver.relative_gap). "repl moved": running replicas the plan no longer has where
    they run (per service, offer, GPUs and precision)."""
    w = replan_workload(services, seed, limit, relative_gap)
    fleet = w["current_fleet"]
    t0 = time.perf_counter()
    d = plan(parse_workload(w)).to_dict()
    total = time.perf_counter() - t0
    t = d["solver"]["timings"]
    moved = sum(c["instances"] for c in d["changes"] if c["action"] != "keep")
    kept = sum(c["instances"] for c in d["changes"] if c["action"] == "keep")
    running: dict[tuple, int] = {}
    for f in fleet:
        for r in f["replicas"]:
            key = (r["service"], f["offer_id"], r["gpus_per_replica"], r.get("precision"))
            running[key] = running.get(key, 0) + r["count"]
    planned: dict[tuple, int] = {}
    for s in d["services"]:  # the first period's, with each assignment's shape
        for a in s["assignments"]:
            key = (s["name"], a["offer_id"], a["gpus_per_replica"], a["precision"])
            planned[key] = planned.get(key, 0) + a["replicas"]
    stopped = sum(max(0, n - planned.get(k, 0)) for k, n in running.items())
    print(f"{services:>8} {seed:>4} {t.get('candidates_s', 0):>7.2f} {t.get('solve_s', 0):>8.2f} {total:>8.2f} "
          f"{d['status']:>8} {d['horizon_solver']['gap']:>8.4f} {kept:>6} {moved:>6} {stopped:>10} "
          f"{len(d['rollout']['steps']):>6} {d['rollout']['surge_instances']:>6} {d['horizon_cost_usd']:>10.4f}",
          flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs="+", default=["day", "week", "replan"], choices=["day", "week", "replan"])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--relative-gap", type=float, default=0.0, help="solver.relative_gap of the re-plans")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} (1 min), cores: {os.cpu_count()}")
    catalog = tier_catalog()
    if set(args.case) & {"day", "week"}:
        print(f"{'periods':>7} {'services':>8} {'seed':>4} {'distinct':>8} {'cand s':>7} {'solve s':>8} {'total s':>8} "
              f"{'status':>8} {'gap':>8} {'MIPs':>6} {'nodes':>6} {'horizon $':>12} {'bound $':>12} {'rsvGPU':>6} "
              f"{'savings':>8}")
    for case in args.case:
        for seed in range(args.seeds):
            if case == "day":
                horizon_case(20, 24, seed, args.time_limit, catalog)
            elif case == "week":
                horizon_case(50, 168, seed, args.time_limit, catalog)
    if "replan" in args.case:
        print(f"{'services':>8} {'seed':>4} {'cand s':>7} {'solve s':>8} {'total s':>8} {'status':>8} {'gap':>8} "
              f"{'kept':>6} {'moved':>6} {'repl moved':>10} {'steps':>6} {'surge':>6} {'total $':>10}")
        for seed in range(args.seeds):
            replan_case(100, seed, args.time_limit, args.relative_gap)
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
