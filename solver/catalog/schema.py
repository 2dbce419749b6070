"""Catalog files: the pydantic schema of GPU types and offers a user states (a catalog file,
or a workload's inline catalog). Below the workload schema, which uses it.
"""

# No `from __future__ import annotations`: see solver/documents/strict.py.

from typing import Literal

from pydantic import Field, model_validator

from solver.documents.strict import StrictModel, show_default


class GpuSpec(StrictModel):
    name: str = Field(min_length=1, description="GPU type name that offers' `gpu` refers to; a name of the "
                      "default catalog's GPU types replaces that type")
    memory_gib: float = Field(gt=0, le=4096, description="memory per GPU, GiB (an offer's gpu_memory_gib, where "
                              "given, overrides it as the usable memory)")
    memory_bandwidth_gbs: float | None = Field(default=None, gt=0, le=1e6, description="memory bandwidth per GPU, "
                                               "gigabytes per second; the performance model needs it (and an "
                                               "FP16 or BF16 rate) to estimate LLMs here, else only measured "
                                               "profiles can use this GPU")
    fp16_tflops: float | None = Field(default=None, gt=0, le=1e6, description="dense (no sparsity) FP16 tensor "
                                      "TFLOPS; unset: bf16_tflops stands in for it")
    bf16_tflops: float | None = Field(default=None, gt=0, le=1e6, description="dense (no sparsity) BF16 tensor "
                                      "TFLOPS; unset: fp16_tflops stands in for it, and bf16 is allowed only on "
                                      "Ampere, Ada, Hopper and Blackwell architectures")
    fp8_tflops: float | None = Field(default=None, gt=0, le=1e6, description="dense (no sparsity) FP8 tensor "
                                     "TFLOPS; omit for GPUs without FP8 tensor cores (see supports_fp8)")
    fp4_tflops: float | None = Field(default=None, gt=0, le=1e6, description="dense FP4 tensor TFLOPS; "
                                     "omit for GPUs without FP4 tensor cores (only Blackwell has them)")
    int8_tops: float | None = Field(default=None, gt=0, le=1e6, description="dense INT8 tensor TOPS (tera "
                                    "operations per second), the rate int8 GEMMs run at; unset: the FP16 rate")
    nvlink_gbs: float | None = Field(default=None, gt=0, le=1e6, description="NVLink (or AMD xGMI) bandwidth per "
                                     "GPU, gigabytes per second, both directions over all links together; unset: "
                                     "no NVLink, GPUs talk over PCIe. With form_factor SXM, multi-GPU offers "
                                     "default to NVLink between their GPUs")
    nvlink_domain_gpus: int | None = Field(default=None, ge=1, le=1024, description="GPUs one NVLink/xGMI fabric "
                                           "joins: 8 for HGX boards, 72 for GB200 NVL72, 2 for bridged PCIe cards; "
                                           "unset with nvlink_gbs given: 8 for SXM, 2 for PCIe")
    pcie_gen: int | None = Field(default=None, ge=1, le=8, description="PCIe generation (e.g. 4, 5): the link "
                                 "speed between GPUs without NVLink and between pipeline stages; unset: 4")
    form_factor: Literal["SXM", "PCIe"] = Field(default="PCIe", description="SXM (board-mounted, NVLink between "
                                                "the GPUs when nvlink_gbs is given) or PCIe (cards; NVLink only "
                                                "through bridges)")
    vendor: Literal["NVIDIA", "AMD"] = Field(default="NVIDIA", description="NVIDIA or AMD; AMD GPUs get the "
                                             "performance model's ROCm efficiencies and, unless supports_int4 says "
                                             "so, no int4 kernels")
    architecture: str = Field(default="", description="architecture, e.g. \"Hopper (GH100)\"; matched by how it "
                              "begins (Volta, Turing, Ampere, Ada, Hopper, Blackwell) for the performance "
                              "model's calibration and for bf16/int4 support; empty or other: a generic GPU")
    supports_fp8: bool | None = Field(default=None, description="FP8 weights and FP8 KV cache run here; unset: "
                                      "true exactly when fp8_tflops is given")
    supports_int4: bool | None = Field(default=None, description="4-bit weight-only (AWQ/GPTQ) kernels run here; "
                                       "default: NVIDIA Volta or newer")
    consumer: bool = Field(default=False, description="a consumer card (GeForce and the like): its offers are "
                           "used only with constraints.allow_consumer_gpus")
    board_power_w: float | None = Field(default=None, gt=0, le=10_000, description="board power at full load, "
                                        "watts (the datasheet's max power / TDP): plans report the fleet's power "
                                        "and energy with it, and owned GPUs of this type default to it; unset: "
                                        "no power figure")
    source: str = Field(default="", description="where the figures come from (free text, kept as the GPU "
                        "type's provenance); empty: \"user\"")


