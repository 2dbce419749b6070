"""Independent evaluator: recompute cost, coverage, packing, VRAM, SLOs and context lengths of a plan.

It never looks at the MIP: from the workload and catalog it re-derives each assigned
configuration's performance (measured profile or performance model), places every
replica on a concrete instance (first-fit decreasing), and checks every constraint.
`plan()` runs it on its own answer; tests run it on every answer.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from solver.compile.candidates import CandidateBuilder
from solver.compile.compiled import calibration_of, compile_service
from solver.compile.load_caps import at_load
from solver.catalog.types import Catalog
from solver.compile.resolve import filter_offers, offer_limits
from solver.workload.schema import Workload
from solver.optimize.solution import Solution

TOL = 1e-6


@dataclass
class Placement:
    offer_id: str
    instance: int  # 0-based index among this offer's instances
    replicas: list[tuple[str, int]]  # (config key, GPUs it takes on this instance)

    @property
    def gpus_used(self) -> int:
        return sum(g for _, g in self.replicas)


@dataclass
class EvalReport:
    violations: list[str] = field(default_factory=list)
    cost_usd_per_hour: float = 0.0
    gpus: int = 0
    capacity: dict[str, list[float]] = field(default_factory=dict)  # service -> per-class capacity
    placements: list[Placement] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


def evaluate(workload: Workload, catalog: Catalog, sol: Solution) -> EvalReport:
    rep = EvalReport()
    offers, _ = filter_offers(workload, catalog)
    offers_by_id = {o.id: o for o in offers}
    limits = offer_limits(workload, offers)
    # Compiled afresh from the raw workload: nothing of the planner's Problem is trusted.
    demands = {s.name: compile_service(s, workload.constraints.headroom) for s in workload.services}

    for offer_id, n in sol.fleet:
        if offer_id not in offers_by_id:
            rep.violations.append(f"fleet uses {offer_id}, which the catalog and constraints do not allow")
            continue
        if n < 0 or n != int(n):
            rep.violations.append(f"fleet has {n} instances of {offer_id}")
        rep.cost_usd_per_hour += offers_by_id[offer_id].price_usd_per_hour * n
        rep.gpus += offers_by_id[offer_id].gpus_per_instance * n
        if offer_id in limits and n > limits[offer_id]:
            rep.violations.append(f"{n} instances of {offer_id} exceed its limit of {limits[offer_id]}")

    builder = CandidateBuilder(catalog, [], calibration_of(workload))  # no cache: recompute
    served = {name: [0.0] * len(d.class_demand) for name, d in demands.items()}
    replicas_per_service = {name: 0 for name in demands}
    items: dict[str, list[tuple[str, int, int]]] = {}
    for a in sol.assignments:
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
        items.setdefault(a.offer_id, []).extend([(a.config_key, a.gpus_per_replica, a.instances_per_replica)] * a.replicas)
        rep.violations.extend(_under_load(catalog, builder.calibration, demands[a.service], config, a))

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

    fleet = dict(sol.fleet)
    for offer_id, reps in sorted(items.items()):
        placed, ok = _place(offer_id, offers_by_id[offer_id].gpus_per_instance, fleet.get(offer_id, 0), reps)
        rep.placements.extend(placed)
        if not ok:
            rep.violations.append(f"{offer_id}: replicas do not fit on {fleet.get(offer_id, 0)} instance(s)")

    c = workload.constraints
    for gpu, quota in c.gpu_quotas.items():
        used = sum(offers_by_id[o].gpus_per_instance * n for o, n in sol.fleet if o in offers_by_id and offers_by_id[o].gpu == gpu)
        if used > quota:
            rep.violations.append(f"{used} {gpu} GPUs exceed the quota of {quota}")
    if c.budget_usd_per_hour is not None and rep.cost_usd_per_hour > c.budget_usd_per_hour + TOL:
        rep.violations.append(f"cost ${rep.cost_usd_per_hour:.4f}/h exceeds the budget ${c.budget_usd_per_hour:g}/h")
    if c.same_region:
        # A region is a provider's region (names repeat across providers).
        where = {o: (offers_by_id[o].provider, offers_by_id[o].region) for o in offers_by_id}
        if c.same_region == "fleet":
            regions = {where[o] for o, n in sol.fleet if n > 0 and o in where}
            if len(regions) > 1:
                rep.violations.append(f"constraints.same_region is fleet, but the fleet uses {sorted(regions)}")
        else:
            for name in demands:
                regions = {where[a.offer_id] for a in sol.assignments
                           if a.service == name and a.replicas > 0 and a.offer_id in where}
                if len(regions) > 1:
                    rep.violations.append(f"constraints.same_region is service, but {name} uses {sorted(regions)}")
    return rep


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
    at = at_load(catalog, calibration, svc, config, a.replicas, a.routed)
    if not at.meets_slo:
        shown = ", ".join(f"{name} {getattr(at, name)}" for name in ("ttft_ms", "tpot_ms", "latency_ms")
                          if getattr(at, name) is not None)
        out.append(f"{a.config_key}: at p{at.percentile} under the planned load ({at.utilization:.0%}) it misses "
                   f"the SLO ({shown or 'cannot keep up'})")
    return out


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
