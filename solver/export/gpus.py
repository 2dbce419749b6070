"""How each deployment target names the catalog's GPU types.

Three vocabularies meet here:
- the planner's GPU names (solver/catalog/data/gpus.csv: H100-SXM, A100-80GB, RTX-A6000, ...);
- SkyPilot's accelerator names, the `AcceleratorName` column of skypilot-catalog's
  vms.csv files, from which the built-in offers were transcribed (solver/catalog/data/SOURCES.md
  section A; gpu_instances_notes.csv records the instance-specific names, e.g. Cudo's
  `H100-SXM` and Fluidstack's `H100-NVLINK`). With `instance_type` set, SkyPilot requires
  the accelerator to be the instance's own, so instance-specific names win;
- Kubernetes node labels: NVIDIA GPU feature discovery (part of the GPU Operator) sets
  `nvidia.com/gpu.product` to the NVML device name with spaces as dashes (e.g.
  `NVIDIA-H100-80GB-HBM3`; the NVML names are those SkyPilot's RunPod provisioner lists in
  sky/provision/runpod/utils.py); AMD's node labeller sets `amd.com/gpu.product-name`
  (e.g. `AMD_Instinct_MI300X_OAM`, ROCm k8s-device-plugin docs).
"""

from __future__ import annotations

import re

# Planner GPU -> SkyPilot accelerator, for every GPU of the catalog (gpus.csv and
# gpus_supplement.csv); None: SkyPilot's catalog has no such accelerator. Checked by
# tests/test_export.py against tests/data/skypilot_accelerators.csv (SkyPilot's names per
# cloud, with their provenance), and every built-in offer's name against its cloud's.
_SKYPILOT: dict[str, str | None] = {
    "T4": "T4", "L4": "L4", "A10": "A10", "A10G": "A10G", "A40": "A40", "L40": "L40", "L40S": "L40S",
    "A100-40GB": "A100", "A100-40GB-PCIe": "A100", "A100-80GB": "A100-80GB", "A100-80GB-PCIe": "A100-80GB",
    "H100-SXM": "H100", "H100-PCIe": "H100", "H100-NVL": "H100-NVL", "H200": "H200", "B200": "B200",
    "GH200": "GH200", "V100-16GB": "V100", "V100-32GB": "V100-32GB",
    "RTX-A6000": "RTXA6000", "RTX-6000-Ada": "RTX6000-Ada", "RTX-4090": "RTX4090", "RTX-3090": "RTX3090",
    "RTX-PRO-6000": "RTXPRO6000",  # SkyPilot's AWS (g7e) and GCP (g4) rows; not "RTX-PRO-6000"
    "MI300X": "MI300X",
    "GB200": None, "GH200-144GB": None, "MI325X": None,
}
# (provider, instance-name pattern) -> the accelerator name of that provider's catalog rows.
_SKYPILOT_BY_INSTANCE = (
    ("aws", re.compile(r"^g5g\."), "T4g"),              # Graviton g5g: T4G in the AWS catalog
    ("gcp", re.compile(r"^a3-megagpu-"), "H100-MEGA"),
    ("lambda", re.compile(r"_a6000$"), "A6000"),
    ("fluidstack", re.compile(r"^H100_NVLINK"), "H100-NVLINK"),
    ("cudo", re.compile(r"-h100_"), "H100-SXM"),
    ("cudo", re.compile(r"-a100-"), "A100"),
    ("azure", re.compile(r"_H100_v5$"), "H100"),        # NC H100 v5 (H100 NVL cards): H100 in the Azure catalog
)

# Clouds SkyPilot provisions on by that name (the built-in catalog's providers).
SKYPILOT_CLOUDS = frozenset({"aws", "gcp", "azure", "lambda", "nebius", "fluidstack", "cudo", "paperspace", "runpod"})
# Clouds whose managed Kubernetes labels nodes `node.kubernetes.io/instance-type` with the
# same instance name the catalog uses (EKS, GKE, AKS).
K8S_INSTANCE_LABEL_CLOUDS = frozenset({"aws", "gcp", "azure"})

_GFD_PRODUCTS = {
    "T4": ["Tesla-T4"],
    "L4": ["NVIDIA-L4"],
    "A10": ["NVIDIA-A10"],
    "A10G": ["NVIDIA-A10G"],
    "A40": ["NVIDIA-A40"],
    "L40": ["NVIDIA-L40"],
    "L40S": ["NVIDIA-L40S"],
    "A100-40GB": ["NVIDIA-A100-SXM4-40GB"],
    "A100-40GB-PCIe": ["NVIDIA-A100-PCIE-40GB"],
    # Some catalogs list PCIe A100 80GB cards (Azure NC A100 v4, RunPod) under A100-80GB.
    "A100-80GB": ["NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"],
    "A100-80GB-PCIe": ["NVIDIA-A100-80GB-PCIe"],
    "H100-SXM": ["NVIDIA-H100-80GB-HBM3"],
    # Azure's NC H100 v5 carry H100 NVL cards, catalogued as H100-PCIe.
    "H100-PCIe": ["NVIDIA-H100-PCIe", "NVIDIA-H100-NVL"],
    "H200": ["NVIDIA-H200"],
    "B200": ["NVIDIA-B200"],
    "GH200": ["NVIDIA-GH200-480GB"],
    "V100-16GB": ["Tesla-V100-SXM2-16GB", "Tesla-V100-PCIE-16GB"],
    "V100-32GB": ["Tesla-V100-SXM2-32GB", "Tesla-V100-PCIE-32GB"],
    "RTX-A6000": ["NVIDIA-RTX-A6000"],
    "RTX-6000-Ada": ["NVIDIA-RTX-6000-Ada-Generation"],
    "RTX-4090": ["NVIDIA-GeForce-RTX-4090"],
    "RTX-3090": ["NVIDIA-GeForce-RTX-3090"],
    "MI300X": ["AMD_Instinct_MI300X_OAM"],
}


def vendor(gpu: str) -> str:
    """"AMD" for Instinct GPUs (MI...), else "NVIDIA" (the catalog's other vendor)."""
    return "AMD" if re.match(r"^MI\d", gpu) else "NVIDIA"


def k8s_gpu_resource(gpu: str) -> str:
    """The extended resource the vendor's device plugin advertises."""
    return "amd.com/gpu" if vendor(gpu) == "AMD" else "nvidia.com/gpu"


def k8s_product_label(gpu: str) -> tuple[str, list[str]]:
    """(label key, accepted values) identifying nodes with this GPU; no values: unknown to this table."""
    key = "amd.com/gpu.product-name" if vendor(gpu) == "AMD" else "nvidia.com/gpu.product"
    return key, list(_GFD_PRODUCTS.get(gpu, []))


def skypilot_accelerator(gpu: str, provider: str, instance_type: str) -> str | None:
    """SkyPilot's name for the GPU of this offer; None where SkyPilot's catalog has none."""
    for prov, pattern, name in _SKYPILOT_BY_INSTANCE:
        if provider == prov and pattern.search(instance_type):
            return name
    if gpu in _SKYPILOT:
        return _SKYPILOT[gpu]
    return gpu  # a custom catalog's GPU: its own name (SkyPilot takes unknown names as Kubernetes accelerators)


def arm64_note(unit) -> str:
    """GH200 (Grace) and AWS g5g (Graviton) hosts are arm64: the server image needs an arm64 build."""
    if unit.gpu == "GH200" or (unit.provider == "aws" and unit.instance_type.startswith("g5g.")):
        return (f"{unit.instance_type} has an arm64 host: check that the server image has an arm64 build "
                "(or build one) before deploying.")
    return ""
