"""Published latency-under-load measurements, as cases the queueing model predicts.

Two shipped sources (solver/perf/data/PROVENANCE.md has each row's provenance):

* `mlperf_llm_results.csv`: MLPerf Inference results of LLM benchmarks on GPUs, rounds
  v4.0-v6.1. A Server or Interactive result is a rate the system sustained for ten or more
  minutes of Poisson arrivals with p99 TTFT and p99 TPOT within the benchmark's limits,
  with the percentiles measured there; an Offline result is a saturation throughput (all
  requests queued at once). The engine settings the submitter used (batch cap, token
  budget, KV-cache type, parallelism) are in the row where its files state them.
* `llm_latency_under_load.csv`: AccelMark (vLLM 0.7.3 and SGLang 0.5.6, Poisson arrivals
  at 5-100 req/s) and SGLang's comparison with vLLM 0.6.0 (Poisson at 4 and 8 req/s); its
  closed-loop and burst rows are a different load model and are left out.

Each row becomes a `LoadCase`: the configuration (model, GPU, GPUs per replica, precision,
engine and the settings the row states), the request-length mix of its dataset, the rate
per replica (the system's rate over its independent replicas) or None for a saturation
row, and what was measured. `predict(case)` runs the product's own model on it.

The datasets' lengths are partly unpublished (mlperf_datasets.csv): output lengths are
known (MLPerf's reference means, and percentiles from compliance logs), input lengths are
not. `DATASET_MIXES` states what is assumed where nothing is published; every assumption
is named there, and the benchmark and fit scripts report errors by source so that a row
resting on an assumption can be read as such.
"""

from __future__ import annotations

import csv
import re
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
MLPERF_CSV = DATA_DIR / "mlperf_llm_results.csv"
UNDER_LOAD_CSV = DATA_DIR / "llm_latency_under_load.csv"

# MLPerf's spellings -> the default catalog's GPU types (rows on other GPUs are left out).
MLPERF_GPUS = {"H100-SXM-80GB": "H100-SXM", "H200-SXM-141GB": "H200", "B200-SXM-180GB": "B200",
               "GB200-186GB": "GB200", "GH200-144GB": "GH200-144GB", "H100-NVL-94GB": "H100-NVL",
               "L40S": "L40S", "MI300X-192GB": "MI300X", "MI325X-256GB": "MI325X"}
MLPERF_MODELS = {"llama2-70b-99": "llama-2-70b", "llama2-70b-99.9": "llama-2-70b",
                 "llama2-70b-interactive-99": "llama-2-70b", "llama3.1-8b": "llama-3.1-8b",
                 "llama3_1-70b-fp8_dyn": "llama-3.1-70b", "llama3_1-70b-fp8_pre": "llama-3.1-70b",
                 "llama3_1-70b-fp8_trtllm": "llama-3.1-70b", "mixtral-8x7b": "mixtral-8x7b",
                 "llama3.1-405b": "llama-3.1-405b", "deepseek-r1": "deepseek-r1"}
# The dataset each benchmark runs (the Krai open-division rows run Llama-3.1-70B on Llama-2's).
MLPERF_DATASET = {"llama-2-70b": "openorca", "llama-3.1-70b": "openorca", "llama-3.1-8b": "cnn_dailymail",
                  "mixtral-8x7b": "mixtral_mix", "llama-3.1-405b": "longcontext_405b", "deepseek-r1": "reasoning_r1"}


@dataclass(frozen=True)
class LengthMix:
    """A dataset's request lengths as a few classes: (share, prompt tokens, output tokens)."""

    name: str
    classes: tuple[tuple[float, int, int], ...]
    basis: str  # what is measured and what is assumed


def _independent(prompts: tuple[tuple[float, int], ...], outputs: tuple[tuple[float, int], ...]):
    """Classes of every (prompt, output) pair, lengths taken as independent."""
    return tuple((sp * so, p, o) for sp, p in prompts for so, o in outputs)


