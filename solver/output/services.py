"""Per service of a plan: its demand, the capacity the plan gives it and each configuration
it uses (utilization, values under load, caps, engine settings, verification), with its
warnings, redundancy and disaggregated pools. Read by the single-hour and multi-period
results alike.
"""

from __future__ import annotations

import math
import threading
import time

from solver.catalog.types import Catalog
from solver.compile.load_caps import at_load, caps_per_replica, engine_options_of, real_routed, real_share
from solver.compile.problem import Problem
from solver.confidence import NOMINAL, rate_margin, slowdown
from solver.interrupt import Stop
from solver.optimize import redundancy
from solver.optimize.solution import Solution
from solver.output.prefetch import AtLoadPrefetch
from solver.output.result import AssignmentView, EngineSettings, ConfidenceView, PoolSimulation, RedundancyView, ServiceResult, SloCheck
from solver.output.sanity import low_utilization_warnings, tail_class_warnings, verification_warnings


def load_warnings(s, views: list[AssignmentView]) -> list[str]:
    """Services without a percentile SLO: where p99 at the real demand's rate (the plan's
    routing without constraints.headroom, as at_load) would miss a bound."""
    if s.slo.percentile is not None:
        return []
    out = []
    for v in views:
        at = v.at_load
        if at is None or at.meets_slo:
            continue
        misses = [f"{label} {'cannot keep up' if getattr(at, name) is None else f'{getattr(at, name):.0f} ms'} "
                  f"> {bound:g} ms"
                  for name, label, bound in (("ttft_ms", "TTFT", s.slo.ttft_ms), ("tpot_ms", "TPOT", s.slo.tpot_ms),
                                             ("latency_ms", "latency", s.slo.latency_ms))
                  if bound is not None and (getattr(at, name) is None or getattr(at, name) > bound)]
        out.append(f"{v.config}: at the demand's load (utilization {v.utilization:.0%}, "
                   f"{at.utilization:.0%} of what a replica sustains), "
                   f"p99 {', '.join(misses)}. To fix: state slo.percentile so the plan is sized for it")
    return out


