"""Probe (not the product's model): TTFT with bursty arrivals as the prompt work ahead of an
arrival in a GI/G/1 queue, against the simulator and the analytic model.

docs/queueing.md ("Known gaps", CV 2 p50 TTFT) traces the analytic model's median excess at
arrival CV 2 to a cluster counted twice. This script measures a candidate replacement for
that part on the grid's replicas: TTFT = the residual of a bare decode step (uniform) + W +
the own prompt's prefill steps + the engine's request overhead, where W is Lindley's
stationary wait W' = max(0, W + S - G) on a grid, S a class's prefill seconds at the token
budget beside the fluid batch's decodes, G the gamma gap of CV cv. Left out on purpose (so
the figures say how far the backlog alone gets): chunks shared between prompts, decode
steps between chunks, waits for slots. Chunked-prefill engines only.

    PYTHONPATH=. .venv/bin/python bench/ttft_backlog_probe.py --config l4-8b-fp8-vllm \
        --mix long-prompt --cv 2 --fractions 0.05 0.15 0.3
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from queueing_vs_sim import CONFIGS, MIXES, replica_of  # noqa: E402


def lindley_wait(service_s: list[float], shares: list[float], rate: float, cv: float, dx: float,
                 iterations: int = 400) -> np.ndarray:
    """P(W in [i dx, (i + 1) dx)), the stationary GI/G/1 wait: gaps gamma (mean 1 / rate,
    CV cv), services service_s with probabilities shares (rounded to the grid)."""
    from solver.perf.queueing.renewal import regularized_lower_gamma

    k = 1.0 / cv ** 2
    cells = int(min(60.0 / (rate * dx), 200_000))
    edges = np.arange(cells + 1) * dx
    cdf = regularized_lower_gamma(np.full(len(edges), k), edges * k * rate)
    gap = np.append(np.diff(cdf), 1.0 - cdf[-1])
    wait = np.ones(1)
    for _ in range(iterations):
        grown = np.zeros(len(wait) + int(max(service_s) / dx) + 1)
        for s, p in zip(service_s, shares):
            shift = int(round(s / dx))
            grown[shift:shift + len(wait)] += p * wait
        n = len(grown)
        # new[i] = sum_j grown[i + j] gap[j] for i > 0; the rest of the mass at 0.
        new = np.correlate(grown, gap[:n], mode="full")[n - 1:][:n].copy()
        new[0] = 0.0
        new[0] = 1.0 - new[1:].sum()
        new = np.trim_zeros(new, "b")
        done = len(new) == len(wait) and np.abs(new - wait).max() < 1e-10
        wait = new
        if done:
            break
    return wait


def main() -> int:
    from solver.perf import queueing as Q
    from solver.sim.replica import simulate_replica

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="l4-8b-fp8-vllm", choices=[c[0] for c in CONFIGS])
    ap.add_argument("--mix", default="long-prompt", choices=list(MIXES))
    ap.add_argument("--cv", type=float, default=2.0)
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.05, 0.15, 0.3],
                    help="rates as fractions of the model's saturation")
    ap.add_argument("--requests", type=int, default=40_000)
    args = ap.parse_args()

    rep = replica_of(next(c for c in CONFIGS if c[0] == args.config))
    if rep is None or rep.scheduler != "chunked_mixed":
        print(f"{args.config}: not a chunked-prefill replica; the probe covers those only", file=sys.stderr)
        return 2
    mix = tuple(Q.TrafficClass(*c) for c in MIXES[args.mix][0])
    model = Q.load_model(rep, mix, args.cv)
    sat = model.saturation_rate()
    print(f"$ bench/ttft_backlog_probe.py --config {args.config} --mix {args.mix} --cv {args.cv:g}  "
          f"(saturation {sat:.3f}/s; sim: {args.requests:,} requests, seed 5)")
    for u in args.fractions:
        rate = u * sat
        st = model._state(rate)
        n0 = max(min(st.fluid, st.slots), 1.0)
        dec0 = float(model._decodes(n0))
        ctx0 = dec0 * model.context_per_decode
        room = max(model.budget - dec0, 1.0)

        def prefill_s(tokens: float) -> float:
            steps = max(math.ceil(tokens / room), 1)
            last = tokens - (steps - 1) * room
            full = float(model.step.seconds(dec0, ctx0, room, room * room / 2)) if steps > 1 else 0.0
            return (steps - 1) * full + float(model.step.seconds(dec0, ctx0, last, last * last / 2))

        service = [prefill_s(c.prompt_tokens) for c in mix]
        shares = [c.share for c in mix]
        dx = min(service) / 200.0
        wait = lindley_wait(service, shares, rate, args.cv, dx)
        base = float(model.step.seconds(dec0, ctx0, 0.0, 0.0))
        rng = np.random.default_rng(0)
        draws = 400_000
        w = rng.choice(np.arange(len(wait)) * dx, size=draws, p=wait / wait.sum())
        cls = rng.choice(len(mix), size=draws, p=shares)
        probe = (w + np.array(service)[cls] + rng.uniform(0.0, base, draws) + rep.request_overhead_s) * 1e3
        sim = simulate_replica(rep, mix, rate, max_seqs=rep.max_seqs, kv_cache_tokens=rep.kv_cache_tokens,
                               token_budget=rep.token_budget, request_overhead_s=rep.request_overhead_s,
                               duration_s=args.requests / rate, seed=5, arrival_cv=args.cv, scheduler=rep.scheduler)
        simulated = sim.ttft_s * 1e3
        analytic = model.at_rate(rate, percentiles=(50, 90, 99)).ttft_ms
        parts = []
        for q in (50, 90, 99):
            s = float(np.percentile(simulated, q))
            parts.append(f"p{q}: sim {s:6.0f} model {analytic[q]:6.0f} ({analytic[q] / s - 1:+.0%}) "
                         f"probe {np.percentile(probe, q):6.0f} ({np.percentile(probe, q) / s - 1:+.0%})")
        print(f"u {u:.2f} ({rate:.3f}/s) | " + " | ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
