"""Issue 24's figures: what disaggregated serving saves, and what it costs in solve time.

    PYTHONPATH=. .venv/bin/python bench/disagg.py [--mix 12] [--speed 100] [--speed-percentile 99] [--seed 1]

1. aiconfigurator's two cases on H200 (Llama-3.1-70B fp8 4,000/500; Qwen3-32B fp8
   1,000/1,000; TTFT 1 s, TPOT 30 ms; 10 req/s), no-load and p99: the planner's choice
   with `serving: auto` next to aggregated-only - $/hour, GPUs, output tokens/s per GPU and
   $ per million output tokens.
2. A generated mix of prefill-heavy and decode-heavy services over the full catalog: the
   saving of the best plan with disaggregation over the best aggregated-only plan, per
   kind, and how many deployments pair different GPU types.
3. Solve time of an N-service workload with `serving: auto` against aggregated-only,
   measured in one run (a ratio: the machine is shared).
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

CASES = (("llama-3.1-70b", 4000, 500), ("qwen3-32b", 1000, 1000))


def _service(name, model, prompt, output, rate, serving, percentile=None, precision="fp8", engine="tensorrt-llm"):
    slo = {"ttft_ms": 1000, "tpot_ms": 30}
    if percentile:
        slo["percentile"] = percentile
    return {"name": name, "model": model, "precisions": [precision], "engine": engine, "serving": serving,
            "demand": {"requests_per_s": rate, "prompt_tokens": prompt, "output_tokens": output}, "slo": slo}


def _solve(services, constraints=None, time_limit_s=120):
    w = {"name": "bench", "services": services, "constraints": constraints or {},
         "solver": {"time_limit_s": time_limit_s}}
    t0 = time.perf_counter()
    result = plan(parse_workload(w), PlanOptions())
    return result, time.perf_counter() - t0


def _shape(result) -> str:
    parts = []
    for s in result.services:
        for a in s.assignments:
            role = s.role or "agg"
            parts.append(f"{role} {a.replicas}x{a.gpu} TP{a.gpus_per_replica}")
    return ", ".join(parts)


def cases() -> None:
    print("## aiconfigurator's cases on H200 (10 req/s, TTFT <= 1 s, TPOT <= 30 ms)\n")
    print("| model | prompt/output | SLO at | serving | $/hour | GPUs | out tok/s/GPU | $/M out tok | fleet |")
    print("|---|---|---|---|---:|---:|---:|---:|---|")
    for model, prompt, output in CASES:
        for pct in (None, 99):
            for serving in ("aggregated", "auto"):
                r, _ = _solve([_service("chat", model, prompt, output, 10, serving, pct)], {"gpu_types": ["H200"]})
                out_tps = 10 * output
                price = r.total_price_usd_per_hour
                print(f"| {model} | {prompt}/{output} | {'p' + str(pct) if pct else 'no load'} | {serving} | "
                      f"{price:.2f} | {r.gpus} | {out_tps / r.gpus:.0f} | {price / (out_tps * 3600 / 1e6):.3f} | "
                      f"{_shape(r)} |")


def mix(n: int, seed: int) -> None:
    rng = random.Random(seed)
    heavy, light = [], []
    for i in range(n):
        model = rng.choice(["llama-3.1-70b", "llama-3.1-8b", "qwen3-32b"])
        if i % 2 == 0:  # prefill-heavy: long prompts, short answers (RAG, summaries)
            prompt, output, kind = rng.choice([2000, 4000, 8000]), rng.choice([100, 200, 300]), heavy
        else:  # decode-heavy: short prompts, long answers (chat, reasoning)
            prompt, output, kind = rng.choice([200, 500]), rng.choice([800, 1500]), light
        rate = round(rng.uniform(2, 20), 1)
        kind.append((f"s{i}", model, prompt, output, rate))
    print(f"\n## A generated mix ({n} services, seed {seed}, full catalog, p99 SLOs, each solved alone)\n")
    print("| kind | services | aggregated-only $/h | auto $/h | saving | disaggregated | heterogeneous pairs |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, items in (("prefill-heavy", heavy), ("decode-heavy", light)):
        agg_total = auto_total = 0.0
        split = hetero = 0
        for name, model, prompt, output, rate in items:
            a, _ = _solve([_service(name, model, prompt, output, rate, "aggregated", 99)])
            b, _ = _solve([_service(name, model, prompt, output, rate, "auto", 99)])
            agg_total += a.total_price_usd_per_hour
            auto_total += b.total_price_usd_per_hour
            pools = [s for s in b.services if s.role and s.assignments]
            if pools:
                split += 1
                gpus = {s.role: {v.gpu for v in s.assignments} for s in pools}
                if gpus.get("prefill") and gpus.get("decode") and gpus["prefill"] != gpus["decode"]:
                    hetero += 1
        saving = 1 - auto_total / agg_total if agg_total else 0.0
        print(f"| {label} | {len(items)} | {agg_total:.2f} | {auto_total:.2f} | {saving:.1%} | {split} | {hetero} |")


def speed_services(n: int, seed: int, percentile: int | None = None, serving: str = "aggregated") -> list[dict]:
    """The speed case's n LLM services (bench/deadlines.py plans them with `serving: auto` too)."""
    rng = random.Random(seed)
    services = []
    for i in range(n):
        model = rng.choice(["llama-3.1-70b", "llama-3.1-8b", "qwen3-32b"])
        prompt, output = rng.choice([(4000, 300), (500, 800), (2000, 200), (300, 1500)])
        services.append(_service(f"s{i}", model, prompt, output, round(rng.uniform(1, 10), 1), serving,
                                 percentile))
    return services


def speed(n: int, seed: int, percentile: int | None) -> None:
    services = speed_services(n, seed, percentile)
    agg, t_agg = _solve(services, time_limit_s=300)
    auto, t_auto = _solve([dict(s, serving="auto") for s in services], time_limit_s=300)
    slo = f"p{percentile} SLOs" if percentile else "no-load SLOs"
    print(f"\n## Solve time, {n} services ({slo}, full catalog, one run)\n")
    print("| serving | status | $/hour | seconds |")
    print("|---|---|---:|---:|")
    print(f"| aggregated | {agg.status} | {agg.total_price_usd_per_hour:.2f} | {t_agg:.1f} |")
    print(f"| auto | {auto.status} | {auto.total_price_usd_per_hour:.2f} | {t_auto:.1f} |")
    print(f"\nauto / aggregated time: {t_auto / t_agg:.2f}x")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mix", type=int, default=12, help="services in the generated mix (0: skip)")
    ap.add_argument("--speed", type=int, default=100, help="services in the timing run (0: skip)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--speed-percentile", type=int, default=None, help="the timing run's SLO percentile "
                    "(default: none, no-load SLOs)")
    ap.add_argument("--skip-cases", action="store_true")
    args = ap.parse_args(argv)
    if not args.skip_cases:
        cases()
    if args.mix:
        mix(args.mix, args.seed)
    if args.speed:
        speed(args.speed, args.seed, args.speed_percentile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
