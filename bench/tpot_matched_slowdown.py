#!/usr/bin/env python3
"""Benchmark (analysis): where the MLPerf Server / Interactive rows sit on the model's curve.

For every MLPerf Server or Interactive row with an Offline pair, the slowdown s at which the
queueing model's p50 TPOT at the row's measured rate equals the measured p50 TPOT (bisection
in log s on `replica.slowed(s)`), beside the same system's Offline ratio (predicted /
measured saturation, unslowed). Then, on the replica slowed by s, every other measured
percentile's error and the model's utilization at the measured rate. The shipped
calibration, not held out (bench/under_load_targets.py holds out by source): an analysis
of the model's shape under load, not an accuracy figure.

    PYTHONPATH=. .venv/bin/python bench/tpot_matched_slowdown.py    # ~1 minute

docs/queueing.md ("Where the MLPerf Server rows sit") reads it.
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver.perf.queueing import load_model, replica_for  # noqa: E402
from solver.perf.under_load import mlperf_cases, query_for  # noqa: E402


def tpot_p50(replica, case) -> float:
    model = load_model(replica, case.classes, 1.0)
    if model.saturation_rate() <= case.rate_per_s:
        return math.inf
    return model.at_rate(case.rate_per_s).value("tpot_ms", 50)


def matched_slowdown(replica, case, measured: float) -> float:
    lo, hi = 0.5, 2.0
    for _ in range(16):
        mid = math.sqrt(lo * hi)
        if tpot_p50(replica.slowed(mid), case) < measured:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def main() -> int:
    rows = []
    errors: dict[str, list[float]] = {}
    print(f"{'s (TPOT p50)':>12} {'Offline s*':>10} {'u model':>7}  row")
    for case in mlperf_cases():
        measured = dict(case.measured)
        if case.rate_per_s is None or not case.measured_saturation_per_s or "tpot_ms_p50" not in measured:
            continue
        replica = replica_for(query_for(case))
        s = matched_slowdown(replica, case, measured["tpot_ms_p50"])
        offline = load_model(replica, case.classes, 1.0).saturation_rate() / case.measured_saturation_per_s
        slow = load_model(replica.slowed(s), case.classes, 1.0)
        cells = []
        if slow.saturation_rate() > case.rate_per_s:
            at = slow.at_rate(case.rate_per_s)
            for metric, value in case.measured:
                if metric.startswith(("ttft_ms_p", "tpot_ms_p")):
                    name, p = metric.rsplit("_p", 1)
                    e = at.value(name, int(p)) / value - 1.0
                    errors.setdefault(metric, []).append(e)
                    cells.append(f"{name[:4]}{p} {e:+.2f}")
        rows.append((s, offline))
        print(f"{s:12.3f} {offline:10.3f} {case.rate_per_s / slow.saturation_rate():7.3f}  {case.label[:70]}  "
              + " ".join(cells), flush=True)
    print(f"\n{len(rows)} rows: median s {statistics.median(r[0] for r in rows):.3f}, median Offline ratio "
          f"{statistics.median(r[1] for r in rows):.3f}, median s / Offline ratio "
          f"{statistics.median(r[0] / r[1] for r in rows):.3f}")
    for metric, es in errors.items():
        print(f"at s: {metric:12s} median abs error {statistics.median(abs(e) for e in es):6.1%}, signed "
              f"{statistics.median(es):+6.1%} ({len(es)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
