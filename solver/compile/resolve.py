"""Consistency checks and offer filtering: run before any model is built.

Unknown names (models, GPU types, offers) are reported with their field path and a
"did you mean"; the constraints' filters (providers, regions, GPU types, consumer
cards, pricing tier, zero quotas) remove offers with a recorded reason.
"""

from __future__ import annotations

from dataclasses import replace

from solver.catalog.custom import catalog_from_spec
from solver.catalog.loader import default_catalog, load_catalog_file
from solver.catalog.types import Catalog, Offer
from solver.compile.horizon_checks import check_horizon
from solver.errors import FieldViolation, InputError
from solver.models.library import ModelArch, get_model, model_names
from solver.workload.schema import InlineModel, Workload
from solver.suggest import did_you_mean


def resolve_catalog(workload: Workload, base_dir: str | None = None) -> Catalog:
    ref = workload.catalog
    if ref.source == "file":
        from pathlib import Path

        path = Path(ref.file)
        if base_dir and not path.is_absolute():
            path = Path(base_dir) / path
        try:
            return load_catalog_file(path)
        except InputError as exc:
            raise InputError([replace(v, field=f"catalog.file ({path}): {v.field}") for v in exc.violations]) from None
    if ref.source == "inline":
        return catalog_from_spec(ref.gpus, ref.offers, include_default_offers=ref.include_default_offers,
                                 description="inline")
    return default_catalog()


def model_arch(model: str | InlineModel) -> ModelArch:
    if isinstance(model, InlineModel):
        return ModelArch(model.name, model.params_b, model.layers, model.hidden_size, model.attention_heads,
                         model.kv_heads, model.head_dim, model.vocab_size, model.intermediate_size, model.experts,
                         model.active_experts, model.active_params_b)
    arch = get_model(model)
    assert arch is not None, "check_references runs first"
    return arch


def check_references(workload: Workload, catalog: Catalog) -> None:
    """Every name the workload uses must exist; collect all problems at once."""
    problems: list[FieldViolation] = []
    gpus = catalog.gpus
    offer_ids = {o.id for o in catalog.offers}
    for i, svc in enumerate(workload.services):
        if isinstance(svc.model, str) and get_model(svc.model) is None:
            problems.append(FieldViolation(
                f"services[{i}].model", f"unknown model {svc.model!r}{did_you_mean(svc.model, model_names())}",
                "use a library model (`solver-cli estimate --list-models`) or describe it inline "
                "(params_b, layers, hidden_size, attention_heads, kv_heads, head_dim)"))
        for j, p in enumerate(svc.profiles):
            if p.gpu not in gpus:
                problems.append(FieldViolation(f"services[{i}].profiles[{j}].gpu",
                                               f"unknown GPU type {p.gpu!r}{did_you_mean(p.gpu, gpus)}",
                                               "use a GPU name from `solver-cli catalog --gpus`"))
            if p.offer is not None and p.offer not in offer_ids:
                problems.append(FieldViolation(f"services[{i}].profiles[{j}].offer",
                                               f"unknown offer {p.offer!r}{did_you_mean(p.offer, offer_ids)}",
                                               "use an offer id (provider/name) from `solver-cli catalog`"))
    c = workload.constraints
    for name in c.gpu_quotas:
        if name not in gpus:
            problems.append(FieldViolation(f"constraints.gpu_quotas.{name}", f"unknown GPU type {name!r}{did_you_mean(name, gpus)}",
                                           "use a GPU name from `solver-cli catalog --gpus`"))
    for name in c.offer_quotas:
        if name not in offer_ids:
            problems.append(FieldViolation(f"constraints.offer_quotas.{name}", f"unknown offer {name!r}{did_you_mean(name, offer_ids)}",
                                           "use an offer id (provider/name) from `solver-cli catalog`"))
    for field_name, names in (("gpu_types", c.gpu_types or []), ("exclude_gpu_types", c.exclude_gpu_types)):
        for k, name in enumerate(names):
            if name not in gpus:
                problems.append(FieldViolation(f"constraints.{field_name}[{k}]", f"unknown GPU type {name!r}{did_you_mean(name, gpus)}",
                                               "use a GPU name from `solver-cli catalog --gpus`"))
    providers = {o.provider for o in catalog.offers}
    for k, name in enumerate(c.providers or []):
        if name not in providers:
            problems.append(FieldViolation(f"constraints.providers[{k}]", f"no offers from provider {name!r}{did_you_mean(name, providers)}",
                                           f"use one of {', '.join(sorted(providers))}"))
    regions = {o.region for o in catalog.offers}
    for k, name in enumerate(c.regions or []):
        if name not in regions:
            problems.append(FieldViolation(f"constraints.regions[{k}]", f"no offers in region {name!r}{did_you_mean(name, regions)}",
                                           f"use one of {', '.join(sorted(regions))}"))
    problems += check_horizon(workload, catalog)
    if problems:
        raise InputError(problems)


def filter_offers(workload: Workload, catalog: Catalog) -> tuple[list[Offer], list[tuple[str, str]]]:
    c = workload.constraints
    kept: list[Offer] = []
    dropped: list[tuple[str, str]] = []
    for o in catalog.offers:
        gpu = catalog.gpus[o.gpu]
        why = ""
        if c.providers and o.provider not in c.providers:
            why = f"provider {o.provider} not in constraints.providers"
        elif c.regions and o.region not in c.regions:
            why = f"region {o.region} not in constraints.regions"
        elif c.gpu_types and o.gpu not in c.gpu_types:
            why = f"GPU {o.gpu} not in constraints.gpu_types"
        elif o.gpu in c.exclude_gpu_types:
            why = f"GPU {o.gpu} in constraints.exclude_gpu_types"
        elif gpu.consumer and not c.allow_consumer_gpus:
            why = f"{o.gpu} is a consumer GPU (set constraints.allow_consumer_gpus)"
        elif c.offer_quotas.get(o.id, 1) == 0 or o.available_instances == 0:
            why = "quota or availability is 0 instances"
        elif c.gpu_quotas.get(o.gpu, o.gpus_per_instance) < o.gpus_per_instance:
            why = f"GPU quota for {o.gpu} is below one instance ({o.gpus_per_instance} GPUs)"
        elif c.pricing == "spot" and o.spot_price_usd_per_hour is None:
            why = "no spot price"
        elif c.pricing_tiers is not None and all(o.tier_price(t) is None for t in c.allowed_tiers):
            why = f"no price for the allowed tiers ({', '.join(c.allowed_tiers)})"
        if why:
            dropped.append((o.id, why))
            continue
        if c.pricing == "spot":
            o = o.with_price(o.spot_price_usd_per_hour)
        kept.append(o)
    return kept, dropped


def offer_limits(workload: Workload, offers: list[Offer]) -> dict[str, int]:
    """Instances available per offer: the tighter of the catalog's availability and the quota."""
    limits: dict[str, int] = {}
    for o in offers:
        bounds = [b for b in (o.available_instances, workload.constraints.offer_quotas.get(o.id)) if b is not None]
        if bounds:
            limits[o.id] = min(bounds)
    return limits
