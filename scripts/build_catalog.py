#!/usr/bin/env python3
"""Build the shipped default catalog from the project's reference data.

Reads ``../shared/data/gpu_specs.csv`` and ``gpu_instances.csv`` (+ notes), merges the
product-owned supplements ``solver/catalog/data/gpus_supplement.csv`` and
``offers_supplement.csv`` (GPUs, figures and offers the read-only reference data lacks,
each row with its own source, as_of and caveats), and writes
``solver/catalog/data/{gpus,offers,excluded_offers}.csv``. The product never reads
``../shared`` at run time: the CSVs this script writes are committed, with the
source and date of every row, and `tests/test_drift.py` checks they are current.
A supplement row without a source, date or caveats is an error.

Usage: python scripts/build_catalog.py [--shared ../shared] [--check]
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "solver" / "catalog" / "data"
GPUS_SUPPLEMENT = OUT_DIR / "gpus_supplement.csv"
OFFERS_SUPPLEMENT = OUT_DIR / "offers_supplement.csv"
# Architectures with 4-bit weight-only kernels in the engines (vLLM quantization table:
# GPTQ from Volta, AWQ from Turing; none on AMD GPUs) - see solver/catalog/types.py.
INT4_ARCHITECTURES = ("Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell")
# The date the reference CSVs were gathered (shared/data README, copied into
# solver/catalog/data/SOURCES.md: SkyPilot catalog v9 snapshot).
DATA_AS_OF = "2026-11"

# Product GPU name -> (row in gpu_specs.csv, overrides with the reason for each).
# Overrides fill gaps the spec table leaves, always with a stated derivation.
GPU_TYPES: dict[str, tuple[str, dict[str, object], str]] = {
    "T4": ("T4", {}, ""),
    "L4": ("L4", {}, ""),
    "A10": ("A10", {}, ""),
    "A10G": ("A10G", {"fp16_tflops": 62.5, "bf16_tflops": 62.5},
             "fp16/bf16 tensor 62.5 from the HF gpu_catalog.json figure quoted in the spec notes (low confidence)"),
    "A40": ("A40", {}, ""),
    "L40": ("L40", {}, ""),
    "L40S": ("L40S", {"int8_tops": 733.0}, "int8 = fp8 dense figure (Ada runs both at the same rate)"),
    "A100-40GB": ("A100-40GB-SXM4", {}, ""),
    "A100-40GB-PCIe": ("A100-40GB-PCIe", {}, ""),
    "A100-80GB": ("A100-80GB-SXM4", {}, ""),
    "A100-80GB-PCIe": ("A100-80GB-PCIe", {}, ""),
    "H100-SXM": ("H100-SXM5", {}, ""),
    "H100-PCIe": ("H100-PCIe", {"bf16_tflops": 750.0, "fp8_tflops": 1500.0, "int8_tops": 1500.0},
                  "bf16 = fp16 (Hopper runs both at one rate); fp8/int8 = 2x fp16 (Hopper ratio, as in the H100-SXM5 row)"),
    "H200": ("H200-SXM", {}, ""),
    "B200": ("B200", {}, ""),
    "H100-NVL": ("H100-NVL", {}, ""),
    "GH200": ("GH200 (96GB HBM3)", {"memory_bandwidth_gbs": 3350.0, "fp16_tflops": 989.4, "bf16_tflops": 989.4,
                                    "fp8_tflops": 1978.9, "int8_tops": 1978.9, "nvlink_gbs": None},
              "bandwidth and FLOP/s not in the spec table: the H100-SXM5 figures are used as a floor (GH200's GPU is H100-class)"),
    "V100-16GB": ("V100-SXM2-16GB", {"nvlink_gbs": 300.0},
                  "NVLink 2.0 300 GB/s per GPU is an assumption (spec table: 'NVLink present, bandwidth not seen')"),
    "V100-32GB": ("V100-SXM2-32GB", {"nvlink_gbs": 300.0},
                  "NVLink 2.0 300 GB/s per GPU is an assumption (spec table: 'NVLink present, bandwidth not seen')"),
    "RTX-A6000": ("RTX A6000", {"fp16_tflops": 154.8, "bf16_tflops": 154.8},
                  "fp16 tensor = 4 x fp32 (the GA102 ratio of the A10 row: 125 / 31.24)"),
    "RTX-6000-Ada": ("RTX 6000 Ada", {"fp16_tflops": 182.2, "bf16_tflops": 182.2, "fp8_tflops": 364.4, "int8_tops": 364.4},
                     "fp16 tensor = 2 x fp32 and fp8 = 2 x fp16 (the AD102 ratios of the L40 row)"),
    "RTX-4090": ("RTX 4090", {"fp8_tflops": 330.0, "int8_tops": 330.0},
                 "fp8 = 2 x bf16 (Ada ratio of the L40 row)"),
    "RTX-3090": ("RTX 3090", {}, ""),
    "MI300X": ("MI300X", {}, ""),
}
CONSUMER = {"RTX-4090", "RTX-3090"}

# Board power (W, the most the board draws at full load: NVIDIA "max power" / TDP, AMD TBP)
# per reference spec row: the figure is gpu_specs.csv's tdp_w; these strings say which
# of the row's sources (as summarised in the reference data's specs_evidence.md) state
# it, and where sources disagree, which figure the catalog keeps and why. Site power
# caps (docs/owned-and-power.md) treat it as an upper bound, so the higher figure wins.
BOARD_POWER_SOURCES: dict[str, str] = {
    "T4": "70 W: hmc-tech.com/gpu/nvidia-l4-vs-nvidia-t4, pcpartcomparison.com/gpu/tesla-t4-vs-l4, HF RajBhope "
          "gpu_catalog.json (gist hewumars says 75 W)",
    "L4": "72 W: grokipedia.com/page/NVIDIA_L4_vs_L40S, hmc-tech.com/gpu/nvidia-l4-vs-nvidia-a2, "
          "fpsbench.com/compare/gpu/nvidia-l4-vs-nvidia-tesla-m40",
    "A10": "150 W: gist.github.com/kimbochen (A10 125 TFLOP/s, 0.6 TB/s, 150 W)",
    "A10G": "300 W: the power limit nvidia-smi reports on AWS g5 (gist shashankprasanna/10ebe6dc1ba1d8d93db17da4e2cc890e); "
            "the HF RajBhope gpu_catalog.json says 150 W (the A10's figure); no NVIDIA datasheet (an AWS-only part), "
            "so the enforced limit, the higher figure, is kept as the upper bound",
    "A40": "300 W: NVIDIA A40 datasheet text as listed on ecer.com ('max power 300 W'); hmc-tech.com "
           "nvidia-a40-vs-nvidia-grid-a100b; huggingface.co/hardware/a40",
    "L40": "300 W: NVIDIA L40/L40S datasheet table on mullet.se (product_id=355414, 'max power 300 W'); "
           "cpu-gpu.alldbin.com; yobitel.com/knowledge-base/nvidia-l40",
    "L40S": "350 W: NVIDIA L40/L40S datasheet table on mullet.se (product_id=355414, 'max power 350 W'); "
            "omegaco.ae/shop/gpu-cards-edge-ai/nvidia-l40s; TechPowerUp-derived text says 'up to 300 W' (lower, not kept)",
    "A100-40GB-SXM4": "400 W: glennklockwood.com/garden/processors/A100 (NVIDIA A100 datasheet r4); "
                      "techpowerup.com/gpu-specs/a100-sxm4-40-gb.c3506; thundercompute.com A100 guide",
    "A100-40GB-PCIe": "250 W: thundercompute.com/blog/nvidia-a100-specs-full-guide; A100 40GB PCIe product brief "
                      "PB-10137-001_v03 (docslib.org)",
    "A100-80GB-SXM4": "400 W: glennklockwood.com/garden/processors/A100 (NVIDIA A100 datasheet r4); thundercompute.com",
    "A100-80GB-PCIe": "300 W: thundercompute.com/blog/nvidia-a100-specs-full-guide (nvplay.ru, citing the launch "
                      "table, says 250 W: the higher, later datasheet figure is kept)",
    "H100-SXM5": "700 W: glennklockwood.com/garden/processors/h100; codesota.com/hardware/h100 ('from the NVIDIA "
                 "datasheet'); hawkvelt.id.au ('up to 700 W')",
    "H100-PCIe": "350 W: NVIDIA H100 PCIe Product Brief PB-11133-001_v02 (manuals.plus, 'max TDP 350 W'); "
                 "gist.github.com/kimbochen; hmc-tech.com",
    "H100-NVL": "350 W: grokipedia.com/page/210100120 (gpu.blog: 350-400 W configurable; gpus_supplement.csv "
                "raises it to 400 W)",
    "H200-SXM": "700 W: lzwjava.github.io/nvidia-h200-gpu-specs-en, aiminingco.com/gpu/h200/specs, geektopia.es, "
                "alpharomercoma/MI300X-vs-H200 REPORT.md (the PCIe/NVL variant is 600 W: saulelectric.com)",
    "GH200 (96GB HBM3)": "1000 W for the whole superchip module (Grace CPU, H100-class GPU and their memory): "
                         "artificial-intelligence-wiki.com nvidia-grace-hopper-guide ('up to 1000 W'); the "
                         "host CPU is inside this figure",
    "B200": "1000 W: glennklockwood.com/garden/processors/B200 ('HGX B200 @1000 W'); haink.org ('~1,000 W')",
    "V100-SXM2-16GB": "300 W: io-tech.fi (V100 PCIe 250 W, 'SXM2 300 W'); HF RajBhope gpu_catalog.json",
    "V100-SXM2-32GB": "300 W: HF RajBhope gpu_catalog.json (V100 32 GB, 300 W); io-tech.fi ('SXM2 300 W')",
    "RTX A6000": "300 W: sysrqmts.com (RTX A6000, 300 W); reviews4000.info; HF ohdoking/gpu_spec nvidia_gpu.csv",
    "RTX 6000 Ada": "300 W: grafikkarten.com, cputronic.com, zx8123.com; HF ohdoking/gpu_spec nvidia_gpu.csv",
    "RTX 4090": "450 W: fpsbench.com, pcspecchart.com/pc_parts/gpu/25, techgoing.com ('450 W TBP')",
    "RTX 3090": "350 W: HF datasets ohdoking/gpu_spec nvidia_gpu.csv",
    "MI300X": "750 W TBP: alpharomercoma/MI300X-vs-H200 METHODOLOGY.md; mlcommons inference_results_v4.1 "
              "8xMI300X_2xEPYC-9374F.json ('MI300X-NPS1-SPX-192GB-750W'); codesota.com; gpu.blog",
}
# Product GPUs whose board power differs from the spec row's tdp_w (with BOARD_POWER_SOURCES'
# reason): AWS's A10G runs at the 300 W limit nvidia-smi reports, not the A10's 150 W.
BOARD_POWER_OVERRIDES_W: dict[str, float] = {"A10G": 300.0}
NO_LLM_ESTIMATE: set[str] = set()  # MI300X became estimable with its own (AMD) efficiency constants

# gpu_instances.csv GPU name -> product GPU name (form factor from the instance name where stated).
def product_gpu(provider: str, instance: str, gpu: str) -> tuple[str | None, str]:
    name = instance.lower()
    if gpu == "A100-80GB":
        return ("A100-80GB-PCIe", "form factor from instance name") if "pcie" in name else ("A100-80GB", "")
    if gpu == "A100-40GB":
        return ("A100-40GB-PCIe", "form factor from instance name") if "pcie" in name else ("A100-40GB", "")
    if gpu == "H100" and provider == "azure" and name.startswith("standard_nc") and name.endswith("h100_v5"):
        return "H100-NVL", ("Azure NCads H100 v5 = 1-2 x H100 NVL 94 GB "
                            "(learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ncadsh100v5-series)")
    if gpu == "H100":
        # Form factor is not stated by the catalog (Azure NC/ND H100 v5, Paperspace): plan with the
        # slowest variant so predictions err on the safe side.
        return "H100-PCIe", "catalog does not state the H100 form factor; planned as H100-PCIe (the conservative variant)"
    if gpu == "T4G":
        return "T4", "AWS T4G is the T4 part on a Graviton host"
    if gpu == "RTXA6000":
        return "RTX-A6000", ""
    if gpu in GPU_TYPES:
        return gpu, ""
    return None, f"no specification row for GPU {gpu!r} in gpu_specs.csv"


def inter_node_fabric(provider: str, instance: str, gpu_count: float) -> tuple[str, float]:
    """(fabric, GB/s per instance) for offers that can join replicas across instances.

    Inferred from the instance family (EFA on AWS p4/p5/p6, the Azure 'r' = RDMA sizes,
    GCP A3 Mega/Ultra and A4, Nebius 8-GPU hosts); verify with the provider.
    """
    if gpu_count < 8:
        return "", 0.0
    n = instance.lower()
    if provider == "aws" and n.startswith(("p4d", "p4de")):
        return "infiniband", 50.0  # 400 Gbit/s EFA
    if provider == "aws" and n.startswith(("p5", "p6")):
        return "infiniband", 400.0  # 3200 Gbit/s EFA
    if provider == "azure" and n.startswith("standard_nd") and "r" in n.split("_")[1][4:]:
        return "infiniband", 200.0 if "h100" in n else 100.0
    if provider == "gcp" and n.startswith(("a3-megagpu", "a3-ultragpu", "a4-")):
        return "infiniband", 200.0
    if provider == "nebius":
        return "infiniband", 400.0
    return "", 0.0


def _num(text: str) -> float | None:
    text = (text or "").strip()
    return float(text) if text else None


def build_gpus(specs: dict[str, dict[str, str]]) -> list[dict[str, object]]:
    rows = []
    for name, (spec_name, overrides, derivation) in GPU_TYPES.items():
        row = _spec_fields(name, specs[spec_name])
        row.update(overrides)
        row["board_power_w"] = BOARD_POWER_OVERRIDES_W.get(name, row["board_power_w"])
        row["spec_row"] = spec_name
        row["source"] = specs[spec_name]["source"]
        row["derivation"] = derivation
        row["as_of"] = DATA_AS_OF
        rows.append(row)
    return rows


def _spec_fields(name: str, s: dict[str, str]) -> dict[str, object]:
    return {
        "name": name,
        "vendor": "AMD" if s["gpu"].startswith("MI") else "NVIDIA",
        "architecture": s["architecture"],
        "form_factor": "SXM" if "SXM" in s["form_factor"] or "OAM" in s["form_factor"] else "PCIe",
        "memory_gib": _num(s["memory_gib"]),
        "memory_bandwidth_gbs": _num(s["memory_bandwidth_gbs"]),
        "fp16_tflops": _num(s["fp16_dense_tflops"]),
        "bf16_tflops": _num(s["bf16_dense_tflops"]),
        "fp8_tflops": _num(s["fp8_dense_tflops"]),
        "fp4_tflops": None,  # the reference table has no FP4 column; the supplement adds the figures
        "int8_tops": _num(s["int8_dense_tops"]),
        "nvlink_gbs": _num(s["nvlink_gbs"]),
        "nvlink_domain_gpus": None,
        "pcie_gen": int(s["pcie_gen"]) if s["pcie_gen"].strip() else None,
        "supports_int4": None,
        "board_power_w": _num(s["tdp_w"]),
        "board_power_source": BOARD_POWER_SOURCES.get(s["gpu"], "") if _num(s["tdp_w"]) is not None else "",
    }


# Supplement columns that carry figures; empty cells inherit (overrides) or stay unknown (new GPUs).
_SUPPLEMENT_NUMERIC = ("memory_gib", "memory_bandwidth_gbs", "fp16_tflops", "bf16_tflops", "fp8_tflops", "fp4_tflops",
                       "int8_tops", "nvlink_gbs")
_SUPPLEMENT_TEXT = ("vendor", "architecture", "form_factor")
_PROVENANCE = ("source", "as_of", "caveats")


class SupplementError(ValueError):
    """A supplement row the build refuses: it names the file, row and column."""


def _require_provenance(path: Path, rows: list[dict[str, str]]) -> None:
    for i, r in enumerate(rows, start=2):  # line 1 is the header
        for col in _PROVENANCE:
            if not (r.get(col) or "").strip():
                raise SupplementError(f"{path.name} line {i} ({r.get('name') or r.get('provider')}): "
                                      f"empty '{col}' - every supplement row states its source, as_of and caveats")


def apply_gpu_supplement(rows: list[dict[str, object]], specs: dict[str, dict[str, str]],
                         supplement: list[dict[str, str]], path: Path = GPUS_SUPPLEMENT) -> list[dict[str, object]]:
    """Override figures of existing GPUs and add new ones; each row keeps the supplement's source."""
    _require_provenance(path, supplement)
    by_name = {r["name"]: r for r in rows}
    for i, sup in enumerate(supplement, start=2):
        name = sup["name"].strip()
        row = by_name.get(name)
        if row is None:
            base = specs.get(sup["extends"].strip()) if sup["extends"].strip() else None
            if sup["extends"].strip() and base is None:
                raise SupplementError(f"{path.name} line {i} ({name}): extends unknown reference row {sup['extends']!r}")
            row = _spec_fields(name, base) if base else {k: None for k in _spec_fields(name, specs[next(iter(specs))])}
            row["name"] = name
            row.update(spec_row=sup["extends"].strip(), source="", derivation="", as_of="")
            rows.append(row)
            by_name[name] = row
        for col in _SUPPLEMENT_TEXT:
            if sup[col].strip():
                row[col] = sup[col].strip()
        for col in _SUPPLEMENT_NUMERIC:
            if sup[col].strip():
                row[col] = float(sup[col])
        for col in ("nvlink_domain_gpus", "pcie_gen"):
            if sup[col].strip():
                row[col] = int(sup[col])
        if sup["supports_int4"].strip():
            row["supports_int4"] = sup["supports_int4"].strip().lower() == "true"
        if sup["board_power_w"].strip():
            if not sup["board_power_source"].strip():
                raise SupplementError(f"{path.name} line {i} ({name}): board_power_w without board_power_source - "
                                      "every board power names its datasheet")
            row["board_power_w"] = float(sup["board_power_w"])
            row["board_power_source"] = sup["board_power_source"].strip()
        row["source"] = "; ".join(x for x in (str(row["source"] or ""), sup["source"].strip()) if x)
        row["derivation"] = " ".join(x for x in (str(row["derivation"] or ""), sup["caveats"].strip()) if x)
        row["as_of"] = sup["as_of"].strip()
        if row["memory_gib"] is None or not row["vendor"] or not row["form_factor"]:
            raise SupplementError(f"{path.name} line {i} ({name}): a new GPU needs memory_gib, vendor and form_factor")
    return rows


