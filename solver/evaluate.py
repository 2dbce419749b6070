"""Independent evaluator: recompute cost, coverage, packing, VRAM, SLOs and context lengths of a plan.

It never looks at the MIP: from the workload and catalog it re-derives each assigned
configuration's performance (measured profile or performance model), places every
replica on a concrete instance (first-fit decreasing), and checks every constraint.
`plan()` runs it on its own answer; tests run it on every answer.
"""

from __future__ import annotations

import heapq
from dataclasses import field

from solver.compile.candidates import CandidateBuilder
from solver.compile.compiled import calibration_of, compile_service
from solver.dataclass_repr import dataclass
from solver.compile.load_caps import at_load_checked, exact_cap
from solver.catalog.owned import OWNED_PROVIDER
from solver.catalog.types import Catalog
from solver.compile.resolve import filter_offers, offer_limits
from solver.evaluate_owned import owned_violations
from solver.workload.schema import Workload
from solver.optimize.solution import Solution
from solver.survival import Held, Survival, worst_loss, worst_spot_loss

TOL = 1e-6


@dataclass
class Placement:
    """One instance of an offer and the replicas the evaluator packs onto it."""

    offer_id: str
    instance: int  # 0-based index among this offer's instances
    replicas: list[tuple[str, int]]  # (config key, GPUs it takes on this instance)
    spot: bool = False  # a spot instance (multi-period plans number spot and other instances apart)

    @property
    def gpus_used(self) -> int:
        return sum(g for _, g in self.replicas)


@dataclass
class EvalReport:
    """The independent evaluator's verdict on a plan: violations, cost, GPUs, capacity, placements."""

    violations: list[str] = field(default_factory=list)
    cost_usd_per_hour: float = 0.0
    gpus: int = 0
    capacity: dict[str, list[float]] = field(default_factory=dict)  # service -> per-class capacity
    placements: list[Placement] = field(default_factory=list)
    survival: dict[str, Survival] = field(default_factory=dict)  # service -> its worst single-domain loss
    spot_survival: dict[str, Survival] = field(default_factory=dict)  # service -> its worst reclaimed spot pool

    @property
    def ok(self) -> bool:
        return not self.violations


