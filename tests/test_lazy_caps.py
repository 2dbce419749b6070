"""Percentile caps computed lazily (only for configurations a plan uses) give the same
optimum as caps computed for every configuration up front, and no plan ever uses a
configuration whose cap is only a bound (solver/compile/lazy_caps.py)."""

from __future__ import annotations

import random

import pytest

from solver.compile import load_caps
from solver.errors import InfeasibleError
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

MODELS = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "llama-3.2-3b"]


def _workload(seed: int) -> dict:
    rng = random.Random(seed)
    services = []
    for i in range(rng.randint(1, 3)):
        demand = {"requests_per_s": round(rng.uniform(0.5, 25), 2)}
        if rng.random() < 0.4:
            demand["classes"] = [{"name": "short", "share": 0.7, "prompt_tokens": 256, "output_tokens": 128},
                                 {"name": "long", "share": 0.3, "prompt_tokens": 2048, "output_tokens": 256}]
        else:
            demand.update(prompt_tokens=rng.choice([256, 1024]), output_tokens=rng.choice([128, 256]))
        slo = {"percentile": rng.choice([50, 90, 99])}
        slo.update(rng.choice([{"ttft_ms": rng.choice([400, 1500])}, {"tpot_ms": rng.choice([30, 60])},
                               {"ttft_ms": 1000, "tpot_ms": 50}]))
        services.append({"name": f"s{i}", "model": rng.choice(MODELS), "precisions": ["fp16", "fp8"],
                         "demand": demand, "slo": slo, "min_replicas": rng.choice([0, 1])})
    return {"name": f"lazy-{seed}", "services": services,
            "constraints": {"providers": rng.sample(["lambda", "nebius", "gcp", "aws"], 2)},
            "solver": {"time_limit_s": 60}}


def _solve(data: dict, lazy: bool, monkeypatch) -> tuple[str, float | None, dict]:
    monkeypatch.setattr(load_caps, "LAZY", lazy)
    try:
        r = plan(parse_workload(data), PlanOptions(cache=None)).to_dict()
    except InfeasibleError:
        return "infeasible", None, {}
    return r["status"], r["total_price_usd_per_hour"], r


@pytest.mark.parametrize("seed", range(6))
def test_lazy_caps_give_the_eager_optimum(seed, monkeypatch):
    data = _workload(seed)
    eager_status, eager_cost, _ = _solve(data, False, monkeypatch)
    lazy_status, lazy_cost, lazy = _solve(data, True, monkeypatch)
    assert lazy_status == eager_status
    if eager_cost is None:
        return
    assert lazy_cost == pytest.approx(eager_cost, rel=1e-9, abs=1e-9)
    assert lazy["evaluation"]["ok"]
    for svc in lazy["services"]:
        for a in svc["assignments"]:
            # every replica is sized by its exact cap, and holds its percentile there
            assert a["at_load"]["meets_slo"], (svc["name"], a)


def test_a_service_that_misses_its_percentile_at_any_load_is_infeasible_in_both_modes(monkeypatch):
    data = {"name": "tight", "services": [{
        "name": "chat", "model": "llama-3.1-8b", "demand": {"requests_per_s": 2, "prompt_tokens": 4000,
                                                             "output_tokens": 64},
        "slo": {"ttft_ms": 5, "percentile": 99}}], "constraints": {"providers": ["lambda"]}}
    assert _solve(data, False, monkeypatch)[0] == "infeasible"
    assert _solve(data, True, monkeypatch)[0] == "infeasible"


def test_a_budget_below_the_optimum_names_the_same_exact_cheapest_fleet_in_both_modes(monkeypatch):
    data = _workload(3)
    cost = _solve(data, True, monkeypatch)[1]
    data["constraints"]["budget_usd_per_hour"] = round(cost * 0.9, 4)
    messages = []
    for lazy in (False, True):
        monkeypatch.setattr(load_caps, "LAZY", lazy)
        with pytest.raises(InfeasibleError) as err:
            plan(parse_workload(data), PlanOptions(cache=None))
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert f"${cost:.4f}/hour" in messages[1]
