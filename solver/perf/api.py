"""Inputs and outputs of the performance model (frozen, hashable, solver-agnostic).

The planner caches estimates by `PerfQuery`, so every field here is immutable and
hashable (tuples, not dicts). The default constants of `Calibration` are the fitted
values in `solver/perf/calibration.py`; docs/performance-model.md explains each.
"""

from __future__ import annotations

from dataclasses import field, fields, replace
from typing import Mapping

from solver.catalog.types import GpuType
from solver.dataclass_repr import dataclass
from solver.models.library import ModelArch
from solver.perf import calibration as _fit

# Bytes per stored weight (and per KV-cache element for fp16/bf16/fp8). q4_k_m (llama.cpp
# GGUF) keeps some tensors at 6 bits, so its effective size is fitted from published file
# sizes (see calibration.py). fp4 and int4 carry their block scales (see calibration.py).
BYTES_PER_ELEMENT = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0,
                     "fp4": _fit.FP4_BITS_PER_WEIGHT / 8, "int4": _fit.INT4_BITS_PER_WEIGHT / 8,
                     "q4_k_m": _fit.Q4_K_M_BITS_PER_WEIGHT / 8}
PRECISIONS = tuple(BYTES_PER_ELEMENT)
# KV-cache element types a service may ask for (engine_options.kv_cache_dtype); "auto" is None.
KV_PRECISIONS = ("fp16", "bf16", "fp8")
# Engine ids, with versions where public measurements show a version running slower:
# "tensorrt-llm-0.9" is the engine of the calibration rows (eager kernel launches, kept to
# reproduce them); "vllm-0.5" is vLLM before 0.6's scheduler rewrite (see ENGINE_FACTORS).
ENGINES = ("vllm", "tensorrt-llm", "sglang", "llama.cpp", "tensorrt-llm-0.9", "vllm-0.5")
# Engines of calibration rows only (not offered to users): their constants are nuisance
# parameters that let those rows inform the shared physics.
CALIBRATION_ENGINES = ("lmdeploy-0.1",)
REASON_KINDS = ("vram", "ttft", "tpot", "latency", "unsupported")


