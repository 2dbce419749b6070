"""Estimates made column by column (`solver.perf.llm._fitting`, `solver.frozen.row_maker`; the
inputs gathered per group row and per query, `_Shared.arrays`)
against a plain reference: every field named by keyword, one query at a time, from the
same search. A column in the wrong place, a reason or a zeroed rate on the wrong row would
show here as a field that differs (the one-query and batch paths share the column code,
so comparing them alone would not)."""

from __future__ import annotations

from dataclasses import dataclass, fields

import pytest

from solver.frozen import row_maker
from solver.perf import estimate, estimate_many, llm
from solver.perf.api import PerfEstimate
from tests.test_perf_vectorised import _random_queries


def _plain(q) -> PerfEstimate:
    """One supported query's estimate, each field given by name (the loop `_fitting` replaced)."""
    s, mem, a = llm._setup(q), llm.memory_budget(q), llm._ask(q)
    most = mem.max_batch
    if most < 1:
        return estimate(q)  # does not fit: not made by _fitting
    pt, limit, kind, value = llm._search(s, mem, a, most)
    band, ttft_band, tpot_band = llm._point_bands(a, pt)
    feasible = kind == 0
    reason = ""
    if kind == llm._KIND_VRAM:
        reason = f"batch {q.batch} does not fit in VRAM: at most {most} sequences of {q.prompt_tokens + q.output_tokens} tokens"
    elif kind:
        margin = " with the error band" if q.size_with_error_band else ""
        slo = (q.ttft_slo_ms, q.tpot_slo_ms, q.latency_slo_ms)[kind - 1]
        reason = f"misses the {llm._SLO_LABELS[kind]} SLO: {value:.1f} ms{margin} > {slo:g} ms even at batch {pt.batch}"
    return PerfEstimate(
        feasible=feasible, reason=reason, reason_kind=llm._KINDS[kind], batch=pt.batch,
        memory_gib_per_gpu=mem.used_gib(pt.batch), weights_gib_per_gpu=mem.weights_gib, ttft_ms=pt.ttft_s * 1e3,
        tpot_ms=pt.tpot_s * 1e3, latency_ms=pt.latency_s * 1e3,
        requests_per_s=pt.requests_per_s if feasible else 0.0,
        output_tokens_per_s=pt.output_tokens_per_s if feasible else 0.0, binding_limit=llm._LIMITS[limit],
        max_batch_vram=most, kv_cache_gib_per_gpu=pt.batch * mem.kv_gib_per_sequence, step_bound=llm.BOUNDS[pt.bound],
        tensor_parallel=s.tp, pipeline_stages=s.pp, error_band=band, ttft_error_band=ttft_band,
        tpot_error_band=tpot_band)


def _fields(e: PerfEstimate) -> dict:
    return {f.name: (type(getattr(e, f.name)).__name__, getattr(e, f.name)) for f in fields(e)}


@pytest.mark.parametrize("seed", [0, 1])
def test_column_made_estimates_equal_the_plain_ones(seed):
    queries = [q for q in _random_queries(600, seed) if not llm._unsupported(q)]
    many = estimate_many(queries)  # arrays (well above _ARRAYS_FROM)
    kinds = set()
    for q, e in zip(queries, many):
        want = _plain(q)
        assert _fields(e) == _fields(want), q  # same values and same Python types, field by field
        assert _fields(estimate(q)) == _fields(want), q  # numbers, one query
        kinds.add(e.reason_kind)
    # The draw covers every row kind _fitting makes, and the rows it does not.
    assert {"", "ttft", "tpot", "latency", "vram"} <= kinds


def test_row_maker_equals_the_constructor():
    make = row_maker(PerfEstimate)
    values = tuple(f"v{i}" if f.type == "str" else i for i, f in enumerate(fields(PerfEstimate)))
    made = make(values)
    assert made == PerfEstimate(*values)
    assert [getattr(made, f.name) for f in fields(PerfEstimate)] == list(values)
    assert hash(made) == hash(PerfEstimate(*values))
    with pytest.raises(TypeError):
        make(values[:-1])
    with pytest.raises(TypeError):
        make(values + (0,))


def test_row_maker_refuses_what_it_cannot_make():
    @dataclass(frozen=True)
    class WithPost:
        x: int

        def __post_init__(self):
            pass

    with pytest.raises(TypeError):
        row_maker(WithPost)
