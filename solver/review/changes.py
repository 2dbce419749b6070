"""Apply a scenario's changes to the base: a new Workload and a new Catalog.

Workloads are frozen pydantic models, so changes edit a plain dict of the base and
validate it again (a change that makes the workload invalid gives an InputError with
the field path). Catalogs are frozen dataclasses, changed with `dataclasses.replace`.
Changes apply in the order listed; later ones see the effect of earlier ones.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Iterable

from solver.catalog.custom import gpu_from_spec
from solver.catalog.loader import interconnect_for
from solver.catalog.types import Catalog, Offer
from solver.errors import FieldViolation, InputError
from solver.review.spec import Change
from solver.catalog.schema import OfferSpec
from solver.workload.schema import Workload
from solver.suggest import did_you_mean

WORKLOAD_KINDS = {"demand", "slo", "gpu_quota", "offer_quota", "budget", "headroom", "constraints", "reservation",
                  "spot_share", "serving", "redundancy", "spot_interruptions", "site_power"}


def apply_changes(workload: Workload, catalog: Catalog, changes: Iterable[Change]) -> tuple[Workload, Catalog]:
    changes = list(changes)
    data = workload.model_dump(mode="json") if any(c.kind in WORKLOAD_KINDS for c in changes) else None
    for i, change in enumerate(changes):
        if change.kind in WORKLOAD_KINDS:
            _apply_to_workload(data, change, f"changes[{i}].{change.kind}")
        else:
            catalog = _apply_to_catalog(catalog, change, f"changes[{i}].{change.kind}")
    if data is not None:
        workload = Workload.model_validate_with_paths(data, prefix="scenario workload")
    return workload, catalog


class SolveKeys:
    """What a scenario solves, as text: two scenarios with the same key get the same
    workload and catalog from `apply_changes`, hence the same plan - a review solves one
    and copies its result to the other. Equal when the changed workload's JSON is equal
    (both validated from equal data) and the catalog changes are the same, in the same
    order; the base and scenarios that change only the catalog compare among themselves
    (their workload is the base object, not a validated copy). Conservative: scenarios
    that reach the same catalog by different changes get different keys."""

    def __init__(self, workload: Workload):
        self._base = json.dumps(workload.model_dump(mode="json"))

    def key(self, changes: Iterable[Change]) -> str | None:
        """The scenario's key; None when its changes are invalid (it is solved to say so)."""
        changes = list(changes)
        data = json.loads(self._base) if any(c.kind in WORKLOAD_KINDS for c in changes) else None
        catalog_changes = []
        try:
            for i, change in enumerate(changes):
                if change.kind in WORKLOAD_KINDS:
                    _apply_to_workload(data, change, f"changes[{i}].{change.kind}")
                else:
                    catalog_changes.append(change.model_dump(mode="json", exclude_unset=True, by_alias=True))
        except InputError:
            return None
        return json.dumps([data, catalog_changes], sort_keys=True)


# ---------------------------------------------------------------- workload changes
def _services(data: dict, name: str | None, where: str) -> list[dict]:
    if name is None:
        return data["services"]
    found = [s for s in data["services"] if s["name"] == name]
    if not found:
        names = [s["name"] for s in data["services"]]
        raise InputError.single(f"{where}.service", unknown_name("service", name, names),
                                f"use one of {', '.join(names[:10])}")
    return found


def _apply_to_workload(data: dict, change: Change, where: str) -> None:
    body, cons = change.body, data["constraints"]
    if change.kind == "demand":
        for svc in _services(data, body.service, where):
            demand = svc["demand"]
            key = "requests_per_s" if demand.get("requests_per_s") is not None else "items_per_min"
            demand[key] = demand[key] * body.factor
    elif change.kind == "slo":
        svc = _services(data, body.service, where)[0]
        for name in body.model_fields_set - {"service"}:
            svc["slo"][name] = getattr(body, name)
    elif change.kind == "gpu_quota":
        _set_or_pop(cons["gpu_quotas"], body.gpu, body.gpus)
    elif change.kind == "offer_quota":
        _set_or_pop(cons["offer_quotas"], body.offer, body.instances)
    elif change.kind == "budget":
        cons["budget_usd_per_hour"] = body.usd_per_hour
    elif change.kind == "headroom":
        cons["headroom"] = body.fraction
    elif change.kind == "reservation":
        cons["reserved_gpus_min"] = cons["reserved_gpus_max"] = body.gpus
    elif change.kind == "spot_share":
        cons["max_spot_share"] = body.share
    elif change.kind == "serving":
        for svc in _services(data, body.service, where):
            if body.service is None and svc.get("model") is None:
                continue  # every service: the LLM services (measured-profile services are served whole)
            svc["serving"] = body.serving
    elif change.kind == "redundancy":
        value = {"domain": body.domain, "serve_fraction": body.serve_fraction}
        if body.service is None:
            cons["redundancy"] = value
        else:
            _services(data, body.service, where)[0]["redundancy"] = value
    elif change.kind == "spot_interruptions":
        value = {"serve_fraction": body.serve_fraction}
        if body.service is None:
            cons["spot_interruptions"] = value
        else:
            _services(data, body.service, where)[0]["spot_interruptions"] = value
    elif change.kind == "site_power":
        sites = data.get("sites") or []
        found = [s for s in sites if s.get("name") == body.site]
        if not found:
            names = [s.get("name") for s in sites]
            raise InputError.single(f"{where}.site", unknown_name("site", body.site, names),
                                    f"use one of {', '.join(map(str, names[:10]))}" if names else
                                    "the base workload has no sites: add sites (docs/owned-and-power.md)")
        found[0]["power_cap_kw"] = body.power_cap_kw
    elif change.kind == "constraints":
        defaults = {"exclude_gpu_types": [], "allow_consumer_gpus": False, "pricing": "on_demand"}
        for name in body.model_fields_set:
            value = getattr(body, name)
            cons[name] = defaults.get(name) if value is None and name in defaults else value


