"""What the physics takes from a serving engine id: its version's defaults and its generation.

`solver.perf.engines` reads the engines' documented defaults (data/engine_defaults.csv,
each fact cited); this module turns an engine id of a query ("vllm", "vllm-0.7",
"sglang-0.4", "tensorrt-llm-1.0", ...) into the few things the performance and queueing
models use - how the engine sizes its KV cache and caps its batch, its token budget per
step, how it schedules prefill against decode, how it admits sequences into the KV cache,
the largest decode batch it replays as a CUDA graph, and which family of host-side costs it
pays (`generation`). A service's engine_options override any of them (llm.engine_policy).

Ids that name no documented release keep their former meaning: "tensorrt-llm-0.9" is the
engine of the static-batching calibration rows (TensorRT-LLM 0.9's gptSessionBenchmark:
no serving loop), "lmdeploy-0.1" and "llama.cpp" have calibration-only constants, and
"vllm-0.5" is vLLM before 0.6's scheduler rewrite (engine factor 0.45, calibration.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from solver.perf import calibration as _fit

# Generations: engines whose serving loops behave alike; the calibration gives each its
# speed factor (calibration.ENGINE_FACTORS) and host costs.
#   vllm-v0:              vLLM before 0.8 - scheduling, input preparation and output
#                         processing run between GPU steps in the engine's own loop (V0)
#   vllm-v1:              vLLM 0.8 and later - V1 engine core, persistent batch
#   sglang-srt:           SGLang's runtime
#   tensorrt-llm-cpp:     TensorRT-LLM before 1.0 - engines built by trtllm-build, C++ runtime
#   tensorrt-llm-pytorch: TensorRT-LLM 1.0 and later - the PyTorch backend (trtllm-serve)
#   calibration:          engines of calibration rows only (no serving loop modelled)
GENERATIONS = ("vllm-v0", "vllm-v1", "sglang-srt", "tensorrt-llm-cpp", "tensorrt-llm-pytorch", "calibration")
# Context length assumed served when a model states none (vLLM V0's token budget and its
# long-context chunking rule read it).
_DEFAULT_CONTEXT = 8192


@dataclass(frozen=True)
class EngineProfile:
    engine: str  # the id as given
    family: str  # "vllm" | "sglang" | "tensorrt-llm" | "llama.cpp" | "lmdeploy"
    version: str  # "" for unversioned and calibration-only engines
    generation: str  # GENERATIONS
    memory_policy: str  # "total" | "free" | "static" (calibration.ENGINE_POLICIES' meanings)
    memory_fraction: float
    max_num_seqs: int
    token_budget: int  # tokens per step (vLLM max_num_batched_tokens, ...)
    scheduler: str  # "chunked_mixed" | "prefill_first"
    kv_admission: str  # "whole_sequence" | "paged_on_demand"
    graph_max_batch: int  # decode steps with more sequences run eagerly; a large number: always graphs
    kv_auto_fp8: bool  # "auto" KV-cache type is fp8 beside fp8/fp4 weights (the checkpoint declares it)
    serving: bool  # a serving loop before the first token (request_overhead_ms)
    host_scheduled: bool  # host time per sequence sampled in a step (token_overhead_us)


_OLD = {  # calibration-only and unversioned engines: (family, generation, serving, host-scheduled)
    "tensorrt-llm-0.9": ("tensorrt-llm", "calibration", False, False),
    "lmdeploy-0.1": ("lmdeploy", "calibration", True, False),
    "llama.cpp": ("llama.cpp", "calibration", False, False),
}


def engine_profile(engine: str, gpu_memory_gib: float, gpu_name: str, tensor_parallel: int,
                   max_model_len: int | None, activation_tokens: int) -> EngineProfile:
    """The profile of `engine` on a replica of `tensor_parallel` GPUs of `gpu_memory_gib`.
    Raises ValueError for an id that names no engine (solver.perf.engines.parse_engine's message)."""
    return _profile(engine, float(gpu_memory_gib), gpu_name, int(tensor_parallel), max_model_len,
                    int(activation_tokens))


@lru_cache(maxsize=4096)
def _profile(engine: str, gpu_memory_gib: float, gpu_name: str, tp: int, max_model_len: int | None,
             activation_tokens: int) -> EngineProfile:
    if engine in _OLD:
        family, generation, serving, host = _OLD[engine]
        kind, fraction, cap = next((k, f, c) for e, k, f, c in _fit.ENGINE_POLICIES if e == engine)
        return EngineProfile(engine, family, "", generation, kind, fraction, cap, activation_tokens,
                             "chunked_mixed", "whole_sequence", 10**9, family == "tensorrt-llm", serving, host)
    from solver.perf.engines import engine_defaults, parse_engine, version_key

    family, version = parse_engine(engine)
    context = max_model_len or _DEFAULT_CONTEXT
    d = engine_defaults(engine, gpu_memory_gib, tp, gpu_name=gpu_name, max_model_len=context)
    if family == "vllm":
        generation = "vllm-v0" if d.engine_core == "v0" else "vllm-v1"
    elif family == "sglang":
        generation = "sglang-srt"
    else:
        generation = "tensorrt-llm-pytorch" if version_key(version) >= version_key("1.0") else "tensorrt-llm-cpp"
    # A budget of None: whole prompts per step (vLLM V0 without chunked prefill: the served
    # context length, at least 2048).
    budget = d.max_num_batched_tokens or max(context, 2048)
    # SGLang reserves a fraction of each request's output that decays as it runs (its
    # new_token_ratio) and retracts when the pool runs out: closer to allocation on
    # demand than to whole-length reservation (docs/engines.md).
    admission = "paged_on_demand" if family == "sglang" else d.kv_admission
    # SGLang sizes its request pool from the KV cache, min(max(tokens / context x 512, 2048),
    # 4096): with the long contexts models serve today that is its floor, 2048.
    cap = (d.max_num_seqs_floor or d.max_num_seqs) if family == "sglang" else d.max_num_seqs
    # TensorRT-LLM's C++ runtime (before 1.0) schedules in C++; its PyTorch backend (1.0 on),
    # vLLM and SGLang pay host time per sequence per step.
    host = family in ("vllm", "sglang") or version_key(version) >= version_key("1.0")
    # "auto" KV-cache type: vLLM and SGLang keep the model's 16-bit type unless the checkpoint
    # declares a quantised cache (newer releases), which the popular FP8 checkpoints for them
    # do not; TensorRT-LLM's ModelOpt FP8 / FP4 checkpoints declare an FP8 cache.
    return EngineProfile(engine, family, version, generation, d.memory_policy, d.memory_fraction, cap,
                         int(budget), d.scheduler, admission, d.cuda_graph_max_batch or 0,
                         kv_auto_fp8=family == "tensorrt-llm", serving=True, host_scheduled=host)


def check_engine(engine: str) -> str:
    """"" if `engine` names a known engine, else why not (with the valid choices)."""
    if engine in _OLD:
        return ""
    from solver.perf.engines import parse_engine

    try:
        parse_engine(engine)
    except ValueError as exc:
        return str(exc)
    return ""