@dataclass(frozen=True)
class Calibration:
    """Efficiency constants; see docs/performance-model.md for how they were fitted.

    Override per workload with `Calibration.from_overrides({...})`.
    """

    bandwidth_efficiency: float = _fit.BANDWIDTH_EFFICIENCY  # achieved / datasheet bandwidth, streaming weights
    compute_efficiency: float = _fit.COMPUTE_EFFICIENCY  # achieved / dense fp16 tensor FLOP/s (GEMMs)
    runtime_overhead_gib: float = _fit.RUNTIME_OVERHEAD_GIB  # per GPU, inside the engine's memory budget
    # The engine's memory setting (vLLM gpu_memory_utilization, TensorRT-LLM
    # kv_cache_free_gpu_memory_fraction, SGLang mem_fraction_static) for every engine;
    # None: each engine's own default (ENGINE_POLICIES). A service's engine_options win.
    usable_memory_fraction: float | None = None
    engine_factors: tuple[tuple[str, float], ...] = _fit.ENGINE_FACTORS  # speed relative to the fitted physics
    allreduce_latency_us: tuple[tuple[str, float], ...] = _fit.LINK_LATENCY_US
    error_band: float = _fit.ERROR_BAND_THROUGHPUT  # relative, throughput, all regimes pooled
    # Added with issue 3:
    fp8_compute_efficiency: float = _fit.FP8_COMPUTE_EFFICIENCY  # fp8/int8 GEMMs: fraction of the fp16 efficiency
    layer_overhead_us: float = _fit.LAYER_OVERHEAD_US  # fixed time per layer per pass, eager launches (TRT-LLM 0.9)
    graph_layer_overhead_us: float = _fit.GRAPH_LAYER_OVERHEAD_US  # the same under CUDA graphs (vLLM, SGLang, TRT-LLM)
    link_efficiency: float = _fit.LINK_EFFICIENCY  # achieved / nominal one-direction PCIe or InfiniBand bandwidth
    activation_tokens: int = _fit.ACTIVATION_TOKENS  # per-pass token budget the engine reserves activations for
    max_batch: int | None = None  # scheduler cap on concurrent sequences for every engine; None: engine default
    llama_cpp_layer_overhead_us: float = _fit.LLAMA_CPP_LAYER_OVERHEAD_US  # llama.cpp replaces layer_overhead_us
    llama_cpp_bandwidth_gbs: float = _fit.LLAMA_CPP_BANDWIDTH_GBS  # ceiling of llama.cpp's batch-1 kernels
    ttft_error_band: float = _fit.ERROR_BAND_TTFT  # all regimes pooled
    tpot_error_band: float = _fit.ERROR_BAND_TPOT  # all regimes pooled
    # Added with issue 8:
    kv_bandwidth_efficiency: float = _fit.KV_BANDWIDTH_EFFICIENCY  # achieved / datasheet bandwidth, reading KV cache
    nvlink_efficiency: float = _fit.NVLINK_EFFICIENCY  # achieved / nominal one-direction NVLink bandwidth in all-reduce
    request_overhead_ms: float = _fit.REQUEST_OVERHEAD_MS  # serving engines: per request, before its first token
    # Activations that cross DRAM between kernels (norms, residual adds, rotary, SiLU,
    # quantisation, GEMM inputs and outputs): per token per layer, this many vectors of
    # (hidden + intermediate/TP) 16-bit values.
    activation_passes: float = _fit.ACTIVATION_PASSES
    lmdeploy_layer_overhead_us: float = _fit.LMDEPLOY_LAYER_OVERHEAD_US  # calibration-only engine "lmdeploy-0.1"
    # Bands per "<metric>.<regime>" (regime "memory" or "compute"); a metric without its
    # regime here takes the pooled band above.
    error_bands: tuple[tuple[str, float], ...] = _fit.ERROR_BANDS_BY_REGIME
    # Added with issue 23: vLLM V0's host time per prefill step (preparing and broadcasting
    # its inputs between GPU steps), and what each further tensor-parallel worker adds to it.
    v0_prefill_overhead_us: float = _fit.V0_PREFILL_OVERHEAD_US
    v0_prefill_tp_overhead_us: float = _fit.V0_PREFILL_TP_OVERHEAD_US
    # Added with issue 12:
    fp4_compute_efficiency: float = _fit.FP4_COMPUTE_EFFICIENCY  # fp4 GEMMs: fraction of the fp16 efficiency
    amd_bandwidth_efficiency: float = _fit.AMD_BANDWIDTH_EFFICIENCY  # AMD Instinct (ROCm kernels) in place of the NVIDIA figure
    amd_compute_efficiency: float = _fit.AMD_COMPUTE_EFFICIENCY
    amd_layer_overhead_us: float = _fit.AMD_LAYER_OVERHEAD_US  # per layer per pass, vLLM on ROCm (graphs)
    moe_compute_efficiency: float = _fit.MOE_COMPUTE_EFFICIENCY  # FP4 routed-expert GEMMs: fraction of the dense rate
    token_overhead_us: float = _fit.TOKEN_OVERHEAD_US  # host time per sequence per step (host-scheduled engines)
    # Added with robust percentile caps: how much slower than modelled a real replica runs
    # under load, as (quantile level, factor) pairs (solver/confidence.py reads it).
    under_load_slowdown: tuple[tuple[float, float], ...] = _fit.UNDER_LOAD_SLOWDOWN

    def engine_factor(self, engine: str) -> float:
        return dict(self.engine_factors).get(engine, 1.0)

    def speed_factor(self, engine: str, generation: str) -> float:
        """The speed factor of an engine id: its own where one is set (an override, or an old
        version such as "vllm-0.5"), else its generation's (engine_profile.GENERATIONS), else 1."""
        factors = dict(self.engine_factors)
        return factors.get(engine, factors.get(generation, 1.0))

    def link_latency_us(self, link: str) -> float:
        return dict(self.allreduce_latency_us)[link]

    def band(self, metric: str, regime: str) -> float:
        """Relative error band of `metric` ("throughput" | "ttft" | "tpot") in `regime`."""
        pooled = {"throughput": self.error_band, "ttft": self.ttft_error_band, "tpot": self.tpot_error_band}[metric]
        return dict(self.error_bands).get(f"{metric}.{regime}", pooled)

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, float] | None) -> "Calibration":
        """Defaults with some constants replaced, e.g. from a workload's `solver.calibration`.

        Keys are field names (`bandwidth_efficiency`), `engine_factor.<engine>` or
        `engine_factor_<engine>` (`engine_factor_tensorrt_llm`),
        `allreduce_latency_us.<link>`, and `under_load_slowdown.<level>` (the slowdown
        factor at that quantile level, e.g. `under_load_slowdown.0.9`; a new level is added
        to the table). Overriding a pooled band (`error_band`, `ttft_error_band`,
        `tpot_error_band`) sets that metric's band in every regime. Unknown keys raise
        ValueError naming close ones.
        """
        base = _DEFAULT if cls is Calibration else cls()
        if not overrides:
            return base
        scalars = {f.name for f in fields(cls)
                   if f.name not in ("engine_factors", "allreduce_latency_us", "error_bands", "under_load_slowdown")}
        engines = dict(base.engine_factors)
        links = dict(base.allreduce_latency_us)
        bands = dict(base.error_bands)
        slowdowns = dict(base.under_load_slowdown)
        changes: dict[str, object] = {}
        for key, value in overrides.items():
            engine = _engine_key(key)
            value = _checked(key, float(value), divisor=key in _DIVISORS or engine is not None
                             or key.startswith(_SLOWDOWN_PREFIX), whole=key in _WHOLE)
            if key.startswith(_SLOWDOWN_PREFIX):
                slowdowns[_slowdown_level(key)] = value
                continue
            if key in scalars:
                if key in _WHOLE and (value < 1 or value != int(value)):
                    raise ValueError(f"calibration {key} must be a positive whole number, got {value:g}")
                if key in _FRACTIONS and not 0 < value <= 1:
                    raise ValueError(f"calibration {key} must be a fraction in (0, 1], got {value:g}")
                changes[key] = int(value) if key in _WHOLE else value
                metric = _POOLED_BANDS.get(key)
                if metric:
                    bands = {k: v for k, v in bands.items() if not k.startswith(metric + ".")}
            elif engine is not None:
                engines[engine] = value
            elif key.startswith("allreduce_latency_us.") and key.split(".", 1)[1] in links:
                links[key.split(".", 1)[1]] = value
            else:
                from solver.suggest import did_you_mean

                known = sorted(scalars) + [f"engine_factor.{e}" for e in engines] + \
                    [f"allreduce_latency_us.{k}" for k in links] + [f"{_SLOWDOWN_PREFIX}{q:g}" for q in slowdowns]
                raise ValueError(f"unknown calibration constant {key!r}{did_you_mean(key, known)}")
        table = tuple(sorted(slowdowns.items()))
        if table != base.under_load_slowdown:
            _check_quantile_table(table)
            changes["under_load_slowdown"] = table
        return replace(base, engine_factors=tuple(engines.items()), allreduce_latency_us=tuple(links.items()),
                       error_bands=tuple(bands.items()), **changes)