def service_results(problem: Problem, solution: Solution, catalog: Catalog,
                    answer_by: float | None = None, cancel: threading.Event | None = None,
                    prefetch: AtLoadPrefetch | None = None) -> list[ServiceResult]:
    """Per service: its demand, the capacity the plan gives it, and each configuration used.
    Past `answer_by`, services without a percentile SLO get no at_load values (each costs
    a queueing-model run); a service with one always gets them (its plan was sized by them).
    A cancel ends the work (checked before each queueing-model run, ~10 ms apart). Values
    a `prefetch` child has finished are taken from it (the same function of the same inputs)."""
    stop = Stop(cancel)
    used = {a.config_key for a in solution.assignments}
    by_key = {c.key: c for c in problem.configs if c.key in used}
    services = []
    mine = solution.by_service()
    active = set(mine)
    for s in problem.services:
        if s.role and s.name not in active:
            continue  # a disaggregated pool the plan does not use
        # Utilization and the values under load are at the real demand's rate; the rows
        # carry demand x (1 + headroom), whose extra is reported apart (headroom_utilization).
        share = real_share(problem, s)
        views = []
        tail_notes: list[str] = []
        skipped = False
        capacity = [0.0] * len(s.class_demand)
        for a in mine.get(s.name, ()):
            c = by_key[a.config_key]
            thr = [k.throughput for k in c.classes]
            used = sum(r / t for r, t in zip(a.routed, thr) if t > 0)
            for k, t in enumerate(thr):
                capacity[k] += t * a.replicas
            worst = lambda attr: max((getattr(k, attr) for k in c.classes if getattr(k, attr) is not None), default=None)
            view = AssignmentView(
                a.config_key, c.offer_id, problem.offer(c.offer_id).gpu, c.gpus_per_replica, c.instances_per_replica,
                c.precision, c.source, a.replicas, [round(t, 6) for t in thr], [round(r, 6) for r in a.routed],
                round(used * share / a.replicas, 4), worst("ttft_ms"), worst("tpot_ms"), worst("latency_ms"),
                c.classes[0].batch, c.memory_gib_per_gpu, c.classes[0].binding_limit, c.error_band,
                headroom_utilization=_reserve(used * (1.0 - share) / a.replicas))
            for name, bound in s.slo.bounds():
                view.slo_checks.append(SloCheck(name, getattr(view, name), bound))
            settings = engine_options_of(catalog, problem.calibration, s, c)
            view.engine_options = EngineSettings(**settings) if settings is not None else None
            check = problem.checks.get(c.key)
            if check is not None:
                view.verified = check.view()
            if s.role:  # a prefill or decode worker: its rate already holds its percentile (solver/perf/disagg.py)
                views.append(view)
                continue
            tail_notes.extend(tail_class_warnings(s, c))
            if s.slo.percentile is None and answer_by is not None and time.monotonic() > answer_by:
                skipped = True
            else:
                stop.check("the values under load")
                real = real_routed(problem, s, a.routed)
                done = prefetch.values(problem, s.name, c, a.replicas, real) if prefetch is not None else None
                view.at_load = done if done is not None else at_load(catalog, problem.calibration, s, c, a.replicas,
                                                                      real)
            caps = caps_per_replica(catalog, problem.calibration, s, c, a.routed)
            if caps is not None:
                view.cap_per_replica, view.cap_per_replica_nominal = round(caps[0], 6), round(caps[1], 6)
            views.append(view)
        # Utilization = busy replica-time / replicas at the real demand (the headroom's extra
        # apart); capacity at this class mix = the planned rate / the planned busy share.
        replicas = sum(v.replicas for v in views)
        busy = sum(v.utilization * v.replicas for v in views)
        extra = sum((v.headroom_utilization or 0.0) * v.replicas for v in views)
        utilization = busy / replicas if replicas else 0.0
        headroom_utilization = extra / replicas if replicas else 0.0
        if len(s.class_demand) == 1:
            total_cap = capacity[0]
        else:
            planned = utilization + headroom_utilization
            total_cap = s.total_demand / planned if planned > 0 else 0.0
        llm = s.model is not None
        if s.role:
            rate = sum(sum(v.routed) for v in views)
            services.append(ServiceResult(s.name, s.unit, round(rate * share, 6), round(rate, 6), round(total_cap, 6),
                                          round(utilization, 4), list(s.class_names), views,
                                          model=s.model_label if llm else None, engine=s.engine if llm else None,
                                          role=s.role, serves=s.feeds, link=s.link,
                                          headroom_utilization=_reserve(headroom_utilization)))
            continue
        warnings = (load_warnings(s, views) + low_utilization_warnings(s, views) + tail_notes
                    + verification_warnings(s, views))
        if skipped:
            warnings.append("values under load (at_load) not computed for every configuration: the call's deadline "
                            "came first. To fix: give the call a longer deadline")
        services.append(ServiceResult(s.name, s.unit, s.raw_demand, s.total_demand, round(total_cap, 6),
                                      round(utilization, 4), list(s.class_names), views, warnings=warnings,
                                      model=s.model_label if llm else None, engine=s.engine if llm else None,
                                      confidence=_confidence_view(s, problem.calibration),
                                      capacity_margin=_capacity_margin(views),
                                      headroom_utilization=_reserve(headroom_utilization)))
    return _with_redundancy(problem, solution,
                            _with_pool_checks(problem, solution, catalog, _with_pool_capacity(services)))


