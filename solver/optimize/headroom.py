"""Last tie-break: idle GPUs of the chosen instances carry extra replicas.

With the cost and GPU count fixed, more spare capacity is strictly better, and idle
GPUs are already paid for. Deterministic greedy: repeatedly give a free slot to the
service with the least capacity relative to its demand (ties by name), using its
highest-throughput configuration that fits the free GPUs of that offer.
"""

from __future__ import annotations

from solver.optimize.formulation import Formulation


def fill_idle_gpus(form: Formulation, values: list[float]) -> tuple[list[float], int]:
    values = list(values)
    p = form.problem
    demand = {s.name: s for s in p.services}
    free: dict[str, int] = {}
    for offer_id, i in form.n.items():
        offer = p.offer(offer_id)
        free[offer_id] = round(values[i]) * offer.gpus_per_instance
    capacity: dict[str, float] = {s.name: 0.0 for s in p.services}
    for c in form.configs:
        r = round(values[form.r[c.key]])
        if r:
            free[c.offer_id] -= r * c.gpus_per_replica
            capacity[c.service] += r * sum(k.throughput for k in c.classes)
    added = 0
    for offer_id in sorted(free):
        candidates = [c for c in form.configs if c.offer_id == offer_id and c.instances_per_replica == 1
                      and demand[c.service].total_demand > 0]
        while candidates and free[offer_id] > 0:
            fitting = [c for c in candidates if c.gpus_per_replica <= free[offer_id]
                       and (demand[c.service].max_replicas is None
                            or _replicas(form, values, c.service) < demand[c.service].max_replicas)
                       and values[form.r[c.key]] + 1 <= form.model.variables[form.r[c.key]].ub + 1e-9]
            if not fitting:
                break
            c = min(fitting, key=lambda c: (capacity[c.service] / demand[c.service].total_demand, c.service,
                                            -sum(k.throughput for k in c.classes) / c.gpus_per_replica, c.key))
            values[form.r[c.key]] = round(values[form.r[c.key]]) + 1
            free[offer_id] -= c.gpus_per_replica
            capacity[c.service] += sum(k.throughput for k in c.classes)
            added += 1
    return values, added


def _replicas(form: Formulation, values: list[float], service: str) -> int:
    return sum(round(values[form.r[c.key]]) for c in form.by_service.get(service, []))
