"""solver/perf/engines.py and its table, solver/perf/data/engine_defaults.csv: engine ids
and versions, the conditions (GPU memory, TP, GPU name, usage context, context length),
a citation on every row, refusals of bad ids, and the module agreeing with the CSV."""

import csv
import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from solver.perf import engines
from solver.perf.engines import DEFAULTS_CSV, EngineDefaults, engine_defaults, parse_engine

ROWS = list(csv.DictReader(open(DEFAULTS_CSV, newline="")))
COLUMNS = ["engine", "versions", "parameter", "value", "condition", "source_repo", "source_ref", "source_path",
           "quote", "notes"]


# ---------------------------------------------------------------- the table itself
def test_the_csv_has_the_documented_columns_and_every_row_is_cited():
    with open(DEFAULTS_CSV, newline="") as f:
        assert next(csv.reader(f)) == COLUMNS
    assert len(ROWS) > 150
    repos = {"vllm": "vllm-project/vllm", "sglang": "sgl-project/sglang", "tensorrt-llm": "NVIDIA/TensorRT-LLM"}
    for i, r in enumerate(ROWS, start=2):
        where = f"engine_defaults.csv line {i}"
        assert r["engine"] in engines.ENGINE_FAMILIES, where
        assert r["source_repo"] == repos[r["engine"]], where
        assert r["source_ref"].strip() and r["source_path"].strip() and r["quote"].strip(), where
        # a tag (v0.9.2), a 40-hex commit, or an index file of the search tool, never blank
        assert re.fullmatch(r"v\d[\w.]*|[0-9a-f]{40}|index-file-\d+", r["source_ref"]), (where, r["source_ref"])
        if r["parameter"] != "release_date" and r["source_ref"].startswith("v"):
            assert re.search(r"#L\d+$", r["source_path"]), (where, "a line number for a verified quote")
        assert "\n" not in r["quote"] and len(r["quote"]) <= 160, where


def test_no_registry_or_web_host_is_named_in_the_table():
    text = DEFAULTS_CSV.read_text()
    assert not re.search(r"https?://|pythonhosted|pypi\.org|github\.com", text)


def test_every_value_parses_and_every_rule_exists():
    kinds = {"kv_cache_dtype_auto": engines.KV_DTYPE_AUTO, "memory_policy": engines.MEMORY_POLICIES,
             "scheduler": engines.SCHEDULERS, "kv_admission": engines.KV_ADMISSIONS}
    rules = set()
    for r in ROWS:
        value, parameter = r["value"], r["parameter"]
        engines.in_range("0.1", r["versions"])  # the range parses
        for clause in filter(str.strip, r["condition"].split("&")):
            engines._parse_clause(clause)
        if value.startswith("rule:"):
            rules.add(value[5:])
            continue
        if parameter in kinds:
            assert value in kinds[parameter], (parameter, value)
        elif parameter in engines._INT:
            assert int(value) >= 0
        elif parameter in engines._FLOAT:
            assert 0 < float(value) <= 1
        elif parameter == "release_date":
            assert re.fullmatch(r"20\d\d-\d\d-\d\d", value)
        elif parameter not in ("engine_core", "scheduling_policy"):
            assert value in ("true", "false"), (parameter, value)
    assert rules <= set(engines._RULES), rules - set(engines._RULES)
    assert set(engines._RULES) <= rules, set(engines._RULES) - rules  # no dead rule in the module


def test_release_rows_are_exact_versions_and_ranges_use_documented_syntax():
    for r in ROWS:
        if r["parameter"] == "release_date":
            assert re.fullmatch(r"\d+\.\d+\.\d+(\.post\d+)?", r["versions"]), r["versions"]
        else:
            for clause in r["versions"].split(","):
                assert re.fullmatch(r"(>=|<=|==|>|<)?\d+(\.\d+)*(\.post\d+)?", clause.strip()), r["versions"]


