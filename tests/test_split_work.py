"""A list of computations shared with a forked child (solver/compile/split_work.py): the
results are the sequential ones, in order, whoever computed them; what the child does not
deliver (it failed, or died) the parent computes; a cancel kills the child."""

from __future__ import annotations

import os
import threading

import pytest

from solver.compile import split_work
from solver.errors import Cancelled
from solver.interrupt import Stop
from solver.output import prefetch

pytestmark = pytest.mark.skipif(not prefetch.usable(), reason="needs fork (Linux) and two cores")


@pytest.fixture
def forced(monkeypatch):
    """A spare core whatever the machine's load (the rule is tested with the prefetch)."""
    monkeypatch.setattr(split_work, "spare_core", lambda: True)
    monkeypatch.setattr(split_work, "ENABLED", True)


def _square_slowly(x: int) -> tuple[int, int]:
    total = 0
    for i in range(20_000):  # ~1 ms: both processes get items
        total += i % 7
    return x * x, total


def test_results_are_the_sequential_ones_in_order(forced):
    items = list(range(200))
    stats: dict = {}
    got = split_work.map_split(_square_slowly, items, stats=stats)
    assert got == [_square_slowly(x) for x in items]
    assert stats.get("helper_items", 0) > 0  # the child did take some


def test_without_a_spare_core_or_when_off_all_runs_here(monkeypatch):
    monkeypatch.setattr(split_work, "spare_core", lambda: False)
    stats: dict = {}
    assert split_work.map_split(_square_slowly, list(range(20)), stats=stats) == [_square_slowly(x) for x in range(20)]
    assert stats.get("helper_items", 0) == 0
    monkeypatch.setattr(split_work, "spare_core", lambda: True)
    assert split_work.map_split(_square_slowly, list(range(20)), helper=False, stats=stats) == \
        [_square_slowly(x) for x in range(20)]
    assert stats.get("helper_items", 0) == 0


def test_what_fails_in_the_child_is_computed_here(forced):
    parent = os.getpid()

    def flaky(x: int) -> int:
        _square_slowly(x)
        if os.getpid() != parent and x % 3 == 0:
            raise RuntimeError("only in the child")
        return x + 1

    assert split_work.map_split(flaky, list(range(60))) == [x + 1 for x in range(60)]


def test_a_child_that_dies_leaves_its_items_to_the_parent(forced):
    parent = os.getpid()

    def dies(x: int) -> int:
        if os.getpid() != parent:
            os._exit(3)
        return -x

    assert split_work.map_split(dies, list(range(30))) == [-x for x in range(30)]


def test_an_error_here_propagates_and_a_cancel_stops(forced):
    def boom(x: int) -> int:
        _square_slowly(x)
        if x == 5:
            raise ValueError("here")
        return x

    with pytest.raises(ValueError):
        split_work.map_split(boom, list(range(40)), min_items=1)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        split_work.map_split(_square_slowly, list(range(40)), stop=Stop(cancel))


def test_percentile_plans_are_the_same_with_and_without_the_helper(monkeypatch):
    """The caps a helper computes are the planner's own (same function, same inputs): the
    same plan, cap for cap, whichever process computed what (solver/compile/lazy_caps.py)."""
    import sys
    from pathlib import Path

    from solver.caches import clear_all
    from solver.plan import PlanOptions, plan
    from solver.workload.documents import parse_workload

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from queueing_speed import with_percentile
    from solve_scaling import generate

    monkeypatch.setattr(split_work, "ENABLED", True)
    workload = parse_workload(with_percentile(generate(8, 4)))  # 44 of its caps go to the helper (12 services: 47, 2.5x the time)
    plans = []
    for spare in (False, True):
        monkeypatch.setattr(split_work, "spare_core", lambda spare=spare: spare)
        clear_all()
        r = plan(workload, PlanOptions(cache=None, prefetch_at_load=True))
        helped = r.solver.timings.get("percentile_helper_items", 0)
        assert (helped > 0) == spare
        d = r.to_dict()
        d.pop("solve_time_s")
        for field in ("timings", "solve_time_s", "total_time_s"):
            d["solver"].pop(field)
        plans.append(d)
    assert plans[0] == plans[1]