def evaluate(workload: Workload, catalog: Catalog, sol: Solution, period: str | None = None,
             reserved: dict[str, tuple[int, str]] | None = None) -> EvalReport:
    """Check one plan. Multi-period plans give the period (its demand is the raw demand x
    the service's `demand.profile[period]`) and the reservation {offer: (instances, tier)}:
    the hour's cost is then every reservation plus on-demand above it plus spot."""
    rep = EvalReport()
    offers, _ = filter_offers(workload, catalog)
    offers_by_id = {o.id: o for o in offers}
    limits = offer_limits(workload, offers)
    # Compiled afresh from the raw workload: nothing of the planner's Problem is trusted.
    demands = {s.name: compile_service(s, workload.constraints.headroom, redundancy=workload.redundancy_of(s),
                                       spot_cover=workload.spot_cover_of(s))
               for s in workload.services}
    if period is not None:
        demands = {s.name: _scaled(demands[s.name], s.demand.profile.get(period, 1.0)) for s in workload.services}
    horizon = workload.horizon_mode

    running: dict[str, int] = {}
    for spot, lines in ((False, sol.fleet), (True, sol.spot_fleet)):
        for offer_id, n in lines:
            if offer_id not in offers_by_id:
                rep.violations.append(f"fleet uses {offer_id}, which the catalog and constraints do not allow")
                continue
            if n < 0 or n != int(n):
                rep.violations.append(f"fleet has {n} instances of {offer_id}")
            if not horizon:
                rep.cost_usd_per_hour += offers_by_id[offer_id].price_usd_per_hour * n
            rep.gpus += offers_by_id[offer_id].gpus_per_instance * n
            running[offer_id] = running.get(offer_id, 0) + n
    for offer_id, n in sorted(running.items()):
        if offer_id in limits and n > limits[offer_id]:
            rep.violations.append(f"{n} instances of {offer_id} exceed its limit of {limits[offer_id]}")
    # Owned servers and site power caps, from the raw `owned` and `sites` (solver/evaluate_owned.py).
    rep.violations.extend(owned_violations(workload, catalog, running,
                                           {o: offers_by_id[o].price_usd_per_hour for o in running}))
    if horizon:
        rep.cost_usd_per_hour = _tier_cost(workload, offers_by_id, sol, reserved or {}, rep.violations)

    builder = CandidateBuilder(catalog, [], calibration_of(workload))  # no cache: recompute
    served = {name: [0.0] * len(d.class_demand) for name, d in demands.items()}
    replicas_per_service = {name: 0 for name in demands}
    items: dict[str, list[tuple[str, int, int]]] = {}
    held: dict[str, list[Held]] = {}  # service -> its replicas, for the failure-domain check
    pool_rates: dict[tuple[str, str], dict[str, float]] = {}  # (service, tier) -> role -> rate served
    for a in sol.assignments:
        if "#" in a.service and a.offer_id in offers_by_id:
            parent = a.service.split("#", 1)[0]
            if parent in demands:
                ok = _check_worker(workload, catalog, demands[parent], a, offers_by_id[a.offer_id], rep, pool_rates)
                if ok:
                    items.setdefault((a.offer_id, a.spot), []).extend([(a.config_key, a.gpus_per_replica, 1)] * a.replicas)
                continue
        if a.service not in demands or a.offer_id not in offers_by_id:
            rep.violations.append(f"assignment {a.config_key} names an unknown service or offer")
            continue
        offer = offers_by_id[a.offer_id]
        builder.offers = [offer]
        builder.rejections = []
        recomputed = [c for c in builder.for_service(demands[a.service], prune=False)
                      if c.gpus_per_replica == a.gpus_per_replica and c.precision == a.precision
                      and c.instances_per_replica == a.instances_per_replica]
        if not recomputed:
            why = "; ".join(r.reason for r in builder.rejections
                            if r.gpus_per_replica == a.gpus_per_replica and r.precision == a.precision) or "not a valid configuration"
            rep.violations.append(f"{a.config_key}: {why}")
            continue
        config = recomputed[0]
        config = exact_cap(config)  # the planner may carry a bound on the cap; the check needs the cap
        replicas_per_service[a.service] += a.replicas
        used_time = 0.0
        for k, (routed, perf) in enumerate(zip(a.routed, config.classes)):
            if routed > TOL and perf.throughput <= 0:
                rep.violations.append(f"{a.config_key} serves class {demands[a.service].class_names[k]} "
                                      f"but {perf.reason or 'cannot'}")
                continue
            if perf.throughput > 0:
                used_time += routed / perf.throughput
            served[a.service][k] += routed
        if used_time > a.replicas * (1 + TOL) + TOL:
            rep.violations.append(f"{a.config_key}: routed traffic needs {used_time:.4f} replicas, has {a.replicas}")
        cap = rep.capacity.setdefault(a.service, [0.0] * len(config.classes))
        for k, perf in enumerate(config.classes):
            cap[k] += perf.throughput * a.replicas
        if config.memory_gib_per_gpu is not None and config.memory_gib_per_gpu > catalog.usable_memory_gib(offer) + TOL:
            rep.violations.append(f"{a.config_key}: {config.memory_gib_per_gpu:.1f} GiB per GPU exceeds "
                                  f"{catalog.usable_memory_gib(offer):.1f} GiB")
        items.setdefault((a.offer_id, a.spot), []).extend(
            [(a.config_key, a.gpus_per_replica, a.instances_per_replica)] * a.replicas)
        if demands[a.service].redundancy_domain or demands[a.service].spot_cover_demand:  # what the loss checks read
            held.setdefault(a.service, []).append(Held(
                a.offer_id, (offer.provider, offer.region), offer.gpus_per_instance, a.gpus_per_replica,
                a.instances_per_replica, a.replicas, tuple(perf.throughput for perf in config.classes), a.spot))
        rep.violations.extend(_under_load(catalog, builder.calibration, demands[a.service], config, a))

    for (name, tier), roles in sorted(pool_rates.items()):
        pre, dec = roles.get("prefill", 0.0), roles.get("decode", 0.0)
        if abs(pre - dec) > 1e-6 * max(pre, dec, 1.0):
            rep.violations.append(f"{name} over {tier}: the prefill pool takes {pre:.6g} requests/s but the decode "
                                  f"pool {dec:.6g} (every request prefilled must be decoded)")
        served[name][0] += min(pre, dec)
    for name, d in demands.items():
        limit = d.model.max_context_tokens if d.model is not None else None
        for k, t in enumerate(d.class_tokens if limit else ()):
            if t.prompt_tokens + t.output_tokens > limit:
                rep.violations.append(f"{name}/{d.class_names[k]}: {t.prompt_tokens} prompt + {t.output_tokens} "
                                      f"output tokens exceed the context of {d.model.name} ({limit} tokens)")
        for k, need in enumerate(d.class_demand):
            if served[name][k] < need * (1 - TOL) - TOL:
                rep.violations.append(f"{name}/{d.class_names[k]}: serves {served[name][k]:.4g} of "
                                      f"{need:.4g} {d.unit} needed")
        if replicas_per_service[name] < d.min_replicas:
            rep.violations.append(f"{name}: {replicas_per_service[name]} replicas < min_replicas {d.min_replicas}")
        if d.max_replicas is not None and replicas_per_service[name] > d.max_replicas:
            rep.violations.append(f"{name}: {replicas_per_service[name]} replicas > max_replicas {d.max_replicas}")

    pools = {False: dict(sol.fleet), True: dict(sol.spot_fleet)}
    for (offer_id, spot), reps in sorted(items.items()):
        count = pools[spot].get(offer_id, 0)
        placed, ok = _place(offer_id, offers_by_id[offer_id].gpus_per_instance, count, reps)
        for pl in placed:
            pl.spot = spot
        rep.placements.extend(placed)
        if not ok:
            kind = "spot " if spot else ""
            rep.violations.append(f"{offer_id}: replicas do not fit on {count} {kind}instance(s)")
    if horizon:
        _spot_policy(workload, demands, sol, offers_by_id, builder, rep)
    for name, d in demands.items():
        if d.redundancy_domain and sum(d.redundancy_demand) > 0:
            raw = tuple(x / d.redundancy_fraction for x in d.redundancy_demand)
            sv = worst_loss(held.get(name, []), raw, d.redundancy_domain, d.redundancy_fraction)
            rep.survival[name] = sv
            if not sv.met:
                rep.violations.append(f"{name}: after losing {sv.worst_domain or 'its only domain'} the rest serves "
                                      f"{sv.surviving_fraction:.2%} of its demand, below redundancy.serve_fraction "
                                      f"{d.redundancy_fraction:g}")
        if sum(d.spot_cover_demand) > 0:
            raw = tuple(x / d.spot_cover_fraction for x in d.spot_cover_demand)
            sv = worst_spot_loss(held.get(name, []), raw, d.spot_cover_fraction)
            rep.spot_survival[name] = sv
            if not sv.met:
                rep.violations.append(f"{name}: after losing {sv.worst_domain} the rest serves "
                                      f"{sv.surviving_fraction:.2%} of its demand, below "
                                      f"spot_interruptions.serve_fraction {d.spot_cover_fraction:g}")

    c = workload.constraints
    for gpu, quota in c.gpu_quotas.items():
        used = sum(offers_by_id[o].gpus_per_instance * n for o, n in running.items() if o in offers_by_id and offers_by_id[o].gpu == gpu)
        if used > quota:
            rep.violations.append(f"{used} {gpu} GPUs exceed the quota of {quota}")
    if c.budget_usd_per_hour is not None and rep.cost_usd_per_hour > c.budget_usd_per_hour + TOL:
        rep.violations.append(f"cost ${rep.cost_usd_per_hour:.4f}/h exceeds the budget ${c.budget_usd_per_hour:g}/h")
    if c.same_region:
        # A region is a provider's region (names repeat across providers).
        where = {o: (offers_by_id[o].provider, offers_by_id[o].region) for o in offers_by_id}
        if c.same_region == "fleet":
            regions = {where[o] for o, n in (*sol.fleet, *sol.spot_fleet) if n > 0 and o in where}
            if len(regions) > 1:
                rep.violations.append(f"constraints.same_region is fleet, but the fleet uses {sorted(regions)}")
        else:
            used: dict[str, set] = {}
            for a in sol.assignments:
                if a.replicas > 0 and a.offer_id in where:
                    used.setdefault(a.service, set()).add(where[a.offer_id])
            for name in demands:
                regions = used.get(name, set())
                if len(regions) > 1:
                    rep.violations.append(f"constraints.same_region is service, but {name} uses {sorted(regions)}")
    return rep


