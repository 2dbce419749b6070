# ORACLE - FROZEN COPY, TEST USE ONLY. Do not import from the product, do not edit.
#
# This is solver/perf/llm.py exactly as it was before the physics was vectorised (issue 10,
# branch `fastperf`, copied from main at fd54706). tests/test_perf_vectorised.py compares
# the current model (`estimate`, `estimate_many`) against it on thousands of random
# queries: same feasibility, reason kind, batch, and values within 1e-9 relative.
# When the physics is changed on purpose, the oracle is replaced by the new reference in
# the same commit (and that commit says why).
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from solver.perf import calibration as _fit
from solver.perf.api import BYTES_PER_ELEMENT, KV_PRECISIONS, PerfEstimate, PerfQuery

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


# ---------------------------------------------------------------- engine policies and memory
@dataclass(frozen=True)
class EnginePolicy:
    """How the engine sizes its KV cache and caps its batch (calibration.ENGINE_POLICIES)."""

    kv_policy: str  # "total" | "free" | "static"
    memory_fraction: float  # in the policy's own meaning
    max_batch: int
    token_budget: int  # tokens per forward pass the engine reserves activations for


def _profile(q: PerfQuery):
    # The engine version's defaults come from one table (solver/perf/engine_profile.py);
    # the oracle checks what the physics makes of them, not the table itself.
    from solver.perf.engine_profile import engine_profile

    tp, _ = parallelism(q)
    return engine_profile(q.engine, q.gpu.memory_gib, q.gpu.name, tp, q.max_model_len or q.model.max_context_tokens,
                          q.calibration.activation_tokens)


def engine_policy(q: PerfQuery) -> EnginePolicy:
    """The engine version's defaults, replaced by the calibration's overrides, replaced by the service's engine_options."""
    cal = q.calibration
    p = _profile(q)
    kind, fraction, cap = p.memory_policy, p.memory_fraction, p.max_num_seqs
    fraction = q.kv_cache_memory_fraction or cal.usable_memory_fraction or fraction
    cap = q.max_batch or cal.max_batch or cap
    return EnginePolicy(kind, fraction, cap, max(q.max_num_batched_tokens or p.token_budget, 1))


@dataclass(frozen=True)
class MemoryBudget:
    """Per GPU, GiB. Activations, and so the KV room, depend on the batch."""

    memory_gib: float  # the GPU's memory (the engine's fraction is applied below)
    policy: EnginePolicy
    weights_gib: float
    overhead_gib: float
    kv_gib_per_sequence: float  # at prompt + output tokens
    activation_gib_per_token: float  # one token of one forward pass
    logits_gib_per_sequence: float
    static_prompt_tokens: int | None  # static batching: every prompt of the batch in one pass

    def activation_gib(self, batch: int) -> float:
        """Continuous batching: the engine reserves a pass of its token budget and the logits
        of its batch cap (vLLM profiles exactly that); a batch above either needs more.
        Static batching: the batch's prompts go through in one pass, B x P tokens."""
        if self.static_prompt_tokens is not None:
            tokens = batch * max(self.static_prompt_tokens, 1)
            return tokens * self.activation_gib_per_token + batch * self.logits_gib_per_sequence
        tokens = max(self.policy.token_budget, batch)
        return tokens * self.activation_gib_per_token + max(self.policy.max_batch, batch) * self.logits_gib_per_sequence

    def kv_capacity_gib(self, batch: int = 1) -> float:
        f, a = self.policy.memory_fraction, self.activation_gib(batch)
        if self.policy.kv_policy == "free":  # TensorRT-LLM: a fraction of what is left
            return f * (self.memory_gib - self.weights_gib - self.overhead_gib - a)
        if self.policy.kv_policy == "static":  # SGLang: activations live outside the static pool
            spill = max(a + self.overhead_gib - (1 - f) * self.memory_gib, 0.0)
            return f * self.memory_gib - self.weights_gib - spill
        return f * self.memory_gib - self.weights_gib - self.overhead_gib - a  # vLLM

    def fits(self, batch: int) -> bool:
        return batch * self.kv_gib_per_sequence <= self.kv_capacity_gib(batch) + 1e-12

    @cached_property
    def max_batch(self) -> int:
        """The largest batch whose KV cache fits beside the activations it needs."""
        if self.kv_gib_per_sequence <= 0:
            return 10**9
        if not self.fits(1):
            return 0
        hi = int(self.kv_capacity_gib(1) / self.kv_gib_per_sequence)  # room only shrinks as the batch grows
        if self.fits(hi):
            return hi
        lo = 1  # fits; hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.fits(mid) else (lo, mid)
        return lo

    def used_gib(self, batch: int) -> float:
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
    graph_max_batch: float = math.inf  # decode steps of more sequences run eagerly
    prefill_first: bool = False  # prompts in prefill-only steps between decode steps
    step_overhead_s: float = 0.0  # host time per engine step (vLLM V0)


