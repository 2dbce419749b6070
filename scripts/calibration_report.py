#!/usr/bin/env python
"""Print the performance model against every calibration row: measured, predicted, error.

    python scripts/calibration_report.py [--csv PATH] [--markdown]

Rows that cannot be predicted (image-generation throughput) are listed with the reason.
The vLLM engine-reference rows (solver/perf/data/engine_reference.csv) follow, apart.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
        out.append([str(c.row), c.label, q.engine, str(q.batch), f"{q.prompt_tokens}/{q.output_tokens}", c.metric,
                    UNITS[c.metric], f"{c.measured:.4g}", f"{r.predicted:.4g}", f"{100 * r.relative_error:+.1f}%"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=fit.BENCHMARKS_CSV, help="calibration CSV (default: the shipped copy)")
    parser.add_argument("--markdown", action="store_true", help="Markdown tables (for docs/performance-model.md)")
    args = parser.parse_args()
    cases, skipped = fit.benchmark_cases(path=args.csv)
    rows = fit.residuals(cases=cases)
    headers = ["row", "measurement", "engine", "batch", "in/out", "metric", "unit", "measured", "predicted", "error"]
    print(f"Calibration rows ({args.csv.name}): {len(cases)} usable, {len(skipped)} skipped\n")
    print(table(residual_rows(rows), headers, args.markdown))
    print("\nMedian absolute relative error per metric (targets: throughput and TPOT <= 15 %, TTFT <= 25 %):")
    for metric, err in fit.median_abs_errors(rows).items():
        n = sum(1 for r in rows if r.case.metric == metric)
        print(f"  {metric:13s} {100 * err:5.1f} %  over {n} rows")
    print("Error bands stated with each estimate (80th percentile of leave-one-out |error|): "
          f"throughput {fit.ERROR_BAND_THROUGHPUT:.0%}, TPOT {fit.ERROR_BAND_TPOT:.0%}, TTFT {fit.ERROR_BAND_TTFT:.0%}")
    if skipped:
        print("\nSkipped rows:")
        for s in skipped:
            print(f"  row {s.row}: {s.label}: {s.reason}")
    reference, _ = fit.benchmark_cases(path=fit.ENGINE_REFERENCE_CSV)
    if reference:
        print(f"\nEngine-reference rows ({fit.ENGINE_REFERENCE_CSV.name}; fit only the CUDA-graph layer overhead):\n")
        print(table(residual_rows(fit.residuals(cases=reference)), headers, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
