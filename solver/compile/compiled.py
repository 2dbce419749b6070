"""Compile a validated workload once: the `Problem` every later stage reads.

`compile_problem` resolves names, filters and prices offers, and turns each service into
a `ServiceDemand` (demand per class with headroom, token lengths, model architecture,
SLOs, profiles, limits). `build_problem` adds the candidate configurations. Nothing after
this reads the raw workload, except the independent evaluator (on purpose).
"""

from __future__ import annotations

from solver.catalog.types import Catalog
from solver.compile.problem import (ClassTokens, HorizonTerms, Period, Problem, Profile, RunningInstances,
                                    RunningReplicas, ServiceDemand, Slo)
from solver.compile.power import compile_power
from solver.compile.resolve import filter_offers, model_arch, offer_limits
from solver.confidence import DEFAULT_CONFIDENCE, NOMINAL
from solver.errors import InputError
from solver.perf import Calibration
from solver.workload.schema import Redundancy, Service, Workload


def compile_service(svc: Service, headroom: float, periods: tuple[Period, ...] = (),
                    redundancy: Redundancy | None = None, spot_cover: float = 0.0) -> ServiceDemand:
    """One service of the raw workload as the planner reads it (with its demand
    multiplier per period: `demand.profile[period]`, 1.0 where the profile is silent, the
    failure domain it must survive: `Workload.redundancy_of`, and the share of its demand
    that must outlive a reclaimed spot pool: `Workload.spot_cover_of`)."""
    rate = svc.demand.rate
    scale = 1.0 + headroom
    shares = (1.0,)
    if svc.demand.classes:
        shares = tuple(c.share for c in svc.demand.classes)
        names = tuple(c.name for c in svc.demand.classes)
        demand = tuple(rate * c.share * scale for c in svc.demand.classes)
        tokens = tuple(ClassTokens(c.prompt_tokens or 0, c.output_tokens or 0) for c in svc.demand.classes)
    else:
        names, demand = ("default",), (rate * scale,)
        tokens = (ClassTokens(svc.demand.prompt_tokens or 0, svc.demand.output_tokens or 0),)
    model = model_arch(svc.model) if svc.model is not None else None
    label = svc.model if isinstance(svc.model, str) else getattr(svc.model, "name", "")
    profiles = tuple(
        Profile(p.gpu, p.gpus_per_replica, p.precision, p.offer, p.request_class,
                p.requests_per_s if p.requests_per_s is not None else p.items_per_min,
                p.latency_ms, p.ttft_ms, p.tpot_ms, p.memory_gib_per_gpu)
        for p in svc.profiles)
    return ServiceDemand(
        svc.name, svc.demand.unit, names, demand, rate, svc.min_replicas, svc.max_replicas,
        class_tokens=tokens, model=model, model_label=label or "", precisions=tuple(svc.precisions),
        engine=svc.engine, slo=Slo(svc.slo.ttft_ms, svc.slo.tpot_ms, svc.slo.latency_ms, svc.slo.percentile,
                                   _confidence(svc.slo)),
        profiles=profiles, class_shares=shares, arrival_cv=svc.demand.arrival_cv,
        size_with_error_band=svc.size_with_error_band,
        kv_cache_dtype=None if svc.engine_options.kv_cache_dtype == "auto" else svc.engine_options.kv_cache_dtype,
        max_batch=svc.engine_options.max_batch, kv_cache_memory_fraction=svc.engine_options.kv_cache_memory_fraction,
        max_num_batched_tokens=svc.engine_options.max_num_batched_tokens, scheduler=svc.engine_options.scheduler,
        kv_admission=svc.engine_options.kv_admission, multi_step=svc.engine_options.multi_step,
        period_multipliers=tuple(float(svc.demand.profile.get(p.name, 1.0)) for p in periods),
        serving=svc.serving,
        prefill_gpu_types=tuple(svc.disaggregation.prefill_gpu_types) if svc.disaggregation.prefill_gpu_types else None,
        decode_gpu_types=tuple(svc.disaggregation.decode_gpu_types) if svc.disaggregation.decode_gpu_types else None,
        redundancy_domain=redundancy.domain if redundancy is not None else "",
        # serve_fraction of the demand itself: headroom is spare capacity, not what must survive
        redundancy_demand=tuple(d / scale * redundancy.serve_fraction for d in demand) if redundancy is not None
        else (),
        redundancy_fraction=redundancy.serve_fraction if redundancy is not None else 0.0,
        spot_cover_demand=tuple(d / scale * spot_cover for d in demand) if spot_cover > 0 else (),
        spot_cover_fraction=spot_cover)


def _confidence(slo) -> float | None:
    """The confidence a percentile SLO's caps are sized for (the default where unset);
    None: nominal sizing."""
    if slo.percentile is None or slo.confidence == NOMINAL:
        return None
    return DEFAULT_CONFIDENCE if slo.confidence is None else float(slo.confidence)


def calibration_of(workload: Workload) -> Calibration:
    try:
        return Calibration.from_overrides(workload.solver.calibration)
    except ValueError as exc:
        raise InputError.single("solver.calibration", str(exc), "use a constant named in docs/performance-model.md") from None


def compile_problem(workload: Workload, catalog: Catalog) -> Problem:
    """The workload resolved against the catalog, without candidate configurations yet."""
    offers, filtered_out = filter_offers(workload, catalog)
    c = workload.constraints
    periods = tuple(Period(p.name, p.hours) for p in workload.periods or ())
    return Problem(
        services=tuple(compile_service(s, c.headroom, periods, workload.redundancy_of(s), workload.spot_cover_of(s))
                       for s in workload.services),
        offers=tuple(offers), configs=(), gpu_quotas=dict(c.gpu_quotas), offer_limits=offer_limits(workload, offers),
        budget_usd_per_hour=c.budget_usd_per_hour, same_region=c.same_region, headroom=c.headroom,
        relative_gap=workload.solver.relative_gap,
        filtered_out=tuple(filtered_out),
        name=workload.name, pricing=c.pricing, calibration=calibration_of(workload),
        periods=periods, horizon=compile_horizon(workload), power=compile_power(workload, offers, catalog))


def compile_horizon(workload: Workload) -> HorizonTerms | None:
    """The multi-period terms, or None for today's single static hour."""
    if not workload.horizon_mode:
        return None
    c = workload.constraints
    # Change costs price changes to a running fleet; without one they are unused (and a cap on
    # changes must not link the periods that nothing else links).
    cc = workload.change_costs if workload.current_fleet is not None else None
    fleet = None
    if workload.current_fleet is not None:
        fleet = tuple(RunningInstances(f.offer_id, f.instances, f.spot,
                                       tuple(RunningReplicas(r.service, r.count, r.gpus_per_replica, r.precision)
                                             for r in f.replicas))
                      for f in workload.current_fleet)
    return HorizonTerms(
        tiers=c.allowed_tiers, max_spot_share=c.max_spot_share, spot_min_regions=c.spot_min_regions,
        budget_usd_per_day=c.budget_usd_per_day, budget_usd_per_month=c.budget_usd_per_month,
        reserved_gpus_min=c.reserved_gpus_min, reserved_gpus_max=c.reserved_gpus_max, current_fleet=fleet,
        add_instance_usd=cc.add_instance_usd if cc else 0.0, remove_instance_usd=cc.remove_instance_usd if cc else 0.0,
        max_changed_instances=cc.max_changed_instances if cc else None)
