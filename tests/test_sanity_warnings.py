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
