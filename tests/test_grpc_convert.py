"""Pure parts of the gRPC service: plan <-> proto conversion, workload documents, the time
budget from a deadline, and the solve gate. No server here."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import types
import typing

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpc_support import EXAMPLES, SMALL
from server import convert
from server.admission import QueueFull, SolveGate, WaitCancelled, WaitExpired
from server.estimate import missing_api_fields
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.requests import ANSWER_S_PER_SERVICE, answer_margin_s, solve_budget
from solver.errors import InfeasibilityReason
from solver.plan import PlanOptions, plan
from solver.output.result import LoadBand, PlanResult
from solver.workload.documents import load_workload, parse_workload


def round_trip(d: dict) -> dict:
    msg = convert.plan_to_proto(d)
    return convert.plan_from_proto(pb.Plan.FromString(msg.SerializeToString()))


# ------------------------------------------------------------------ real plans
@pytest.mark.parametrize("example", ["llm-platform.json", "s1-throughput.json", "s2-latency.json", "s3-big-model.json"])
def test_real_plans_survive_the_wire_unchanged(example):
    path = EXAMPLES / example
    d = plan(load_workload(path), PlanOptions(base_dir=str(path.parent), explain=True)).to_dict()
    assert any(s["alternatives"] for s in d["services"]), "explain fills alternatives"
    back = round_trip(d)
    assert back == d
    assert json.dumps(back) == json.dumps(d)  # same keys, order and numbers: the CLI renders it identically


# ------------------------------------------------------------------ any plan (property)
_FLOAT = st.floats(allow_nan=False, allow_infinity=False, width=64)
_INT = st.integers(min_value=0, max_value=1_000_000)
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


def _ordered(**fields):
    """A dict strategy with keys in the given order (the JSON's order matters here)."""
    return st.tuples(*fields.values()).map(lambda values: dict(zip(fields, values)))


# Fields whose values come from a closed set or have a fixed shape in the JSON.
_FIELDS = {
    "status": st.sampled_from(["optimal", "feasible", "infeasible"]),
    "pricing": st.sampled_from(["on_demand", "spot"]),
    "model_size": _ordered(variables=_INT, integer_variables=_INT, constraints=_INT, nonzeros=_INT),
    "timings": st.dictionaries(_TEXT, _FLOAT, max_size=4),
    "evaluation": st.one_of(st.just({}), _ordered(ok=st.booleans(), violations=st.lists(_TEXT, max_size=2),
                                                  cost_usd_per_hour=_FLOAT)),
    "placements": st.lists(_ordered(offer_id=_TEXT, instance=_INT,
                                    replicas=st.lists(st.tuples(_TEXT, _INT).map(list), max_size=2)), max_size=2),
    "level": st.one_of(st.just("nominal"), _FLOAT),  # slo.confidence: a number or "nominal"
}
# A band's metrics are [low, high] pairs (either end null) or null.
_PAIR = st.one_of(st.none(), st.lists(st.one_of(st.none(), _FLOAT), min_size=2, max_size=2))
_TYPES = {LoadBand: st.builds(LoadBand, ttft_ms=_PAIR, tpot_ms=_PAIR, latency_ms=_PAIR)}


def _strategy(tp, name: str = ""):
    """A hypothesis strategy for a field of the plan's dataclasses, from its type hint."""
    if name in _FIELDS:
        return _FIELDS[name]
    if tp in _TYPES:
        return _TYPES[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(st.none() if a is type(None) else _strategy(a) for a in args))
    if origin is list:
        return st.lists(_strategy(args[0]), max_size=2)
    if dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return st.builds(tp, **{f.name: _strategy(hints[f.name], f.name) for f in dataclasses.fields(tp)})
    return {float: _FLOAT, int: _INT, str: _TEXT, bool: st.booleans()}[tp]


@settings(max_examples=60, deadline=None)
@given(_strategy(PlanResult))
def test_any_plan_survives_the_wire_unchanged(result):
    """Every field of PlanResult (today's and any added later) must have a proto field:
    conversion is strict, so a new field fails here until the proto carries it."""
    d = result.to_dict()
    back = round_trip(d)
    assert back == d
    assert json.dumps(back) == json.dumps(d)


def test_a_plan_without_solver_info_or_evaluation():
    result = PlanResult("infeasible", "w", None, 0, [], [], [], None,
                        infeasibility=[InfeasibilityReason("budget", "too dear.", "raise the budget", None)])
    d = result.to_dict()
    assert "optimality_gap" not in d and d["solver"] is None and d["evaluation"] == {}
    assert round_trip(d) == d


def test_conversion_refuses_fields_the_proto_lacks():
    d = plan(parse_workload(SMALL)).to_dict()
    d["solver"]["new_field"] = 1
    with pytest.raises(ValueError, match="plan.solver.new_field"):
        convert.plan_to_proto(d)
    d2 = dict(d, status="nearly")
    with pytest.raises(ValueError, match="PlanStatus"):
        convert.plan_to_proto(d2)


def test_enums_start_with_unspecified_zero():
    for enum in pb.DESCRIPTOR.enum_types_by_name.values():
        zero = enum.values_by_number[0].name
        assert zero.endswith("_UNSPECIFIED"), enum.name
    assert convert.to_dict(pb.Plan())["status"] is None


def test_estimate_rows_carry_every_performance_model_field():
    assert missing_api_fields() == set()


def test_progress_events():
    p = {"elapsed_s": 0.5, "best_usd_per_hour": 3.25, "bound_usd_per_hour": None, "solutions_found": 2,
         "fleet": [{"offer_id": "aws/g6.xlarge", "instances": 3}]}
    assert convert.to_dict(convert.progress_to_proto(p)) == p


# ------------------------------------------------------------------ workload documents
def test_struct_numbers_come_back_as_ints_when_whole():
    doc = {"a": 2, "b": 2.5, "c": [1, {"d": 3}], "e": "x", "f": True, "g": None, "h": 1e300}
    assert convert.struct_to_dict(convert.dict_to_struct(doc)) == doc
    assert isinstance(convert.struct_to_dict(convert.dict_to_struct({"n": 7}))["n"], int)


# ------------------------------------------------------------------ deadline -> time limit
def test_solve_budget_from_the_deadline():
    assert solve_budget(60.0, None) == (60.0, False)  # no deadline: the request's limit
    assert solve_budget(5.0, 10.0) == (5.0, False)  # the request's limit fits the deadline
    limit, by_deadline = solve_budget(60.0, 10.0)
    assert by_deadline and limit == pytest.approx(10.0 - 1.5)
    assert solve_budget(60.0, 0.2) == (0.0, True)
    assert answer_margin_s(1.0) == 0.3 and answer_margin_s(1000.0) == 3.0
    # Large plans keep more back (issue 26: 1,000 services at a 25 s deadline were killed
    # while serialising), never more than half of what is left.
    assert answer_margin_s(25.0, services=1000) == pytest.approx(1000 * ANSWER_S_PER_SERVICE)
    assert answer_margin_s(25.0, services=1000) > answer_margin_s(25.0) == 3.0
    assert answer_margin_s(4.0, services=5000) == 2.0
    assert solve_budget(60.0, 25.0, services=1000)[0] == pytest.approx(25.0 - 1000 * ANSWER_S_PER_SERVICE)


# ------------------------------------------------------------------ the solve gate
def test_gate_runs_n_queues_q_and_refuses_the_rest():
    gate = SolveGate(max_running=1, max_waiting=1)
    never = threading.Event()
    release = threading.Event()
    admitted: list[str] = []

    def hold(name: str) -> None:
        with gate.slot(None, never):
            admitted.append(name)
            release.wait(10)

    first = threading.Thread(target=hold, args=("first",))
    first.start()
    _until(lambda: gate.running == 1)
    second = threading.Thread(target=hold, args=("second",))
    second.start()
    _until(lambda: gate.waiting == 1)
    with pytest.raises(QueueFull):
        with gate.slot(None, never):
            pass
    release.set()
    first.join(10)
    second.join(10)
    assert admitted == ["first", "second"] and gate.running == 0 and gate.waiting == 0


def test_gate_waiters_honour_deadline_and_cancel():
    gate = SolveGate(max_running=1, max_waiting=2)
    never, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=lambda: _hold(gate, never, release))
    holder.start()
    _until(lambda: gate.running == 1)
    t0 = time.monotonic()
    with pytest.raises(WaitExpired):
        with gate.slot(0.2, never):
            pass
    assert 0.15 < time.monotonic() - t0 < 2.0
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    with pytest.raises(WaitCancelled):
        with gate.slot(None, cancel):
            pass
    release.set()
    holder.join(10)
    assert gate.waiting == 0 and gate.running == 0


