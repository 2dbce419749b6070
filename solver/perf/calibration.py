"""The performance model's fitted constants, in one place, and the measurements behind them.

How the constants were fitted (reproduce with `python scripts/fit_calibration.py`):

* The data are `solver/perf/data/llm_benchmarks.csv`, a verbatim copy of the project's
  calibration set (see `data/PROVENANCE.md`): TensorRT-LLM 0.9 static-batching
  throughput and batch-1 TTFT on H100/H200/L40S/A100 with TP 1-8; llama.cpp batch-1
  decode on nine GPUs (one and four GPUs); weight-file sizes; one vLLM memory split.
* Every usable row becomes a `PerfQuery` that pins the measurement's conditions
  (`benchmark_cases()` below); the model predicts it with the same code the planner uses.
* The free constants minimise the sum of squared log errors (Nelder-Mead from several
  starts), throughput, TPOT and TTFT rows weighted equally per metric. Memory constants
  come straight from the memory rows (no search). Link latencies, the engine's memory
  fraction and the activation reservation are engine defaults / literature values, not fitted.
* The error bands are the 80th percentile of absolute relative residuals per metric
  after the fit (rounded up to 5 %), so about four estimates in five fall inside them.

Only physical constants are free: achieved fractions of datasheet bandwidth and FLOP/s,
a per-layer fixed time, the all-reduce link efficiency, and one speed factor per engine
that has measurements. The model is judged on measurements outside this set too, so
nothing here is per-GPU or per-row.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
BENCHMARKS_CSV = DATA_DIR / "llm_benchmarks.csv"
# Published measurements of the product's default engine (vLLM), kept apart from the
# calibration set: they fit only GRAPH_LAYER_OVERHEAD_US (see docs/performance-model.md).
ENGINE_REFERENCE_CSV = DATA_DIR / "engine_reference.csv"
# Product-owned calibration rows (issue 12): public measurements on today's hardware and
# precisions (B200/GB200/RTX PRO 6000 at fp4, H100/H200 at fp8 with current TensorRT-LLM,
# MI300X with vLLM on ROCm), each row with its source; kept apart from the verbatim copy.
PRODUCT_CSV = DATA_DIR / "llm_benchmarks_product.csv"
CALIBRATION_CSVS = (BENCHMARKS_CSV, PRODUCT_CSV)

# BEGIN FITTED (written by scripts/fit_calibration.py; edit there, not here)
BANDWIDTH_EFFICIENCY = 0.91
COMPUTE_EFFICIENCY = 0.658
FP8_COMPUTE_EFFICIENCY = 0.835
LAYER_OVERHEAD_US = 139.9
LINK_EFFICIENCY = 0.507
LLAMA_CPP_LAYER_OVERHEAD_US = 80.6
LLAMA_CPP_BANDWIDTH_GBS = 1179.0
GRAPH_LAYER_OVERHEAD_US = 41.8
FP4_COMPUTE_EFFICIENCY = 0.835
AMD_BANDWIDTH_EFFICIENCY = 0.7
AMD_COMPUTE_EFFICIENCY = 0.4
AMD_LAYER_OVERHEAD_US = 60.0
MOE_COMPUTE_EFFICIENCY = 0.15
# END FITTED

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
USABLE_MEMORY_FRACTION = 0.90  # vLLM gpu_memory_utilization default; TRT-LLM's KV fraction is alike
ACTIVATION_TOKENS = 8192  # vLLM max_num_batched_tokens used to size the activation reserve
MAX_BATCH = 256  # vLLM max_num_seqs default: concurrent sequences per replica
ACTIVATION_SEQUENCES = 256  # sequences whose logits the activation reserve holds
# Per all-reduce call on a switched NVLink fabric (vLLM/TRT one-shot kernels); per ring
# step on point-to-point NVLink (V100 hybrid cube-mesh) and PCIe; per transfer between
# pipeline stages on InfiniBand. NCCL-tests small-message latencies are of this order.
# AMD's Infinity Fabric (xGMI) joins the 8 GPUs of an MI300X/MI325X platform all-to-all;
# vLLM's ROCm custom all-reduce is one-shot like on NVSwitch, so it pays one latency per call.
LINK_LATENCY_US = (("nvswitch", 8.0), ("nvlink", 3.0), ("pcie", 5.0), ("infiniband", 20.0), ("xgmi", 8.0))

# Engines, as speed factors on the fitted physics, each with its evidence (the engines also
# differ in fixed per-layer time: "tensorrt-llm-0.9" - the calibration rows, eager kernel
# launches - pays LAYER_OVERHEAD_US; vLLM, SGLang and current TensorRT-LLM replay CUDA graphs
# and pay GRAPH_LAYER_OVERHEAD_US; llama.cpp has its own constants). A workload overrides any
# of them with engine_factor.<engine>.
#  - vllm 1.0: the reference; the vLLM rows (engine_reference.csv, llm_benchmarks_product.csv)
#    are predicted by the same physics.
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
#  - llama.cpp, tensorrt-llm-0.9 1.0: their rows are fitted through their own per-layer times.
ENGINE_FACTORS = (("vllm", 1.0), ("tensorrt-llm", 1.0), ("sglang", 1.0), ("llama.cpp", 1.0),
                  ("tensorrt-llm-0.9", 1.0), ("vllm-0.5", 0.45))

# BEGIN BANDS (written by scripts/fit_calibration.py)
ERROR_BAND_THROUGHPUT = 0.15
ERROR_BAND_TPOT = 0.15
ERROR_BAND_TTFT = 0.1
# END BANDS

# ---------------------------------------------------------------- benchmark rows -> queries
# The CSV's GPU names, mapped to the default catalog's GPU types.
GPU_NAMES = {
    "H200-SXM-141GB": "H200", "H100-80GB-HBM3(SXM)": "H100-SXM", "L40S-48GB": "L40S",
    # The TensorRT-LLM perf page ran on HGX A100 (SXM) systems; the row does not say which variant.
    "A100-80GB(variant unstated)": "A100-80GB", "A100-PCIe-80GB": "A100-80GB-PCIe", "A100-SXM-80GB": "A100-80GB",
    "H100-PCIe-80GB": "H100-PCIe", "A40-48GB": "A40", "RTX-A6000-48GB": "RTX-A6000",
    "RTX-6000-Ada-48GB": "RTX-6000-Ada", "RTX-4090-24GB": "RTX-4090", "RTX-3090-24GB": "RTX-3090",
    "A10G-24GB": "A10G", "A100-SXM-40GB": "A100-40GB",
    "B200": "B200", "GB200": "GB200", "RTX-PRO-6000-Server": "RTX-PRO-6000", "MI300X": "MI300X",
}
MODEL_NAMES = {"Llama-2-7B": "llama-2-7b", "Llama-2-70B": "llama-2-70b", "Llama-3-8B": "llama-3.1-8b",
               "Llama-3-70B": "llama-3.1-70b", "DeepSeek-R1-Distill-Llama-8B": "llama-3.1-8b",
               "Llama-3.1-8B": "llama-3.1-8b", "Llama-3.1-70B": "llama-3.1-70b", "Llama-3.3-70B": "llama-3.3-70b",
               "Llama-3.1-405B": "llama-3.1-405b", "Qwen3-30B-A3B": "qwen3-30b-a3b", "Llama-4-Scout": "llama-4-scout",
               "gpt-oss-20b": "gpt-oss-20b", "gpt-oss-120b": "gpt-oss-120b"}
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

    row: int  # 1-based data row in the CSV
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
    row: int
    label: str
    reason: str


def load_rows(path: Path = BENCHMARKS_CSV) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def benchmark_cases(calibration=None, path: Path = BENCHMARKS_CSV) -> tuple[list[BenchmarkCase], list[SkippedRow]]:
    """Every row turned into a case, or skipped with the reason."""
    cases: list[BenchmarkCase] = []
    skipped: list[SkippedRow] = []
    for i, r in enumerate(load_rows(path), start=1):
        label = f"{r['model']} {r['precision']} {r['gpu']} x{r['num_gpus'] or '-'} {r['metric']}"
        if r.get("input_len") and r.get("output_len") and path != BENCHMARKS_CSV:
            label += f" {r['input_len']}/{r['output_len']}"
        try:
            case = _case(i, label, r, calibration, dataset=path.stem)
        except _Unusable as exc:
            skipped.append(SkippedRow(i, label, str(exc)))
            continue
        cases.append(case)
    return cases, skipped


class _Unusable(Exception):
    pass


def calibration_cases(calibration=None) -> tuple[list[BenchmarkCase], list[SkippedRow]]:
    """The fit's data: the verbatim calibration set and the product's own rows."""
    cases: list[BenchmarkCase] = []
    skipped: list[SkippedRow] = []
    for path in CALIBRATION_CSVS:
        c, sk = benchmark_cases(calibration, path)
        cases += c
        skipped += sk
    return cases, skipped


def _case(i: int, label: str, r: dict[str, str], calibration, dataset: str = "llm_benchmarks") -> BenchmarkCase:
    from dataclasses import replace as _replace

    from solver.catalog import default_catalog
    from solver.models.library import get_model
    from solver.perf.api import Calibration, PerfQuery

    if r["model"] not in MODEL_NAMES:
        raise _Unusable("not an LLM: image-generation rows are measured profiles, not estimates (seed cases S1/S2)")
    model = get_model(MODEL_NAMES[r["model"]])
    cal = calibration or Calibration()
    engine_text = r["engine"].lower()
    engine = "tensorrt-llm-0.9" if "tensorrt-llm 0.9" in engine_text else "tensorrt-llm" if "tensorrt" in engine_text \
        else "llama.cpp" if "llama.cpp" in engine_text else "vllm"
    if r["metric"] == "vram_gb" or r["unit"] == "GiB":
        return _memory_case(i, label, r, model, engine, cal)
    gpu = default_catalog().gpus[GPU_NAMES[r["gpu"]]]
    n = int(r["num_gpus"])
    layer_split = "layer split" in r["tp"]
    pp = int(r.get("pp") or 1)
    max_load = r["batch_or_concurrency"] == "max"  # requests queued at once: the scheduler fills the batch
    batch = None if max_load else int(r["batch_or_concurrency"])
    max_batch = int(r["max_batch"]) if r.get("max_batch") else None
    prompt = int(r["input_len"] or 0)  # llama-bench tg rows generate from an empty prompt
    output = int(r["output_len"])
    interconnect = "nvlink" if n > 1 and gpu.nvlink_gbs and gpu.form_factor == "SXM" else "pcie" if n > 1 else "none"
    if max_batch:
        cal = _replace(cal, max_batch=max_batch)
    query = PerfQuery(model=model, gpu=gpu, gpus_per_replica=n, interconnect=interconnect,
                      usable_memory_gib=gpu.memory_gib, precision=r["precision"], engine=engine,
                      prompt_tokens=prompt, output_tokens=output, batch=batch, calibration=cal,
                      pipeline_stages=n if layer_split else (pp if pp > 1 else None),
                      batching=r.get("batching") or "static", kv_precision=r.get("kv_cache_dtype") or None)
    extra = dict(dataset=dataset, max_batch=max_batch)
    if r["metric"] == "tokens_per_s_per_gpu":
        return BenchmarkCase(i, label, "throughput", float(r["value"]), query, n, **extra)
    if r["metric"] == "tokens_per_s_total":
        return BenchmarkCase(i, label, "throughput", float(r["value"]) / n, query, n, **extra)
    if r["metric"] == "latency_s":  # fixed batch end to end: compared per output token
        return BenchmarkCase(i, label, "tpot", float(r["value"]) * 1000.0 / output, query, n, tpot_from_latency=True,
                             **extra)
    if r["metric"] == "ttft_ms":
        return BenchmarkCase(i, label, "ttft", float(r["value"]), query, n)
    if r["metric"] == "output_tokens_per_s" and batch == 1:
        # Batch-1 decode speed is the inverse of the time per output token.
        return BenchmarkCase(i, label, "tpot", 1000.0 / float(r["value"]), query, n)
    if r["metric"] == "tpot_ms":
        return BenchmarkCase(i, label, "tpot", float(r["value"]), query, n)
    raise _Unusable(f"metric {r['metric']} is not predicted")


def _memory_case(i: int, label: str, r: dict[str, str], model, engine: str, cal) -> BenchmarkCase:
    from solver.catalog import default_catalog
    from solver.perf.api import PerfQuery

    gpu_name = GPU_NAMES.get(r["gpu"], "H100-SXM")  # "any": the weight size does not depend on the GPU
    gpu = default_catalog().gpus[gpu_name]
    kv = re.search(r"KV cache ([\d.]+) GiB", r["notes"])
    usable = re.search(r"([\d.]+) GiB usable", r["notes"])
    memory = float(usable.group(1)) if usable else gpu.memory_gib
    query = PerfQuery(model=model, gpu=gpu, gpus_per_replica=1, interconnect="none", usable_memory_gib=memory,
                      precision=r["precision"], engine=engine, prompt_tokens=1, output_tokens=1, calibration=cal,
                      batching="static", batch=1)
    if kv:
        return BenchmarkCase(i, label, "kv_cache_gib", float(kv.group(1)), query, 1)
    return BenchmarkCase(i, label, "weights_gib", float(r["value"]), query, 1)


# ---------------------------------------------------------------- residuals
@dataclass(frozen=True)
class Residual:
    case: BenchmarkCase
    predicted: float

    @property
    def relative_error(self) -> float:
        return self.predicted / self.case.measured - 1.0


def predict(case: BenchmarkCase, calibration=None) -> float:
    """The model's value for a case, in the case's unit."""
    from dataclasses import replace

    from solver.perf.llm import estimate, memory_budget

    if calibration is not None and case.max_batch:
        calibration = replace(calibration, max_batch=case.max_batch)
    q = case.query if calibration is None else replace(case.query, calibration=calibration)
    if case.metric == "weights_gib":
        return memory_budget(q).weights_gib
    if case.metric == "kv_cache_gib":
        return memory_budget(q).kv_capacity_gib
    e = estimate(q)
    if case.metric == "throughput":
        return e.output_tokens_per_s / case.num_gpus  # the rows are per GPU
    if case.tpot_from_latency:
        return e.latency_ms / max(q.output_tokens, 1)
    return e.tpot_ms if case.metric == "tpot" else e.ttft_ms


def residuals(calibration=None, cases: list[BenchmarkCase] | None = None) -> list[Residual]:
    if cases is None:
        cases = calibration_cases()[0]
    return [Residual(c, predict(c, calibration)) for c in cases]


PERFORMANCE_METRICS = ("throughput", "tpot", "ttft")


def median_abs_errors(rows: list[Residual]) -> dict[str, float]:
    """Median absolute relative error per metric."""
    from statistics import median

    out = {}
    for metric in sorted({r.case.metric for r in rows}):
        out[metric] = median(abs(r.relative_error) for r in rows if r.case.metric == metric)
    return out


def error_bands(rows: list[Residual], quantile: float = 0.8) -> dict[str, float]:
    """Per metric: the absolute relative error that `quantile` of the rows stay within."""
    out = {}
    for metric in PERFORMANCE_METRICS:
        errs = sorted(abs(r.relative_error) for r in rows if r.case.metric == metric)
        if errs:
            out[metric] = errs[min(int(quantile * len(errs)), len(errs) - 1)]
    return out
