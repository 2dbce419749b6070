"""Sensitivity of the base plan: relax each constraint one step, re-solve, compare.

`relaxations()` turns every constraint of the base workload into one scenario that
relaxes it one step (a GPU quota by the largest instance of that GPU type, an offer
quota or availability by one instance, an SLO bound by a fraction, the budget by a
fraction, the headroom down a step, an offer filter removed). They run with the other
scenarios. `analyse()` then reads the base plan and those results: which constraints
are tight in the base plan, and how much the cost moves when each is relaxed
("8 more H100-SXM GPUs of quota saves $X/hour"). A constraint binds when relaxing it
lowers the cost, or makes an infeasible base feasible.
"""

from __future__ import annotations

from dataclasses import dataclass

from solver.catalog.owned import OWNED_PROVIDER
from solver.catalog.types import Catalog
from solver.output.result import HOURS_PER_MONTH
from solver.review.expand import Scenario, slug
from solver.review.result import ScenarioResult
from solver.review.spec import Change, SensitivitySpec
from solver.workload.schema import MAX_MS, Workload

MAX_AVAILABILITY_RELAXATIONS = 50  # catalogs with many limited offers: the 50 cheapest per GPU-hour
SAVING_EPS_USD_PER_HOUR = 1e-6
SLO_AT_BOUND = 0.98  # a predicted latency within 2% of its SLO counts as at the bound
# The change schema's bounds (solver/review/spec.py): a relaxation never steps past them.
MAX_QUOTA = 10_000_000
MAX_BUDGET_USD_PER_HOUR = 1e7

_SLO_WORDS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}


def relaxations(workload: Workload, catalog: Catalog, spec: SensitivitySpec) -> list[Scenario]:
    c = workload.constraints
    out: list[Scenario] = []

    def add(label: str, kind: str, change: dict, value: float | None, what: str, service: str | None = None):
        varied = next((k for k in change if k not in ("service", "gpu", "offer")), "")
        out.append(Scenario(slug(f"sensitivity-{label}"), f"relax {label}", "sensitivity",
                            (Change.model_validate({kind: change}),), what, parameter=f"{kind}.{varied}",
                            value=value, relaxes=label, service=service))

    for gpu, quota in sorted(c.gpu_quotas.items()):
        sizes = [o.gpus_per_instance for o in catalog.offers if o.gpu == gpu]
        if sizes and quota + max(sizes) * spec.quota_step_instances <= MAX_QUOTA:
            step = max(sizes) * spec.quota_step_instances
            add(f"quota[{gpu}]", "gpu_quota", {"gpu": gpu, "gpus": quota + step}, quota + step,
                f"{step} more {gpu} GPU{'s' if step > 1 else ''} of quota ({quota} -> {quota + step})")
    for offer_id, quota in sorted(c.offer_quotas.items()):
        n = spec.quota_step_instances
        if quota + n > MAX_QUOTA:
            continue
        add(f"offer_quota[{offer_id}]", "offer_quota", {"offer": offer_id, "instances": quota + n}, quota + n,
            f"{n} more {offer_id} instance{'s' if n > 1 else ''} of quota ({quota} -> {quota + n})")
    # Owned servers are not a market to buy one more from (their count is the workload's
    # owned[].count, and the catalog offer is made from it): not relaxed here.
    limited = sorted((o for o in catalog.offers if o.available_instances is not None
                      and o.provider != OWNED_PROVIDER),
                     key=lambda o: (o.price_usd_per_gpu_hour, o.id))[:MAX_AVAILABILITY_RELAXATIONS]
    for o in limited:
        n = spec.quota_step_instances
        if o.available_instances + n > MAX_QUOTA:
            continue
        add(f"availability[{o.id}]", "availability", {"offer": o.id, "instances": o.available_instances + n},
            o.available_instances + n, f"{n} more {o.id} instance{'s' if n > 1 else ''} available "
            f"({o.available_instances} -> {o.available_instances + n})")
    for svc in workload.services:
        for name, word in _SLO_WORDS.items():
            bound = getattr(svc.slo, name)
            relaxed = _relaxed(bound, 1 + spec.slo_step, MAX_MS)
            if relaxed is not None:
                add(f"slo[{svc.name}].{name}", "slo", {"service": svc.name, name: relaxed}, relaxed,
                    f"{svc.name} {word} SLO {bound:g} -> {relaxed:g} ms", service=svc.name)
    relaxed = _relaxed(c.budget_usd_per_hour, 1 + spec.budget_step, MAX_BUDGET_USD_PER_HOUR)
    if relaxed is not None:
        add("budget", "budget", {"usd_per_hour": relaxed}, relaxed,
            f"budget ${c.budget_usd_per_hour:g} -> ${relaxed:g}/hour")
    if c.headroom > 0:
        relaxed = round(max(0.0, c.headroom - spec.headroom_step), 6)
        add("headroom", "headroom", {"fraction": relaxed}, relaxed, f"headroom {c.headroom:.0%} -> {relaxed:.0%}")
    if spec.filters:
        for name, current, empty in (("providers", c.providers, None), ("regions", c.regions, None),
                                     ("gpu_types", c.gpu_types, None), ("exclude_gpu_types", c.exclude_gpu_types, [])):
            if current:
                add(f"filter.{name}", "constraints", {name: empty}, None,
                    f"dropping constraints.{name} ({', '.join(current)})")
    return out