def _with_redundancy(problem: Problem, solution: Solution, services: list[ServiceResult]) -> list[ServiceResult]:
    """Each service's worst single-domain loss (services with a failure domain), and a
    warning where min_replicas alone looks like redundancy but one instance's loss leaves
    the service short (the replicas are not alike: one carries almost everything)."""
    by_name = {r.name: r for r in services}
    for name, sv in redundancy.survivals(problem, solution).items():
        r = by_name.get(name)
        if r is None or not sv.worst_domain:
            continue
        r.redundancy = RedundancyView(sv.domain, sv.serve_fraction, sv.worst_domain,
                                      round(sv.surviving_fraction, 6), sv.exact)
        if sv.domain == "zone":
            r.warnings.append("redundancy by zone is planned as by region: the catalog lists offers by region, not "
                              "zone, so the plan survives a region's loss (its cost is an upper bound on zone N+1)")
    bare = [s for s in problem.services if not s.redundancy_domain and not s.role and s.min_replicas >= 2
            and s.raw_demand > 0 and s.name in by_name]
    if bare:
        import dataclasses

        bare_names = {s.name for s in bare}  # by name: `s in bare` compared whole services, 5,000 x 5,000
        shadow = dataclasses.replace(problem, services=tuple(
            dataclasses.replace(s, redundancy_domain="instance", redundancy_fraction=1.0,
                                redundancy_demand=tuple(d / (1 + problem.headroom) for d in s.class_demand))
            if s.name in bare_names else s for s in problem.services))
        for name, sv in redundancy.survivals(shadow, solution).items():
            if sv.worst_domain and sv.surviving_fraction < 1 - 1e-6:
                by_name[name].warnings.append(
                    f"min_replicas {shadow.service(name).min_replicas} is not N+1 here: losing "
                    f"{sv.worst_domain} leaves {_floor_percent(sv.surviving_fraction)} of the demand served. To "
                    f"fix: set constraints.redundancy (e.g. {{domain: instance}}) to plan N+1 exactly")
    return services


def _with_pool_checks(problem: Problem, solution: Solution, catalog: Catalog,
                      services: list[ServiceResult]) -> list[ServiceResult]:
    """Each disaggregated deployment the plan uses, replayed by the simulator at the rate
    the plan routes to it (solver/sim/disagg.py): its percentiles, and a warning where they
    miss the SLO."""
    from solver.compile.disagg import deployment_check

    by_name = {r.name: r for r in services}
    for r in services:
        if r.role != "prefill":
            continue
        partner = next((x for x in services if x.role == "decode" and x.serves == r.serves and x.link == r.link), None)
        if partner is None:
            continue
        check = deployment_check(problem, solution, catalog, r.serves, r.link)
        r.simulated = partner.simulated = PoolSimulation(**check["view"])
        parent = by_name.get(r.serves)
        if parent is not None:
            parent.warnings.extend(check["warnings"])
    return services


def _floor_percent(share: float) -> str:
    """A share below 1 as a percentage that never rounds up to 100 %."""
    return f"{math.floor(share * 1000) / 10:g} %"


def _reserve(share: float) -> float | None:
    """headroom_utilization as reported: rounded, and None without a headroom (absent in
    the proto, as clients that drop default values show it)."""
    share = round(share, 4)
    return share if share > 0 else None


def _with_pool_capacity(services: list[ServiceResult]) -> list[ServiceResult]:
    """A service's capacity counts each disaggregated deployment it uses: per link tier, the
    smaller of its prefill and decode pools' capacity (every request takes both)."""
    pools: dict[str, dict[str, dict[str, float]]] = {}
    for r in services:
        if r.role:
            pools.setdefault(r.serves, {}).setdefault(r.link, {})[r.role] = r.capacity
    for r in services:
        tiers = pools.get(r.name)
        if tiers and not r.role:
            r.capacity = round(r.capacity + sum(min(t.get("prefill", 0.0), t.get("decode", 0.0))
                                                for t in tiers.values()), 6)
            r.utilization = round(r.demand / r.capacity, 4) if r.capacity > 0 else 0.0
            r.headroom_utilization = _reserve((r.demand_with_headroom - r.demand) / r.capacity
                                              if r.capacity > 0 else 0.0)
    return services


def _confidence_view(s, calibration) -> ConfidenceView | None:
    """What a percentile service's caps were sized for; None without a percentile SLO."""
    if s.slo.percentile is None:
        return None
    level = s.slo.confidence
    return ConfidenceView(NOMINAL if level is None else level, round(slowdown(level, calibration), 6),
                          rate_margin(level))


def _capacity_margin(views: list[AssignmentView]) -> float | None:
    """1 - capacity at the plan's caps / capacity at the nominal caps, replicas weighing."""
    capped = [v for v in views if v.cap_per_replica_nominal is not None]
    nominal = sum(v.cap_per_replica_nominal * v.replicas for v in capped)
    if not capped or nominal <= 0:
        return None
    return round(1.0 - sum(v.cap_per_replica * v.replicas for v in capped) / nominal, 4)
