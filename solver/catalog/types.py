"""Frozen catalog records. The formulation sees only these, never pydantic objects."""

from __future__ import annotations

import functools
from dataclasses import field, replace

from solver.dataclass_repr import dataclass

# Weight precisions a service may allow. fp4 = NVFP4/MXFP4 on FP4 tensor cores (Blackwell);
# int4 = weight-only AWQ/GPTQ (4-bit weights, 16-bit activations and GEMMs).
PRECISIONS = ("fp16", "bf16", "fp8", "int8", "fp4", "int4")
# Architectures the engines run 4-bit weight-only kernels on: vLLM's quantization table
# (docs.vllm.ai/en/v0.14.0/features/quantization/, "Supported Hardware") lists GPTQ from Volta
# and AWQ from Turing on NVIDIA, neither on AMD GPUs; Marlin W4A16 also runs on Blackwell.
INT4_ARCHITECTURES = ("Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell")
INTERCONNECTS = ("none", "pcie", "nvlink")


def default_int4_support(vendor: str, architecture: str) -> bool:
    """Whether the engines ship 4-bit weight-only kernels for this GPU (see INT4_ARCHITECTURES)."""
    return vendor.upper() == "NVIDIA" and architecture.startswith(INT4_ARCHITECTURES)


@dataclass(frozen=True)
class GpuType:
    """One GPU model's datasheet figures and capabilities (a catalog GPU type)."""

    name: str
    memory_gib: float
    memory_bandwidth_gbs: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    nvlink_gbs: float | None = None  # per GPU, bidirectional total
    fp4_tflops: float | None = None  # dense FP4 tensor rate (NVFP4/MXFP4); None = no FP4 tensor cores
    nvlink_domain_gpus: int | None = None  # GPUs one NVLink/xGMI fabric joins (8 HGX, 72 GB200 NVL72, 2 bridge)
    pcie_gen: int | None = None
    form_factor: str = "PCIe"  # "SXM" or "PCIe"
    vendor: str = "NVIDIA"
    architecture: str = ""
    supports_fp8: bool = False
    supports_int4: bool = False  # 4-bit weight-only kernels (AWQ/GPTQ) run here
    consumer: bool = False
    llm_estimates: bool = True  # False: only measured profiles can place a service here
    # Board power at full load, watts (NVIDIA max power / TDP, AMD TBP): an upper bound on
    # what one GPU draws. None: no datasheet figure (power is then not reported for it).
    board_power_w: float | None = None
    source: str = ""
    derivation: str = ""
    as_of: str = ""

    def tflops(self, precision: str) -> float | None:
        """Dense tensor throughput at which a precision's GEMMs run (FLOP/s in units of 1e12).

        int4 is weight-only: the weights are dequantised and multiplied at 16 bits."""
        if precision == "fp8":
            return self.fp8_tflops if self.supports_fp8 else None
        if precision == "fp4":
            return self.fp4_tflops
        if precision == "int8":
            return self.int8_tops
        if precision == "int4":
            return (self.fp16_tflops or self.bf16_tflops) if self.supports_int4 else None
        if precision == "bf16":
            return self.bf16_tflops or self.fp16_tflops
        if precision == "fp16":
            return self.fp16_tflops or self.bf16_tflops
        return None

    def supports(self, precision: str) -> bool:
        """Whether the engines can serve weights at this precision on this GPU."""
        if precision == "fp8":
            return self.supports_fp8
        if precision == "fp4":
            return self.fp4_tflops is not None
        if precision == "int4":
            return self.supports_int4
        if precision == "bf16":
            return self.bf16_tflops is not None or (self.fp16_tflops is not None and self.architecture.startswith(("Ampere", "Ada", "Hopper", "Blackwell")))
        return precision in ("fp16", "int8")


@dataclass(frozen=True)
class Offer:
    """One purchasable instance type in one region."""

    provider: str
    name: str
    region: str
    gpu: str  # GpuType.name
    gpus_per_instance: int
    price_usd_per_hour: float
    spot_price_usd_per_hour: float | None = None
    gpu_memory_gib: float | None = None  # usable per GPU when the provider states it
    interconnect: str = "pcie"  # between the instance's GPUs
    inter_node_fabric: str = ""  # "infiniband" when replicas may span instances
    inter_node_gbs: float | None = None
    available_instances: int | None = None  # None = unlimited
    source: str = ""
    as_of: str = ""
    notes: str = ""
    vcpus: float | None = None  # host size, where the catalog states it (deployment export sizes pods by it)
    host_memory_gib: float | None = None
    # Pricing tiers beyond on-demand (price_usd_per_hour) and spot (above); None = not offered
    # or no public figure. Reserved prices are effective hourly rates, paid every hour of a term.
    spot_interruption_rate_per_hour: float | None = None
    reserved_1y_price_usd_per_hour: float | None = None
    reserved_3y_price_usd_per_hour: float | None = None
    tier_sources: str = ""  # provenance of the tier prices (offer_tiers.csv rows, or "user")

    @functools.cached_property
    def id(self) -> str:
        # Cached (in the instance's __dict__; the fields stay frozen): a plan reads it
        # thousands of times (offer filtering, pruning, limits), ~8 % of a one-service plan.
        return f"{self.provider}/{self.name}"

    @property
    def price_usd_per_gpu_hour(self) -> float:
        return self.price_usd_per_hour / self.gpus_per_instance

    def with_price(self, price_usd_per_hour: float) -> "Offer":
        return replace(self, price_usd_per_hour=price_usd_per_hour)

    def tier_price(self, tier: str) -> float | None:
        """$/hour of one instance in a pricing tier; None where the tier is not offered."""
        return {"on_demand": self.price_usd_per_hour, "spot": self.spot_price_usd_per_hour,
                "reserved_1y": self.reserved_1y_price_usd_per_hour,
                "reserved_3y": self.reserved_3y_price_usd_per_hour}[tier]

    @property
    def location(self) -> str:
        """The failure domain spot capacity is spread over: provider and region."""
        return f"{self.provider}/{self.region}"


@dataclass(frozen=True)
class Catalog:
    """The GPU types and instance offers a plan chooses from, and where they came from."""

    gpus: dict[str, GpuType]
    offers: tuple[Offer, ...]
    description: str = ""
    excluded: tuple[tuple[str, str], ...] = field(default=())  # (offer id, reason)

    def offer(self, offer_id: str) -> Offer:
        for o in self.offers:
            if o.id == offer_id:
                return o
        raise KeyError(offer_id)

    def gpu_of(self, offer: Offer) -> GpuType:
        return self.gpus[offer.gpu]

    def usable_memory_gib(self, offer: Offer) -> float:
        return offer.gpu_memory_gib or self.gpus[offer.gpu].memory_gib