def _check_worker(workload: Workload, catalog: Catalog, svc, a, offer, rep: EvalReport,
                  pool_rates: dict) -> bool:
    """A prefill or decode worker of a disaggregated deployment, re-derived from the raw
    workload: its name parsed afresh, its link from the offer's network, its rate and
    latency from the worker physics; returns whether it may be placed."""
    from solver.catalog.network import offer_links
    from solver.compile.disagg import worker_query
    from solver.perf.disagg import decode_worker, prefill_worker

    wanted = next(s for s in workload.services if s.name == svc.name)
    rest = a.service.split("#", 1)[1]
    role, _, tier = rest.partition("@")
    parts = tier.split("/")
    if role not in ("prefill", "decode") or len(parts) != 3 or "-" not in parts[2]:
        rep.violations.append(f"assignment {a.config_key}: {a.service!r} is not a prefill or decode pool name")
        return False
    provider, region, link = parts
    fabric, _, speed_text = link.rpartition("-")
    try:
        speed = float(speed_text.rstrip("G"))
    except ValueError:
        speed = -1.0
    if wanted.serving == "aggregated":
        rep.violations.append(f"{a.config_key}: {svc.name} is served aggregated, but the plan gives it a {role} pool")
        return False
    allowed = getattr(wanted.disaggregation, f"{role}_gpu_types")
    if allowed is not None and offer.gpu not in allowed:
        rep.violations.append(f"{a.config_key}: {offer.gpu} is not among {svc.name}'s {role}_gpu_types")
    if (offer.provider, offer.region) != (provider, region):
        rep.violations.append(f"{a.config_key}: the {role} worker runs in {offer.provider}/{offer.region}, not in its "
                              f"pool's {provider}/{region}")
    links = offer_links(offer)
    per_instance = links.rdma_gbit_s if fabric == "rdma" else links.ethernet_gbit_s if fabric == "ethernet" else None
    share = (per_instance or 0.0) * a.gpus_per_replica / offer.gpus_per_instance
    if speed <= 0 or share < speed - 1e-9:
        rep.violations.append(f"{a.config_key}: its {fabric or 'unknown'} link share is {share:g} Gbit/s, below the "
                              f"{speed_text} its pool's KV transfer counts on")
        return False
    q = worker_query(svc, catalog, offer, a.gpus_per_replica, a.precision, calibration_of(workload))
    worker = (prefill_worker if role == "prefill" else decode_worker)(q, link_gbit_s=speed,
                                                                       percentile=svc.slo.percentile)
    if not worker.feasible:
        rep.violations.append(f"{a.config_key}: {worker.reason}")
        return False
    routed = sum(a.routed)
    if routed > worker.rate_rps * a.replicas * (1 + TOL) + TOL:
        rep.violations.append(f"{a.config_key}: {routed:.6g} requests/s routed to {a.replicas} {role} worker(s) that "
                              f"sustain {worker.rate_rps:.6g} each")
    if worker.memory_gib_per_gpu > catalog.usable_memory_gib(offer) + TOL:
        rep.violations.append(f"{a.config_key}: {worker.memory_gib_per_gpu:.1f} GiB per GPU exceeds "
                              f"{catalog.usable_memory_gib(offer):.1f} GiB")
    rates = pool_rates.setdefault((svc.name, f"{provider}/{region}/{link}"), {})
    rates[role] = rates.get(role, 0.0) + routed
    rep.capacity.setdefault(a.service, [0.0])[0] += worker.rate_rps * a.replicas
    return True


