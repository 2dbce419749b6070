"""Pooled replicas (the large-model formulation) against per-configuration variables.

Both are exact, so on the same workload they prove the same optimal cost; pooling makes
the model smaller, and decoding its solution gives per-configuration replicas that the
independent evaluator accepts (routed traffic included, for multi-class services).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from solver.optimize import formulation
from solver.plan import PlanOptions, plan
from solver.workload.documents import load_workload, parse_workload

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from solve_scaling import generate  # noqa: E402


def _plan(workload, monkeypatch, pooled: bool):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0 if pooled else 10**9)
    return plan(workload, PlanOptions())


@pytest.mark.parametrize("seed", [0, 1])
def test_pooled_and_per_configuration_models_prove_the_same_optimum(seed, monkeypatch):
    workload = parse_workload(generate(30, seed))
    per_config = _plan(workload, monkeypatch, pooled=False)
    pooled = _plan(workload, monkeypatch, pooled=True)
    assert per_config.status == pooled.status == "optimal"
    assert abs(per_config.total_price_usd_per_hour - pooled.total_price_usd_per_hour) <= 1e-6
    assert pooled.evaluation["ok"] and per_config.evaluation["ok"]
    assert pooled.solver.model_size["integer_variables"] < per_config.solver.model_size["integer_variables"]


def test_pooled_multi_class_routing_decodes_exactly(monkeypatch):
    workload = load_workload(ROOT / "examples" / "llm-platform.json")
    result = _plan(workload, monkeypatch, pooled=True)
    assert result.evaluation["ok"], result.evaluation
    reference = _plan(workload, monkeypatch, pooled=False)
    assert abs(result.total_price_usd_per_hour - reference.total_price_usd_per_hour) <= 1e-6
    chat = next(s for s in result.services if s.name == "chat")
    svc = next(s for s in workload.services if s.name == "chat")
    for k, cls in enumerate(svc.demand.classes):
        need = svc.demand.requests_per_s * cls.share * (1 + workload.constraints.headroom)
        routed = sum(a.routed[k] for a in chat.assignments)
        assert routed == pytest.approx(need, rel=1e-6)
    for a in chat.assignments:  # no replica carries more than it can
        assert sum(r / t for r, t in zip(a.routed, a.throughput_per_replica) if t > 0) <= a.replicas * (1 + 1e-6)