# Output lengths: quantile classes of the distributions in mlperf_datasets.csv (the compliance
# logs' percentiles, scaled to the reference mean). Input lengths: assumed where unpublished.
DATASET_MIXES = {
    # Input lengths are unpublished for both MLPerf datasets. The assumptions below sit
    # between what two kinds of row suggest: Offline throughput fits inputs near 200 (OpenOrca)
    # and 800 (CNN/DailyMail) tokens, low-load TTFT fits longer ones. Shifting OpenOrca's mean
    # from ~316 to ~205 tokens and CNN/DailyMail's from ~1,000 to ~795 moves the model's
    # saturation against the Offline rows from -18.5 % to -0.3 % (signed median, 27 rows):
    # docs/queueing.md reports the errors under this assumption and says so.
    "openorca": LengthMix("openorca", _independent(
        ((0.3, 90), (0.4, 200), (0.3, 500)),        # ASSUMED: mean ~257, within MLPerf's 1024 cap
        ((0.3, 90), (0.4, 250), (0.3, 560))),       # measured: mean 294.45 (reference), p50 221-260, p90 514-522
        "OpenOrca (MLPerf Llama-2-70B): output lengths from the reference mean 294.45 and the compliance "
        "logs' percentiles (p50 221-260, p90 514-522, p99 816-884); input lengths are not published: assumed "
        "three classes of 90/200/500 tokens (mean ~257, below the 1024-token cap)"),
    "cnn_dailymail": LengthMix("cnn_dailymail", _independent(
        ((0.3, 500), (0.4, 850), (0.3, 1300)),      # ASSUMED: CNN/DailyMail articles, mean ~880 tokens
        ((1.0, 128),)),                             # measured: always 128 (the cap) in the compliance logs
        "CNN/DailyMail (MLPerf Llama-3.1-8B): outputs 128 tokens (every compliance-log sample hits the "
        "max_tokens cap); input lengths are not published: assumed 500/850/1300 tokens (mean ~880; articles "
        "average ~780 words)"),
    "sharegpt": LengthMix("sharegpt", ((0.3, 90, 120), (0.4, 280, 310), (0.3, 800, 512)),
                          "ShareGPT (AccelMark, SGLang's benchmark): medians input ~280, output ~310, outputs "
                          "capped at 512 (AccelMark's suite spec); the spread around the medians is assumed"),
}


@dataclass(frozen=True)
class LoadCase:
    """One published measurement under load, as the model sees it."""

    source: str  # the publication (leave-one-source-out groups)
    label: str
    model: str  # library model
    gpu: str  # catalog GPU type
    gpus_per_replica: int
    precision: str
    engine: str
    mix: str  # DATASET_MIXES key
    rate_per_s: float | None  # Poisson arrivals per replica; None: saturation (everything queued)
    measured: tuple[tuple[str, float], ...]  # "ttft_ms_p99" | "tpot_ms_p50" | ... | "saturation_per_s"
    kv_cache_dtype: str | None = None
    max_batch: int | None = None
    max_num_batched_tokens: int | None = None
    memory_fraction: float | None = None
    ttft_limit_ms: float | None = None  # the benchmark's own p99 bounds (Server / Interactive rows)
    tpot_limit_ms: float | None = None
    # The same system's measured saturation (its Offline row), where there is one: the
    # Server row's rate over it is the system's own utilization.
    measured_saturation_per_s: float | None = None
    engine_version: str = ""
    max_model_len: int | None = None  # the context length the engine was started with, where stated
    kv_admission: str | None = None  # the scheduler's KV admission where the submitter's harness sets it
    scheduler: str | None = None  # "prefill_first" where the submitter turned chunked prefill off; None: the engine's
    multi_step: int | None = None  # vLLM V0's num_scheduler_steps where the submitter's harness sets it
    cuda_graph_max_batch: int | None = None  # 0 where the harness runs the engine eagerly (_harness_graphs)

    @property
    def classes(self):
        from solver.perf.queueing import TrafficClass

        return tuple(TrafficClass(s, p, o) for s, p, o in DATASET_MIXES[self.mix].classes)

    def value(self, metric: str) -> float | None:
        return dict(self.measured).get(metric)


def _num(text: str) -> float | None:
    try:
        x = float(text)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _int(text: str) -> int | None:
    x = _num(text)
    return int(x) if x is not None and x == int(x) else None


def _engine(text: str, version: str = "", round_: str = "") -> str | None:
    """The engine id with the version a row states, as the newest documented release at or
    before it (solver/perf/engines.py): "vLLM 0.9.0.2.dev" -> vllm-0.9.0."""
    from solver.perf.calibration import _documented

    t = text.lower()
    if "tensorrt" in t:
        # NVIDIA's MLPerf harness drives engines built by trtllm-build through the C++
        # executor, in every round; rows of another submitter that name trtllm-serve or the
        # PyTorch backend would be 1.x (none here states it).
        return "tensorrt-llm-0.13"
    for family in ("sglang", "vllm"):
        if t.startswith(family):
            import re

            found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", version or text)
            if not found:
                return family
            v = ".".join(g for g in found.groups() if g is not None)
            resolved = _documented(family, v)
            return resolved if resolved != family else f"{family}-{_oldest(family)}"
    return None  # LLMBoost and others: engines the model does not describe