def _under_load(catalog, calibration, svc, config, a) -> list[str]:
    """Percentile SLOs: the queueing model, run forward at the rate the plan routes to each
    replica (the planner capped rates with the inverse search), must meet every bound; and
    replicas of a mixed service must get the service's mix (their cap is for that mix)."""
    if svc.slo.percentile is None or not svc.slo.bounds():
        return []
    out = []
    total = sum(a.routed)
    if svc.mixed_routing and total > TOL:
        for k, (routed, share) in enumerate(zip(a.routed, svc.class_shares)):
            if abs(routed - share * total) > 1e-6 * max(total, 1.0):
                out.append(f"{a.config_key}: class {svc.class_names[k]} gets {routed:.4g} of {total:.4g}, not its "
                           f"share {share:g} (every replica must serve the service's mix)")
                break
    at, robust = at_load_checked(catalog, calibration, svc, config, a.replicas, a.routed, band=False)
    if not at.meets_slo:
        shown = ", ".join(f"{name} {getattr(at, name)}" for name in ("ttft_ms", "tpot_ms", "latency_ms")
                          if getattr(at, name) is not None)
        out.append(f"{a.config_key}: at p{at.percentile} under the planned load ({at.utilization:.0%}) it misses "
                   f"the SLO ({shown or 'cannot keep up'})")
    elif not at.meets_slo_robust:
        # The caps were sized for a slower replica and more traffic (slo.confidence): the
        # plan must hold there too, not only on the model as it is.
        shown = ", ".join(f"{name} {robust[name]}" for name in ("ttft_ms", "tpot_ms", "latency_ms")
                          if robust.get(name) is not None)
        out.append(f"{a.config_key}: at p{at.percentile} on a replica {robust['slowdown']:.3g}x slower than modelled "
                   f"with {robust['rate_margin']:.0%} more traffic ({robust['rate_per_replica']:.4g} "
                   f"{svc.unit} per replica, {robust['utilization']:.0%} busy) it misses the SLO "
                   f"({shown or 'cannot keep up'}): its caps were not sized for slo.confidence {svc.slo.confidence:g}")
    return out


