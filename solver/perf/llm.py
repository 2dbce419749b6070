"""Calibrated roofline model of LLM serving: memory, decode step, prefill, best batch.

One replica = TP GPUs per pipeline stage x PP stages. Per GPU of a stage, one forward
pass that carries `n` tokens (decode tokens of B sequences plus prefill tokens) takes

    t_gemm = max(weight bytes read / BW_eff,  2 x body params x n / FLOPS_eff)     (weights are
             read once per pass; GEMMs are memory- or compute-bound, never both)
    t_attn = max(KV bytes read / BW_kv, decode attention FLOPs / FLOPS_eff)
             + prefill attention FLOPs / FLOPS_eff                               (attention runs as
             separate kernels after the GEMMs, so it adds rather than overlaps)
    t_comm = 2 x layers x (k x n x hidden x 2 B / link_eff + latency)           (two all-reduces
             per layer; k = 2(TP-1)/TP around a ring, 1 with in-switch reduction (Hopper+
             NVSwitch); latency per call on NVSwitch, per ring step on PCIe/mesh)
    t_over = layers x layer_overhead                                             (kernel launches,
             norms, sampling: fixed per layer, so it does not shrink with TP)
             + sequences sampled x token_overhead                                (host-scheduled
             engines: scheduling, sampling, output processing per sequence per step)
    t_pass = (t_gemm + t_attn + t_comm + t_over) / engine_factor

with BW_eff = datasheet bandwidth x bandwidth_efficiency (weights stream in long
sequential reads), BW_kv = datasheet bandwidth x kv_bandwidth_efficiency (paged KV blocks
are gathered per sequence and head, in short reads) and FLOPS_eff = dense tensor FLOP/s x
compute_efficiency (x fp8_compute_efficiency for fp8/int8 GEMMs).

Continuous batching (vLLM, SGLang, TRT-LLM in-flight): with B sequences of P prompt and O
output tokens in flight, each step decodes B tokens and carries, on average, B x P / O
prompt tokens of the sequences that start meanwhile (chunked prefill), so

    TPOT = t_pass(decode B at context P + O/2, prefill B x P / O)
    TTFT = half a step of waiting + t_pass(decode B - 1, prefill P) + the serving loop's
           per-request time (request_overhead_ms: scheduling, tokenising, streaming back)
    latency = TTFT + (O - 1) x TPOT;   requests/s = B / latency (Little's law)

Static batching (the TensorRT-LLM 0.9 benchmark rows): one prefill pass of B x P tokens,
then O - 1 decode steps. Pipeline stages (replicas spanning instances, or llama.cpp's
layer split) run TP-group passes over L/PP layers each, with B split into up to PP
micro-batches; a token crosses every stage, so TPOT = PP x stage pass + (PP-1) transfers.

Memory follows the engine's policy (see `EnginePolicy`): vLLM takes a fraction of the
GPU's memory for everything, TensorRT-LLM gives the KV cache a fraction of what weights
and activations leave, SGLang keeps weights and KV pool in a static fraction. Activations
are reserved for the engine's per-pass token budget and the logits of its batch cap
(continuous batching), or for the whole batch's prompts in one pass (static batching).

Throughput rises and TTFT/TPOT grow with B, so the best batch is the largest one that
fits in memory, the engine's batch cap and the SLOs: found by bisection (~10 passes).

One implementation serves one query and many: every function from the memory budget on
takes plain numbers (one query, at Python speed, numpy not even imported) or numpy arrays
of many queries (`estimate_many`: the planner's thousands of candidate configurations,
evaluated in lockstep - the bisection over the batch advances every query one step per
pass over the arrays). A query gives the same bits alone or in a batch.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, fields, is_dataclass
from functools import cached_property
from operator import attrgetter
from typing import Sequence

from solver.frozen import maker, row_maker
from solver.perf import calibration as _fit
from solver.perf.api import BYTES_PER_ELEMENT, KV_PRECISIONS, PerfEstimate, PerfQuery
from solver.perf.engine_profile import EngineProfile, check_engine, engine_profile

GIB = 1024**3
ACTIVATION_BYTES = 2.0  # activations and all-reduce payloads are 16-bit
LOGIT_BYTES = 4.0  # fp32 logits of each sequence sampled in a pass
PCIE_GBS_PER_DIRECTION = {3: 15.75, 4: 31.5, 5: 63.0, 6: 126.0}  # x16 link
# Weights stay 16-bit for the vocabulary matrices (and a vision encoder) under quantised
# serving: vLLM's quantisation configs and NVIDIA ModelOpt checkpoints quantise the linear
# layers of the transformer blocks and leave the embedding and lm_head unquantised
# (ModelOpt hf_quant_config "exclude_modules": ["lm_head"]; vLLM applies quantised linear
# methods to decoder-layer linears, lm_head is a plain ParallelLMHead unless asked).
VOCAB_KEPT_16BIT = ("fp8", "int8", "fp4", "int4")
# The tensor-core rate each weight precision's GEMMs run at: int4 (AWQ/GPTQ) and q4_k_m
# are weight-only - dequantised and multiplied at 16 bits.
COMPUTE_PRECISION = {"fp16": "fp16", "bf16": "bf16", "fp8": "fp8", "int8": "int8", "fp4": "fp4", "int4": "fp16",
                     "q4_k_m": "fp16"}
# A pass's largest term (PerfEstimate.step_bound); _Pass.bound is an index into this.
BOUNDS = ("memory_bandwidth", "compute", "interconnect", "overhead")
_VRAM, _SLO = len(BOUNDS), len(BOUNDS) + 1  # binding limits beyond the bounds
_LIMITS = BOUNDS + ("vram", "slo")
# Reason kinds of an estimate (index 0: none); SLO kinds in the order they are checked.
_KINDS = ("", "ttft", "tpot", "latency", "vram")
_KIND_VRAM = 4
_SLO_LABELS = ("", "TTFT", "TPOT", "latency")


# ---------------------------------------------------------------- numbers or arrays
# The few operations that differ between plain numbers and numpy arrays. numpy is imported
# only when arrays arrive (the CLI's one-service solves never pay for it).
_PLAIN = (float, int, bool)


def _np():
    import numpy

    return numpy


def _is_scalar(x) -> bool:
    return type(x) in _PLAIN or getattr(x, "ndim", 0) == 0


def _where(cond, a, b):
    if cond is True:  # comparisons of numbers give the bool singletons: the common case first
        return a
    if cond is False:
        return b
    if _is_scalar(cond):
        return a if cond else b
    return _np().where(cond, a, b)


def _maximum(a, b):
    if (type(a) in _PLAIN or _is_scalar(a)) and (type(b) in _PLAIN or _is_scalar(b)):
        return b if b > a else a  # as max(a, b)
    return _np().maximum(a, b)


def _minimum(a, b):
    if (type(a) in _PLAIN or _is_scalar(a)) and (type(b) in _PLAIN or _is_scalar(b)):
        return b if b < a else a  # as min(a, b)
    return _np().minimum(a, b)


def _and(a, b):
    if (a is True or a is False or _is_scalar(a)) and (b is True or b is False or _is_scalar(b)):
        return bool(a) and bool(b)
    return _np().logical_and(a, b)


def _or(a, b):
    if (a is True or a is False or _is_scalar(a)) and (b is True or b is False or _is_scalar(b)):
        return bool(a) or bool(b)
    return _np().logical_or(a, b)


def _not(a):
    if a is True or a is False or _is_scalar(a):
        return not a
    return _np().logical_not(a)


def _any(a) -> bool:
    if a is True or a is False:
        return a
    return bool(a) if _is_scalar(a) else bool(a.any())


def _trunc(x):
    """int(x): toward zero (whole numbers stay exact)."""
    if _is_scalar(x):
        return int(x)
    return _np().trunc(x).astype(_np().int64)


def _ceil(x):
    return math.ceil(x) if _is_scalar(x) else _np().ceil(x)


def _power(base, exponent):
    """base ** exponent; arrays element by element through Python's pow, because numpy's
    vectorised pow may differ in the last bit and a query must give the same bits alone
    or in a batch (it is only needed for MoE rows)."""
    if _is_scalar(base) and _is_scalar(exponent):
        return base ** exponent
    np = _np()
    b, e = np.broadcast_arrays(np.asarray(base, dtype=float), np.asarray(exponent, dtype=float))
    return np.array([x ** y for x, y in zip(b.ravel().tolist(), e.ravel().tolist())], dtype=float).reshape(b.shape)


def _first_max(values: Sequence):
    """Index of the largest value (the first of equals), as max(..., key=...) picks it."""
    for v in values:
        if not _is_scalar(v):
            np = _np()
            return np.argmax(np.stack(np.broadcast_arrays(*values)), axis=0)
    best, index = values[0], 0
    for i in range(1, len(values)):
        if values[i] > best:
            best, index = values[i], i
    return index


class _Rows:
    """Some rows of array-valued inputs, so that a lockstep search works on the queries that
    still need it. `_rows(mask)`: numbers (or every row) need no selection."""

    def __init__(self, idx):
        self.idx = idx

    def take(self, x):
        if self.idx is None:
            return x
        names = _field_names(type(x))
        if names:
            return type(x)(**{name: self.take(getattr(x, name)) for name in names})
        return x if _is_scalar(x) else x[self.idx]

    def put(self, full, part):
        """`full` with these rows replaced by `part`."""
        if self.idx is None:
            return part
        names = _field_names(type(full))
        if names:
            return type(full)(**{name: self.put(getattr(full, name), getattr(part, name)) for name in names})
        out = full.copy()
        out[self.idx] = part
        return out

    def __len__(self) -> int:
        return len(self.idx)


_EVERY = _Rows(None)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names (empty for anything else), remembered per type: the lockstep
    searches take and put rows of their inputs dozens of times per call, field by field,
    and `fields()` walks the class each time."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls)) if is_dataclass(cls) else ()
    return names


def _rows(mask) -> _Rows:
    """The rows where `mask` holds (numbers: the one query; only called where it holds)."""
    if type(mask) is bool or _is_scalar(mask) or mask.all():
        return _EVERY
    return _Rows(mask.nonzero()[0])


# ---------------------------------------------------------------- engine policies and memory
@dataclass(frozen=True)
class EnginePolicy:
    """How the engine sizes its KV cache and caps its batch (calibration.ENGINE_POLICIES)."""

    kv_policy: str  # "total" | "free" | "static"
    memory_fraction: float  # in the policy's own meaning
    max_batch: int
    token_budget: int  # tokens per forward pass the engine reserves activations for


def profile(q: PerfQuery) -> EngineProfile:
    """The query's engine at its version: defaults, scheduler, KV admission, host costs
    (solver/perf/engine_profile.py)."""
    tp, _ = parallelism(q)
    return engine_profile(q.engine, q.gpu.memory_gib, q.gpu.name, tp, q.max_model_len or q.model.max_context_tokens,
                          q.calibration.activation_tokens)


def engine_policy(q: PerfQuery) -> EnginePolicy:
    """The engine version's defaults, replaced by the calibration's overrides, replaced by
    the service's engine_options."""
    cal = q.calibration
    p = profile(q)
    kind, fraction, cap = p.memory_policy, p.memory_fraction, p.max_num_seqs
    if fraction is None:  # SGLang (calibration engines): mem_fraction_static shrinks as TP grows
        tp, _ = parallelism(q)
        fraction = next(f for least, f in _fit.SGLANG_MEM_FRACTION_BY_TP if tp >= least)
    fraction = q.kv_cache_memory_fraction or cal.usable_memory_fraction or fraction
    cap = q.max_batch or cal.max_batch or cap
    return EnginePolicy(kind, fraction, cap, max(q.max_num_batched_tokens or p.token_budget, 1))

