"""Power, compiled: kW per instance of every offer, and each site's power cap as one row.

`compile_power` runs once per plan (solver/compile/compiled.py) and gives the Problem a
`PowerTerms`: the formulation writes one row per capped site,

    power[site]   sum_{o at site} P_o n_o <= cap_site        (P_o = kW of one instance of o)

(solver/optimize/formulation.py `_power_rows`, and per period in period_model.py), the
greedy plan and explanations check it with `power_violations`, and the report reads the
kW per instance. P_o of an owned server is its GPUs x kW per GPU (the entry's, else the
catalog's board power) + its host kW; of a cloud instance, its GPUs x board power (no
cap applies to those: clouds are not sites). Board power at full load is an upper bound
on what the GPUs draw, so a plan within the cap stays within it under any load.
"""

from __future__ import annotations

from dataclasses import field

from solver.catalog.owned import OWNED_PROVIDER, instance_power_kw, owned_offer_name, resolved_gpu
from solver.catalog.types import Catalog, Offer
from solver.dataclass_repr import dataclass


@dataclass(frozen=True)
class SiteCap:
    """A site's power envelope and the kW of one instance of each of its offers."""

    name: str
    cap_kw: float
    offer_kw: tuple[tuple[str, float], ...]  # (offer id, kW per instance), by offer id


@dataclass(frozen=True)
class PowerTerms:
    """What power adds to a problem: caps per site, kW per instance of every offer whose
    GPUs have a board power, and the owned hardware's amortised cost (a constant)."""

    sites: tuple[SiteCap, ...] = ()  # capped sites only
    kw_per_instance: dict = field(default_factory=dict)  # offer id -> kW of one instance at full load (absent: unknown)
    owned_amortised_usd_per_hour: float = 0.0  # all owned GPUs, used or not
    owned_offers: frozenset = frozenset()  # ids of the owned offers


def offer_power_kw(offer: Offer, catalog: Catalog) -> float | None:
    """kW of one instance of a cloud offer at full board power; None where the GPU has no figure."""
    watts = catalog.gpus[offer.gpu].board_power_w
    return None if watts is None else offer.gpus_per_instance * watts / 1000.0


def compile_power(workload, offers, catalog: Catalog) -> PowerTerms | None:
    """The power terms of a workload over its allowed offers (None when no GPU in the
    catalog has a board power and nothing is owned: nothing to report or cap)."""
    kw: dict[str, float] = {}
    for o in offers:
        if o.provider != OWNED_PROVIDER:
            p = offer_power_kw(o, catalog)
            if p is not None:
                kw[o.id] = p
    owned_ids = set()
    amortised = 0.0
    for i, entry in enumerate(workload.owned):
        gpu = resolved_gpu(entry.gpu, catalog.gpus, f"owned[{i}].gpu")
        offer_id = f"{OWNED_PROVIDER}/{owned_offer_name(entry.site, gpu, entry.gpus_per_instance)}"
        kw[offer_id] = instance_power_kw(entry, catalog.gpus[gpu], f"owned[{i}]")
        owned_ids.add(offer_id)
        amortised += entry.count * entry.amortised_cost_usd_per_gpu_hour
    allowed = {o.id for o in offers}
    sites = []
    for site in workload.sites:
        if site.power_cap_kw is None:
            continue
        mine = tuple(sorted((o.id, kw[o.id]) for o in offers
                            if o.provider == OWNED_PROVIDER and o.region == site.name and o.id in kw))
        sites.append(SiteCap(site.name, site.power_cap_kw, mine))
    kw = {o: v for o, v in kw.items() if o in allowed}
    if not kw and not workload.owned:
        return None
    return PowerTerms(tuple(sites), kw, amortised, frozenset(owned_ids))


def site_power_kw(site: SiteCap, running: dict[str, int]) -> float:
    """kW the instances `running` (offer id -> count) draw at one site."""
    return sum(kw * running.get(offer_id, 0) for offer_id, kw in site.offer_kw)


def power_violations(problem, running: dict[str, int]) -> list[str]:
    """Sites whose cap `running` (offer id -> instances, firm and spot together) exceeds."""
    terms = problem.power
    if terms is None:
        return []
    out = []
    for site in terms.sites:
        used = site_power_kw(site, running)
        if used > site.cap_kw * (1 + 1e-9) + 1e-9:
            out.append(f"site {site.name} draws {used:.4g} kW, above its power cap of {site.cap_kw:g} kW")
    return out
