"""Plans far from sensible say so: replicas running at a few percent of what they could
sustain get a warning naming the bound that forces it (solver/output/sanity.py)."""

from __future__ import annotations

from solver.plan import plan
from solver.workload.documents import parse_workload


def _workload(ttft_ms: float, min_replicas: int = 0, rate: float = 20.0) -> dict:
    return {"name": "low-utilization", "services": [{
        "name": "chat", "model": "llama-3.1-70b", "precisions": ["fp8"], "min_replicas": min_replicas,
        "demand": {"requests_per_s": rate, "prompt_tokens": 6000, "output_tokens": 200},
        "slo": {"ttft_ms": ttft_ms, "tpot_ms": 40, "percentile": 99}}]}


def _warnings(doc: dict) -> list[str]:
    return plan(parse_workload(doc)).services[0].warnings


def test_a_tight_ttft_bound_that_empties_replicas_is_named():
    warnings = [w for w in _warnings(_workload(225)) if "could sustain" in w]
    assert len(warnings) == 1
    assert "TTFT bound of 225 ms binds" in warnings[0] and "To fix" in warnings[0]


def test_a_sensible_plan_has_no_such_warning():
    assert not [w for w in _warnings(_workload(2000)) if "could sustain" in w]


def test_min_replicas_is_named_when_it_is_what_binds():
    warnings = [w for w in _warnings(_workload(2000, min_replicas=12, rate=0.5)) if "could sustain" in w]
    assert len(warnings) == 1 and "min_replicas 12 binds" in warnings[0]


def _tail_workload(huge_share: float) -> dict:
    return {"name": "tail-class", "services": [{
        "name": "chat", "model": "llama-3.1-8b", "precisions": ["fp8"],
        "demand": {"requests_per_s": 10, "classes": [
            {"name": "short", "share": 1 - huge_share, "prompt_tokens": 500, "output_tokens": 200},
            {"name": "huge", "share": huge_share, "prompt_tokens": 60000, "output_tokens": 200}]},
        "slo": {"ttft_ms": 1000, "tpot_ms": 50, "percentile": 99}}]}


def test_a_class_small_enough_for_the_tail_no_longer_rules_configurations_out():
    # 0.5 % of requests with 60k-token prompts miss 1 s TTFT on almost every GPU even alone:
    # p99 lets 1 % miss, so they may sit in the tail (the mixture percentile still holds).
    from solver.plan import PlanOptions

    # The queueing model's decision, without simulation in the loop (below: what the simulator says).
    tail = plan(parse_workload(_tail_workload(0.005)), PlanOptions(prefetch_at_load=False, verify=False))
    assert tail.evaluation["ok"]
    notes = [w for w in tail.services[0].warnings if "sits in the 1 % of requests" in w]
    assert notes and "class huge (0.500% of requests)" in notes[0]
    for a in tail.services[0].assignments:
        assert a.at_load.meets_slo and a.at_load.ttft_ms <= 1000
    # At 2 % the class is too large for the tail: only configurations that serve it in time remain.
    big = plan(parse_workload(_tail_workload(0.02)), PlanOptions(prefetch_at_load=False, verify=False))
    assert not [w for w in big.services[0].warnings if "sits in the" in w]
    assert big.total_price_usd_per_hour > tail.total_price_usd_per_hour


def test_the_simulator_refutes_a_tail_class_that_stalls_the_others():
    # In the simulator each 60k-token prompt holds the replica's steps for over a second, and
    # the short requests behind it wait: the mixture's p99 TTFT on the cheap replica is far
    # above the queueing model's. Simulation in the loop lowers that cap and the plan moves to
    # a faster replica, whose check passes.
    from solver.plan import PlanOptions

    model_only = plan(parse_workload(_tail_workload(0.005)), PlanOptions(prefetch_at_load=False, verify=False))
    checked = plan(parse_workload(_tail_workload(0.005)), PlanOptions(prefetch_at_load=False))
    assert checked.total_price_usd_per_hour > model_only.total_price_usd_per_hour
    assert all(a.verified.verdict == "met" for a in checked.services[0].assignments)
