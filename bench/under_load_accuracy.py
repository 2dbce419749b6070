#!/usr/bin/env python3
"""Benchmark: the performance and queueing models against published measurements under load.

Every case of `solver.perf.under_load` (MLPerf Server / Interactive / Offline results and
the open-loop rows of the shared latency-under-load set): the model's saturation rate
against Offline throughput, its p50/p90/p99 TTFT and TPOT at each Server row's rate per
replica, and its largest rate within the row's own p99 limits against the rate the
system sustained. Prints each case and a summary per metric (median absolute error,
signed median, within 25 %) overall and per source. Not a test: record the figures in
docs/queueing.md.

Usage: python bench/under_load_accuracy.py [--source SUBSTRING] [--csv OUT]
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.perf.under_load import all_cases, predict  # noqa: E402

METRICS = ("saturation_per_s", "sustained_per_s", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99",
           "ttft_ms_p50@own_utilization", "ttft_ms_p99@own_utilization", "tpot_ms_p50@own_utilization",
           "tpot_ms_p99@own_utilization")


def rows(cases, calibration=None):
    out = []
    for case in cases:
        try:
            pred = predict(case, calibration)
        except Exception as exc:  # a case the model cannot build is reported, not fatal
            out.append({"case": case, "error": f"{type(exc).__name__}: {exc}"})
            continue
        for metric, measured in case.measured + tuple((m + "@own_utilization", v) for m, v in case.measured):
            if metric not in METRICS or metric not in pred.values:
                continue
            got = pred.values[metric]
            err = got / measured - 1.0 if math.isfinite(got) and measured > 0 else math.inf
            out.append({"case": case, "metric": metric, "measured": measured, "predicted": got, "error": err,
                        "utilization": (case.rate_per_s / pred.saturation_per_s
                                        if case.rate_per_s and pred.saturation_per_s > 0 else None)})
    return out


def summary(results, title: str) -> None:
    print(f"\n{title}")
    for metric in METRICS:
        errs = [r["error"] for r in results if r.get("metric") == metric]
        if not errs:
            continue
        finite = [e for e in errs if math.isfinite(e)]
        absolute = sorted(abs(e) if math.isfinite(e) else math.inf for e in errs)
        med = statistics.median(absolute)
        signed = statistics.median(finite) if finite else math.nan
        within = sum(a <= 0.25 for a in absolute)
        print(f"  {metric:28s} n={len(errs):3d}  median |err| {100 * med:6.1f} %  signed median {100 * signed:+6.1f} %  "
              f"within 25 %: {within}/{len(errs)}  cannot keep up: {len(errs) - len(finite)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default="", help="only cases whose source contains this")
    ap.add_argument("--csv", help="write every comparison to this CSV")
    a = ap.parse_args()
    cases = [c for c in all_cases() if a.source.lower() in c.source.lower()]
    results = rows(cases)
    print(f"{'case':78s} {'metric':17s} {'measured':>10s} {'model':>10s} {'error':>8s} {'util':>5s}")
    for r in results:
        if "metric" not in r:
            print(f"{r['case'].label[:78]:78s} could not be predicted: {r['error']}")
            continue
        u = r["utilization"]
        print(f"{r['case'].label[:78]:78s} {r['metric']:17s} {r['measured']:10.2f} {r['predicted']:10.2f} "
              f"{100 * r['error']:+7.0f}% {'' if u is None else format(u, '5.2f')}")
    summary(results, "all sources")
    for source in sorted({r["case"].source for r in results if "metric" in r}):
        summary([r for r in results if r["case"].source == source], source)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["source", "label", "metric", "measured", "predicted", "error", "utilization"])
            for r in results:
                if "metric" in r:
                    w.writerow([r["case"].source, r["case"].label, r["metric"], r["measured"], r["predicted"],
                                r["error"], r["utilization"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
