"""Inputs and outputs of the performance model (frozen, hashable, solver-agnostic).

The planner caches estimates by `PerfQuery`, so every field here is immutable and
hashable (tuples, not dicts). The default constants of `Calibration` are the fitted
values in `solver/perf/calibration.py`; docs/performance-model.md explains each.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Mapping

from solver.catalog.types import GpuType
from solver.models.library import ModelArch
from solver.perf import calibration as _fit

# Bytes per stored weight. q4_k_m (llama.cpp GGUF) keeps some tensors at 6 bits, so its
# effective size is fitted from published file sizes (see calibration.py).
BYTES_PER_ELEMENT = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0,
                     "q4_k_m": _fit.Q4_K_M_BITS_PER_WEIGHT / 8}
PRECISIONS = tuple(BYTES_PER_ELEMENT)
# "tensorrt-llm-0.9" is the engine of the calibration rows (kept to reproduce them).
ENGINES = ("vllm", "tensorrt-llm", "sglang", "llama.cpp", "tensorrt-llm-0.9")
REASON_KINDS = ("vram", "ttft", "tpot", "latency", "unsupported")


@dataclass(frozen=True)
class Calibration:
    """Efficiency constants; see docs/performance-model.md for how they were fitted.

    Override per workload with `Calibration.from_overrides({...})`.
    """

    bandwidth_efficiency: float = _fit.BANDWIDTH_EFFICIENCY  # achieved / datasheet memory bandwidth
    compute_efficiency: float = _fit.COMPUTE_EFFICIENCY  # achieved / dense fp16 tensor FLOP/s (GEMMs)
    runtime_overhead_gib: float = _fit.RUNTIME_OVERHEAD_GIB  # per GPU, inside the engine's memory budget
    usable_memory_fraction: float = _fit.USABLE_MEMORY_FRACTION  # of GPU memory the engine takes (vLLM 0.90)
    engine_factors: tuple[tuple[str, float], ...] = _fit.ENGINE_FACTORS  # speed relative to the fitted physics
    allreduce_latency_us: tuple[tuple[str, float], ...] = _fit.LINK_LATENCY_US
    error_band: float = _fit.ERROR_BAND_THROUGHPUT  # relative; ~80 % of calibration rows fall within it
    # Added with issue 3:
    fp8_compute_efficiency: float = _fit.FP8_COMPUTE_EFFICIENCY  # fp8/int8 GEMMs: fraction of the fp16 efficiency
    layer_overhead_us: float = _fit.LAYER_OVERHEAD_US  # fixed time per layer per pass, eager launches (TRT-LLM 0.9)
    graph_layer_overhead_us: float = _fit.GRAPH_LAYER_OVERHEAD_US  # the same under CUDA graphs (vLLM, SGLang, TRT-LLM)
    link_efficiency: float = _fit.LINK_EFFICIENCY  # achieved / nominal one-direction link bandwidth in all-reduce
    activation_tokens: int = _fit.ACTIVATION_TOKENS  # tokens of one forward pass the engine reserves activations for
    max_batch: int = _fit.MAX_BATCH  # scheduler cap on concurrent sequences per replica
    llama_cpp_layer_overhead_us: float = _fit.LLAMA_CPP_LAYER_OVERHEAD_US  # llama.cpp replaces layer_overhead_us
    llama_cpp_bandwidth_gbs: float = _fit.LLAMA_CPP_BANDWIDTH_GBS  # ceiling of llama.cpp's batch-1 kernels
    ttft_error_band: float = _fit.ERROR_BAND_TTFT
    tpot_error_band: float = _fit.ERROR_BAND_TPOT

    def engine_factor(self, engine: str) -> float:
        return dict(self.engine_factors).get(engine, 1.0)

    def link_latency_us(self, link: str) -> float:
        return dict(self.allreduce_latency_us)[link]

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, float] | None) -> "Calibration":
        """Defaults with some constants replaced, e.g. from a workload's `solver.calibration`.

        Keys are field names (`bandwidth_efficiency`), `engine_factor.<engine>` or
        `engine_factor_<engine>` (`engine_factor_tensorrt_llm`), and
        `allreduce_latency_us.<link>`. Unknown keys raise ValueError naming close ones.
        """
        base = cls()
        if not overrides:
            return base
        scalars = {f.name for f in fields(cls) if f.name not in ("engine_factors", "allreduce_latency_us")}
        engines = dict(base.engine_factors)
        links = dict(base.allreduce_latency_us)
        changes: dict[str, object] = {}
        for key, value in overrides.items():
            engine = _engine_key(key)
            value = _checked(key, float(value), divisor=key in _DIVISORS or engine is not None,
                             whole=key in _WHOLE)
            if key in scalars:
                changes[key] = int(value) if key in ("activation_tokens", "max_batch") else value
            elif engine is not None:
                engines[engine] = value
            elif key.startswith("allreduce_latency_us.") and key.split(".", 1)[1] in links:
                links[key.split(".", 1)[1]] = value
            else:
                from solver.suggest import did_you_mean

                known = sorted(scalars) + [f"engine_factor.{e}" for e in engines] + \
                    [f"allreduce_latency_us.{k}" for k in links]
                raise ValueError(f"unknown calibration constant {key!r}{did_you_mean(key, known)}")
        return replace(base, engine_factors=tuple(engines.items()), allreduce_latency_us=tuple(links.items()),
                       **changes)


# Constants that divide a predicted time (0 would mean an infinitely slow GPU or link).
_DIVISORS = ("bandwidth_efficiency", "compute_efficiency", "fp8_compute_efficiency", "link_efficiency",
             "llama_cpp_bandwidth_gbs", "max_batch")
_WHOLE = ("activation_tokens", "max_batch")
MIN_DIVISOR = 1e-6  # far below any real efficiency; keeps predicted times finite
MAX_CONSTANT = 1e6


def _checked(key: str, value: float, *, divisor: bool, whole: bool) -> float:
    """One override's value, or a ValueError that names the constant."""
    if not 0 <= value <= MAX_CONSTANT:  # False for NaN too
        raise ValueError(f"calibration {key} must be between 0 and {MAX_CONSTANT:g}, got {value:g}")
    if whole and not value.is_integer():
        raise ValueError(f"calibration {key} must be a whole number, got {value:g}")
    minimum = 1 if whole else MIN_DIVISOR
    if divisor and value < minimum:
        why = "" if whole else " (it divides predicted times)"
        raise ValueError(f"calibration {key} must be at least {minimum:g}{why}, got {value:g}")
    return value


