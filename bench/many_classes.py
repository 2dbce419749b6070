#!/usr/bin/env python3
"""Benchmark: request-size routing with many classes (Mélange-style buckets).

One Llama-3.1-8B service whose traffic is split into an I x O grid of input/output
length buckets (log-spaced, shares from a skewed distribution), planned over eight GPU
types of the default catalog. Prints the model size and the time of each stage, cold
(no cached estimates) and warm. Target (issue 13): a 100-bucket, 8-GPU-type routing
problem proven optimal in <= 1 s.

Usage: python bench/many_classes.py [--inputs 10] [--outputs 10] [--rate 40]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.compile.candidates import CandidateCache  # noqa: E402
from solver.plan import PlanOptions, plan  # noqa: E402
from solver.workload.documents import parse_workload  # noqa: E402

GPU_TYPES = ["L4", "A10G", "L40S", "A100-80GB", "H100-SXM", "H200", "A100-40GB", "RTX-A6000"]


def workload(n_in: int, n_out: int, rate: float) -> dict:
    inputs = [int(64 * 2 ** (i * 7 / max(n_in - 1, 1))) for i in range(n_in)]  # 64 .. 8192 tokens
    outputs = [int(16 * 2 ** (j * 6 / max(n_out - 1, 1))) for j in range(n_out)]  # 16 .. 1024 tokens
    weights = [[1.0 / (1 + i) / (1 + j) for j in range(n_out)] for i in range(n_in)]
    total = sum(map(sum, weights))
    classes = [{"name": f"i{p}-o{o}", "share": weights[i][j] / total, "prompt_tokens": p, "output_tokens": o}
               for i, p in enumerate(inputs) for j, o in enumerate(outputs)]
    drift = 1.0 - sum(c["share"] for c in classes)
    classes[0]["share"] += drift  # shares must sum to exactly 1
    return {"name": f"buckets-{n_in}x{n_out}", "services": [{
        "name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
        "demand": {"requests_per_s": rate, "classes": classes}, "slo": {"tpot_ms": 80, "ttft_ms": 5000}}],
        "constraints": {"gpu_types": GPU_TYPES}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=10)
    ap.add_argument("--outputs", type=int, default=10)
    ap.add_argument("--rate", type=float, default=40.0)
    args = ap.parse_args()
    w = parse_workload(workload(args.inputs, args.outputs, args.rate))
    cache = CandidateCache()
    for label in ("cold", "warm"):
        t0 = time.perf_counter()
        r = plan(w, PlanOptions(cache=cache))
        total = time.perf_counter() - t0
        size = r.solver.model_size
        print(f"{label}: {len(w.services[0].demand.classes)} classes, {r.status}, gap {r.solver.gap}, "
              f"${r.total_price_usd_per_hour:.4f}/h, {size['variables']} vars ({size['integer_variables']} integer), "
              f"{size['constraints']} rows; total {total:.3f} s; stages "
              + ", ".join(f"{k} {v:.3f}" for k, v in r.solver.timings.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
