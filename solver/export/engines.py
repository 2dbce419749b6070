"""The serving engines' OpenAI-compatible servers: pinned images and launch arguments.

The arguments carry what the plan decided: tensor and pipeline parallel sizes (the
performance model's split: one pipeline stage per instance, tensor parallel within it),
the precision, the planned batch as the engine's cap on concurrent sequences (the
batch the latency estimates assume; a larger one would break the SLOs), and the engine
settings the plan was sized with (an assignment's `engine_options`: the token budget per
step, the memory fraction, the KV cache's type, SGLang's mixed chunks and continuous decode
steps), so the server runs as planned whatever the image's own defaults are. What the
pinned image cannot run (vLLM V0's prefill-only steps or multi-step on a V1 image) is said
in a warning (`unexpressed`).

Images (pinned; bump them together with the flags below):
- vLLM `vllm/vllm-openai:v0.11.0` (Docker Hub; `vllm serve`, /health). ROCm build
  `rocm/vllm:rocm6.4.1_vllm_0.9.0.1_20250605` (Docker Hub, AMD's vLLM images).
- SGLang `lmsysorg/sglang:v0.5.9` (Docker Hub; `python3 -m sglang.launch_server`, /health);
  ROCm build `lmsysorg/sglang:v0.5.8-rocm700-mi30x`.
- TensorRT-LLM `nvcr.io/nvidia/tensorrt-llm/release:1.0.0` (NGC; `trtllm-serve`, /health,
  flags as in the trtllm-serve reference: --backend pytorch --tp_size --pp_size --max_batch_size).
Multi-node vLLM uses the Ray bootstrap script shipped in the vLLM image
(examples/online_serving/multi-node-serving.sh), as the LeaderWorkerSet vLLM example does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from solver.errors import InputError
from solver.export.gpus import vendor
from solver.export.units import Unit

PORT = 8000
HEALTH_PATH = "/health"
SGLANG_DIST_PORT = 20000
RAY_PORT = 6379
VLLM_MULTINODE_SCRIPT = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"

IMAGES = {
    ("vllm", "NVIDIA"): "vllm/vllm-openai:v0.11.0",
    ("vllm", "AMD"): "rocm/vllm:rocm6.4.1_vllm_0.9.0.1_20250605",
    ("sglang", "NVIDIA"): "lmsysorg/sglang:v0.5.9",
    ("sglang", "AMD"): "lmsysorg/sglang:v0.5.8-rocm700-mi30x",
    ("tensorrt-llm", "NVIDIA"): "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
}
# The engine release each image runs (its tag, or the ROCm build's vLLM / SGLang version).
IMAGE_RELEASES = {("vllm", "NVIDIA"): "0.11.0", ("vllm", "AMD"): "0.9.0.1", ("sglang", "NVIDIA"): "0.5.9",
                  ("sglang", "AMD"): "0.5.8", ("tensorrt-llm", "NVIDIA"): "1.0.0"}
# Measured-profile services have no model the planner knows: the user supplies the server.
PLACEHOLDER_IMAGE = "SET-ME/{service}-server:TAG"  # upper case: not a valid image reference, so it can never be pulled


@dataclass(frozen=True)
class Launch:
    """One process to start on a node of a replica."""

    args: list[str]
    notes: list[str] = field(default_factory=list)  # comments for the user (written next to the command)


def image(unit: Unit) -> str:
    if unit.model is None:
        return PLACEHOLDER_IMAGE.format(service=unit.service_slug)
    key = (unit.engine, vendor(unit.gpu))
    if key not in IMAGES:
        raise InputError.single(f"services[{unit.service}].engine",
                                f"{unit.engine} has no server image for {vendor(unit.gpu)} GPUs ({unit.gpu}).",
                                "plan this service with engine vllm or sglang")
    return IMAGES[key]


def check_supported(unit: Unit) -> None:
    """Refuse what the export cannot write as something that runs."""
    image(unit)
    if unit.engine == "tensorrt-llm" and unit.multi_node:
        raise InputError.single(f"services[{unit.service}]",
                                f"replicas span {unit.instances_per_replica} instances, and multi-node TensorRT-LLM "
                                "serving needs MPI across the nodes, which this export does not set up.",
                                "plan this service with engine vllm or sglang, or with single-instance replicas "
                                "(constrain it to offers with enough GPUs per instance)")


def server(unit: Unit, *, nnodes: str = "1", node_rank: str = "0", leader_address: str = "") -> Launch:
    """The engine's OpenAI-compatible server on the leader node (the only node for one-node replicas).

    For SGLang the same command runs on every node with its rank (the caller gives the
    expressions its platform provides); for vLLM, worker nodes only join Ray (`vllm_worker`).
    """
    if unit.model is None:
        raise ValueError("a measured-profile service has no engine command")
    tp, pp, model = str(unit.tensor_parallel), str(unit.pipeline_parallel), unit.model_repo or unit.model
    notes = _model_notes(unit)
    if unit.engine == "vllm":
        args = ["vllm", "serve", model, "--host", "0.0.0.0", "--port", str(PORT),
                "--tensor-parallel-size", tp, "--pipeline-parallel-size", pp]
        if unit.batch:
            args += ["--max-num-seqs", str(unit.batch)]
        if unit.multi_node:
            args += ["--distributed-executor-backend", "ray"]
        args += vllm_settings(unit)
        args += vllm_precision(unit, notes)
    elif unit.engine == "sglang":
        args = ["python3", "-m", "sglang.launch_server", "--model-path", model, "--host", "0.0.0.0",
                "--port", str(PORT), "--tp-size", tp, "--pp-size", pp]
        if unit.batch:
            args += ["--max-running-requests", str(unit.batch)]
        if unit.multi_node:
            args += ["--nnodes", nnodes, "--node-rank", node_rank,
                     "--dist-init-addr", f"{leader_address}:{SGLANG_DIST_PORT}"]
        args += sglang_settings(unit)
        args += sglang_precision(unit, notes)
    elif unit.engine == "tensorrt-llm":
        args = ["trtllm-serve", model, "--host", "0.0.0.0", "--port", str(PORT), "--backend", "pytorch",
                "--tp_size", tp, "--pp_size", pp]
        if unit.batch:
            args += ["--max_batch_size", str(unit.batch)]
        args += trtllm_settings(unit)
        trtllm_precision(unit, notes)
    else:
        raise ValueError(f"unknown engine {unit.engine!r}")
    return Launch(args, notes)


def _model_notes(unit: Unit) -> list[str]:
    """Which weights the server loads and why (served_model.py; each target's header says how
    to pass HF_TOKEN), and which release the plan was sized for where the image is another."""
    notes = [unit.model_note] if unit.model_note else []
    note = release_note(unit)
    return notes + ([note] if note else [])


def release_note(unit: Unit) -> str | None:
    """The planned engine release against the pinned image's, where they differ: the flags
    carry the planned settings, but the server's speed is the image's release's."""
    shipped = IMAGE_RELEASES.get((unit.engine, vendor(unit.gpu)), "")
    # A patch release apart is the same release here (the defaults are kept by minor version).
    if not unit.engine_version or not shipped or unit.engine_version.split(".")[:2] == shipped.split(".")[:2]:
        return None
    return (f"Planned for {unit.engine} {unit.engine_version}; the pinned image runs {shipped}: the flags carry the "
            f"planned settings, but the server's speed is {shipped}'s.")