@dataclass(frozen=True)
class MemoryBudget:
    """Per GPU, GiB. Activations, and so the KV room, depend on the batch. Fields and
    arguments are numbers (one query) or arrays (many; `static_prompt_tokens` is then -1
    for continuous batching)."""

    memory_gib: float  # the GPU's memory (the engine's fraction is applied below)
    policy: EnginePolicy
    weights_gib: float
    overhead_gib: float
    kv_gib_per_sequence: float  # at prompt + output tokens
    activation_gib_per_token: float  # one token of one forward pass
    logits_gib_per_sequence: float
    static_prompt_tokens: int | None  # static batching: every prompt of the batch in one pass

    def activation_gib(self, batch):
        """Continuous batching: the engine reserves a pass of its token budget and the logits
        of its batch cap (vLLM profiles exactly that); a batch above either needs more.
        Static batching: the batch's prompts go through in one pass, B x P tokens."""
        continuous = (_maximum(self.policy.token_budget, batch) * self.activation_gib_per_token
                      + _maximum(self.policy.max_batch, batch) * self.logits_gib_per_sequence)
        prompt = self.static_prompt_tokens
        if prompt is None:
            return continuous
        static = batch * _maximum(prompt, 1) * self.activation_gib_per_token + batch * self.logits_gib_per_sequence
        return _where(prompt >= 0, static, continuous)

    def kv_capacity_gib(self, batch=1):
        f, a, kind = self.policy.memory_fraction, self.activation_gib(batch), self.policy.kv_policy
        free = f * (self.memory_gib - self.weights_gib - self.overhead_gib - a)  # TensorRT-LLM: a fraction of what is left
        spill = _maximum(a + self.overhead_gib - (1 - f) * self.memory_gib, 0.0)
        static = f * self.memory_gib - self.weights_gib - spill  # SGLang: activations live outside the static pool
        total = f * self.memory_gib - self.weights_gib - self.overhead_gib - a  # vLLM
        return _where(kind == "free", free, _where(kind == "static", static, total))

    def fits(self, batch):
        return batch * self.kv_gib_per_sequence <= self.kv_capacity_gib(batch) + 1e-12

    @cached_property
    def max_batch(self):
        """The largest batch whose KV cache fits beside the activations it needs (room only
        shrinks as the batch grows): the whole-room guess if it fits, else bisection."""
        kv = self.kv_gib_per_sequence
        sized = kv > 0
        fits_one = self.fits(1)
        guess = _trunc(self.kv_capacity_gib(1) / _where(sized, kv, 1.0))
        guess_fits = self.fits(guess)
        lo = 1
        hi = _where(_and(_and(sized, fits_one), _not(guess_fits)), guess, 1)  # lo fits; hi does not
        while True:
            active = hi - lo > 1
            if not _any(active):
                break
            rows = _rows(active)
            lo_, hi_ = rows.take(lo), rows.take(hi)
            mid = (lo_ + hi_) // 2
            ok = rows.take(self).fits(mid)
            lo = rows.put(lo + 0 * hi, _where(ok, mid, lo_))
            hi = rows.put(hi, _where(ok, hi_, mid))
        return _where(_not(sized), 10**9, _where(_not(fits_one), 0, _where(guess_fits, guess, lo)))

    def used_gib(self, batch):
        return self.weights_gib + self.activation_gib(batch) + self.overhead_gib + batch * self.kv_gib_per_sequence

@dataclass(frozen=True)
class _Setup:
    """Everything about a query that does not depend on the batch (per GPU of one stage)."""

    tp: int
    pp: int
    layers: float  # per stage
    dense_weight_bytes: float  # read every pass
    expert_weight_bytes: float  # MoE experts, read where tokens are routed
    experts: int
    active_experts: int
    body_flops_per_token: float
    expert_flops_per_token: float  # the routed experts' share of body_flops_per_token
    moe_compute_efficiency: float  # routed experts' grouped GEMMs: fraction of the dense GEMM rate
    lm_head_flops_per_token: float  # in units of the GEMM rate: scaled when the head stays 16-bit
    kv_layer_bytes: float  # KV bytes per token per layer (per GPU)
    full_layers: float  # per stage, attending to the whole context
    windowed_layers: float  # per stage, attending to at most `window` tokens
    window: float
    attn_decode_flops: float  # per context token per layer (decode)
    attn_prefill_flops: float  # per causal pair per layer (prefill)
    hidden: int
    bw: float  # bytes/s, streaming weights
    kv_bw: float  # bytes/s, reading the KV cache
    activation_bytes_per_token: float  # per layer: activations crossing DRAM between kernels
    flops: float  # FLOP/s for GEMMs at the weight precision
    attn_flops: float  # FLOP/s for attention (16-bit)
    link_bw: float  # bytes/s, one direction, achieved
    allreduce_traffic: float  # bytes each GPU moves per byte all-reduced
    allreduce_latency_s: float
    stage_link_bw: float
    stage_latency_s: float
    layer_overhead_s: float  # decode steps (CUDA graphs replayed where the engine has them)
    prefill_layer_overhead_s: float  # passes that prefill a prompt (launched eagerly)
    engine_factor: float
    chunk_tokens: int
    request_overhead_s: float
    token_overhead_s: float  # host time per sequence sampled in a step (host-scheduled serving engines)
    graph_max_batch: float  # decode steps of more sequences run eagerly (beyond the engine's CUDA graphs)
    prefill_first: bool  # prompts in prefill-only steps, running sequences paused (engine_profile.scheduler)
    step_overhead_s: float  # host time per eager (prefill) step outside the GPU's work (vLLM V0)

