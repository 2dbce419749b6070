#!/usr/bin/env python3
"""Benchmark: the queueing model against published latency-under-load measurements.

Reads ../shared/data/calibration/llm_latency_under_load.csv (see its .md for sources and
caveats) and predicts every open-loop row (Poisson arrivals at a stated request rate:
AccelMark, SGLang's vLLM comparison) with `percentiles_at_rate`, plus the one-request
rows (concurrency 1) as the no-queue baseline. Closed-loop and burst rows (LMDeploy,
dstack MI300X, Vultr) are a different load model (a fixed number of clients, or N
requests at t = 0) and are listed as not compared. Nothing is fitted here: the model runs
with the calibrated constants as they are.

ShareGPT lengths vary; the rows give medians only (AccelMark: input ~280, output ~310,
max_tokens 512). They are modelled as three classes around those medians (assumption,
see LENGTHS); SGLang's ShareGPT rows use the same mix.

Usage: python bench/queueing_under_load.py [--csv PATH]
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "calibration" / "llm_latency_under_load.csv"
GPUS = {"H100-80GB-HBM3 (SXM)": "H100-SXM", "A100-SXM4-40GB": "A100-40GB", "L4-24GB": "L4", "H200-141GB": "H200",
        "A100-80GB": "A100-80GB", "H100-80GB": "H100-SXM"}
MODELS = {"Meta-Llama-3-8B-Instruct": "llama-3.1-8b", "Meta-Llama-3-70B-Instruct": "llama-3.1-70b",
          "Llama-3.1-8B-Instruct": "llama-3.1-8b", "Llama-3.1-70B-Instruct": "llama-3.1-70b"}
# ShareGPT-like lengths around the stated medians (input ~280, output ~310, capped at 512).
LENGTHS = ((0.3, 90, 120), (0.4, 280, 310), (0.3, 800, 512))
METRICS = {"ttft_ms_p50": ("ttft_ms", 50), "ttft_ms_p99": ("ttft_ms", 99), "tpot_ms_p50": ("tpot_ms", 50)}


def engine_of(text: str) -> str:
    return "sglang" if text.lower().startswith("sglang") else "vllm"


def predict(row: dict):
    from solver.catalog import default_catalog
    from solver.catalog.hosting import cheapest_host, unbought_host
    from solver.models.library import get_model
    from solver.perf import PerfQuery
    from solver.perf.queueing import TrafficClass, percentiles_at_rate, replica_for

    catalog = default_catalog()
    gpu = catalog.gpus[GPUS[row["gpu"]]]
    gpus = int(row["num_gpus"])
    host = cheapest_host(catalog, gpu, gpus) or unbought_host(gpu, gpus)
    q = PerfQuery(model=get_model(MODELS[row["model"]]), gpu=gpu, gpus_per_replica=gpus,
                  interconnect=host.interconnect, usable_memory_gib=gpu.memory_gib, precision="bf16",
                  engine=engine_of(row["engine"]))
    rep = replica_for(q)
    classes = tuple(TrafficClass(s, p, o) for s, p, o in LENGTHS)
    rate = float(row["load_value"]) if row["load_kind"] == "request_rate" else 1e-4
    return percentiles_at_rate(rep, classes, rate)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", default=str(DEFAULT_CSV))
    a = ap.parse_args()
    rows = list(csv.DictReader(open(a.csv)))
    compared, skipped = [], {}
    for r in rows:
        open_loop = r["load_kind"] == "request_rate"
        single = r["load_kind"] == "concurrency" and r["load_value"] == "1"
        if not (open_loop or single) or r["metric"] not in METRICS or r["gpu"] not in GPUS or r["model"] not in MODELS:
            why = r["source"].split(" ")[0].split("/")[-1] + f" ({r['load_kind']})"
            skipped[why] = skipped.get(why, 0) + 1
            continue
        res = predict(r)
        metric, p = METRICS[r["metric"]]
        pred = res.value(metric, p)
        meas = float(r["value"])
        err = pred / meas - 1 if math.isfinite(pred) else math.inf
        compared.append((r, res, pred, meas, err))
    print(f"{'source':12s} {'model':26s} {'gpu':22s} {'engine':8s} {'load':>12s} {'metric':12s} "
          f"{'measured':>10s} {'model':>10s} {'error':>7s} {'util':>5s}")
    for r, res, pred, meas, err in compared:
        load = f"{r['load_value']} req/s" if r["load_kind"] == "request_rate" else "1 at a time"
        src = "AccelMark" if "AccelMark" in r["source"] else "SGLang"
        print(f"{src:12s} {r['model']:26s} {r['gpu'][:22]:22s} {engine_of(r['engine']):8s} {load:>12s} {r['metric']:12s} "
              f"{meas:10.1f} {pred:10.1f} {100 * err:+6.0f}% {res.utilization:5.2f}")
    print()
    for kind in ("request_rate", "concurrency"):
        for m in METRICS:
            errs = [abs(e) for r, _, _, _, e in compared if r["metric"] == m and r["load_kind"] == kind]
            fin = [e for e in errs if math.isfinite(e)]
            if errs:
                label = "open loop" if kind == "request_rate" else "one at a time"
                print(f"{label:14s} {m:12s}: {len(errs)} rows, median |error| {100 * statistics.median(fin):.0f} %, "
                      f"within 25 %: {sum(e <= 0.25 for e in errs)}/{len(errs)}; predicted overloaded: "
                      f"{sum(not math.isfinite(e) for e in errs)}")
    print("not compared (closed-loop clients, bursts, throughput-only or other rows):",
          ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