def _fp8_kv(unit: Unit) -> bool:
    """The plan's KV cache is fp8: as its engine settings say (the engine's "auto" is 16-bit for
    vLLM and SGLang beside fp8 weights); plans from before they were reported: fp8 with fp8 weights."""
    kv = unit.setting("kv_cache_dtype")
    return kv == "fp8" if kv is not None else unit.precision == "fp8"


def _budget_and_memory(unit: Unit, budget_flag: str, memory_flag: str) -> list[str]:
    """The token budget and memory fraction the plan was sized with, under the engine's flags."""
    args = []
    if unit.setting("max_num_batched_tokens"):
        args += [budget_flag, str(unit.setting("max_num_batched_tokens"))]
    if unit.setting("kv_cache_memory_fraction"):
        args += [memory_flag, f"{unit.setting('kv_cache_memory_fraction'):g}"]
    return args


def vllm_settings(unit: Unit) -> list[str]:
    return _budget_and_memory(unit, "--max-num-batched-tokens", "--gpu-memory-utilization")


def sglang_settings(unit: Unit) -> list[str]:
    """SGLang's names for the planned token budget, memory fraction, mixed chunks (the
    chunked_mixed scheduler; SGLang's default is prefill-only steps) and continuous decode steps."""
    args = _budget_and_memory(unit, "--chunked-prefill-size", "--mem-fraction-static")
    if unit.setting("scheduler") == "chunked_mixed":
        args += ["--enable-mixed-chunk"]
    # Not --num-continuous-decode-steps for multi_step: SGLang 0.5.9 declares it and reads it
    # nowhere (`unexpressed` says so instead of passing a flag that does nothing).
    return args


