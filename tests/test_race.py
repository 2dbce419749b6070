"""Backend "auto" races SCIP and HiGHS on a long solve (solver/optimize/backends/race.py).

The race must answer what each solver alone would prove (same optimum, a valid bound),
stop the loser, obey the caller's cancel, and never wait on a solver that looks at no
cancel. The real solvers run here on a real re-plan model; where a test needs a solver that
ignores its cancel for seconds (SCIP in a long root node, which no test-sized model
reproduces), a real backend is wrapped to hold its answer back - said at that test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import solver.optimize.replan as replan
from solver.optimize.backends import SolveOptions, get_backend
from solver.optimize.backends.base import backend_for
from solver.optimize.backends.race import Race, combine
from solver.optimize.linear import SolveOutcome
from solver.plan import plan
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from horizon_scaling import replan_workload  # noqa: E402  (bench/horizon_scaling.py --case replan's workloads)

GENEROUS_S = 3.0  # on a loaded 2-core machine


@pytest.fixture(scope="module")
def replan_model():
    """The MIP of a 30-service re-plan (bench/horizon_scaling.py's), as replan.py builds it."""
    w = replan_workload(30, 0, 120)
    seen = {}
    inner = replan.restricted_start

    def grab(form, backend, hints, deadline, cancel):
        seen.setdefault("model", form.model)
        return inner(form, backend, hints, deadline, cancel)

    replan.restricted_start = grab
    try:
        plan(parse_workload(w))
    finally:
        replan.restricted_start = inner
    return seen["model"]


def _race(**kw):
    return Race(get_backend("scip"), get_backend("highs"), spare_core=lambda since: True, **kw)


def _no_race_threads(timeout_s: float = GENEROUS_S) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not any(t.name.startswith("solve-race") for t in threading.enumerate()):
            return True
        time.sleep(0.02)
    return False


def test_a_race_proves_what_each_solver_alone_proves(replan_model):
    alone = {name: get_backend(name).solve(replan_model, SolveOptions(time_limit_s=60, relative_gap=1e-9))
             for name in ("scip", "highs")}
    assert all(o.status == "optimal" for o in alone.values())
    raced = _race(race_after_s=0.0).solve(replan_model, SolveOptions(time_limit_s=60, relative_gap=1e-9))
    assert raced.status == "optimal"
    assert raced.objective == pytest.approx(alone["scip"].objective, abs=1e-6)
    assert raced.objective == pytest.approx(alone["highs"].objective, abs=1e-6)
    assert raced.backend in ("scip", "highs")
    assert "raced with" in raced.detail
    # The values are a plan of the model at that cost.
    cost = sum(c * raced.values[i] for i, c in replan_model.objective.items())
    assert cost == pytest.approx(raced.objective, abs=1e-6)
    assert _no_race_threads(), "the loser was not stopped"


def test_a_solve_that_ends_before_the_race_starts_runs_alone(replan_model):
    started = []

    class Counted:
        name = "highs"

        def solve(self, lm, options):
            started.append(1)
            return get_backend("highs").solve(lm, options)

    out = Race(get_backend("scip"), Counted(), spare_core=lambda since: True, race_after_s=30.0).solve(
        replan_model, SolveOptions(time_limit_s=60, relative_gap=1e-9))
    assert out.status == "optimal" and out.backend == "scip"
    assert not started
    assert _no_race_threads()


def test_without_a_spare_core_the_second_never_starts(replan_model):
    out = Race(get_backend("scip"), get_backend("highs"), spare_core=lambda since: False, race_after_s=0.0).solve(
        replan_model, SolveOptions(time_limit_s=60, relative_gap=1e-9))
    assert out.backend == "scip" and "raced" not in out.detail


class Patient:
    """A backend that answers only when its cancel is set (at most 30 s): what a solve longer
    than any test looks like to the race. It counts the solves it has ended."""

    def __init__(self, name):
        self.name, self.ended = name, []

    def solve(self, lm, options):
        t0 = time.monotonic()
        while not (options.cancel is not None and options.cancel.is_set()) and time.monotonic() - t0 < 30.0:
            time.sleep(0.005)
        self.ended.append(time.monotonic())
        return SolveOutcome("cancelled", None, None, None, time.monotonic() - t0, self.name)


def test_the_callers_cancel_stops_both(replan_model):
    first, second = Patient("scip"), Patient("highs")
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    out = Race(first, second, spare_core=lambda since: True, race_after_s=0.05).solve(
        replan_model, SolveOptions(time_limit_s=60, cancel=cancel))
    assert time.monotonic() - t0 < 0.5 + GENEROUS_S
    assert out.status == "cancelled"
    assert len(first.ended) == 1 and _no_race_threads(), "a solver did not see the caller's cancel"
    assert len(second.ended) == 1


def test_the_loser_is_stopped_when_the_first_proves(replan_model):
    second = Patient("highs")
    out = Race(get_backend("scip"), second, spare_core=lambda since: True, race_after_s=0.0).solve(
        replan_model, SolveOptions(time_limit_s=60, relative_gap=1e-9))
    assert out.status == "optimal" and out.backend == "scip"
    assert _no_race_threads(), "the second solver was not stopped"
    assert len(second.ended) == 1


def test_an_exception_in_the_waiting_thread_stops_both(replan_model, monkeypatch):
    """A KeyboardInterrupt (a notebook's stop) while the race waits: neither solver runs on."""
    first, second = Patient("scip"), Patient("highs")
    race = Race(first, second, spare_core=lambda since: True, race_after_s=0.0)
    real_wait_for = threading.Condition.wait_for
    calls = []

    def interrupted(self, predicate, timeout=None):
        if threading.current_thread() is threading.main_thread() and not calls:
            calls.append(1)
            self.release()
            try:
                time.sleep(0.3)  # both have started
            finally:
                self.acquire()
            raise KeyboardInterrupt
        return real_wait_for(self, predicate, timeout)

    monkeypatch.setattr(threading.Condition, "wait_for", interrupted)
    with pytest.raises(KeyboardInterrupt):
        race.solve(replan_model, SolveOptions(time_limit_s=60))
    monkeypatch.setattr(threading.Condition, "wait_for", real_wait_for)
    assert _no_race_threads(), "a solver ran on after the caller's thread was interrupted"


def test_a_first_solver_that_ignores_its_cancel_does_not_hold_up_the_answer(replan_model):
    """The first backend here is real SCIP whose answer is held back 20 s after it returns
    (as SCIP in a long root node does not look at its cancel): the second's proof comes
    back without waiting for it."""
    release = threading.Event()

    class Stubborn:
        name = "scip"

        def solve(self, lm, options):
            out = get_backend("scip").solve(lm, options)
            release.wait(20.0)
            return out

    t0 = time.monotonic()
    out = Race(Stubborn(), get_backend("highs"), spare_core=lambda since: True, race_after_s=0.0).solve(
        replan_model, SolveOptions(time_limit_s=60, relative_gap=1e-9))
    elapsed = time.monotonic() - t0
    release.set()
    assert out.status == "optimal" and out.backend == "highs"
    assert "left to end by its own limit" in out.detail
    assert elapsed < 15.0


def _outcome(status, objective, bound, backend, values=(0.0,)):
    return SolveOutcome(status, list(values) if objective is not None else None, objective, bound, 1.0, backend)


def test_combine_takes_the_proof_and_its_own_bound():
    first = _outcome("feasible", 105.0, 90.0, "scip")
    second = _outcome("optimal", 100.0, 100.0, "highs")
    out = combine(first, second, SolveOptions(), stopped_first=True)
    assert (out.status, out.objective, out.bound, out.backend) == ("optimal", 100.0, 100.0, "highs")
    assert "stopped: the other proved it first" in out.detail


def test_combine_without_a_proof_takes_the_cheaper_plan_and_the_higher_bound():
    first = _outcome("feasible", 105.0, 90.0, "scip")
    second = _outcome("feasible", 101.0, 95.0, "highs")
    out = combine(first, second, SolveOptions())
    assert (out.status, out.objective, out.bound, out.backend) == ("feasible", 101.0, 95.0, "highs")
    # One solver's plan and the other's bound close the gap: a proof.
    closing = combine(_outcome("feasible", 100.0, 90.0, "scip"), _outcome("feasible", 104.0, 100.0, "highs"),
                      SolveOptions())
    assert (closing.status, closing.objective, closing.bound) == ("optimal", 100.0, 100.0)
    # ...and to a relative gap.
    near = combine(_outcome("feasible", 100.0, 90.0, "scip"), _outcome("no_solution", None, 99.5, "highs"),
                   SolveOptions(relative_gap=0.01))
    assert near.status == "optimal"


def test_combine_never_reports_a_bound_above_its_plan():
    out = combine(_outcome("feasible", 100.0, 99.5, "scip"), _outcome("feasible", 101.0, 100.2, "highs"),
                  SolveOptions(relative_gap=0.01))
    assert out.status == "optimal" and out.objective == 100.0 and out.bound <= out.objective


def test_solvers_that_disagree_give_the_plan_unproven():
    out = combine(_outcome("infeasible", None, None, "scip"), _outcome("feasible", 100.0, 90.0, "highs"),
                  SolveOptions())
    assert (out.status, out.objective, out.bound, out.backend) == ("feasible", 100.0, None, "highs")
    assert "contradicts" in out.detail


def test_combine_with_no_plan_keeps_the_first_status_and_the_best_bound():
    out = combine(_outcome("no_solution", None, 50.0, "scip"), _outcome("no_solution", None, 60.0, "highs"),
                  SolveOptions())
    assert (out.status, out.values, out.bound) == ("no_solution", None, 60.0)


def test_combine_with_one_answer():
    only = _outcome("optimal", 100.0, 100.0, "scip")
    assert combine(only, None, SolveOptions()).detail == ""
    left = combine(None, _outcome("optimal", 100.0, 100.0, "highs"), SolveOptions(), first_name="scip")
    assert left.backend == "highs" and "raced with scip: left to end by its own limit" in left.detail


def test_backend_for_races_only_auto(replan_model):
    assert isinstance(backend_for("auto", replan_model), Race)
    assert not isinstance(backend_for("auto", replan_model, race=False), Race)
    assert backend_for("scip", replan_model).name == "scip"
    assert backend_for("highs", replan_model).name == "highs"


def test_a_core_counts_as_spare_only_if_it_was_idle_meanwhile():
    from solver.cores import cpu_sample, spare_core_since

    first = cpu_sample()
    if first is None:
        pytest.skip("no /proc/stat")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(len(os.sched_getaffinity(0)))]
    try:
        time.sleep(0.3)
        sample = cpu_sample()
        time.sleep(0.6)
        assert cpu_sample()[1] > sample[1]
        assert not spare_core_since(sample), "every core was busy"
    finally:
        for p in busy:
            p.kill()
            p.wait()


def test_the_second_starts_once_a_core_is_spare(replan_model):
    looks = []

    def spare_on_the_third_look(since):
        looks.append(since)
        return len(looks) >= 3

    out = Race(get_backend("scip"), get_backend("highs"), spare_core=spare_on_the_third_look, race_after_s=0.05).solve(
        replan_model, SolveOptions(time_limit_s=60, relative_gap=1e-9))
    assert out.status == "optimal" and "raced with" in out.detail
    assert len(looks) == 3
