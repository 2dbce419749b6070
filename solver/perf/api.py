"""Inputs and outputs of the performance model (frozen, solver-agnostic)."""

from __future__ import annotations

from dataclasses import dataclass, field

from solver.catalog.types import GpuType
from solver.models.library import ModelArch

BYTES_PER_ELEMENT = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0}


@dataclass(frozen=True)
class Calibration:
    """Efficiency constants; see docs/performance-model.md for how they were fitted."""

    bandwidth_efficiency: float = 0.75  # achievable fraction of datasheet memory bandwidth
    compute_efficiency: float = 0.5  # achievable fraction of dense tensor FLOP/s
    runtime_overhead_gib: float = 1.5  # CUDA context, allocator slack, activations at small batch
    usable_memory_fraction: float = 0.92  # of the GPU memory the engine may take
    engine_factors: tuple[tuple[str, float], ...] = (("vllm", 1.0), ("tensorrt-llm", 1.3), ("sglang", 1.05))
    allreduce_latency_us: tuple[tuple[str, float], ...] = (("nvlink", 8.0), ("pcie", 25.0), ("infiniband", 30.0))
    error_band: float = 0.25  # typical relative error of the estimate

    def engine_factor(self, engine: str) -> float:
        return dict(self.engine_factors).get(engine, 1.0)


@dataclass(frozen=True)
class PerfQuery:
    model: ModelArch
    gpu: GpuType
    gpus_per_replica: int  # total GPUs of one replica (tensor x pipeline)
    interconnect: str  # between the GPUs of one instance: "nvlink" | "pcie" | "none"
    usable_memory_gib: float  # per GPU, before the engine's utilization fraction
    precision: str  # weights
    engine: str = "vllm"
    prompt_tokens: int = 512
    output_tokens: int = 256
    ttft_slo_ms: float | None = None
    tpot_slo_ms: float | None = None
    latency_slo_ms: float | None = None
    instances_per_replica: int = 1  # >1: pipeline stages on several instances (inter-node fabric)
    inter_node_gbs: float | None = None
    batch: int | None = None  # pin the batch instead of searching for the best
    kv_precision: str | None = None  # defaults to the weight precision (fp16 for int8 weights)
    calibration: Calibration = field(default_factory=Calibration)


@dataclass(frozen=True)
class PerfEstimate:
    feasible: bool
    reason: str = ""  # why infeasible, in words a user reads
    reason_kind: str = ""  # "vram" | "ttft" | "tpot" | "latency" | "unsupported" | ""
    batch: int = 0
    memory_gib_per_gpu: float = 0.0
    weights_gib_per_gpu: float = 0.0
    ttft_ms: float = 0.0
    tpot_ms: float = 0.0
    latency_ms: float = 0.0  # ttft + output_tokens x tpot
    requests_per_s: float = 0.0
    output_tokens_per_s: float = 0.0
    binding_limit: str = ""  # "vram" | "memory_bandwidth" | "compute" | "interconnect" | "slo"
    error_band: float = 0.0  # relative; the true value is expected within +-error_band