def _relaxed(bound: float | None, factor: float, maximum: float) -> float | None:
    """The bound times factor, to 6 significant digits (never rounded to 0) and at most
    the schema's maximum; None when there is no bound or no room above it."""
    if bound is None:
        return None
    relaxed = min(float(f"{bound * factor:.6g}"), maximum)
    return relaxed if relaxed > bound else None


@dataclass
class SensitivityRow:
    constraint: str  # "quota[H100-SXM]", "slo[chat].tpot_ms", "budget", ...
    relaxation: str  # what was relaxed, in words
    status: str  # the relaxed scenario's status
    in_base_plan: str  # usage against the limit in the base plan, e.g. "16 of 16 GPUs used (tight)"
    tight: bool | None  # at its limit in the base plan (None: not a usage limit)
    delta_usd_per_hour: float | None  # relaxed cost - base cost (negative: saves)
    binds: bool
    summary: str


def analyse(base: ScenarioResult, relaxed: list[ScenarioResult], workload: Workload, catalog: Catalog) -> list[SensitivityRow]:
    rows = [_row(base, r, workload, catalog) for r in relaxed if r.group == "sensitivity"]
    rows.sort(key=lambda r: (not r.binds, r.delta_usd_per_hour if r.delta_usd_per_hour is not None else 0.0,
                             r.constraint))
    return rows


def _row(base: ScenarioResult, r: ScenarioResult, workload: Workload, catalog: Catalog) -> SensitivityRow:
    usage, tight = _usage(base, r, workload, catalog)
    what = r.relaxes or r.name
    relaxation = r.description or r.name
    if base.planned and r.planned:
        delta = round(r.usd_per_hour - base.usd_per_hour, 6)
        binds = delta < -SAVING_EPS_USD_PER_HOUR
        if binds:
            summary = (f"{relaxation} saves ${-delta:,.4f}/hour (${-delta * HOURS_PER_MONTH:,.0f}/month)")
        elif delta > SAVING_EPS_USD_PER_HOUR:  # only when a solve stopped short of optimal
            summary = f"{relaxation}: no saving (relaxed plan ${delta:,.4f}/hour dearer, not proven optimal)"
        else:
            summary = f"{relaxation} saves nothing: {what} does not bind"
        return SensitivityRow(what, relaxation, r.status, usage, tight, delta, binds, summary)
    if not base.planned and r.planned:
        return SensitivityRow(what, relaxation, r.status, usage, tight, None, True,
                              f"{relaxation} makes the base feasible, at ${r.usd_per_hour:,.4f}/hour")
    if not base.planned:
        return SensitivityRow(what, relaxation, r.status, usage, tight, None, False,
                              f"{relaxation}: still {r.status}")
    return SensitivityRow(what, relaxation, r.status, usage, tight, None, False,
                          f"{relaxation}: {r.status} ({r.error or '; '.join(x['message'] for x in r.reasons)[:200]})")


def _usage(base: ScenarioResult, r: ScenarioResult, workload: Workload, catalog: Catalog) -> tuple[str, bool | None]:
    if not base.planned or not r.changes:
        return "-", None
    (kind, body), = r.changes[0].items()
    c = workload.constraints
    if kind == "gpu_quota":
        used, limit = base.gpus_by_type.get(body["gpu"], 0), c.gpu_quotas[body["gpu"]]
        return f"{used} of {limit} GPUs used" + (" (tight)" if used >= limit else ""), used >= limit
    if kind in ("offer_quota", "availability"):
        used = sum(f["instances"] for f in base.fleet if f["offer_id"] == body["offer"])
        if kind == "offer_quota":
            limit = c.offer_quotas[body["offer"]]
        else:
            limit = next(o.available_instances for o in catalog.offers if o.id == body["offer"])
        return f"{used} of {limit} instances used" + (" (tight)" if used >= limit else ""), used >= limit
    if kind == "slo":
        name = next(k for k in body if k != "service")
        achieved = base.latency_ms.get(body["service"], {}).get(name)
        bound = getattr(next(s for s in workload.services if s.name == body["service"]).slo, name)
        if achieved is None:
            return "-", None
        at_bound = achieved >= bound * SLO_AT_BOUND
        return f"{achieved:g} of {bound:g} ms" + (" (at the bound)" if at_bound else ""), at_bound
    if kind == "budget":
        return f"${base.usd_per_hour:,.4f} of ${c.budget_usd_per_hour:g}/hour", None
    if kind == "headroom":
        return f"{c.headroom:.0%}", None
    return "-", None
