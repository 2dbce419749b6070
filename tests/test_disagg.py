"""Disaggregated serving (issue 24): the worker physics, the exact choice in the MIP against
exhaustive enumeration, cases where it must win and lose, the evaluator's independent
checks, and bad input."""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
from dataclasses import replace

import pytest

from solver.catalog import default_catalog
from solver.compile import disagg as disagg_compile
from solver.compile.candidates import build_problem
from solver.evaluate import evaluate
from solver.models.library import get_model
from solver.perf.api import PerfQuery
from solver.perf.disagg import (decode_worker, kv_transfer_bytes, md1_rate_within, md1_wait_cdf,
                                poisson_mean_within, prefill_worker)
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

from conftest import cli_path


def _h200_query(tp: int, **kw) -> PerfQuery:
    gpu = default_catalog().gpus["H200"]
    base = dict(model=get_model("llama-3.1-70b"), gpu=gpu, gpus_per_replica=tp, interconnect="nvlink",
                usable_memory_gib=gpu.memory_gib, precision="fp8", engine="tensorrt-llm", prompt_tokens=4000,
                output_tokens=500, ttft_slo_ms=1000, tpot_slo_ms=30)
    base.update(kw)
    return PerfQuery(**base)


# ---------------------------------------------------------------- physics
def test_kv_transfer_bytes_is_the_prompts_whole_cache():
    # Llama-3.1-70B: 80 layers x 8 KV heads x 128 x (K and V) x 1 byte (fp8 KV) x 4,000 tokens.
    assert kv_transfer_bytes(_h200_query(1)) == pytest.approx(80 * 8 * 128 * 2 * 1 * 4000)


def test_md1_wait_matches_a_simulated_queue():
    rng = random.Random(7)
    for lam, d, t in ((1.0, 0.5, 0.3), (1.6, 0.5, 1.5), (15.0, 0.05, 0.6)):
        wait, below, n = 0.0, 0, 200_000
        for _ in range(n):
            wait = max(wait + d - rng.expovariate(lam), 0.0)
            below += wait <= t
        assert md1_wait_cdf(lam, d, t) == pytest.approx(below / n, abs=0.01)
    # No wait with probability 1 - rho.
    assert md1_wait_cdf(1.0, 0.5, 0.0) == pytest.approx(0.5)


def test_md1_rate_is_the_highest_that_meets_the_percentile():
    rate = md1_rate_within(0.5, 0.5, 99)
    assert md1_wait_cdf(rate, 0.5, 0.5) >= 0.99 - 1e-9
    assert md1_wait_cdf(rate * 1.01, 0.5, 0.5) < 0.99


def test_poisson_mean_within_slots():
    m = poisson_mean_within(32, 99)
    cdf = lambda mean: sum(math.exp(-mean) * mean ** k / math.factorial(k) for k in range(33))
    assert cdf(m) >= 0.99 - 1e-9 and cdf(m * 1.01) < 0.99
    big = poisson_mean_within(2000, 99)  # the normal approximation beyond exact sums
    assert 1880 < big < 1900


def test_prefill_and_decode_workers_on_h200():
    pre = prefill_worker(_h200_query(1), link_gbit_s=400)
    dec = decode_worker(_h200_query(2), link_gbit_s=400)
    assert pre.feasible and dec.feasible
    # No percentile: a prefill worker runs back to back; its TTFT counts the KV transfer.
    assert pre.rate_rps == pytest.approx(1000 / pre.prompt_ms)
    assert pre.ttft_ms == pytest.approx(pre.prompt_ms + pre.transfer_ms + 30)  # + one decode step (TPOT 30 ms)
    assert dec.tpot_ms <= 30 and dec.binding_limit == "tpot"
    # Under a percentile both sustain less.
    assert prefill_worker(_h200_query(1), link_gbit_s=400, percentile=99).rate_rps < pre.rate_rps
    assert decode_worker(_h200_query(2), link_gbit_s=400, percentile=99).rate_rps < dec.rate_rps
    # A slow link: the transfer eats the TTFT budget, and the bytes cap the rate.
    slow = prefill_worker(_h200_query(1), link_gbit_s=2.5)
    assert not slow.feasible and slow.reason_kind == "ttft" and "KV transfer" in slow.reason


