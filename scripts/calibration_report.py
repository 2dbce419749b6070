#!/usr/bin/env python
"""Print the performance model against every calibration row: measured, predicted, error.

    python scripts/calibration_report.py [--markdown] [--skipped]

Rows come from the three calibration CSVs in solver/perf/data (llm_benchmarks,
engine_reference, and the no-queue rows of llm_latency_under_load); `--skipped` lists the
rows left out, with the reason. The errors here are in-sample (the constants were fitted
to these rows); `scripts/fit_calibration.py --cv` gives the cross-validated ones.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver.perf import Calibration  # noqa: E402
from solver.perf import calibration as fit  # noqa: E402

UNITS = {"throughput": "tok/s/GPU", "tpot": "ms", "ttft": "ms", "weights_gib": "GiB", "kv_cache_gib": "GiB"}


def table(rows: list[list[str]], headers: list[str], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    return "\n".join(lines + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows])


def residual_rows(residuals) -> list[list[str]]:
    out = []
    for r in residuals:
        c, q = r.case, r.case.query
        out.append([c.key, c.label, q.engine, str(q.batch), f"{q.prompt_tokens}/{q.output_tokens}", c.metric,
                    r.regime or "-", UNITS[c.metric], f"{c.measured:.4g}", f"{r.predicted:.4g}",
                    f"{100 * r.relative_error:+.1f}%"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="Markdown tables (for docs/performance-model.md)")
    parser.add_argument("--skipped", action="store_true", help="also list the rows left out, with the reason")
    args = parser.parse_args()
    cases, skipped = fit.all_cases()
    rows = fit.residuals(cases=cases)
    headers = ["row", "measurement", "engine", "batch", "in/out", "metric", "regime", "unit", "measured",
               "predicted", "error"]
    print(f"Calibration rows: {len(cases)} usable, {len(skipped)} skipped\n")
    print(table(residual_rows(rows), headers, args.markdown))
    print("\nIn-sample median absolute relative error per metric:")
    for metric, err in fit.median_abs_errors(rows).items():
        n = sum(1 for r in rows if r.case.metric == metric)
        print(f"  {metric:13s} {100 * err:5.1f} %  over {n} rows")
    cal = Calibration()
    bands = ", ".join(f"{k} {v:.0%}" for k, v in cal.error_bands)
    print("Error bands stated with each estimate (80 % conformal quantiles of cross-validated |error|): "
          f"pooled throughput {cal.error_band:.0%}, TPOT {cal.tpot_error_band:.0%}, TTFT {cal.ttft_error_band:.0%}"
          + (f"; by regime {bands}" if bands else ""))
    if args.skipped:
        print("\nSkipped rows:")
        for s in skipped:
            print(f"  {s.source}:{s.row}: {s.label}: {s.reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