def _harness_admission(row: dict) -> str | None:
    """The KV admission of NVIDIA's MLPerf harness, which every closed-division TensorRT-LLM
    row here runs: its C++ harness starts the executor with MAX_UTILIZATION (blocks as tokens
    arrive, requests paused on overflow) unless a config says no_evict
    (mlcommons/inference_results_v4.1 @ 198fc467: closed/NVIDIA/code/harness/harness_llm/
    main_llm.cc:84 `trtllm_batch_sched_policy` default "max_util", llm_utils.hpp:138
    kMAX_UTILIZATION; its Triton config code/common/triton/base_config.py:113
    "max_utilization"; no file under closed/NVIDIA/configs of that round sets the policy, and
    the v5.x configs read through the search index state 'batch_scheduler_policy':
    'max_util' in trtllm_runtime_flags; partners' configs derive from NVIDIA's). TensorRT-LLM's own
    default is GUARANTEED_NO_EVICT (whole sequences reserved: engine_defaults.csv), which
    open-division rows (Krai's trtllm-serve) keep. None: the engine's default."""
    if row["division"] == "closed" and "tensorrt" in row["engine"].lower():
        return "paged_on_demand"
    return None


def _harness_scheduler(row: dict) -> str | None:
    """vLLM with chunked prefill turned off runs waiting prompts in prefill-only steps
    (`prefill_first`). The rows' `chunked_prefill` column says so where the submitter's
    config does: AMD's and its partners' MLPerf harness yaml (`enable_chunked_prefill:
    False`, with V0's `num_scheduler_steps`, e.g. closed/AMD/code/llama2-70b-99/harness_llm/
    models/llama2-70b/server_mi300x.yaml in v5.1), vLLM 0.9 included, whose own default (V1)
    mixes chunks into every step. None: the engine version's default."""
    if row["chunked_prefill"] == "no" and row["engine"].lower().startswith("vllm"):
        return "prefill_first"
    return None


def _harness_multi_step(row: dict) -> int | None:
    """vLLM V0's multi-step scheduling where the submitter's harness turns it on beside
    prefill-only steps: AMD's MLPerf harness yaml and its partners' copies
    (`num_scheduler_steps: 9` for Server, 8 for Interactive, 7-19 for Offline, e.g.
    closed/AMD/code/llama2-70b-99/harness_llm/models/llama2-70b/server_mi300x.yaml in
    v5.1), as the rows' config_notes quote it. Once V0 decides to decode it runs that many
    decode steps before it looks at waiting prompts (without chunked prefill a prompt batch
    is one step: Scheduler._get_num_lookahead_slots gives prefills none), so a prompt
    arriving meanwhile waits for the block's end. None: the engine's default (1)."""
    if _harness_scheduler(row) != "prefill_first":
        return None
    m = re.search(r"num_scheduler_steps: (\d+)", row["config_notes"])
    return int(m.group(1)) if m and int(m.group(1)) > 1 else None


def _harness_graphs(row: dict) -> int | None:
    """0 (no decode step replayed as a CUDA/HIP graph) where the submitter's harness runs the
    engine eagerly: AMD's MLPerf yaml and its partners' copies (`enforce_eager: True`, e.g.
    v5.1 closed/AMD/code/llama2-70b-99/harness_llm/models/llama2-70b/server_mi300x.yaml, as
    the rows' config_notes quote it), so every decode step pays the eager launch gap
    (solver.perf.llm.graph_limits). Held out by source, p99 TTFT at the system's own
    utilization 44.3 -> 43.1 % median abs error, saturation unchanged at 8.8 %. None: the
    engine's default graphs."""
    return 0 if "enforce_eager: True" in row["config_notes"] else None


def _oldest(family: str) -> str:
    from solver.perf.engines import releases

    return releases()[family][0]


def _precision(text: str) -> str | None:
    t = text.lower()
    if "fp8" in t:
        return "fp8"
    if "fp4" in t:  # NVFP4 and MXFP4
        return "fp4"
    return None