def _set_or_pop(table: dict, key: str, value: Any) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


# ---------------------------------------------------------------- catalog changes
def _apply_to_catalog(catalog: Catalog, change: Change, where: str) -> Catalog:
    body = change.body
    if change.kind == "price":
        offers = tuple(_scaled(o, body.factor) if offer_matches(o, body) else o for o in catalog.offers)
        return replace(catalog, offers=offers)
    if change.kind == "availability":
        _known_offer(catalog, body.offer, f"{where}.offer")
        offers = tuple(replace(o, available_instances=body.instances) if o.id == body.offer else o
                       for o in catalog.offers)
        return replace(catalog, offers=offers)
    if change.kind == "remove_gpus":
        for k, name in enumerate(body):
            if name not in catalog.gpus:
                raise InputError.single(f"{where}[{k}]", unknown_name("GPU type", name, catalog.gpus),
                                        "use a GPU name from `solver-cli catalog --gpus`")
        return replace(catalog, offers=tuple(o for o in catalog.offers if o.gpu not in set(body)))
    if change.kind == "remove_offers":
        for k, offer_id in enumerate(body):
            _known_offer(catalog, offer_id, f"{where}[{k}]")
        return replace(catalog, offers=tuple(o for o in catalog.offers if o.id not in set(body)))
    if change.kind == "add_gpus":
        gpus = dict(catalog.gpus)
        for spec in body:
            gpus[spec.name] = gpu_from_spec(spec)
        return replace(catalog, gpus=gpus)
    if change.kind == "add_offers":
        existing = {o.id for o in catalog.offers}
        added = []
        for k, spec in enumerate(body):
            offer = offer_from_spec(spec, catalog, f"{where}[{k}]")
            if offer.id in existing:
                raise InputError.single(f"{where}[{k}]", f"offer {offer.id!r} is already in the catalog.",
                                        "give the new offer another name, or change the existing one with `price`")
            existing.add(offer.id)
            added.append(offer)
        return replace(catalog, offers=catalog.offers + tuple(added))
    raise AssertionError(f"unhandled change kind {change.kind}")


def unknown_name(what: str, name: str, choices) -> str:
    """'unknown offer 'x'; did you mean 'y'?' - one sentence, punctuated once."""
    return f"unknown {what} {name!r}" + (did_you_mean(name, choices) or ".")


def offer_matches(offer: Offer, body) -> bool:
    return ((body.provider is None or offer.provider == body.provider)
            and (body.gpu is None or offer.gpu == body.gpu)
            and (body.offer is None or offer.id == body.offer))


def _scaled(offer: Offer, factor: float) -> Offer:
    spot = offer.spot_price_usd_per_hour
    return replace(offer, price_usd_per_hour=offer.price_usd_per_hour * factor,
                   spot_price_usd_per_hour=None if spot is None else spot * factor)


def _known_offer(catalog: Catalog, offer_id: str, where: str) -> None:
    ids = [o.id for o in catalog.offers]
    if offer_id not in ids:
        raise InputError.single(where, unknown_name("offer", offer_id, ids),
                                "use an offer id (provider/name) from `solver-cli catalog`")


def offer_from_spec(spec: OfferSpec, catalog: Catalog, where: str) -> Offer:
    """The same conversion as a catalog file's offers, against this catalog's GPU types."""
    if spec.gpu not in catalog.gpus:
        raise InputError([FieldViolation(f"{where}.gpu", unknown_name("GPU type", spec.gpu, catalog.gpus),
                                         "use a GPU name from `solver-cli catalog --gpus`, or add it with add_gpus first")])
    price = spec.price_usd_per_hour if spec.price_usd_per_hour is not None else spec.price_usd_per_minute * 60.0
    return Offer(provider=spec.provider, name=spec.name, region=spec.region, gpu=spec.gpu,
                 gpus_per_instance=spec.gpus_per_instance, price_usd_per_hour=price,
                 spot_price_usd_per_hour=spec.spot_price_usd_per_hour, gpu_memory_gib=spec.gpu_memory_gib,
                 interconnect=spec.interconnect or interconnect_for(catalog.gpus[spec.gpu], spec.gpus_per_instance),
                 inter_node_fabric=spec.inter_node_fabric, inter_node_gbs=spec.inter_node_gbs,
                 available_instances=spec.available_instances, source=spec.source, as_of=spec.as_of)
