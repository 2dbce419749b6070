#!/usr/bin/env python3
"""Benchmark: review throughput, scenarios per second, for 1 and 2 workers.

A generated 20-service workload (LLM services of several sizes plus measured-profile
services) on the default catalog, and 1,000 scenarios of it: the base plus random
combinations of demand, price, quota and SLO changes. Each worker count runs the
whole review into a fresh directory; the figure is scenarios / wall-clock seconds
from the first call to the last result (worker start-up included), then the report's
writing time separately. Not a test: run it and record the figures.

Usage: python bench/review_throughput.py [--scenarios 1000] [--services 20] [--workers 1 2]
                                         [--time-limit 30] [--seed 0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from solver.review import parse_review, run_review, write_report

SMALL_MODELS = ["llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-2-13b", "gemma-2-9b", "llama-3.2-3b"]
BIG_MODELS = ["llama-3.1-70b", "qwen2.5-32b", "mixtral-8x7b"]
PROFILE_GPUS = (("L4", 1.0), ("A10G", 1.2), ("L40S", 2.4), ("A100-80GB", 3.0), ("H100-SXM", 5.0))
PRICED_GPUS = ["H100-SXM", "A100-80GB", "L40S", "L4", "A10G", "H200"]
PROVIDERS = ["aws", "gcp", "lambda", "nebius", "azure", "cudo"]


def workload(n_services: int, rng: random.Random) -> dict:
    services = []
    for i in range(n_services):
        roll = rng.random()
        if roll < 0.2:
            base = rng.uniform(20, 200)
            services.append({"name": f"svc{i}", "demand": {"items_per_min": round(rng.uniform(50, 2000), 1)},
                             "slo": {"latency_ms": 2500},
                             "profiles": [{"gpu": g, "items_per_min": round(base * f, 1), "latency_ms": round(2000 / f)}
                                          for g, f in PROFILE_GPUS]})
            continue
        model = rng.choice(SMALL_MODELS if roll < 0.85 else BIG_MODELS)
        services.append({"name": f"svc{i}", "model": model, "precisions": rng.choice([["fp16"], ["fp16", "fp8"]]),
                         "demand": {"requests_per_s": round(rng.uniform(0.5, 20), 2),
                                    "prompt_tokens": rng.choice([256, 512, 1024]),
                                    "output_tokens": rng.choice([128, 256])},
                         "slo": {"ttft_ms": rng.choice([1500, 3000]), "tpot_ms": rng.choice([50, 80])},
                         "min_replicas": rng.choice([0, 1])})
    return {"name": f"bench-{n_services}", "services": services,
            "constraints": {"gpu_quotas": {"H100-SXM": 32, "A100-80GB": 32}}}


def random_change(rng: random.Random, services: list[dict]) -> dict:
    kind = rng.choice(["demand", "demand", "service_demand", "price", "provider_price", "quota", "slo"])
    if kind == "demand":
        return {"demand": {"factor": round(rng.uniform(0.5, 3.0), 2)}}
    if kind == "service_demand":
        return {"demand": {"service": rng.choice(services)["name"], "factor": round(rng.uniform(0.5, 4.0), 2)}}
    if kind == "price":
        return {"price": {"gpu": rng.choice(PRICED_GPUS), "factor": round(rng.uniform(0.5, 1.5), 2)}}
    if kind == "provider_price":
        return {"price": {"provider": rng.choice(PROVIDERS), "factor": round(rng.uniform(0.7, 1.3), 2)}}
    if kind == "quota":
        return {"gpu_quota": {"gpu": rng.choice(["H100-SXM", "A100-80GB"]), "gpus": rng.choice([0, 8, 16, 64])}}
    llm = [s for s in services if "model" in s]
    svc = rng.choice(llm)
    return {"slo": {"service": svc["name"], "tpot_ms": rng.choice([30, 40, 60, 100, 150])}}


def review(n_scenarios: int, n_services: int, seed: int, time_limit_s: float) -> dict:
    rng = random.Random(seed)
    base = workload(n_services, rng)
    scenarios = [{"name": f"s{i:04d}", "changes": [random_change(rng, base["services"]) for _ in range(rng.randint(1, 3))]}
                 for i in range(n_scenarios - 1)]  # plus the base
    return {"name": "throughput", "base": {"workload": base}, "scenarios": scenarios,
            "sensitivity": {"enabled": False}, "time_limit_per_scenario_s": time_limit_s}


def _cpu_s() -> tuple[float, float]:
    """(this process, its finished children) user+system CPU seconds; pool workers count once joined."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", type=int, default=1000)
    ap.add_argument("--services", type=int, default=20)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--time-limit", type=float, default=30.0, help="per scenario, seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="local", choices=["local", "ray"])
    ap.add_argument("--keep", help="keep the last run's output (results and report) in this directory")
    args = ap.parse_args()
    rv = parse_review(review(args.scenarios, args.services, args.seed, args.time_limit))
    print(f"{len(rv.scenarios)} scenarios of a {len(rv.workload.services)}-service workload, "
          f"{len(rv.catalog.offers)} offers, backend {args.backend}", flush=True)
    rates = {}
    for workers in args.workers:
        out = Path(tempfile.mkdtemp(prefix=f"review-bench-{workers}w-"))
        own0, kids0 = _cpu_s()
        t0 = time.perf_counter()
        results = list(run_review(rv, out, workers=workers, backend=args.backend))
        elapsed = time.perf_counter() - t0
        own1, kids1 = _cpu_s()
        rates[workers] = len(results) / elapsed
        counts = Counter(r.status for r in results)
        solve = sorted(r.wall_s for r in results)
        print(f"workers={workers}: {len(results)} scenarios in {elapsed:.1f} s = {rates[workers]:.3f} scenarios/s "
              f"({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}); per scenario median "
              f"{solve[len(solve) // 2]:.3f} s, max {solve[-1]:.3f} s", flush=True)
        # CPU seconds say whether the cores were ours: workers' CPU / wall near `workers` means
        # they ran flat out; much less means other processes shared the cores.
        print(f"  CPU: workers {kids1 - kids0:.0f} s ({(kids1 - kids0) / elapsed:.2f} cores busy on average, "
              f"{(kids1 - kids0) / len(results):.3f} CPU-s per scenario), this process {own1 - own0:.1f} s; "
              f"load average now {os.getloadavg()[0]:.1f}", flush=True)
        # What the figure would be with `workers` cores to ourselves: every CPU-second spent
        # (workers and this process, start-up included) over that many cores.
        total = (kids1 - kids0) + (own1 - own0)
        print(f"  all together {total / len(results):.3f} CPU-s per scenario: {workers * len(results) / total:.2f} "
              f"scenarios/s on {workers} free core(s)", flush=True)
        t1 = time.perf_counter()
        write_report(rv, results, out)
        print(f"  report for {len(results)} scenarios written in {time.perf_counter() - t1:.1f} s", flush=True)
        if args.keep:
            shutil.rmtree(args.keep, ignore_errors=True)
            shutil.copytree(out, args.keep)
        shutil.rmtree(out, ignore_errors=True)
    if len(rates) > 1:
        lo, hi = min(rates), max(rates)
        print(f"speed-up {hi} vs {lo} workers: {rates[hi] / rates[lo]:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
