"""Calibrated roofline model of LLM serving: memory, decode step, prefill, best batch.

One replica = TP GPUs per pipeline stage x PP stages. Per GPU of a stage, one forward
pass that carries `n` tokens (decode tokens of B sequences plus prefill tokens) takes

    t_gemm = max(weight bytes read / BW_eff,  2 x body params x n / FLOPS_eff)     (weights are
             read once per pass; GEMMs are memory- or compute-bound, never both)
    t_attn = max(KV bytes read / BW_eff, decode attention FLOPs / FLOPS_eff)
             + prefill attention FLOPs / FLOPS_eff                               (attention runs as
             separate kernels after the GEMMs, so it adds rather than overlaps)
    t_comm = 2 x layers x (2(TP-1)/TP x n x hidden x 2 B / link_eff + latency)   (two all-reduces
             per layer, ring cost; latency per call on NVSwitch, per ring step on PCIe/mesh)
    t_over = layers x layer_overhead                                             (kernel launches,
             norms, sampling: fixed per layer, so it does not shrink with TP)
    t_pass = (t_gemm + t_attn + t_comm + t_over) / engine_factor

with BW_eff = datasheet bandwidth x bandwidth_efficiency and FLOPS_eff = dense tensor
FLOP/s x compute_efficiency (x fp8_compute_efficiency for fp8/int8 GEMMs).

Continuous batching (vLLM, SGLang, TRT-LLM in-flight): with B sequences of P prompt and O
output tokens in flight, each step decodes B tokens and carries, on average, B x P / O
prompt tokens of the sequences that start meanwhile (chunked prefill), so

    TPOT = t_pass(decode B at context P + O/2, prefill B x P / O)
    TTFT = half a step of waiting + t_pass(decode B - 1, prefill P)
    latency = TTFT + (O - 1) x TPOT;   requests/s = B / latency (Little's law)

Static batching (the TensorRT-LLM 0.9 benchmark rows): one prefill pass of B x P tokens,
then O - 1 decode steps. Pipeline stages (replicas spanning instances, or llama.cpp's
layer split) run TP-group passes over L/PP layers each, with B split into up to PP
micro-batches; a token crosses every stage, so TPOT = PP x stage pass + (PP-1) transfers.

Throughput rises and TTFT/TPOT grow with B, so the best batch is the largest one that
fits in memory, the engine's batch cap and the SLOs: found by bisection (~10 passes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solver.perf.api import BYTES_PER_ELEMENT, ENGINES, PerfEstimate, PerfQuery
from solver.perf.calibration import ACTIVATION_SEQUENCES

GIB = 1024**3
ACTIVATION_BYTES = 2.0  # activations and all-reduce payloads are 16-bit
PCIE_GBS_PER_DIRECTION = {3: 15.75, 4: 31.5, 5: 63.0, 6: 126.0}  # x16 link
# Weights stay 16-bit for the vocabulary matrices under fp8/int8 serving (vLLM, TRT-LLM
# quantise the linear layers of the transformer blocks only).
VOCAB_KEPT_16BIT = ("fp8", "int8")
COMPUTE_PRECISION = {"fp16": "fp16", "bf16": "bf16", "fp8": "fp8", "int8": "int8", "q4_k_m": "fp16"}


@dataclass(frozen=True)
class MemoryBudget:
    """Per GPU, GiB."""

    budget_gib: float
    weights_gib: float
    activation_gib: float
    overhead_gib: float
    kv_gib_per_sequence: float  # at prompt + output tokens

    @property
    def kv_capacity_gib(self) -> float:
        return self.budget_gib - self.weights_gib - self.activation_gib - self.overhead_gib

    @property
    def max_batch(self) -> int:
        if self.kv_capacity_gib <= 0:
            return 0
        return int(self.kv_capacity_gib / self.kv_gib_per_sequence) if self.kv_gib_per_sequence > 0 else 10**9

    def used_gib(self, batch: int) -> float:
        return self.weights_gib + self.activation_gib + self.overhead_gib + batch * self.kv_gib_per_sequence


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
    lm_head_flops_per_token: float
    kv_bytes_per_token: float
    attn_flops_per_token_ctx: float  # x context length, decode or prefill
    hidden: int
    bw: float  # bytes/s
    flops: float  # FLOP/s for GEMMs at the weight precision
    attn_flops: float  # FLOP/s for attention (16-bit)
    link_bw: float  # bytes/s, one direction, achieved
    allreduce_latency_s: float
    stage_link_bw: float
    stage_latency_s: float
    layer_overhead_s: float
    engine_factor: float
    chunk_tokens: int


@dataclass(frozen=True)
class _Pass:
    seconds: float
    bound: str  # largest term


def kv_precision(q: PerfQuery) -> str:
    if q.kv_precision:
        return q.kv_precision
    return "fp8" if q.precision == "fp8" else "fp16"


def parallelism(q: PerfQuery) -> tuple[int, int]:
    """(tensor parallel, pipeline stages)."""
    pp = q.pipeline_stages or max(q.instances_per_replica, 1)
    return max(q.gpus_per_replica // pp, 1), pp


def weight_bytes_total(q: PerfQuery) -> float:
    m = q.model
    wb = BYTES_PER_ELEMENT[q.precision]
    vocab_params = m.vocab_size * m.hidden_size * (1 if m.tied_embeddings else 2)
    vocab_bytes = vocab_params * (2.0 if q.precision in VOCAB_KEPT_16BIT else wb)
    return (m.params_b * 1e9 - vocab_params) * wb + vocab_bytes


def memory_budget(q: PerfQuery) -> MemoryBudget:
    m, cal = q.model, q.calibration
    tp, pp = parallelism(q)
    kvb = BYTES_PER_ELEMENT[kv_precision(q)]
    kv_heads_per_gpu = math.ceil(m.kv_heads / tp)  # KV heads are replicated when TP exceeds them
    kv_per_token = 2 * (m.layers / pp) * kv_heads_per_gpu * m.head_dim * kvb
    intermediate = m.intermediate_size * (m.active_experts if m.is_moe else 1) / tp
    activation = (cal.activation_tokens * (4 * m.hidden_size + 2 * intermediate) * ACTIVATION_BYTES
                  + ACTIVATION_SEQUENCES * m.vocab_size * 4.0)  # fp32 logits
    return MemoryBudget(
        budget_gib=q.usable_memory_gib * cal.usable_memory_fraction,
        weights_gib=weight_bytes_total(q) / (tp * pp) / GIB,
        activation_gib=activation / GIB,
        overhead_gib=cal.runtime_overhead_gib,
        kv_gib_per_sequence=(q.prompt_tokens + q.output_tokens) * kv_per_token / GIB,
    )


def _tp_link(q: PerfQuery, tp: int) -> tuple[float, float]:
    """(achieved bytes/s one direction, latency s per all-reduce) inside one instance."""
    cal, gpu = q.calibration, q.gpu
    if tp <= 1:
        return 1.0, 0.0
    if q.interconnect == "nvlink" and gpu.nvlink_gbs:
        bw = gpu.nvlink_gbs / 2 * 1e9
        switched = not gpu.architecture.startswith(("Volta", "Pascal"))  # V100 boards: NVLink mesh, no NVSwitch
        latency_us = cal.link_latency_us("nvswitch") if switched else cal.link_latency_us("nvlink") * 2 * (tp - 1)
    else:
        bw = PCIE_GBS_PER_DIRECTION.get(gpu.pcie_gen or 4, 31.5) * 1e9
        latency_us = cal.link_latency_us("pcie") * 2 * (tp - 1)
    return bw * cal.link_efficiency, latency_us * 1e-6


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


def _bandwidth(q: PerfQuery) -> float:
    """Achieved memory bandwidth, bytes/s. llama.cpp's batch-1 kernels keep too few loads in
    flight to saturate HBM: their achieved bandwidth levels off near a fitted ceiling."""
    cal = q.calibration
    gbs = q.gpu.memory_bandwidth_gbs * cal.bandwidth_efficiency
    if q.engine == "llama.cpp":
        gbs = min(gbs, cal.llama_cpp_bandwidth_gbs)
    return gbs * 1e9


def _layer_overhead_us(q: PerfQuery) -> float:
    cal = q.calibration
    if q.engine == "llama.cpp":
        return cal.llama_cpp_layer_overhead_us
    if q.engine == "tensorrt-llm-0.9":  # the calibration benchmark launched kernels eagerly
        return cal.layer_overhead_us
    return cal.graph_layer_overhead_us


def _setup(q: PerfQuery) -> _Setup:
    m, cal, gpu = q.model, q.calibration, q.gpu
    tp, pp = parallelism(q)
    per_gpu = 1.0 / (tp * pp)
    total_bytes = weight_bytes_total(q)
    expert_bytes = m.expert_params_b * 1e9 * BYTES_PER_ELEMENT[q.precision]
    kvb = BYTES_PER_ELEMENT[kv_precision(q)]
    low_precision_peak = gpu.tflops(COMPUTE_PRECISION[q.precision]) if q.precision in ("fp8", "int8") else None
    if low_precision_peak:  # 8-bit GEMMs on 8-bit tensor cores
        flops = low_precision_peak * 1e12 * cal.compute_efficiency * cal.fp8_compute_efficiency
    else:  # 16-bit GEMMs (weight-only formats dequantise to 16 bits)
        flops = (gpu.tflops(COMPUTE_PRECISION[q.precision]) or gpu.tflops("fp16")) * 1e12 * cal.compute_efficiency
    link_bw, ar_latency = _tp_link(q, tp)
    stage_bw, stage_latency = _stage_link(q, pp)
    return _Setup(
        tp=tp, pp=pp, layers=m.layers / pp,
        dense_weight_bytes=(total_bytes - expert_bytes) * per_gpu,
        expert_weight_bytes=expert_bytes * per_gpu,
        experts=m.experts, active_experts=m.active_experts,
        body_flops_per_token=2 * m.body_params_b * 1e9 * per_gpu,
        lm_head_flops_per_token=2 * m.lm_head_params_b * 1e9 * per_gpu,
        kv_bytes_per_token=2 * (m.layers / pp) * math.ceil(m.kv_heads / tp) * m.head_dim * kvb,
        attn_flops_per_token_ctx=4 * (m.layers / pp) * (m.attention_heads / tp) * m.head_dim,
        hidden=m.hidden_size,
        bw=_bandwidth(q),
        flops=flops,
        attn_flops=gpu.tflops("fp16") * 1e12 * cal.compute_efficiency,
        link_bw=link_bw, allreduce_latency_s=ar_latency,
        stage_link_bw=stage_bw, stage_latency_s=stage_latency,
        layer_overhead_s=_layer_overhead_us(q) * 1e-6,
        engine_factor=cal.engine_factor(q.engine),
        chunk_tokens=max(cal.activation_tokens, 1),
    )


def _pass(s: _Setup, n_dec: float, ctx: float, n_pre: float, prompt: float) -> _Pass:
    """One forward pass of one pipeline stage (per GPU of its TP group)."""
    tokens = n_dec + n_pre
    touched = 1.0
    if s.experts > 1:  # distinct experts that at least one token is routed to
        touched = 1.0 - (1.0 - s.active_experts / s.experts) ** max(tokens, 1.0)
    weight_bytes = s.dense_weight_bytes + s.expert_weight_bytes * touched
    sampled = n_dec + (n_pre / prompt if prompt else 0.0)
    gemm_flops = s.body_flops_per_token * tokens + s.lm_head_flops_per_token * sampled
    t_weights = weight_bytes / s.bw
    t_gemm_flops = gemm_flops / s.flops
    t_kv = n_dec * ctx * s.kv_bytes_per_token / s.bw
    t_attn_flops = s.attn_flops_per_token_ctx * n_dec * ctx / s.attn_flops
    t_prefill_attn = s.attn_flops_per_token_ctx * n_pre * prompt / 2 / s.attn_flops  # causal: half the pairs
    t_comm = 0.0
    if s.tp > 1:
        ring = 2 * (s.tp - 1) / s.tp
        t_comm = 2 * s.layers * (ring * tokens * s.hidden * ACTIVATION_BYTES / s.link_bw + s.allreduce_latency_s)
    t_over = s.layers * s.layer_overhead_s
    terms = {
        "memory_bandwidth": (t_weights if t_weights >= t_gemm_flops else 0.0) + (t_kv if t_kv >= t_attn_flops else 0.0),
        "compute": (t_gemm_flops if t_gemm_flops > t_weights else 0.0)
        + (t_attn_flops if t_attn_flops > t_kv else 0.0) + t_prefill_attn,
        "interconnect": t_comm,
        "overhead": t_over,
    }
    total = sum(terms.values()) / s.engine_factor
    return _Pass(total, max(terms, key=terms.get))


def _pipelined(s: _Setup, batch: float, n_dec: float, ctx: float, n_pre: float, prompt: float) -> _Pass:
    """Time for every in-flight sequence to advance one pass through all stages."""
    if s.pp <= 1:
        return _pass(s, n_dec, ctx, n_pre, prompt)
    micro = max(min(s.pp, int(batch)), 1)  # micro-batches keep the stages busy
    stage = _pass(s, n_dec / micro, ctx, n_pre / micro, prompt)
    hand_off = (n_dec + n_pre) / micro * s.hidden * ACTIVATION_BYTES / s.stage_link_bw + s.stage_latency_s
    # A micro-batch crosses all stages; with `micro` of them in flight a stage is busy micro x stage.
    seconds = max(s.pp * stage.seconds + (s.pp - 1) * hand_off, micro * stage.seconds)
    return _Pass(seconds, stage.bound)


@dataclass(frozen=True)
class _Point:
    batch: int
    ttft_s: float
    tpot_s: float
    latency_s: float
    requests_per_s: float
    output_tokens_per_s: float
    bound: str


def _continuous(s: _Setup, q: PerfQuery, batch: int) -> _Point:
    p, o = float(q.prompt_tokens), float(max(q.output_tokens, 1))
    # The other B - 1 sequences' prompts ride along in the decode steps; a request's own
    # prompt is prefilled in the step that makes its first token (its TTFT).
    step = _pipelined(s, batch, batch, p + o / 2, (batch - 1) * p / o, p)
    chunks = max(math.ceil(p / s.chunk_tokens), 1)
    first = _pipelined(s, batch, batch - 1, p + o / 2, p / chunks, p)
    wait = 0.5 * step.seconds * (1 - 1 / batch)  # an idle engine (batch 1) starts at once
    ttft = wait + chunks * first.seconds
    latency = ttft + (o - 1) * step.seconds
    rps = batch / latency
    return _Point(batch, ttft, step.seconds, latency, rps, rps * o, step.bound)


def _static(s: _Setup, q: PerfQuery, batch: int) -> _Point:
    p, o = float(q.prompt_tokens), float(max(q.output_tokens, 1))
    prefill = _pipelined(s, batch, 0, 0, batch * p, p).seconds if p else 0.0
    step = _pipelined(s, batch, batch, p + o / 2, 0, p)
    total = prefill + (o - 1) * step.seconds
    if total <= 0:
        total = step.seconds
    ttft = prefill if p else step.seconds
    return _Point(batch, ttft, step.seconds, total, batch / total, batch * o / total, step.bound)


def _evaluate(s: _Setup, q: PerfQuery, batch: int) -> _Point:
    return _static(s, q, batch) if q.batching == "static" else _continuous(s, q, batch)


def _violation(q: PerfQuery, pt: _Point) -> tuple[str, str]:
    checks = (("ttft", "TTFT", q.ttft_slo_ms, pt.ttft_s * 1e3), ("tpot", "TPOT", q.tpot_slo_ms, pt.tpot_s * 1e3),
              ("latency", "latency", q.latency_slo_ms, pt.latency_s * 1e3))
    for kind, label, bound, value in checks:
        if bound is not None and value > bound:
            return kind, f"misses the {label} SLO: {value:.1f} ms > {bound:g} ms even at batch {pt.batch}"
    return "", ""


def _unsupported(q: PerfQuery) -> str:
    gpu, m = q.gpu, q.model
    tp, pp = parallelism(q)
    if q.precision not in BYTES_PER_ELEMENT:
        return f"unknown precision {q.precision!r}; use one of {', '.join(BYTES_PER_ELEMENT)}"
    if q.precision == "fp8" and not gpu.supports_fp8:
        return f"{gpu.name} has no FP8 support (Hopper, Ada and newer only)"
    if q.precision == "bf16" and not gpu.supports("bf16"):
        return f"{gpu.name} has no BF16 support; use fp16"
    if kv_precision(q) not in BYTES_PER_ELEMENT or (kv_precision(q) == "fp8" and not gpu.supports_fp8):
        return f"KV-cache precision {kv_precision(q)} is not supported on {gpu.name}"
    if not gpu.memory_bandwidth_gbs or not gpu.tflops("fp16"):
        return f"{gpu.name} has no memory-bandwidth or FP16 FLOP/s figure in the catalog to estimate from"
    if q.gpus_per_replica < 1 or q.gpus_per_replica % pp:
        return f"{q.gpus_per_replica} GPUs do not split into {pp} equal pipeline stages"
    if m.attention_heads % tp:
        return f"{tp}-way tensor parallelism does not divide the model's {m.attention_heads} attention heads"
    if q.engine not in ENGINES:
        return f"unknown engine {q.engine!r}; use one of {', '.join(ENGINES)}"
    if q.batching not in ("continuous", "static"):
        return f"unknown batching {q.batching!r}"
    return ""


def _bands(q: PerfQuery) -> dict:
    cal = q.calibration
    return {"error_band": cal.error_band, "ttft_error_band": cal.ttft_error_band, "tpot_error_band": cal.tpot_error_band}


def _result(q: PerfQuery, s: _Setup, mem: MemoryBudget, pt: _Point, limit: str, feasible: bool = True,
            reason: str = "", kind: str = "") -> PerfEstimate:
    return PerfEstimate(
        feasible=feasible, reason=reason, reason_kind=kind, batch=pt.batch,
        memory_gib_per_gpu=mem.used_gib(pt.batch), weights_gib_per_gpu=mem.weights_gib,
        ttft_ms=pt.ttft_s * 1e3, tpot_ms=pt.tpot_s * 1e3, latency_ms=pt.latency_s * 1e3,
        requests_per_s=pt.requests_per_s if feasible else 0.0,
        output_tokens_per_s=pt.output_tokens_per_s if feasible else 0.0,
        binding_limit=limit, max_batch_vram=mem.max_batch, kv_cache_gib_per_gpu=pt.batch * mem.kv_gib_per_sequence,
        step_bound=pt.bound, tensor_parallel=s.tp, pipeline_stages=s.pp, **_bands(q),
    )


def estimate(q: PerfQuery) -> PerfEstimate:
    why = _unsupported(q)
    if why:
        return PerfEstimate(False, why, "unsupported", **_bands(q))
    mem = memory_budget(q)
    s = _setup(q)
    if mem.max_batch < 1:
        need = mem.used_gib(1)
        return PerfEstimate(
            False, f"does not fit in VRAM: needs ~{need:.1f} GiB per GPU ({mem.weights_gib:.1f} GiB weights) at "
            f"{q.precision} with {q.gpus_per_replica} GPU(s) per replica; {mem.budget_gib:.1f} GiB usable",
            "vram", memory_gib_per_gpu=need, weights_gib_per_gpu=mem.weights_gib, binding_limit="vram",
            max_batch_vram=0, tensor_parallel=s.tp, pipeline_stages=s.pp, **_bands(q))
    if q.batch is not None:
        return _pinned(q, s, mem, q.batch)
    return _best(q, s, mem)


def _pinned(q: PerfQuery, s: _Setup, mem: MemoryBudget, batch: int) -> PerfEstimate:
    pt = _evaluate(s, q, max(batch, 1))
    if batch > mem.max_batch:
        return _result(q, s, mem, pt, "vram", False,
                       f"batch {batch} does not fit in VRAM: at most {mem.max_batch} sequences of "
                       f"{q.prompt_tokens + q.output_tokens} tokens", "vram")
    kind, why = _violation(q, pt)
    if kind:
        return _result(q, s, mem, pt, "slo", False, why, kind)
    return _result(q, s, mem, pt, pt.bound)


def _best(q: PerfQuery, s: _Setup, mem: MemoryBudget) -> PerfEstimate:
    cap = min(mem.max_batch, q.calibration.max_batch)
    top = _evaluate(s, q, cap)
    if not _violation(q, top)[0]:
        return _result(q, s, mem, top, "vram" if mem.max_batch <= q.calibration.max_batch else top.bound)
    low = _evaluate(s, q, 1)
    kind, why = _violation(q, low)
    if kind:
        return _result(q, s, mem, low, "slo", False, why, kind)
    lo, hi = 1, cap  # lo meets the SLOs, hi misses them
    best = low
    while hi - lo > 1:
        mid = (lo + hi) // 2
        pt = _evaluate(s, q, mid)
        if _violation(q, pt)[0]:
            hi = mid
        else:
            lo, best = mid, pt
    return _result(q, s, mem, best, "slo")


# ---------------------------------------------------------------- hook for queueing and simulation
def step_time_fn(q: PerfQuery):
    """The replica's engine step as a function, for the queueing model and the simulator.

    Returns `seconds(decode_seqs, decode_context_tokens, prefill_tokens, prefill_pairs)`:
    the time of one continuous-batching step (every stage of the replica, as `_pipelined`)
    that decodes one token for each of `decode_seqs` sequences whose contexts sum to
    `decode_context_tokens`, and prefills `prefill_tokens` prompt tokens whose causal
    attention covers `prefill_pairs` (token, earlier token) pairs - a whole prompt of P
    tokens is P x P / 2 pairs; its chunk from position a to a + n is n x (2a + n) / 2.
    The same physics as `estimate` (no SLO, no batch search); `q`'s lengths are not used.
    """
    s = _setup(q)

    def seconds(decode_seqs: float, decode_context_tokens: float, prefill_tokens: float,
                prefill_pairs: float) -> float:
        ctx = decode_context_tokens / decode_seqs if decode_seqs > 0 else 0.0
        span = 2.0 * prefill_pairs / prefill_tokens if prefill_tokens > 0 else 0.0  # `prompt` of _pass
        return _pipelined(s, max(decode_seqs, 1.0), decode_seqs, ctx, prefill_tokens, span).seconds

    return seconds
