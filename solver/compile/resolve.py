"""Consistency checks and offer filtering: run before any model is built.

Unknown names (models, GPU types, offers) are reported with their field path and a
"did you mean"; the constraints' filters (providers, regions, GPU types, consumer
cards, pricing tier, zero quotas) remove offers with a recorded reason.
"""

from __future__ import annotations

from dataclasses import replace

from solver.catalog.custom import catalog_from_spec
from solver.catalog.gpu_names import ambiguity, resolve_gpu_name
from solver.catalog.loader import default_catalog, load_catalog_file
from solver.catalog.owned import OWNED_PROVIDER
from solver.catalog.types import PRECISIONS, Catalog, Offer
from solver.compile.horizon_checks import check_horizon
from solver.errors import FieldViolation, InputError
from solver.models.context import context_violation
from solver.models.library import ModelArch, get_model, model_names
from solver.documents.limits import short
from solver.workload.schema import InlineModel, Workload
from solver.suggest import did_you_mean


def resolve_catalog(workload: Workload, base_dir: str | None = None) -> Catalog:
    """The workload's catalog (default, file or inline), with its owned GPUs as offers."""
    from solver.catalog.owned import with_owned

    return with_owned(workload, _base_catalog(workload, base_dir))


def _base_catalog(workload: Workload, base_dir: str | None) -> Catalog:
    ref = workload.catalog
    if ref.source == "file":
        from pathlib import Path

        path = Path(ref.file)
        if base_dir and not path.is_absolute():
            path = Path(base_dir) / path
        try:
            return load_catalog_file(path)
        except InputError as exc:
            raise InputError([replace(v, field=f"catalog.file ({short(str(path))}): {v.field}")
                              for v in exc.violations]) from None
    if ref.source == "inline":
        return catalog_from_spec(ref.gpus, ref.offers, include_default_offers=ref.include_default_offers,
                                 description="inline")
    return default_catalog()


def model_arch(model: str | InlineModel) -> ModelArch:
    if isinstance(model, InlineModel):
        return ModelArch(model.name, model.params_b, model.layers, model.hidden_size, model.attention_heads,
                         model.kv_heads, model.head_dim, model.vocab_size, model.intermediate_size, model.experts,
                         model.active_experts, model.active_params_b, max_context_tokens=model.max_context_tokens)
    arch = get_model(model)
    assert arch is not None, "check_references runs first"
    return arch


def _precision_hardware(precision: str) -> str:
    return {"fp4": "FP4 needs FP4 tensor cores (Blackwell only: B200, GB200, RTX PRO 6000).",
            "fp8": "FP8 needs FP8 tensor cores (Ada, Hopper, Blackwell, MI300).",
            "int4": "int4 weight-only (AWQ/GPTQ) kernels exist for NVIDIA Volta or newer only.",
            "bf16": "this GPU has no BF16 support."}.get(precision, "not supported on this GPU.")


def check_references(workload: Workload, catalog: Catalog) -> Workload:
    """Every name the workload uses must exist; collect all problems at once. Returns the
    workload with its GPU names as the catalog spells them (solver/catalog/gpu_names.py)."""
    problems = reference_problems(workload.model_dump(), catalog)
    if problems:
        raise InputError(problems + check_horizon(workload, catalog))
    workload = canonical_gpu_names(workload, catalog)
    problems = check_horizon(workload, catalog)
    if problems:
        raise InputError(problems)
    return workload


def canonical_gpu_names(workload: Workload, catalog: Catalog) -> Workload:
    """The workload with every GPU name resolved to the catalog's (`"NVIDIA L4"` -> `L4`); the
    same object when all are exact (the common case: nothing is copied)."""
    gpus = catalog.gpus
    c = workload.constraints
    written = ([p.gpu for s in workload.services for p in s.profiles] + list(c.gpu_quotas)
               + list(c.gpu_types or ()) + list(c.exclude_gpu_types or ())
               + [g for s in workload.services for g in [*(s.disaggregation.prefill_gpu_types or ()),
                                                         *(s.disaggregation.decode_gpu_types or ())]])
    if all(name in gpus for name in written):
        return workload

    def canon(name: str) -> str:
        return name if name in gpus else (resolve_gpu_name(name, gpus).name or name)

    data = workload.model_dump(mode="json")
    for svc in data["services"]:
        for prof in svc["profiles"]:
            prof["gpu"] = canon(prof["gpu"])
        limits = svc["disaggregation"]
        for field_name in ("prefill_gpu_types", "decode_gpu_types"):
            if limits.get(field_name) is not None:
                limits[field_name] = list(dict.fromkeys(canon(n) for n in limits[field_name]))
    cons = data["constraints"]
    quotas: dict[str, int] = {}
    for name, n in cons["gpu_quotas"].items():  # two spellings of one GPU: the tighter quota
        quotas[canon(name)] = min(n, quotas.get(canon(name), n))
    cons["gpu_quotas"] = quotas
    for field_name in ("gpu_types", "exclude_gpu_types"):
        if cons.get(field_name) is not None:
            cons[field_name] = list(dict.fromkeys(canon(n) for n in cons[field_name]))
    return Workload.model_validate_with_paths(data)