@dataclass(frozen=True)
class _Pass:
    seconds: float
    bound: str  # largest term
    memory_s: float  # weights and KV cache read
    compute_s: float  # GEMM and attention FLOPs

    @property
    def regime(self) -> str:
        return "memory" if self.memory_s >= self.compute_s else "compute"


def kv_precision(q: PerfQuery) -> str:
    """The KV cache's element type: the service's engine_options.kv_cache_dtype, else the
    engines' default - fp8 beside fp8 weights (the calibration's fp8 rows), 16-bit otherwise."""
    if q.kv_precision:
        return q.kv_precision
    return "fp8" if q.precision in ("fp8", "fp4") and _profile(q).kv_auto_fp8 else "fp16"


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


def kv_gib_per_sequence(q: PerfQuery, tokens: float) -> float:
    """KV cache of one sequence of `tokens` tokens on one GPU: sliding-window layers keep at
    most the window; MLA keeps one latent per layer on every TP rank."""
    m = q.model
    tp, pp = parallelism(q)
    per_layer = m.kv_elements_per_token_layer(tp) * BYTES_PER_ELEMENT[kv_precision(q)]
    return per_layer * m.kv_tokens(tokens) / pp / GIB


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


def _setup(q: PerfQuery) -> _Setup:
    m, cal, gpu = q.model, q.calibration, q.gpu
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
    return _Setup(
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
        engine_factor=cal.speed_factor(q.engine, _profile(q).generation),
        chunk_tokens=engine_policy(q).token_budget,
        request_overhead_s=cal.request_overhead_ms * 1e-3 if _profile(q).serving else 0.0,
        token_overhead_s=cal.token_overhead_us * 1e-6 if _profile(q).host_scheduled else 0.0,
        graph_max_batch=float(q.cuda_graph_max_batch if q.cuda_graph_max_batch is not None
                              else _profile(q).graph_max_batch),
        prefill_first=(q.scheduler or _profile(q).scheduler) == "prefill_first",
        step_overhead_s=(cal.v0_prefill_overhead_us + cal.v0_prefill_tp_overhead_us * (tp - 1)) * 1e-6
        if _profile(q).generation == "vllm-v0" else 0.0,
    )


