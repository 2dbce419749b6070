"""Serving-engine defaults by engine and version, read from the engines' own source.

One source of truth: `data/engine_defaults.csv`, one cited fact per row (docs/engines.md
explains every column and what the numbers mean for the performance model). This module
only reads that table:

    parse_engine("vllm-0.9")            -> ("vllm", "0.9.2")   the newest documented 0.9 release
    parse_engine("sglang")              -> ("sglang", "0.5.23") the newest documented release
    engine_defaults("vllm-0.9", gpu_memory_gib=80, gpu_name="H100 SXM").max_num_seqs -> 1024

Choosing a row. A row applies when the version lies in its `versions` range and every
clause of its `condition` holds; among the rows that apply to a parameter, the one with the
most clauses wins (a blank condition is the fallback). The table is written so that no two
rows with different values can tie (tests/test_engine_defaults.py checks a grid).

Conditions are clauses joined by " & ", each `key op value` with op one of >= <= > < == !=
(= is ==; numbers or words) or ~ / !~ (case-insensitive regular-expression search). Keys:
gpu_memory_gib and gpu_memory_mib (the GPU's total memory; vLLM compares GiB, SGLang MiB),
tensor_parallel, max_model_len (the served context length), compute_capability_major,
gpu_name and usage_context ("openai_api_server", the default, or "llm_class"). A clause on
a quantity that was not given (max_model_len, compute capability) does not hold.

Values are numbers, true/false, words, or `rule:NAME` - a default the engine derives from
other settings (e.g. vLLM V0's token budget max(max_model_len, 2048), SGLang's
mem_fraction_static formula); `_RULES` evaluates them and the tests check every rule named
in the table exists here.

Nothing heavy is imported: csv, re and dataclasses; the table is parsed once, on first use.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DEFAULTS_CSV = Path(__file__).resolve().parent / "data" / "engine_defaults.csv"

# Engines whose defaults the table documents, and engines the product knows without versions.
ENGINE_FAMILIES = ("vllm", "sglang", "tensorrt-llm")
UNVERSIONED_ENGINES = ("llama.cpp",)
_ALIASES = {"tensorrt_llm": "tensorrt-llm", "trtllm": "tensorrt-llm", "trt-llm": "tensorrt-llm",
            "tensorrtllm": "tensorrt-llm", "lmdeploy": "lmdeploy"}
# Calibration-only engines the product names with a version but plans nothing for.
_CALIBRATION_ONLY = {"lmdeploy": ("0.1",)}

USAGE_CONTEXTS = ("openai_api_server", "llm_class")
KV_DTYPE_AUTO = ("model", "checkpoint")
MEMORY_POLICIES = ("total", "free", "static")  # calibration.ENGINE_POLICIES' meanings
SCHEDULERS = ("chunked_mixed", "prefill_first")
KV_ADMISSIONS = ("whole_sequence", "paged_on_demand")

_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(?:\.?post(\d+))?$", re.I)
_ID = re.compile(r"^(?P<family>[a-z][a-z0-9_.]*?(?:-llm)?)(?:[-@=](?P<version>v?\d[\w.]*))?$", re.I)
_CLAUSE = re.compile(r"^\s*([a-z_]+)\s*(>=|<=|==|!=|!~|~|>|<|=)\s*(.+?)\s*$")


@lru_cache(maxsize=4096)
def version_key(version: str) -> tuple[int, ...]:
    """"0.8.5.post1" -> (0, 8, 5, 0, 1): release numbers padded to four, then the post number."""
    m = _VERSION.match(version.strip())
    if not m:
        raise ValueError(f"not a version: {version!r}")
    parts = [int(p) for p in m.group(1).split(".")]
    parts = (parts + [0, 0, 0, 0])[:4]
    return (*parts, int(m.group(2) or 0))


@lru_cache(maxsize=65536)
def in_range(version: str, spec: str) -> bool:
    """Whether `version` lies in `spec`: ">=0.8,<0.10", "==0.9.2" or a bare "0.9.2"."""
    key = version_key(version)
    for clause in spec.split(","):
        clause = clause.strip()
        m = re.match(r"^(>=|<=|==|!=|>|<)?\s*(.+)$", clause)
        op, bound = m.group(1) or "==", version_key(m.group(2))
        if not {">=": key >= bound, "<=": key <= bound, "==": key == bound, "!=": key != bound,
                ">": key > bound, "<": key < bound}[op]:
            return False
    return True


@dataclass(frozen=True)
class _Row:
    engine: str
    versions: str
    parameter: str
    value: str
    clauses: tuple[tuple[str, str, str], ...]
    source: str  # "repo@ref:path"


@lru_cache(maxsize=1)
def _table() -> tuple[_Row, ...]:
    rows = []
    with open(DEFAULTS_CSV, newline="") as f:
        for r in csv.DictReader(f):
            clauses = tuple(_parse_clause(c) for c in r["condition"].split("&") if c.strip())
            rows.append(_Row(r["engine"], r["versions"], r["parameter"], r["value"], clauses,
                             f"{r['source_repo']}@{r['source_ref']}:{r['source_path']}"))
    return tuple(rows)


def _parse_clause(text: str) -> tuple[str, str, str]:
    m = _CLAUSE.match(text)
    if not m:
        raise ValueError(f"engine_defaults.csv: bad condition clause {text!r}")
    return m.group(1), m.group(2), m.group(3)


@lru_cache(maxsize=1)
def releases() -> dict[str, tuple[str, ...]]:
    """Documented releases per engine, oldest first (the table's release_date rows)."""
    found: dict[str, list[str]] = {e: [] for e in ENGINE_FAMILIES}
    for row in _table():
        if row.parameter == "release_date":
            found.setdefault(row.engine, []).append(row.versions)
    return {e: tuple(sorted(v, key=version_key)) for e, v in found.items()}


def _minor(version: str) -> tuple[int, int]:
    return version_key(version)[:2]


def valid_engine_ids() -> list[str]:
    """Every id parse_engine accepts in its short form: families, family-minor, family-release."""
    ids = list(ENGINE_FAMILIES) + list(UNVERSIONED_ENGINES)
    for engine, versions in releases().items():
        minors = []
        for v in versions:
            m = ".".join(str(p) for p in _minor(v))
            if m not in minors:
                minors.append(m)
        ids += [f"{engine}-{m}" for m in minors] + [f"{engine}-{v}" for v in versions if v.count(".") >= 2]
    ids += [f"{e}-{v}" for e, vs in _CALIBRATION_ONLY.items() for v in vs]
    return ids


def _refuse(engine_id: str, why: str) -> ValueError:
    from solver.suggest import did_you_mean  # only a bad id pays for difflib

    listing = "; ".join(f"{e}: {', '.join(v)}" for e, v in releases().items())
    return ValueError(f"{why}. Engines: {', '.join(ENGINE_FAMILIES + UNVERSIONED_ENGINES)}, each optionally "
                      f"with a version (e.g. vllm-0.9, sglang-0.4.6.post5, tensorrt-llm-1.0); documented "
                      f"releases - {listing}{did_you_mean(engine_id, valid_engine_ids())}")


def parse_engine(engine_id: str) -> tuple[str, str]:
    """(engine family, resolved version) for an engine id.

    "vllm" -> the newest documented vLLM release; "vllm-0.9" -> the newest documented 0.9.x;
    "vllm-0.9.1" -> "0.9.1" (any release of a documented minor line up to the newest
    documented release: its defaults come from the version ranges of the table);
    "llama.cpp" -> ("llama.cpp", ""). Raises ValueError naming the valid engines and versions.
    """
    text = (engine_id or "").strip()
    if text.lower() in UNVERSIONED_ENGINES:
        return text.lower(), ""
    m = _ID.match(text)
    family = _ALIASES.get(m.group("family").lower(), m.group("family").lower()) if m else None
    if m and family in _CALIBRATION_ONLY and (m.group("version") or "").lstrip("vV") in _CALIBRATION_ONLY[family]:
        return family, m.group("version").lstrip("vV")
    if not m or family not in ENGINE_FAMILIES:
        raise _refuse(engine_id, f"unknown engine {engine_id!r}")
    documented = releases()[family]
    version = m.group("version")
    if version is None:
        return family, documented[-1]
    version = version.lstrip("vV")
    try:
        key = version_key(version)
    except ValueError:
        raise _refuse(engine_id, f"{engine_id!r}: {version!r} is not a version") from None
    same_minor = [v for v in documented if _minor(v) == key[:2]]
    if not same_minor:
        raise _refuse(engine_id, f"{family} {version} is not a documented release line")
    if len(_VERSION.match(version).group(1).split(".")) <= 2 and "post" not in version.lower():
        return family, same_minor[-1]  # "0.9": the newest documented release of the line
    if key > version_key(documented[-1]):
        raise _refuse(engine_id, f"{family} {version} is newer than the newest documented release "
                                 f"{documented[-1]}")
    return family, _VERSION.match(version).group(0)


# ---------------------------------------------------------------- conditions and rules
def _holds(clause: tuple[str, str, str], ctx: dict) -> bool:
    key, op, want = clause
    have = ctx.get(key)
    if have is None or have == "":
        return op == "!~" or op == "!="
    if op in ("~", "!~"):
        found = re.search(want, str(have), re.I) is not None
        return found if op == "~" else not found
    if isinstance(have, (int, float)) and not isinstance(have, bool):
        w = float(want)
        return {">=": have >= w, "<=": have <= w, ">": have > w, "<": have < w,
                "==": have == w, "=": have == w, "!=": have != w}[op]
    return (str(have).lower() == want.lower()) == (op in ("==", "="))


def _v0_graph(seqs: int) -> int:
    """vLLM V0: the smallest capture size (1, 2, 4, then multiples of 8 to 8192) >= max_num_seqs."""
    return next((s for s in [1, 2, 4] + [8 * i for i in range(1, 1025)] if s >= seqs), 8192)


def _piecewise_sizes(max_tokens: int) -> int:
    """SGLang >= 0.5.10: how many prefill (piecewise) CUDA-graph token sizes it captures."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256))
             + list(range(4608, max_tokens + 1, 512)))
    return len([s for s in sizes if s <= max_tokens])


def _sglang_tp_table(tp: int, tp8: float = 0.81) -> float:
    return 0.79 if tp >= 16 else tp8 if tp >= 8 else 0.85 if tp >= 4 else 0.87 if tp >= 2 else 0.88


def _sglang_large_gpu(ctx: dict) -> float:
    """0.4.6: TP table on GPUs <= 80 GiB, else 0.88; above 96 GiB raised toward 18 GiB of headroom."""
    mib, tp = ctx["gpu_memory_mib"], ctx["tensor_parallel"]
    f = _sglang_tp_table(tp) if mib <= 81920 else 0.88
    if mib > 96 * 1024:
        f = min(f + 48 * 1024 * (1 - f) / mib, (mib - 1024 * 18) / mib)
    return f


def _sglang_reserved_tiers(ctx: dict) -> float:
    """0.4.8-0.5.2: memory held back for activations and CUDA graphs by GPU size."""
    mib, par = ctx["gpu_memory_mib"], ctx["tensor_parallel"]
    if mib < 35 * 1024:
        reserved = (2.8 + par / 10) * 1024
    elif mib < 90 * 1024:
        reserved = (9.5 + par / 2) * 1024
    elif mib < 160 * 1024:
        reserved = (12 + par / 2) * 1024
    else:
        reserved = 32 * 1024
    return round((mib - reserved) / mib, 3)


def _sglang_reserved_formula(ctx: dict, piecewise: bool = False) -> float:
    """0.5.3+: 512 MiB + 1.5 MiB per chunk token + 2 MiB per graph batch + TP/8 GiB, >= 10 GiB on big GPUs."""
    mib, tp = ctx["gpu_memory_mib"], ctx["tensor_parallel"]
    chunk = ctx["max_num_batched_tokens"] or 0
    reserved = 512 + max(chunk, 2048) * 1.5 + ctx["cuda_graph_max_batch"] * 2 + tp / 8 * 1024
    if piecewise:
        reserved += _piecewise_sizes(chunk) * 8
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mib - reserved) / mib, 3)


def _min_or(*values):
    return min(v for v in values if v is not None)


_RULES = {
    "max(max_model_len,2048)": lambda c: None if c["max_model_len"] is None else max(c["max_model_len"], 2048),
    "v0_graph(max_num_seqs)": lambda c: _v0_graph(c["max_num_seqs"]),
    "min(512,max_num_batched_tokens)": lambda c: _min_or(512, c["max_num_batched_tokens"]),
    "min(2*max_num_seqs,512,max_num_batched_tokens)":
        lambda c: _min_or(2 * c["max_num_seqs"], 512, c["max_num_batched_tokens"]),
    "min(2*max_num_seqs,1024,max_num_batched_tokens)":
        lambda c: _min_or(2 * c["max_num_seqs"], 1024, c["max_num_batched_tokens"]),
    "max_batch_size*max_input_len": lambda c: c["max_num_seqs"] * 1024,  # trtllm-build max_input_len 1024
    "sglang_tp_table_large_gpu": _sglang_large_gpu,
    "sglang_reserved_tiers": _sglang_reserved_tiers,
    "sglang_reserved_formula": _sglang_reserved_formula,
    "sglang_reserved_formula_piecewise": lambda c: _sglang_reserved_formula(c, piecewise=True),
}

_BOOL = {"true": True, "false": False}
_INT = ("max_num_seqs", "max_num_seqs_floor", "max_num_batched_tokens", "cuda_graph_max_batch",
        "cuda_graph_max_context", "multi_step")
_FLOAT = ("memory_fraction", "new_token_ratio_init")
# Rules read the parameters resolved before them: this order resolves every dependency.
_ORDER = ("max_num_seqs", "max_num_seqs_floor", "max_num_batched_tokens", "cuda_graph_max_batch",
          "memory_fraction")
REQUIRED = ("max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "kv_cache_dtype_auto",
            "memory_fraction", "memory_policy", "cuda_graph_max_batch", "scheduler", "multi_step",
            "kv_admission", "prefix_caching")


def _convert(parameter: str, value: str, ctx: dict):
    if value.startswith("rule:"):
        return _RULES[value[5:]](ctx)
    if value in _BOOL:
        return _BOOL[value]
    if parameter in _INT:
        return int(value)
    if parameter in _FLOAT:
        return float(value)
    return value


@dataclass(frozen=True)
class EngineDefaults:
    """What a replica of `engine` at `version` does when started with its defaults.

    Counts are sequences (max_num_seqs, cuda_graph_max_batch) or tokens per engine step
    (max_num_batched_tokens); memory_fraction is in memory_policy's meaning ("total": of all
    GPU memory, vLLM gpu_memory_utilization; "static": weights + KV pool of all GPU memory,
    SGLang mem_fraction_static; "free": of the memory left after weights and buffers,
    TensorRT-LLM free_gpu_memory_fraction). None: the table states nothing for it.
    """

    engine: str
    version: str
    release_date: str | None
    max_num_seqs: int  # cap on running sequences (SGLang: the request pool's upper clamp)
    max_num_seqs_floor: int | None  # SGLang: the pool's lower clamp (see max_running_requests)
    max_num_batched_tokens: int | None  # tokens per step; None: whole prompts (vLLM V0, no chunking)
    chunked_prefill: bool
    kv_cache_dtype_auto: str  # "model": the weights' dtype; "checkpoint": the checkpoint's KV quantisation
    memory_fraction: float
    memory_policy: str
    cuda_graph_max_batch: int  # largest decode batch replayed as a CUDA graph; 0: none
    cuda_graph_max_context: int | None  # vLLM V0: decode steps with longer contexts run eagerly
    cuda_graph_padding: bool | None  # False: only exact captured sizes use graphs (TensorRT-LLM 1.x)
    prefill_cuda_graph: bool | None  # SGLang >= 0.5.10 also graphs prefill batches
    scheduler: str  # "chunked_mixed" | "prefill_first"
    multi_step: int  # decode steps per scheduling decision
    kv_admission: str  # "whole_sequence" | "paged_on_demand"
    admission_reserves_full_prompt: bool | None  # vLLM >= 0.19 admits only if the whole prompt fits
    prefix_caching: bool
    scheduling_policy: str | None
    overlap_scheduling: bool | None  # host scheduling overlapped with the GPU step
    async_output_processing: bool | None  # vLLM V0 0.6-0.10
    engine_core: str | None  # vLLM "v0"/"v1"; TensorRT-LLM "pytorch" from 1.0
    new_token_ratio_init: float | None  # SGLang admission estimate of output tokens still to come
    sources: tuple[str, ...]

    def max_running_requests(self, kv_cache_tokens: int, context_tokens: int) -> int:
        """Sequences the engine lets run at once. SGLang derives it from its KV pool:
        min(max(int(kv_tokens / context_len x 512), 2048), 4096), then at most kv_tokens // 2
        (model_runner.py / tp_worker.py); vLLM and TensorRT-LLM cap at max_num_seqs."""
        if self.engine != "sglang":
            return self.max_num_seqs
        pool = min(max(int(kv_cache_tokens / max(context_tokens, 1) * 512), self.max_num_seqs_floor or 0),
                   self.max_num_seqs)
        return max(min(pool, kv_cache_tokens // 2), 1)


def engine_defaults(engine_id: str, gpu_memory_gib: float, tensor_parallel: int = 1, *,
                    gpu_name: str = "", usage_context: str = "openai_api_server",
                    max_model_len: int | None = None,
                    compute_capability_major: int | None = None) -> EngineDefaults:
    """The defaults of `engine_id` on a GPU of `gpu_memory_gib` (total, GiB) with
    `tensor_parallel` GPUs per replica. gpu_name matters for vLLM's A100 exception
    (0.9+) and H100/H200 test (0.8.0); usage_context for vLLM V1's budgets (the API server
    by default); max_model_len for vLLM V0's chunked-prefill rule and token budget;
    compute_capability_major for vLLM's Blackwell CUDA-graph limit."""
    family, version = parse_engine(engine_id)
    if family not in ENGINE_FAMILIES:
        raise ValueError(f"{engine_id!r}: no serving defaults are documented for {family} "
                         f"(documented: {', '.join(ENGINE_FAMILIES)})")
    if gpu_memory_gib <= 0 or tensor_parallel < 1:
        raise ValueError(f"gpu_memory_gib must be > 0 and tensor_parallel >= 1 "
                         f"(got {gpu_memory_gib}, {tensor_parallel})")
    if usage_context not in USAGE_CONTEXTS:
        raise ValueError(f"usage_context must be one of {', '.join(USAGE_CONTEXTS)}")
    ctx: dict = {"gpu_memory_gib": float(gpu_memory_gib), "gpu_memory_mib": float(gpu_memory_gib) * 1024,
                 "tensor_parallel": int(tensor_parallel), "gpu_name": gpu_name, "usage_context": usage_context,
                 "max_model_len": max_model_len, "compute_capability_major": compute_capability_major}
    chosen = _choose(family, version, ctx)
    values: dict = {}
    sources = []
    for parameter in _ORDER + tuple(p for p in chosen if p not in _ORDER):
        row = chosen.get(parameter)
        if row is None:
            continue
        values[parameter] = _convert(parameter, row.value, {**ctx, **values})
        sources.append(row.source)
    missing = [p for p in REQUIRED if p not in values]
    if missing:
        raise ValueError(f"engine_defaults.csv documents no {', '.join(missing)} for {family} {version}")
    get = values.get
    return EngineDefaults(
        engine=family, version=version, release_date=get("release_date"),
        max_num_seqs=values["max_num_seqs"], max_num_seqs_floor=get("max_num_seqs_floor"),
        max_num_batched_tokens=values["max_num_batched_tokens"], chunked_prefill=values["chunked_prefill"],
        kv_cache_dtype_auto=values["kv_cache_dtype_auto"], memory_fraction=values["memory_fraction"],
        memory_policy=values["memory_policy"], cuda_graph_max_batch=values["cuda_graph_max_batch"],
        cuda_graph_max_context=get("cuda_graph_max_context"), cuda_graph_padding=get("cuda_graph_padding"),
        prefill_cuda_graph=get("prefill_cuda_graph"), scheduler=values["scheduler"],
        multi_step=values["multi_step"], kv_admission=values["kv_admission"],
        admission_reserves_full_prompt=get("admission_reserves_full_prompt"),
        prefix_caching=values["prefix_caching"], scheduling_policy=get("scheduling_policy"),
        overlap_scheduling=get("overlap_scheduling"), async_output_processing=get("async_output_processing"),
        engine_core=get("engine_core"), new_token_ratio_init=get("new_token_ratio_init"),
        sources=tuple(dict.fromkeys(sources)))


def _choose(family: str, version: str, ctx: dict) -> dict[str, _Row]:
    """Per parameter, the applicable row with the most condition clauses."""
    best: dict[str, _Row] = {}
    for row in _table():
        if row.engine != family or not in_range(version, row.versions):
            continue
        if not all(_holds(c, ctx) for c in row.clauses):
            continue
        held = best.get(row.parameter)
        if held is None or len(row.clauses) > len(held.clauses):
            best[row.parameter] = row
        elif len(row.clauses) == len(held.clauses) and row.value != held.value:
            raise RuntimeError(f"engine_defaults.csv: {family} {version} {row.parameter} is ambiguous "
                               f"({held.value} vs {row.value}) for {ctx}")
    return best