def _scaled(d, multiplier: float):
    from dataclasses import replace
    return replace(d, class_demand=tuple(x * multiplier for x in d.class_demand), raw_demand=d.raw_demand * multiplier,
                   redundancy_demand=tuple(x * multiplier for x in d.redundancy_demand),
                   spot_cover_demand=tuple(x * multiplier for x in d.spot_cover_demand))


def _tier_cost(workload: Workload, offers: dict, sol: Solution, reserved: dict[str, tuple[int, str]],
               violations: list[str]) -> float:
    """$/hour of a multi-period plan's hour: each reservation in full (used or not), firm
    instances above it at on-demand, spot instances at spot; every tier must be allowed."""
    allowed = workload.constraints.allowed_tiers
    firm = dict(sol.fleet)
    cost = 0.0
    for offer_id, (n, tier) in sorted(reserved.items()):
        o = offers.get(offer_id)
        price = o.tier_price(tier) if o is not None and tier.startswith("reserved") else None
        if tier not in allowed or price is None:
            violations.append(f"reservation of {offer_id} as {tier}: not an allowed tier with a price")
            continue
        cost += price * n
    for offer_id, n in sorted(firm.items()):
        if offer_id not in offers:
            continue
        above = n - (reserved.get(offer_id, (0, ""))[0])
        if above > 0:
            if "on_demand" not in allowed and offers[offer_id].provider != OWNED_PROVIDER:
                violations.append(f"{above} instance(s) of {offer_id} beyond its reservation, but on-demand is not allowed")
            cost += offers[offer_id].price_usd_per_hour * above
    for offer_id, n in sorted(sol.spot_fleet):
        o = offers.get(offer_id)
        if o is None:
            continue
        if "spot" not in allowed or o.spot_price_usd_per_hour is None:
            violations.append(f"{n} spot instance(s) of {offer_id}, but spot is not allowed or not offered")
            continue
        cost += o.spot_price_usd_per_hour * n
    return cost