# ---------------------------------------------------------------- the choice, exactly
def _workload(serving="auto", **svc):
    s = {"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16"], "serving": serving,
         "demand": {"requests_per_s": 6, "prompt_tokens": 6000, "output_tokens": 300},
         "slo": {"ttft_ms": 1500, "tpot_ms": 40}}
    s.update(svc)
    return {"name": "small", "services": [s],
            "catalog": {"source": "inline", "offers": [
                {"provider": "cloud", "name": "a10g-1", "region": "r1", "gpu": "A10G", "gpus_per_instance": 1,
                 "price_usd_per_hour": 1.0},
                {"provider": "cloud", "name": "l40s-1", "region": "r1", "gpu": "L40S", "gpus_per_instance": 1,
                 "price_usd_per_hour": 1.9},
                {"provider": "cloud", "name": "h100-1", "region": "r1", "gpu": "H100-SXM", "gpus_per_instance": 1,
                 "price_usd_per_hour": 3.1}]}}


def _best_by_enumeration(problem) -> float:
    """The cheapest fleet over every count of aggregated replicas, prefill and decode workers
    (one-GPU instances: a replica or worker is an instance), per link tier."""
    prices = {o.id: o.price_usd_per_hour for o in problem.offers}
    demand = problem.service("chat").total_demand
    agg = [(c.throughput, prices[c.offer_id]) for c in problem.configs if c.service == "chat"]
    tiers = {}
    for s in problem.services:
        if s.role:
            tiers.setdefault(s.link, {})[s.role] = [(c.throughput, prices[c.offer_id])
                                                   for c in problem.configs if c.service == s.name]
    # Every (capacity, cost) a disaggregated deployment on one tier can have, Pareto-pruned.
    options = [(0.0, 0.0)]
    for roles in tiers.values():
        def fleets(items):
            top = [math.ceil(demand / t) for t, _ in items]
            for counts in itertools.product(*(range(n + 1) for n in top)):
                yield (sum(k * t for k, (t, _) in zip(counts, items)), sum(k * p for k, (_, p) in zip(counts, items)))
        pre, dec = list(fleets(roles["prefill"])), list(fleets(roles["decode"]))
        for (cp, pp), (cd, pd) in itertools.product(pre, dec):
            options.append((min(cp, cd), pp + pd))
    best = math.inf
    top = [math.ceil(demand / t) for t, _ in agg]
    for counts in itertools.product(*(range(n + 1) for n in top)):
        cap = sum(k * t for k, (t, _) in zip(counts, agg))
        cost = sum(k * p for k, (_, p) in zip(counts, agg))
        for dcap, dcost in options:
            if cap + dcap >= demand * (1 - 1e-9):
                best = min(best, cost + dcost)
    return best


@pytest.mark.parametrize("demand,prompt,output", [(6, 6000, 300), (3, 3000, 200), (2, 500, 400)])
def test_the_mip_matches_exhaustive_enumeration(monkeypatch, demand, prompt, output):
    # One tier per region keeps the enumeration small; the MIP handles any number alike.
    monkeypatch.setattr(disagg_compile, "LINK_LADDER_GBIT_S", (10.0,))
    w = _workload(demand={"requests_per_s": demand, "prompt_tokens": prompt, "output_tokens": output})
    wl = parse_workload(w)
    problem = build_problem(wl, _catalog_of(wl), cache=None)
    assert any(s.role for s in problem.services)
    result = plan(wl, PlanOptions(cache=None))
    assert result.status == "optimal"
    assert result.total_price_usd_per_hour == pytest.approx(_best_by_enumeration(problem), abs=1e-6)
    assert result.evaluation.get("ok", True) is not False


