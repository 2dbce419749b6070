"""Write a review's report into DIR: results.json, results.csv, report.md, report.html, plots/.

results.csv has one row per scenario: status, $/hour, $/month, GPUs in total and by
type (one column per GPU type), optimality gap, change against the base, and the
reason when there is no plan. results.json holds the same rows plus the diffs against
the base and the sensitivity analysis. The HTML embeds its plots (data: URIs), so the
page is self-contained; report.md links them as files in plots/.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

from solver.review.atomic import write_atomic
from solver.review.expand import Review
from solver.review.plots import draw_all
from solver.review.report_data import ReportData, build_report_data, reason_text
from solver.review.report_html import render_html
from solver.review.report_md import render_markdown
from solver.review.result import ScenarioResult


def write_report(review: Review, results: list[ScenarioResult], out_dir: str | Path) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = build_report_data(review, results)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    plots = draw_all(data, out)
    files = {
        "json": write_atomic(out / "results.json", json.dumps(results_json(data, generated), indent=1)),
        "csv": write_atomic(out / "results.csv", results_csv(data)),
        "markdown": write_atomic(out / "report.md", render_markdown(data, plots, generated)),
        "html": write_atomic(out / "report.html", render_html(data, plots, generated, out)),
    }
    files.update({p.file: out / p.file for p in plots})
    return files


def results_json(data: ReportData, generated: str) -> dict:
    diffs = {d.id: d for d in data.diffs}
    rows = []
    for r in data.results:
        row = r.to_dict(with_plan=False)
        d = diffs.get(r.id)
        row["delta_usd_per_hour_vs_base"] = d.delta_usd_per_hour if d else 0.0
        rows.append(row)
    return {
        "review": data.review.name,
        "description": data.review.spec.description,
        "generated": generated,
        "counts": data.counts,
        "base": {"status": data.base.status, "usd_per_hour": data.base.usd_per_hour,
                 "usd_per_month": data.base.usd_per_month, "gpus_by_type": data.base.gpus_by_type},
        "scenarios": rows,
        "diffs": [{**asdict(d), "delta_usd_per_month": d.delta_usd_per_month} for d in data.diffs],
        "sensitivity": [asdict(s) for s in data.sensitivity],
    }


CSV_COLUMNS = ["id", "name", "group", "sweep", "parameter", "value", "status", "usd_per_hour", "usd_per_month",
               "gpus", "optimality_gap", "delta_usd_per_hour_vs_base", "solve_time_s", "wall_s", "reason"]


def results_csv(data: ReportData) -> str:
    buf = io.StringIO()
    gpu_columns = [f"gpus[{g}]" for g in data.gpu_types]
    columns = CSV_COLUMNS[:10] + gpu_columns + CSV_COLUMNS[10:]
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    diffs = {d.id: d for d in data.diffs}
    for r in data.results:
        d = diffs.get(r.id)
        row = {"id": r.id, "name": r.name, "group": r.group, "sweep": r.sweep or "", "parameter": r.parameter or "",
               "value": "" if r.value is None else f"{r.value:g}", "status": r.status,
               "usd_per_hour": _num(r.usd_per_hour), "usd_per_month": _num(r.usd_per_month),
               "gpus": "" if r.gpus is None else r.gpus, "optimality_gap": _num(r.optimality_gap),
               "delta_usd_per_hour_vs_base": _num(d.delta_usd_per_hour) if d else "0",
               "solve_time_s": _num(r.solve_time_s), "wall_s": _num(r.wall_s), "reason": reason_text(r)}
        for g in data.gpu_types:
            row[f"gpus[{g}]"] = r.gpus_by_type.get(g, 0) if r.planned else ""
        writer.writerow(row)
    return buf.getvalue()


def _num(x: float | None) -> str:
    return "" if x is None else str(round(x, 6))