class OfferSpec(StrictModel):
    provider: str = Field(min_length=1, description="cloud or provider name (e.g. aws); the offer's id is "
                          "provider/name, unique in the catalog; constraints.providers filters by it")
    name: str = Field(min_length=1, description="instance type name (e.g. p5.48xlarge); the offer's id is "
                      "provider/name, unique in the catalog")
    region: str = Field(default="any", description="the region the instance runs in; constraints.regions and "
                        "same_region go by it (with the provider). Default \"any\" is a name like any other (a "
                        "constraints.regions list keeps the offer only if it names \"any\")")
    gpu: str = Field(min_length=1, description="GPU type name: one of this catalog's gpus or (unless "
                     "include_default_gpus is false) the default catalog's (`solver-cli catalog --gpus`)")
    gpus_per_instance: int = Field(ge=1, le=64, description="GPUs in one instance; replicas take a power of two "
                                   "that divides it, or all of it")
    price_usd_per_hour: float | None = Field(default=None, gt=0, le=1e5, description="on-demand price of one "
                                             "instance, US dollars per hour; give exactly one of "
                                             "price_usd_per_hour or price_usd_per_minute")
    price_usd_per_minute: float | None = Field(default=None, gt=0, le=1e4, description="on-demand price of one "
                                               "instance, US dollars per minute (x 60 per hour); give exactly one "
                                               "of price_usd_per_hour or price_usd_per_minute")
    spot_price_usd_per_hour: float | None = Field(default=None, gt=0, le=1e5, description="spot price of one "
                                                  "instance, US dollars per hour; unset: no spot offer (spot "
                                                  "pricing leaves the offer out)")
    spot_interruption_rate_per_hour: float | None = Field(default=None, ge=0, le=1, description="chance per "
                                                          "hour that a spot instance is reclaimed, where known "
                                                          "(0 to 1); informational: the plan reports its spot "
                                                          "fleet's expected interruptions per hour, the fleet "
                                                          "chosen does not depend on it")
    reserved_1y_price_usd_per_hour: float | None = Field(default=None, gt=0, le=1e5, description="effective "
                                                         "hourly price of a 1-year reservation / commitment, US "
                                                         "dollars, paid every hour of the horizon; unset: not "
                                                         "offered")
    reserved_3y_price_usd_per_hour: float | None = Field(default=None, gt=0, le=1e5, description="effective "
                                                         "hourly price of a 3-year reservation / commitment, US "
                                                         "dollars, paid every hour of the horizon; unset: not "
                                                         "offered")
    gpu_memory_gib: float | None = Field(default=None, gt=0, le=4096, description="usable memory per GPU, GiB, "
                                         "where the provider states it; unset: the GPU type's memory_gib")
    interconnect: Literal["none", "pcie", "nvlink"] | None = Field(default=None, description="link between the "
                                                                   "instance's GPUs: none, pcie or nvlink. Unset: "
                                                                   "none for one GPU, nvlink for SXM GPUs with "
                                                                   "nvlink_gbs, else pcie")
    inter_node_fabric: Literal["", "infiniband"] = Field(default="", description="\"infiniband\": a replica may "
                                                         "span 2 or 4 whole instances (pipeline stages joined by "
                                                         "the fabric), for models one instance cannot hold; \"\" "
                                                         "(default): replicas stay within one instance")
    inter_node_gbs: float | None = Field(default=None, gt=0, le=1e5, description="bandwidth per instance over "
                                         "the inter-node fabric, gigabytes per second; unset: 25 (one 200 Gb/s "
                                         "port)")
    available_instances: int | None = Field(default=None, ge=0, description="the most instances that can be "
                                            "bought (0 leaves the offer out); unset: unlimited. "
                                            "constraints.offer_quotas can only lower it")
    source: str = Field(default="user", description="where the prices come from (free text, shown with the "
                        "offer)")
    as_of: str = Field(default="", description="when the prices were taken (free text, e.g. 2025-06); empty: not "
                       "stated")

    @model_validator(mode="after")
    def _one_price(self):
        if (self.price_usd_per_hour is None) == (self.price_usd_per_minute is None):
            raise ValueError("give exactly one of price_usd_per_hour or price_usd_per_minute. To fix: "
                             "state the instance's on-demand price once")
        return self


class CatalogFile(StrictModel):
    gpus: list[GpuSpec] = Field(default_factory=list, json_schema_extra=show_default([]),
                                description="GPU types the offers may name besides the "
                                "default catalog's; one with a default type's name replaces it")
    offers: list[OfferSpec] = Field(min_length=1, description="the catalog's offers (instance types with prices), "
                                    "at least one; the default catalog's offers are not included")
    include_default_gpus: bool = Field(default=True, description="true: the default catalog's GPU types are "
                                       "known too, so offers may name them; false: only the GPU types in gpus")