# ---------------------------------------------------------------- parsing engine ids
@pytest.mark.parametrize("engine_id, expected", [
    ("vllm", ("vllm", "0.34.0")),
    ("vllm-0.9", ("vllm", "0.9.2")),
    ("vllm-0.9.2", ("vllm", "0.9.2")),
    ("vllm-0.9.1", ("vllm", "0.9.1")),
    ("vllm-0.5", ("vllm", "0.5.5")),  # the product's existing id
    ("vllm-0.8.5.post1", ("vllm", "0.8.5.post1")),
    ("VLLM-v0.7", ("vllm", "0.7.3")),
    ("sglang", ("sglang", "0.5.23")),
    ("sglang-0.4", ("sglang", "0.4.10.post2")),
    ("sglang-0.4.6.post5", ("sglang", "0.4.6.post5")),
    ("tensorrt-llm", ("tensorrt-llm", "1.2.1")),
    ("tensorrt-llm-1.0", ("tensorrt-llm", "1.0.0")),
    ("tensorrt-llm-0.9", ("tensorrt-llm", "0.9.0")),  # the product's existing id
    ("trtllm-1.0", ("tensorrt-llm", "1.0.0")),
    ("llama.cpp", ("llama.cpp", "")),
    ("lmdeploy-0.1", ("lmdeploy", "0.1")),  # calibration-only engine of the product
])
def test_parse_engine(engine_id, expected):
    assert parse_engine(engine_id) == expected


def test_an_unversioned_id_means_the_newest_documented_release():
    for family, versions in engines.releases().items():
        newest = max(versions, key=engines.version_key)
        assert parse_engine(family) == (family, newest)
        assert engine_defaults(family, 80).version == newest


def test_every_product_engine_id_parses():
    from solver.perf.api import CALIBRATION_ENGINES, ENGINES

    for engine_id in ENGINES + CALIBRATION_ENGINES:
        family, _ = parse_engine(engine_id)
        assert family in engines.ENGINE_FAMILIES + engines.UNVERSIONED_ENGINES + ("lmdeploy",)


@pytest.mark.parametrize("bad, hint", [
    ("vlm", "'vllm'"),
    ("sglng-0.4", "sglang"),
    ("vllm-0.15", "vllm-0.1"),  # a release line whose source was not read
    ("vllm-0.9.x", "not a version"),
    ("tensorrt-llm-2.0", "tensorrt-llm-"),
    ("vllm-0.99.0", "not a documented release line"),
    ("vllm-0.34.5", "newer than the newest documented release"),
    ("", "unknown engine"),
])
def test_bad_ids_are_refused_with_the_valid_engines_versions_and_a_suggestion(bad, hint):
    with pytest.raises(ValueError) as err:
        parse_engine(bad)
    message = str(err.value)
    assert hint in message
    for family in engines.ENGINE_FAMILIES:
        assert family in message
    assert "0.9.2" in message and "1.2.1" in message  # the documented releases are listed


def test_engines_without_documented_defaults_are_refused_by_engine_defaults():
    with pytest.raises(ValueError, match="no serving defaults are documented for llama.cpp"):
        engine_defaults("llama.cpp", 24)
    with pytest.raises(ValueError, match="gpu_memory_gib"):
        engine_defaults("vllm", 0)
    with pytest.raises(ValueError, match="usage_context"):
        engine_defaults("vllm", 80, usage_context="server")


