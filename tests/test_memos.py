"""What a process remembers by exact input: solves that ended in a proof (mathopt_backend.SOLVES), pruned offers."""

from __future__ import annotations

import threading
from dataclasses import replace

from ortools.math_opt import result_pb2

from solver.caches import clear_all
from solver.optimize.backends import SolveOptions, get_backend
from solver.optimize.backends.mathopt_backend import SOLVES, SolveMemo
from solver.optimize.linear import LinearModel
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

SMALL = {"name": "small", "services": [{
    "name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
    "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256},
    "slo": {"ttft_ms": 2000, "tpot_ms": 60}}]}


def _knapsack(capacity: float) -> LinearModel:
    lm = LinearModel()
    x = [lm.var(f"x{i}", 0, 10, integer=True) for i in range(3)]
    lm.row("cover", [(x[0], 3.0), (x[1], 5.0), (x[2], 7.0)], lb=capacity)
    lm.objective = {x[0]: 2.0, x[1]: 3.1, x[2]: 4.5}
    return lm


def _same(a, b) -> bool:
    return (a.status, a.values, a.objective, a.bound, a.backend, a.detail, a.duals) == \
           (b.status, b.values, b.objective, b.bound, b.backend, b.detail, b.duals)


def test_a_repeated_solve_is_answered_from_the_memo_exactly():
    clear_all()
    for name in ("scip", "highs"):
        backend = get_backend(name)
        first = backend.solve(_knapsack(23), SolveOptions())
        hits = SOLVES.hits
        again = backend.solve(_knapsack(23), SolveOptions(time_limit_s=5))  # the time limit is not part of the key
        assert SOLVES.hits == hits + 1
        assert first.status == "optimal" and _same(first, again)
        other = backend.solve(_knapsack(24), SolveOptions())  # another model: solved
        assert SOLVES.hits == hits + 1 and other.objective != first.objective
    lp = get_backend("scip").solve(_knapsack(23), SolveOptions(relax_integrality=True))  # another question: solved
    assert lp.duals is not None and not _same(lp, first)
    hits = SOLVES.hits
    again = get_backend("highs").solve(_knapsack(23), SolveOptions(relax_integrality=True))  # GLOP either way
    assert SOLVES.hits == hits + 1 and _same(lp, replace(again, backend=lp.backend))


def test_hints_and_gaps_are_part_of_the_key_and_progress_always_solves():
    clear_all()
    backend = get_backend("scip")
    backend.solve(_knapsack(23), SolveOptions())
    backend.solve(_knapsack(23), SolveOptions(hint=[8.0, 0.0, 0.0]))
    backend.solve(_knapsack(23), SolveOptions(relative_gap=0.1))
    assert SOLVES.hits == 0 and len(SOLVES) == 3
    seen = []
    backend.solve(_knapsack(23), SolveOptions(on_progress=lambda p, v: seen.append(p)))
    assert SOLVES.hits == 0 and seen  # a caller that wants progress gets a solve, with its progress


def test_a_solve_without_a_proof_is_not_remembered():
    clear_all()
    backend = get_backend("scip")
    cancel = threading.Event()
    cancel.set()
    lm = LinearModel()  # not tiny: the cancel is watched, and the solve stops at once
    xs = [lm.var(f"x{i}", 0, 5, integer=True) for i in range(40)]
    lm.row("cover", [(x, 1.0 + (i % 7) / 3) for i, x in enumerate(xs)], lb=37.5)
    lm.objective = {x: 1.0 + (i % 5) / 7 for i, x in enumerate(xs)}
    out = backend.solve(lm, SolveOptions(cancel=cancel))
    assert out.status != "optimal" and len(SOLVES) == 0


def test_the_memo_is_bounded_in_entries_and_bytes():
    memo = SolveMemo(max_entries=2, max_bytes=100)
    for key in (b"a", b"b", b"c"):
        memo.put(key, result_pb2.SolveResultProto())
    assert len(memo) == 2 and memo.get(b"a") is None and memo.get(b"c") is not None
    memo.put(b"d" * 60, result_pb2.SolveResultProto())
    memo.put(b"e" * 50, result_pb2.SolveResultProto())  # 1 + 60 + 50 bytes > 100: the oldest go
    assert len(memo) == 1 and memo.get(b"e" * 50) is not None
    memo.put(b"f" * 101, result_pb2.SolveResultProto())  # larger than the whole memo: not kept
    assert memo.get(b"f" * 101) is None and memo.get(b"e" * 50) is not None