def reference_problems(data: dict, catalog: Catalog) -> list[FieldViolation]:
    """Unknown names (models, GPU types, offers, providers, regions) in a workload document,
    and requests longer than their model's context length.

    Works on plain data and skips what has the wrong shape, so it can also run on a
    document that failed validation: all errors are then reported at once.
    """
    problems: list[FieldViolation] = []
    gpus = catalog.gpus
    offer_ids = {o.id for o in catalog.offers}

    def unknown_gpu(path: str, name) -> None:
        if not isinstance(name, str) or name in gpus:
            return
        found = resolve_gpu_name(name, gpus)
        if found.candidates:
            problems.append(FieldViolation(path, ambiguity(name, found.candidates) + ".",
                                           f"write one of {', '.join(found.candidates)}"))
        elif found.name is None:
            problems.append(FieldViolation(path, f"unknown GPU type {name!r}{did_you_mean(name, gpus)}",
                                           "use a GPU name from `solver-cli catalog --gpus`"))

    def unknown_offer(path: str, name) -> None:
        if isinstance(name, str) and name not in offer_ids:
            problems.append(FieldViolation(path, f"unknown offer {name!r}{did_you_mean(name, offer_ids)}",
                                           "use an offer id (provider/name) from `solver-cli catalog`"))

    for i, svc in enumerate(_items(data.get("services"))):
        model = svc.get("model")
        if isinstance(model, str) and get_model(model) is None:
            problems.append(FieldViolation(
                f"services[{i}].model", f"unknown model {model!r}{did_you_mean(model, model_names())}",
                "use a library model (`solver-cli estimate --list-models`) or describe it inline "
                "(params_b, layers, hidden_size, attention_heads, kv_heads, head_dim)"))
        problems.extend(_context_problems(i, svc))
        dis = svc.get("disaggregation") if isinstance(svc.get("disaggregation"), dict) else {}
        for field_name in ("prefill_gpu_types", "decode_gpu_types"):
            for k, name in enumerate(_list(dis.get(field_name))):
                unknown_gpu(f"services[{i}].disaggregation.{field_name}[{k}]", name)
        for j, prof in enumerate(_items(svc.get("profiles"))):
            gpu, precision = prof.get("gpu"), prof.get("precision")
            unknown_gpu(f"services[{i}].profiles[{j}].gpu", gpu)
            gpu = resolve_gpu_name(gpu, gpus).name if isinstance(gpu, str) else gpu
            if isinstance(gpu, str) and gpu in gpus and isinstance(precision, str) and precision in PRECISIONS \
                    and not gpus[gpu].supports(precision):
                problems.append(FieldViolation(
                    f"services[{i}].profiles[{j}].precision",
                    f"{gpu} cannot run {precision}: {_precision_hardware(precision)}",
                    f"correct the profile's precision or GPU; {gpu} supports "
                    f"{', '.join(x for x in PRECISIONS if gpus[gpu].supports(x))}"))
            if prof.get("offer") is not None:
                unknown_offer(f"services[{i}].profiles[{j}].offer", prof.get("offer"))
    c = data.get("constraints") if isinstance(data.get("constraints"), dict) else {}
    for name in _keys(c.get("gpu_quotas")):
        unknown_gpu(f"constraints.gpu_quotas.{name}", name)
    for name in _keys(c.get("offer_quotas")):
        unknown_offer(f"constraints.offer_quotas.{name}", name)
    for field_name in ("gpu_types", "exclude_gpu_types"):
        for k, name in enumerate(_list(c.get(field_name))):
            unknown_gpu(f"constraints.{field_name}[{k}]", name)
    for field_name, label, values in (("providers", "from provider", {o.provider for o in catalog.offers}),
                                      ("regions", "in region", {o.region for o in catalog.offers})):
        lowered = {v.lower() for v in values}
        for k, name in enumerate(_list(c.get(field_name))):
            if isinstance(name, str) and name.lower() not in lowered:
                problems.append(FieldViolation(f"constraints.{field_name}[{k}]",
                                               f"no offers {label} {name!r}{did_you_mean(name, values)}",
                                               f"use one of {', '.join(sorted(values))}"))
    return problems