def trtllm_settings(unit: Unit) -> list[str]:
    return _budget_and_memory(unit, "--max_num_tokens", "--kv_cache_free_gpu_memory_fraction")


def unexpressed(unit: Unit) -> str | None:
    """What the plan asks of the engine that the pinned image's server cannot be told by its
    flags, in words with the fix; None when the flags say it all. vLLM's images run V1 by
    default: every step mixes prompt chunks with decodes, one step per scheduling decision
    (V0's prefill-only steps and multi-step are gone). SGLang 0.5.9 reads no
    continuous-decode-steps setting. TensorRT-LLM's server takes the weights' quantization and
    the KV cache's type from the checkpoint and its admission policy (GUARANTEED_NO_EVICT)
    from its defaults, and always mixes chunks into its steps."""
    steps = unit.setting("multi_step") or 1
    scheduler = unit.setting("scheduler")
    asked: list[tuple[str, str]] = []  # (what the plan sized and why the server differs, the fix)
    settings_fix = "plan the service with the engine's defaults for these settings, or run an image that takes them"
    if unit.engine == "vllm" and (scheduler == "prefill_first" or steps > 1):
        asked.append(("vLLM V0's prefill-only steps" + (f" with {steps} decode steps per scheduling decision"
                                                        if steps > 1 else "")
                      + f", but {IMAGES[('vllm', vendor(unit.gpu))]} runs vLLM V1 by default (prompt chunks in every "
                      "step)", settings_fix))
    if unit.engine == "sglang" and steps > 1:
        asked.append((f"{steps} decode steps per scheduling decision, which {IMAGES[('sglang', vendor(unit.gpu))]} "
                      "does not run (it reads no continuous-decode-steps setting)", settings_fix))
    if unit.engine == "tensorrt-llm":
        if scheduler == "prefill_first" or steps > 1:
            asked.append(("prefill-only steps" + (f" with {steps} decode steps per decision" if steps > 1 else "")
                          + ", which TensorRT-LLM does not run (it mixes prompt chunks into every step)", settings_fix))
        if unit.setting("kv_admission") == "paged_on_demand":
            asked.append(("KV blocks allocated as tokens arrive (MAX_UTILIZATION), but TensorRT-LLM's server reserves "
                          "whole sequences (GUARANTEED_NO_EVICT) unless its extra LLM-API options say otherwise",
                          settings_fix))
        repo = (unit.model_repo or unit.model or "").lower()
        if (unit.precision in ("fp8", "fp4", "int8", "int4") and unit.precision not in repo
                and not any(mark in repo for mark in ("quant", "modelopt"))):
            # Its PyTorch backend quantizes nothing itself: the 16-bit repository would load as
            # 16-bit weights, twice the memory the plan sized (or run out of it).
            asked.append((f"{unit.precision} weights, but TensorRT-LLM reads the quantization from the checkpoint and "
                          f"{unit.model_repo or unit.model} is not a {unit.precision} one",
                          f"name a {unit.precision} checkpoint (e.g. an NVIDIA ModelOpt export) as the service's model"))
        auto_fp8 = unit.precision in ("fp8", "fp4")  # its "auto": what a quantized checkpoint declares
        if unit.setting("kv_cache_dtype") is not None and _fp8_kv(unit) != auto_fp8:
            asked.append((f"a {unit.setting('kv_cache_dtype')} KV cache, but TensorRT-LLM's server takes the KV "
                          f"cache's type from the checkpoint ({'fp8' if auto_fp8 else '16-bit'} for {unit.precision} "
                          "weights)", settings_fix))
    if not asked:
        return None
    fixes = list(dict.fromkeys(fix for _, fix in asked))
    return (f"service {unit.service!r}: the plan sized {unit.name} for " + "; and ".join(what for what, _ in asked)
            + ": its TTFT, TPOT or capacity under load differ from the plan's. To fix: " + "; or ".join(fixes))


