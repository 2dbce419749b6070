"""Interim roofline estimate for LLM serving (replaced by the calibrated model of issue 3).

Per GPU of a tensor-parallel group of size TP:
  memory   = weights/TP + batch x (prompt + output) x kv_per_token / TP + overhead
  decode   = max(bytes read / (TP x bw x eff_bw), 2 x P_active x batch / (TP x flops x eff_c))
             + 2 x layers all-reduces (ring, 2(TP-1)/TP of batch x hidden x 2 bytes) + latency per call
  prefill  = 2 x P_active x prompt / (TP x flops x eff_c)
The batch that maximises throughput while TTFT/TPOT/latency SLOs hold is chosen.
"""

from __future__ import annotations

from solver.perf.api import BYTES_PER_ELEMENT, PerfEstimate, PerfQuery

GIB = 1024**3


def _link_gbs(q: PerfQuery) -> tuple[float, float]:
    """(GB/s per GPU, latency us per all-reduce) of the tensor-parallel link."""
    lat = dict(q.calibration.allreduce_latency_us)
    if q.interconnect == "nvlink" and q.gpu.nvlink_gbs:
        return q.gpu.nvlink_gbs / 2, lat["nvlink"]  # one direction
    gen = q.gpu.pcie_gen or 4
    return {3: 16.0, 4: 32.0, 5: 64.0}.get(gen, 32.0) * 0.8, lat["pcie"]


def _step_ms(q: PerfQuery, batch: int, ctx_tokens: float) -> tuple[float, str]:
    tp = q.gpus_per_replica
    m = q.model
    wb = BYTES_PER_ELEMENT[q.precision]
    kvb = BYTES_PER_ELEMENT[q.kv_precision or ("fp16" if q.precision == "int8" else q.precision)]
    cal = q.calibration
    bw = q.gpu.memory_bandwidth_gbs * 1e9 * cal.bandwidth_efficiency
    flops = q.gpu.tflops(q.precision) * 1e12 * cal.compute_efficiency
    bytes_read = m.params_b * 1e9 * wb + batch * ctx_tokens * m.kv_bytes_per_token(kvb)
    t_mem = bytes_read / (tp * bw)
    t_cmp = 2 * m.compute_params_b * 1e9 * batch / (tp * flops)
    t_comm = 0.0
    if tp > 1:
        link, lat_us = _link_gbs(q)
        msg = batch * m.hidden_size * 2.0
        t_comm = 2 * m.layers * (2 * (tp - 1) / tp * msg / (link * 1e9) + lat_us * 1e-6)
    base = max(t_mem, t_cmp)
    limit = "memory_bandwidth" if t_mem >= t_cmp else "compute"
    if t_comm > base:
        limit = "interconnect"
    return (base + t_comm) * 1e3 / cal.engine_factor(q.engine), limit


def estimate(q: PerfQuery) -> PerfEstimate:
    m, gpu, tp = q.model, q.gpu, q.gpus_per_replica
    if gpu.memory_bandwidth_gbs is None or gpu.tflops(q.precision) is None:
        return PerfEstimate(False, f"{gpu.name} has no bandwidth or {q.precision} FLOP/s figure in the catalog",
                            "unsupported")
    cal = q.calibration
    wb = BYTES_PER_ELEMENT[q.precision]
    kvb = BYTES_PER_ELEMENT[q.kv_precision or ("fp16" if q.precision == "int8" else q.precision)]
    budget_gib = q.usable_memory_gib * cal.usable_memory_fraction
    weights_gib = m.params_b * 1e9 * wb / tp / GIB
    seq = q.prompt_tokens + q.output_tokens
    kv_gib_per_seq = seq * m.kv_bytes_per_token(kvb) / tp / GIB
    free_gib = budget_gib - weights_gib - cal.runtime_overhead_gib
    if free_gib < kv_gib_per_seq:
        need = weights_gib + cal.runtime_overhead_gib + kv_gib_per_seq
        return PerfEstimate(False, f"does not fit in VRAM: needs ~{need:.0f} GiB per GPU at {q.precision} "
                            f"with {tp} GPU(s) per replica, {budget_gib:.0f} GiB usable",
                            "vram", memory_gib_per_gpu=need, weights_gib_per_gpu=weights_gib, binding_limit="vram")
    max_batch = int(free_gib // kv_gib_per_seq)
    flops = gpu.tflops(q.precision) * 1e12 * cal.compute_efficiency
    prefill_ms = 2 * m.compute_params_b * 1e9 * q.prompt_tokens / (tp * flops) * 1e3 / cal.engine_factor(q.engine)

    def evaluate(batch: int) -> PerfEstimate:
        tpot, limit = _step_ms(q, batch, q.prompt_tokens + q.output_tokens / 2)
        # Continuous batching: prefills of the other sequences interleave with decode steps.
        tpot_eff = tpot + prefill_ms * (batch - 1) / max(q.output_tokens, 1) / max(batch, 1)
        ttft = prefill_ms * (1 + 0.5 * (batch - 1) / max(q.output_tokens, 1)) + tpot
        latency = ttft + q.output_tokens * tpot_eff
        rps = batch / (latency / 1e3)
        mem = weights_gib + cal.runtime_overhead_gib + batch * kv_gib_per_seq
        return PerfEstimate(True, "", "", batch, mem, weights_gib, ttft, tpot_eff, latency, rps,
                            rps * q.output_tokens, limit if batch < max_batch else "vram", cal.error_band)

    def violation(e: PerfEstimate) -> tuple[str, str]:
        if q.ttft_slo_ms is not None and e.ttft_ms > q.ttft_slo_ms:
            return "ttft", f"misses the TTFT SLO: {e.ttft_ms:.0f} ms > {q.ttft_slo_ms:g} ms"
        if q.tpot_slo_ms is not None and e.tpot_ms > q.tpot_slo_ms:
            return "tpot", f"misses the TPOT SLO: {e.tpot_ms:.1f} ms > {q.tpot_slo_ms:g} ms"
        if q.latency_slo_ms is not None and e.latency_ms > q.latency_slo_ms:
            return "latency", f"misses the latency SLO: {e.latency_ms:.0f} ms > {q.latency_slo_ms:g} ms"
        return "", ""

    if q.batch is not None:
        if q.batch > max_batch:
            return PerfEstimate(False, f"batch {q.batch} does not fit in VRAM (max {max_batch})", "vram",
                                batch=q.batch, binding_limit="vram")
        e = evaluate(q.batch)
        kind, why = violation(e)
        return e if not kind else PerfEstimate(False, why, kind, **_fields(e))
    best = None
    first_violation = None
    b = 1
    while b <= max_batch:
        e = evaluate(b)
        kind, why = violation(e)
        if kind:
            first_violation = first_violation or (kind, why, e)
            if b == 1:
                break
        elif best is None or e.requests_per_s > best.requests_per_s:
            best = e
        b = b * 2 if b < 8 else b + max(8, b // 4)
    if best is None:
        kind, why, e = first_violation
        return PerfEstimate(False, why, kind, **_fields(e))
    if first_violation is not None and best.batch < max_batch:
        best = PerfEstimate(**{**best.__dict__, "binding_limit": "slo"})
    return best


def _fields(e: PerfEstimate) -> dict:
    d = dict(e.__dict__)
    for k in ("feasible", "reason", "reason_kind"):
        d.pop(k)
    return d