def test_plans_are_the_same_from_a_cold_and_a_warm_memo():
    workload = parse_workload(SMALL)
    clear_all()
    cold = plan(workload, PlanOptions(cancel=threading.Event())).to_dict()
    warm = plan(workload, PlanOptions(cancel=threading.Event())).to_dict()
    assert SOLVES.hits >= 1
    for d in (cold, warm):
        d.pop("solve_time_s", None)
        d["solver"].pop("timings", None)
        d["solver"].pop("total_time_s", None)
        d["solver"].pop("solve_time_s", None)
    assert cold == warm


def test_a_tiny_solve_is_not_watched_for_a_cancel_but_the_plan_still_stops():
    import pytest

    from solver.errors import Cancelled

    clear_all()
    cancel = threading.Event()
    cancel.set()
    out = get_backend("scip").solve(_knapsack(23), SolveOptions(cancel=cancel))  # 3 variables: not watched
    assert out.status == "optimal"

    def on_stage(name: str) -> None:
        if name == "solve":
            cancel.set()

    cancel.clear()
    with pytest.raises(Cancelled):
        plan(parse_workload(SMALL), PlanOptions(cancel=cancel, on_stage=on_stage))


def test_pruned_offers_are_remembered_by_their_exact_input():
    from solver.catalog import default_catalog
    from solver.compile.candidates import PrunedOffers
    from solver.compile.pruning import prune_offers

    catalog = default_catalog()
    offers = list(catalog.offers)
    memo = PrunedOffers(max_entries=4)
    for limits, keep, tiers, by_location in [({}, set(), None, False), ({offers[0].id: 2}, set(), None, False),
                                             ({}, {offers[1].id}, None, True)]:
        want = prune_offers(offers, limits, catalog, keep=keep, tiers=tiers, by_location=by_location)
        assert memo.prune(offers, limits, catalog, keep, tiers, by_location) == want
        assert memo.prune(list(offers), dict(limits), catalog, set(keep), tiers, by_location) == want
    assert memo.hits == 3 and memo.misses == 3
    cheaper = [o.with_price(o.price_usd_per_hour / 2) if i % 2 else o for i, o in enumerate(offers)]  # new objects
    assert memo.prune(cheaper, {}, catalog, set(), None, False) == prune_offers(cheaper, {}, catalog)
    assert memo.misses == 4 and len(memo) == 4


def test_a_services_whole_row_of_candidates_from_the_cache_is_what_building_it_gives():
    import sys
    from pathlib import Path

    from solver.compile.candidates import CandidateCache, build_problem
    from solver.compile.resolve import resolve_catalog

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from solve_scaling import generate

    doc = generate(6, 3)
    doc["services"].append(dict(doc["services"][0], name="twin"))  # the same performance, another name
    workload = parse_workload(doc)
    catalog = resolve_catalog(workload)
    cache = CandidateCache()
    fresh = build_problem(workload, catalog, None)
    first = build_problem(workload, catalog, cache)
    again = build_problem(workload, catalog, cache)  # every row whole from the cache
    assert len(cache._rows) == len(workload.services)
    for p in (first, again):
        assert (p.configs, p.rejections, p.dominated, p.offers) == \
               (fresh.configs, fresh.rejections, fresh.dominated, fresh.offers)
    cache.clear()
    assert len(cache._rows) == 0


def test_the_memos_keep_no_catalog_sent_with_a_request_alive():
    import gc
    import json
    import weakref
    from pathlib import Path

    offers = json.loads((Path(__file__).resolve().parents[1] / "examples/catalogs/seed-a10-a100.json").read_text())
    doc = dict(SMALL, catalog={"offers": offers["offers"]})
    refs = []
    for _ in range(3):
        workload = parse_workload(doc)
        from solver.compile.resolve import resolve_catalog

        catalog = resolve_catalog(workload)  # a new catalog object, as for each request
        result = plan(workload, PlanOptions(catalog=catalog, cancel=threading.Event()))
        assert result.status == "optimal"
        refs.append(weakref.ref(catalog))
        del catalog, workload, result
    gc.collect()
    assert all(r() is None for r in refs)
