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
from solver.plan import PlanOptions, plan
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


def test_the_solve_keeps_time_for_the_values_under_load_after_it(monkeypatch):
    """The plan's values at its percentiles and the evaluator's check come after the solve
    (~22 ms per percentile service), and every plan's evaluation and answer (~1 ms per
    service): the solve's deadline is that much before the limit, at most a quarter of it,
    so that the answer comes by the limit; without percentiles, the per-service part only."""
    import solver.plan as plan_module

    seen = []
    inner = plan_module.solve_with_exact_caps

    def watched(problem, catalog, backend_name, deadline, stop, options, ties, timings, t0, prefetch=None):
        seen.append((deadline - t0, stop.deadline == deadline))
        return inner(problem, catalog, backend_name, deadline, stop, options, ties, timings, t0, prefetch)

    monkeypatch.setattr(plan_module, "solve_with_exact_caps", watched)
    doc = _doc()
    services = sum(1 for s in doc["services"] if s.get("model") and s.get("slo", {}).get("percentile"))
    assert services > 10
    plan(parse_workload(doc))
    (budget, same), = seen
    every = len(doc["services"])
    assert same and budget == pytest.approx(120 - plan_module.RESULT_S_PER_PERCENTILE_SERVICE * services
                                            - plan_module.RESULT_S_PER_SERVICE * every, abs=1e-6)
    monkeypatch.setattr(plan_module, "RESULT_S_PER_PERCENTILE_SERVICE", 10.0)  # a quarter of the limit at most
    seen.clear()
    plan(parse_workload(doc))
    assert seen[0][0] == pytest.approx(90.0, abs=1e-6)
    seen.clear()
    plain = generate(5, 0)
    plain["solver"] = {"time_limit_s": 60}
    plan(parse_workload(plain))
    assert seen[0][0] == pytest.approx(60 - plan_module.RESULT_S_PER_SERVICE * 5, abs=1e-6)



def test_after_the_simulator_lowered_a_cap_the_answer_fits_the_lowered_caps(monkeypatch):
    """A verification round lowers caps the simulator refuted; if the time then ends, the
    answer is a plan found since (it serves at the lowered caps), not the refuted plan nor
    an older one that the lowering may leave short (an independent review's reproducer)."""
    doc = _doc()
    doc["solver"]["verify"] = True
    lowered = []
    inner_verify, inner_refine = stage.verify_round, stage.refine

    def watched_verify(*args, **kwargs):
        kept, low = inner_verify(*args, **kwargs)
        if low is not None:
            lowered.append(low)
        return kept, low

    def refine_after_lowering(*args, **kwargs):
        if lowered:
            _timeout()
        return inner_refine(*args, **kwargs)

    monkeypatch.setattr(stage, "verify_round", watched_verify)
    monkeypatch.setattr(stage, "refine", refine_after_lowering)
    clear_all()
    r = plan(parse_workload(doc))
    assert lowered, "the simulator confirmed every cap: the case no longer reaches a lowering"
    assert r.status == "feasible" and r.solver.bound_usd_per_hour is None and r.evaluation["ok"]
    caps = {c.key: c for c in lowered[-1].configs}
    for s in r.services:
        for a in s.assignments:
            c = caps.get(a.config)
            if c is None or c.source == "measured":
                continue
            need = sum(x / k.throughput for x, k in zip(a.routed, c.classes) if x > 1e-9)
            assert need <= a.replicas * (1 + 1e-6) + 1e-9, (a.config, need, a.replicas)


def test_a_multi_period_solve_keeps_the_same_time_for_its_answer(monkeypatch):
    """Periods go to the multi-period planner; its solve stops as early as a single
    period's would, so that its evaluation and answer come by the limit too."""
    import solver.plan as plan_module
    import solver.plan_horizon as horizon_module

    seen = []
    inner = horizon_module.plan_horizon

    def watched(workload, catalog, problem, backend_name, options, t0, deadline, stop, timings):
        seen.append((deadline - t0, stop.deadline == deadline, options.answer_by - t0))
        return inner(workload, catalog, problem, backend_name, options, t0, deadline, stop, timings)

    monkeypatch.setattr(horizon_module, "plan_horizon", watched)
    doc = generate(5, 0)
    doc["solver"] = {"time_limit_s": 60}
    doc["periods"] = [{"name": "day", "hours": 14}, {"name": "night", "hours": 10}]
    for s in doc["services"]:
        s["demand"]["profile"] = {"night": 0.5}
    r = plan(parse_workload(doc))
    assert r.evaluation["ok"]
    (budget, same, answer_by), = seen
    assert same and budget == pytest.approx(60 - plan_module.RESULT_S_PER_SERVICE * 5, abs=1e-6)
    # the values under load past it are left out: the limit less the answer's writing
    assert answer_by == pytest.approx(60 - plan_module.RESULT_WRITE_S_PER_SERVICE * 5, abs=1e-6)


def _solve_budgets(monkeypatch) -> list[float]:
    """The seconds from the planner's start to each solve's deadline, as plan() sets them."""
    import solver.plan as plan_module

    seen: list[float] = []
    inner = plan_module.solve_with_exact_caps

    def watched(problem, catalog, backend_name, deadline, stop, options, ties, timings, t0, prefetch=None):
        seen.append(deadline - t0)
        return inner(problem, catalog, backend_name, deadline, stop, options, ties, timings, t0, prefetch)

    monkeypatch.setattr(plan_module, "solve_with_exact_caps", watched)
    return seen


def test_the_limit_counts_from_the_callers_start(monkeypatch):
    """The CLI gives its own start (PlanOptions.started_at): the time it took to read the
    workload is inside the limit, so the process ends by it."""
    import time

    import solver.plan as plan_module

    seen = _solve_budgets(monkeypatch)
    doc = generate(5, 0)
    doc["solver"] = {"time_limit_s": 60}
    r = plan(parse_workload(doc), PlanOptions(started_at=time.monotonic() - 5.0))
    assert r.evaluation["ok"]
    assert seen[0] == pytest.approx(55 - plan_module.RESULT_S_PER_SERVICE * 5, abs=0.5)
    assert r.solver.total_time_s < 5  # the planner's own time, as before


def test_a_caller_that_answers_by_its_own_point_keeps_the_percentile_reserve(monkeypatch):
    """The server passes answer_by and keeps its own margin for the evaluation and the
    answer (by services), so the per-service part is not taken twice; the values under load
    at the percentiles are not in that margin, so their reserve stays (without it the
    generated 100-service p99 workload got no answer at all under a 12 s gRPC deadline)."""
    import time

    import solver.plan as plan_module

    seen = _solve_budgets(monkeypatch)
    doc = _doc()
    services = sum(1 for s in doc["services"] if s.get("model") and s.get("slo", {}).get("percentile"))
    plan(parse_workload(doc), PlanOptions(answer_by=time.monotonic() + 200))
    assert seen[0] == pytest.approx(120 - plan_module.RESULT_S_PER_PERCENTILE_SERVICE * services, abs=1e-6)
