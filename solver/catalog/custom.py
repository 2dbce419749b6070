"""Build a Catalog from user-supplied GPU specs and offers (file or inline)."""

from __future__ import annotations

from solver.catalog.loader import default_catalog, default_gpus, interconnect_for
from solver.catalog.types import Catalog, GpuType, Offer, default_int4_support
from solver.errors import FieldViolation, InputError
from solver.catalog.gpu_names import ambiguity, resolve_gpu_name
from solver.suggest import did_you_mean


def gpu_from_spec(s) -> GpuType:
    fp8 = s.supports_fp8 if s.supports_fp8 is not None else s.fp8_tflops is not None
    int4 = s.supports_int4 if s.supports_int4 is not None else default_int4_support(s.vendor, s.architecture)
    domain = s.nvlink_domain_gpus
    if domain is None and s.nvlink_gbs:
        domain = 8 if s.form_factor == "SXM" else 2  # as the default catalog: HGX boards join 8, bridges pairs
    return GpuType(name=s.name, memory_gib=s.memory_gib, memory_bandwidth_gbs=s.memory_bandwidth_gbs,
                   fp16_tflops=s.fp16_tflops, bf16_tflops=s.bf16_tflops, fp8_tflops=s.fp8_tflops,
                   fp4_tflops=s.fp4_tflops, int8_tops=s.int8_tops, nvlink_gbs=s.nvlink_gbs, nvlink_domain_gpus=domain,
                   pcie_gen=s.pcie_gen, form_factor=s.form_factor, vendor=s.vendor, architecture=s.architecture,
                   supports_fp8=fp8, supports_int4=int4, consumer=s.consumer, board_power_w=s.board_power_w,
                   source=s.source or "user")


def catalog_from_spec(gpus_spec, offers_spec, *, include_default_gpus: bool = True,
                      include_default_offers: bool = False, description: str = "", prefix: str = "catalog") -> Catalog:
    gpus: dict[str, GpuType] = dict(default_gpus()) if include_default_gpus else {}
    for g in gpus_spec:
        gpus[g.name] = gpu_from_spec(g)
    offers: list[Offer] = list(default_catalog().offers) if include_default_offers else []
    problems: list[FieldViolation] = []
    seen = {o.id for o in offers}
    for i, s in enumerate(offers_spec):
        gpu = s.gpu if s.gpu in gpus else resolve_gpu_name(s.gpu, gpus)  # "NVIDIA L4" is L4
        if not isinstance(gpu, str):
            if gpu.candidates:
                problems.append(FieldViolation(f"{prefix}.offers[{i}].gpu", ambiguity(s.gpu, gpu.candidates) + ".",
                                               f"write one of {', '.join(gpu.candidates)}"))
                continue
            if gpu.name is None:
                problems.append(FieldViolation(f"{prefix}.offers[{i}].gpu", f"unknown GPU type {s.gpu!r}{did_you_mean(s.gpu, gpus) or '.'}",
                                               "use a GPU name from `solver-cli catalog --gpus`, or describe it under gpus"))
                continue
            gpu = gpu.name
        price = s.price_usd_per_hour if s.price_usd_per_hour is not None else s.price_usd_per_minute * 60.0
        offer = Offer(provider=s.provider, name=s.name, region=s.region, gpu=gpu,
                      gpus_per_instance=s.gpus_per_instance, price_usd_per_hour=price,
                      spot_price_usd_per_hour=s.spot_price_usd_per_hour, gpu_memory_gib=s.gpu_memory_gib,
                      interconnect=s.interconnect or interconnect_for(gpus[gpu], s.gpus_per_instance),
                      inter_node_fabric=s.inter_node_fabric, inter_node_gbs=s.inter_node_gbs,
                      available_instances=s.available_instances, source=s.source, as_of=s.as_of,
                      spot_interruption_rate_per_hour=s.spot_interruption_rate_per_hour,
                      reserved_1y_price_usd_per_hour=s.reserved_1y_price_usd_per_hour,
                      reserved_3y_price_usd_per_hour=s.reserved_3y_price_usd_per_hour,
                      tier_sources=s.source if (s.reserved_1y_price_usd_per_hour or s.reserved_3y_price_usd_per_hour
                                                or s.spot_interruption_rate_per_hour is not None) else "")
        if offer.id in seen:
            problems.append(FieldViolation(f"{prefix}.offers[{i}]", f"offer id {offer.id!r} appears twice.",
                                           "give each offer a unique provider/name"))
            continue
        seen.add(offer.id)
        offers.append(offer)
    if problems:
        raise InputError(problems)
    return Catalog(gpus=gpus, offers=tuple(offers), description=description)