def _catalog_of(wl):
    from solver.compile.resolve import resolve_catalog

    return resolve_catalog(wl, None)


def test_aggregated_serving_has_no_pools_and_auto_is_never_dearer():
    agg = plan(parse_workload(_workload("aggregated")), PlanOptions())
    assert not any(s.role for s in agg.services)
    auto = plan(parse_workload(_workload("auto")), PlanOptions())
    assert auto.total_price_usd_per_hour <= agg.total_price_usd_per_hour + 1e-9


def _h200_case(serving: str, percentile: int | None = None) -> dict:
    slo = {"ttft_ms": 1000, "tpot_ms": 30}
    if percentile:
        slo["percentile"] = percentile
    return {"name": "llama70b", "services": [
        {"name": "chat", "model": "llama-3.1-70b", "precisions": ["fp8"], "engine": "tensorrt-llm",
         "serving": serving, "demand": {"requests_per_s": 10, "prompt_tokens": 4000, "output_tokens": 500},
         "slo": slo}], "constraints": {"gpu_types": ["H200"]}}


def test_disaggregation_wins_on_long_prompts():
    """aiconfigurator's case (Llama-3.1-70B fp8 on H200, 4,000/500 tokens, TTFT 1 s, TPOT 30 ms)."""
    agg = plan(parse_workload(_h200_case("aggregated", 99)), PlanOptions())
    auto = plan(parse_workload(_h200_case("auto", 99)), PlanOptions())
    assert auto.status == agg.status == "optimal"
    assert auto.total_price_usd_per_hour < agg.total_price_usd_per_hour * 0.9
    roles = {s.role for s in auto.services if s.role}
    assert roles == {"prefill", "decode"}
    chat = next(s for s in auto.services if s.name == "chat")
    assert chat.capacity >= 10 - 1e-6


def test_disaggregation_loses_on_short_prompts_and_a_slow_network(monkeypatch):
    # Ethernet at 1 Gbit/s per worker at most, 200-token prompts: the transfer and a second
    # pool buy nothing, and the optimizer keeps serving aggregated.
    monkeypatch.setattr(disagg_compile, "LINK_LADDER_GBIT_S", (1.0,))
    w = _workload(demand={"requests_per_s": 4, "prompt_tokens": 200, "output_tokens": 400})
    wl = parse_workload(w)
    problem = build_problem(wl, _catalog_of(wl), cache=None)
    assert any(c.service.startswith("chat#prefill") for c in problem.configs)  # pools were there to take
    assert any(c.service.startswith("chat#decode") for c in problem.configs)
    auto = plan(wl, PlanOptions(cache=None))
    agg = plan(parse_workload(_workload("aggregated", demand={"requests_per_s": 4, "prompt_tokens": 200,
                                                                "output_tokens": 400})), PlanOptions(cache=None))
    assert not any(s.role for s in auto.services)
    assert auto.total_price_usd_per_hour == pytest.approx(agg.total_price_usd_per_hour)


def test_disaggregated_only_uses_no_aggregated_replicas():
    result = plan(parse_workload(_h200_case("disaggregated")), PlanOptions())
    assert result.status == "optimal"
    chat = next(s for s in result.services if s.name == "chat")
    assert not chat.assignments
    assert {s.role for s in result.services if s.role} == {"prefill", "decode"}


# ---------------------------------------------------------------- the evaluator
def _plan_solution(case: dict):
    wl = parse_workload(case)
    result = plan(wl, PlanOptions())
    from solver.optimize.solution import Assignment, Solution

    fleet = tuple(sorted((line.offer_id, line.instances) for line in result.fleet))
    assignments = []
    for s in result.services:
        for v in s.assignments:
            assignments.append(Assignment(v.config, s.name, v.offer_id, v.gpus_per_replica, v.precision,
                                          v.replicas, tuple(v.routed), v.instances_per_replica))
    return wl, Solution(fleet, tuple(sorted(assignments, key=lambda a: (a.service, a.config_key))))