@lru_cache(maxsize=1)
def mlperf_cases() -> tuple[LoadCase, ...]:
    """Every MLPerf row the model can be asked about: a known GPU, model, engine and precision,
    the replica's parallelism stated (tp x pp x replicas = the system's GPUs), one node."""
    out = []
    with open(MLPERF_CSV, newline="") as f:
        for r in csv.DictReader(f):
            model = MLPERF_MODELS.get(r["benchmark"])
            gpu = MLPERF_GPUS.get(r["gpu"])
            engine = _engine(r["engine"], r["engine_version"], r["round"])
            precision = _precision(r["weight_precision"])
            tp, pp, dp, total = _int(r["tp"]), _int(r["pp"]) or 1, _int(r["dp_replicas"]), _int(r["gpus_total"])
            if None in (model, gpu, engine, precision, tp, dp, total) or tp * pp * dp != total:
                continue
            if _int(r["nodes"]) not in (None, 1) or (_int(r["ep"]) or 1) > 1 or model not in MLPERF_DATASET:
                continue
            mix = MLPERF_DATASET[model]
            if mix not in DATASET_MIXES:
                continue
            rate = _num(r["completed_samples_per_s"])
            if rate is None or rate <= 0:
                continue
            source = f"MLPerf {r['round']} {r['submitter']}"
            label = f"{r['round']} {r['submitter']} {r['system']} {r['benchmark']} {r['scenario']}"
            common = dict(source=source, label=label, model=model, gpu=gpu, gpus_per_replica=tp * pp,
                          precision=precision, engine=engine, mix=mix, engine_version=r["engine_version"],
                          kv_cache_dtype=(r["kv_cache_dtype"] or None) if r["kv_cache_dtype"] in ("fp8", "fp16", "bf16")
                          else None,
                          max_batch=_int(r["max_batch"]), max_num_batched_tokens=_int(r["max_num_batched_tokens"]),
                          memory_fraction=_num(r["gpu_memory_fraction"]), kv_admission=_harness_admission(r),
                          scheduler=_harness_scheduler(r), multi_step=_harness_multi_step(r),
                          cuda_graph_max_batch=_harness_graphs(r))
            if r["scenario"] == "Offline":
                out.append(LoadCase(rate_per_s=None, measured=(("saturation_per_s", rate / dp),), **common))
                continue
            measured = tuple((m, v) for m in ("ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p50",
                                              "tpot_ms_p90", "tpot_ms_p99")
                             for v in [_num(r[m])] if v is not None)
            out.append(LoadCase(rate_per_s=rate / dp, measured=measured + (("sustained_per_s", rate / dp),),
                                ttft_limit_ms=_num(r["ttft_limit_ms"]), tpot_limit_ms=_num(r["tpot_limit_ms"]),
                                **common))
    # Pair each Server / Interactive row with its system's Offline row (same round, submitter,
    # system, benchmark family and settings that matter: the replica's GPUs and precision).
    offline = {(c.source, c.label.rsplit(" ", 1)[0].replace("-interactive", ""), c.gpus_per_replica, c.precision):
               c.value("saturation_per_s") for c in out if c.rate_per_s is None}
    paired = []
    for c in out:
        key = (c.source, c.label.rsplit(" ", 1)[0].replace("-interactive", ""), c.gpus_per_replica, c.precision)
        sat = offline.get(key) if c.rate_per_s is not None else None
        paired.append(replace(c, measured_saturation_per_s=sat) if sat else c)
    return tuple(paired)


_SHARED_GPUS = {"H100-80GB-HBM3 (SXM)": "H100-SXM", "A100-SXM4-40GB": "A100-40GB", "L4-24GB": "L4",
                "H200-141GB": "H200", "A100-80GB": "A100-80GB", "H100-80GB": "H100-SXM"}
_SHARED_MODELS = {"Meta-Llama-3-8B-Instruct": "llama-3.1-8b", "Meta-Llama-3-70B-Instruct": "llama-3.1-70b",
                  "Llama-3.1-8B-Instruct": "llama-3.1-8b", "Llama-3.1-70B-Instruct": "llama-3.1-70b"}


