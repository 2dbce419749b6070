#!/usr/bin/env python3
"""Benchmark: one no-load performance estimate (solver.perf.estimate), in one process.

48 queries (Llama-3.1-8B, Llama-2-70B and Mixtral-8x7B on A10G, L40S, A100-80GB and
H100-SXM with 1, 2, 4 and 8 GPUs per replica, a TPOT SLO of 50 ms), each estimated five
times after one warm-up pass; prints the mean milliseconds per estimate (the target: well
under 1 ms, so that candidate generation over a whole catalog stays interactive). Run it on
two checkouts back to back to compare:

    PYTHONPATH=/path/to/checkout python bench/estimate_speed.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_perf_model import CHAT, query  # noqa: E402

from solver.perf import estimate  # noqa: E402


def main() -> int:
    queries = [query(m, g, gpus=n, tpot_slo_ms=50, **CHAT) for m in ("llama-3.1-8b", "llama-2-70b", "mixtral-8x7b")
               for g in ("A10G", "L40S", "A100-80GB", "H100-SXM") for n in (1, 2, 4, 8)]
    for q in queries:
        estimate(q)
    start = time.perf_counter()
    for _ in range(5):
        for q in queries:
            estimate(q)
    per_estimate_ms = (time.perf_counter() - start) / (5 * len(queries)) * 1e3
    print(f"{len(queries)} queries x 5: {per_estimate_ms:.3f} ms per estimate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