# ---------------------------------------------------------------- conditions
def test_vllm_batch_caps_follow_gpu_memory_name_and_usage_context():
    h100 = engine_defaults("vllm-0.9", 80, gpu_name="NVIDIA H100 80GB HBM3")
    a100 = engine_defaults("vllm-0.9", 80, gpu_name="A100-SXM4-80GB")
    l4 = engine_defaults("vllm-0.9", 24, gpu_name="L4")
    assert (h100.max_num_seqs, h100.max_num_batched_tokens) == (1024, 8192)
    assert (a100.max_num_seqs, a100.max_num_batched_tokens) == (256, 2048)  # the A100 exception
    assert (l4.max_num_seqs, l4.max_num_batched_tokens) == (256, 2048)
    offline = engine_defaults("vllm-0.9", 80, gpu_name="H100", usage_context="llm_class")
    assert offline.max_num_batched_tokens == 16384
    # 0.8.0 decided by device name, 0.8.5 by memory alone (no A100 exception yet)
    assert engine_defaults("vllm-0.8.0", 80, gpu_name="H100").max_num_batched_tokens == 8192
    assert engine_defaults("vllm-0.8.0", 80, gpu_name="A100").max_num_seqs == 1024
    assert engine_defaults("vllm-0.8.5.post1", 80, gpu_name="A100").max_num_seqs == 1024
    # 0.34: a >= 160 GiB tier
    b200 = engine_defaults("vllm", 180, gpu_name="B200", compute_capability_major=10)
    assert (b200.max_num_batched_tokens, b200.cuda_graph_max_batch) == (16384, 1024)
    assert engine_defaults("vllm", 141, gpu_name="H200").max_num_batched_tokens == 8192


def test_vllm_v0_versus_v1():
    v0 = engine_defaults("vllm-0.7", 80, gpu_name="H100")
    assert (v0.engine_core, v0.max_num_seqs, v0.chunked_prefill, v0.scheduler) == ("v0", 256, False, "prefill_first")
    assert v0.max_num_batched_tokens is None  # whole prompts: max(max_model_len, 2048) with no length given
    assert engine_defaults("vllm-0.7", 80, max_model_len=4096).max_num_batched_tokens == 4096
    long_ctx = engine_defaults("vllm-0.7", 80, max_model_len=131072)  # V0 chunks prompts of >32K models
    assert (long_ctx.chunked_prefill, long_ctx.max_num_batched_tokens, long_ctx.scheduler) == \
        (True, 2048, "chunked_mixed")
    assert engine_defaults("vllm-0.6.0", 80, max_model_len=131072).max_num_batched_tokens == 512
    assert engine_defaults("vllm-0.5.0", 80, max_model_len=131072).chunked_prefill is False
    assert (v0.cuda_graph_max_batch, v0.cuda_graph_max_context, v0.prefix_caching) == (256, 8192, False)
    v1 = engine_defaults("vllm-0.8", 80, gpu_name="H100")
    assert (v1.engine_core, v1.chunked_prefill, v1.scheduler, v1.prefix_caching) == ("v1", True, "chunked_mixed", True)
    assert v1.cuda_graph_max_batch == 512 and v1.kv_admission == "paged_on_demand"
    assert engine_defaults("vllm-0.13", 80).overlap_scheduling is False
    assert engine_defaults("vllm-0.14.1", 80).overlap_scheduling is True


def test_kv_cache_auto_follows_the_model_until_the_engines_read_the_checkpoint():
    assert engine_defaults("vllm-0.9", 80).kv_cache_dtype_auto == "model"
    assert engine_defaults("vllm-0.13", 80).kv_cache_dtype_auto == "model"
    assert engine_defaults("vllm-0.14.1", 80).kv_cache_dtype_auto == "checkpoint"
    assert engine_defaults("sglang-0.4", 80).kv_cache_dtype_auto == "model"
    assert engine_defaults("sglang-0.5.3", 80).kv_cache_dtype_auto == "checkpoint"
    assert engine_defaults("tensorrt-llm-0.9", 80).kv_cache_dtype_auto == "checkpoint"


def test_vllm_memory_fraction_by_version():
    assert engine_defaults("vllm-0.19", 80).memory_fraction == 0.9
    assert engine_defaults("vllm-0.20", 80).memory_fraction == 0.92
    assert engine_defaults("vllm", 80).memory_fraction == 0.92
    assert {engine_defaults(v, 80).memory_policy for v in ("vllm-0.5", "vllm")} == {"total"}


