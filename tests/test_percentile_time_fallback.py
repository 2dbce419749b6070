"""When the time limit ends inside the percentile-cap loop (solver/solve_stage.py), the
plan of exact configurations a round already found is the answer - "feasible", not proven
optimal, checked by the evaluator - rather than "no fleet found": on the generated
100-service p99 workload a 12 s limit used to end with no plan although a round had one at
5 s. The time limit itself is simulated here (a stage that raises SolverTimeout), so the
test does not depend on the machine's speed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import solver.solve_stage as stage
from solver.caches import clear_all
from solver.errors import SolverTimeout
from solver.plan import plan
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from queueing_speed import with_percentile  # noqa: E402
from solve_scaling import generate  # noqa: E402


def _doc():
    doc = with_percentile(generate(40, 2))  # from cold caches one cap round after the first: refine runs once
    doc["solver"] = {"verify": False, "time_limit_s": 120}
    return doc


def _plan():
    clear_all()  # caps remembered from an earlier plan would leave no round to time out in
    return plan(parse_workload(_doc()))


def _timeout(*args, **kwargs):
    raise SolverTimeout("the time limit of 120 s ended during the percentile caps, before any fleet was found.")


@pytest.fixture(scope="module")
def optimum():
    r = _plan()
    assert r.status == "optimal" and r.solver.timings.get("percentile_cap_rounds", 0) >= 1
    return r.total_price_usd_per_hour


def test_the_time_ending_during_a_rounds_caps_answers_with_the_exact_plan(monkeypatch, optimum):
    calls = []

    def refine_times_out(*args, **kwargs):
        calls.append(1)
        _timeout()

    monkeypatch.setattr(stage, "refine", refine_times_out)
    r = _plan()
    assert calls
    assert r.status == "feasible" and r.evaluation["ok"]
    assert r.total_price_usd_per_hour >= optimum - 1e-6
    assert r.solver.bound_usd_per_hour is None  # optimal only among the exact configurations: no bound


def test_the_time_ending_in_a_rounds_second_mip_answers_with_the_exact_plan(monkeypatch, optimum):
    inner = stage._cost_solve

    def second_mip_times_out(*args, **kwargs):
        if kwargs.get("stop_below") is not None:  # the MIP with the pending configurations
            _timeout()
        return inner(*args, **kwargs)

    monkeypatch.setattr(stage, "_cost_solve", second_mip_times_out)
    r = _plan()
    assert r.status == "feasible" and r.evaluation["ok"] and r.total_price_usd_per_hour >= optimum - 1e-6


def test_with_no_plan_found_the_timeout_stands(monkeypatch):
    monkeypatch.setattr(stage, "_cost_solve", _timeout)
    with pytest.raises(SolverTimeout):
        _plan()