def _engine_key(key: str) -> str | None:
    for prefix in ("engine_factor.", "engine_factor_"):
        if key.startswith(prefix):
            name = key[len(prefix):].replace("_", "-").replace("llama-cpp", "llama.cpp").replace("-0-9", "-0.9")
            return name if name in ENGINES else None
    return None


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
    inter_node_gbs: float | None = None  # GB/s per instance over the inter-node fabric
    batch: int | None = None  # pin the batch instead of searching for the best
    kv_precision: str | None = None  # defaults to fp8 for fp8 weights, else 16-bit
    calibration: Calibration = field(default_factory=Calibration)
    # Added with issue 3:
    pipeline_stages: int | None = None  # None: one stage per instance; llama.cpp's layer split sets it
    batching: str = "continuous"  # "continuous" (vLLM, SGLang, TRT-LLM in-flight) | "static" (fixed batch)


@dataclass(frozen=True)
class PerfEstimate:
    feasible: bool
    reason: str = ""  # why infeasible, in words a user reads
    reason_kind: str = ""  # "vram" | "ttft" | "tpot" | "latency" | "unsupported" | ""
    batch: int = 0  # concurrent sequences per replica
    memory_gib_per_gpu: float = 0.0
    weights_gib_per_gpu: float = 0.0
    ttft_ms: float = 0.0
    tpot_ms: float = 0.0
    latency_ms: float = 0.0  # ttft + (output_tokens - 1) x tpot
    requests_per_s: float = 0.0  # per replica
    output_tokens_per_s: float = 0.0  # per replica
    # What stops more throughput: "vram" | "slo" | or, at the engine's batch cap, the step's
    # largest term: "memory_bandwidth" | "compute" | "interconnect" | "overhead".
    binding_limit: str = ""
    error_band: float = 0.0  # relative error of throughput; the true value is expected within +-error_band
    # Added with issue 3:
    ttft_error_band: float = 0.0
    tpot_error_band: float = 0.0
    max_batch_vram: int = 0  # the largest batch whose KV cache fits
    kv_cache_gib_per_gpu: float = 0.0  # at the chosen batch
    step_bound: str = ""  # the largest term of one decode step
    tensor_parallel: int = 0
    pipeline_stages: int = 0