@pytest.mark.parametrize("tp, fraction", [(1, 0.88), (2, 0.87), (4, 0.85), (8, 0.81), (16, 0.79)])
def test_sglang_0_4_mem_fraction_static_by_tp(tp, fraction):
    assert engine_defaults("sglang-0.4.3.post4", 80, tp).memory_fraction == fraction
    assert engine_defaults("sglang-0.4.3.post4", 80, tp).memory_policy == "static"


def test_sglang_tp8_value_moved_between_releases():
    assert engine_defaults("sglang-0.3.0", 80, 8).memory_fraction == 0.83
    assert engine_defaults("sglang-0.3", 80, 8).memory_fraction == 0.82  # 0.3.6.post3


def test_sglang_gpu_memory_tiers():
    # chunked_prefill_size and cuda_graph_max_bs by GPU memory (MiB in the source)
    small, mid, h100, h200, b200 = (engine_defaults("sglang-0.5.6.post2", g, 1) for g in (24, 48, 80, 141, 180))
    assert [d.max_num_batched_tokens for d in (small, mid, h100, h200, b200)] == [2048, 4096, 8192, 8192, 16384]
    assert [d.cuda_graph_max_batch for d in (small, mid, h100, h200, b200)] == [24, 32, 256, 256, 512]
    assert engine_defaults("sglang-0.5.6.post2", 80, 8).cuda_graph_max_batch == 512
    assert engine_defaults("sglang-0.5.3", 24, 1).cuda_graph_max_batch == 16
    assert engine_defaults("sglang", 24, 1).max_num_batched_tokens == 4096
    assert engine_defaults("sglang", 24, 1).cuda_graph_max_batch == 48
    assert engine_defaults("sglang-0.4.8", 141, 1).cuda_graph_max_batch == 256
    assert engine_defaults("sglang-0.4.8", 180, 1).cuda_graph_max_batch == 512
    assert engine_defaults("sglang-0.4.3.post4", 24, 4).cuda_graph_max_batch == 80
    assert engine_defaults("sglang-0.4.3.post4", 24, 1).cuda_graph_max_batch == 8


def test_sglang_mem_fraction_formulas():
    # 0.4.8-0.5.2: (M - (9.5 + TP/2) GiB) / M under 90 GiB
    assert engine_defaults("sglang-0.5.1", 80, 1).memory_fraction == round((81920 - 10.0 * 1024) / 81920, 3)
    # 0.5.3+: 512 + 1.5 x 8192 + 2 x 256 + 128 MiB = 13440 MiB on an 80 GiB GPU
    assert engine_defaults("sglang-0.5.6.post2", 80, 1).memory_fraction == round((81920 - 13440) / 81920, 3)
    # 0.5.10+: plus 8 MiB per piecewise prefill graph (58 sizes up to 8192 tokens)
    assert engine_defaults("sglang-0.5.10.post1", 80, 1).memory_fraction == round((81920 - 13440 - 58 * 8) / 81920, 3)
    # small GPUs are not floored at 10 GiB
    assert engine_defaults("sglang-0.5.6.post2", 24, 1).memory_fraction == \
        round((24576 - (512 + 2048 * 1.5 + 24 * 2 + 128)) / 24576, 3)


def test_sglang_scheduling():
    d = engine_defaults("sglang", 80)
    assert (d.scheduler, d.chunked_prefill, d.kv_admission, d.overlap_scheduling) == \
        ("prefill_first", True, "whole_sequence", True)
    assert engine_defaults("sglang-0.3.0", 80).overlap_scheduling is False
    assert engine_defaults("sglang-0.4.1.post7", 80).scheduling_policy == "lpm"
    assert engine_defaults("sglang-0.4.3.post4", 80).scheduling_policy == "fcfs"
    assert d.prefill_cuda_graph is True and engine_defaults("sglang-0.5.9", 80).prefill_cuda_graph is None


