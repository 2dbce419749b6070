"""The array performance model (`estimate_many`, and `estimate` built on it) against a
frozen copy of the scalar model it replaced (tests/oracle_llm_v1.py): on thousands of
random queries, the same feasibility, reason kind and batch, and every number within
1e-9 relative. A change to the physics on purpose replaces the oracle in the same commit."""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from pathlib import Path

import pytest

from solver.catalog.loader import default_catalog
from solver.models.library import get_model, model_names
from solver.perf import estimate, estimate_many
from solver.perf.api import PerfQuery

_ORACLE_PATH = Path(__file__).with_name("oracle_llm_v1.py")
FIELDS = ("memory_gib_per_gpu", "weights_gib_per_gpu", "ttft_ms", "tpot_ms", "latency_ms", "requests_per_s")


def _oracle():
    name = "tests_oracle_llm_v1"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _ORACLE_PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
    return sys.modules[name]


def _random_queries(n: int, seed: int) -> list[PerfQuery]:
    rng = random.Random(seed)
    catalog = default_catalog()
    gpus = sorted(catalog.gpus.values(), key=lambda g: g.name)
    models = [get_model(m) for m in model_names()]
    out = []
    while len(out) < n:
        gpu = rng.choice(gpus)
        precision = rng.choice(["fp16", "bf16", "fp8", "int8", "fp4", "int4"])
        if not gpu.supports(precision):
            continue
        model = rng.choice(models)
        engine = rng.choice(["vllm", "vllm", "tensorrt-llm", "sglang", "llama.cpp", "tensorrt-llm-0.9", "vllm-0.5",
                             "vllm-0.7", "vllm-0.9", "sglang-0.4", "tensorrt-llm-1.0"])
        span = 1 if rng.random() < 0.9 else rng.choice([2, 4])
        gpus_per = rng.choice([1, 1, 2, 4, 8])
        prompt, output = rng.choice([(128, 128), (512, 256), (2048, 512), (4000, 200), (64, 1024)])
        slo = rng.random()
        out.append(PerfQuery(
            model=model, gpu=gpu, gpus_per_replica=gpus_per * span,
            interconnect=rng.choice(["nvlink", "pcie", "none"]) if gpus_per > 1 else "none",
            usable_memory_gib=gpu.memory_gib * rng.choice([0.9, 1.0]), precision=precision, engine=engine,
            prompt_tokens=prompt, output_tokens=output,
            ttft_slo_ms=rng.choice([200.0, 800.0, 3000.0]) if slo < 0.5 else None,
            tpot_slo_ms=rng.choice([20.0, 50.0, 120.0]) if 0.3 < slo < 0.8 else None,
            latency_slo_ms=rng.choice([5000.0, 20000.0]) if slo > 0.7 else None,
            instances_per_replica=span, inter_node_gbs=rng.choice([50.0, 400.0]) if span > 1 else None,
            batch=rng.choice([1, 8, 64, 512]) if rng.random() < 0.15 else None,
            batching="static" if engine == "tensorrt-llm-0.9" and rng.random() < 0.5 else "continuous",
            max_batch=rng.choice([None, None, 16, 256]),
            kv_cache_memory_fraction=rng.choice([None, None, 0.5, 0.95]),
            size_with_error_band=rng.random() < 0.2,
            scheduler=rng.choice([None, None, "chunked_mixed", "prefill_first"]),
            cuda_graph_max_batch=rng.choice([None, None, 0, 64, 8192]),
            max_num_batched_tokens=rng.choice([None, None, 512, 16384]),
            max_model_len=rng.choice([None, None, 4096]),
        ))
    return out


def _same(a, b) -> list[str]:
    diffs = []
    if (a.feasible, a.reason_kind, a.batch) != (b.feasible, b.reason_kind, b.batch):
        diffs.append(f"feasible/kind/batch {(a.feasible, a.reason_kind, a.batch)} vs {(b.feasible, b.reason_kind, b.batch)}")
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if not (x == y or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)):
            diffs.append(f"{name} {x!r} vs {y!r}")
    return diffs


@pytest.mark.parametrize("seed", [1, 2])
def test_arrays_match_the_scalar_model(seed):
    oracle = _oracle()
    queries = _random_queries(1500, seed)
    many = estimate_many(queries)
    assert len(many) == len(queries)
    feasible = 0
    for q, got in zip(queries, many):
        try:
            want = oracle.estimate(q)
        except (ValueError, ZeroDivisionError) as exc:  # the oracle refuses: so must the product
            with pytest.raises(type(exc)):
                estimate(q)
            continue
        diffs = _same(got, want)
        assert not diffs, f"{q.model.name} on {q.gpu.name} x{q.gpus_per_replica} {q.precision} {q.engine}: {diffs}"
        feasible += got.feasible
    assert 0.2 * len(queries) < feasible < len(queries)  # both kinds of answer are exercised


def test_one_query_equals_the_batch():
    queries = _random_queries(60, 7)
    many = estimate_many(queries)
    for q, got in zip(queries, many):
        assert not _same(estimate(q), got)
