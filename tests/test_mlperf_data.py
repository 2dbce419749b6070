"""The shipped MLPerf Inference LLM data (solver/perf/data/mlperf_*.csv, PROVENANCE.md) is well formed:
the columns the collectors promised, finite positive numbers, ordered percentiles, a source on every row
and a dataset row for every benchmark."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parents[1] / "solver" / "perf" / "data"
RESULTS_CSV = DATA_DIR / "mlperf_llm_results.csv"
DATASETS_CSV = DATA_DIR / "mlperf_datasets.csv"

RESULT_COLUMNS = (
    "round,division,submitter,system,benchmark,scenario,model,gpu,gpus_total,nodes,engine,engine_version,tp,pp,ep,"
    "dp_replicas,weight_precision,kv_cache_dtype,max_batch,max_num_batched_tokens,chunked_prefill,gpu_memory_fraction,"
    "target_qps,completed_samples_per_s,completed_tokens_per_s,ttft_limit_ms,tpot_limit_ms,ttft_ms_p50,ttft_ms_p90,"
    "ttft_ms_p99,tpot_ms_p50,tpot_ms_p90,tpot_ms_p99,latency_ms_p50,latency_ms_p99,result_valid,source_repo,"
    "source_commit,source_paths,config_notes"
).split(",")
# Columns that hold a number whenever they are not blank.
RESULT_NUMERIC = ["gpus_total", "nodes", "tp", "pp", "ep", "dp_replicas", "max_batch", "max_num_batched_tokens",
                  "gpu_memory_fraction", "target_qps", "completed_samples_per_s", "completed_tokens_per_s",
                  "ttft_limit_ms", "tpot_limit_ms", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p50",
                  "tpot_ms_p90", "tpot_ms_p99", "latency_ms_p50", "latency_ms_p99"]
DATASET_COLUMNS = ["benchmark", "dataset", "model", "stats_basis", "sample_count",
                   "input_tokens_mean", "input_tokens_p50", "input_tokens_p90", "input_tokens_p99", "input_tokens_max",
                   "output_tokens_mean", "output_tokens_p50", "output_tokens_p90", "output_tokens_p99",
                   "output_tokens_max", "input_tokens_cap", "output_tokens_cap",
                   "observed_output_tokens_per_sample_median", "observed_rows",
                   "source_repo", "source_commit", "source_path", "source_quote", "notes"]
DATASET_NUMERIC = [c for c in DATASET_COLUMNS if c.startswith(("sample_count", "input_tokens", "output_tokens",
                                                                "observed_"))]
SCENARIOS = {"Server", "Offline", "Interactive"}


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="module")
def results():
    return _read(RESULTS_CSV)


@pytest.fixture(scope="module")
def datasets():
    return _read(DATASETS_CSV)


def _number(row: dict[str, str], column: str, where: str) -> float | None:
    value = row[column]
    if value == "":
        return None
    number = float(value)  # raises on text in a numeric column
    assert math.isfinite(number) and number > 0, f"{where}: {column}={value!r}"
    return number


def test_results_have_the_promised_columns(results):
    header, rows = results
    assert header == RESULT_COLUMNS
    assert 60 <= len(rows) <= 150
    assert all(None not in row and len(row) == len(RESULT_COLUMNS) for row in rows)  # no ragged lines


def test_results_numbers_are_finite_and_positive(results):
    _, rows = results
    for i, row in enumerate(rows, start=2):
        for column in RESULT_NUMERIC:
            _number(row, column, f"{RESULTS_CSV.name}:{i}")
        # every result states what it measured
        assert _number(row, "completed_samples_per_s", f"line {i}") is not None
        assert _number(row, "gpus_total", f"line {i}") is not None


def test_results_percentiles_are_ordered(results):
    _, rows = results
    for i, row in enumerate(rows, start=2):
        for metric in ("ttft_ms", "tpot_ms"):
            values = [_number(row, f"{metric}_{p}", f"line {i}") for p in ("p50", "p90", "p99")]
            present = [v for v in values if v is not None]
            assert present == sorted(present), f"line {i}: {metric} {values}"
        p50, p99 = _number(row, "latency_ms_p50", f"line {i}"), _number(row, "latency_ms_p99", f"line {i}")
        assert p50 is None or p99 is None or p50 <= p99, f"line {i}: latency"


def test_results_rows_are_sourced_and_labelled(results):
    _, rows = results
    keys = set()
    for i, row in enumerate(rows, start=2):
        assert row["source_repo"].count("/") == 1, f"line {i}"
        assert len(row["source_commit"]) == 40 and int(row["source_commit"], 16) >= 0, f"line {i}"
        paths = row["source_paths"].split(" | ")
        assert paths[0].endswith("mlperf_log_summary.txt"), f"line {i}"
        assert row["round"].startswith("v") and row["division"] in {"closed", "open"}
        assert row["scenario"] in SCENARIOS and row["result_valid"] == "VALID", f"line {i}"
        assert row["engine"] and row["gpu"] and row["model"], f"line {i}"
        if row["scenario"] == "Offline":  # one query at t=0: no per-request latency, no limits
            assert not (row["ttft_ms_p50"] or row["latency_ms_p50"] or row["ttft_limit_ms"]), f"line {i}"
        else:
            assert row["ttft_limit_ms"] and row["tpot_limit_ms"], f"line {i}"
            assert _number(row, "ttft_ms_p99", f"line {i}") <= _number(row, "ttft_limit_ms", f"line {i}") * 1.05
        key = (row["round"], row["submitter"], row["system"], row["benchmark"], row["scenario"])
        assert key not in keys, f"duplicate result {key}"
        keys.add(key)
        tp, pp, dp = (_number(row, c, f"line {i}") for c in ("tp", "pp", "dp_replicas"))
        if tp and dp:  # replicas never need more GPUs than the system has
            assert tp * (pp or 1) * dp <= float(row["gpus_total"]), f"line {i}"


def test_every_engine_family_and_round_is_there(results):
    _, rows = results
    engines = {row["engine"] for row in rows}
    assert {"vLLM", "SGLang", "TensorRT-LLM"} <= engines
    assert len({row["round"] for row in rows}) >= 3


def test_datasets_have_the_promised_columns(datasets):
    header, rows = datasets
    assert header == DATASET_COLUMNS
    for i, row in enumerate(rows, start=2):
        assert None not in row and row["source_repo"] and row["source_commit"] and row["source_path"], f"line {i}"
        for column in DATASET_NUMERIC:
            _number(row, column, f"{DATASETS_CSV.name}:{i}")
        values = [_number(row, f"output_tokens_{p}", f"line {i}") for p in ("p50", "p90", "p99", "max")]
        present = [v for v in values if v is not None]
        assert present == sorted(present), f"line {i}: output percentiles {values}"
        values = [_number(row, f"input_tokens_{p}", f"line {i}") for p in ("p50", "p90", "p99", "max")]
        present = [v for v in values if v is not None]
        assert present == sorted(present), f"line {i}: input percentiles {values}"


def test_every_benchmark_has_a_dataset_row(results, datasets):
    _, result_rows = results
    _, dataset_rows = datasets
    described = {row["benchmark"] for row in dataset_rows}
    missing = {row["benchmark"] for row in result_rows} - described
    assert not missing, f"benchmarks without a dataset row: {sorted(missing)}"


def test_cases_carry_the_kv_admission_of_the_submitters_harness():
    # NVIDIA's MLPerf harness (every closed-division TensorRT-LLM row) starts the executor with
    # MAX_UTILIZATION: KV blocks as tokens arrive, not the whole sequence reserved up front
    # (solver/perf/under_load.py `_harness_admission` cites the harness). Other rows keep
    # their engine's default (None).
    from solver.perf.queueing import replica_for
    from solver.perf.under_load import mlperf_cases, query_for

    cases = mlperf_cases()
    trt = [c for c in cases if c.engine.startswith("tensorrt-llm")]
    closed = [c for c in trt if c.kv_admission == "paged_on_demand"]
    assert closed and len(closed) < len(trt)  # the open-division (Krai, trtllm-serve) rows keep the default
    assert all(c.kv_admission is None for c in cases if not c.engine.startswith("tensorrt-llm"))
    assert replica_for(query_for(closed[0])).kv_admission == "paged_on_demand"
    default = next(c for c in trt if c.kv_admission is None)
    assert replica_for(query_for(default)).kv_admission == "whole_sequence"  # TensorRT-LLM's own default


def test_cases_run_prefill_first_where_the_submitter_turned_chunked_prefill_off():
    # AMD's harness yaml runs vLLM 0.9 (whose own default, V1, mixes prompt chunks into every
    # step) with enable_chunked_prefill False and V0's num_scheduler_steps: prefill-only steps.
    from solver.perf.queueing import replica_for
    from solver.perf.under_load import mlperf_cases, query_for

    cases = mlperf_cases()
    amd = [c for c in cases if c.label.startswith("v5.1 AMD 8xMI300X_2xEPYC_9575F llama2-70b-99 Server")]
    assert len(amd) == 1 and amd[0].scheduler == "prefill_first"
    assert replica_for(query_for(amd[0])).scheduler == "prefill_first"
    # Rows that do not say so keep their engine's own scheduler, TensorRT-LLM's included.
    assert all(c.scheduler is None for c in cases if not c.engine.startswith("vllm"))
    krai = [c for c in cases if "vllm_092" in c.label]
    assert krai and all(c.scheduler is None for c in krai)
    assert replica_for(query_for(krai[0])).scheduler == "chunked_mixed"
