"""The review report as Markdown (tables and image links to plots/)."""

from __future__ import annotations

from solver.review.plots import Plot
from solver.review.report_data import ReportData
from solver.review.report_tables import (Table, definition_table, diff_table, failure_table, headline,
                                         scenario_table, sensitivity_table)


def render_markdown(data: ReportData, plots: list[Plot], generated: str) -> str:
    spec = data.review.spec
    out = [f"# Capacity review: {spec.name}", ""]
    if spec.description:
        out += [spec.description.strip(), ""]
    out += [f"Generated {generated}; each scenario solved to proven optimality where possible "
            f"(time limit {spec.time_limit_per_scenario_s:g} s per scenario).", ""]
    out += [f"- {line}" for line in headline(data)] + [""]
    out += _table(scenario_table(data))
    if plots:
        out += ["## Plots", ""]
        for p in plots:
            out += [f"### {p.title}", "", f"![{p.title}]({p.file})", "", p.caption, ""]
    out += _table(diff_table(data))
    if data.sensitivity:
        out += _table(sensitivity_table(data))
    failures = failure_table(data)
    if failures.rows:
        out += _table(failures)
    out += _table(definition_table(data))
    return "\n".join(out).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(t: Table) -> list[str]:
    lines = [f"## {t.title}", "", t.intro, ""]
    if not t.rows:
        return lines + ["(none)", ""]
    lines.append("| " + " | ".join(t.headers) + " |")
    lines.append("|" + "|".join("---" for _ in t.headers) + "|")
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in t.rows]
    return lines + [""]