def finish_gpus(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """Derived columns, in the order gpus.csv stores them."""
    out = []
    for r in rows:
        domain = r["nvlink_domain_gpus"]
        if domain is None and r["nvlink_gbs"]:
            domain = 8 if r["form_factor"] == "SXM" else 2  # HGX/DGX boards join 8; PCIe bridges join pairs
        int4 = r["supports_int4"]
        if int4 is None:
            int4 = r["vendor"] == "NVIDIA" and str(r["architecture"]).startswith(INT4_ARCHITECTURES)
        out.append({
            "name": r["name"], "vendor": r["vendor"], "architecture": r["architecture"], "form_factor": r["form_factor"],
            "memory_gib": r["memory_gib"], "memory_bandwidth_gbs": r["memory_bandwidth_gbs"],
            "fp16_tflops": r["fp16_tflops"], "bf16_tflops": r["bf16_tflops"], "fp8_tflops": r["fp8_tflops"],
            "fp4_tflops": r["fp4_tflops"], "int8_tops": r["int8_tops"], "nvlink_gbs": r["nvlink_gbs"],
            "nvlink_domain_gpus": domain, "pcie_gen": r["pcie_gen"],
            "supports_fp8": r["fp8_tflops"] is not None, "supports_int4": bool(int4),
            "consumer": r["name"] in CONSUMER, "llm_estimates": r["name"] not in NO_LLM_ESTIMATE,
            "board_power_w": r["board_power_w"], "board_power_source": r["board_power_source"],
            "spec_row": r["spec_row"], "source": r["source"], "derivation": r["derivation"], "as_of": r["as_of"],
        })
    return out


def build_offers(instances: list[dict[str, str]], notes: dict[tuple[str, str], str]):
    offers, excluded = [], []
    seen: set[tuple[str, str]] = set()
    for r in instances:
        provider, instance = r["provider"], r["instance_type"]
        note = notes.get((provider, instance), "")
        gpu_count = float(r["gpu_count"])
        key = (provider, instance)
        if key in seen:
            excluded.append({"provider": provider, "instance_type": instance, "reason": "duplicate row"})
            continue
        seen.add(key)
        if gpu_count < 1 or gpu_count != int(gpu_count):
            excluded.append({"provider": provider, "instance_type": instance,
                             "reason": f"fractional GPU ({gpu_count}); a replica needs whole GPUs"})
            continue
        if "AcceleratorCount=12" in note:
            excluded.append({"provider": provider, "instance_type": instance,
                             "reason": "source says 12 GPUs per instance (suspect) and does not state the H100 form factor"})
            continue
        if instance.startswith("n1-host+"):
            excluded.append({"provider": provider, "instance_type": instance,
                             "reason": "GPU-only price: the n1 host VM that the GPU needs is not priced in the source"})
            continue
        gpu, mapping_note = product_gpu(provider, instance, r["gpu"])
        if gpu is None:
            excluded.append({"provider": provider, "instance_type": instance, "reason": mapping_note})
            continue
        price = float(r["price_per_hour_usd"])
        spot = _num(r["spot_price_per_hour_usd"])
        caveats = [c for c in (mapping_note,) if c]
        if spot is not None and spot >= price:
            caveats.append(f"source spot price {spot} is not below on-demand; spot left unset")
            spot = None
        fabric, fabric_gbs = inter_node_fabric(provider, instance, gpu_count)
        offers.append({
            "provider": provider,
            "name": instance,
            "region": r["region"],
            "gpu": gpu,
            "gpus_per_instance": int(gpu_count),
            "gpu_memory_gib": _num(r["gpu_memory_gib_per_gpu"]),
            "vcpus": _num(r["vcpus"]),
            "host_memory_gib": _num(r["memory_gib"]),
            "price_usd_per_hour": price,
            "spot_price_usd_per_hour": spot,
            "inter_node_fabric": fabric,
            "inter_node_gbs": fabric_gbs or None,
            "source": "skypilot-catalog (see solver/catalog/data/SOURCES.md section A)",
            "as_of": DATA_AS_OF,
            "notes": "; ".join([note] + caveats if note else caveats),
        })
    return offers, excluded


def apply_offer_supplement(offers: list[dict[str, object]], gpus: set[str], supplement: list[dict[str, str]],
                           path: Path = OFFERS_SUPPLEMENT) -> list[dict[str, object]]:
    """Offers for GPUs the reference instances lack, each with its own source, date and caveats."""
    _require_provenance(path, supplement)
    seen = {(o["provider"], o["name"]) for o in offers}
    for i, r in enumerate(supplement, start=2):
        key = (r["provider"].strip(), r["name"].strip())
        if key in seen:
            raise SupplementError(f"{path.name} line {i}: offer {key[0]}/{key[1]} is already in the catalog")
        if r["gpu"].strip() not in gpus:
            raise SupplementError(f"{path.name} line {i}: unknown GPU {r['gpu']!r}")
        seen.add(key)
        offers.append({
            "provider": key[0], "name": key[1], "region": r["region"].strip(), "gpu": r["gpu"].strip(),
            "gpus_per_instance": int(r["gpus_per_instance"]), "gpu_memory_gib": _num(r["gpu_memory_gib"]),
            "vcpus": _num(r["vcpus"]), "host_memory_gib": _num(r["host_memory_gib"]),
            "price_usd_per_hour": float(r["price_usd_per_hour"]), "spot_price_usd_per_hour": _num(r["spot_price_usd_per_hour"]),
            "inter_node_fabric": r["inter_node_fabric"].strip(), "inter_node_gbs": _num(r["inter_node_gbs"]),
            "source": r["source"].strip(), "as_of": r["as_of"].strip(), "notes": r["caveats"].strip(),
        })
    return offers


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _csv_text(rows: list[dict[str, object]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buf.getvalue()


def build(shared: Path) -> dict[str, str]:
    data = shared / "data"
    with open(data / "gpu_specs.csv", newline="") as f:
        specs = {row["gpu"]: row for row in csv.DictReader(f)}
    with open(data / "gpu_instances.csv", newline="") as f:
        instances = list(csv.DictReader(f))
    with open(data / "gpu_instances_notes.csv", newline="") as f:
        notes = {(r["provider"], r["instance_type"]): r["note"].strip() for r in csv.DictReader(f)}
    gpus = finish_gpus(apply_gpu_supplement(build_gpus(specs), specs, _read(GPUS_SUPPLEMENT)))
    offers, excluded = build_offers(instances, notes)
    offers = apply_offer_supplement(offers, {g["name"] for g in gpus}, _read(OFFERS_SUPPLEMENT))
    return {"gpus.csv": _csv_text(gpus), "offers.csv": _csv_text(offers), "excluded_offers.csv": _csv_text(excluded)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    parser.add_argument("--check", action="store_true", help="fail if the committed files differ")
    args = parser.parse_args()
    try:
        files = build(args.shared)
    except SupplementError as exc:
        print(f"catalog supplement rejected: {exc}", file=sys.stderr)
        return 2
    stale = [n for n, text in files.items() if not (OUT_DIR / n).exists() or (OUT_DIR / n).read_text() != text]
    if args.check:
        if stale:
            print("catalog data is stale: " + ", ".join(stale) + " (run scripts/build_catalog.py)", file=sys.stderr)
            return 1
        return 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT_DIR / name).write_text(text)
    print(f"wrote {', '.join(files)} to {OUT_DIR.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
