#!/usr/bin/env python3
"""Benchmark: the analytic queueing model against the simulator, the same physics, up to the planner's caps.

What it measures: how close the analytic model's p50/p90/p99 TTFT and p50/p99 TPOT are
to the discrete-event simulator's (solver/sim, the reference for queueing) on the very
replica and at the very rates the planner uses. Both sides read the same `StepCost`,
scheduler (chunked_mixed / prefill_first) and KV admission (whole_sequence /
paged_on_demand): the comparison tests the queueing, not the physics.

How:
* a grid of configurations (dense and MoE models, 1-8 GPUs, several GPU types, engines
  with both schedulers and both KV admissions: vllm = V1 chunked_mixed + paged,
  sglang = prefill_first + paged, tensorrt-llm = chunked_mixed + whole_sequence,
  vllm-0.7 with a 4096-token context = prefill_first + paged) x request mixes (short,
  long prompt, long output, two two-class mixes) x arrival CV (1 and 2);
* per (configuration, mix, CV) a representative p99 SLO (`slo_for`: the mix's usual TTFT
  bound and a 40 ms TPOT bound, loosened to 3x / 1.6x the slowed replica's own p99 at a
  trickle where those are larger, so that the cap is not zero) and the cap as the planner
  computes it (solver/compile/load_caps.py `exact_cap`): the replica slowed by the default
  confidence's slowdown, `edge = max_rate_for_slo(replica.slowed(slowdown(0.9)), mix, 99,
  bounds, arrival_cv=cv)`, cap = edge / 1.03. Points at 0.1, 0.3, 0.5, 0.7, 0.85 and 1.0
  x edge on that slowed replica (1.0 x edge = cap x 1.03 is the rate simulation in the loop
  checks a fully loaded replica at), and at 0.7 and 1.0 x the nominal cap
  (`max_rate_for_slo` on the replica as modelled) on the nominal replica;
* per point the analytic model (`load_model(replica, mix, cv).at_rate(rate)`) and the
  simulator (`solver.sim.verify.run_replica_seed`, --seeds independent replications of
  --requests-per-seed measured requests each after the verifier's warm-up: 80,000
  requests by default, 800 beyond p99), pooled percentiles with the sectioning 95 %
  interval (solver/sim/stats.py); its half-width over the value is printed as the
  simulator's own noise;
* summary: share of points within 15 % per metric (target >= 95 % each), also counting a
  point as within when 15 % of the simulator's interval reaches the model (noise-tolerant);
  the same by load band (utilization = rate / saturation rate of that replica), by
  fraction of the cap, CV, mix, scheduler, KV admission and configuration; the worst
  points with the command that reruns their group; the simulator's verdict at each cap
  (does the SLO hold in the simulator at the rate the planner promises it?).

Command (519 s on the shared 2-core machine at load 3-6 with --jobs 2; --quick, 48 points:
about 30 s):

    PYTHONPATH=. .venv/bin/python bench/queueing_vs_sim.py --jobs 2 [--csv out.csv]
    PYTHONPATH=. .venv/bin/python bench/queueing_vs_sim.py --jobs 2 --quick
    # one group again (what the worst-points list prints):
    PYTHONPATH=. .venv/bin/python bench/queueing_vs_sim.py --config a10g-sglang --mix long-prompt --cv 1

Not a test: record the figures in docs/queueing.md and docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

# label, model, GPU type, GPUs per replica, precision, engine, max_model_len
CONFIGS = [
    ("h100-8b-vllm", "llama-3.1-8b", "H100-SXM", 1, "fp16", "vllm", None),
    ("l4-8b-fp8-vllm", "llama-3.1-8b", "L4", 1, "fp8", "vllm", None),
    ("a10g-7b-sglang", "llama-2-7b", "A10G", 1, "fp16", "sglang", None),
    ("h100-qwen3moe-fp8-sglang", "qwen3-30b-a3b", "H100-SXM", 1, "fp8", "sglang", None),
    ("2xh100-mixtral-trtllm", "mixtral-8x7b", "H100-SXM", 2, "fp16", "tensorrt-llm", None),
    ("4xh200-70b-fp8-sglang", "llama-3.1-70b", "H200", 4, "fp8", "sglang", None),
    ("8xh100-70b-trtllm", "llama-3.1-70b", "H100-SXM", 8, "fp16", "tensorrt-llm", None),
    ("a100-8b-vllm07-4k", "llama-3.1-8b", "A100-40GB", 1, "fp16", "vllm-0.7", 4096),
    ("2xa100-32b-vllm07-4k", "qwen2.5-32b", "A100-80GB", 2, "fp16", "vllm-0.7", 4096),
    ("l40s-gemma9b-trtllm", "gemma-2-9b", "L40S", 1, "fp16", "tensorrt-llm", None),
]
# name -> ([(share, prompt, output)], the mix's usual p99 TTFT bound in ms)
MIXES = {
    "short": ([(1.0, 256, 128)], 1000.0),
    "long-prompt": ([(1.0, 3000, 200)], 3000.0),
    "long-output": ([(1.0, 300, 1000)], 1000.0),
    "mix-chat": ([(0.8, 256, 128), (0.2, 3500, 500)], 2000.0),
    "mix-rag": ([(0.5, 1500, 100), (0.5, 200, 600)], 2000.0),
}
TPOT_BOUND_MS = 40.0
CVS = (1.0, 2.0)
ROBUST_FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.85, 1.0)
NOMINAL_FRACTIONS = (0.7, 1.0)
QUICK_CONFIGS = ("h100-8b-vllm", "a10g-7b-sglang", "2xh100-mixtral-trtllm")
QUICK_MIXES = ("short", "mix-chat")
QUICK_ROBUST, QUICK_NOMINAL = (0.3, 0.7, 1.0), (1.0,)
METRICS = (("ttft_ms", 50), ("ttft_ms", 90), ("ttft_ms", 99), ("tpot_ms", 50), ("tpot_ms", 99))
TOL = 0.15
CONFIDENCE = 0.9  # the default slo.confidence


def replica_of(cfg: tuple):
    from solver.catalog import default_catalog
    from solver.catalog.hosting import cheapest_host, unbought_host
    from solver.models.library import get_model
    from solver.perf import PerfQuery, estimate
    from solver.perf.queueing import replica_for

    _, model, gpu_name, gpus, precision, engine, max_len = cfg
    catalog = default_catalog()
    gpu = catalog.gpus[gpu_name]
    host = cheapest_host(catalog, gpu, gpus) or unbought_host(gpu, gpus)
    q = PerfQuery(model=get_model(model), gpu=gpu, gpus_per_replica=gpus, interconnect=host.interconnect,
                  usable_memory_gib=host.usable_memory_gib, precision=precision, engine=engine,
                  instances_per_replica=host.instances_per_replica, inter_node_gbs=host.inter_node_gbs,
                  max_model_len=max_len)
    if not estimate(q).feasible:
        return None
    return replica_for(q)


def slo_for(slowed, classes, cv: float, base_ttft_ms: float) -> dict:
    """A representative p99 SLO for this replica and mix: the mix's usual TTFT bound and a
    40 ms TPOT bound, each loosened (rounded up) to 3x / 1.6x the slowed replica's p99 at a
    trickle (1 % of its saturation) where that is larger - so the cap is not zero."""
    from solver.perf.queueing import load_model

    model = load_model(slowed, classes, cv)
    low = model.at_rate(0.01 * model.saturation_rate())
    ttft = max(base_ttft_ms, 100.0 * math.ceil(3.0 * low.ttft_ms[99] / 100.0))
    tpot = max(TPOT_BOUND_MS, 5.0 * math.ceil(1.6 * low.tpot_ms[99] / 5.0))
    return {"ttft_ms": ttft, "tpot_ms": tpot}


def run_group(args: tuple) -> list[dict]:
    try:
        return _run_group(*args)
    except Exception as exc:  # one broken group must not lose the others
        import traceback

        return [{"skip": f"{args[0][0]} {args[1]} cv {args[3]}: {type(exc).__name__}: {exc}",
                 "trace": traceback.format_exc()}]


def _run_group(cfg, mix_name, mix, cv, robust_fracs, nominal_fracs, seeds, per_seed, seed) -> list[dict]:
    from solver.confidence import rate_margin, slowdown
    from solver.perf.queueing import TrafficClass, load_model, max_rate_for_slo

    rep = replica_of(cfg)
    if rep is None:
        return [{"skip": f"{cfg[0]}: does not fit"}]
    classes = tuple(TrafficClass(s, p, o) for s, p, o in mix)
    s = slowdown(CONFIDENCE)
    slowed = rep.slowed(s)
    bounds = slo_for(slowed, classes, cv, MIXES[mix_name][1])
    t0 = time.process_time()
    edge = max_rate_for_slo(slowed, classes, 99, arrival_cv=cv, **bounds)
    nominal_edge = max_rate_for_slo(rep, classes, 99, arrival_cv=cv, **bounds)
    cap_cpu = time.process_time() - t0
    base = {"config": cfg[0], "model": cfg[1], "gpu": cfg[2], "gpus": cfg[3], "engine": cfg[5],
            "scheduler": rep.scheduler, "admission": rep.kv_admission, "mix": mix_name, "cv": cv,
            "slo_ttft_ms": bounds["ttft_ms"], "slo_tpot_ms": bounds["tpot_ms"], "slowdown": s,
            "cap_per_s": edge / (1 + rate_margin(CONFIDENCE)), "edge_per_s": edge, "nominal_cap_per_s": nominal_edge,
            "cap_cpu_s": cap_cpu / 2}
    if edge <= 0 and nominal_edge <= 0:
        return [{"skip": f"{cfg[0]} {mix_name} cv {cv:g}: no cap (even a trickle misses p99 TTFT "
                         f"{bounds['ttft_ms']:g} / TPOT {bounds['tpot_ms']:g} ms)"}]
    out = []
    points = [("robust", f, slowed, edge) for f in robust_fracs if edge > 0] + \
             [("nominal", f, rep, nominal_edge) for f in nominal_fracs if nominal_edge > 0]
    for kind, frac, replica, top in points:
        rate = frac * top
        model = load_model(replica, classes, cv)
        sat = model.saturation_rate()
        t0 = time.process_time()
        an = model.at_rate(rate)
        an_cpu = time.process_time() - t0
        t0 = time.process_time()
        sim = simulate(replica, classes, rate, cv, seeds, per_seed, seed)
        sim_cpu = time.process_time() - t0
        row = dict(base, kind=kind, fraction=frac, rate_per_s=rate, saturation_per_s=sat,
                   utilization=rate / sat if sat > 0 else math.inf, slots=model.slots,
                   wait_probability=an.wait_probability, analytic_cpu_s=an_cpu, sim_cpu_s=sim_cpu,
                   sim_requests=sim["requests"], sim_seeds=seeds, sim_keeps_up=sim["keeps_up"])
        for m, p in METRICS:
            key = f"{m[:4]}_p{p}"
            row[f"{key}_an"] = (an.ttft_ms if m == "ttft_ms" else an.tpot_ms)[p]
            row[f"{key}_sim"], row[f"{key}_sim_lo"], row[f"{key}_sim_hi"] = sim[(m, p)]
        # The simulator's verdict on the SLO at this rate (what simulation in the loop acts on).
        row["sim_verdict"] = verdict_of(sim, bounds)
        out.append(row)
    return out


def simulate(replica, classes, rate: float, cv: float, seeds: int, per_seed: int, seed: int) -> dict:
    from solver.sim import kernel
    from solver.sim.replica import step_cost_of
    from solver.sim.stats import sectioned_percentile
    from solver.sim.verify import keep_up_problem, run_replica_seed, seed_rng, warmup_for

    params = kernel.step_params(step_cost_of(replica))
    runs = [run_replica_seed(replica, classes, rate, arrival_cv=cv, scheduler=None, rng=seed_rng(seed, i),
                             measured=per_seed, warmup=warmup_for(per_seed, replica), params=params)
            for i in range(seeds)]
    out = {"requests": sum(r.requests for r in runs), "keeps_up": keep_up_problem(runs) is None}
    for m, p in METRICS:
        e = sectioned_percentile([[(r.metrics[m], 1.0)] for r in runs], p)
        lo, hi = (e.ci_ms if e is not None and e.ci_ms is not None else (math.nan, math.nan))
        out[(m, p)] = (e.value_ms if e is not None else math.nan, lo, hi)
    return out


def verdict_of(sim: dict, bounds: dict) -> str:
    if not sim["keeps_up"]:
        return "missed"
    vs = []
    for m, b in bounds.items():
        v, lo, hi = sim[(m, 99)]
        vs.append("met" if hi <= b else "missed" if lo > b else "inconclusive")
    return "missed" if "missed" in vs else "inconclusive" if "inconclusive" in vs else "met"


# ---------------------------------------------------------------- reporting
def err(r: dict, key: str) -> float:
    an, sim = r[f"{key}_an"], r[f"{key}_sim"]
    if not (math.isfinite(an) and math.isfinite(sim) and sim > 0):
        return 0.0 if an == sim else math.inf
    return an / sim - 1.0


def within(r: dict, key: str, tolerant: bool = False) -> bool:
    e = err(r, key)
    if abs(e) <= TOL:
        return True
    if not tolerant:
        return False
    an, lo, hi = r[f"{key}_an"], r[f"{key}_sim_lo"], r[f"{key}_sim_hi"]
    if not (math.isfinite(an) and math.isfinite(lo) and math.isfinite(hi)):
        return False
    return lo * (1 - TOL) <= an <= hi * (1 + TOL)


def half_width(r: dict, key: str) -> float:
    v, lo, hi = r[f"{key}_sim"], r[f"{key}_sim_lo"], r[f"{key}_sim_hi"]
    if not (math.isfinite(lo) and math.isfinite(hi) and v > 0):
        return math.inf
    return (hi - lo) / 2.0 / v


KEYS = [f"{m[:4]}_p{p}" for m, p in METRICS]


def share_line(rows: list[dict], label: str, width: int = 34) -> str:
    cells = []
    for k in KEYS:
        n = sum(within(r, k) for r in rows)
        cells.append(f"{100 * n / len(rows):5.1f}")
    noise = [half_width(r, "ttft_p99") for r in rows]
    noise_t = [half_width(r, "tpot_p99") for r in rows]
    return (f"| {label:{width}s} | {len(rows):4d} | " + " | ".join(f"{c} %" for c in cells)
            + f" | {100 * statistics.median(noise):5.1f} % | {100 * statistics.median(noise_t):5.1f} % |")


def band_of(u: float) -> str:
    for hi, name in ((0.3, "u < 0.3"), (0.5, "0.3-0.5"), (0.7, "0.5-0.7"), (0.8, "0.7-0.8"), (0.9, "0.8-0.9")):
        if u < hi - 1e-9:
            return name
    return "u >= 0.9"


def report(rows: list[dict], skipped: list[str], wall: float, args) -> None:
    print()
    print(f"{'config':25s} {'mix':11s} {'cv':>3s} {'kind':7s} {'frac':>4s} {'u':>5s} {'rate/s':>8s} "
          + " ".join(f"{k + ' an/sim (err)':>27s}" for k in KEYS) + f" {'p99 TTFT ±':>10s} {'p99 TPOT ±':>10s} verdict")
    for r in rows:
        line = (f"{r['config']:25s} {r['mix']:11s} {r['cv']:3g} {r['kind']:7s} {r['fraction']:4.2f} "
                f"{r['utilization']:5.2f} {r['rate_per_s']:8.3f}")
        for k in KEYS:
            e = err(r, k)
            line += f" {r[k + '_an']:9.1f}/{r[k + '_sim']:9.1f} ({100 * e:+5.0f}%)" if math.isfinite(e) else \
                f" {r[k + '_an']:9.1f}/{r[k + '_sim']:9.1f} (  inf)"
        line += f" {100 * half_width(r, 'ttft_p99'):9.1f}% {100 * half_width(r, 'tpot_p99'):9.1f}% {r['sim_verdict']}"
        print(line)
    for why in skipped:
        print(f"skipped: {why}")
    groups = {(r["config"], r["mix"], r["cv"]) for r in rows}
    print(f"\n{len(rows)} points in {len(groups)} (configuration, mix, CV) groups ({len(skipped)} groups skipped); "
          f"{args.seeds} seeds x {args.requests_per_seed:,} requests per point; {wall:.0f} s wall with {args.jobs} jobs; "
          f"confidence {CONFIDENCE} (slowdown {rows[0]['slowdown'] if rows else float('nan'):.3f}), rate margin 3 %")
    print("\nPer metric (analytic / simulated - 1; target: >= 95 % of points within 15 %):")
    for k in KEYS:
        e = sorted(abs(err(r, k)) for r in rows)
        n = sum(within(r, k) for r in rows)
        nt = sum(within(r, k, tolerant=True) for r in rows)
        signed = statistics.median([err(r, k) for r in rows if math.isfinite(err(r, k))])
        hw = [half_width(r, k) for r in rows]
        print(f"  {k:9s} within 15 %: {100 * n / len(rows):5.1f} % ({n}/{len(rows)}); within 15 % of the simulator's "
              f"interval: {100 * nt / len(rows):5.1f} %; median |err| {100 * statistics.median(e):5.1f} %, signed "
              f"{100 * signed:+5.1f} %; 90th pct |err| {100 * float(np.percentile(e, 90)):6.1f} %; worst "
              f"{100 * e[-1]:7.1f} %; sim 95 % half-width median {100 * statistics.median(hw):4.1f} %, 90th pct "
              f"{100 * float(np.percentile(hw, 90)):5.1f} %")
    head = ("| subset | points | " + " | ".join(KEYS) + " | sim ± p99 TTFT | sim ± p99 TPOT |\n|---|---:|"
            + "---:|" * len(KEYS) + "---:|---:|")
    subsets = [
        ("load band (u = rate / saturation)", lambda r: band_of(r["utilization"]),
         ["u < 0.3", "0.3-0.5", "0.5-0.7", "0.7-0.8", "0.8-0.9", "u >= 0.9"]),
        ("fraction of the cap's edge", lambda r: f"{r['kind']} {r['fraction']:g}", None),
        ("arrival CV", lambda r: f"CV {r['cv']:g}", None),
        ("mix", lambda r: r["mix"], list(MIXES)),
        ("scheduler", lambda r: r["scheduler"], None),
        ("KV admission", lambda r: r["admission"], None),
        ("configuration", lambda r: r["config"], [c[0] for c in CONFIGS]),
    ]
    for title, key, order in subsets:
        print(f"\nShare within 15 % by {title}:")
        print(head)
        names = order or sorted({key(r) for r in rows})
        for name in names:
            sub = [r for r in rows if key(r) == name]
            if sub:
                print(share_line(sub, name))
    all_ok = [r for r in rows if all(within(r, k) for k in KEYS)]
    print(f"\nPoints with every metric within 15 %: {len(all_ok)}/{len(rows)} ({100 * len(all_ok) / len(rows):.1f} %)")
    print("\nThe simulator's verdict on the SLO at the planner's edge (1.0 x cap x 1.03 on the slowed replica; "
          "1.0 x the nominal cap on the modelled one):")
    for kind in ("robust", "nominal"):
        edges = [r for r in rows if r["kind"] == kind and r["fraction"] == 1.0]
        counts = {v: sum(r["sim_verdict"] == v for r in edges) for v in ("met", "inconclusive", "missed")}
        print(f"  {kind:7s}: {len(edges)} edges: " + ", ".join(f"{v} {n}" for v, n in counts.items()))
        for r in edges:
            if r["sim_verdict"] != "met":
                print(f"    {r['sim_verdict']:12s} {r['config']} {r['mix']} cv {r['cv']:g}: p99 TTFT sim "
                      f"{r['ttft_p99_sim']:.0f} [{r['ttft_p99_sim_lo']:.0f}, {r['ttft_p99_sim_hi']:.0f}] (model "
                      f"{r['ttft_p99_an']:.0f}) vs {r['slo_ttft_ms']:g}; p99 TPOT sim {r['tpot_p99_sim']:.1f} "
                      f"[{r['tpot_p99_sim_lo']:.1f}, {r['tpot_p99_sim_hi']:.1f}] (model {r['tpot_p99_an']:.1f}) vs "
                      f"{r['slo_tpot_ms']:g}; u {r['utilization']:.2f}")
    print("\nWorst points (largest |error| over the five metrics), with the command that reruns the group:")
    worst = sorted(rows, key=lambda r: -max(abs(err(r, k)) for k in KEYS))[:args.worst]
    for r in worst:
        k = max(KEYS, key=lambda k: abs(err(r, k)))
        print(f"  {r['config']} {r['mix']} cv {r['cv']:g} {r['kind']} {r['fraction']:g} (u {r['utilization']:.2f}, "
              f"{r['slots']} slots, {r['scheduler']}/{r['admission']}): {k} model {r[k + '_an']:.1f} vs sim "
              f"{r[k + '_sim']:.1f} [{r[k + '_sim_lo']:.1f}, {r[k + '_sim_hi']:.1f}] ms ({100 * err(r, k):+.0f} %)\n"
              f"      PYTHONPATH=. python bench/queueing_vs_sim.py --config {r['config']} --mix {r['mix']} "
              f"--cv {r['cv']:g}")
    an = [r["analytic_cpu_s"] for r in rows]
    sim = [r["sim_cpu_s"] for r in rows]
    caps = [r["cap_cpu_s"] for r in rows]
    print(f"\nCPU per point: analytic at_rate median {1e3 * statistics.median(an):.0f} ms, simulator median "
          f"{1e3 * statistics.median(sim):.0f} ms (ratio sim/analytic {statistics.median(sim) / statistics.median(an):.1f}); "
          f"a cap search median {1e3 * statistics.median(caps):.0f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="3 configurations x 2 mixes x 2 CVs x 4 rates (~2 minutes)")
    ap.add_argument("--seeds", type=int, default=None, help="independent replications per point (default 8; quick 4)")
    ap.add_argument("--requests-per-seed", type=int, default=None,
                    help="measured requests per replication (default 10,000; quick 5,000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--config", help="only configurations whose label contains this")
    ap.add_argument("--mix", help="only this mix")
    ap.add_argument("--cv", type=float, help="only this arrival CV")
    ap.add_argument("--worst", type=int, default=15)
    ap.add_argument("--csv", help="also write every point to this CSV")
    a = ap.parse_args()
    a.seeds = a.seeds or (4 if a.quick else 8)
    a.requests_per_seed = a.requests_per_seed or (5000 if a.quick else 10_000)
    configs = [c for c in CONFIGS if (not a.quick or c[0] in QUICK_CONFIGS) and (not a.config or a.config in c[0])]
    mixes = [m for m in MIXES if (not a.quick or m in QUICK_MIXES) and (not a.mix or a.mix == m)]
    cvs = [c for c in CVS if a.cv is None or c == a.cv]
    robust, nominal = (QUICK_ROBUST, QUICK_NOMINAL) if a.quick else (ROBUST_FRACTIONS, NOMINAL_FRACTIONS)
    groups = [(cfg, m, MIXES[m][0], cv, robust, nominal, a.seeds, a.requests_per_seed, a.seed)
              for cfg in configs for m in mixes for cv in cvs]
    if not groups:
        print("nothing selected", file=sys.stderr)
        return 2
    print(f"$ {' '.join(['bench/queueing_vs_sim.py'] + sys.argv[1:])}  ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})", flush=True)
    t0 = time.time()
    rows, skipped = [], []
    with ProcessPoolExecutor(max_workers=a.jobs) as pool:
        futures = [pool.submit(run_group, g) for g in groups]
        for i, f in enumerate(as_completed(futures)):
            for r in f.result():
                if "skip" in r:
                    skipped.append(r["skip"])
                    if "trace" in r:
                        print(r["trace"], file=sys.stderr)
                else:
                    rows.append(r)
            print(f"[{i + 1}/{len(groups)}] {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    order = {(c[0], m, cv): i for i, (c, m, cv) in enumerate((g[0], g[1], g[3]) for g in groups)}
    rows.sort(key=lambda r: (order[(r["config"], r["mix"], r["cv"])], r["kind"] != "robust", r["fraction"]))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if not rows:
        print("no points", *skipped, sep="\n")
        return 1
    report(rows, skipped, time.time() - t0, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