# ---------------------------------------------------------------- one pass, one batch
def _pass(s: _Setup, n_dec: float, ctx: float, n_pre: float, prompt: float, eager: bool = False,
          host: bool = True) -> _Pass:
    """One forward pass of one pipeline stage (per GPU of its TP group); `eager`: a pass
    that prefills a prompt for its first token (no CUDA graph); `host`: count the engine's
    per-sequence host time here (a pipeline counts it once per step instead)."""
    tokens = n_dec + n_pre
    touched = 1.0
    if s.experts > 1:  # distinct experts that at least one token is routed to
        touched = 1.0 - (1.0 - s.active_experts / s.experts) ** max(tokens, 1.0)
    weight_bytes = s.dense_weight_bytes + s.expert_weight_bytes * touched
    sampled = n_dec + (n_pre / prompt if prompt else 0.0)
    gemm_flops = s.body_flops_per_token * tokens + s.lm_head_flops_per_token * sampled
    t_weights = weight_bytes / s.bw
    t_act = tokens * s.layers * s.activation_bytes_per_token / s.bw  # elementwise kernels: they add
    t_gemm_flops = gemm_flops / s.flops
    if s.experts > 1 and s.expert_flops_per_token:
        # Routed experts multiply in grouped GEMMs (plus routing, token permutation and
        # activation quantisation per expert), which the public FP4 MoE rows show running at
        # a fraction of the dense GEMM rate; fitted (docs/performance-model.md, "MoE").
        t_gemm_flops += s.expert_flops_per_token * tokens * (1.0 / s.moe_compute_efficiency - 1.0) / s.flops
    kv_tokens = s.full_layers * ctx + s.windowed_layers * min(ctx, s.window)  # token-layers of KV read
    t_kv = n_dec * kv_tokens * s.kv_layer_bytes / s.kv_bw
    t_attn_flops = s.attn_decode_flops * n_dec * kv_tokens / s.attn_flops
    pairs = s.full_layers * prompt / 2 + s.windowed_layers * _window_pairs(prompt, s.window)  # causal pairs per token
    t_prefill_attn = s.attn_prefill_flops * n_pre * pairs / s.attn_flops
    t_comm = 0.0
    if s.tp > 1:
        t_comm = 2 * s.layers * (s.allreduce_traffic * tokens * s.hidden * ACTIVATION_BYTES / s.link_bw
                                 + s.allreduce_latency_s)
    t_over = s.layers * (s.prefill_layer_overhead_s if eager or n_dec > s.graph_max_batch else s.layer_overhead_s)
    if host and eager:
        t_over += s.step_overhead_s
    if host:  # the engine's host work per sequence (scheduling, sampling, output processing)
        t_over += s.token_overhead_s * sampled
    terms = {
        "memory_bandwidth": (t_weights if t_weights >= t_gemm_flops else 0.0) + (t_kv if t_kv >= t_attn_flops else 0.0)
        + t_act,
        "compute": (t_gemm_flops if t_gemm_flops > t_weights else 0.0)
        + (t_attn_flops if t_attn_flops > t_kv else 0.0) + t_prefill_attn,
        "interconnect": t_comm,
        "overhead": t_over,
    }
    total = sum(terms.values()) / s.engine_factor
    return _Pass(total, max(terms, key=terms.get), t_weights + t_kv + t_act,
                 t_gemm_flops + t_attn_flops + t_prefill_attn)


def _window_pairs(prompt: float, window: float) -> float:
    """Mean number of earlier tokens a prompt token attends to under a sliding window."""
    if prompt <= window:
        return prompt / 2
    return window - window * window / (2 * prompt)


def _pipelined(s: _Setup, batch: float, n_dec: float, ctx: float, n_pre: float, prompt: float,
               eager: bool = False) -> _Pass:
    """Time for every in-flight sequence to advance one pass through all stages."""
    if s.pp <= 1:
        return _pass(s, n_dec, ctx, n_pre, prompt, eager)
    micro = max(min(s.pp, int(batch)), 1)  # micro-batches keep the stages busy
    stage = _pass(s, n_dec / micro, ctx, n_pre / micro, prompt, eager, host=False)
    hand_off = (n_dec + n_pre) / micro * s.hidden * ACTIVATION_BYTES / s.stage_link_bw + s.stage_latency_s
    # A micro-batch crosses all stages; with `micro` of them in flight a stage is busy micro x stage.
    seconds = max(s.pp * stage.seconds + (s.pp - 1) * hand_off, micro * stage.seconds)
    seconds += (s.token_overhead_s * (n_dec + (n_pre / prompt if prompt else 0.0))
                + (s.step_overhead_s if eager else 0.0)) / s.engine_factor
    return _Pass(seconds, stage.bound, stage.memory_s, stage.compute_s)


@dataclass(frozen=True)
class _Point:
    batch: int
    ttft_s: float
    tpot_s: float
    latency_s: float
    requests_per_s: float
    output_tokens_per_s: float
    bound: str
    ttft_regime: str
    tpot_regime: str

    @property
    def throughput_regime(self) -> str:
        """The regime of the phase that takes most of a request's time."""
        decode = self.latency_s - self.ttft_s
        return self.tpot_regime if decode >= self.ttft_s else self.ttft_regime


