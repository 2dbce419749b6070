"""Reclaimed spot capacity in the MIP (constraints.spot_interruptions; docs/redundancy.md).

Providers reclaim spot capacity a pool at a time: when on-demand buyers need an instance
type in a zone back, every spot instance of that pool can go within minutes. The catalogs
list offers by region, not zone, so one offer's spot instances are one pool here (all of
them lost at once: a stronger guarantee than a zone's share). A service s with cover must
still serve N_s = serve_fraction x its demand without headroom (per class) after the spot
replicas of any one offer o are gone, in every period, with its SLO-capped rates:

  one class:  sum_c t_c r_c + sum_{c not on o} t_c q_c >= N_s        spot_cover[s,o]
  classes:    the survivors' own routing x^o (redundancy.survive_rows)

(r: firm replicas - on-demand or reserved, never reclaimed -, q: spot replicas.) One row
per offer where s may hold spot replicas in the period. Exact: a plan meets the rows iff
it survives each pool's loss; solver/survival.py checks the same loss by enumeration, and
the evaluator re-checks it from the raw workload.
"""

from __future__ import annotations

from types import SimpleNamespace

from solver.optimize import redundancy
from solver.survival import Held, Survival, worst_spot_loss


def active(services) -> bool:
    return any(sum(s.spot_cover_demand) > 0 for s in services)


def add_rows(lm, groups: dict[str, list], r: dict[str, int], spot: dict[str, bool], services, p: str) -> None:
    """The cover rows of one period's model: `groups` per service (key, rep, service), `r`
    group key -> its replica variable, `spot` group key -> whether its replicas are spot."""
    f = SimpleNamespace(model=lm, r=r)
    for s in services:
        if sum(s.spot_cover_demand) <= 0:
            continue
        mine = groups.get(s.name, [])
        for offer_id in sorted({g.rep.offer_id for g in mine if spot[g.key]}):
            kept = [g for g in mine if not (spot[g.key] and g.rep.offer_id == offer_id)]
            redundancy.survive_rows(f, s, kept, f"{p}|{s.name},spot {offer_id}", s.spot_cover_demand, row="spot_cover")


def survivals(problem, services, solution) -> dict[str, Survival]:
    """Each covered service's worst reclaimed spot pool in one period's plan (the planner's
    own configurations; `services` scaled to the period)."""
    covered = {s.name for s in services if sum(s.spot_cover_demand) > 0}
    mine = solution.by_service()
    used = {a.config_key for name in covered for a in mine.get(name, ())}
    configs = {c.key: c for c in problem.configs if c.key in used}
    out: dict[str, Survival] = {}
    for s in services:
        if s.name not in covered:
            continue
        held = []
        for a in mine.get(s.name, ()):
            c = configs.get(a.config_key)
            if c is not None:
                o = problem.offer(c.offer_id)
                held.append(Held(c.offer_id, (o.provider, o.region), o.gpus_per_instance, c.gpus_per_replica,
                                 c.instances_per_replica, a.replicas, tuple(k.throughput for k in c.classes), a.spot))
        demand = tuple(d / s.spot_cover_fraction for d in s.spot_cover_demand)
        out[s.name] = worst_spot_loss(held, demand, s.spot_cover_fraction)
    return out