def _spot_policy(workload: Workload, demands: dict, sol: Solution, offers: dict, builder, rep: EvalReport) -> None:
    """Firm (on-demand and reserved) capacity alone serves (1 - max_spot_share) of each
    class's demand; no region holds more than 1/spot_min_regions of a service's spot capacity."""
    c = workload.constraints
    if c.max_spot_share is None and not c.spot_min_regions:
        return
    services = {s.name: s for s in workload.services}
    firm: dict[str, list[float]] = {}
    spot_by_loc: dict[str, dict[str, list[float]]] = {}
    for a in sol.assignments:
        if a.service not in demands or a.offer_id not in offers:
            continue
        builder.offers = [offers[a.offer_id]]
        builder.rejections = []
        found = [exact_cap(x) for x in builder.for_service(demands[a.service]) if x.gpus_per_replica == a.gpus_per_replica
                 and x.precision == a.precision and x.instances_per_replica == a.instances_per_replica]
        if not found:
            continue  # reported above
        thr = [k.throughput for k in found[0].classes]
        if a.spot:
            loc = spot_by_loc.setdefault(a.service, {}).setdefault(offers[a.offer_id].location, [0.0] * len(thr))
            for k, t in enumerate(thr):
                loc[k] += t * a.replicas
        else:
            f = firm.setdefault(a.service, [0.0] * len(thr))
            multi = len(thr) > 1
            for k, t in enumerate(thr):
                # One class: capacity; several: the traffic routed to firm replicas.
                f[k] += a.routed[k] if multi else t * a.replicas
    for name, d in demands.items():
        if name not in services:
            continue
        if c.max_spot_share is not None and c.max_spot_share < 1:
            have = firm.get(name, [0.0] * len(d.class_demand))
            for k, need in enumerate(d.class_demand):
                floor = (1 - c.max_spot_share) * need
                if have[k] < floor * (1 - TOL) - TOL:
                    rep.violations.append(f"{name}/{d.class_names[k]}: on-demand and reserved capacity {have[k]:.4g} is "
                                          f"below (1 - max_spot_share) x demand = {floor:.4g}")
        if c.spot_min_regions and name in spot_by_loc:
            per_loc = spot_by_loc[name]
            for k in range(len(d.class_demand)):
                total = sum(v[k] for v in per_loc.values())
                for loc, v in sorted(per_loc.items()):
                    if v[k] > total / c.spot_min_regions * (1 + TOL) + TOL:
                        rep.violations.append(f"{name}: {v[k]:.4g} of its {total:.4g} spot capacity is in {loc}, more "
                                              f"than 1/{c.spot_min_regions} (spot_min_regions)")


def _place(offer_id: str, size: int, count: int, reps: list[tuple[str, int, int]]) -> tuple[list[Placement], bool]:
    """First-fit decreasing; replicas spanning instances take whole instances first.

    First fit takes the lowest-numbered instance with room. Instances are kept in one
    heap per number of free GPUs (an instance's free count only falls; an entry whose
    count has changed since is skipped), so each replica costs O(size log count), not a
    scan of every instance: a fleet of 10,000 one-GPU instances is placed in a fraction
    of a second rather than (quadratically) in many seconds."""
    instances = [Placement(offer_id, i, []) for i in range(count)]
    free = [size] * count
    by_free: list[list[int]] = [[] for _ in range(size + 1)]
    by_free[size] = list(range(count))  # sorted, hence a heap
    nxt = 0
    for key, g, span in sorted(reps, key=lambda r: (-r[1] * r[2], r[0])):
        if span > 1:
            if nxt + span > count or any(free[i] != size for i in range(nxt, nxt + span)):
                return instances, False
            for i in range(nxt, nxt + span):
                instances[i].replicas.append((key, size))
                free[i] = 0
                heapq.heappush(by_free[0], i)
            nxt += span
            continue
        slot = _first_fit(by_free, free, g)
        if slot is None:
            return instances, False
        instances[slot].replicas.append((key, g))
        free[slot] -= g
        heapq.heappush(by_free[free[slot]], slot)
        nxt = max(nxt, slot + 1) if free[slot] == 0 else nxt
    return instances, True


def _first_fit(by_free: list[list[int]], free: list[int], g: int) -> int | None:
    """The lowest-numbered instance with at least g GPUs free, or None."""
    best = None
    for f in range(max(g, 0), len(by_free)):
        heap = by_free[f]
        while heap and free[heap[0]] != f:
            heapq.heappop(heap)  # that instance has since taken replicas
        if heap and (best is None or heap[0] < best):
            best = heap[0]
    return best
