"""The performance model's fitted constants, in one place, and the measurements behind them.

How the constants were fitted (reproduce with `python scripts/fit_calibration.py`):

* The data are the CSVs in `solver/perf/data/` (see `data/PROVENANCE.md`):
  `llm_benchmarks.csv`, a verbatim copy of the project's calibration set (TensorRT-LLM 0.9
  static-batching throughput and batch-1 TTFT on H100/H200/L40S/A100 with TP 1-8;
  llama.cpp batch-1 decode on nine GPUs; weight-file sizes; one vLLM memory split);
  `llm_benchmarks_product.csv`, the product's rows on today's hardware (issue 12);
  `engine_reference.csv`, two batch-1 vLLM decode measurements; and
  `llm_latency_under_load.csv`, a verbatim copy of the project's latency-under-load set,
  of which only the rows without queueing are used here (one request at a time, and
  closed loops whose clients all run in one batch; `no_queue_cases()` says why each
  other row is left out - they belong to the queueing model).
* Every usable row becomes a `PerfQuery` that pins the measurement's conditions; the
  model predicts it with the same code the planner uses (`predict()`).
* The free constants minimise the sum over metrics (throughput, TPOT, TTFT) of the mean
  soft-L1 loss of that metric's log errors (least squares below a log error of 0.15;
  `scripts/fit_calibration.py`). Memory constants come straight from the memory rows.
  Engine memory/batch policies, link latencies and the activation reservation are engine
  defaults / literature values, not fitted.
* The error bands are split-conformal quantiles of cross-validated residuals, per metric
  and regime (memory- or compute-bound): each row is predicted by constants fitted
  without its fold, and the band is the 80 % conformal quantile of those out-of-fold
  errors (`scripts/fit_calibration.py --cv`; docs/performance-model.md, "Error bands").

Only physical constants are free: achieved fractions of datasheet bandwidth (weights and
KV cache apart) and FLOP/s, per-layer fixed times, link efficiencies (NVLink apart from
PCIe), a per-request serving time before the first token, and calibration-only constants
of engines the product does not plan for (llama.cpp, LMDeploy 0.1). Nothing is per GPU
or per row: the model is judged on measurements outside this set too.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from solver.dataclass_repr import dataclass

DATA_DIR = Path(__file__).resolve().parent / "data"
BENCHMARKS_CSV = DATA_DIR / "llm_benchmarks.csv"
# Published measurements of the product's default engine (vLLM); same columns as BENCHMARKS_CSV.
ENGINE_REFERENCE_CSV = DATA_DIR / "engine_reference.csv"
# Product-owned calibration rows (issue 12): public measurements on today's hardware and
# precisions (B200/GB200/RTX PRO 6000 at fp4, H100/H200 at fp8 with current TensorRT-LLM,
# MI300X with vLLM on ROCm), each row with its source; kept apart from the verbatim copy.
PRODUCT_CSV = DATA_DIR / "llm_benchmarks_product.csv"
CALIBRATION_CSVS = (BENCHMARKS_CSV, PRODUCT_CSV)
# Latency under load (the queueing model's data); its rows without queueing calibrate the physics.
UNDER_LOAD_CSV = DATA_DIR / "llm_latency_under_load.csv"
# Written by `scripts/fit_calibration.py --cv --write`: each performance row's in-sample and
# out-of-fold prediction, from which the tests recompute the bands and their coverage.
CV_RESIDUALS_CSV = DATA_DIR / "cv_residuals.csv"

# BEGIN FITTED (written by scripts/fit_calibration.py; edit there, not here)
BANDWIDTH_EFFICIENCY = 0.887
KV_BANDWIDTH_EFFICIENCY = 0.839
COMPUTE_EFFICIENCY = 0.761
FP8_COMPUTE_EFFICIENCY = 0.938
LAYER_OVERHEAD_US = 122.5
GRAPH_LAYER_OVERHEAD_US = 79.9
LINK_EFFICIENCY = 0.544
NVLINK_EFFICIENCY = 0.403
REQUEST_OVERHEAD_MS = 10.95
LLAMA_CPP_LAYER_OVERHEAD_US = 71.9
LLAMA_CPP_BANDWIDTH_GBS = 1153.0
LMDEPLOY_LAYER_OVERHEAD_US = 84.6
ACTIVATION_PASSES = 10.67
FP4_COMPUTE_EFFICIENCY = 0.743
MOE_COMPUTE_EFFICIENCY = 0.193
AMD_BANDWIDTH_EFFICIENCY = 0.42
AMD_COMPUTE_EFFICIENCY = 0.343
AMD_LAYER_OVERHEAD_US = 43.2
TOKEN_OVERHEAD_US = 6.58
# END FITTED

# BEGIN UNDER LOAD (written by scripts/fit_under_load.py; edit there, not here)
V0_PREFILL_OVERHEAD_US = 1000.0
V0_PREFILL_TP_OVERHEAD_US = 9000.0
GENERATION_FACTORS = (("vllm-v0", 1.007), ("vllm-v1", 1.052), ("sglang-srt", 1.100), ("tensorrt-llm-cpp", 1.069), ("tensorrt-llm-pytorch", 0.994))
# Held-out slowdown quantiles: (level, factor) - at confidence c the planner sizes a
# replica as if its steps were slower by the c-quantile (solver/confidence.py).
UNDER_LOAD_SLOWDOWN = ((0.05, 0.686), (0.1, 0.731), (0.2, 0.890), (0.3, 0.909), (0.4, 0.959), (0.5, 0.992), (0.6, 1.061), (0.7, 1.088), (0.8, 1.122), (0.9, 1.188), (0.95, 1.258))
# END UNDER LOAD

# Stored bits per weight of the 4-bit formats, block scales included (not fitted):
# NVFP4 = 4-bit E2M1 values + one FP8 (E4M3) scale per 16 (4.5 bits; NVIDIA, "Introducing
# NVFP4", developer.nvidia.com/blog); MXFP4 (gpt-oss) has one 8-bit scale per 32 (4.25) -
# the larger NVFP4 figure is used. AWQ/GPTQ int4 = 4 bits + an FP16 scale and a 4-bit zero
# point per group of 128 (the usual group size): 4 + 16/128 + 4/128 = 4.16 bits.
FP4_BITS_PER_WEIGHT = 4.5
INT4_BITS_PER_WEIGHT = 4.16

# From the memory rows directly (see fit_calibration.py `memory_constants`):
Q4_K_M_BITS_PER_WEIGHT = 4.86  # GGUF q4_k_m file size / parameters (8B: 4.90, 70B: 4.82 bits)
RUNTIME_OVERHEAD_GIB = 0.13  # vLLM A10G split: budget - weights - activations - KV cache

# Engine defaults and literature values (not fitted):
USABLE_MEMORY_FRACTION = 0.90  # vLLM gpu_memory_utilization default
ACTIVATION_TOKENS = 8192  # per-pass token budget: vLLM max_num_batched_tokens, TensorRT-LLM max_num_tokens,
#                           SGLang chunked_prefill_size (8192 on >= 35 GB GPUs); activations are reserved for it
MAX_BATCH = 256  # vLLM max_num_seqs default: concurrent sequences per replica
# How each engine sizes its KV cache and caps its batch (docs/performance-model.md, "Engines"):
#   "total":  KV = fraction x GPU memory - weights - activations - overhead
#             (vLLM gpu_memory_utilization 0.90; docs.vllm.ai engine args; max_num_seqs 256)
#   "free":   KV = fraction x (GPU memory - weights - activations - overhead)
#             (TensorRT-LLM kv_cache_free_gpu_memory_fraction 0.9, "free GPU memory fraction reserved for
#             KV cache, after allocating model weights and buffers"; max_batch_size 2048, max_num_tokens 8192:
#             nvidia.github.io/TensorRT-LLM trtllm-serve and performance-tuning guide)
#   "static": weights + KV pool = fraction x GPU memory; activations and CUDA-graph buffers live in the rest
#             (SGLang mem_fraction_static: 0.88 at TP1, 0.87 TP2, 0.85 TP4, 0.81 TP8, 0.79 TP16 -
#             sgl-project/sglang python/sglang/srt/server_args.py; its request pool holds
#             min(max(tokens / context x 512, 2048), 4096) requests, so at least 2048 run at once)
# A fraction of None takes the TP-dependent SGLang default below.
ENGINE_POLICIES = (("vllm", "total", USABLE_MEMORY_FRACTION, MAX_BATCH),
                   ("vllm-0.5", "total", USABLE_MEMORY_FRACTION, MAX_BATCH),
                   ("sglang", "static", None, 2048),
                   ("tensorrt-llm", "free", 0.90, 2048),
                   ("tensorrt-llm-0.9", "free", 0.90, 2048),
                   ("llama.cpp", "total", USABLE_MEMORY_FRACTION, MAX_BATCH),
                   ("lmdeploy-0.1", "total", USABLE_MEMORY_FRACTION, MAX_BATCH))
SGLANG_MEM_FRACTION_BY_TP = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
# Engines that answer requests through a serving loop (scheduler, tokenizer, streaming):
# their TTFT carries REQUEST_OVERHEAD_MS. The TensorRT-LLM 0.9 rows time the engine alone
# (gptSessionBenchmark) and llama-bench times decode only.
SERVING_ENGINES = ("vllm", "vllm-0.5", "sglang", "tensorrt-llm", "lmdeploy-0.1")
# Engines whose scheduler, sampler and output processing run in Python on the host, once per
# sequence per step (vLLM, SGLang, TensorRT-LLM's PyTorch backend - its default from 1.0):
# each step pays TOKEN_OVERHEAD_US per sequence that samples a token, added to the GPU's
# time. It is what makes a saturated B200 or MI300X serving at batches of 1000-2000
# sequences slower than its bandwidth and FLOP/s allow (the max-load rows of
# llm_benchmarks_product.csv). LMDeploy's TurboMind and TensorRT-LLM 0.9's
# gptSessionBenchmark run in C++; the llama.cpp rows are batch 1.
HOST_SCHEDULED_ENGINES = ("vllm", "vllm-0.5", "sglang", "tensorrt-llm")
# Per all-reduce call on a switched NVLink fabric (vLLM/TRT one-shot kernels); per ring
# step on point-to-point NVLink (V100 hybrid cube-mesh) and PCIe; per transfer between
# pipeline stages on InfiniBand. NCCL-tests small-message latencies are of this order.
# AMD's Infinity Fabric (xGMI) joins the 8 GPUs of an MI300X/MI325X platform all-to-all;
# vLLM's ROCm custom all-reduce is one-shot like on NVSwitch, so it pays one latency per call.
LINK_LATENCY_US = (("nvswitch", 8.0), ("nvlink", 3.0), ("pcie", 5.0), ("infiniband", 20.0), ("xgmi", 8.0))
# NVSwitch generations that reduce in the switch (NVLink SHARP, "NVLS", from Hopper): an
# all-reduce sends each byte to the switch once and receives the sum once, instead of
# 2(TP-1)/TP times around a ring (NVIDIA/nccl issue 1031: "NVLink SHARP is an AllReduce
# offload system over NVLink"; NVIDIA/nccl-tests issue 196: "On H100 we have NVLink SHARP").
IN_SWITCH_REDUCTION_ARCHITECTURES = ("Hopper", "Blackwell")

# Engines, as speed factors on the fitted physics, each with its evidence (the engines also
# differ in fixed per-layer time: "tensorrt-llm-0.9" - the calibration rows, eager kernel
# launches - pays LAYER_OVERHEAD_US in every pass; vLLM, SGLang and current TensorRT-LLM
# replay CUDA graphs for decode steps (GRAPH_LAYER_OVERHEAD_US) and launch prefill passes
# eagerly (LAYER_OVERHEAD_US); llama.cpp and LMDeploy 0.1 (calibration only) have their own
# constants). A workload overrides any of them with engine_factor.<engine>.
#  - vllm 1.0: the reference; the vLLM rows (engine_reference.csv, llm_benchmarks_product.csv,
#    the no-queue rows of llm_latency_under_load.csv) are predicted by the same physics.
#  - sglang 1.0: SGLang's own comparison at saturation on ShareGPT (sgl-project/sglang
#    benchmark/benchmark_vllm_060/README.md, in shared/data/calibration/llm_latency_under_load.csv)
#    measured 4282 vs 4132 output tok/s against vLLM 0.6.0 on Llama-3.1-8B/A100 (+3.6 %):
#    within the error band, so no factor.
#  - tensorrt-llm 1.0: its rows in llm_benchmarks_product.csv (trtllm-bench, PyTorch backend)
#    are reproduced by the physics with the graph per-layer time; no factor is supported.
#  - vllm-0.5 0.45: vLLM's 0.6.0 release post (blog.vllm.ai/2024/09/05/perf-update.html)
#    measured 2.7x the throughput of v0.5.3 on Llama 3 8B (1 x H100) and 1.8x on 70B
#    (4 x H100), ShareGPT; 0.45 is the geometric mean of 1/2.7 and 1/1.8. The CPU scheduling
#    overhead of <0.6 is what the seed's "TensorRT-LLM about 2x vLLM" reflected.
#  - llama.cpp, tensorrt-llm-0.9, lmdeploy-0.1 1.0: their rows are fitted through their own
#    per-layer times.
# Generations (engine_profile.GENERATIONS) take the factors fitted under load
# (scripts/fit_under_load.py, GENERATION_FACTORS above); an engine id listed here keeps its own.
ENGINE_FACTORS = (("llama.cpp", 1.0), ("tensorrt-llm-0.9", 1.0), ("vllm-0.5", 0.45),
                  ("lmdeploy-0.1", 1.0)) + GENERATION_FACTORS

# BEGIN BANDS (written by scripts/fit_calibration.py --cv --write)
ERROR_BAND_THROUGHPUT = 0.2
ERROR_BAND_TPOT = 0.15
ERROR_BAND_TTFT = 0.22
ERROR_BANDS_BY_REGIME = (('throughput.compute', 0.23), ('throughput.memory', 0.19), ('tpot.memory', 0.15), ('ttft.compute', 0.17), ('ttft.memory', 0.27))
# END BANDS

# Uncertainty under load, as a slowdown of the whole replica: the real replica behaves like
# the modelled one with every step time and the per-request overhead multiplied by a
# factor s. UNDER_LOAD_SLOWDOWN (above, fitted by scripts/fit_under_load.py --loso) holds
# the distribution of s as (quantile level, factor) pairs, levels rising from 0.05 to 0.95
# and factors non-decreasing; `slowdown(confidence)` in solver/confidence.py interpolates
# it (docs/queueing.md, "Confidence under load").

# ---------------------------------------------------------------- benchmark rows -> queries
# The CSVs' GPU names, mapped to the default catalog's GPU types.
GPU_NAMES = {
    "H200-SXM-141GB": "H200", "H100-80GB-HBM3(SXM)": "H100-SXM", "L40S-48GB": "L40S",
    # The TensorRT-LLM perf page ran on HGX A100 (SXM) systems; the row does not say which variant.
    "A100-80GB(variant unstated)": "A100-80GB", "A100-PCIe-80GB": "A100-80GB-PCIe", "A100-SXM-80GB": "A100-80GB",
    "H100-PCIe-80GB": "H100-PCIe", "A40-48GB": "A40", "RTX-A6000-48GB": "RTX-A6000",
    "RTX-6000-Ada-48GB": "RTX-6000-Ada", "RTX-4090-24GB": "RTX-4090", "RTX-3090-24GB": "RTX-3090",
    "A10G-24GB": "A10G", "A100-SXM-40GB": "A100-40GB",
    "B200": "B200", "GB200": "GB200", "RTX-PRO-6000-Server": "RTX-PRO-6000", "MI300X": "MI300X",
    # llm_latency_under_load.csv spellings. LMDeploy's "A100-80G" is one of an 8-GPU server's (SXM).
    "H100-80GB-HBM3 (SXM)": "H100-SXM", "A100-SXM4-40GB": "A100-40GB", "L4-24GB": "L4", "H200-141GB": "H200",
    "A100-80GB": "A100-80GB", "H100-80GB": "H100-SXM", "MI300X-192GB": "MI300X", "B200-179GB (HGX)": "B200",
}
MODEL_NAMES = {"Llama-2-7B": "llama-2-7b", "Llama-2-70B": "llama-2-70b", "Llama-3-8B": "llama-3.1-8b",
               "Llama-3-70B": "llama-3.1-70b", "DeepSeek-R1-Distill-Llama-8B": "llama-3.1-8b",
               "Llama-3.1-8B": "llama-3.1-8b", "Llama-3.1-70B": "llama-3.1-70b", "Llama-3.3-70B": "llama-3.3-70b",
               "Llama-3.1-405B": "llama-3.1-405b", "Qwen3-30B-A3B": "qwen3-30b-a3b", "Llama-4-Scout": "llama-4-scout",
               "gpt-oss-20b": "gpt-oss-20b", "gpt-oss-120b": "gpt-oss-120b",
               # Llama 3 and 3.1 share their shapes (3.1 only extends the context).
               "Meta-Llama-3-8B-Instruct": "llama-3.1-8b", "Meta-Llama-3-70B-Instruct": "llama-3.1-70b",
               "Llama-3.1-8B-Instruct": "llama-3.1-8b", "Llama-3.1-70B-Instruct": "llama-3.1-70b",
               "Llama-3.1-405B-Instruct": "llama-3.1-405b", "Llama-2-7b": "llama-2-7b"}
PERFORMANCE_METRICS = ("throughput", "tpot", "ttft")
# AccelMark's ShareGPT set leaves lengths per request blank; its suite spec gives the
# medians (input ~280, output ~310 tokens). A p50 TTFT is the TTFT of the median prompt;
# TPOT at one request at a time hardly depends on the lengths.
SHAREGPT_MEDIAN_TOKENS = (280, 310)
# GPU families for reporting errors (docs/performance-model.md, "Residuals by family").
FAMILIES = (("Blackwell", "Blackwell"), ("Hopper", "Hopper"), ("Ampere", "Ampere"), ("Ada", "Ada"),
            ("Volta", "Volta"), ("Turing", "Turing"))


def gpu_family(gpu) -> str:
    if gpu.vendor == "AMD":
        return "AMD"
    return next((name for name, prefix in FAMILIES if gpu.architecture.startswith(prefix)), "other")


@dataclass(frozen=True)
class BenchmarkCase:
    """One usable calibration row, as the query that reproduces it."""

    row: int  # 1-based data row in its CSV
    label: str
    metric: str  # "throughput" | "tpot" | "ttft" | "weights_gib" | "kv_cache_gib"
    measured: float  # in the unit of `metric` (tok/s per GPU, ms, GiB)
    query: object  # PerfQuery
    num_gpus: int
    dataset: str = "llm_benchmarks"  # the CSV's stem
    max_batch: int | None = None  # the run's scheduler cap (max-load rows), kept through refits
    tpot_from_latency: bool = False  # a fixed-batch end-to-end latency, compared per output token

    @property
    def key(self) -> str:
        return f"{self.dataset}:{self.row}"


@dataclass(frozen=True)
class SkippedRow:
    """A benchmark row the calibration leaves out, and why."""

    row: int
    label: str
    reason: str
    source: str = "llm_benchmarks"  # the CSV's stem


def load_rows(path: Path = BENCHMARKS_CSV) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def benchmark_cases(calibration=None, path: Path = BENCHMARKS_CSV) -> tuple[list[BenchmarkCase], list[SkippedRow]]:
    """Every row of a calibration-set CSV turned into a case, or skipped with the reason."""
    cases: list[BenchmarkCase] = []
    skipped: list[SkippedRow] = []
    for i, r in enumerate(load_rows(path), start=1):
        label = f"{r['model']} {r['precision']} {r['gpu']} x{r['num_gpus'] or '-'} {r['metric']}"
        if r.get("input_len") and r.get("output_len") and path != BENCHMARKS_CSV:
            label += f" {r['input_len']}/{r['output_len']}"
        try:
            case = _case(i, label, r, calibration, dataset=path.stem)
        except _Unusable as exc:
            skipped.append(SkippedRow(i, label, str(exc), path.stem))
            continue
        cases.append(case)
    return cases, skipped


def no_queue_cases(calibration=None, path: Path = UNDER_LOAD_CSV) -> tuple[list[BenchmarkCase], list[SkippedRow]]:
    """The latency-under-load rows that measure the physics without a queue, as cases.

    Kept: one request at a time (`concurrency` 1: AccelMark's interactive scenario,
    LMDeploy's single thread), and LMDeploy's closed loops of N threads with identical
    lengths - every client is in the one batch, which advances in lock-step like a static
    batch, so their throughput is a batch-N measurement (their TTFT is a burst of N
    synchronised prefills and their token-gap medians are printed at 10 ms resolution,
    so those two are left out). Everything under an open-loop rate or a burst of many
    requests includes queueing: the queueing model's data.
    """
    cases: list[BenchmarkCase] = []
    skipped: list[SkippedRow] = []
    for i, r in enumerate(load_rows(path), start=1):
        label = f"{r['model']} {r['engine'].split(' (')[0]} {r['gpu']} x{r['num_gpus']} {r['load_kind']} {r['load_value']} " \
                f"{r['metric']}"
        try:
            case = _no_queue_case(i, label, r, calibration, path.stem)
        except _Unusable as exc:
            skipped.append(SkippedRow(i, label, str(exc), path.stem))
            continue
        cases.append(case)
    return cases, skipped


def all_cases(calibration=None) -> tuple[list[BenchmarkCase], list[SkippedRow]]:
    """Every calibration case (what the constants are fitted to): the calibration set, the
    product's rows, the vLLM engine reference and the no-queue rows under load."""
    cases, skipped = [], []
    for found, left in (calibration_cases(calibration), benchmark_cases(calibration, ENGINE_REFERENCE_CSV),
                        no_queue_cases(calibration)):
        cases += found
        skipped += left
    return cases, skipped


class _Unusable(Exception):
    pass


def calibration_cases(calibration=None) -> tuple[list[BenchmarkCase], list[SkippedRow]]:
    """The calibration CSVs: the verbatim calibration set and the product's own rows."""
    cases: list[BenchmarkCase] = []
    skipped: list[SkippedRow] = []
    for path in CALIBRATION_CSVS:
        c, sk = benchmark_cases(calibration, path)
        cases += c
        skipped += sk
    return cases, skipped


def _engine_id(text: str) -> str:
    """The engine a row names, with its version where the row states one ("vLLM 0.10.2" ->
    "vllm-0.10.2"): its defaults are that version's (solver/perf/engines.py). A version the
    defaults table does not document runs as the newest documented release before it."""
    t = text.lower()
    if "tensorrt-llm 0.9" in t:
        return "tensorrt-llm-0.9"
    for name, engine in (("tensorrt", "tensorrt-llm"), ("llama.cpp", "llama.cpp"), ("sglang", "sglang"),
                         ("lmdeploy", "lmdeploy-0.1"), ("vllm", "vllm")):
        if name in t:
            if engine in ("llama.cpp", "lmdeploy-0.1"):
                return engine
            found = re.search(r"(\d+\.\d+(?:\.\d+)?)", t[t.index(name):])
            return _documented(engine, found.group(1)) if found else engine
    raise _Unusable(f"engine {text.split(' (')[0]!r} is not one the model describes")


def _documented(family: str, version: str) -> str:
    from solver.perf.engines import parse_engine, releases, version_key

    try:
        parse_engine(f"{family}-{version}")
        return f"{family}-{version}"
    except ValueError:
        older = [v for v in releases()[family] if version_key(v) <= version_key(version)]
        return f"{family}-{older[-1]}" if older else family


def _served_context(r: dict[str, str]) -> int | None:
    """The context length a row's engine was started with, where its notes say (vLLM's
    defaults for the token budget and chunked prefill depend on it)."""
    found = re.search(r"max[_-]model[_-]len[ =]*(\d+)", r.get("notes", "") + " " + r.get("engine", ""))
    return int(found.group(1)) if found else None


def _interconnect(gpu, n: int) -> str:
    return "nvlink" if n > 1 and gpu.nvlink_gbs and gpu.form_factor == "SXM" else "pcie" if n > 1 else "none"


def _case(i: int, label: str, r: dict[str, str], calibration, dataset: str = "llm_benchmarks") -> BenchmarkCase:
    from solver.catalog import default_catalog
    from solver.models.library import get_model
    from solver.perf.api import Calibration, PerfQuery

    if r["model"] not in MODEL_NAMES:
        raise _Unusable("not an LLM: image-generation rows are measured profiles, not estimates (seed cases S1/S2)")
    model = get_model(MODEL_NAMES[r["model"]])
    cal = calibration or Calibration()
    engine = _engine_id(r["engine"])
    if r["metric"] == "vram_gb" or r["unit"] == "GiB":
        return _memory_case(i, label, r, model, engine, cal, dataset)
    gpu = default_catalog().gpus[GPU_NAMES[r["gpu"]]]
    n = int(r["num_gpus"])
    layer_split = "layer split" in r["tp"]
    pp = int(r.get("pp") or 1)
    max_load = r["batch_or_concurrency"] == "max"  # requests queued at once: the scheduler fills the batch
    batch = None if max_load else int(r["batch_or_concurrency"])
    max_batch = int(r["max_batch"]) if r.get("max_batch") else None
    prompt = int(r["input_len"] or 0)  # llama-bench tg rows generate from an empty prompt
    output = int(r["output_len"])
    # A max-load row ran with the scheduler cap it states: the engine option, kept through refits.
    graphs = re.search(r"CUDA graphs up to batch (\d+)", r["notes"])
    query = PerfQuery(model=model, gpu=gpu, gpus_per_replica=n, interconnect=_interconnect(gpu, n), max_batch=max_batch,
                      usable_memory_gib=gpu.memory_gib, precision=r["precision"], engine=engine,
                      prompt_tokens=prompt, output_tokens=output, batch=batch, calibration=cal,
                      pipeline_stages=n if layer_split else (pp if pp > 1 else None),
                      batching=r.get("batching") or "static", kv_precision=r.get("kv_cache_dtype") or None,
                      cuda_graph_max_batch=int(graphs.group(1)) if graphs else None, max_model_len=_served_context(r))
    extra = dict(dataset=dataset, max_batch=max_batch)
    if r["metric"] == "tokens_per_s_per_gpu":
        return BenchmarkCase(i, label, "throughput", float(r["value"]), query, n, **extra)
    if r["metric"] == "tokens_per_s_total":
        return BenchmarkCase(i, label, "throughput", float(r["value"]) / n, query, n, **extra)
    if r["metric"] == "latency_s":  # fixed batch end to end: compared per output token
        return BenchmarkCase(i, label, "tpot", float(r["value"]) * 1000.0 / output, query, n, tpot_from_latency=True,
                             **extra)
    if r["metric"] == "ttft_ms":
        return BenchmarkCase(i, label, "ttft", float(r["value"]), query, n, **extra)
    if r["metric"] == "output_tokens_per_s" and batch == 1:
        # Batch-1 decode speed is the inverse of the time per output token.
        return BenchmarkCase(i, label, "tpot", 1000.0 / float(r["value"]), query, n, **extra)
    if r["metric"] == "tpot_ms":
        return BenchmarkCase(i, label, "tpot", float(r["value"]), query, n, **extra)
    raise _Unusable(f"metric {r['metric']} is not predicted")


def _memory_case(i: int, label: str, r: dict[str, str], model, engine: str, cal, dataset: str) -> BenchmarkCase:
    from solver.catalog import default_catalog
    from solver.perf.api import PerfQuery

    gpu_name = GPU_NAMES.get(r["gpu"], "H100-SXM")  # "any": the weight size does not depend on the GPU
    gpu = default_catalog().gpus[gpu_name]
    kv = re.search(r"KV cache ([\d.]+) GiB", r["notes"])
    usable = re.search(r"([\d.]+) GiB usable", r["notes"])
    memory = float(usable.group(1)) if usable else gpu.memory_gib
    # The vLLM split logs 0.85 GiB of activations: vLLM profiles one pass of its token budget,
    # and 0.85 GiB is what 8192 tokens of this model take - V0's budget when it serves 8192
    # tokens of context (max(max_model_len, 2048)), not the 2048 it would use with the model's
    # full 128k context. The row's engine served 8192.
    served = 8192 if re.search(r"activation 0\.85\b", r["notes"]) else None
    query = PerfQuery(model=model, gpu=gpu, gpus_per_replica=1, interconnect="none", usable_memory_gib=memory,
                      precision=r["precision"], engine=engine, prompt_tokens=1, output_tokens=1, calibration=cal,
                      batching="continuous", batch=1, max_model_len=served)
    if kv:
        return BenchmarkCase(i, label, "kv_cache_gib", float(kv.group(1)), query, 1, dataset)
    return BenchmarkCase(i, label, "weights_gib", float(r["value"]), query, 1, dataset)


def _no_queue_case(i: int, label: str, r: dict[str, str], calibration, dataset: str) -> BenchmarkCase:
    from solver.catalog import default_catalog
    from solver.models.library import get_model
    from solver.perf.api import Calibration, PerfQuery

    kind, load, metric = r["load_kind"], r["load_value"], r["metric"]
    if kind != "concurrency":
        raise _Unusable(f"{kind.replace('_', ' ')} load: requests queue (the queueing model's data)")
    closed_loop = "closed loop" in r["notes"] and "burst" not in r["notes"]
    if int(load) > 1 and not closed_loop:
        raise _Unusable(f"a burst of {load} requests at once: they queue for the batch (the queueing model's data)")
    if r["model"] not in MODEL_NAMES:
        raise _Unusable("not a dense transformer of the model library (hybrid Mamba-Transformer MoE)")
    engine = _engine_id(r["engine"])
    gpu_name = GPU_NAMES[r["gpu"]]
    catalog = default_catalog()
    gpu = catalog.gpus.get(gpu_name)
    if gpu is None or not gpu.llm_estimates:
        raise _Unusable(f"{gpu_name} has no calibrated LLM estimates in the catalog")
    n = int(r["num_gpus"])
    precision = r["precision"].split(" ")[0]
    batch = int(load)
    if r["input_len"] and r["output_len"]:
        prompt, output = int(r["input_len"]), int(r["output_len"])
    elif "sharegpt" in r["notes"].lower():
        prompt, output = SHAREGPT_MEDIAN_TOKENS
    else:
        raise _Unusable("prompt and output lengths are not stated")
    statistic_of = {"ttft_ms_p50": "ttft", "ttft_ms_mean": "ttft", "tpot_ms_p50": "tpot", "tpot_ms_mean": "tpot",
                    "output_tokens_per_s": "throughput"}
    if metric not in statistic_of:
        raise _Unusable(f"metric {metric} is a tail percentile: queueing and variable lengths, not the physics")
    kind_of = statistic_of[metric]
    if batch > 1 and kind_of != "throughput":
        raise _Unusable("closed-loop TTFT is a burst of synchronised prefills and token-gap medians are printed "
                        "at 10 ms resolution; the run's throughput row is used instead")
    if "10 ms resolution" in r["notes"]:
        raise _Unusable("token-gap median printed at 10 ms resolution; the run's throughput row is used instead")
    from solver.perf.api import BYTES_PER_ELEMENT

    model = get_model(MODEL_NAMES[r["model"]])
    element = BYTES_PER_ELEMENT[precision]
    kv_bytes = batch * (prompt + output) * model.kv_bytes_per_token(element)
    if kv_bytes / n > gpu.memory_gib * 1024**3 - model.params_b * 1e9 * element / n:
        raise _Unusable(f"the KV cache of {batch} sequences of {prompt + output} tokens does not fit beside the "
                        "weights: not all clients can run at once, so requests queue (the queueing model's data)")
    value = float(r["value"])
    if kind_of == "throughput":
        value /= n  # per GPU, as the calibration set states throughput
    query = PerfQuery(model=model, gpu=gpu, gpus_per_replica=n,
                      interconnect=_interconnect(gpu, n), usable_memory_gib=gpu.memory_gib, precision=precision,
                      engine=engine, prompt_tokens=prompt, output_tokens=output, batch=batch,
                      calibration=calibration or Calibration(), batching="static" if closed_loop else "continuous",
                      max_model_len=_served_context(r))
    return BenchmarkCase(i, label, kind_of, value, query, n, dataset)


# ---------------------------------------------------------------- residuals
@dataclass(frozen=True)
class Residual:
    """A benchmark case and the model's prediction for it."""

    case: BenchmarkCase
    predicted: float
    regime: str = ""  # "memory" | "compute": what bounds the phase the metric measures

    @property
    def relative_error(self) -> float:
        return self.predicted / self.case.measured - 1.0


def predict(case: BenchmarkCase, calibration=None) -> tuple[float, str]:
    """The model's value for a case, in the case's unit, and the regime of that value.

    Performance rows are predicted at the measured batch whether or not the model would
    fit that batch in memory: the measurement shows it ran, and the memory rows test the
    memory model apart. Max-load rows (no batch stated) take the batch the model would
    choose under the run's cap and memory.
    """
    from dataclasses import replace

    from solver.perf.llm import estimate, memory_budget, timings

    q = case.query if calibration is None else replace(case.query, calibration=calibration)
    if case.metric == "weights_gib":
        return memory_budget(q).weights_gib, ""
    if case.metric == "kv_cache_gib":
        return memory_budget(q).kv_capacity_gib(1), ""
    if q.batch is None:  # a max-load row: the scheduler filled the batch up to its cap and memory
        e = estimate(q)
        q = replace(q, batch=max(e.batch, 1))
    t = timings(q)
    if case.metric == "throughput":
        return t.output_tokens_per_s / case.num_gpus, t.throughput_regime  # the rows are per GPU
    if case.tpot_from_latency:  # a fixed batch end to end, per output token
        return t.latency_ms / max(q.output_tokens, 1), t.tpot_regime
    if case.metric == "tpot":
        return t.tpot_ms, t.tpot_regime
    return t.ttft_ms, t.ttft_regime


def residuals(calibration=None, cases: list[BenchmarkCase] | None = None) -> list[Residual]:
    if cases is None:
        cases = all_cases()[0]
    return [Residual(c, *predict(c, calibration)) for c in cases]


def median_abs_errors(rows: list[Residual]) -> dict[str, float]:
    """Median absolute relative error per metric."""
    from statistics import median

    out = {}
    for metric in sorted({r.case.metric for r in rows}):
        out[metric] = median(abs(r.relative_error) for r in rows if r.case.metric == metric)
    return out


# ---------------------------------------------------------------- error bands
BAND_COVERAGE = 0.8
MIN_ROWS_PER_REGIME = 8  # fewer held-out rows than this: the regime takes its metric's pooled band


def conformal_quantile(errors: list[float], coverage: float = BAND_COVERAGE) -> float:
    """Split-conformal quantile: the ceil((n + 1) x coverage)-th smallest |error|.

    For exchangeable rows, a new row's |error| is within it with probability >= coverage.
    With too few rows for that rank, the largest error is returned (and the guarantee
    weakens: docs/performance-model.md reports the measured coverage instead).
    """
    import math

    ordered = sorted(errors)
    if not ordered:
        return 0.0
    rank = math.ceil((len(ordered) + 1) * coverage)
    return ordered[min(rank, len(ordered)) - 1]


def band_keys(rows: list[Residual]) -> dict[str, list[Residual]]:
    """Rows grouped by band: "<metric>" pooled, and "<metric>.<regime>" where enough rows."""
    groups: dict[str, list[Residual]] = {}
    for r in rows:
        if r.case.metric in PERFORMANCE_METRICS:
            groups.setdefault(r.case.metric, []).append(r)
            groups.setdefault(f"{r.case.metric}.{r.regime}", []).append(r)
    return {k: v for k, v in groups.items() if "." not in k or len(v) >= MIN_ROWS_PER_REGIME}


def error_bands(rows: list[Residual], coverage: float = BAND_COVERAGE) -> dict[str, float]:
    """Per metric and per regime with enough rows: the conformal quantile of |relative error|."""
    return {k: conformal_quantile([abs(r.relative_error) for r in v], coverage) for k, v in band_keys(rows).items()}


def band_for(bands: dict[str, float], metric: str, regime: str) -> float:
    return bands.get(f"{metric}.{regime}", bands.get(metric, 0.0))
