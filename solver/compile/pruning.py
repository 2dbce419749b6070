"""Exact pruning: remove offers and configurations that no unique cheapest plan needs.

Each rule keeps at least one optimal plan (proofs in the comments), so the optimality
claim stands; the enumeration tests check it on small workloads.
"""

from __future__ import annotations

from collections import defaultdict

from solver.catalog.types import Catalog, Offer
from solver.compile.problem import Config, ServiceDemand

_INTERCONNECT_RANK = {"none": 0, "pcie": 1, "nvlink": 2}


def no_dearer(a: Offer, b: Offer, tiers: tuple[str, ...] | None) -> tuple[bool, bool]:
    """(a costs no more than b, a costs strictly less somewhere) over the pricing tiers.

    Without tiers, the one price each offer carries. With tiers, every tier that b offers
    must be offered by a at no higher price: any plan's b instances, in whatever tier,
    can then become a instances of the same tier.
    """
    if tiers is None:
        return a.price_usd_per_hour <= b.price_usd_per_hour, a.price_usd_per_hour < b.price_usd_per_hour
    le, lt = True, False
    for t in tiers:
        pb, pa = b.tier_price(t), a.tier_price(t)
        if pb is None:
            continue
        if pa is None or pa > pb:
            le = False
        elif pa < pb:
            lt = True
    return le, lt


def prune_offers(offers: list[Offer], limits: dict[str, int], catalog: Catalog,
                 keep: set[str] = frozenset(), tiers: tuple[str, ...] | None = None,
                 by_location: bool = False) -> tuple[list[Offer], list[tuple[str, str]]]:
    """Drop an offer when another of the same GPU type and instance size is no dearer.

    Same GPU, same GPU count, the same (or a better) interconnect and inter-node fabric,
    and the same usable memory give identical configurations; with no per-offer limit
    on either, any plan using the dearer one can swap to the cheaper at no extra cost.
    Ties keep the lexicographically first id, so the choice is deterministic.
    """
    groups: dict[tuple, list[Offer]] = defaultdict(list)
    for o in offers:
        if o.id in limits or o.id in keep:
            continue
        # Spreading spot over regions makes offers of different regions different.
        where = o.location if by_location else ""
        groups[(o.gpu, o.gpus_per_instance, catalog.usable_memory_gib(o), where)].append(o)
    dropped: dict[str, str] = {}
    for group in groups.values():
        for o in group:
            for other in group:
                if other is o or other.id in dropped:
                    continue
                cheaper_or_equal, cheaper = no_dearer(other, o, tiers)
                better_or_equal = (
                    cheaper_or_equal
                    and _INTERCONNECT_RANK[other.interconnect] >= _INTERCONNECT_RANK[o.interconnect]
                    and (other.inter_node_gbs or 0) >= (o.inter_node_gbs or 0)
                )
                strictly = (cheaper
                            or _INTERCONNECT_RANK[other.interconnect] > _INTERCONNECT_RANK[o.interconnect]
                            or (other.inter_node_gbs or 0) > (o.inter_node_gbs or 0)
                            or other.id < o.id)
                if better_or_equal and strictly:
                    dropped[o.id] = f"dominated by {other.id} (same GPUs, ${other.price_usd_per_hour:g}/h <= ${o.price_usd_per_hour:g}/h)"
                    break
    kept = [o for o in offers if o.id not in dropped]
    return kept, sorted(dropped.items())


def _dominates(a: Config, b: Config) -> bool:
    """a serves every class at least as fast as b does, on no more GPUs of the same offer.

    With a.gpus | b.gpus, one b replica can be swapped for b.gpus / a.gpus replicas of a:
    the same GPUs of the same instances (power-of-two sizes pack exactly), at least as much
    throughput for every class, at least as many replicas (min_replicas still holds);
    SLOs hold because a's per-class feasibility is checked per class (throughput > 0).
    """
    if a.pending_cap is not None:
        return False  # a's throughput is only an upper bound: it proves nothing about b
    if a.offer_id != b.offer_id or b.gpus_per_replica % a.gpus_per_replica:
        return False
    if a.instances_per_replica != 1 and a.instances_per_replica != b.instances_per_replica:
        return False
    k = b.gpus_per_replica // a.gpus_per_replica
    return all(ca.throughput * k >= cb.throughput - 1e-12 for ca, cb in zip(a.classes, b.classes))


