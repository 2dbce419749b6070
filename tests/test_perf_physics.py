"""Issue 8's physics: engine memory and batch policies, activation memory, KV-read efficiency,
in-switch reduction on NVSwitch, activation traffic (L40S), eager prefill, the serving loop.

Each test fails on the model before issue 8 (one memory fraction and one 256 cap for every
engine, a fixed activation reserve, KV read like weights, ring all-reduce on Hopper, no
per-token DRAM traffic)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from solver.catalog import default_catalog
from solver.models.library import get_model
from solver.perf import Calibration, PerfQuery, estimate
from solver.perf import calibration as fit
from solver.perf.llm import engine_policy, memory_budget, timings

GPUS = default_catalog().gpus
CHAT = dict(prompt_tokens=512, output_tokens=256)


def query(model: str, gpu: str, gpus: int = 1, precision: str = "fp16", **kw) -> PerfQuery:
    g = GPUS[gpu]
    interconnect = "none" if gpus == 1 else "nvlink" if g.form_factor == "SXM" and g.nvlink_gbs else "pcie"
    return PerfQuery(model=get_model(model), gpu=g, gpus_per_replica=gpus, interconnect=interconnect,
                     usable_memory_gib=g.memory_gib, precision=precision, **kw)


# ---------------------------------------------------------------- engine policies
def test_tensorrt_llm_batches_up_to_2048_where_vllm_stops_at_its_version_cap():
    kw = dict(precision="fp8", prompt_tokens=128, output_tokens=128, kv_precision="fp8")
    v0 = estimate(query("llama-3.1-8b", "H200", engine="vllm-0.7", **kw))
    v1 = estimate(query("llama-3.1-8b", "H200", **kw))  # the newest vLLM: V1's cap on a 141 GB GPU
    trt = estimate(query("llama-3.1-8b", "H200", engine="tensorrt-llm", **kw))
    assert v0.batch == 256 and v0.binding_limit != "vram" and v1.batch == 1024
    assert trt.batch == 2048 and trt.output_tokens_per_s > 1.2 * v0.output_tokens_per_s
    assert engine_policy(query("llama-3.1-8b", "H200", engine="sglang")).max_batch == 2048


def test_each_engine_sizes_its_kv_cache_its_own_way():
    """vLLM: 0.9 x all memory - weights - activations (0.92 from 0.20); TensorRT-LLM: 0.9 x (memory -
    weights - activations); SGLang: mem_fraction_static x all memory - weights, activations outside."""
    rooms = {}
    for engine in ("vllm-0.9", "vllm", "tensorrt-llm", "sglang-0.4.3"):
        m = memory_budget(query("llama-3.1-8b", "H100-SXM", engine=engine, **CHAT))
        w, a, o = m.weights_gib, m.activation_gib(1), m.overhead_gib
        rooms[engine] = m.kv_capacity_gib(1)
        expected = {"vllm-0.9": 0.9 * 80 - w - a - o, "vllm": 0.92 * 80 - w - a - o,
                    "tensorrt-llm": 0.9 * (80 - w - a - o), "sglang-0.4.3": 0.88 * 80 - w}
        assert rooms[engine] == pytest.approx(expected[engine]), engine
    assert len({round(v, 3) for v in rooms.values()}) == 4
    # SGLang's static fraction shrinks with tensor parallelism (communication buffers; its
    # 0.4 releases before 0.4.6 by a table, docs/engines.md).
    fractions = [engine_policy(query("llama-3.1-70b", "H100-SXM", gpus=n, engine="sglang-0.4.3")).memory_fraction
                 for n in (1, 2, 4, 8)]
    assert fractions == [0.88, 0.87, 0.85, 0.81]


def test_engine_options_override_the_defaults():
    base = query("llama-3.1-8b", "H200", **CHAT)
    capped = estimate(replace(base, max_batch=48))
    assert capped.batch == 48 and estimate(base).batch == engine_policy(base).max_batch == 1024
    smaller = estimate(replace(base, kv_cache_memory_fraction=0.5))
    assert smaller.max_batch_vram < 0.6 * estimate(base).max_batch_vram
    assert smaller.memory_gib_per_gpu <= 0.5 * 141 + 1e-9  # vLLM's meaning: of all memory
    # Precedence: the service's engine_options, then the workload's calibration, then the engine's default.
    cal = Calibration.from_overrides({"max_batch": 100})
    assert estimate(replace(base, calibration=cal)).batch == 100
    assert estimate(replace(base, calibration=cal, max_batch=32)).batch == 32


@pytest.mark.parametrize("field,value", [("max_batch", 0), ("kv_cache_memory_fraction", 0.0),
                                         ("kv_cache_memory_fraction", 1.5)])
def test_impossible_engine_options_are_unsupported_not_a_crash(field, value):
    e = estimate(replace(query("llama-3.1-8b", "H100-SXM", **CHAT), **{field: value}))
    assert not e.feasible and e.reason_kind == "unsupported" and field in e.reason


# ---------------------------------------------------------------- activation memory
def test_prefill_activation_memory_grows_with_batch_times_prompt():
    """Static batching prefills every prompt of the batch in one pass: activations ~ B x P."""
    m = memory_budget(query("llama-3.1-8b", "H100-SXM", batching="static", prompt_tokens=2048, output_tokens=128))
    assert m.activation_gib(256) == pytest.approx(4 * m.activation_gib(64))
    assert m.activation_gib(256) > 10 * memory_budget(query("llama-3.1-8b", "H100-SXM", **CHAT)).activation_gib(256)
    # So the batch that fits is smaller than a fixed reserve would allow.
    fixed = memory_budget(query("llama-3.1-8b", "H100-SXM", prompt_tokens=2048, output_tokens=128))
    assert m.max_batch < 0.8 * fixed.max_batch


def test_continuous_batching_reserves_for_its_token_budget_and_batch_cap():
    vllm = memory_budget(query("llama-3.1-8b", "H100-SXM", engine="vllm-0.9", **CHAT))
    trt = memory_budget(query("llama-3.1-8b", "H100-SXM", engine="tensorrt-llm", **CHAT))
    # The logits of 2048 sequences (128k vocabulary, fp32) outweigh those of vLLM 0.9's 1024.
    assert trt.activation_gib(1) - vllm.activation_gib(1) == pytest.approx(
        (2048 - 1024) * 128256 * 4 / 1024**3, rel=1e-6)
    # A batch above the engine's per-pass token budget needs a larger pass.
    assert vllm.activation_gib(16_384) > 1.9 * vllm.activation_gib(8192)
    assert vllm.activation_gib(1) == vllm.activation_gib(256)


# ---------------------------------------------------------------- KV reads, activation traffic
def test_kv_cache_reads_run_below_weight_streaming_and_slow_long_contexts():
    cal = Calibration()
    assert cal.kv_bandwidth_efficiency < cal.bandwidth_efficiency
    as_weights = replace(cal, kv_bandwidth_efficiency=cal.bandwidth_efficiency)
    long = query("llama-3.1-8b", "H100-SXM", batch=64, prompt_tokens=8192, output_tokens=512, batching="static")
    short = query("llama-3.1-8b", "H100-SXM", batch=1, prompt_tokens=64, output_tokens=64)
    slowdown_long = timings(long).tpot_ms / timings(replace(long, calibration=as_weights)).tpot_ms
    slowdown_short = timings(short).tpot_ms / timings(replace(short, calibration=as_weights)).tpot_ms
    # KV reads at kv_bandwidth_efficiency / bandwidth_efficiency of the weights' rate (0.95 as fitted)
    assert slowdown_long > 1.02 and slowdown_short < 1.01 and slowdown_long > slowdown_short + 0.02


def test_large_batches_pay_for_activation_traffic_most_on_low_bandwidth_gpus():
    """The L40S's GDDR6 (864 GB/s against 733 FP8 TFLOP/s) carries every activation that crosses
    DRAM between kernels; the same traffic weighs less on an H100 (3.35 TB/s)."""
    no_traffic = replace(Calibration(), activation_passes=0.0)

    def share(gpu: str) -> float:
        q = query("llama-3.1-8b", gpu, precision="fp8", batch=256, prompt_tokens=128, output_tokens=128)
        return 1 - timings(q).output_tokens_per_s / timings(replace(q, calibration=no_traffic)).output_tokens_per_s

    assert share("L40S") > 0.1 and share("L40S") > 1.3 * share("H100-SXM")
    assert share("L40S") > share("H200")


def test_the_l40s_calibration_row_at_batch_256_is_no_longer_overestimated():
    """TensorRT-LLM 0.9, Llama-2-7B fp8 on one L40S at batch 256: +14.9 % before issue 8."""
    case = next(c for c in fit.benchmark_cases()[0] if c.row == 3)
    assert case.query.gpu.name == "L40S" and case.query.batch == 256
    predicted, _ = fit.predict(case)
    assert abs(predicted / case.measured - 1) < 0.10


# ---------------------------------------------------------------- tensor parallelism on NVSwitch
def test_hopper_nvswitch_reduces_in_the_switch():
    """NVLink SHARP: each byte goes to the switch once and comes back summed, instead of
    2(TP-1)/TP times around a ring - TP 8 on H100 pays 1/1.75 of the ring's traffic."""
    h100 = GPUS["H100-SXM"]
    ring_h100 = replace(h100, architecture="Ampere (ring all-reduce)")
    base = dict(precision="fp8", batch=512, prompt_tokens=128, output_tokens=128, engine="tensorrt-llm")
    nvls = timings(query("llama-3.1-70b", "H100-SXM", gpus=8, **base))
    ring = timings(replace(query("llama-3.1-70b", "H100-SXM", gpus=8, **base), gpu=ring_h100))
    assert nvls.output_tokens_per_s > 1.2 * ring.output_tokens_per_s
    a100 = query("llama-3.1-70b", "A100-80GB", gpus=8, precision="fp16", batch=64, **CHAT)
    assert timings(a100).tpot_ms == timings(replace(a100, gpu=replace(a100.gpu, architecture="Ampere"))).tpot_ms


