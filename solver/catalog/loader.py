"""Load the shipped default catalog (CSV with provenance) and user catalog files."""

from __future__ import annotations

import csv
import functools
from dataclasses import replace
from pathlib import Path

from solver.catalog.types import Catalog, GpuType, Offer

DATA_DIR = Path(__file__).resolve().parent / "data"


def _f(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def _b(text: str) -> bool:
    return str(text).strip().lower() in ("true", "1", "yes")


def interconnect_for(gpu: GpuType, gpus_per_instance: int) -> str:
    """NVLink joins the GPUs of SXM boards; other multi-GPU hosts talk over PCIe."""
    if gpus_per_instance <= 1:
        return "none"
    if gpu.nvlink_gbs and gpu.form_factor == "SXM":
        return "nvlink"
    return "pcie"


@functools.lru_cache(maxsize=1)
def default_gpus() -> dict[str, GpuType]:
    """The built-in GPU types alone: a catalog file that adds its own offers to them needs no
    default offers, and reading those (offers.csv, its tiers and exclusions) costs ~10 ms of a
    one-service CLI solve. Callers copy the dict before changing it."""
    gpus: dict[str, GpuType] = {}
    with open(DATA_DIR / "gpus.csv", newline="") as f:
        for r in csv.DictReader(f):
            gpus[r["name"]] = GpuType(
                name=r["name"], memory_gib=float(r["memory_gib"]),
                memory_bandwidth_gbs=_f(r["memory_bandwidth_gbs"]), fp16_tflops=_f(r["fp16_tflops"]),
                bf16_tflops=_f(r["bf16_tflops"]), fp8_tflops=_f(r["fp8_tflops"]), int8_tops=_f(r["int8_tops"]),
                fp4_tflops=_f(r["fp4_tflops"]), nvlink_gbs=_f(r["nvlink_gbs"]),
                nvlink_domain_gpus=int(r["nvlink_domain_gpus"]) if r["nvlink_domain_gpus"] else None,
                pcie_gen=int(r["pcie_gen"]) if r["pcie_gen"] else None,
                form_factor=r["form_factor"], vendor=r["vendor"], architecture=r["architecture"],
                supports_fp8=_b(r["supports_fp8"]), supports_int4=_b(r["supports_int4"]), consumer=_b(r["consumer"]),
                llm_estimates=_b(r["llm_estimates"]), board_power_w=_f(r["board_power_w"]),
                source=r["source"], derivation=r["derivation"],
                as_of=r["as_of"],
            )
    return gpus


@functools.lru_cache(maxsize=1)
def default_catalog() -> Catalog:
    gpus = dict(default_gpus())
    offers = []
    with open(DATA_DIR / "offers.csv", newline="") as f:
        for r in csv.DictReader(f):
            n = int(r["gpus_per_instance"])
            offers.append(Offer(
                provider=r["provider"], name=r["name"], region=r["region"], gpu=r["gpu"],
                gpus_per_instance=n, price_usd_per_hour=float(r["price_usd_per_hour"]),
                spot_price_usd_per_hour=_f(r["spot_price_usd_per_hour"]), gpu_memory_gib=_f(r["gpu_memory_gib"]),
                interconnect=interconnect_for(gpus[r["gpu"]], n), inter_node_fabric=r["inter_node_fabric"],
                inter_node_gbs=_f(r["inter_node_gbs"]), source=r["source"], as_of=r["as_of"], notes=r["notes"],
                vcpus=_f(r["vcpus"]), host_memory_gib=_f(r["host_memory_gib"]),
            ))
    offers = merge_offer_tiers(offers, load_offer_tiers(DATA_DIR / "offer_tiers.csv"))
    excluded = []
    with open(DATA_DIR / "excluded_offers.csv", newline="") as f:
        for r in csv.DictReader(f):
            excluded.append((f"{r['provider']}/{r['instance_type']}", r["reason"]))
    return Catalog(gpus=gpus, offers=tuple(offers),
                   description="built-in default (shared/data, SkyPilot catalog v9 snapshot, product supplements)",
                   excluded=tuple(excluded))


TIER_COLUMNS = ("offer_id", "tier", "price_usd_per_hour", "interruption_rate_per_hour", "source", "as_of", "notes")
TIERS_IN_FILE = ("spot", "reserved_1y", "reserved_3y")


def load_offer_tiers(path: Path) -> list[dict]:
    """The product-owned tier prices (spot interruption rates, reserved / committed-use
    prices), one row per offer and tier, each with its public source. Kept apart from
    offers.csv so that new offers and new tier figures land independently."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != TIER_COLUMNS:
            raise ValueError(f"{path.name}: columns must be {', '.join(TIER_COLUMNS)}")
        rows = list(reader)
    seen = set()
    for i, r in enumerate(rows, start=2):
        if r["tier"] not in TIERS_IN_FILE:
            raise ValueError(f"{path.name} line {i}: tier {r['tier']!r} is not one of {', '.join(TIERS_IN_FILE)}")
        if (r["offer_id"], r["tier"]) in seen:
            raise ValueError(f"{path.name} line {i}: {r['offer_id']} {r['tier']} appears twice")
        if not r["source"]:
            raise ValueError(f"{path.name} line {i}: every row needs its source")
        if r["tier"] != "spot" and not r["price_usd_per_hour"]:
            raise ValueError(f"{path.name} line {i}: a reserved row needs price_usd_per_hour")
        seen.add((r["offer_id"], r["tier"]))
    return rows


def merge_offer_tiers(offers: list[Offer], rows: list[dict]) -> list[Offer]:
    """Offers with the tier prices of `rows` set (rows for offers not in the list are an error)."""
    by_id = {o.id: o for o in offers}
    for r in rows:
        if r["offer_id"] not in by_id:
            raise ValueError(f"offer_tiers.csv: {r['offer_id']} is not an offer of offers.csv")
        o = by_id[r["offer_id"]]
        price = _f(r["price_usd_per_hour"])
        if r["tier"] == "spot":
            changes = {"spot_interruption_rate_per_hour": _f(r["interruption_rate_per_hour"])}
            if o.spot_price_usd_per_hour is None and price is not None:
                changes["spot_price_usd_per_hour"] = price
        else:
            changes = {f"{r['tier']}_price_usd_per_hour": price}
        source = f"{r['tier']}: {r['source']} ({r['as_of']})" if r["as_of"] else f"{r['tier']}: {r['source']}"
        changes["tier_sources"] = "; ".join(x for x in (o.tier_sources, source) if x)
        by_id[o.id] = replace(o, **changes)
    return [by_id[o.id] for o in offers]


def load_catalog_file(path: str | Path) -> Catalog:
    """A user catalog in JSON or YAML (schema: `solver-cli schema --catalog`)."""
    from solver.catalog.custom import catalog_from_spec
    from solver.catalog.schema import CatalogFile
    from solver.documents.parse import load_document

    data = load_document(Path(path), what="catalog")
    spec = CatalogFile.model_validate_with_paths(data, prefix="catalog")
    return catalog_from_spec(spec.gpus, spec.offers, include_default_gpus=spec.include_default_gpus,
                             description=str(path))
