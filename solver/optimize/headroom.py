"""Last tie-break: idle GPUs of the chosen instances carry extra replicas.

With the cost and GPU count fixed, more spare capacity is strictly better, and idle
GPUs are already paid for. Deterministic greedy: repeatedly give a free slot to the
service with the least capacity relative to its demand (ties by name), using its
highest-throughput configuration that fits the free GPUs of that offer (under
constraints.same_region "service", only offers in the region the service's replicas are in).
"""

from __future__ import annotations

from dataclasses import replace

from solver.optimize.formulation import Formulation, region_of, replica_upper_bound, route_single_class
from solver.optimize.solution import Assignment, Solution


def fill_idle_gpus(form: Formulation, sol: Solution) -> tuple[Solution, int]:
    p = form.problem
    free = {offer_id: n * p.offer(offer_id).gpus_per_instance for offer_id, n in sol.fleet}
    for a in sol.assignments:
        free[a.offer_id] -= a.replicas * a.gpus_per_replica
    if not any(gpus > 0 for gpus in free.values()):
        return sol, 0  # no idle GPU (most plans): nothing below would run
    demand = {s.name: s for s in p.services}
    by_key = {c.key: c for c in form.configs}
    assigned = {a.config_key: a for a in sol.assignments}
    capacity = {s.name: 0.0 for s in p.services}
    replicas = {s.name: 0 for s in p.services}
    for a in sol.assignments:
        capacity[a.service] += a.replicas * sum(k.throughput for k in by_key[a.config_key].classes)
        replicas[a.service] += a.replicas
    added = 0
    # constraints.same_region "service": a service's extra replicas stay in the region its
    # replicas are in (idle GPUs of another region's instances are not its to take).
    by_service = p.same_region == "service"
    offer_region = {offer_id: region_of(p.offer(offer_id)) for offer_id in free} if by_service else {}
    region = {}
    for a in sol.assignments if by_service else ():
        if a.replicas > 0:
            region.setdefault(a.service, offer_region[a.offer_id])
    # The fleet's offers' configurations, in model order: one pass over them all, not one per offer.
    on_offer: dict[str, list] = {offer_id: [] for offer_id in free}
    for c in form.configs:
        mine = on_offer.get(c.offer_id)
        # Idle GPUs never open a disaggregated pool the plan does not use (it would serve nothing).
        if mine is not None and c.instances_per_replica == 1 and demand[c.service].total_demand > 0 \
                and (not demand[c.service].role or capacity[c.service] > 0) \
                and (not by_service or region.get(c.service) == offer_region[c.offer_id]):
            mine.append(c)
    for offer_id in sorted(free):
        candidates = on_offer[offer_id]
        while candidates and free[offer_id] > 0:
            fitting = [c for c in candidates if c.gpus_per_replica <= free[offer_id]
                       and (demand[c.service].max_replicas is None
                            or replicas[c.service] < demand[c.service].max_replicas)
                       and _replicas_of(assigned, c) + 1 <= replica_upper_bound(c, p)]
            if not fitting:
                break
            c = min(fitting, key=lambda c: (capacity[c.service] / demand[c.service].total_demand, c.service,
                                            -sum(k.throughput for k in c.classes) / c.gpus_per_replica, c.key))
            a = assigned.get(c.key)
            assigned[c.key] = replace(a, replicas=a.replicas + 1) if a is not None else Assignment(
                c.key, c.service, c.offer_id, c.gpus_per_replica, c.precision, 1,
                (0.0,) * len(demand[c.service].class_demand), c.instances_per_replica)
            free[offer_id] -= c.gpus_per_replica
            capacity[c.service] += sum(k.throughput for k in c.classes)
            replicas[c.service] += 1
            added += 1
    if not added:
        return sol, 0
    return Solution(sol.fleet, route_single_class(p, list(assigned.values()), by_key)), added


def _replicas_of(assigned: dict[str, Assignment], c) -> int:
    a = assigned.get(c.key)
    return a.replicas if a is not None else 0