@lru_cache(maxsize=1)
def shared_cases() -> tuple[LoadCase, ...]:
    """The open-loop rows of llm_latency_under_load.csv (Poisson arrivals at a stated rate),
    one case per (source, system, rate) with every metric measured there."""
    groups: dict[tuple, dict] = {}
    with open(UNDER_LOAD_CSV, newline="") as f:
        for r in csv.DictReader(f):
            if r["load_kind"] != "request_rate" or r["gpu"] not in _SHARED_GPUS or r["model"] not in _SHARED_MODELS:
                continue
            engine = _engine(r["engine"], r["engine"])
            if engine is None:
                continue
            source = "AccelMark" if "AccelMark" in r["source"] else "SGLang vs vLLM 0.6"
            version = r["engine"].split(" (")[0]
            key = (source, r["model"], r["gpu"], r["engine"], float(r["load_value"]))
            g = groups.setdefault(key, {"r": r, "engine": engine, "version": version, "measured": {}})
            g["measured"][r["metric"]] = float(r["value"])
    out = []
    for (source, model, gpu, _, rate), g in groups.items():
        r = g["r"]
        tp = int(r["tp"] or r["num_gpus"])
        # AccelMark's suite A starts vLLM with max_model_len 4096; SGLang's comparison starts
        # vLLM with --max_model_len 4096 (llm_latency_under_load.md). Suite B states none.
        # Llama 3 (not 3.1) serves 8192 tokens (its config's max_position_embeddings).
        served = 4096 if ("suite_A" in r["notes"] or (source.startswith("SGLang") and g["engine"].startswith("vllm"))) \
            else 8192 if model.startswith("Meta-Llama-3-") else None
        out.append(LoadCase(source=source, label=f"{source} {g['version']} {gpu} {model} at {rate:g}/s",
                            model=_SHARED_MODELS[model], gpu=_SHARED_GPUS[gpu], gpus_per_replica=tp,
                            precision="bf16", engine=g["engine"], mix="sharegpt", rate_per_s=rate,
                            measured=tuple(sorted(g["measured"].items())), engine_version=g["version"],
                            max_model_len=served))
    return tuple(out)


def all_cases() -> tuple[LoadCase, ...]:
    return mlperf_cases() + shared_cases()


def query_for(case: LoadCase, calibration=None):
    """The PerfQuery of a case's replica (its lengths are the mix's first class: the
    queueing model reads only the replica's physics from it)."""
    from solver.catalog import default_catalog
    from solver.catalog.hosting import cheapest_host, unbought_host
    from solver.models.library import get_model
    from solver.perf import Calibration, PerfQuery

    catalog = default_catalog()
    gpu = catalog.gpus[case.gpu]
    host = cheapest_host(catalog, gpu, case.gpus_per_replica) or unbought_host(gpu, case.gpus_per_replica)
    first = DATASET_MIXES[case.mix].classes[0]
    return PerfQuery(model=get_model(case.model), gpu=gpu, gpus_per_replica=case.gpus_per_replica,
                     interconnect=host.interconnect, usable_memory_gib=gpu.memory_gib, precision=case.precision,
                     engine=case.engine, prompt_tokens=first[1], output_tokens=first[2],
                     kv_precision=case.kv_cache_dtype, max_batch=case.max_batch,
                     kv_cache_memory_fraction=case.memory_fraction,
                     max_num_batched_tokens=case.max_num_batched_tokens, max_model_len=case.max_model_len,
                     kv_admission=case.kv_admission, scheduler=case.scheduler, multi_step=case.multi_step,
                     cuda_graph_max_batch=case.cuda_graph_max_batch,
                     calibration=calibration or Calibration())


@dataclass(frozen=True)
class Prediction:
    saturation_per_s: float
    values: dict  # metric -> predicted value at the case's rate (inf where it cannot keep up)
    admissible_per_s: float | None  # max_rate_for_slo under the case's own p99 limits


def predict(case: LoadCase, calibration=None, *, admissible: bool = True) -> Prediction:
    from solver.perf.queueing import load_model, max_rate_for_slo, replica_for

    replica = replica_for(query_for(case, calibration))
    model = load_model(replica, case.classes, 1.0)
    sat = model.saturation_rate()
    values: dict[str, float] = {"saturation_per_s": sat}
    if case.rate_per_s is not None:
        at = model.at_rate(case.rate_per_s)
        for metric, _ in case.measured:
            if metric.startswith(("ttft_ms_p", "tpot_ms_p")):
                name, p = metric.rsplit("_p", 1)
                values[metric] = at.value(name, int(p))
    # At the system's own utilization (its rate over its measured saturation): the model's
    # percentiles read where its own replica is as full as the real one was.
    if case.rate_per_s is not None and case.measured_saturation_per_s:
        own = model.at_rate(sat * min(case.rate_per_s / case.measured_saturation_per_s, 0.995))
        for metric, _ in case.measured:
            if metric.startswith(("ttft_ms_p", "tpot_ms_p")):
                name, p = metric.rsplit("_p", 1)
                values[metric + "@own_utilization"] = own.value(name, int(p))
    adm = None
    if admissible and case.rate_per_s is not None and (case.ttft_limit_ms or case.tpot_limit_ms):
        adm = max_rate_for_slo(replica, case.classes, 99, ttft_ms=case.ttft_limit_ms, tpot_ms=case.tpot_limit_ms,
                               max_utilization=1.0)
        values["sustained_per_s"] = adm
    return Prediction(sat, values, adm)
