#!/usr/bin/env python3
"""Benchmark: do verify_replica's 95 % intervals cover the true percentile 95 % of the time?

Per point (configuration x load x metric x percentile): the "true" percentile from a
long run (--truth-requests, 32 seeds pooled; its own interval is printed as +-), then
--reps independent verifications of the default size (4 seeds, 200 requests beyond the
percentile in total) with fresh seeds; counted: how often each interval holds the truth,
and its mean width relative to the truth. Last column, what the planner acts on: with
the bound 10 % below the truth (the configuration misses), how often verify_replica, with
its rules for more and longer seeds, still says "met" (a valid one-sided 95 % interval:
at most ~2.5 %), and how many requests it used on average.
* sectioning (what verify_replica reports): pooled percentile +- t(3) x sd(seed percentiles) / 2;
* sectioning with a normal quantile (1.96 instead of t(3) = 3.18): what ignoring the few seeds costs;
* i.i.d. order statistics: the binomial interval of the pooled requests, ranks n p +- 1.96 sqrt(n p (1 - p)),
  as if requests were independent (they are not: neighbours share a queue).

Usage: python bench/sim_ci_coverage.py [--reps 200] [--truth-requests 2000000] [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

POINTS = [  # (label, config, mix, cv, load, percentile)
    ("8b/H100 1024/256", ("llama-3.1-8b", "H100-SXM", 1, "fp16"), [(1.0, 1024, 256)], 1.0, 0.6, 99),
    ("8b/H100 1024/256", ("llama-3.1-8b", "H100-SXM", 1, "fp16"), [(1.0, 1024, 256)], 1.0, 0.85, 99),
    ("8b/H100 1024/256", ("llama-3.1-8b", "H100-SXM", 1, "fp16"), [(1.0, 1024, 256)], 1.0, 0.85, 90),
    ("7b/A10G mix (KV-limited)", ("llama-2-7b", "A10G", 1, "fp16"), [(0.7, 300, 150), (0.3, 3500, 400)], 1.0, 0.75,
     99),
    ("8b/L4 fp8 700/200 cv2", ("llama-3.1-8b", "L4", 1, "fp8"), [(1.0, 700, 200)], 2.0, 0.8, 99),
]
METRICS = ("ttft_ms", "tpot_ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--truth-requests", type=int, default=16_000_000, help="requests of the long run (32 seeds)")
    ap.add_argument("--quick", action="store_true", help="first two points, 50 reps, 1,600,000-request truth")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.truth_requests = 50, 1_600_000
    from queueing_accuracy import replica

    from solver.perf.queueing import ReplicaLoadModel, TrafficClass
    from solver.sim.stats import sectioned_percentile, t_quantile
    from solver.sim.verify import requests_for, run_replica_seed, seed_rng, verify_replica

    points = POINTS[:2] if a.quick else POINTS
    print(f"{a.reps} verifications per point (4 seeds, 200 requests beyond the percentile); truth from "
          f"{a.truth_requests:,} requests; coverage of the truth (mean width / truth)")
    print(f"{'point':44} {'metric':8} {'truth ms':>9} {'+-':>7} {'sectioning t':>16} {'sectioning z':>16} "
          f"{'iid binomial':>16} {'met at 0.9 truth':>16}")
    t0 = time.perf_counter()
    for label, cfg, mix, cv, load, p in points:
        rep = replica(*cfg)
        classes = [TrafficClass(s, pt, o) for s, pt, o in mix]
        rate = load * ReplicaLoadModel(rep, classes, cv).saturation_rate()
        # The truth: 32 long replications pooled (its own sectioning interval printed: heavy tails need millions).
        truth_runs = [run_replica_seed(rep, classes, rate, arrival_cv=cv, scheduler="chunked_mixed",
                                       rng=seed_rng(10_000, i), measured=a.truth_requests // 32, warmup=20_000)
                      for i in range(32)]
        z = 1.959963984540054
        t3 = t_quantile(0.975, 3)
        for m in METRICS:
            truth_est = sectioned_percentile([[(r.metrics[m], 1.0)] for r in truth_runs], p)
            truth = truth_est.value_ms
            hits = {"t": 0, "z": 0, "iid": 0}
            widths = {"t": [], "z": [], "iid": []}
            for r in range(a.reps):
                v = verify_replica(rep, classes, rate, arrival_cv=cv, percentile=p, bounds={}, seed=r)
                e = v.estimates[m]
                sd = float(np.std(e.per_seed_ms, ddof=1)) / math.sqrt(len(e.per_seed_ms))
                for key, q in (("t", t3), ("z", z)):
                    lo, hi = e.value_ms - q * sd, e.value_ms + q * sd
                    hits[key] += lo <= truth <= hi
                    widths[key].append(hi - lo)
                pooled = np.sort(np.concatenate([run.metrics[m] for run in v.runs]))
                pooled = pooled[~np.isnan(pooled)]
                n = len(pooled)
                half = z * math.sqrt(n * p / 100 * (1 - p / 100))
                lo = pooled[max(int(math.floor(n * p / 100 - half)) - 1, 0)]
                hi = pooled[min(int(math.ceil(n * p / 100 + half)) - 1, n - 1)]
                hits["iid"] += lo <= truth <= hi
                widths["iid"].append(hi - lo)
            wrong, used = 0, []
            for r in range(a.reps):
                v = verify_replica(rep, classes, rate, arrival_cv=cv, percentile=p, bounds={m: 0.9 * truth},
                                   seed=50_000 + r)
                wrong += v.verdict == "met"
                used.append(v.requests)
            cells = [f"{100 * hits[k] / a.reps:5.1f} % ({np.mean(widths[k]) / truth:5.3f})" for k in ("t", "z", "iid")]
            cells.append(f"{100 * wrong / a.reps:4.1f} % ({np.mean(used) / 1000:,.0f}k)")
            truth_pm = 100 * (truth_est.ci_ms[1] - truth) / truth
            print(f"{label + f' @{load:g} p{p}':44} {m:8} {truth:>9.1f} {truth_pm:>5.1f} % {cells[0]:>16} "
                  f"{cells[1]:>16} {cells[2]:>16} {cells[3]:>16}")
    print(f"({time.perf_counter() - t0:.0f} s; requests per verification: {requests_for(99):,} at p99, "
          f"{max(requests_for(90), 4000):,} at p90 (4 seeds x at least 1,000))")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
