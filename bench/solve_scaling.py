#!/usr/bin/env python3
"""Benchmark: generated workloads of N services against the full default catalog.

Prints, per size: candidate configurations, MIP size, build/solve/total time, status
and gap. Not a test: run it and record the figures in docs/benchmarks.md.

Usage: python bench/solve_scaling.py [--sizes 10 50 100 200] [--seeds 3] [--backend auto] [--relative-gap 0.0001]
                                    [--no-prefetch]

With --relative-gap the plan is proven within that fraction of the optimum instead of
exactly; "warm s" is then the time of the small MIPs that start it (solver/optimize/warm_start.py).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.plan import PlanOptions, plan  # noqa: E402
from solver.workload.documents import parse_workload  # noqa: E402

SMALL_MODELS = ["llama-2-7b", "llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-2-13b"]
BIG_MODELS = ["llama-2-70b", "llama-3.1-70b", "qwen2.5-32b", "qwen2.5-72b", "mixtral-8x7b"]


def generate(n_services: int, seed: int) -> dict:
    rng = random.Random(seed)
    services = []
    for i in range(n_services):
        roll = rng.random()
        if roll < 0.15:
            # Non-LLM service with measured profiles (images/embeddings).
            base = rng.uniform(20, 200)
            services.append({
                "name": f"svc{i}", "demand": {"items_per_min": round(rng.uniform(50, 3000), 1)},
                "profiles": [{"gpu": g, "items_per_min": round(base * f, 1), "latency_ms": round(2000 / f)}
                             for g, f in (("L4", 1.0), ("A10G", 1.2), ("L40S", 2.4), ("A100-80GB", 3.0), ("H100-SXM", 5.0))],
            })
            continue
        model = rng.choice(SMALL_MODELS if roll < 0.75 else BIG_MODELS)
        svc = {
            "name": f"svc{i}", "model": model,
            "precisions": rng.choice([["fp16"], ["fp16", "fp8"]]),
            "demand": {"requests_per_s": round(rng.uniform(0.2, 30), 2),
                       "prompt_tokens": rng.choice([128, 512, 1024, 2048]),
                       "output_tokens": rng.choice([64, 128, 256, 512])},
            "slo": {"ttft_ms": rng.choice([1000, 2000, 5000]), "tpot_ms": rng.choice([40, 60, 100])},
            "min_replicas": rng.choice([0, 1, 1, 2]),
        }
        services.append(svc)
    return {"name": f"bench-{n_services}-{seed}", "services": services,
            "solver": {"time_limit_s": 120}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 100, 200])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--relative-gap", type=float, default=0.0, help="solver.relative_gap (0: prove the optimum)")
    ap.add_argument("--time-limit", type=float, default=120.0, help="solver.time_limit_s")
    ap.add_argument("--no-prefetch", action="store_true",
                    help="no values under load computed during the solve (solver/output/prefetch.py): the A/B baseline")
    args = ap.parse_args()
    print(f"{'services':>8} {'seed':>4} {'configs':>7} {'int vars':>8} {'rows':>6} {'cand s':>7} {'model s':>7} "
          f"{'warm s':>7} {'solve s':>8} {'ties s':>7} {'total s':>8} {'status':>8} {'gap':>8} {'$/hour':>10}")
    for n in args.sizes:
        totals = []
        for seed in range(args.seeds):
            doc = generate(n, seed)
            doc["solver"] = {"time_limit_s": args.time_limit, "relative_gap": args.relative_gap}
            workload = parse_workload(doc)
            t0 = time.perf_counter()
            r = plan(workload, PlanOptions(backend=args.backend, prefetch_at_load=not args.no_prefetch))
            total = time.perf_counter() - t0
            totals.append(total)
            s = r.solver
            t = s.timings
            print(f"{n:>8} {seed:>4} {s.candidates:>7} {s.model_size['integer_variables']:>8} {s.model_size['constraints']:>6} "
                  f"{t['candidates_s']:>7.2f} {t['formulation_s']:>7.2f} {t.get('warm_start_s', 0):>7.2f} {t['solve_s']:>8.3f} {t.get('tie_break_s', 0):>7.2f} {total:>8.3f} {r.status:>8} {s.gap if s.gap is not None else float('nan'):>8.2g} "
                  f"{r.total_price_usd_per_hour:>10.2f}", flush=True)
        print(f"{n:>8}  median total {statistics.median(totals):.3f} s, max {max(totals):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