def test_the_evaluator_rederives_pools_and_catches_mismatches():
    wl, sol = _plan_solution(_h200_case("disaggregated"))
    cat = default_catalog()
    assert evaluate(wl, cat, sol).ok
    # Decode pool told to take less than prefill: the rates no longer match.
    bent = tuple(replace(a, routed=tuple(r * 0.5 for r in a.routed)) if "#decode" in a.service else a
                 for a in sol.assignments)
    report = evaluate(wl, cat, replace(sol, assignments=bent))
    assert any("every request prefilled must be decoded" in v for v in report.violations)
    # A pool asked for more than its workers sustain.
    heavy = tuple(replace(a, routed=tuple(r * 3 for r in a.routed)) for a in sol.assignments)
    report = evaluate(wl, cat, replace(sol, assignments=heavy))
    assert any("sustain" in v for v in report.violations)
    # A tier faster than the worker's link share.
    fast = tuple(replace(a, service=a.service.rsplit("-", 1)[0] + "-99999G") if "#" in a.service else a
                 for a in sol.assignments)
    report = evaluate(wl, cat, replace(sol, assignments=fast))
    assert any("link share" in v for v in report.violations)


# ---------------------------------------------------------------- bad input
def _cli_solve(tmp_path, workload: dict) -> subprocess.CompletedProcess:
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    return subprocess.run([cli_path(), "solve", str(path)], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("change,needle", [
    ({"serving": "disagregated"}, "serving"),
    ({"serving": "disaggregated", "disaggregation": {"decode_gpu_types": ["L4"]}},
     "services[0].disaggregation.decode_gpu_types"),
    ({"serving": "auto", "disaggregation": {"prefill_gpu_types": []}}, "prefill_gpu_types"),
    ({"serving": "auto", "disaggregation": {"prefill_gpu_types": ["H300"]}}, "prefill_gpu_types"),
    ({"serving": "aggregated", "disaggregation": {"prefill_gpu_types": ["H200"]}}, "serving"),
])
def test_bad_disaggregation_input_exits_2(tmp_path, change, needle):
    case = _h200_case("auto")
    case["constraints"] = {}
    case["services"][0].update(change)
    proc = _cli_solve(tmp_path, case)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert needle in out and "Traceback" not in out


def test_disaggregation_with_periods_is_refused(tmp_path):
    case = _h200_case("disaggregated")
    case["periods"] = [{"name": "day", "hours": 12}, {"name": "night", "hours": 12}]
    proc = _cli_solve(tmp_path, case)
    assert proc.returncode == 2 and "serving" in proc.stdout + proc.stderr


# ---------------------------------------------------------------- the simulator
def test_the_simulator_confirms_one_worker_at_its_model_rate():
    from solver.sim.disagg import PoolWorker, simulate_deployment

    pre_q, dec_q = _h200_query(4), _h200_query(2)
    pre = prefill_worker(pre_q, link_gbit_s=400, percentile=99)
    dec = decode_worker(dec_q, link_gbit_s=400, percentile=99)
    # One prefill worker at the rate the M/D/1 sizing allows: p99 TTFT within the SLO.
    at = simulate_deployment([PoolWorker(pre_q, 1)], [PoolWorker(dec_q, 1)], pre.rate_rps, 400,
                             duration_s=2000, seed=3, percentile=99)
    assert at.percentile("ttft_ms", 99) <= 1000 * 1.05
    assert at.percentile("ttft_ms", 99) > 600  # and near it: the sizing is not far from tight
    # Twice the rate on one worker overloads it.
    over = simulate_deployment([PoolWorker(pre_q, 1)], [PoolWorker(dec_q, 1)], pre.rate_rps * 2, 400,
                               duration_s=600, seed=3, percentile=99)
    assert over.percentile("ttft_ms", 99) > 1000
    # One decode worker at its model rate: p99 TPOT within the SLO.
    fed = simulate_deployment([PoolWorker(pre_q, 8)], [PoolWorker(dec_q, 1)], dec.rate_rps, 400,
                              duration_s=600, seed=3, percentile=99)
    assert fed.percentile("tpot_ms", 99) <= 30


def test_a_plans_deployment_is_replayed_and_met():
    result = plan(parse_workload(_h200_case("auto", 99)), PlanOptions())
    pools = [s for s in result.services if s.role]
    assert pools and all(s.simulated and s.simulated.verdict == "met" for s in pools)
    assert pools[0].simulated.ttft_ms <= 1000 and pools[0].simulated.tpot_ms <= 30


# ---------------------------------------------------------------- estimate
def test_estimate_prices_one_worker(tmp_path):
    base = [cli_path(), "estimate", "llama-3.1-70b", "--gpu", "H200", "--precision", "fp8", "--engine", "tensorrt-llm",
            "--prompt-tokens", "4000", "--output-tokens", "500", "--ttft-ms", "1000", "--tpot-ms", "30",
            "--format", "json"]
    pre = json.loads(subprocess.run(base + ["--role", "prefill", "--gpus-per-replica", "1"], capture_output=True,
                                    text=True, check=True, timeout=120).stdout)[0]
    expected = prefill_worker(_h200_query(1), link_gbit_s=100)
    assert pre["role"] == "prefill" and pre["requests_per_s"] == pytest.approx(expected.rate_rps, rel=1e-3)
    assert pre["kv_transfer_ms"] == pytest.approx(expected.transfer_ms, abs=0.01)
    dec = json.loads(subprocess.run(base + ["--role", "decode", "--gpus-per-replica", "2", "--link-gbit-s", "400"],
                                    capture_output=True, text=True, check=True, timeout=120).stdout)[0]
    assert dec["requests_per_s"] == pytest.approx(decode_worker(_h200_query(2), link_gbit_s=400).rate_rps, rel=1e-3)
    bad = subprocess.run(base + ["--role", "decode", "--rate", "3"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--role" in bad.stderr


# ---------------------------------------------------------------- --explain
def test_explain_says_why_each_serving_won():
    long = plan(parse_workload(_h200_case("auto", 99)), PlanOptions(explain=True))
    agg = plan(parse_workload(_h200_case("aggregated", 99)), PlanOptions())
    choice = long.serving_choice
    assert choice.aggregated_only_usd_per_hour == pytest.approx(agg.total_price_usd_per_hour)
    assert choice.disaggregated_only_usd_per_hour >= long.total_price_usd_per_hour - 1e-6
    # Short prompts, long answers (no load): aggregated wins, and disaggregated-only costs more.
    case = _h200_case("auto")
    case["services"][0].update(model="qwen3-32b", demand={"requests_per_s": 10, "prompt_tokens": 1000,
                                                          "output_tokens": 1000})
    short = plan(parse_workload(case), PlanOptions(explain=True))
    assert not any(s.role for s in short.services)
    assert short.serving_choice.aggregated_only_usd_per_hour == pytest.approx(short.total_price_usd_per_hour)
    assert short.serving_choice.disaggregated_only_usd_per_hour > short.total_price_usd_per_hour
    # Without serving: auto there is no choice to explain.
    assert plan(parse_workload(_h200_case("aggregated")), PlanOptions(explain=True)).serving_choice is None


# ---------------------------------------------------------------- reviews
def test_a_review_compares_serving_choices(tmp_path):
    from solver.review import parse_review, run_review

    review = parse_review({
        "name": "serving", "base": {"workload": _h200_case("auto", 99)}, "time_limit_per_scenario_s": 60,
        "sensitivity": {"enabled": False},
        "scenarios": [{"name": "aggregated", "changes": [{"serving": {"serving": "aggregated"}}]},
                      {"name": "disaggregated", "changes": [{"serving": {"service": "chat",
                                                                          "serving": "disaggregated"}}]}]})
    results = {r.id: r for r in run_review(review, tmp_path, workers=1)}
    alone = {name: plan(parse_workload(_h200_case(name, 99)), PlanOptions()).total_price_usd_per_hour
             for name in ("auto", "aggregated", "disaggregated")}
    assert results["base"].usd_per_hour == pytest.approx(alone["auto"])
    assert results["aggregated"].usd_per_hour == pytest.approx(alone["aggregated"])
    assert results["disaggregated"].usd_per_hour == pytest.approx(alone["disaggregated"])
    assert results["base"].usd_per_hour < results["aggregated"].usd_per_hour


# ---------------------------------------------------------------- the example
def test_the_example_disaggregates_through_the_cli():
    from conftest import EXAMPLES

    proc = subprocess.run([cli_path(), "solve", str(EXAMPLES / "disaggregated.json"), "--format", "json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["status"] == "optimal" and d["evaluation"]["ok"]
    assert d["total_price_usd_per_hour"] == pytest.approx(84.0)
    pools = [s for s in d["services"] if s["role"]]
    assert {s["role"] for s in pools} == {"prefill", "decode"}
    assert all(s["serves"] == "rag" and s["simulated"]["verdict"] == "met" for s in pools)


def test_gpu_limits_take_gpu_names_as_people_write_them():
    case = _h200_case("disaggregated")
    case["services"][0]["disaggregation"] = {"prefill_gpu_types": ["nvidia h200"], "decode_gpu_types": ["H200"]}
    result = plan(parse_workload(case), PlanOptions())
    assert result.status == "optimal" and any(s.role == "prefill" for s in result.services)


def test_a_pooled_model_with_pools_never_claims_a_false_bound():
    """Enough services for the pooled model and its per-service bounds (formulation.POOL_FROM_CONFIGS):
    with serving auto the plan is never dearer than aggregated-only, and its proven bound holds."""
    services = []
    for i, (prompt, output) in enumerate([(4000, 300), (300, 1200), (2000, 200)]):
        services.append({"name": f"s{i}", "model": "llama-3.1-8b", "precisions": ["fp16"], "serving": "auto",
                         "demand": {"requests_per_s": 4 + i, "prompt_tokens": prompt, "output_tokens": output},
                         "slo": {"ttft_ms": 2000, "tpot_ms": 60}})
    auto = {"name": "pooled", "services": services, "constraints": {"providers": ["aws", "gcp"]}}
    agg = {**auto, "services": [dict(s, serving="aggregated") for s in services]}
    a = plan(parse_workload(auto), PlanOptions())
    b = plan(parse_workload(agg), PlanOptions())
    assert a.solver.candidates >= 300  # the pooled model, with service bounds
    assert a.total_price_usd_per_hour <= b.total_price_usd_per_hour + 1e-6
    bound = a.solver.bound_usd_per_hour
    assert bound is None or bound <= b.total_price_usd_per_hour + 1e-6  # aggregated-only is a plan of the same model


def test_the_deployment_check_says_missed_when_a_pool_is_overloaded():
    from solver.compile.disagg import deployment_check
    from solver.compile.resolve import resolve_catalog

    wl, sol = _plan_solution(_h200_case("disaggregated", 99))
    cat = resolve_catalog(wl, None)
    problem = build_problem(wl, cat)
    tier = next(a.service for a in sol.assignments if "#decode@" in a.service).split("@", 1)[1]
    assert deployment_check(problem, sol, cat, "chat", tier)["view"]["verdict"] == "met"
    # Half the decode workers for the same traffic: the decode batch overflows its slots.
    halved = tuple(replace(a, replicas=max(a.replicas // 2, 1)) if "#decode@" in a.service else a
                   for a in sol.assignments)
    decode = sum(a.replicas for a in sol.assignments if "#decode@" in a.service)
    if decode < 2:
        pytest.skip("one decode worker: nothing to halve")
    check = deployment_check(problem, replace(sol, assignments=halved), cat, "chat", tier)
    assert check["view"]["verdict"] == "missed" and "TPOT" in check["warnings"][0]