def prune_configs(configs: list[Config], demand: ServiceDemand) -> list[Config]:
    """Keep configurations not dominated by another on the same offer (deterministic ties)."""
    if demand.max_replicas is not None:
        return configs  # swapping one replica for several could break max_replicas
    if demand.redundancy_domain == "instance":
        return configs  # a faster replica on fewer GPUs packs more of the service onto one instance to lose
    if len(configs) < 2:
        return list(configs)  # nothing to compare (most offers of a service: one or no configuration)
    first = configs[0].offer_id
    if all(c.offer_id == first for c in configs):
        groups = [list(configs)]  # the candidate builder prunes one offer at a time
    else:
        by_offer: dict[str, list[Config]] = defaultdict(list)
        for c in configs:
            by_offer[c.offer_id].append(c)
        groups = list(by_offer.values())
    kept: list[Config] = []
    for group in groups:
        if len(group) == 1:
            kept.append(group[0])
            continue
        # Prefer fewer GPUs, then more throughput, then a stable key, so ties go one way.
        group.sort(key=lambda c: (c.gpus_per_replica, -sum(c.throughputs), c.key))  # throughputs: kept on c
        survivors: list[Config] = []
        for c in group:
            if not any(_dominates(s, c) for s in survivors):
                survivors.append(c)
        kept.extend(survivors)
    return kept


def prune_whole_instance_configs(configs: list[Config], offers: dict[str, Offer], limits: dict[str, int],
                                 gpu_quotas: dict[str, int], tiers: tuple[str, ...] | None = None,
                                 by_location: bool = False, keep: set[str] = frozenset()) -> list[Config]:
    """Across offers: drop a configuration that fills whole instances when another one
    that also fills whole instances is no dearer per replica, uses no more GPUs, and is
    at least as fast for every class.

    A replica that fills whole instances accounts for exactly those instances (no other
    replica shares them), so swapping each replica of the dominated configuration for
    one of the dominating one changes nothing else in the plan and costs no more. The
    dominating offer must be unlimited and its GPU type free of quota (or the same type),
    so the swap stays feasible. With pricing tiers the dominating offer must be no dearer
    in every tier (the swap keeps each instance's tier, reservations included); with spot
    spread over regions it must be in the same region; offers in `keep` (the running
    fleet, whose changes cost) never lose configurations.
    """
    def whole(c: Config) -> bool:
        o = offers[c.offer_id]
        return c.gpus_per_replica == o.gpus_per_instance * c.instances_per_replica

    def price(c: Config) -> float:
        o = offers[c.offer_id]
        if tiers is None:
            return o.price_usd_per_hour * c.instances_per_replica
        return min(o.tier_price(t) for t in tiers if o.tier_price(t) is not None) * c.instances_per_replica

    def dominates(d: Config, c: Config) -> bool:
        if by_location and offers[d.offer_id].location != offers[c.offer_id].location:
            return False
        if tiers is not None and (d.instances_per_replica != c.instances_per_replica
                                  or not no_dearer(offers[d.offer_id], offers[c.offer_id], tiers)[0]):
            return False
        return _whole_dominates(d, c, offers)

    candidates = sorted((c for c in configs if whole(c)),
                        key=lambda c: (price(c), c.gpus_per_replica, -sum(c.throughputs), c.key))
    dominators: list[Config] = []
    dropped: set[str] = set()
    plain = tiers is None and not by_location  # then `dominates` is `_whole_dominates`, inlined below
    for c in candidates:
        o = offers[c.offer_id]
        if c.offer_id not in keep:
            if plain:
                g, mine = c.gpus_per_replica, c.throughputs
                beaten = False
                for d in dominators:
                    if d.gpus_per_replica <= g and d.pending_cap is None \
                            and all(a >= b for a, b in zip(d.throughputs, mine)):
                        beaten = True
                        break
            else:
                beaten = any(dominates(d, c) for d in dominators)
            if beaten:
                dropped.add(c.key)
                continue
        if c.offer_id not in limits and (o.gpu not in gpu_quotas):
            dominators.append(c)
    return [c for c in configs if c.key not in dropped]


def _whole_dominates(d: Config, c: Config, offers: dict[str, Offer]) -> bool:
    # d comes earlier in (price, GPUs, -throughput, key) order, so price and ties are settled.
    if d.gpus_per_replica > c.gpus_per_replica or d.pending_cap is not None:
        return False
    return all(a.throughput >= b.throughput for a, b in zip(d.classes, c.classes))