def _context_problems(i: int, svc: dict) -> list[FieldViolation]:
    """Request classes whose prompt + output tokens exceed the model's context length."""
    model = svc.get("model")
    if isinstance(model, str):
        arch = get_model(model)
        if arch is None:
            return []  # reported as an unknown model
        name, limit, params_b, inline = arch.name, arch.max_context_tokens, arch.params_b, False
    elif isinstance(model, dict):
        name, limit, params_b, inline = model.get("name"), model.get("max_context_tokens"), model.get("params_b"), True
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
        params_b = params_b if isinstance(params_b, (int, float)) and params_b > 0 else None
    else:
        return []
    demand = svc.get("demand") if isinstance(svc.get("demand"), dict) else {}
    if isinstance(demand.get("classes"), list):
        requests = [(f"services[{i}].demand.classes[{j}]", c, f"class {c.get('name')!r}")
                    for j, c in enumerate(_items(demand["classes"]))]
    else:
        requests = [(f"services[{i}].demand", demand, "")]
    found = [context_violation(f"{path}.prompt_tokens", str(name), limit, r.get("prompt_tokens"),
                               r.get("output_tokens"), params_b, what=what,
                               override="" if inline else "describe it inline with max_context_tokens")
             for path, r, what in requests]
    return [v for v in found if v is not None]


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _items(value) -> list[dict]:
    return [v if isinstance(v, dict) else {} for v in _list(value)]


def _keys(value) -> list:
    return list(value) if isinstance(value, dict) else []


def filter_offers(workload: Workload, catalog: Catalog) -> tuple[list[Offer], list[tuple[str, str]]]:
    c = workload.constraints
    kept: list[Offer] = []
    dropped: list[tuple[str, str]] = []
    # Provider and region names are matched case-insensitively ("AWS" is aws).
    providers = {p.lower() for p in c.providers} if c.providers else None
    regions = {r.lower() for r in c.regions} if c.regions else None
    # The constraints read once (a plan filters the whole catalog two or three times).
    gpus, gpu_types, exclude_gpu_types = catalog.gpus, c.gpu_types, c.exclude_gpu_types
    allow_consumer, offer_quotas, gpu_quotas = c.allow_consumer_gpus, c.offer_quotas, c.gpu_quotas
    spot = c.pricing == "spot"
    tiers = c.allowed_tiers if c.pricing_tiers is not None else None
    for o in catalog.offers:
        gpu = gpus[o.gpu]
        why = ""
        # Owned servers are paid for already: no market applies to them, so neither the spot
        # price list nor the allowed tiers filter them (they run at their energy price).
        owned = o.provider == OWNED_PROVIDER
        if providers and o.provider.lower() not in providers:
            why = f"provider {o.provider} not in constraints.providers"
        elif regions and o.region.lower() not in regions:
            why = f"region {o.region} not in constraints.regions"
        elif gpu_types and o.gpu not in gpu_types:
            why = f"GPU {o.gpu} not in constraints.gpu_types"
        elif o.gpu in exclude_gpu_types:
            why = f"GPU {o.gpu} in constraints.exclude_gpu_types"
        elif gpu.consumer and not allow_consumer:
            why = f"{o.gpu} is a consumer GPU (set constraints.allow_consumer_gpus)"
        elif (offer_quotas and offer_quotas.get(o.id, 1) == 0) or o.available_instances == 0:
            why = "quota or availability is 0 instances"
        elif gpu_quotas and gpu_quotas.get(o.gpu, o.gpus_per_instance) < o.gpus_per_instance:
            why = f"GPU quota for {o.gpu} is below one instance ({o.gpus_per_instance} GPUs)"
        elif spot and o.spot_price_usd_per_hour is None and not owned:
            why = "no spot price"
        elif tiers is not None and all(o.tier_price(t) is None for t in tiers) and not owned:
            why = f"no price for the allowed tiers ({', '.join(tiers)})"
        if why:
            dropped.append((o.id, why))
            continue
        if spot and not owned:
            o = o.with_price(o.spot_price_usd_per_hour)
        kept.append(o)
    return kept, dropped


def offer_limits(workload: Workload, offers: list[Offer]) -> dict[str, int]:
    """Instances available per offer: the tighter of the catalog's availability and the quota."""
    limits: dict[str, int] = {}
    quotas = workload.constraints.offer_quotas
    for o in offers:
        available = o.available_instances
        quota = quotas.get(o.id) if quotas else None
        if quota is None:
            if available is not None:
                limits[o.id] = available
        else:
            limits[o.id] = quota if available is None else min(available, quota)
    return limits
