"""Property tests of the planner (hypothesis, derandomized, bounded).

- every plan passes the independent evaluator, re-run here on the plan as returned;
- raising a demand never lowers the cost (and an infeasible workload stays infeasible);
- the cost never exceeds the greedy baseline (each service alone on its cheapest
  configuration) whenever that baseline is feasible;
- a concrete mixed workload where sharing instances and mixing GPU types make the
  optimum strictly cheaper than that baseline.

Non-LLM workloads come from `helpers_random` (measured profiles, inline catalogs); LLM
workloads use library models on the default catalog.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from solver.compile.candidates import build_problem
from solver.errors import InfeasibleError
from solver.evaluate import evaluate
from solver.optimize.greedy import greedy_solution, solution_cost
from solver.plan import plan
from solver.compile.resolve import check_references, resolve_catalog
from solver.output.result import PlanResult
from solver.workload.documents import parse_workload
from solver.optimize.solution import Assignment, Solution

sys.path.insert(0, str(Path(__file__).resolve().parent))  # helpers_random sits beside the tests
from helpers_random import random_workload, scale_demand  # noqa: E402

COST_TOL_USD_PER_HOUR = 1e-6


def _settings(examples: int):
    return settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- LLM workloads
LLM_MODELS = ("llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "llama-2-13b", "qwen2.5-32b", "llama-3.1-70b",
              "mixtral-8x7b")
PRECISIONS = (["fp16"], ["fp16", "fp8"], ["fp8"], ["bf16", "fp8"])


@st.composite
def llm_service(draw, name: str) -> dict:
    demand: dict = {"requests_per_s": draw(st.sampled_from((0.25, 1.0, 2.0, 5.0, 12.0, 30.0)))}
    if draw(st.booleans()):
        demand["prompt_tokens"] = draw(st.sampled_from((128, 512, 2048)))
        demand["output_tokens"] = draw(st.sampled_from((64, 256, 512)))
    else:
        short = draw(st.sampled_from((0.5, 0.75, 0.875)))
        demand["classes"] = [{"name": "short", "share": short, "prompt_tokens": 256, "output_tokens": 128},
                             # 3584 + 512 tokens: within every drawn model's context (llama-2: 4096)
                             {"name": "long", "share": 1 - short, "prompt_tokens": 3584, "output_tokens": 512}]
    svc: dict = {"name": name, "model": draw(st.sampled_from(LLM_MODELS)), "precisions": draw(st.sampled_from(PRECISIONS)),
                 "demand": demand}
    slo = {}
    if draw(st.booleans()):
        slo["ttft_ms"] = float(draw(st.sampled_from((800, 1500, 3000, 6000))))
    if draw(st.booleans()):
        slo["tpot_ms"] = float(draw(st.sampled_from((30, 50, 80, 150))))
    if slo:
        svc["slo"] = slo
    if draw(st.booleans()):
        svc["min_replicas"] = draw(st.integers(1, 2))
    return svc


@st.composite
def llm_workloads(draw) -> dict:
    n = draw(st.integers(1, 2))
    w: dict = {"name": "llm", "services": [draw(llm_service(f"llm{i}")) for i in range(n)],
               "solver": {"time_limit_s": 30}}
    constraints: dict = {}
    if draw(st.booleans()):
        constraints["headroom"] = draw(st.sampled_from((0.1, 0.25)))
    if draw(st.booleans()):
        constraints["gpu_types"] = draw(st.sampled_from((["A10", "L4", "A100-80GB"], ["H100-SXM", "L40S"],
                                                         ["A10G", "L4", "T4", "A100-40GB"])))
    if draw(st.integers(0, 3)) == 0:
        constraints["budget_usd_per_hour"] = float(draw(st.sampled_from((2, 5, 20))))
    if constraints:
        w["constraints"] = constraints
    return w


# Seeds rather than st.randoms(): hypothesis's own random source skews towards degenerate
# draws (most workloads came out infeasible); a seeded Random keeps the generator's mix,
# and a failing seed is printed and replays exactly.
non_llm_workloads = st.integers(0, 2**32 - 1).map(lambda seed: random_workload(random.Random(seed)))


# ---------------------------------------------------------------- helpers
def plan_or_none(w: dict) -> PlanResult | None:
    """The plan, or None when the planner proves no fleet fits (any other error fails the test)."""
    try:
        result = plan(parse_workload(w))
    except InfeasibleError as exc:
        note(f"infeasible: {exc}")
        event("infeasible")
        return None
    event("planned")
    return result


def solution_of(result: PlanResult) -> Solution:
    fleet = tuple(sorted((f.offer_id, f.instances) for f in result.fleet))
    assignments = tuple(
        Assignment(a.config, s.name, a.offer_id, a.gpus_per_replica, a.precision, a.replicas, tuple(a.routed),
                   a.instances_per_replica)
        for s in result.services for a in s.assignments)
    return Solution(fleet, assignments)


def assert_passes_evaluator(w: dict, result: PlanResult) -> None:
    assert result.evaluation["ok"], result.evaluation
    workload = parse_workload(w)
    catalog = resolve_catalog(workload)
    report = evaluate(workload, catalog, solution_of(result))
    assert report.ok, report.violations
    assert report.cost_usd_per_hour == pytest.approx(result.total_price_usd_per_hour, abs=COST_TOL_USD_PER_HOUR)
    assert report.gpus == result.gpus


def greedy_baseline(w: dict) -> float | None:
    """Cost of the greedy plan when the independent evaluator accepts it, else None."""
    workload = parse_workload(w)
    catalog = resolve_catalog(workload)
    check_references(workload, catalog)
    problem = build_problem(workload, catalog)
    sol = greedy_solution(problem)
    if sol is None or not evaluate(workload, catalog, sol).ok:
        return None
    return solution_cost(problem, sol)


def assert_monotone(w: dict, service_index: int, factor: float) -> None:
    before = plan_or_none(w)
    after = plan_or_none(scale_demand(w, service_index, factor))
    if before is None:
        assert after is None, "more demand made an infeasible workload feasible"
        return
    if after is not None:
        assert after.total_price_usd_per_hour >= before.total_price_usd_per_hour - COST_TOL_USD_PER_HOUR


def assert_not_above_greedy(w: dict) -> None:
    baseline = greedy_baseline(w)
    event("greedy feasible" if baseline is not None else "greedy infeasible")
    if baseline is None:
        return
    result = plan(parse_workload(w))  # a feasible baseline means a plan must exist
    assert result.total_price_usd_per_hour <= baseline + COST_TOL_USD_PER_HOUR


# ---------------------------------------------------------------- properties
@_settings(80)
@given(non_llm_workloads)
def test_every_plan_passes_the_evaluator(w: dict) -> None:
    result = plan_or_none(w)
    if result is not None:
        assert_passes_evaluator(w, result)


@_settings(12)
@given(llm_workloads())
def test_every_llm_plan_passes_the_evaluator(w: dict) -> None:
    result = plan_or_none(w)
    if result is not None:
        assert_passes_evaluator(w, result)


@_settings(50)
@given(non_llm_workloads, st.integers(0, 2), st.sampled_from((1.25, 1.5, 2.0, 3.0)))
def test_more_demand_never_costs_less(w: dict, which: int, factor: float) -> None:
    assert_monotone(w, which % len(w["services"]), factor)


@_settings(10)
@given(llm_workloads(), st.integers(0, 1), st.sampled_from((1.5, 2.0, 4.0)))
def test_more_llm_demand_never_costs_less(w: dict, which: int, factor: float) -> None:
    assert_monotone(w, which % len(w["services"]), factor)


@_settings(80)
@given(non_llm_workloads)
def test_never_dearer_than_the_greedy_baseline(w: dict) -> None:
    assert_not_above_greedy(w)


@_settings(10)
@given(llm_workloads())
def test_never_dearer_than_the_greedy_baseline_llm(w: dict) -> None:
    assert_not_above_greedy(w)


# ---------------------------------------------------------------- strictly better than greedy
def _offer(name: str, gpu: str, gpus: int, price: float) -> dict:
    return {"provider": "p", "name": name, "gpu": gpu, "gpus_per_instance": gpus, "price_usd_per_hour": price}


MIXED = {
    "name": "sharing-and-mixing",
    "services": [
        # Each needs one 4-GPU A100 replica: alone, a $6 4-GPU instance each; together, one $10 8-GPU instance.
        {"name": "ranker", "demand": {"items_per_min": 80.0},
         "profiles": [{"gpu": "A100-80GB", "gpus_per_replica": 4, "items_per_min": 100.0, "latency_ms": 50.0}]},
        {"name": "detector", "demand": {"items_per_min": 90.0},
         "profiles": [{"gpu": "A100-80GB", "gpus_per_replica": 4, "items_per_min": 100.0, "latency_ms": 50.0}]},
        # 100/min: 4 A10 ($4) is the cheapest single configuration; 1 A10 + 1 A100 ($3.5) is cheaper.
        {"name": "thumbnails", "demand": {"items_per_min": 100.0},
         "profiles": [{"gpu": "A10", "items_per_min": 30.0, "latency_ms": 90.0},
                      {"gpu": "A100-80GB", "items_per_min": 80.0, "latency_ms": 40.0}]},
    ],
    "catalog": {"offers": [_offer("a100x8", "A100-80GB", 8, 10.0), _offer("a100x4", "A100-80GB", 4, 6.0),
                           _offer("a100x1", "A100-80GB", 1, 2.5), _offer("a10x1", "A10", 1, 1.0)]},
}


def test_sharing_and_mixing_beat_the_greedy_baseline_strictly() -> None:
    baseline = greedy_baseline(MIXED)
    assert baseline == pytest.approx(16.0)  # 6 + 6 + 4
    result = plan(parse_workload(MIXED))
    assert_passes_evaluator(MIXED, result)
    assert result.total_price_usd_per_hour == pytest.approx(13.5, abs=COST_TOL_USD_PER_HOUR)  # 10 + 2.5 + 1
    assert result.total_price_usd_per_hour < baseline - 1.0
    fleet = {f.offer_id: f.instances for f in result.fleet}
    assert fleet == {"p/a100x8": 1, "p/a100x1": 1, "p/a10x1": 1}
    thumbnails = next(s for s in result.services if s.name == "thumbnails")
    assert {a.gpu for a in thumbnails.assignments} == {"A10", "A100-80GB"}