_SLOWDOWN_PREFIX = "under_load_slowdown."


def _slowdown_level(key: str) -> float:
    """The quantile level of an `under_load_slowdown.<level>` key, or a ValueError naming it."""
    text = key[len(_SLOWDOWN_PREFIX):]
    try:
        level = float(text)
    except ValueError:
        level = float("nan")
    if not 0 < level < 1:  # False for NaN too
        raise ValueError(f"calibration {key}: the level after '{_SLOWDOWN_PREFIX}' must be a quantile level between "
                         f"0 and 1, got {text!r} (e.g. {_SLOWDOWN_PREFIX}0.9)")
    return level


def _check_quantile_table(table: tuple[tuple[float, float], ...]) -> None:
    """A slowdown table is a quantile function: its factors never fall as the level rises."""
    for (q0, f0), (q1, f1) in zip(table, table[1:]):
        if f1 < f0:
            raise ValueError(f"calibration under_load_slowdown: the factor falls from {f0:g} at level {q0:g} to "
                             f"{f1:g} at level {q1:g}; a higher quantile level needs a factor at least as large")


_WHOLE = ("activation_tokens", "max_batch")
_FRACTIONS = ("usable_memory_fraction",)
_POOLED_BANDS = {"error_band": "throughput", "ttft_error_band": "ttft", "tpot_error_band": "tpot"}