@dataclass(frozen=True)
class _Pass:
    seconds: float
    bound: int  # index into BOUNDS of the largest term
    memory_s: float  # weights and KV cache read
    compute_s: float  # GEMM and attention FLOPs

    @property
    def memory_bound(self):
        return self.memory_s >= self.compute_s

    @property
    def regime(self) -> str:
        return _regime(self.memory_bound)

def engine_settings(q: PerfQuery) -> dict:
    """The engine's settings in effect for a query, by the workload's engine_options names:
    the version's defaults with the service's options applied (what `estimate` reports and
    a plan's assignment carries, so an export can start the engine exactly so)."""
    policy = engine_policy(q)
    prof = profile(q)
    return {"max_batch": policy.max_batch, "kv_cache_memory_fraction": policy.memory_fraction,
            "kv_cache_dtype": kv_precision(q), "max_num_batched_tokens": policy.token_budget,
            "scheduler": q.scheduler or prof.scheduler, "kv_admission": q.kv_admission or prof.kv_admission,
            "multi_step": q.multi_step or 1}


def kv_precision(q: PerfQuery) -> str:
    """The KV cache's element type: the service's engine_options.kv_cache_dtype, else the
    engine's "auto": 16-bit for vLLM and SGLang (the model's type: the FP8 checkpoints they
    serve do not declare a quantised cache), fp8 beside fp8/fp4 weights for TensorRT-LLM
    (its ModelOpt checkpoints declare one) - docs/engines.md."""
    if q.kv_precision:
        return q.kv_precision
    return "fp8" if q.precision in ("fp8", "fp4") and profile(q).kv_auto_fp8 else "fp16"


