#!/usr/bin/env python3
"""Benchmark: the analytic queueing model against the discrete-event simulator.

A grid of configurations (model x GPU x GPUs per replica) x request lengths (and a
two-class mix, and bursty arrivals) x loads from low up to the planner's maximum
(`DEFAULT_MAX_UTILIZATION` of the replica's saturation rate, the most the planner ever
routes to one replica). Per point it prints analytic and simulated p50/p90/p99 TTFT and
p50/p99 TPOT with relative errors, then a summary: share of points within 15 %, median
and worst errors. Not a test: run it and record the figures in docs/queueing.md.

Each point simulates about --requests requests (at least --min-duration-s), two seeds
pooled; the seed-to-seed spread of the simulated p99 TTFT is printed as the simulator's
own noise. The configurations and lengths here were not used to shape the model (the one
fitted exponent came from the nine configurations listed in docs/queueing.md).

Usage: python bench/queueing_accuracy.py [--jobs 2] [--requests 20000] [--quick] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

# (model, GPU type, GPUs per replica, precision)
CONFIGS = [
    ("llama-2-7b", "A10G", 1, "fp16"),
    ("qwen2.5-7b", "H200", 1, "fp16"),
    ("llama-3.1-8b", "A100-40GB", 1, "fp16"),
    ("gemma-2-9b", "L40S", 1, "fp16"),
    ("llama-3.1-8b", "L4", 1, "fp8"),
    ("mixtral-8x7b", "H100-SXM", 2, "fp16"),
    ("qwen2.5-32b", "A100-80GB", 2, "fp16"),
    ("llama-3.1-70b", "H200", 4, "fp8"),
]
# (name, [(share, prompt, output)], arrival_cv)
MIXES = [
    ("256/128", [(1.0, 256, 128)], 1.0),
    ("1024/256", [(1.0, 1024, 256)], 1.0),
    ("3000/300", [(1.0, 3000, 300)], 1.0),
    ("400/900", [(1.0, 400, 900)], 1.0),
]
EXTRA = [  # two-class mix and bursty arrivals on some configurations
    ("mix 0.7x300/150+0.3x3500/400", [(0.7, 300, 150), (0.3, 3500, 400)], 1.0, (0, 1, 2, 3)),
    ("cv2 700/200", [(1.0, 700, 200)], 2.0, (1, 3)),
    ("cv0.5 700/200", [(1.0, 700, 200)], 0.5, (1,)),
]
LOADS = (0.2, 0.4, 0.6, 0.75, 0.85, 0.9)
QUICK_LOADS = (0.3, 0.7, 0.9)


def replica(model_name: str, gpu_name: str, gpus: int, precision: str):
    from solver.catalog import default_catalog
    from solver.catalog.hosting import cheapest_host, unbought_host
    from solver.models.library import get_model
    from solver.perf import PerfQuery, estimate
    from solver.perf.queueing import replica_for

    catalog = default_catalog()
    gpu = catalog.gpus[gpu_name]
    host = cheapest_host(catalog, gpu, gpus) or unbought_host(gpu, gpus)
    q = PerfQuery(model=get_model(model_name), gpu=gpu, gpus_per_replica=gpus, interconnect=host.interconnect,
                  usable_memory_gib=host.usable_memory_gib, precision=precision,
                  instances_per_replica=host.instances_per_replica, inter_node_gbs=host.inter_node_gbs)
    if not estimate(q).feasible:
        return None
    return replica_for(q)


def run_point(args: tuple) -> dict:
    try:
        return _run_point(args)
    except Exception as exc:  # one broken point must not lose the others
        return {"skip": f"{args[0]} {args[1]} load {args[4]}: {type(exc).__name__}: {exc}"}


def _run_point(args: tuple) -> dict:
    (cfg, mix_name, mix, cv, load, requests, min_duration, max_duration) = args
    from solver.perf.queueing import ReplicaLoadModel, TrafficClass
    from solver.sim.replica import simulate_replica

    rep = replica(*cfg)
    classes = [TrafficClass(s, p, o) for s, p, o in mix]
    if rep is None:
        return {"skip": f"{cfg} does not fit"}
    model = ReplicaLoadModel(rep, classes, cv)
    if model.slots < 1:
        return {"skip": f"{cfg} {mix_name}: no slot fits"}
    sat = model.saturation_rate()
    rate = load * sat
    t0 = time.perf_counter()
    an = model.at_rate(rate)
    t_an = time.perf_counter() - t0
    duration = min(max(min_duration, requests / rate), max_duration)
    t0 = time.perf_counter()
    ttft, tpot, p99s = [], [], []
    for seed in (1, 2):
        sim = simulate_replica(rep, classes, rate, max_seqs=rep.max_seqs,
                               kv_cache_tokens=rep.kv_cache_tokens, token_budget=rep.token_budget,
                               request_overhead_s=rep.request_overhead_s, duration_s=duration / 2, seed=seed,
                               arrival_cv=cv)
        ttft.append(sim.ttft_s)
        tpot.append(sim.tpot_s)
        p99s.append(float(np.percentile(sim.ttft_s, 99)))
    t_sim = time.perf_counter() - t0
    ttft_all = np.concatenate(ttft) * 1e3
    tpot_all = np.concatenate(tpot) * 1e3
    out = {"model": cfg[0], "gpu": cfg[1], "gpus": cfg[2], "precision": cfg[3], "mix": mix_name, "cv": cv,
           "load": load, "rate_per_s": rate, "slots": model.slots, "requests": int(len(ttft_all)),
           "analytic_ms_per_call": t_an * 1e3, "sim_s": t_sim,
           "sim_p99_seed_spread": abs(p99s[0] - p99s[1]) / max(min(p99s), 1e-12)}
    for p in (50, 90, 99):
        out[f"ttft_p{p}_an"] = an.ttft_ms[p]
        out[f"ttft_p{p}_sim"] = float(np.percentile(ttft_all, p))
    for p in (50, 99):
        out[f"tpot_p{p}_an"] = an.tpot_ms[p]
        out[f"tpot_p{p}_sim"] = float(np.nanpercentile(tpot_all, p))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--requests", type=int, default=20000, help="simulated requests per point (two seeds)")
    ap.add_argument("--min-duration-s", type=float, default=600.0)
    ap.add_argument("--max-duration-s", type=float, default=20000.0, help="simulated seconds per point at most")
    ap.add_argument("--quick", action="store_true", help="a few points only (minutes)")
    ap.add_argument("--csv", help="also write every point to this CSV")
    a = ap.parse_args()

    points = []
    loads = QUICK_LOADS if a.quick else LOADS
    configs = CONFIGS[:3] if a.quick else CONFIGS
    mixes = MIXES[:2] if a.quick else MIXES
    for cfg in configs:
        for name, mix, cv in mixes:
            for load in loads:
                points.append((cfg, name, mix, cv, load, a.requests, a.min_duration_s, a.max_duration_s))
    if not a.quick:
        for name, mix, cv, which in EXTRA:
            for i in which:
                for load in loads:
                    points.append((CONFIGS[i], name, mix, cv, load, a.requests, a.min_duration_s, a.max_duration_s))
    t0 = time.time()
    rows = []
    out = open(a.csv, "w", newline="") if a.csv else None
    writer = None
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        for i, r in enumerate(pool.map(run_point, points)):
            rows.append(r)
            if out is not None and "skip" not in r:  # written as they come: a long run keeps what it has
                if writer is None:
                    writer = csv.DictWriter(out, fieldnames=list(r))
                    writer.writeheader()
                writer.writerow(r)
                out.flush()
            if "skip" not in r:
                print(f"[{i + 1}/{len(points)}] {r['model']} {r['gpu']} {r['mix']} load {r['load']}: TTFT p99 "
                      f"{r['ttft_p99_an']:.1f}/{r['ttft_p99_sim']:.1f} ms", file=sys.stderr, flush=True)
    skipped = [r["skip"] for r in rows if "skip" in r]
    rows = [r for r in rows if "skip" not in r]
    metrics = [("ttft", 50), ("ttft", 90), ("ttft", 99), ("tpot", 50), ("tpot", 99)]
    head = f"{'model':14s} {'gpu':9s} {'g':>1s} {'prec':4s} {'mix':28s} {'load':>4s} {'rate/s':>8s}"
    head += "".join(f" {m.upper()} p{p} an/sim (err)".rjust(30) for m, p in metrics)
    print(head)
    errs = {mp: [] for mp in metrics}
    for r in rows:
        line = (f"{r['model']:14s} {r['gpu']:9s} {r['gpus']:1d} {r['precision']:4s} {r['mix']:28s} {r['load']:4.2f} "
                f"{r['rate_per_s']:8.3f}")
        for m, p in metrics:
            an, sim = r[f"{m}_p{p}_an"], r[f"{m}_p{p}_sim"]
            e = an / sim - 1 if sim > 0 and math.isfinite(an) else math.inf
            errs[(m, p)].append(abs(e))
            line += f" {an:10.1f}/{sim:10.1f} ({100 * e:+5.0f}%)"
        print(line)
    for why in skipped:
        print(f"skipped: {why}")
    print(f"\n{len(rows)} points ({len(skipped)} skipped), "
          f"{time.time() - t0:.0f} s wall with {a.jobs} jobs")
    for (m, p), e in errs.items():
        within = sum(1 for x in e if x <= 0.15) / len(e)
        print(f"{m.upper()} p{p}: within 15 %: {100 * within:5.1f} % of points; median |err| {100 * statistics.median(e):4.1f} %; "
              f"90th pct |err| {100 * float(np.percentile(e, 90)):5.1f} %; worst {100 * max(e):6.1f} %")
    spread = [r["sim_p99_seed_spread"] for r in rows]
    print(f"simulator noise: median seed-to-seed difference of p99 TTFT {100 * statistics.median(spread):.1f} % "
          f"(90th pct {100 * float(np.percentile(spread, 90)):.1f} %)")
    cost = [r["analytic_ms_per_call"] for r in rows]
    print(f"analytic model: median {statistics.median(cost):.1f} ms per at-rate call (this machine, under its load)")
    if out is not None:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
