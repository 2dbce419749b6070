#!/usr/bin/env python3
"""Write examples/metrics/*.prom: synthetic Prometheus snapshots of a vLLM and an SGLang
server, to show and test `solver-cli workload from-trace --prometheus`.

Not scraped from a server: generated, seeded (numpy default_rng(2027)), in the engines'
own metric names and bucket layouts (solver/traffic/prometheus.py cites the source):
* vllm-before.prom / vllm-after.prom: Llama-3.1-8B-Instruct, two snapshots 600 s apart
  (timestamps on the samples), 7,200 requests between them (12/s); prompt ~ lognormal
  around 600 tokens, output around 180, clipped to the 8,192-token context; 1-2-5 buckets.
* sglang.prom: Qwen3-8B, one snapshot after 1,800 s of counting, 5,400 requests (3/s),
  prompt around 1,500, output around 400, SGLang's default token buckets.

Usage: python scripts/make_example_metrics.py [--out-dir examples/metrics]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HEADER = "# Synthetic metrics snapshot (not scraped from a server): scripts/make_example_metrics.py, seeded.\n"
SGLANG_BUCKETS = [100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 12000,
                  15000, 20000, 22000, 25000, 30000, 35000, 40000, 66000, 99000, 132000, 300000, 600000, 900000,
                  1100000]


def buckets_1_2_5(max_value: int) -> list[int]:
    out, e = [], 0
    while True:
        for m in (1, 2, 5):
            if m * 10 ** e > max_value:
                return out
            out.append(m * 10 ** e)
        e += 1


def _lengths(rng, n, median, sigma, hi):
    return np.clip(np.rint(rng.lognormal(np.log(median), sigma, n)), 1, hi).astype(np.int64)


def _fmt(x: float) -> str:
    return f"{x:.1f}"


def _histogram(name: str, labels: str, values: np.ndarray, bounds: list[int], stamp: str) -> list[str]:
    lines = [f"# HELP {name} Number of tokens per request.", f"# TYPE {name} histogram"]
    for b in bounds:
        lines.append(f'{name}_bucket{{{labels},le="{float(b)}"}} {_fmt(np.count_nonzero(values <= b))}{stamp}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {_fmt(len(values))}{stamp}')
    lines.append(f"{name}_count{{{labels}}} {_fmt(len(values))}{stamp}")
    lines.append(f"{name}_sum{{{labels}}} {_fmt(values.sum())}{stamp}")
    return lines


def _counter(name: str, labels: str, value: float, stamp: str) -> list[str]:
    return [f"# HELP {name} counter", f"# TYPE {name} counter", f"{name}{{{labels}}} {_fmt(value)}{stamp}"]


def vllm(prompt, output, finished, stamp_ms: int | None) -> str:
    stamp = f" {stamp_ms}" if stamp_ms is not None else ""
    labels = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
    lines = ["# HELP vllm:request_success_total Count of successfully processed requests.",
             "# TYPE vllm:request_success_total counter"]
    for reason, n in finished.items():
        lines.append(f'vllm:request_success_total{{{labels},finished_reason="{reason}"}} {_fmt(n)}{stamp}')
    lines += _counter("vllm:prompt_tokens_total", labels, prompt.sum(), stamp)
    lines += _counter("vllm:generation_tokens_total", labels, output.sum(), stamp)
    bounds = buckets_1_2_5(8192)
    lines += _histogram("vllm:request_prompt_tokens", labels, prompt, bounds, stamp)
    lines += _histogram("vllm:request_generation_tokens", labels, output, bounds, stamp)
    lines += ["# HELP vllm:num_requests_running Number of requests in model execution batches.",
              "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{labels}}} 7.0{stamp}"]
    return HEADER + "\n".join(lines) + "\n"


def sglang(prompt, output) -> str:
    labels = 'model_name="Qwen/Qwen3-8B"'
    lines = _counter("sglang:num_requests_total", labels, len(prompt), "")
    lines += _counter("sglang:prompt_tokens_total", labels, prompt.sum(), "")
    lines += _counter("sglang:generation_tokens_total", labels, output.sum(), "")
    lines += _histogram("sglang:prompt_tokens_histogram", labels, prompt, SGLANG_BUCKETS, "")
    lines += _histogram("sglang:generation_tokens_histogram", labels, output, SGLANG_BUCKETS, "")
    return HEADER + "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default=str(ROOT / "examples" / "metrics"))
    a = ap.parse_args()
    rng = np.random.default_rng(2027)
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # vLLM: 20,000 requests served before the first snapshot, 7,200 more in the 600 s after it.
    prompt = _lengths(rng, 27_200, 600, 0.8, 8000)
    output = _lengths(rng, 27_200, 180, 0.7, 8192 - 8000)
    output = np.minimum(output, 8192 - prompt)
    stop = lambda n: {"stop": round(0.9 * n), "length": n - round(0.9 * n), "abort": 0}  # noqa: E731
    t0_ms = 1_780_000_000_000
    (out / "vllm-before.prom").write_text(vllm(prompt[:20_000], output[:20_000], stop(20_000), t0_ms))
    (out / "vllm-after.prom").write_text(vllm(prompt, output, stop(27_200), t0_ms + 600_000))
    sp = _lengths(rng, 5_400, 1500, 0.7, 32000)
    so = _lengths(rng, 5_400, 400, 0.6, 8000)
    (out / "sglang.prom").write_text(sglang(sp, so))
    print(f"{out}: vllm-before.prom, vllm-after.prom (7,200 requests in 600 s), sglang.prom (5,400 requests)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
