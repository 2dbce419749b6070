"""The report's tables as headers and rows of text, shared by the Markdown and HTML writers."""

from __future__ import annotations

from dataclasses import dataclass

from solver.review.report_data import ReportData, diff_text, gpu_mix_text, reason_text, status_line
from solver.review.result import ScenarioResult


@dataclass
class Table:
    title: str
    intro: str
    headers: list[str]
    rows: list[list[str]]
    status_column: int | None = None  # which column holds a status (the HTML colours it)


def money(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"${x:,.{digits}f}"


def signed_money(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{'+' if x > 0 else '−' if x < 0 else '±'}${abs(x):,.2f}"


def headline(data: ReportData) -> list[str]:
    """A few sentences a reader takes away first."""
    base = data.base
    lines = [f"{len(data.results)} scenarios: {status_line(data.counts)}."]
    if base.planned:
        lines.append(f"Base plan: {money(base.usd_per_hour, 4)}/hour ({money(base.usd_per_month, 0)}/month), "
                     f"{base.gpus} GPU{'s' if base.gpus != 1 else ''} ({gpu_mix_text(base)}).")
    else:
        lines.append(f"The base workload has no plan ({base.status}): {reason_text(base)}")
    costed = [d for d in data.diffs if d.delta_usd_per_hour is not None and d.group == "scenario"]
    if costed:
        hi = max(costed, key=lambda d: d.delta_usd_per_hour)
        lo = min(costed, key=lambda d: d.delta_usd_per_hour)
        if hi.delta_usd_per_hour > 0:
            lines.append(f"Dearest named scenario: {hi.name!r}, {signed_money(hi.delta_usd_per_hour)}/hour "
                         f"({hi.delta_pct:+.1f}%).")
        if lo.delta_usd_per_hour < 0:
            lines.append(f"Largest saving among named scenarios: {lo.name!r}, {signed_money(lo.delta_usd_per_hour)}/hour "
                         f"({lo.delta_pct:+.1f}%).")
    binding = [s for s in data.sensitivity if s.binds]
    if binding:
        lines.append("Binding constraints: " + "; ".join(s.summary for s in binding[:3]) + ".")
    elif data.sensitivity:
        lines.append("No constraint of the base binds: relaxing any one step saves nothing.")
    return lines


def scenario_table(data: ReportData) -> Table:
    diffs = {d.id: d for d in data.diffs}
    rows = []
    for r in data.by_group("base", "scenario", "sweep"):
        d = diffs.get(r.id)
        rows.append([r.name, r.status, money(r.usd_per_hour, 4), money(r.usd_per_month, 0),
                     signed_money(d.delta_usd_per_hour) if d else "base", "-" if r.gpus is None else str(r.gpus),
                     gpu_mix_text(r), _gap(r)])
    return Table("Scenarios", "Each scenario's cheapest fleet (the base first, then named scenarios, then sweeps).",
                 ["scenario", "status", "$/hour", "$/month", "vs base $/hour", "GPUs", "GPUs by type", "gap"],
                 rows, status_column=1)


def diff_table(data: ReportData) -> Table:
    rows = []
    for d in data.diffs:
        if d.group == "sensitivity":
            continue
        pct = "-" if d.delta_pct is None else f"{d.delta_pct:+.1f}%"
        rows.append([d.name, d.status, signed_money(d.delta_usd_per_hour), pct, diff_text(d)])
    return Table("Changes against the base", "Instances added (+) and removed (−) per offer, and the cost change.",
                 ["scenario", "status", "Δ $/hour", "Δ %", "fleet change"], rows, status_column=1)


def sensitivity_table(data: ReportData) -> Table:
    rows = [[s.constraint, s.in_base_plan, s.relaxation, s.status, signed_money(s.delta_usd_per_hour),
             "yes" if s.binds else "no", s.summary] for s in data.sensitivity]
    return Table("Sensitivity of the base plan",
                 "Each constraint relaxed one step and re-solved. It binds when relaxing it lowers the cost "
                 "(or makes an infeasible base feasible).",
                 ["constraint", "in the base plan", "relaxed one step", "status", "Δ $/hour", "binds", "finding"],
                 rows, status_column=3)


def failure_table(data: ReportData) -> Table:
    rows = [[r.name, r.status, reason_text(r, 600)] for r in data.results if not r.planned]
    return Table("Scenarios without a plan", "Recorded with the reason; the other scenarios went on.",
                 ["scenario", "status", "why, and how to fix it"], rows, status_column=1)


def definition_table(data: ReportData) -> Table:
    rows = [[r.name, r.group, "; ".join(change_text(c) for c in r.changes) or "(none)"]
            for r in data.results if r.group != "sensitivity"]
    return Table("Scenario definitions", "The changes each scenario applies to the base, in order.",
                 ["scenario", "kind", "changes"], rows)


def change_text(change: dict) -> str:
    (kind, body), = change.items()
    if isinstance(body, list):
        names = [b.get("name", "") if isinstance(b, dict) else str(b) for b in body]
        return f"{kind}: {', '.join(names)}"
    if kind in ("demand", "price") and "factor" in body:
        scope = ", ".join(f"{k}={v}" for k, v in body.items() if k != "factor") or "all"
        return f"{kind} ×{body['factor']:g} ({scope})"
    return f"{kind}: " + ", ".join(f"{k}={'none' if v is None else v}" for k, v in body.items())


def _gap(r: ScenarioResult) -> str:
    if r.optimality_gap is None:
        return "-"
    return "0" if r.status == "optimal" else f"{r.optimality_gap:.2%}"
