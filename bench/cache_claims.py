#!/usr/bin/env python3
"""Benchmark: waiting for room in the KV cache - the queueing model against the simulator on mixed lengths.

What it measures: on replicas whose KV cache holds a few to a few dozen sequences of a
mixed-length traffic (the regime where a long prompt waits for room while far fewer than N
sequences run, docs/queueing.md "Waiting for room in the KV cache"), at several fractions
of the model's saturation and arrival CV 1 and 2:
* the share of requests that wait for admission (the simulator's `waited`: a step started
  without admitting it - which also counts waits for the token budget, so compare it only
  where prompts are short against the budget) against the model's `wait_probability`;
* p90 and p99 TTFT, model / simulator;
* the p99 TTFT the simulator measures at the model's own cap for a p99 TTFT bound
  (`max_rate_for_slo`, the replica as modelled): does the planner's promise hold?

The replicas are built from the whole GPU memory, one GPU, fp16 (as tests/test_cache_claims.py).
The simulator runs --seeds independent replications of --requests measured requests each
(Poisson or gamma-renewal arrivals), pooled.

Command (about a minute on the shared 2-core machine with --jobs 2):

    PYTHONPATH=. .venv/bin/python bench/cache_claims.py --jobs 2
    # the code before a change, side by side: run it from a worktree of that commit
    git worktree add --detach /tmp/before <rev>
    PYTHONPATH=/tmp/before .venv/bin/python bench/cache_claims.py --jobs 2

Not a test: record the figures in docs/queueing.md and docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[1]))  # after PYTHONPATH: a worktree given there wins

# name, (model, GPU type, engine), classes (share, prompt, output), p99 TTFT bound (ms) for the cap
CASES = [
    ("a10g-sglang-rag", ("llama-2-7b", "A10G", "sglang"), ((0.5, 1500, 100), (0.5, 200, 600)), 2000.0),
    ("a10g-vllm-3cls", ("llama-2-7b", "A10G", "vllm"), ((0.6, 300, 150), (0.3, 1200, 300), (0.1, 2500, 200)), 2000.0),
    ("l4-vllm-chat", ("llama-3.1-8b", "L4", "vllm"), ((0.8, 256, 128), (0.2, 3500, 500)), 2000.0),
    ("l40s-vllm-3cls", ("gemma-2-9b", "L40S", "vllm"), ((0.5, 128, 64), (0.3, 1024, 256), (0.2, 8192, 512)), 5000.0),
    ("l40s-trt-3cls", ("gemma-2-9b", "L40S", "tensorrt-llm"), ((0.6, 512, 256), (0.3, 2000, 400), (0.1, 6000, 300)),
     2000.0),
]
FRACTIONS = (0.4, 0.6, 0.8)
CVS = (1.0, 2.0)


def replica_of(model: str, gpu: str, engine: str):
    """One GPU, fp16, the whole GPU memory (tests/test_cache_claims.py builds its replicas here)."""
    from solver.catalog import default_catalog
    from solver.models import get_model
    from solver.perf import PerfQuery
    from solver.perf import queueing as Q

    g = default_catalog().gpus[gpu]
    q = PerfQuery(model=get_model(model), gpu=g, gpus_per_replica=1, interconnect="none",
                  usable_memory_gib=g.memory_gib, precision="fp16", engine=engine)
    return Q.replica_for(q)


def simulate(replica, classes, rate: float, cv: float, seeds: int, requests: int, base_seed: int = 11) -> dict:
    """Pooled over seeds: the share of requests that waited, p90 / p99 TTFT (ms)
    (tests/test_cache_claims.py runs it too)."""
    import numpy as np

    from solver.sim import kernel
    from solver.sim.replica import run_core, step_cost_of
    from solver.sim.verify import SyntheticTraffic, seed_rng

    params = kernel.step_params(step_cost_of(replica))
    prompts = np.array([c.prompt_tokens for c in classes], dtype=np.int64)
    outputs = np.array([c.output_tokens for c in classes], dtype=np.int64)
    waited, ttft = [], []
    for seed in range(seeds):
        warm = max(requests // 10, 2_000)
        times, cls = SyntheticTraffic(seed_rng(base_seed, seed), rate, cv, [c.share for c in classes]).first(
            warm + requests + 2_000)
        lo, hi = warm, warm + requests
        run = run_core(params, times, prompts[cls], outputs[cls], open_ended=True, max_seqs=replica.max_seqs,
                       kv_cache_tokens=replica.kv_cache_tokens, token_budget=replica.token_budget,
                       scheduler=replica.scheduler, measure=(lo, hi), stop_after_s=float(times[hi - 1]),
                       time_limit_s=1e7, window_s=(float(times[lo]), float(times[hi - 1])),
                       kv_admission=replica.kv_admission, multi_step=replica.multi_step)
        w = np.asarray(run.waited, dtype=float)
        waited.append(w[lo:hi] if len(w) > hi - lo else w)
        ttft.append((run.first_s[lo:hi] - times[lo:hi] + replica.request_overhead_s) * 1e3)
    w, t = np.concatenate(waited), np.concatenate(ttft)
    t = np.where(np.isfinite(t), t, math.inf)
    each = [float(np.percentile(x, 99)) for x in ttft]
    return {"waited": float(w.mean()), "p90": float(np.percentile(t, 90)), "p99": float(np.percentile(t, 99)),
            "p99_low": min(each), "p99_high": max(each)}


def run_case(args: tuple) -> list[dict]:
    name, (model, gpu, engine), mix, bound_ms, cv, seeds, requests = args
    from solver.perf import queueing as Q

    replica = replica_of(model, gpu, engine)
    classes = tuple(Q.TrafficClass(*c) for c in mix)
    lm = Q.load_model(replica, classes, cv)
    sat = lm.saturation_rate()
    rows = []
    cap = Q.max_rate_for_slo(replica, classes, 99, arrival_cv=cv, ttft_ms=bound_ms)
    points = [(f, f * sat) for f in FRACTIONS] + ([("cap", cap)] if cap > 0 else [])
    for label, rate in points:
        at = lm.at_rate(rate)
        sim = simulate(replica, classes, rate, cv, seeds, requests)
        rows.append({"name": name, "cv": cv, "slots": lm.slots, "point": label, "u": rate / sat, "bound": bound_ms,
                     "wait_model": at.wait_probability, "wait_sim": sim["waited"],
                     "p90_model": at.ttft_ms[90], "p90_sim": sim["p90"],
                     "p99_model": at.ttft_ms[99], "p99_sim": sim["p99"], "p99_low": sim["p99_low"],
                     "p99_high": sim["p99_high"]})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--requests", type=int, default=150_000, help="measured requests per seed")
    args = ap.parse_args()
    import solver

    t0 = time.time()
    tasks = [(name, cfg, mix, bound, cv, args.seeds, args.requests) for name, cfg, mix, bound in CASES for cv in CVS]
    with ProcessPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        rows = [r for rs in pool.map(run_case, tasks) for r in rs]
    print(f"$ bench/cache_claims.py --seeds {args.seeds} --requests {args.requests}  (solver from "
          f"{Path(solver.__file__).parent}; {time.time() - t0:.0f} s)\n")
    print("| replica | CV | slots | point | u | wait model / sim | p90 TTFT model / sim (ms) | p99 TTFT model / sim (ms) "
          "| sim p99 per seed (ms) |")
    print("|---|---:|---:|---|---:|---|---|---|---|")
    ratios = []
    for r in rows:
        ratio = r["p99_model"] / r["p99_sim"] if r["p99_sim"] > 0 and math.isfinite(r["p99_sim"]) else math.nan
        if r["point"] != "cap":
            ratios.append(ratio)
        point = f"cap ({r['bound']:g} ms)" if r["point"] == "cap" else f"{r['point']:g} x sat"
        print(f"| {r['name']} | {r['cv']:g} | {r['slots']} | {point} | {r['u']:.2f} | {100 * r['wait_model']:.1f} / "
              f"{100 * r['wait_sim']:.1f} % | {r['p90_model']:,.0f} / {r['p90_sim']:,.0f} | {r['p99_model']:,.0f} / "
              f"{r['p99_sim']:,.0f} ({ratio:.2f}x) | {r['p99_low']:,.0f}-{r['p99_high']:,.0f} |")
    finite = sorted(x for x in ratios if math.isfinite(x))
    if finite:
        within = sum(abs(x - 1.0) <= 0.15 for x in finite)
        print(f"\np99 TTFT model / simulator at the fixed fractions: median {finite[len(finite) // 2]:.2f}x, "
              f"range {finite[0]:.2f}-{finite[-1]:.2f}x, within 15 %: {within}/{len(finite)}, "
              f"below 0.85x (optimistic): {sum(x < 0.85 for x in finite)}/{len(finite)}")
    caps = [r for r in rows if r["point"] == "cap"]
    held = sum(r["p99_sim"] <= r["bound"] * 1.05 for r in caps)
    print(f"At the model's cap the simulator's p99 TTFT is within the bound (+5 %) at {held}/{len(caps)} replicas")
    return 0


if __name__ == "__main__":
    sys.exit(main())