def _continuous(s: _Setup, q: PerfQuery, batch: int) -> _Point:
    p, o = float(q.prompt_tokens), float(max(q.output_tokens, 1))
    # The other B - 1 sequences' prompts ride along in the decode steps; a request's own
    # prompt is prefilled in the step that makes its first token (its TTFT).
    step = _pipelined(s, batch, batch, p + o / 2, (batch - 1) * p / o, p)
    seconds, bound, regime = step.seconds, step.bound, step.regime
    if s.prefill_first:  # prompts in prefill-only steps: (B - 1) / O of them per decode step
        decode = _pipelined(s, batch, batch, p + o / 2, 0, p)
        k = (batch - 1) / o
        pre = _pipelined(s, batch, 0, 0, max(k, 1) * p, p, eager=True)
        seconds = decode.seconds + (k * pre.seconds if k < 1 else pre.seconds)
        bound, regime = decode.bound, decode.regime
    chunks = max(math.ceil(p / s.chunk_tokens), 1)
    first = _pipelined(s, batch, 0 if s.prefill_first else batch - 1, p + o / 2, p / chunks, p, eager=True)
    wait = 0.5 * seconds * (1 - 1 / batch)  # an idle engine (batch 1) starts at once
    ttft = wait + chunks * first.seconds + s.request_overhead_s
    latency = ttft + (o - 1) * seconds
    rps = batch / latency
    return _Point(batch, ttft, seconds, latency, rps, rps * o, bound, first.regime, regime)


def _static(s: _Setup, q: PerfQuery, batch: int) -> _Point:
    p, o = float(q.prompt_tokens), float(max(q.output_tokens, 1))
    prefill = _pipelined(s, batch, 0, 0, batch * p, p, eager=True) if p else None
    step = _pipelined(s, batch, batch, p + o / 2, 0, p)
    first = prefill.seconds + s.request_overhead_s if prefill else step.seconds
    total = first + (o - 1) * step.seconds
    return _Point(batch, first, step.seconds, total, batch / total, batch * o / total, step.bound,
                  (prefill or step).regime, step.regime)


def _evaluate(s: _Setup, q: PerfQuery, batch: int) -> _Point:
    return _static(s, q, batch) if q.batching == "static" else _continuous(s, q, batch)


# ---------------------------------------------------------------- bands and SLOs
def _bands(q: PerfQuery, pt: _Point | None = None) -> dict:
    """The error bands of the estimate's regimes (pooled per metric when there is no point)."""
    cal = q.calibration
    if pt is None:
        return {"error_band": cal.error_band, "ttft_error_band": cal.ttft_error_band,
                "tpot_error_band": cal.tpot_error_band}
    return {"error_band": cal.band("throughput", pt.throughput_regime),
            "ttft_error_band": cal.band("ttft", pt.ttft_regime), "tpot_error_band": cal.band("tpot", pt.tpot_regime)}


def _checked(q: PerfQuery, pt: _Point) -> tuple[float, float, float]:
    """(TTFT, TPOT, latency) in ms as the SLOs see them: with size_with_error_band, the
    pessimistic end of each band."""
    ttft, tpot = pt.ttft_s * 1e3, pt.tpot_s * 1e3
    if not q.size_with_error_band:
        return ttft, tpot, pt.latency_s * 1e3
    b = _bands(q, pt)
    ttft_hi, decode_hi = ttft * (1 + b["ttft_error_band"]), (pt.latency_s - pt.ttft_s) * 1e3 * (1 + b["tpot_error_band"])
    return ttft_hi, tpot * (1 + b["tpot_error_band"]), ttft_hi + decode_hi