def parallelism(q: PerfQuery) -> tuple[int, int]:
    """(tensor parallel, pipeline stages)."""
    pp = q.pipeline_stages or max(q.instances_per_replica, 1)
    return max(q.gpus_per_replica // pp, 1), pp


def weight_bytes_total(q: PerfQuery) -> float:
    m = q.model
    wb = BYTES_PER_ELEMENT[q.precision]
    kept = (m.vocab_params_b + m.vision_params_b) * 1e9  # not quantised by the engines
    kept_bytes = kept * (2.0 if q.precision in VOCAB_KEPT_16BIT else wb)
    return (m.params_b * 1e9 - kept) * wb + kept_bytes


def kv_gib_per_sequence(q: PerfQuery, tokens):
    """KV cache of one sequence of `tokens` tokens on one GPU: sliding-window layers keep at
    most the window; MLA keeps one latent per layer on every TP rank."""
    return _kv_gib(*_kv_factors(q), tokens)


def _kv_factors(q: PerfQuery) -> tuple:
    """(KV bytes per token and layer per GPU, full-attention layers, windowed layers, window, stages)."""
    m = q.model
    tp, pp = parallelism(q)
    per_layer = m.kv_elements_per_token_layer(tp) * BYTES_PER_ELEMENT[kv_precision(q)]
    return per_layer, m.full_attention_layers, m.windowed_layers, m.sliding_window or 0, pp


def _kv_gib(per_layer, full_layers, windowed_layers, window, pp, tokens):
    """As `ModelArch.kv_tokens`, for numbers or arrays: windowed layers keep at most the window."""
    kv_tokens = full_layers * tokens + windowed_layers * _where(window > 0, _minimum(tokens, window), tokens)
    return per_layer * kv_tokens / pp / GIB


def _intermediate_per_gpu(q: PerfQuery) -> float:
    """MLP width one token passes through on one GPU (the routed experts' for MoE)."""
    return q.model.active_mlp_width / parallelism(q)[0]


def memory_budget(q: PerfQuery) -> MemoryBudget:
    m, cal = q.model, q.calibration
    tp, pp = parallelism(q)
    intermediate = _intermediate_per_gpu(q)
    return MemoryBudget(
        memory_gib=q.usable_memory_gib,
        policy=engine_policy(q),
        weights_gib=weight_bytes_total(q) / (tp * pp) / GIB,
        overhead_gib=cal.runtime_overhead_gib,
        kv_gib_per_sequence=kv_gib_per_sequence(q, q.prompt_tokens + q.output_tokens),
        activation_gib_per_token=(4 * m.hidden_size + 2 * intermediate) * ACTIVATION_BYTES / GIB,
        logits_gib_per_sequence=m.vocab_size * LOGIT_BYTES / GIB,
        static_prompt_tokens=q.prompt_tokens if q.batching == "static" else None,
    )


# ---------------------------------------------------------------- links
def _in_switch_reduction(q: PerfQuery) -> bool:
    return q.gpu.architecture.startswith(_fit.IN_SWITCH_REDUCTION_ARCHITECTURES)


def _tp_link(q: PerfQuery, tp: int) -> tuple[float, float, float]:
    """(achieved bytes/s one direction, bytes moved per byte all-reduced, latency s per all-reduce)."""
    cal, gpu = q.calibration, q.gpu
    if tp <= 1:
        return 1.0, 0.0, 0.0
    ring = 2 * (tp - 1) / tp
    domain = gpu.nvlink_domain_gpus
    if q.interconnect == "nvlink" and gpu.nvlink_gbs and (domain is None or tp <= domain):
        bw = gpu.nvlink_gbs / 2 * 1e9
        traffic = ring
        if gpu.vendor == "AMD":
            # xGMI joins the platform's GPUs pairwise, all to all: a TP group of t GPUs uses
            # t - 1 of each GPU's domain - 1 links (nvlink_gbs is the aggregate over all of them).
            bw *= (tp - 1) / max((domain or 8) - 1, 1)
            latency_us = cal.link_latency_us("xgmi")
        elif not gpu.architecture.startswith(("Volta", "Pascal")):
            latency_us = cal.link_latency_us("nvswitch")
            if _in_switch_reduction(q):
                traffic = min(ring, 1.0)
        else:  # V100 boards: NVLink mesh, no NVSwitch
            latency_us = cal.link_latency_us("nvlink") * 2 * (tp - 1)
        return bw * cal.nvlink_efficiency, traffic, latency_us * 1e-6
    bw = PCIE_GBS_PER_DIRECTION.get(gpu.pcie_gen or 4, 31.5) * 1e9
    latency_us = cal.link_latency_us("pcie") * 2 * (tp - 1)
    return bw * cal.link_efficiency, ring, latency_us * 1e-6


def _stage_link(q: PerfQuery, pp: int) -> tuple[float, float]:
    """(bytes/s, latency s) of one hand-off between pipeline stages."""
    cal = q.calibration
    if pp <= 1:
        return 1.0, 0.0
    if q.instances_per_replica > 1:
        gbs = q.inter_node_gbs or 25.0  # 200 Gb/s, a common single-NIC InfiniBand port
        return gbs * 1e9 * cal.link_efficiency, cal.link_latency_us("infiniband") * 1e-6
    gen = q.gpu.pcie_gen or 4
    return PCIE_GBS_PER_DIRECTION.get(gen, 31.5) * 1e9 * cal.link_efficiency, cal.link_latency_us("pcie") * 1e-6


def links_read(q: PerfQuery) -> tuple[bool, bool]:
    """Whether an estimate of `q` reads its interconnect (`_tp_link`: only with tensor
    parallelism, tp > 1) and its inter-node bandwidth (`_stage_link`: only for pipeline
    stages on several instances). Queries that differ only in a field that is not read get
    the same estimate, bit for bit (a 1-GPU replica on a 1-GPU instance and on an 8-GPU
    NVLink one): the candidate builder's estimate cache asks one of them for all."""
    tp, pp = parallelism(q)
    return tp > 1, pp > 1 and q.instances_per_replica > 1


def _efficiencies(q: PerfQuery) -> tuple[float, float]:
    """(achieved fraction of datasheet bandwidth, of dense FLOP/s): AMD Instinct GPUs run
    ROCm kernels with their own fitted fractions (docs/performance-model.md, "AMD")."""
    cal = q.calibration
    if q.gpu.vendor == "AMD":
        return cal.amd_bandwidth_efficiency, cal.amd_compute_efficiency
    return cal.bandwidth_efficiency, cal.compute_efficiency


def _bandwidth(q: PerfQuery, kv: bool = False) -> float:
    """Achieved memory bandwidth, bytes/s, streaming weights or (kv) gathering KV-cache pages;
    KV reads keep the NVIDIA ratio of the two on AMD too. llama.cpp's batch-1 kernels keep too
    few loads in flight to saturate HBM: their achieved bandwidth levels off near a fitted ceiling."""
    cal = q.calibration
    efficiency = _efficiencies(q)[0]
    if kv:
        efficiency *= cal.kv_bandwidth_efficiency / cal.bandwidth_efficiency
    gbs = q.gpu.memory_bandwidth_gbs * efficiency
    if q.engine == "llama.cpp":
        gbs = min(gbs, q.calibration.llama_cpp_bandwidth_gbs)
    return gbs * 1e9


def _layer_overhead_us(q: PerfQuery) -> tuple[float, float]:
    """(decode step, prompt prefill) fixed time per layer per pass, us.

    Engines capture CUDA graphs for decode steps, whose shapes repeat; passes that prefill
    a prompt have a new shape each time and launch their kernels one by one (vLLM V0,
    SGLang extend batches, TensorRT-LLM context phase). llama.cpp and LMDeploy 0.1 have
    their own constants (calibration only)."""
    cal = q.calibration
    if q.engine == "llama.cpp":
        return cal.llama_cpp_layer_overhead_us, cal.llama_cpp_layer_overhead_us
    if q.engine == "lmdeploy-0.1":
        return cal.lmdeploy_layer_overhead_us, cal.lmdeploy_layer_overhead_us
    if q.gpu.vendor == "AMD":  # vLLM on ROCm (HIP graphs); prefill adds the eager launches as on NVIDIA
        eager = cal.amd_layer_overhead_us + max(cal.layer_overhead_us - cal.graph_layer_overhead_us, 0.0)
        return cal.amd_layer_overhead_us, eager
    return cal.graph_layer_overhead_us, cal.layer_overhead_us


_new_setup = maker(_Setup)  # _Setup(**fields), made faster (one per query group)


def _setup(q: PerfQuery) -> _Setup:
    m, cal, gpu = q.model, q.calibration, q.gpu
    prof = profile(q)
    tp, pp = parallelism(q)
    per_gpu = 1.0 / (tp * pp)
    total_bytes = weight_bytes_total(q)
    expert_bytes = m.expert_params_b * 1e9 * BYTES_PER_ELEMENT[q.precision]
    kvb = BYTES_PER_ELEMENT[kv_precision(q)]
    compute_eff = _efficiencies(q)[1]
    low_precision_peak = gpu.tflops(COMPUTE_PRECISION[q.precision]) if q.precision in ("fp8", "int8", "fp4") else None
    if low_precision_peak and q.precision == "fp4":  # FP4 GEMMs on FP4 tensor cores (Blackwell)
        flops = low_precision_peak * 1e12 * compute_eff * cal.fp4_compute_efficiency
    elif low_precision_peak:  # 8-bit GEMMs on 8-bit tensor cores
        flops = low_precision_peak * 1e12 * compute_eff * cal.fp8_compute_efficiency
    else:  # 16-bit GEMMs (weight-only formats dequantise to 16 bits)
        flops = (gpu.tflops(COMPUTE_PRECISION[q.precision]) or gpu.tflops("fp16")) * 1e12 * compute_eff
    qk_dec, v_dec = m.attention_dims(decode=True)
    qk_pre, v_pre = m.attention_dims(decode=False)
    heads_per_gpu = m.attention_heads / tp
    link_bw, traffic, ar_latency = _tp_link(q, tp)
    stage_bw, stage_latency = _stage_link(q, pp)
    return _new_setup(
        tp=tp, pp=pp, layers=m.layers / pp,
        dense_weight_bytes=(total_bytes - expert_bytes) * per_gpu,
        expert_weight_bytes=expert_bytes * per_gpu,
        experts=m.experts, active_experts=m.active_experts,
        body_flops_per_token=2 * m.body_params_b * 1e9 * per_gpu,
        expert_flops_per_token=2 * m.expert_params_b * (m.active_experts / m.experts) * 1e9 * per_gpu,
        # Measured only on FP4 expert GEMMs (every MoE row of the calibration set is NVFP4/MXFP4
        # on Blackwell, where each expert's activations are also quantised to FP4 with block
        # scales); 16- and 8-bit routed experts keep the dense rate until measurements say otherwise.
        moe_compute_efficiency=cal.moe_compute_efficiency if q.precision == "fp4" else 1.0,
        # The output head stays 16-bit under quantised serving, so it multiplies at the 16-bit
        # rate: its FLOPs are counted in units of the quantised GEMM rate.
        lm_head_flops_per_token=2 * m.lm_head_params_b * 1e9 * per_gpu * (
            flops / (gpu.tflops("fp16") * 1e12 * compute_eff) if q.precision in VOCAB_KEPT_16BIT else 1.0),
        kv_layer_bytes=m.kv_elements_per_token_layer(tp) * kvb,
        full_layers=m.full_attention_layers / pp,
        windowed_layers=m.windowed_layers / pp,
        window=float(m.sliding_window or 0),
        attn_decode_flops=2 * (qk_dec + v_dec) * heads_per_gpu,
        attn_prefill_flops=2 * (qk_pre + v_pre) * heads_per_gpu,
        hidden=m.hidden_size,
        bw=_bandwidth(q),
        kv_bw=_bandwidth(q, kv=True),
        activation_bytes_per_token=cal.activation_passes * (m.hidden_size + _intermediate_per_gpu(q)) * ACTIVATION_BYTES,
        flops=flops,
        attn_flops=gpu.tflops("fp16") * 1e12 * compute_eff,
        link_bw=link_bw, allreduce_traffic=traffic, allreduce_latency_s=ar_latency,
        stage_link_bw=stage_bw, stage_latency_s=stage_latency,
        layer_overhead_s=_layer_overhead_us(q)[0] * 1e-6,
        prefill_layer_overhead_s=_layer_overhead_us(q)[1] * 1e-6,
        engine_factor=cal.speed_factor(q.engine, prof.generation),
        chunk_tokens=engine_policy(q).token_budget,
        request_overhead_s=cal.request_overhead_ms * 1e-3 if prof.serving else 0.0,
        token_overhead_s=cal.token_overhead_us * 1e-6 if prof.host_scheduled else 0.0,
        graph_max_batch=float(q.cuda_graph_max_batch if q.cuda_graph_max_batch is not None else prof.graph_max_batch),
        # vLLM V0 prepares a prefill step's inputs on the host between GPU steps and
        # broadcasts them to each further tensor-parallel worker (decode steps replay graphs).
        step_overhead_s=(cal.v0_prefill_overhead_us + cal.v0_prefill_tp_overhead_us * (tp - 1)) * 1e-6
        if prof.generation == "vllm-v0" else 0.0,
        prefill_first=(q.scheduler or prof.scheduler) == "prefill_first",
    )

# ---------------------------------------------------------------- one pass, one batch
def _pass(s: _Setup, n_dec, ctx, n_pre, prompt, eager=False, host=True) -> _Pass:
    """One forward pass of one pipeline stage (per GPU of its TP group); `eager`: a pass
    that prefills a prompt for its first token (no CUDA graph); `host`: count the engine's
    per-sequence host time here (a pipeline counts it once per step instead)."""
    tokens = n_dec + n_pre
    moe = s.experts > 1
    weight_bytes = s.dense_weight_bytes + s.expert_weight_bytes * _touched(s, moe, tokens)
    sampled = n_dec + _prompts(n_pre, prompt)
    gemm_flops = s.body_flops_per_token * tokens + s.lm_head_flops_per_token * sampled
    t_weights = weight_bytes / s.bw
    t_act = tokens * s.layers * s.activation_bytes_per_token / s.bw  # elementwise kernels: they add
    t_gemm_flops = gemm_flops / s.flops
    # Routed experts multiply in grouped GEMMs (plus routing, token permutation and
    # activation quantisation per expert), which the public FP4 MoE rows show running at
    # a fraction of the dense GEMM rate; fitted (docs/performance-model.md, "MoE").
    grouped = _and(moe, s.expert_flops_per_token != 0)
    t_gemm_flops = _where(grouped, t_gemm_flops + s.expert_flops_per_token * tokens * (
        1.0 / _where(grouped, s.moe_compute_efficiency, 1.0) - 1.0) / s.flops, t_gemm_flops)
    kv_tokens = s.full_layers * ctx + s.windowed_layers * _minimum(ctx, s.window)  # token-layers of KV read
    t_kv = n_dec * kv_tokens * s.kv_layer_bytes / s.kv_bw
    t_attn_flops = s.attn_decode_flops * n_dec * kv_tokens / s.attn_flops
    pairs = s.full_layers * prompt / 2 + s.windowed_layers * _window_pairs(prompt, s.window)  # causal pairs per token
    t_prefill_attn = s.attn_prefill_flops * n_pre * pairs / s.attn_flops
    t_comm = _where(s.tp > 1, 2 * s.layers * (s.allreduce_traffic * tokens * s.hidden * ACTIVATION_BYTES / s.link_bw
                                              + s.allreduce_latency_s), 0.0)
    # Prefill passes and decode steps beyond the largest captured CUDA graph launch eagerly.
    t_over = s.layers * _where(_or(eager, n_dec > s.graph_max_batch), s.prefill_layer_overhead_s,
                               s.layer_overhead_s)
    # The engine's host work per sequence (scheduling, sampling, output processing), and per
    # eager (prefill) step where the engine prepares and broadcasts its inputs (vLLM V0).
    t_over = _where(host, t_over + s.token_overhead_s * sampled + _where(eager, s.step_overhead_s, 0.0), t_over)
    terms = (  # in BOUNDS order
        _where(t_weights >= t_gemm_flops, t_weights, 0.0) + _where(t_kv >= t_attn_flops, t_kv, 0.0) + t_act,
        _where(t_gemm_flops > t_weights, t_gemm_flops, 0.0) + _where(t_attn_flops > t_kv, t_attn_flops, 0.0)
        + t_prefill_attn,
        t_comm,
        t_over,
    )
    total = (terms[0] + terms[1] + terms[2] + terms[3]) / s.engine_factor
    return _Pass(total, _first_max(terms), t_weights + t_kv + t_act, t_gemm_flops + t_attn_flops + t_prefill_attn)


def _touched(s: _Setup, moe, tokens):
    """Share of the routed experts that at least one of `tokens` tokens goes to (1: dense)."""
    if not _any(moe):
        return 1.0
    rows = _rows(moe)
    share = 1.0 - _power(1.0 - rows.take(s.active_experts) / rows.take(s.experts), _maximum(rows.take(tokens), 1.0))
    return rows.put(_where(moe, 0.0, 1.0), share)


def _prompts(n_pre, prompt):
    """Prompts whose tokens a pass prefills (each samples its first token): n_pre / prompt."""
    has = prompt != 0
    return _where(has, n_pre / _where(has, prompt, 1.0), 0.0)


def _window_pairs(prompt, window):
    """Mean number of earlier tokens a prompt token attends to under a sliding window."""
    inside = prompt <= window
    return _where(inside, prompt / 2, window - window * window / (2 * _where(inside, 1.0, prompt)))


def _pipelined(s: _Setup, batch, n_dec, ctx, n_pre, prompt, eager=False) -> _Pass:
    """Time for every in-flight sequence to advance one pass through all stages."""
    single = s.pp <= 1
    if single is True:  # one stage (a number): the pass itself
        return _pass(s, n_dec, ctx, n_pre, prompt, eager)
    micro = _maximum(_minimum(s.pp, _trunc(batch)), 1)  # micro-batches keep the stages busy (1 for one stage)
    stage = _pass(s, n_dec / micro, ctx, n_pre / micro, prompt, eager, host=single)
    hand_off = (n_dec + n_pre) / micro * s.hidden * ACTIVATION_BYTES / s.stage_link_bw + s.stage_latency_s
    # A micro-batch crosses all stages; with `micro` of them in flight a stage is busy micro x stage.
    seconds = _maximum(s.pp * stage.seconds + (s.pp - 1) * hand_off, micro * stage.seconds)
    seconds = seconds + (s.token_overhead_s * (n_dec + _prompts(n_pre, prompt))
                         + _where(eager, s.step_overhead_s, 0.0)) / s.engine_factor
    return _Pass(_where(single, stage.seconds, seconds), stage.bound, stage.memory_s, stage.compute_s)


def _regime(memory_bound) -> str:
    return "memory" if memory_bound else "compute"


@dataclass(frozen=True)
class _Point:
    batch: int
    ttft_s: float
    tpot_s: float
    latency_s: float
    requests_per_s: float
    output_tokens_per_s: float
    bound: int  # index into BOUNDS: the decode step's largest term
    ttft_memory: bool  # the first token's pass is memory-bound
    tpot_memory: bool  # the decode step is memory-bound

    @property
    def throughput_memory(self):
        """The regime of the phase that takes most of a request's time."""
        decode = self.latency_s - self.ttft_s
        return _where(decode >= self.ttft_s, self.tpot_memory, self.ttft_memory)

    @property
    def ttft_regime(self) -> str:
        return _regime(self.ttft_memory)

    @property
    def tpot_regime(self) -> str:
        return _regime(self.tpot_memory)

    @property
    def throughput_regime(self) -> str:
        return _regime(self.throughput_memory)


def _select(cond, a: _Point, b: _Point) -> _Point:
    """a where cond, else b (field by field)."""
    if _is_scalar(cond):
        return a if cond else b
    return _Point(*(_where(cond, getattr(a, f.name), getattr(b, f.name)) for f in fields(_Point)))


def _continuous(s: _Setup, p, o, batch) -> _Point:
    """p prompt tokens, o >= 1 output tokens (floats)."""
    # The other B - 1 sequences' prompts ride along in the decode steps; a request's own
    # prompt is prefilled in the step that makes its first token (its TTFT).
    step = _pipelined(s, batch, batch, p + o / 2, (batch - 1) * p / o, p)
    seconds, bound, memory = step.seconds, step.bound, step.memory_bound
    pf = s.prefill_first
    if _any(pf):
        # Prefill-first engines: prompts run in prefill-only steps between decode steps;
        # (B - 1) / O prompts come per decode step, one step each below one per step, else
        # together in one.
        decode = _pipelined(s, batch, batch, p + o / 2, 0, p)
        per_step = (batch - 1) / o
        pre = _pipelined(s, batch, 0, 0, _maximum(per_step, 1) * p, p, eager=True)
        alone = decode.seconds + _where(per_step < 1, per_step * pre.seconds, pre.seconds)
        seconds = _where(pf, alone, seconds)
        bound = _where(pf, decode.bound, bound)
        memory = _where(pf, decode.memory_bound, memory)
    chunks = _maximum(_ceil(p / s.chunk_tokens), 1)
    first = _pipelined(s, batch, _where(pf, 0, batch - 1), p + o / 2, p / chunks, p, eager=True)
    wait = 0.5 * seconds * (1 - 1 / batch)  # an idle engine (batch 1) starts at once
    ttft = wait + chunks * first.seconds + s.request_overhead_s
    latency = ttft + (o - 1) * seconds
    rps = batch / latency
    return _Point(batch, ttft, seconds, latency, rps, rps * o, bound, first.memory_bound, memory)


def _static(s: _Setup, p, o, batch) -> _Point:
    step = _pipelined(s, batch, batch, p + o / 2, 0, p)
    prefill = _pipelined(s, batch, 0, 0, batch * p, p, eager=True)  # unused without a prompt
    has_prompt = p != 0
    first = _where(has_prompt, prefill.seconds + s.request_overhead_s, step.seconds)
    total = first + (o - 1) * step.seconds
    return _Point(batch, first, step.seconds, total, batch / total, batch * o / total, step.bound,
                  _where(has_prompt, prefill.memory_bound, step.memory_bound), step.memory_bound)


@dataclass(frozen=True)
class _Ask:
    """What a query asks of a configuration beyond its hardware: lengths, batching, SLOs and
    how to check them (numbers, or arrays of many queries)."""

    prompt: float
    output: float  # at least 1
    static: bool  # static batching
    ttft_slo_ms: float  # inf: none
    tpot_slo_ms: float
    latency_slo_ms: float
    with_band: bool  # size_with_error_band
    pinned: bool  # the batch is given
    pin: int  # the given batch (0 if none)
    # The calibration's error bands per metric and regime of the pass.
    band_throughput_memory: float
    band_throughput_compute: float
    band_ttft_memory: float
    band_ttft_compute: float
    band_tpot_memory: float
    band_tpot_compute: float


_BANDS_OF: dict[int, tuple] = {}  # id(calibration) -> (calibration, bands): usually one, the default


def _bands_of(cal) -> tuple[float, ...]:
    """The `_Ask.band_*` values of a calibration, in field order."""
    hit = _BANDS_OF.get(id(cal))
    if hit is not None and hit[0] is cal:
        return hit[1]
    bands = tuple(cal.band(metric, regime) for metric in ("throughput", "ttft", "tpot") for regime in ("memory", "compute"))
    if len(_BANDS_OF) >= 64:
        _BANDS_OF.clear()
    _BANDS_OF[id(cal)] = (cal, bands)  # the reference keeps the id from being reused
    return bands


def _ask(q: PerfQuery) -> _Ask:
    inf = math.inf
    return _Ask(float(q.prompt_tokens), float(max(q.output_tokens, 1)), q.batching == "static",
                inf if q.ttft_slo_ms is None else q.ttft_slo_ms, inf if q.tpot_slo_ms is None else q.tpot_slo_ms,
                inf if q.latency_slo_ms is None else q.latency_slo_ms, bool(q.size_with_error_band),
                q.batch is not None, q.batch or 0, *_bands_of(q.calibration))


def _evaluate(s: _Setup, a: _Ask, batch) -> _Point:
    static = a.static
    if _is_scalar(static):
        return (_static if static else _continuous)(s, a.prompt, a.output, batch)
    if not static.any():
        return _continuous(s, a.prompt, a.output, batch)
    if static.all():
        return _static(s, a.prompt, a.output, batch)
    return _select(static, _static(s, a.prompt, a.output, batch), _continuous(s, a.prompt, a.output, batch))


# ---------------------------------------------------------------- bands and SLOs
def _bands(q: PerfQuery) -> dict:
    """The pooled error bands per metric (an estimate without a point to take regimes from)."""
    cal = q.calibration
    return {"error_band": cal.error_band, "ttft_error_band": cal.ttft_error_band, "tpot_error_band": cal.tpot_error_band}


def _point_bands(a: _Ask, pt: _Point) -> tuple:
    """(throughput, TTFT, TPOT) error bands of the point's regimes."""
    return (_where(pt.throughput_memory, a.band_throughput_memory, a.band_throughput_compute),
            _where(pt.ttft_memory, a.band_ttft_memory, a.band_ttft_compute),
            _where(pt.tpot_memory, a.band_tpot_memory, a.band_tpot_compute))


def _checked(a: _Ask, pt: _Point) -> tuple:
    """(TTFT, TPOT, latency) in ms as the SLOs see them: with size_with_error_band, the
    pessimistic end of each band."""
    ttft, tpot, latency = pt.ttft_s * 1e3, pt.tpot_s * 1e3, pt.latency_s * 1e3
    if _is_scalar(a.with_band) and not a.with_band:
        return ttft, tpot, latency
    ttft_band = _where(pt.ttft_memory, a.band_ttft_memory, a.band_ttft_compute)
    tpot_band = _where(pt.tpot_memory, a.band_tpot_memory, a.band_tpot_compute)
    ttft_hi, decode_hi = ttft * (1 + ttft_band), (pt.latency_s - pt.ttft_s) * 1e3 * (1 + tpot_band)
    return (_where(a.with_band, ttft_hi, ttft), _where(a.with_band, tpot * (1 + tpot_band), tpot),
            _where(a.with_band, ttft_hi + decode_hi, latency))


def _violation(a: _Ask, pt: _Point) -> tuple:
    """(kind: index into _KINDS, 0 if every SLO holds; the checked value of that SLO)."""
    ttft, tpot, latency = _checked(a, pt)
    over_ttft, over_tpot, over_latency = ttft > a.ttft_slo_ms, tpot > a.tpot_slo_ms, latency > a.latency_slo_ms
    kind = _where(over_ttft, 1, _where(over_tpot, 2, _where(over_latency, 3, 0)))
    return kind, _where(over_ttft, ttft, _where(over_tpot, tpot, latency))

# ---------------------------------------------------------------- the best batch
def _search(s: _Setup, mem: MemoryBudget, a: _Ask, max_batch) -> tuple:
    """The batch each query runs at, for queries whose single sequence fits in memory:
    the pinned batch, else the largest batch within memory and the engine's cap that meets
    the SLOs - the cap itself, or found by bisection (every query in lockstep).
    Returns (point, binding limit: index into _LIMITS, reason kind: index into _KINDS,
    the checked value of the missed SLO)."""
    engine_cap = mem.policy.max_batch
    cap = _minimum(max_batch, engine_cap)
    pt = _evaluate(s, a, _where(a.pinned, _maximum(a.pin, 1), cap))
    kind, value = _violation(a, pt)
    pinned_vram = _and(a.pinned, a.pin > max_batch)
    kind = _where(pinned_vram, _KIND_VRAM, kind)
    limit = _where(pinned_vram, _VRAM, _where(kind != 0, _SLO, _where(
        _and(_not(a.pinned), max_batch <= engine_cap), _VRAM, pt.bound)))
    lower = _and(_not(a.pinned), kind != 0)  # the largest batch misses an SLO: search below it
    if _any(lower):
        rows = _rows(lower)
        s_, a_, cap_ = rows.take(s), rows.take(a), rows.take(cap)
        one = cap_ - cap_ + 1
        low = _evaluate(s_, a_, one)
        kind_low, value_low = _violation(a_, low)
        meets = kind_low == 0
        best = _bisect(s_, a_, one, _where(meets, cap_, one), low)  # lo meets the SLOs, hi misses them
        pt = rows.put(pt, _select(meets, best, low))
        kind, value = rows.put(kind, kind_low), rows.put(value, value_low)
        limit = rows.put(limit, _SLO + 0 * kind_low)
    return pt, limit, kind, value


def _bisect(s: _Setup, a: _Ask, lo, hi, best: _Point) -> _Point:
    """Largest batch in [lo, hi) that meets the SLOs, given that lo does (its point: best)
    and hi does not; each round evaluates only the queries still searching."""
    while True:
        active = hi - lo > 1
        if not _any(active):
            return best
        rows = _rows(active)
        lo_, hi_, a_ = rows.take(lo), rows.take(hi), rows.take(a)
        mid = (lo_ + hi_) // 2
        pt = _evaluate(rows.take(s), a_, mid)
        misses = _violation(a_, pt)[0] != 0
        lo, hi = rows.put(lo, _where(misses, lo_, mid)), rows.put(hi, _where(misses, mid, hi_))
        best = rows.put(best, _select(misses, rows.take(best), pt))


# ---------------------------------------------------------------- estimates
def _unsupported(q: PerfQuery) -> str:
    gpu, m = q.gpu, q.model
    why = check_engine(q.engine)
    if why:
        return why
    tp, pp = parallelism(q)
    if q.precision not in BYTES_PER_ELEMENT:
        return f"unknown precision {q.precision!r}; use one of {', '.join(BYTES_PER_ELEMENT)}"
    if q.precision == "fp8" and not gpu.supports_fp8:
        return f"{gpu.name} has no FP8 support (Hopper, Ada and newer only)"
    if q.precision == "fp4" and not gpu.supports("fp4"):
        return f"{gpu.name} has no FP4 tensor cores (Blackwell only: B200, GB200, RTX PRO 6000)"
    if q.precision == "int4" and not gpu.supports("int4"):
        return (f"{gpu.name} has no 4-bit weight-only (AWQ/GPTQ) kernels in the engines "
                "(NVIDIA Volta or newer; not AMD GPUs)")
    if q.precision == "bf16" and not gpu.supports("bf16"):
        return f"{gpu.name} has no BF16 support; use fp16"
    if kv_precision(q) not in KV_PRECISIONS or (kv_precision(q) == "fp8" and not gpu.supports_fp8):
        return f"KV-cache precision {kv_precision(q)} is not supported on {gpu.name}"
    if not gpu.memory_bandwidth_gbs or not gpu.tflops("fp16"):
        return f"{gpu.name} has no memory-bandwidth or FP16 FLOP/s figure in the catalog to estimate from"
    if q.gpus_per_replica < 1 or q.gpus_per_replica % pp:
        return f"{q.gpus_per_replica} GPUs do not split into {pp} equal pipeline stages"
    if m.attention_heads % tp:
        return f"{tp}-way tensor parallelism does not divide the model's {m.attention_heads} attention heads"
    if q.batching not in ("continuous", "static"):
        return f"unknown batching {q.batching!r}"
    if q.max_batch is not None and q.max_batch < 1:
        return f"max_batch must be a positive whole number, got {q.max_batch}"
    if q.kv_cache_memory_fraction is not None and not 0 < q.kv_cache_memory_fraction <= 1:
        return f"kv_cache_memory_fraction must be in (0, 1], got {q.kv_cache_memory_fraction}"
    return ""


def estimate(q: PerfQuery) -> PerfEstimate:
    return estimate_many([q])[0]


# Below this many queries (and while numpy is not loaded yet), numbers one query at a time
# beat importing numpy (~0.1 s) and arrays; the results are the same bits either way.
_ARRAYS_FROM = 8
_ARRAYS_FROM_COLD = 400


def estimate_many(queries: Sequence[PerfQuery]) -> list[PerfEstimate]:
    """`estimate` of each query, all at once: the physics runs on arrays of the queries
    (the bisection over the batch in lockstep), which is what makes building thousands of
    candidate configurations cheap. The results equal those of `estimate` one by one."""
    queries = list(queries)
    out: list[PerfEstimate | None] = [None] * len(queries)
    cold = "numpy" not in sys.modules
    if len(queries) < (_ARRAYS_FROM_COLD if cold else _ARRAYS_FROM):
        for i, q in enumerate(queries):
            why = _unsupported(q)
            out[i] = (PerfEstimate(False, why, "unsupported", **_bands(q)) if why
                      else _estimates([q], _setup(q), memory_budget(q), _ask(q))[0])
        return out
    shared = _Shared(queries)
    for i, why in enumerate(shared.unsupported):
        if why:
            out[i] = _new_estimate(feasible=False, reason=why, reason_kind="unsupported", **_bands(queries[i]))
    ok = [i for i, why in enumerate(shared.unsupported) if not why]
    if ok:
        s, mem, a = shared.arrays(ok)
        for i, e in zip(ok, _estimates([queries[i] for i in ok], s, mem, a)):
            out[i] = e
    return out


# What a query's setup and memory budget depend on: everything but what `_Ask` holds.
_ASKED = ("prompt_tokens", "output_tokens", "ttft_slo_ms", "tpot_slo_ms", "latency_slo_ms", "batch",
          "size_with_error_band")
_BY_IDENTITY = ("model", "gpu", "calibration")  # compared by identity within one call (cheap)
_by_value = attrgetter(*(f.name for f in fields(PerfQuery) if f.name not in _ASKED + _BY_IDENTITY))


class _GroupCache:
    """What one group of queries shares (`_Group`), kept across calls: candidate building
    asks the same model on the same hardware in chunk after chunk, and review scenarios and
    scheduler calls ask it again. Keyed by the identity of the model, GPU and calibration
    objects (the entry holds them, so an id is never reused while cached) and the values of
    the rest; bounded (the oldest half goes when full)."""

    def __init__(self, max_entries: int = 10_000):  # ~4-6 KB each: at most ~60 MB
        self.max_entries = max_entries
        self._data: dict[tuple, _Group] = {}

    def get(self, q: PerfQuery) -> _Group:
        key = (id(q.model), id(q.gpu), id(q.calibration), _by_value(q))
        found = self._data.get(key)
        if found is not None and found.rep.model is q.model and found.rep.gpu is q.gpu \
                and found.rep.calibration is q.calibration:
            return found
        if len(self._data) >= self.max_entries:
            for old in list(self._data)[: self.max_entries // 2]:
                self._data.pop(old, None)
        found = self._data[key] = _Group(q)
        return found

    def clear(self) -> None:
        self._data.clear()


class _Group:
    """A group's representative query, why it cannot be estimated, and (made when first
    needed) its setup, memory budget, KV factors and error bands."""

    __slots__ = ("rep", "why", "_parts", "_row", "replica")

    def __init__(self, rep: PerfQuery):
        self.rep = rep
        self.why = _unsupported(rep)
        self._parts = None
        self._row = None
        self.replica = None  # the queueing view (solver.perf.queueing.replica_for), once asked

    @property
    def parts(self) -> tuple:
        if self._parts is None:
            q = self.rep
            self._parts = (_setup(q), memory_budget(q), _kv_factors(q), _bands_of(q.calibration))
        return self._parts

    @property
    def row(self) -> tuple:
        """The parts' numbers, flat (setup, policy, budget, KV factors, bands: `_AT_POLICY` and
        on say where each starts): what `_Shared.arrays` gathers per query, read out once per
        group rather than once per call (~0.5 KB more per cached group)."""
        if self._row is None:
            setup, budget, factors, bands = self.parts
            self._row = (*_SETUP_VALUES(setup), *_POLICY_VALUES(budget.policy), *_BUDGET_VALUES(budget),
                         *factors, *bands)
        return self._row


GROUPS = _GroupCache()


_SETUP_FIELDS = tuple(f.name for f in fields(_Setup))
_SETUP_VALUES = attrgetter(*_SETUP_FIELDS)
_POLICY_VALUES = attrgetter(*(f.name for f in fields(EnginePolicy)))
# MemoryBudget's per-group numbers (its kv_gib_per_sequence depends on the query's tokens:
# made from the KV factors; static_prompt_tokens is the query's).
_BUDGET_FIELDS = ("memory_gib", "weights_gib", "overhead_gib", "activation_gib_per_token", "logits_gib_per_sequence")
_BUDGET_VALUES = attrgetter(*_BUDGET_FIELDS)
_BAND_FIELDS = tuple(f.name for f in fields(_Ask)[-6:])  # _bands_of's order
# Where each part's columns start in a `_Group.row`.
_AT_POLICY = len(_SETUP_FIELDS)
_AT_BUDGET = _AT_POLICY + len(fields(EnginePolicy))
_AT_FACTORS = _AT_BUDGET + len(_BUDGET_FIELDS)
_AT_BANDS = _AT_FACTORS + 5  # _kv_factors: 5 numbers
# What `arrays` reads of each query (the rest is its group's): one call per query.
_ASKED_VALUES = attrgetter("prompt_tokens", "output_tokens", "batching", "ttft_slo_ms", "tpot_slo_ms",
                           "latency_slo_ms", "size_with_error_band", "batch")


class _Shared:
    """Queries grouped by what their setup depends on: setups, memory budgets and the
    unsupported check once per group (`GROUPS` keeps them across calls), gathered into
    arrays per query."""

    def __init__(self, queries: list[PerfQuery]):
        self.queries = queries
        groups: dict[int, int] = {}
        self.group = group = []
        self.reps: list[_Group] = []
        for q in queries:
            found = GROUPS.get(q)
            g = groups.get(id(found))
            if g is None:
                g = groups[id(found)] = len(self.reps)
                self.reps.append(found)
            group.append(g)
        why = [r.why for r in self.reps]
        self.unsupported = [why[g] for g in group]

    def arrays(self, rows: list[int]) -> tuple[_Setup, MemoryBudget, _Ask]:
        np = _np()
        queries = [self.queries[i] for i in rows]
        group = np.array(self.group, dtype=np.int64)[rows]
        used = sorted(set(group.tolist()))
        local = np.zeros(len(self.reps), dtype=np.int64)
        local[used] = np.arange(len(used))
        at = local[group]  # each row's group among those used
        # Per column, its values over the groups (the groups' rows transposed), per query.
        cols = [np.array(values)[at] for values in zip(*(self.reps[g].row for g in used))]
        s = _Setup(*cols[:_AT_POLICY])
        policy = EnginePolicy(*cols[_AT_POLICY:_AT_BUDGET])
        (prompt, output, batching, ttft_slo, tpot_slo, latency_slo, with_band,
         batch) = zip(*map(_ASKED_VALUES, queries))
        tokens = np.array([p + o for p, o in zip(prompt, output)])
        static = np.array([b == "static" for b in batching])
        mem = MemoryBudget(
            policy=policy, **dict(zip(_BUDGET_FIELDS, cols[_AT_BUDGET:_AT_FACTORS])),
            kv_gib_per_sequence=_kv_gib(*cols[_AT_FACTORS:_AT_BANDS], tokens),
            static_prompt_tokens=np.where(static, np.array(prompt), -1),
        )
        inf = math.inf
        a = _Ask(
            prompt=np.array([float(p) for p in prompt]),
            output=np.array([float(max(o, 1)) for o in output]),
            static=static,
            ttft_slo_ms=np.array([inf if x is None else x for x in ttft_slo], dtype=float),
            tpot_slo_ms=np.array([inf if x is None else x for x in tpot_slo], dtype=float),
            latency_slo_ms=np.array([inf if x is None else x for x in latency_slo], dtype=float),
            with_band=np.array([bool(x) for x in with_band]),
            pinned=np.array([x is not None for x in batch]),
            pin=np.array([x or 0 for x in batch], dtype=np.int64),
            **dict(zip(_BAND_FIELDS, cols[_AT_BANDS:])),
        )
        return s, mem, a


def _values(x, n: int) -> list:
    """A column as Python numbers, one per query."""
    return [x] * n if _is_scalar(x) else x.tolist()


def _estimates(queries: list[PerfQuery], s: _Setup, mem: MemoryBudget, a: _Ask) -> list[PerfEstimate]:
    """Estimates of supported queries whose inputs are numbers (one query) or arrays."""
    n = len(queries)
    max_batch = mem.max_batch
    fits = max_batch >= 1
    out: list[PerfEstimate | None] = [None] * n
    tp, pp, weights = _values(s.tp, n), _values(s.pp, n), _values(mem.weights_gib, n)
    if _any(fits):
        rows = _rows(fits)
        mem_, a_ = rows.take(mem), rows.take(a)
        pt, limit, kind, value = _search(rows.take(s), mem_, a_, rows.take(max_batch))
        at = range(n) if rows.idx is None else rows.idx.tolist()  # the queries these rows answer
        made = _fitting(queries, at, pt, mem_, a_, _values(rows.take(max_batch), len(at)), limit, kind, value,
                        *((x if rows.idx is None else [x[i] for i in at]) for x in (weights, tp, pp)))
        if rows.idx is None:
            out = made
        else:
            for i, e in zip(at, made):
                out[i] = e
    if not _all(fits):
        rows = _rows(_not(fits))
        bad = rows.take(mem)
        at = range(n) if rows.idx is None else rows.idx.tolist()
        too_big = zip(*(_values(x, len(at)) for x in (bad.used_gib(1), bad.kv_capacity_gib(1),
                                                        bad.policy.memory_fraction, bad.memory_gib,
                                                        bad.kv_gib_per_sequence)))
        for i, (need, room, fraction, memory_gib, kv) in zip(at, too_big):
            q = queries[i]
            out[i] = _new_estimate(
                feasible=False, reason=f"does not fit in VRAM: needs ~{need:.1f} GiB per GPU ({weights[i]:.1f} GiB weights) at "
                f"{q.precision} with {q.gpus_per_replica} GPU(s) per replica; {q.engine} at memory fraction "
                f"{fraction:g} of {memory_gib:.1f} GiB leaves {f'{room:.1f} GiB' if room > 0 else 'no room'} for the "
                f"KV cache, one sequence needs {kv:.2f} GiB",
                reason_kind="vram", memory_gib_per_gpu=need, weights_gib_per_gpu=weights[i], binding_limit="vram",
                max_batch_vram=0, tensor_parallel=tp[i], pipeline_stages=pp[i], **_bands(q))
    return out


def _fitting(queries: list[PerfQuery], at: Sequence[int], pt: _Point, mem: MemoryBudget, a: _Ask, most: list,
             limit, kind, value, weights: list, tp: list, pp: list) -> list[PerfEstimate]:
    """The estimates of the queries at `at` (whose single sequence fits) from their search's
    point: made column by column (Python numbers), then row by row in PerfEstimate's field
    order - per query only the object itself, and a reason where an SLO or pin is missed."""
    m = len(at)
    kinds, batch = _values(kind, m), _values(pt.batch, m)
    feasible = [k == 0 for k in kinds]
    reasons = [""] * m
    rps, tokens_per_s = _values(pt.requests_per_s, m), _values(pt.output_tokens_per_s, m)
    if not all(feasible):
        values = _values(value, m)
        for j, k in enumerate(kinds):
            if k:
                reasons[j] = _miss(queries[at[j]], k, batch[j], most[j], values[j])
        rps = [r if f else 0.0 for r, f in zip(rps, feasible)]
        tokens_per_s = [t if f else 0.0 for t, f in zip(tokens_per_s, feasible)]
    band, ttft_band, tpot_band = (_values(x, m) for x in _point_bands(a, pt))
    return list(map(_estimate_row, zip(
        feasible, reasons, [_KINDS[k] for k in kinds], batch, _values(mem.used_gib(pt.batch), m), weights,
        _values(pt.ttft_s * 1e3, m), _values(pt.tpot_s * 1e3, m), _values(pt.latency_s * 1e3, m), rps, tokens_per_s,
        [_LIMITS[x] for x in _values(limit, m)], band, ttft_band, tpot_band, most,
        _values(pt.batch * mem.kv_gib_per_sequence, m), [BOUNDS[x] for x in _values(pt.bound, m)], tp, pp)))


def _miss(q: PerfQuery, kind: int, batch: int, most: int, value: float) -> str:
    """Why a fitting query is infeasible: its pinned batch exceeds memory, or an SLO (kind)
    is missed even at the batch the search ended at (value: that SLO's checked figure)."""
    if kind == _KIND_VRAM:
        return f"batch {q.batch} does not fit in VRAM: at most {most} sequences of {q.prompt_tokens + q.output_tokens} tokens"
    margin = " with the error band" if q.size_with_error_band else ""
    slo = (q.ttft_slo_ms, q.tpot_slo_ms, q.latency_slo_ms)[kind - 1]
    return f"misses the {_SLO_LABELS[kind]} SLO: {value:.1f} ms{margin} > {slo:g} ms even at batch {batch}"


_new_estimate = maker(PerfEstimate)  # PerfEstimate(**fields), made faster (thousands per plan)
_estimate_row = row_maker(PerfEstimate)  # every field, in field order


def _all(a) -> bool:
    return bool(a) if _is_scalar(a) else bool(a.all())


@dataclass(frozen=True)
class Timings:
    """TTFT, TPOT and throughput at the query's pinned batch, whether or not it fits in memory
    (calibration rows: the measurement shows it ran), with the regime of each."""

    ttft_ms: float
    tpot_ms: float
    latency_ms: float
    output_tokens_per_s: float
    ttft_regime: str
    tpot_regime: str
    throughput_regime: str


def timings(q: PerfQuery) -> Timings:
    why = _unsupported(q)
    if why:
        raise ValueError(why)
    pt = _evaluate(_setup(q), _ask(q), max(q.batch or 1, 1))
    return Timings(pt.ttft_s * 1e3, pt.tpot_s * 1e3, pt.latency_s * 1e3, pt.output_tokens_per_s, pt.ttft_regime,
                   pt.tpot_regime, pt.throughput_regime)


# ---------------------------------------------------------------- hook for queueing and simulation
def step_time_fn(q: PerfQuery):
    """The replica's engine step as a function, for the queueing model and the simulator.

    Returns `seconds(decode_seqs, decode_context_tokens, prefill_tokens, prefill_pairs)`:
    the time of one continuous-batching step (every stage of the replica, as `_pipelined`)
    that decodes one token for each of `decode_seqs` sequences whose contexts sum to
    `decode_context_tokens`, and prefills `prefill_tokens` prompt tokens whose causal
    attention covers `prefill_pairs` (token, earlier token) pairs - a whole prompt of P
    tokens is P x P / 2 pairs; its chunk from position a to a + n is n x (2a + n) / 2.
    A step that prefills anything runs eagerly (no CUDA graph), as `_continuous`'s first
    pass does. The same physics as `estimate` (no SLO, no batch search); `q`'s lengths
    are not used.
    """
    s = _setup(q)

    def seconds(decode_seqs: float, decode_context_tokens: float, prefill_tokens: float,
                prefill_pairs: float) -> float:
        ctx = decode_context_tokens / decode_seqs if decode_seqs > 0 else 0.0
        span = 2.0 * prefill_pairs / prefill_tokens if prefill_tokens > 0 else 0.0  # `prompt` of _pass
        return _pipelined(s, max(decode_seqs, 1.0), decode_seqs, ctx, prefill_tokens, span,
                          eager=prefill_tokens > 0).seconds

    return seconds


def graph_limits(q: PerfQuery) -> tuple[float, float]:
    """(largest decode batch the engine replays as a CUDA graph, seconds a decode step of
    more sequences adds by launching eagerly) - every stage of the replica, as `_pipelined`."""
    s = _setup(q)
    gap = s.pp * s.layers * max(s.prefill_layer_overhead_s - s.layer_overhead_s, 0.0) / s.engine_factor
    return s.graph_max_batch, gap


def request_overhead_s(q: PerfQuery) -> float:
    """Seconds a serving engine adds to every request before its first token (outside the
    GPU's steps: API server, tokenizer, scheduler loop), as `_continuous` adds to TTFT."""
    return _setup(q).request_overhead_s