def test_gate_admits_waiters_in_arrival_order():
    # Waiters wake every POLL_S to look at their cancel event; they keep their place meanwhile.
    gate = SolveGate(max_running=1, max_waiting=5)
    never, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=lambda: _hold(gate, never, release))
    holder.start()
    _until(lambda: gate.running == 1)
    admitted: list[str] = []

    def wait_then_run(name: str) -> None:
        with gate.slot(None, never):
            admitted.append(name)

    waiters = []
    for i, name in enumerate("abcd"):
        waiters.append(threading.Thread(target=wait_then_run, args=(name,)))
        waiters[-1].start()
        _until(lambda: gate.waiting == i + 1)
        time.sleep(2.5 * SolveGate.POLL_S)  # the earlier waiters poll meanwhile
    release.set()
    for t in [holder, *waiters]:
        t.join(10)
    assert admitted == list("abcd") and gate.running == 0 and gate.waiting == 0


def _hold(gate: SolveGate, never: threading.Event, release: threading.Event) -> None:
    with gate.slot(None, never):
        release.wait(10)


def _until(condition, timeout_s: float = 10.0) -> None:
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < timeout_s, "condition not reached"
        time.sleep(0.01)


def test_large_jobs_leave_one_slot_to_small_solves():
    """Issue 26: two long jobs on a 2-slot server used to fill both slots; now large jobs
    hold at most one, the second waits, and a small solve runs at once beside the first.
    When the large job ends, the waiting large one gets its slot."""
    gate = SolveGate(max_running=2, max_waiting=4)
    never = threading.Event()
    done = {"big1": threading.Event(), "big2": threading.Event(), "small": threading.Event()}
    admitted: list[str] = []

    def job(name: str, large: bool) -> None:
        with gate.slot(None, never, large=large):
            admitted.append(name)
            done[name].wait(10)

    big1 = threading.Thread(target=job, args=("big1", True))
    big1.start()
    _until(lambda: gate.running == 1)
    big2 = threading.Thread(target=job, args=("big2", True))
    big2.start()
    _until(lambda: gate.waiting == 1)  # the large lane is full: big2 waits with a slot free
    assert gate.running == 1
    small = threading.Thread(target=job, args=("small", False))
    small.start()
    _until(lambda: "small" in admitted)  # admitted past the waiting large job
    assert gate.running == 2 and gate.waiting == 1
    done["big1"].set()
    _until(lambda: "big2" in admitted)
    done["big2"].set()
    done["small"].set()
    for t in (big1, big2, small):
        t.join(10)
    assert admitted == ["big1", "small", "big2"] and gate.running == 0 and gate.waiting == 0


def test_a_one_slot_gate_still_runs_large_jobs():
    gate = SolveGate(max_running=1, max_waiting=1)
    with gate.slot(None, threading.Event(), large=True):
        assert gate.running == 1
    assert gate.running == 0