def _violation(q: PerfQuery, pt: _Point) -> tuple[str, str]:
    ttft, tpot, latency = _checked(q, pt)
    margin = " with the error band" if q.size_with_error_band else ""
    checks = (("ttft", "TTFT", q.ttft_slo_ms, ttft), ("tpot", "TPOT", q.tpot_slo_ms, tpot),
              ("latency", "latency", q.latency_slo_ms, latency))
    for kind, label, bound, value in checks:
        if bound is not None and value > bound:
            return kind, f"misses the {label} SLO: {value:.1f} ms{margin} > {bound:g} ms even at batch {pt.batch}"
    return "", ""


def _unsupported(q: PerfQuery) -> str:
    gpu, m = q.gpu, q.model
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
    from solver.perf.engine_profile import check_engine

    if check_engine(q.engine):
        return check_engine(q.engine)
    if q.batching not in ("continuous", "static"):
        return f"unknown batching {q.batching!r}"
    if q.max_batch is not None and q.max_batch < 1:
        return f"max_batch must be a positive whole number, got {q.max_batch}"
    if q.kv_cache_memory_fraction is not None and not 0 < q.kv_cache_memory_fraction <= 1:
        return f"kv_cache_memory_fraction must be in (0, 1], got {q.kv_cache_memory_fraction}"
    return ""


# ---------------------------------------------------------------- estimates
def _result(q: PerfQuery, s: _Setup, mem: MemoryBudget, pt: _Point, limit: str, feasible: bool = True,
            reason: str = "", kind: str = "") -> PerfEstimate:
    return PerfEstimate(
        feasible=feasible, reason=reason, reason_kind=kind, batch=pt.batch,
        memory_gib_per_gpu=mem.used_gib(pt.batch), weights_gib_per_gpu=mem.weights_gib,
        ttft_ms=pt.ttft_s * 1e3, tpot_ms=pt.tpot_s * 1e3, latency_ms=pt.latency_s * 1e3,
        requests_per_s=pt.requests_per_s if feasible else 0.0,
        output_tokens_per_s=pt.output_tokens_per_s if feasible else 0.0,
        binding_limit=limit, max_batch_vram=mem.max_batch, kv_cache_gib_per_gpu=pt.batch * mem.kv_gib_per_sequence,
        step_bound=pt.bound, tensor_parallel=s.tp, pipeline_stages=s.pp, **_bands(q, pt),
    )


def estimate(q: PerfQuery) -> PerfEstimate:
    why = _unsupported(q)
    if why:
        return PerfEstimate(False, why, "unsupported", **_bands(q))
    mem = memory_budget(q)
    s = _setup(q)
    if mem.max_batch < 1:
        need = mem.used_gib(1)
        room = mem.kv_capacity_gib(1)
        return PerfEstimate(
            False, f"does not fit in VRAM: needs ~{need:.1f} GiB per GPU ({mem.weights_gib:.1f} GiB weights) at "
            f"{q.precision} with {q.gpus_per_replica} GPU(s) per replica; {q.engine} at memory fraction "
            f"{mem.policy.memory_fraction:g} of {mem.memory_gib:.1f} GiB leaves "
            f"{f'{room:.1f} GiB' if room > 0 else 'no room'} for the KV cache, one sequence needs "
            f"{mem.kv_gib_per_sequence:.2f} GiB",
            "vram", memory_gib_per_gpu=need, weights_gib_per_gpu=mem.weights_gib, binding_limit="vram",
            max_batch_vram=0, tensor_parallel=s.tp, pipeline_stages=s.pp, **_bands(q))
    if q.batch is not None:
        return _pinned(q, s, mem, q.batch)
    return _best(q, s, mem)


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
    pt = _evaluate(_setup(q), q, max(q.batch or 1, 1))
    return Timings(pt.ttft_s * 1e3, pt.tpot_s * 1e3, pt.latency_s * 1e3, pt.output_tokens_per_s, pt.ttft_regime,
                   pt.tpot_regime, pt.throughput_regime)


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
    engine_cap = mem.policy.max_batch
    cap = min(mem.max_batch, engine_cap)
    top = _evaluate(s, q, cap)
    if not _violation(q, top)[0]:
        return _result(q, s, mem, top, "vram" if mem.max_batch <= engine_cap else top.bound)
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
