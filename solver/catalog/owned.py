"""Owned GPUs as offers: provider "owned", region = the site, availability = the servers owned.

Every later stage (filters, candidates, the MIP, the evaluator, explanations) then treats
owned capacity like any other limited offer. The price an owned instance carries is what
running it costs per hour - its energy, GPUs x kW + host kW, times the site's $/kWh -
and not the hardware's amortised cost: that is paid whether the servers run or not, so it
is a constant of every plan and must not steer the choice (a sunk cost); the plan reports
it beside its cost (solver/output/power.py). docs/owned-and-power.md has the reasoning.
"""

from __future__ import annotations

from solver.catalog.gpu_names import ambiguity, resolve_gpu_name
from solver.catalog.loader import interconnect_for
from solver.catalog.types import Catalog, GpuType, Offer
from solver.errors import FieldViolation, InputError
from solver.suggest import did_you_mean

OWNED_PROVIDER = "owned"


def owned_offer_name(site: str, gpu: str, gpus_per_instance: int) -> str:
    """The offer name of owned GPUs of one type and server size at one site."""
    return f"{site}-{gpu}-{gpus_per_instance}gpu"


def resolved_gpu(name: str, gpus: dict[str, GpuType], path: str) -> str:
    """The catalog's name for an owned entry's GPU; InputError naming `path` otherwise."""
    if name in gpus:
        return name
    found = resolve_gpu_name(name, gpus)
    if found.candidates:
        raise InputError.single(path, ambiguity(name, found.candidates) + ".",
                                f"write one of {', '.join(found.candidates)}")
    if found.name is None:
        raise InputError.single(path, f"unknown GPU type {name!r}{did_you_mean(name, gpus) or '.'}",
                                "use a GPU name from `solver-cli catalog --gpus`, or describe it under catalog.gpus")
    return found.name


def gpu_power_kw(entry, gpu: GpuType, path: str) -> float:
    """kW one owned GPU draws: the entry's figure, else the GPU type's board power."""
    if entry.power_kw_per_gpu is not None:
        return entry.power_kw_per_gpu
    if gpu.board_power_w is None:
        raise InputError.single(f"{path}.power_kw_per_gpu", f"the catalog has no board power for {gpu.name}, so "
                                "the power its owned GPUs draw is unknown.",
                                "set power_kw_per_gpu (the datasheet's max power in kW)")
    return gpu.board_power_w / 1000.0


def instance_power_kw(entry, gpu: GpuType, path: str) -> float:
    """kW one owned server draws at full load: its GPUs and its host."""
    return entry.gpus_per_instance * gpu_power_kw(entry, gpu, path) + entry.host_power_kw_per_instance


def with_owned(workload, catalog: Catalog) -> Catalog:
    """`catalog` with the workload's owned GPUs as offers (the same catalog object when the
    workload owns nothing, or when they are already in it: idempotent, as every caller of
    plan() may pass a catalog it made this way)."""
    if not workload.owned:
        return catalog
    sites = {s.name: s for s in workload.sites}
    offers: list[Offer] = []
    problems: list[FieldViolation] = []
    for i, entry in enumerate(workload.owned):
        path = f"owned[{i}]"
        try:
            gpu_name = resolved_gpu(entry.gpu, catalog.gpus, f"{path}.gpu")
            gpu = catalog.gpus[gpu_name]
            kw = instance_power_kw(entry, gpu, path)
        except InputError as exc:
            problems.extend(exc.violations)
            continue
        site = sites[entry.site]  # the schema checked the name
        offers.append(Offer(
            provider=OWNED_PROVIDER, name=owned_offer_name(site.name, gpu_name, entry.gpus_per_instance),
            region=site.name, gpu=gpu_name, gpus_per_instance=entry.gpus_per_instance,
            price_usd_per_hour=round(kw * site.electricity_usd_per_kwh, 9),
            interconnect=interconnect_for(gpu, entry.gpus_per_instance),
            available_instances=entry.count // entry.gpus_per_instance,
            source=f"owned ({path}): energy {kw:g} kW x ${site.electricity_usd_per_kwh:g}/kWh at {site.name}",
            notes=f"owned hardware; amortised ${entry.amortised_cost_usd_per_gpu_hour:g}/GPU-hour paid whether "
                  "used or not (not in this price)"))
    if problems:
        raise InputError(problems)
    known = {o.id: o for o in catalog.offers}
    if all(known.get(o.id) == o for o in offers):
        return catalog
    clash = [o.id for o in offers if o.id in known]
    if clash:
        raise InputError.single("owned", f"the catalog already has an offer {clash[0]!r}, which the owned GPUs would "
                                "replace.", "rename the site, or remove that offer from the catalog")
    return Catalog(gpus=catalog.gpus, offers=catalog.offers + tuple(offers),
                   description=f"{catalog.description} + owned hardware ({len(offers)} offer(s))",
                   excluded=catalog.excluded)
