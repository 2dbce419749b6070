"""What the report shows, computed from the results: rows, diffs against the base, sweeps.

Pure functions over ScenarioResults; the writers (CSV/JSON, Markdown, HTML, plots)
only format what is here, so every output agrees.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from solver.output.result import HOURS_PER_MONTH
from solver.review.expand import Review
from solver.review.result import ScenarioResult
from solver.review.sensitivity import SensitivityRow, analyse

COST_EPS_USD_PER_HOUR = 1e-6


@dataclass
class FleetDiff:
    """One scenario against the base: instances added and removed per offer, cost change."""

    id: str
    name: str
    group: str
    status: str
    delta_usd_per_hour: float | None
    delta_pct: float | None
    added: list[tuple[str, int]] = field(default_factory=list)  # (offer id, instances)
    removed: list[tuple[str, int]] = field(default_factory=list)

    @property
    def delta_usd_per_month(self) -> float | None:
        return None if self.delta_usd_per_hour is None else self.delta_usd_per_hour * HOURS_PER_MONTH

    @property
    def unchanged(self) -> bool:
        return not self.added and not self.removed


@dataclass
class SweepSeries:
    name: str
    change: str  # "demand", "slo", ...
    parameter: str  # "factor", "tpot_ms", ...
    service: str | None
    points: list[ScenarioResult]  # in sweep order


@dataclass
class ReportData:
    review: Review
    results: list[ScenarioResult]  # in review order
    base: ScenarioResult
    gpu_types: list[str]
    diffs: list[FleetDiff]
    sweeps: list[SweepSeries]
    sensitivity: list[SensitivityRow]
    counts: dict[str, int]

    def by_group(self, *groups: str) -> list[ScenarioResult]:
        return [r for r in self.results if r.group in groups]


def build_report_data(review: Review, results: list[ScenarioResult]) -> ReportData:
    by_id = {r.id: r for r in results}
    ordered = [by_id[s.id] for s in review.scenarios if s.id in by_id]
    if "base" not in by_id:
        raise ValueError("the base scenario has no result; run the review before writing its report")
    base = by_id["base"]
    gpu_types = sorted({g for r in ordered for g in r.gpus_by_type})
    diffs = [fleet_diff(base, r) for r in ordered if r.id != "base"]
    sensitivity = analyse(base, [r for r in ordered if r.group == "sensitivity"], review.workload, review.catalog) \
        if review.spec.sensitivity.enabled else []
    return ReportData(review, ordered, base, gpu_types, diffs, _sweeps(review, ordered), sensitivity,
                      dict(Counter(r.status for r in ordered)))


def fleet_diff(base: ScenarioResult, r: ScenarioResult) -> FleetDiff:
    delta = pct = None
    if base.planned and r.planned:
        delta = round(r.usd_per_hour - base.usd_per_hour, 6)
        pct = round(100.0 * delta / base.usd_per_hour, 2) if base.usd_per_hour else None
    diff = FleetDiff(r.id, r.name, r.group, r.status, delta, pct)
    if not r.planned:
        return diff
    before = {f["offer_id"]: f["instances"] for f in base.fleet} if base.planned else {}
    after = {f["offer_id"]: f["instances"] for f in r.fleet}
    for offer_id in sorted(set(before) | set(after)):
        change = after.get(offer_id, 0) - before.get(offer_id, 0)
        if change > 0:
            diff.added.append((offer_id, change))
        elif change < 0:
            diff.removed.append((offer_id, -change))
    return diff


def _sweeps(review: Review, ordered: list[ScenarioResult]) -> list[SweepSeries]:
    out = []
    for spec in review.spec.sweeps:
        points = [r for r in ordered if r.group == "sweep" and r.sweep == spec.name]
        out.append(SweepSeries(spec.name, spec.change, spec.varied, spec.fixed.get("service"), points))
    return out


def status_line(counts: dict[str, int]) -> str:
    order = ("optimal", "feasible", "infeasible", "timeout", "invalid", "error")
    return ", ".join(f"{counts[s]} {s}" for s in order if counts.get(s))


def reason_text(r: ScenarioResult, limit: int = 300) -> str:
    if r.reasons:
        text = " | ".join(x["message"] + (f" To fix: {x['fix']}" if x.get("fix") else "") for x in r.reasons)
    else:
        text = r.error.splitlines()[0] if r.error else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def gpu_mix_text(r: ScenarioResult) -> str:
    return ", ".join(f"{n}×{g}" for g, n in r.gpus_by_type.items()) or "-"


def diff_text(d: FleetDiff) -> str:
    parts = [f"+{n} {o}" for o, n in d.added] + [f"−{n} {o}" for o, n in d.removed]
    return "; ".join(parts) if parts else ("no change" if d.status in ("optimal", "feasible") else "-")
