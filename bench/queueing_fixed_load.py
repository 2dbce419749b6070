#!/usr/bin/env python3
"""Benchmark: the analytic queueing model against the simulator at fixed utilizations.

What it measures: the share of points where the model's p50/p90/p99 TTFT and p50/p99 TPOT
are within 15 % of the simulator's, and the signed median error, for one arrival CV, on
the configurations and mixes of bench/queueing_vs_sim.py (10 x 5) at 2, 10, 30, 50 and
70 % of each replica's saturation rate (250 points).

Why beside queueing_vs_sim.py: that one places its points at the planner's caps, which
move when the model changes; here the rates are fixed fractions of the saturation of the
Poisson model (which a change to bursty arrivals does not move), so two versions of the
model are compared on the very same simulated points. `--cache FILE` keeps the
simulator's results (pickle) for a second run.

How: per point the simulator (`solver.sim.verify.run_replica_seed`, 8 seeds x 5,000
measured requests) and `load_model(replica, mix, cv).at_rate(rate)`.

Command (about 30 s on 2 cores, each CV):

    PYTHONPATH=. .venv/bin/python bench/queueing_fixed_load.py --cv 2 [--cache /tmp/sim2.pkl] [--rows]

Not a test: the figures are recorded in docs/queueing.md.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from queueing_vs_sim import CONFIGS, METRICS, MIXES, TOL, replica_of, simulate  # noqa: E402

UTILIZATIONS = (0.02, 0.1, 0.3, 0.5, 0.7)
SEEDS, PER_SEED = 8, 5000


def _classes(mix: str):
    from solver.perf.queueing import TrafficClass

    return tuple(TrafficClass(*c) for c in MIXES[mix][0])


def _simulate(arg):
    label, mix, u, cv = arg
    from solver.perf.queueing import load_model

    rep = replica_of(next(c for c in CONFIGS if c[0] == label))
    if rep is None:
        return arg, None
    rate = u * load_model(rep, _classes(mix), 1.0).saturation_rate()
    sim = simulate(rep, _classes(mix), rate, cv, SEEDS, PER_SEED, 1)
    return arg, (rate, {k: sim[k] for k in METRICS})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cv", type=float, default=2.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", help="pickle of the simulator's results, read and written")
    ap.add_argument("--rows", action="store_true", help="print every point's signed errors")
    args = ap.parse_args()
    from solver.perf.queueing import load_model

    points = [(c[0], mix, u, args.cv) for c in CONFIGS for mix in MIXES for u in UTILIZATIONS]
    cache = {}
    if args.cache and os.path.exists(args.cache):
        with open(args.cache, "rb") as f:
            cache = pickle.load(f)
    todo = [p for p in points if p not in cache]
    if todo:
        with ProcessPoolExecutor(args.jobs) as ex:
            for arg, res in ex.map(_simulate, todo):
                cache[arg] = res
        if args.cache:
            with open(args.cache, "wb") as f:
                pickle.dump(cache, f)
    replicas, rows = {}, []
    for p in points:
        if cache[p] is None:
            continue
        rate, sim = cache[p]
        label, mix, u, cv = p
        if label not in replicas:
            replicas[label] = replica_of(next(c for c in CONFIGS if c[0] == label))
        rep = replicas[label]
        at = load_model(rep, _classes(mix), cv).at_rate(rate)
        row = {"config": label, "mix": mix, "u": u, "scheduler": rep.scheduler}
        for metric, q in METRICS:
            simulated = sim[(metric, q)][0]
            value = (at.ttft_ms if metric == "ttft_ms" else at.tpot_ms)[q]
            row[f"{metric[:4]}_p{q}"] = value / simulated - 1.0 if simulated > 0 else math.nan
        rows.append(row)
    keys = [f"{m[:4]}_p{q}" for m, q in METRICS]

    def summary(sel, label):
        if sel:
            print(f"{label:26s} {len(sel):4d}  " + "  ".join(
                f"{100 * sum(abs(r[k]) <= TOL for r in sel) / len(sel):5.1f} % ({100 * statistics.median(r[k] for r in sel):+5.1f})"
                for k in keys))

    print(f"arrival CV {args.cv:g}: share within 15 % of the simulator (signed median error) per metric")
    print(f"{'subset':26s} {'n':>4s}  " + "  ".join(f"{k:>16s}" for k in keys))
    summary(rows, "all")
    for s in ("chunked_mixed", "prefill_first"):
        summary([r for r in rows if r["scheduler"] == s], s)
    for u in UTILIZATIONS:
        summary([r for r in rows if r["u"] == u], f"u = {u:g}")
    for mix in MIXES:
        summary([r for r in rows if r["mix"] == mix], mix)
    if args.rows:
        for r in rows:
            print(r["config"], r["mix"], r["u"], " ".join(f"{k} {100 * r[k]:+.0f} %" for k in keys))


if __name__ == "__main__":
    main()
