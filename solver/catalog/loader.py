"""Load the shipped default catalog (CSV with provenance) and user catalog files."""

from __future__ import annotations

import csv
import functools
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
def default_catalog() -> Catalog:
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
                llm_estimates=_b(r["llm_estimates"]), source=r["source"], derivation=r["derivation"],
                as_of=r["as_of"],
            )
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
    excluded = []
    with open(DATA_DIR / "excluded_offers.csv", newline="") as f:
        for r in csv.DictReader(f):
            excluded.append((f"{r['provider']}/{r['instance_type']}", r["reason"]))
    return Catalog(gpus=gpus, offers=tuple(offers),
                   description="built-in default (shared/data, SkyPilot catalog v9 snapshot, product supplements)",
                   excluded=tuple(excluded))


def load_catalog_file(path: str | Path) -> Catalog:
    """A user catalog in JSON or YAML (schema: `solver-cli schema --catalog`)."""
    from solver.catalog.custom import catalog_from_spec
    from solver.workload.schema import CatalogFile
    from solver.workload.documents import load_document

    data = load_document(Path(path), what="catalog")
    spec = CatalogFile.model_validate_with_paths(data, prefix="catalog")
    return catalog_from_spec(spec.gpus, spec.offers, include_default_gpus=spec.include_default_gpus,
                             description=str(path))