def test_sglang_running_requests_come_from_its_pool():
    d = engine_defaults("sglang", 80)
    assert d.max_running_requests(kv_cache_tokens=500_000, context_tokens=131072) == 2048  # floor
    assert d.max_running_requests(kv_cache_tokens=500_000, context_tokens=8192) == 4096  # cap
    assert d.max_running_requests(kv_cache_tokens=3000, context_tokens=8192) == 1500  # kv_tokens // 2
    assert engine_defaults("sglang-0.3.0", 80).max_running_requests(10**7, 8192) == 5120
    assert engine_defaults("vllm-0.9", 80, gpu_name="H100").max_running_requests(10**6, 8192) == 1024


def test_tensorrt_llm_eras():
    old = engine_defaults("tensorrt-llm-0.9", 80)
    assert (old.max_num_seqs, old.max_num_batched_tokens, old.cuda_graph_max_batch) == (1, 1024, 0)
    assert (old.memory_fraction, old.memory_policy, old.kv_admission) == (0.9, "free", "whole_sequence")
    mid = engine_defaults("tensorrt-llm-0.13", 80)
    assert (mid.max_num_seqs, mid.max_num_batched_tokens) == (256, 8192)
    new = engine_defaults("tensorrt-llm-1.0", 80)
    assert (new.max_num_seqs, new.max_num_batched_tokens, new.chunked_prefill) == (2048, 8192, False)
    assert (new.cuda_graph_max_batch, new.cuda_graph_padding, new.engine_core) == (128, False, "pytorch")
    assert (new.scheduler, new.overlap_scheduling, new.prefix_caching) == ("chunked_mixed", True, True)


# ---------------------------------------------------------------- module == CSV
GRID = list(itertools.product((16, 24, 40, 48, 80, 96, 141, 180, 192), (1, 2, 4, 8, 16),
                              ("", "H100", "A100"), ("openai_api_server", "llm_class"), (None, 4096, 131072),
                              (None, 9, 10)))


@pytest.mark.parametrize("engine_id", [f"{e}-{v}" for e, vs in engines.releases().items() for v in vs])
def test_every_documented_release_resolves_unambiguously_and_matches_the_csv(engine_id):
    family, version = parse_engine(engine_id)
    fields = ("chunked_prefill", "kv_cache_dtype_auto", "memory_policy", "scheduler", "kv_admission",
              "prefix_caching", "multi_step", "max_num_seqs")
    plain = {field: {r["value"].lower() for r in ROWS if r["engine"] == family and r["parameter"] == field
                     and engines.in_range(version, r["versions"]) and not r["value"].startswith("rule:")}
             for field in fields}
    for gib, tp, name, usage, length, cc in GRID[::7]:
        d = engine_defaults(engine_id, gib, tp, gpu_name=name, usage_context=usage, max_model_len=length,
                            compute_capability_major=cc)
        assert isinstance(d, EngineDefaults) and d.version == version and d.sources
        assert d.max_num_seqs >= 1 and 0 < d.memory_fraction < 1
        # every plain (non-rule) value the module returns is the value of a row that applies
        for field in fields:
            assert str(getattr(d, field)).lower() in plain[field], (engine_id, field)
        assert d.release_date == next(r["value"] for r in ROWS if r["engine"] == family
                                      and r["parameter"] == "release_date" and r["versions"] == version)


def test_sources_cite_the_rows_used():
    d = engine_defaults("vllm-0.9", 80, gpu_name="H100")
    assert any(s.startswith("vllm-project/vllm@v0.9.2:vllm/config.py#L") for s in d.sources)
    assert any("@v0.21.0:vllm/engine/arg_utils.py#L" in s for s in d.sources)  # the 0.9-0.21 table


def test_the_module_imports_fast_and_without_grpc():
    source = Path(engines.__file__).read_text()
    top_level = [line for line in source.splitlines() if re.match(r"^(import|from) ", line)]
    assert all(re.match(r"^(import (csv|re)|from (__future__|dataclasses|functools|pathlib) import)", line)
               for line in top_level), top_level
    code = "import sys, solver.perf.engines as e; e.engine_defaults('vllm', 80); assert 'grpc' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])