# One shared default: caches keyed on a calibration then compare it by identity, not field by field.
_DEFAULT = Calibration()


# Constants that divide a predicted time (0 would mean an infinitely slow GPU or link).
_DIVISORS = ("bandwidth_efficiency", "compute_efficiency", "fp8_compute_efficiency", "link_efficiency",
             "llama_cpp_bandwidth_gbs", "max_batch")
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
            name = key[len(prefix):].replace("_", "-").replace("llama-cpp", "llama.cpp").replace("-0-9", "-0.9") \
                .replace("-0-5", "-0.5").replace("-0-1", "-0.1")
            from solver.perf.engine_profile import GENERATIONS

            name = name.replace("-llm-cpp", "-llm-cpp")
            return name if name in ENGINES + CALIBRATION_ENGINES + GENERATIONS else None
    return None


@dataclass(frozen=True)
class PerfQuery:
    """One question to the performance model: a model on a GPU configuration, with its precision, engine and
    request sizes."""

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
    kv_precision: str | None = None  # KV-cache elements; None ("auto"): fp8 for fp8 weights, else 16-bit
    calibration: Calibration = field(default_factory=Calibration)
    # Added with issue 3:
    pipeline_stages: int | None = None  # None: one stage per instance; llama.cpp's layer split sets it
    batching: str = "continuous"  # "continuous" (vLLM, SGLang, TRT-LLM in-flight) | "static" (fixed batch)
    # Added with issue 8 (a service's engine_options; None: the engine's default):
    max_batch: int | None = None  # the engine's cap on concurrent sequences (vLLM max_num_seqs, ...)
    kv_cache_memory_fraction: float | None = None  # the engine's memory fraction, in the engine's own meaning
    # Check SLOs against the pessimistic end of the error band of the estimate's regime
    # (a workload's size_with_error_band); the estimate itself stays the central value.
    size_with_error_band: bool = False
    # Added with issue 23 (a service's engine_options; None: the engine version's default):
    max_num_batched_tokens: int | None = None  # tokens per engine step (the chunked-prefill budget)
    scheduler: str | None = None  # "chunked_mixed" | "prefill_first" (solver.perf.queueing.physics.SCHEDULERS)
    cuda_graph_max_batch: int | None = None  # the largest decode batch replayed as a CUDA graph
    max_model_len: int | None = None  # the context length the engine serves (vLLM --max-model-len); None: the model's
    # How the engine admits a sequence against its KV cache: "whole_sequence" (blocks for prompt
    # and output reserved up front: TensorRT-LLM's GUARANTEED_NO_EVICT) or "paged_on_demand"
    # (blocks as tokens arrive, preempting on overflow: vLLM, TensorRT-LLM's MAX_UTILIZATION);
    # None: the engine version's default (solver.perf.engines.KV_ADMISSIONS).
    kv_admission: str | None = None
    # Decode steps per scheduling decision of a prefill-first engine (vLLM V0's
    # num_scheduler_steps); None: 1, every engine's default (solver.perf.queueing.physics.Replica).
    multi_step: int | None = None


@dataclass(frozen=True)
class PerfEstimate:
    """The performance model's answer to a PerfQuery: feasible or why not, and its figures."""

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