def vllm_precision(unit: Unit, notes: list[str]) -> list[str]:
    """The weights' type, then the KV cache's as the plan sized it (whatever the weights)."""
    return _vllm_weights(unit, notes) + (["--kv-cache-dtype", "fp8"] if _fp8_kv(unit) else [])


def _vllm_weights(unit: Unit, notes: list[str]) -> list[str]:
    if unit.precision == "fp16":
        return ["--dtype", "float16"]
    if unit.precision == "bf16":
        return ["--dtype", "bfloat16"]
    if unit.precision == "fp8":
        return ["--quantization", "fp8"]  # online FP8 weight quantization of a 16-bit checkpoint
    if unit.precision == "int8":
        notes.append("int8: vLLM reads INT8 (W8A8) quantization from the checkpoint; point the model at an INT8 "
                     "checkpoint of the same model.")
    return []


def sglang_precision(unit: Unit, notes: list[str]) -> list[str]:
    """The weights' type, then the KV cache's as the plan sized it (whatever the weights)."""
    return _sglang_weights(unit, notes) + (["--kv-cache-dtype", "fp8_e4m3"] if _fp8_kv(unit) else [])


def _sglang_weights(unit: Unit, notes: list[str]) -> list[str]:
    if unit.precision == "fp16":
        return ["--dtype", "float16"]
    if unit.precision == "bf16":
        return ["--dtype", "bfloat16"]
    if unit.precision == "fp8":
        return ["--quantization", "fp8"]
    if unit.precision == "int8":
        notes.append("int8: SGLang serves INT8 (W8A8) checkpoints with --quantization w8a8_int8; point the model "
                     "at one.")
        return ["--quantization", "w8a8_int8"]
    return []


def trtllm_precision(unit: Unit, notes: list[str]) -> None:
    if unit.precision in ("fp8", "int8"):
        notes.append(f"{unit.precision}: TensorRT-LLM's PyTorch backend reads the quantization from the checkpoint; "
                     f"point the model at a {unit.precision.upper()} checkpoint (e.g. an NVIDIA ModelOpt export).")
    elif unit.precision:
        notes.append(f"{unit.precision}: TensorRT-LLM takes the dtype from the checkpoint's config.")


def vllm_ray_leader(unit: Unit, group_size: str) -> str:
    """Shell line starting the Ray head and waiting for the replica's other nodes."""
    return f"bash {VLLM_MULTINODE_SCRIPT} leader --ray_cluster_size={group_size}"


def vllm_ray_worker(leader_address: str) -> str:
    return f"bash {VLLM_MULTINODE_SCRIPT} worker --ray_address={leader_address}"
