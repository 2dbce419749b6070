"""Consistency checks of the multi-period fields: periods named in demand profiles exist,
the running fleet names known offers and services and fits its instances.

Run with the other name checks before any model is built; every problem comes back
with its field path and a fix.
"""

from __future__ import annotations

from solver.catalog.types import Catalog
from solver.errors import FieldViolation
from solver.suggest import did_you_mean
from solver.workload.schema import Workload


def check_horizon(workload: Workload, catalog: Catalog) -> list[FieldViolation]:
    return _profiles(workload) + _current_fleet(workload, catalog)


def _profiles(workload: Workload) -> list[FieldViolation]:
    problems = []
    periods = [p.name for p in workload.periods or ()]
    for i, svc in enumerate(workload.services):
        for name in svc.demand.profile:
            if name in periods:
                continue
            where = f"services[{i}].demand.profile.{name}"
            if not periods:
                problems.append(FieldViolation(where, f"names period {name!r}, but the workload declares no periods.",
                                               f"add `periods: [{{name: {name}, hours: ...}}]` at the top level, "
                                               "or remove the profile"))
            else:
                problems.append(FieldViolation(where, f"unknown period {name!r}{did_you_mean(name, periods) or '.'}",
                                               f"use one of the workload's periods: {', '.join(periods)}"))
    return problems


def _current_fleet(workload: Workload, catalog: Catalog) -> list[FieldViolation]:
    if not workload.current_fleet:
        return []
    problems = []
    offers = {o.id: o for o in catalog.offers}
    services = {s.name for s in workload.services}
    seen: set[tuple[str, bool]] = set()
    for i, line in enumerate(workload.current_fleet):
        where = f"current_fleet[{i}]"
        offer = offers.get(line.offer_id)
        if offer is None:
            problems.append(FieldViolation(f"{where}.offer_id", f"unknown offer {line.offer_id!r}"
                                           f"{did_you_mean(line.offer_id, offers) or '.'}",
                                           "use an offer id (provider/name) from `solver-cli catalog`"))
            continue
        if (line.offer_id, line.spot) in seen:
            problems.append(FieldViolation(where, f"{line.offer_id} ({'spot' if line.spot else 'on-demand/reserved'}) "
                                           "is listed twice.", "give each offer (and spot flag) one entry"))
        seen.add((line.offer_id, line.spot))
        if line.spot and offer.spot_price_usd_per_hour is None:
            problems.append(FieldViolation(f"{where}.spot", f"{line.offer_id} has no spot price in the catalog.",
                                           "set spot: false, or give the offer a spot price in the catalog"))
        gpus = 0
        for j, r in enumerate(line.replicas):
            if r.service not in services:
                problems.append(FieldViolation(f"{where}.replicas[{j}].service", f"unknown service {r.service!r}"
                                               f"{did_you_mean(r.service, services) or '.'}",
                                               "use the name of one of the workload's services"))
            gpus += r.count * r.gpus_per_replica
        if gpus > line.instances * offer.gpus_per_instance:
            problems.append(FieldViolation(f"{where}.replicas", f"the replicas take {gpus} GPUs but {line.instances} "
                                           f"instance(s) of {line.offer_id} have {line.instances * offer.gpus_per_instance}.",
                                           "correct the replica counts or the number of instances"))
    return problems