def test_nvlink_and_pcie_links_have_their_own_efficiency():
    cal = Calibration()
    faster_nvlink = replace(cal, nvlink_efficiency=cal.nvlink_efficiency * 2)
    nv = query("llama-3.1-70b", "H100-SXM", gpus=8, batch=256, **CHAT)
    pcie = query("llama-3.1-70b", "L40S", gpus=4, precision="fp8", batch=64, **CHAT)
    assert timings(replace(nv, calibration=faster_nvlink)).tpot_ms < timings(nv).tpot_ms
    assert timings(replace(pcie, calibration=faster_nvlink)).tpot_ms == timings(pcie).tpot_ms


# ---------------------------------------------------------------- first token
def test_serving_engines_add_their_per_request_time_to_ttft():
    cal = Calibration()
    q = query("llama-3.1-8b", "H100-SXM", batch=1, **CHAT)
    without = replace(cal, request_overhead_ms=0.0)
    for engine, expected in (("vllm", cal.request_overhead_ms), ("sglang", cal.request_overhead_ms),
                             ("tensorrt-llm", cal.request_overhead_ms), ("tensorrt-llm-0.9", 0.0)):
        qe = replace(q, engine=engine)
        assert timings(qe).ttft_ms - timings(replace(qe, calibration=without)).ttft_ms == pytest.approx(expected)
    assert cal.request_overhead_ms > 1


def test_prefill_launches_eagerly_and_decode_replays_graphs():
    cal = Calibration()
    q = query("llama-3.1-8b", "H100-SXM", batch=1, **CHAT)
    more_eager = replace(cal, layer_overhead_us=cal.layer_overhead_us + 100)
    t, t2 = timings(q), timings(replace(q, calibration=more_eager))
    # 32 layers x 100 us, prefill only, at the engine generation's speed (a factor divides pass times)
    assert t2.ttft_ms - t.ttft_ms == pytest.approx(32 * 100e-3 / cal.speed_factor("vllm", "vllm-v1"))
    assert t2.tpot_ms == pytest.approx(t.tpot_ms)
