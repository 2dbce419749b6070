"""Disaggregated deployments as pools the MIP sizes exactly.

For a service with `serving: auto` or `disaggregated`, every (provider, region) link tier
gets two pools, each a service of its own in the compiled problem: `NAME#prefill@TIER`
and `NAME#decode@TIER`. Their configurations are workers (solver/perf/disagg.py), one per
offer x GPUs per worker x precision, and the MIP (solver/optimize/formulation.py) adds one
rate variable x per tier:

    demand[NAME]          sum_G t_G R_G  +  sum_tier x_tier   >= D     (aggregated + disaggregated)
    demand[NAME#prefill@T] sum_P t_P R_P  -  x_T               >= 0     (every request prefilled
    demand[NAME#decode@T]  sum_Q t_Q R_Q  -  x_T               >= 0      is decoded: rates matched)

Linear, so the cheapest mix of aggregated replicas and pools is proven optimal like any
plan; packing, quotas, budgets and regions see workers as replicas.

A tier is a provider's region, a fabric (RDMA, or Ethernet) and a speed per worker from
LINK_LADDER_GBIT_S. The KV transfer between two workers runs at the slower of their links,
so a worker joins every tier at or below its own speed (its link share: the instance's
bandwidth x its GPUs / the instance's GPUs, rounded down to the ladder). A prefill worker's
TTFT counts the transfer at its tier's speed; both workers' rates are capped by the bytes
per second of that speed. Rounding down to the ladder only ever slows a link: the plan's
promises hold, and the optimum is exact over the laddered link speeds.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from solver.catalog.network import offer_links
from solver.catalog.types import Catalog, Offer
from solver.compile.problem import ClassPerf, Config, Problem, ServiceDemand
from solver.perf import PerfQuery
from solver.compile.pruning import prune_configs
from solver.perf.disagg import Worker, decode_worker, link_capped, prefill_alone, prefill_over

# Link speeds per worker a tier can have, gigabits per second (a worker's share is rounded
# down to one of these: conservative, and it keeps tiers few).
LINK_LADDER_GBIT_S = (1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0)
POOL_MARK = "#"  # service names cannot contain it (schema pattern): pool names never collide


def pool_name(service: str, role: str, tier: str) -> str:
    return f"{service}{POOL_MARK}{role}@{tier}"


def is_pool(name: str) -> bool:
    return POOL_MARK in name


def wants_disaggregation(s: ServiceDemand, problem: Problem) -> bool:
    return (s.serving != "aggregated" and not s.role and s.model is not None and not s.profiles
            and len(s.class_demand) == 1 and not problem.periods and problem.horizon is None
            and s.total_demand > 0)


def _ladder(gbit_s: float) -> float | None:
    best = None
    for step in LINK_LADDER_GBIT_S:
        if step <= gbit_s + 1e-9:
            best = step
    return best


def _worker_links(offer: Offer, gpus: int, rdma: bool = True) -> list[tuple[str, float]]:
    """(fabric, laddered Gbit/s) a worker of `gpus` GPUs on `offer` can use, fastest first per
    fabric; `rdma` False: Ethernet only (see `_rdma_places`)."""
    links = offer_links(offer)
    share = gpus / offer.gpus_per_instance
    out = []
    for fabric, speed in (("rdma", links.rdma_gbit_s if rdma else None), ("ethernet", links.ethernet_gbit_s)):
        if speed:
            top = _ladder(speed * share)
            if top is not None:
                out.append((fabric, top))
    return out


def _rdma_places(offers: list[Offer]) -> set[tuple[str, str]]:
    """Provider regions where RDMA can beat Ethernet: some offer's RDMA is faster than its
    Ethernet. Elsewhere (AWS EFA shares the instance's network cards) any two workers that
    meet over RDMA at some speed also meet over Ethernet at it: RDMA tiers add nothing."""
    out = set()
    for o in offers:
        links = offer_links(o)
        if links.rdma_gbit_s and links.rdma_gbit_s > links.ethernet_gbit_s:
            out.add((o.provider, o.region))
    return out


def _speeds_by_place(offers: list[Offer], sizes) -> dict[tuple[str, str, str], list[float]]:
    """(provider, region, fabric) -> the distinct link speeds its workers have, fastest first.

    Only these tiers are planned: a tier between two of them has the workers of the next
    faster one (a worker joins every tier at or below its own speed), each no faster, so
    it is never cheaper; leaving it out keeps the optimum exact."""
    out: dict[tuple[str, str, str], set[float]] = {}
    rdma = _rdma_places(offers)
    for offer in offers:
        for gpus in sizes(offer.gpus_per_instance):
            for fabric, top in _worker_links(offer, gpus, (offer.provider, offer.region) in rdma):
                out.setdefault((offer.provider, offer.region, fabric), set()).add(top)
    return {place: sorted(speeds, reverse=True) for place, speeds in out.items()}


def _tier_label(offer: Offer, fabric: str, speed: float) -> str:
    return f"{offer.provider}/{offer.region}/{fabric}-{speed:g}G"


def worker_query(s: ServiceDemand, catalog: Catalog, offer: Offer, gpus: int, precision: str, cal) -> PerfQuery:
    tokens = s.class_tokens[0]
    return PerfQuery(model=s.model, gpu=catalog.gpus[offer.gpu], gpus_per_replica=gpus,
                     interconnect=offer.interconnect, usable_memory_gib=catalog.usable_memory_gib(offer),
                     precision=precision, engine=s.engine, prompt_tokens=tokens.prompt_tokens,
                     output_tokens=tokens.output_tokens, ttft_slo_ms=s.slo.ttft_ms, tpot_slo_ms=s.slo.tpot_ms,
                     calibration=cal, kv_precision=s.kv_cache_dtype, max_batch=s.max_batch,
                     kv_cache_memory_fraction=s.kv_cache_memory_fraction,
                     max_num_batched_tokens=s.max_num_batched_tokens, scheduler=s.scheduler,
                     kv_admission=s.kv_admission, multi_step=s.multi_step)


def _config(pool: str, offer: Offer, gpus: int, precision: str, w: Worker) -> Config:
    perf = ClassPerf(throughput=w.rate_rps, ttft_ms=w.ttft_ms if w.role == "prefill" else None,
                     tpot_ms=w.tpot_ms if w.role == "decode" else None, batch=w.batch,
                     binding_limit=w.binding_limit)
    return Config(service=pool, offer_id=offer.id, gpus_per_replica=gpus, precision=precision, source="estimate",
                  classes=(perf,), memory_gib_per_gpu=w.memory_gib_per_gpu)


def worker_offers(problem: Problem, catalog: Catalog) -> list[Offer]:
    """The offers workers are planned on: every allowed offer but those another of the same
    provider's region dominates - the same GPU type, count, usable memory and interconnect,
    no dearer, and links no slower (Ethernet and RDMA): any plan using the dominated offer
    can swap to the other at no extra cost, its workers as fast (ties: the first id).
    Offers with a limit (quota or availability) are kept, as in solver/compile/pruning.py."""
    groups: dict[tuple, list[Offer]] = {}
    for o in problem.offers:
        if o.id in problem.offer_limits:
            continue
        key = (o.provider, o.region, o.gpu, o.gpus_per_instance, catalog.usable_memory_gib(o), o.interconnect)
        groups.setdefault(key, []).append(o)
    dropped: set[str] = set()
    for group in groups.values():
        links = {o.id: offer_links(o) for o in group}
        for o in group:
            mine = links[o.id]
            for other in group:
                if other is o or other.id in dropped:
                    continue
                theirs = links[other.id]
                no_worse = (other.price_usd_per_hour <= o.price_usd_per_hour
                            and theirs.ethernet_gbit_s >= mine.ethernet_gbit_s
                            and (theirs.rdma_gbit_s or 0.0) >= (mine.rdma_gbit_s or 0.0))
                better = (other.price_usd_per_hour < o.price_usd_per_hour
                          or theirs.ethernet_gbit_s > mine.ethernet_gbit_s
                          or (theirs.rdma_gbit_s or 0.0) > (mine.rdma_gbit_s or 0.0) or other.id < o.id)
                if no_worse and better:
                    dropped.add(o.id)
                    break
    return [o for o in problem.offers if o.id not in dropped]


def add_disaggregated(problem: Problem, catalog: Catalog, offers: list[Offer], configs: list[Config]
                      ) -> tuple[tuple[ServiceDemand, ...], list[Config]]:
    """The problem's services with the pools of every service that may disaggregate, and
    the configurations with their workers (a `disaggregated` service loses its aggregated ones)."""
    from solver.compile.candidates import replica_sizes

    services = list(problem.services)
    only_pools: set[str] = set()
    places = _speeds_by_place(offers, replica_sizes)  # the offers' links: the same for every service
    rdma = _rdma_places(offers)
    for s in problem.services:
        if s.serving == "disaggregated" and not wants_disaggregation(s, problem) and s.total_demand > 0:
            from solver.errors import InputError

            index = next(i for i, x in enumerate(problem.services) if x.name == s.name)
            raise InputError.single(f"services[{index}].serving", "disaggregated serving is planned for one period "
                                    "without a running fleet, for one request class, for now",
                                    "set serving: aggregated (or auto) for this plan")
        if not wants_disaggregation(s, problem):
            continue
        if s.serving == "disaggregated":
            only_pools.add(s.name)
        pools: dict[tuple[str, str], list[Config]] = {}  # (role, tier) -> workers
        speeds: dict[str, float] = {}
        made: dict[tuple, Worker] = {}  # per hardware shape and role: the worker without a link
        for offer in offers:
            for role, allowed in (("prefill", s.prefill_gpu_types), ("decode", s.decode_gpu_types)):
                if allowed is not None and offer.gpu not in allowed:
                    continue
                for gpus in replica_sizes(offer.gpus_per_instance):
                    for precision in s.precisions:
                        shape = (role, offer.gpu, catalog.usable_memory_gib(offer), offer.interconnect, gpus,
                                 precision)
                        q = worker_query(s, catalog, offer, gpus, precision, problem.calibration)
                        alone = made.get(shape)
                        if alone is None:
                            alone = made[shape] = prefill_alone(q) if role == "prefill" else \
                                decode_worker(q, link_gbit_s=math.inf, percentile=s.slo.percentile)
                        if not alone.feasible:
                            continue
                        for fabric, top in _worker_links(offer, gpus, (offer.provider, offer.region) in rdma):
                            for speed in places[(offer.provider, offer.region, fabric)]:
                                if speed > top:
                                    continue
                                key = shape + (speed,)
                                w = made.get(key)
                                if w is None:
                                    w = made[key] = prefill_over(alone, q, speed, s.slo.percentile) \
                                        if role == "prefill" else link_capped(alone, q, speed)
                                if not w.feasible or w.rate_rps <= 0:
                                    continue
                                tier = _tier_label(offer, fabric, speed)
                                speeds[tier] = speed
                                pools.setdefault((role, tier), []).append(
                                    _config(pool_name(s.name, role, tier), offer, gpus, precision, w))
        _check_roles(s, problem, made, pools)
        for tier in sorted({t for _, t in pools}):
            if ("prefill", tier) not in pools or ("decode", tier) not in pools:
                continue  # a tier needs both pools
            for role in ("prefill", "decode"):
                pool = replace(s, name=pool_name(s.name, role, tier), serving="aggregated", min_replicas=0,
                               max_replicas=None, role=role, feeds=s.name, link=tier, link_gbit_s=speeds[tier])
                services.append(pool)
                # A worker another of the same offer out-serves on a divisor of its GPUs is never
                # needed (the replicas' own rule, solver/compile/pruning.py).
                configs.extend(prune_configs(pools[(role, tier)], pool))
    if only_pools:
        configs = [c for c in configs if c.service not in only_pools]
    return tuple(services), configs


def _check_roles(s: ServiceDemand, problem: Problem, made: dict, pools: dict) -> None:
    """A service the workload limits to GPU types that cannot run one of its pools is a
    mistake in the input: say which field, and why each type fails."""
    from solver.errors import InputError

    index = next(i for i, x in enumerate(problem.services) if x.name == s.name)
    for role, allowed in (("prefill", s.prefill_gpu_types), ("decode", s.decode_gpu_types)):
        if allowed is None or any(r == role for r, _ in pools):
            continue
        why = {}
        for shape, w in made.items():
            if shape[0] == role and not w.feasible:
                why[shape[1]] = w.reason  # the last shape is the largest: its reason is the telling one
        detail = "; ".join(f"{gpu}: {why[gpu]}" for gpu in allowed if gpu in why) or \
            "no offer of these GPU types is allowed by the constraints"
        raise InputError.single(f"services[{index}].disaggregation.{role}_gpu_types",
                                f"no {role} worker of {s.name} fits on {', '.join(allowed)} ({detail})",
                                f"allow a GPU type with more memory or speed for the {role} pool, or remove the limit")



SIM_DURATION_S = 90.0  # simulated seconds of traffic per seed of a deployment check (after 30 s of warm-up)
SIM_SEEDS = 4


def deployment_check(problem: Problem, solution, catalog: Catalog, service: str, tier: str) -> dict:
    """The simulator's replay of one disaggregated deployment of the plan at the rate the
    plan routes to it: {"view": the fields of output.result.PoolSimulation, "warnings": [...]}."""
    from solver.sim.disagg import PoolWorker, simulate_deployment

    s = problem.service(service)
    pools = {role: problem.service(pool_name(service, role, tier)) for role in ("prefill", "decode")}
    workers: dict[str, list[PoolWorker]] = {"prefill": [], "decode": []}
    rate = 0.0
    for a in solution.assignments:
        for role, pool in pools.items():
            if a.service == pool.name and a.replicas > 0:
                offer = problem.offer(a.offer_id)
                workers[role].append(PoolWorker(worker_query(pool, catalog, offer, a.gpus_per_replica, a.precision,
                                                       problem.calibration), a.replicas))
                if role == "prefill":
                    rate += sum(a.routed)
    pct = s.slo.percentile or 99
    label = f"p{pct}"
    if rate <= 0 or not workers["prefill"] or not workers["decode"]:
        return {"view": {"rate_rps": round(rate, 6), "verdict": "not checked", "percentile": pct}, "warnings": []}
    from solver.perf.disagg import transfer_s
    from solver.sim.stats import overall, sectioned_percentile, verdict

    # Seeds are the sections of the interval the verdict reads (solver/sim/stats.py, as the
    # replicas' checks): "met" only when the whole 95 % interval is within the bound.
    runs = [simulate_deployment(workers["prefill"], workers["decode"], rate, pools["prefill"].link_gbit_s,
                                duration_s=SIM_DURATION_S, seed=seed, percentile=s.slo.percentile)
            for seed in range(SIM_SEEDS)]
    verdicts, shown, values = [], [], {}
    for metric, bound in (("ttft_ms", s.slo.ttft_ms), ("tpot_ms", s.slo.tpot_ms)):
        estimate = sectioned_percentile([[(np.asarray(getattr(r, metric), dtype=float), 1.0)] for r in runs], pct)
        values[metric] = None if estimate is None else round(estimate.value_ms, 3)
        if bound is None:
            continue
        verdicts.append(verdict(estimate, bound))
        if verdicts[-1] != "met" and estimate is not None:
            low, high = estimate.ci_ms or (estimate.value_ms, estimate.value_ms)
            shown.append(f"{metric.split('_')[0].upper()} {estimate.value_ms:.4g} ms [{low:.4g}, {high:.4g}] "
                         f"against {bound:g} ms ({verdicts[-1]})")
    outcome = overall(verdicts) if verdicts else "met"
    view = {"rate_rps": round(rate, 6), "requests": sum(r.requests for r in runs), "ttft_ms": values["ttft_ms"],
            "tpot_ms": values["tpot_ms"],
            "kv_transfer_ms": round(transfer_s(workers["prefill"][0].query, pools["prefill"].link_gbit_s) * 1e3, 3),
            "percentile": pct, "verdict": outcome}
    warnings = []
    if shown:
        warnings.append(f"disaggregated over {tier}: the simulator replaying {rate:.4g} requests/s ({SIM_SEEDS} "
                        f"seeds) finds {label} {'; '.join(shown)}. To fix: plan with serving: aggregated, or looser "
                        "TTFT/TPOT bounds")
    return {"view": view, "warnings": warnings}
