"""The values under load computed in a helper process while the MIP runs (solver/output/prefetch.py):
the helper's values are the planner's own, plans are the same with and without it, the
helper is a fresh interpreter (not a fork that shares, and copies, the planner's heap), and
it never outlives the plan - done, cancelled or with its parent killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from proc_support import alive, wait_until
from server.pool import children_of
from solver import plan as plan_module
from solver.compile.candidates import build_problem
from solver.compile.load_caps import at_load
from solver.compile.resolve import resolve_catalog
from solver.errors import Cancelled
from solver.optimize import formulation
from solver.optimize.service_bounds import bound_plan_values
from solver.output import prefetch as prefetch_module
from solver.output.prefetch import MIN_ASSIGNMENTS, AtLoadPrefetch
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from solve_scaling import generate  # noqa: E402

pytestmark = pytest.mark.skipif(not prefetch_module.usable(), reason="needs fork (Linux) and two cores")


def _children() -> set[int]:
    """Pids whose parent is this process (zombies included), from /proc, less those that
    other tests left running (a server's forkserver, say)."""
    return _all_children() - _BEFORE


def _all_children() -> set[int]:
    return set(children_of(os.getpid()))


def _start_plan(seed: int):
    workload = parse_workload(generate(30, seed))
    catalog = resolve_catalog(workload)
    problem = build_problem(workload, catalog)
    form = formulation.build(problem)
    return catalog, problem, form.solution_from(bound_plan_values(form, form.service_bounds))


def _finish(pf: AtLoadPrefetch, timeout_s: float = 120.0) -> None:
    """Wait until the child has written every value (the tests' only use of the internals)."""
    end = time.monotonic() + timeout_s
    while len(pf._done) < len(pf._items) and time.monotonic() < end:
        pf._read()
        time.sleep(0.01)


def _without_timings(d: dict) -> dict:
    d["solver"].pop("timings", None)
    for key in ("solve_time_s", "total_time_s"):
        d.pop(key, None)
        d["solver"].pop(key, None)
    return d


_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _others_children():
    _BEFORE.clear()
    _BEFORE.update(_all_children())
    yield


@pytest.fixture
def pooled(monkeypatch):
    # 30 services would be solved unpooled (no service bounds, no start plan to prefetch).
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    # The tests run beside others: a busy machine must not turn the child off here.
    monkeypatch.setattr(prefetch_module, "spare_core", lambda: True)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_childs_values_are_the_ones_the_planner_computes(seed, pooled):
    catalog, problem, start = _start_plan(seed)
    pf = AtLoadPrefetch()
    try:
        assert pf.start(problem, catalog, start)
        assert len(pf._items) >= MIN_ASSIGNMENTS
        # A fresh interpreter running the helper module, not a fork of this process (its
        # command line is empty for a moment after the exec)
        cmdline = Path(f"/proc/{pf._pid}/cmdline")
        assert wait_until(lambda: cmdline.read_bytes() != b"", 10, poll_s=0.002)
        assert b"solver.output.prefetch_child" in cmdline.read_bytes()
        _finish(pf)
        assert len(pf._done) == len(pf._items)
        services = {s.name: s for s in problem.services}
        by_key = {c.key: c for c in problem.configs}
        checked = 0
        for a in start.assignments:
            c = by_key[a.config_key]
            got = pf.values(problem, a.service, c, a.replicas, a.routed)
            if c.source == "measured":
                assert got is None  # measured: cheap, never sent to the child
                continue
            assert got == at_load(catalog, problem.calibration, services[a.service], c, a.replicas, a.routed)
            checked += 1
        assert checked == len(pf._items)
        a = next(a for a in start.assignments if by_key[a.config_key].source != "measured")
        # Another problem (percentile caps re-solved, say), other replicas: not the child's.
        assert pf.values(object(), a.service, by_key[a.config_key], a.replicas, a.routed) is None
        assert pf.values(problem, a.service, by_key[a.config_key], a.replicas + 1, a.routed) is None
    finally:
        pf.close()
    assert not _children()


def test_off_small_busy_or_twice_it_starts_nothing(pooled, monkeypatch):
    catalog, problem, start = _start_plan(0)
    assert not AtLoadPrefetch(enabled=False).start(problem, catalog, start)
    with monkeypatch.context() as m:
        m.setattr(prefetch_module, "spare_core", lambda: False)
        assert not AtLoadPrefetch().start(problem, catalog, start)
    small = type(start)(start.fleet, start.assignments[:MIN_ASSIGNMENTS - 1])
    assert not AtLoadPrefetch().start(problem, catalog, small)
    pf = AtLoadPrefetch()
    try:
        assert pf.start(problem, catalog, start)
        assert not pf.start(problem, catalog, start)
        assert len(_children()) == 1
    finally:
        pf.close()
        pf.close()
    assert not _children()


@pytest.mark.parametrize("seed", [0, 2])
def test_plans_are_the_same_with_and_without_the_child(seed, pooled, monkeypatch):
    workload = parse_workload(generate(30, seed))
    without = plan(workload, PlanOptions(prefetch_at_load=False, cache=None))
    # Let the child finish before the values are read, so that every value it computed is used.
    used = []
    real = plan_module.service_results

    def after_the_child(problem, solution, catalog, answer_by=None, cancel=None, prefetch=None):
        assert prefetch is not None and prefetch._pid is not None, "the child was not started"
        _finish(prefetch)
        used.append(len(prefetch._done))
        return real(problem, solution, catalog, answer_by, cancel, prefetch)

    monkeypatch.setattr(plan_module, "service_results", after_the_child)
    with_child = plan(workload, PlanOptions(cache=None))
    assert used and used[0] >= MIN_ASSIGNMENTS
    assert _without_timings(with_child.to_dict()) == _without_timings(without.to_dict())
    assert not _children()


def test_a_cancelled_plan_leaves_no_child(pooled):
    cancel = threading.Event()
    seen = []

    def on_stage(name):
        seen.append(name)
        if name == "tie_break":
            assert len(_children()) == 1  # the child runs during the solve
            cancel.set()

    with pytest.raises(Cancelled):
        plan(parse_workload(generate(30, 0)), PlanOptions(cancel=cancel, on_stage=on_stage, cache=None))
    assert "tie_break" in seen
    assert not _children()


def test_the_child_dies_with_a_killed_planner():
    """SIGKILL leaves no `finally` to run: the kernel ends the helper (PR_SET_PDEATHSIG)."""
    script = textwrap.dedent(f"""
        import sys, time
        from dataclasses import replace
        from types import SimpleNamespace
        sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'bench')!r}]
        from solver.optimize import formulation
        formulation.POOL_FROM_CONFIGS = 0
        from solver.compile.candidates import build_problem
        from solver.compile.resolve import resolve_catalog
        from solver.optimize.service_bounds import bound_plan_values
        from solver.output import prefetch
        from solver.output.prefetch import AtLoadPrefetch
        prefetch.spare_core = lambda: True
        from solver.workload.documents import parse_workload
        from solve_scaling import generate
        w = parse_workload(generate(30, 0))
        catalog = resolve_catalog(w)
        problem = build_problem(w, catalog)
        form = formulation.build(problem)
        start = form.solution_from(bound_plan_values(form, form.service_bounds))
        # Each assignment at 400 replica counts: the helper's work (minutes) outlasts the test by far.
        many = [replace(a, replicas=a.replicas + k) for k in range(400) for a in start.assignments]
        pf = AtLoadPrefetch()
        assert pf.start(problem, catalog, SimpleNamespace(assignments=many))
        print(pf._pid, flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(proc.stdout.readline())
        assert alive(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert wait_until(lambda: not alive(child), 5, poll_s=0.02)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

