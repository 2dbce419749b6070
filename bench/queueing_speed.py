#!/usr/bin/env python3
"""Benchmark: what percentile SLOs (the queueing model's caps) add to a plan, in CPU time.

Plans (a) examples/llm-platform.json with `"percentile": 99` added to every LLM service's
SLO, and the same with no percentile anywhere; (b) the generated N-service workload of bench/solve_scaling.py
with percentile 99 on every LLM service with a TTFT/TPOT SLO, and the same without. Each
case runs in a fresh process (every cache cold; candidate cache off). Prints CPU
seconds (time.process_time: the machine may be shared), the number of cap computations
(`max_rate_for_slo` calls from solver/compile/load_caps.py, cache misses only) and the
CPU milliseconds per call spent inside them. Not a test: record the figures in
docs/queueing.md ("Speed").

Usage: python bench/queueing_speed.py [--services 20] [--seed 0] [--repeat 1]
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from solve_scaling import generate  # noqa: E402

import solver.compile.load_caps as load_caps  # noqa: E402
from solver.caches import clear_all  # noqa: E402
from solver.plan import PlanOptions, plan  # noqa: E402
from solver.workload.documents import parse_workload  # noqa: E402

_calls = {"n": 0, "cpu": 0.0}
_inner = load_caps.max_rate_for_slo


def _counted(*args, **kwargs):
    t0 = time.process_time()
    try:
        return _inner(*args, **kwargs)
    finally:
        _calls["n"] += 1
        _calls["cpu"] += time.process_time() - t0


load_caps.max_rate_for_slo = _counted


def with_percentile(doc: dict, p: int = 99) -> dict:
    """A copy with `percentile: p` on every LLM service that states a TTFT or TPOT bound."""
    d = copy.deepcopy(doc)
    for s in d["services"]:
        slo = s.get("slo")
        if s.get("model") and slo and ("ttft_ms" in slo or "tpot_ms" in slo):
            slo["percentile"] = p
    return d


def without_percentile(doc: dict) -> dict:
    """A copy with no percentile SLO anywhere (the example states p99 on its LLM services)."""
    d = copy.deepcopy(doc)
    for s in d["services"]:
        (s.get("slo") or {}).pop("percentile", None)
    return d


def run(doc: dict, repeat: int) -> tuple[float, int, float, float]:
    """Best-of-`repeat` plan, caches cleared: (CPU s, cap calls, CPU s in cap calls, plan price)."""
    best = None
    for _ in range(repeat):
        clear_all()
        _calls.update(n=0, cpu=0.0)
        workload = parse_workload(doc)
        t0 = time.process_time()
        r = plan(workload, PlanOptions(cache=None))
        cpu = time.process_time() - t0
        row = (cpu, _calls["n"], _calls["cpu"], r.total_price_usd_per_hour)
        if best is None or row[0] < best[0]:
            best = row
    return best


def cases(services: int, seed: int) -> dict:
    example = json.loads((ROOT / "examples" / "llm-platform.json").read_text())
    generated = generate(services, seed)
    return {"llm-platform p99": with_percentile(example), "llm-platform": without_percentile(example),
            f"generated-{services} p99": with_percentile(generated), f"generated-{services}": without_percentile(generated)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--services", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1, help="cold runs per case; the fastest is shown")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # run one case here (the parent starts a process per case)
    args = ap.parse_args()
    docs = cases(args.services, args.seed)
    if args.case:
        print(json.dumps(run(docs[args.case], 1)))
        return 0
    print(f"{'case':<22} {'CPU s':>7} {'caps':>5} {'cap CPU s':>9} {'ms/cap':>7} {'$/hour':>9}")
    for name in docs:
        rows = []
        for _ in range(args.repeat):
            done = subprocess.run([sys.executable, __file__, "--services", str(args.services), "--seed", str(args.seed),
                                   "--case", name], capture_output=True, text=True)
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["?"])[-1]
                print(f"{name:<22} failed: {last}", flush=True)
                continue
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if not rows:
            continue
        cpu, n, cap_cpu, price = min(rows)
        per = f"{cap_cpu / n * 1e3:7.1f}" if n else f"{'-':>7}"
        print(f"{name:<22} {cpu:7.2f} {n:5d} {cap_cpu:9.2f} {per} {price:9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
