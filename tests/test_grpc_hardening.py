"""Issue 11 over gRPC: hostile documents are INVALID_ARGUMENT (never INTERNAL), on a
real server on a loopback port, through a plain generated stub."""

from __future__ import annotations

import json
import threading

import grpc
import pytest
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from grpc_support import SMALL, running_server
from server import convert
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
from test_input_limits import yaml_bomb


@pytest.fixture(scope="module")
def stub():
    with running_server(max_concurrent_solves=1, max_queue=2) as (_planner, target):
        with grpc.insecure_channel(target) as channel:
            yield pb_grpc.PlannerServiceStub(channel), health_pb2_grpc.HealthStub(channel)


def _solve_error(stub, workload: pb.Workload) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        stub[0].Solve(pb.SolveRequest(workload=workload), timeout=60)
    return err.value


def _struct_with(path: list, value: float) -> struct_pb2.Struct:
    """SMALL as a Struct with one number replaced (NaN and infinities cannot pass through a dict)."""
    s = convert.dict_to_struct(SMALL)
    node = s
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return s


def test_yaml_bomb_is_invalid_argument(stub):
    err = _solve_error(stub, pb.Workload(yaml=yaml_bomb()))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "aliases are expanded" in err.details()


def test_thirty_bombs_at_once_are_all_refused_and_health_keeps_answering():
    """With RPC threads for all of them (past the thread count the server answers
    RESOURCE_EXHAUSTED by design), every bomb is INVALID_ARGUMENT and health answers."""
    with running_server(max_concurrent_solves=1, max_queue=30) as (_planner, target):
        with grpc.insecure_channel(target) as channel:
            _thirty_bombs((pb_grpc.PlannerServiceStub(channel), health_pb2_grpc.HealthStub(channel)))


def _thirty_bombs(stub) -> None:
    codes: list = []

    def send() -> None:
        codes.append(_solve_error(stub, pb.Workload(yaml=yaml_bomb())).code())

    callers = [threading.Thread(target=send) for _ in range(30)]
    for c in callers:
        c.start()
    health = stub[1].Check(health_pb2.HealthCheckRequest(), timeout=10)
    for c in callers:
        c.join(60)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    assert codes == [grpc.StatusCode.INVALID_ARGUMENT] * 30


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_numbers_inside_the_struct_are_invalid_argument(stub, value):
    s = _struct_with(["services", 0, "demand", "requests_per_s"], value)
    err = _solve_error(stub, pb.Workload(object=s))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "workload.services[0].demand.requests_per_s" in err.details()
    assert "finite" in err.details()


@pytest.mark.parametrize("text", ['{"services": ' + "[" * 1000 + "]" * 1000 + "}",
                                  '{"services": ' + "[" * 100 + "]" * 100 + "}"])
def test_deep_json_is_invalid_argument(stub, text):
    err = _solve_error(stub, pb.Workload(json=text))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "levels deep" in err.details()


def test_deep_yaml_is_invalid_argument(stub):
    err = _solve_error(stub, pb.Workload(yaml="services: " + "[" * 10_000 + "]" * 10_000))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_lone_surrogate_is_invalid_argument_before_solving(stub):
    text = json.dumps({**SMALL, "name": "\ud800"})  # json.dumps escapes it: valid UTF-8 on the wire
    err = _solve_error(stub, pb.Workload(json=text))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "workload.name" in err.details() and "surrogate" in err.details()


@pytest.mark.parametrize("key", ["bandwidth_efficiency", "compute_efficiency", "max_batch"])
def test_zero_calibration_is_invalid_argument_and_validate_says_so(stub, key):
    doc = {**SMALL, "solver": {"calibration": {key: 0}}}
    err = _solve_error(stub, pb.Workload(json=json.dumps(doc)))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and key in err.details()
    verdict = stub[0].Validate(pb.ValidateRequest(workload=pb.Workload(json=json.dumps(doc))), timeout=30)
    assert not verdict.valid and verdict.violations[0].field == "solver.calibration"
    assert key in verdict.violations[0].message


def test_a_review_sweep_over_the_double_range_is_invalid_argument(stub):
    review = {"base": {"workload": SMALL}, "sweeps": [
        {"name": "huge", "change": "demand", "values": {"from": -1.7e308, "to": 1.7e308, "step": 1}}]}
    with pytest.raises(grpc.RpcError) as err:
        list(stub[0].Review(pb.ReviewRequest(json=json.dumps(review)), timeout=60))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_a_review_bomb_is_invalid_argument(stub):
    with pytest.raises(grpc.RpcError) as err:
        list(stub[0].Review(pb.ReviewRequest(yaml=yaml_bomb()), timeout=60))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "aliases are expanded" in err.value.details()


def test_a_catalog_document_is_bounded_like_a_file(stub):
    doc = {**SMALL, "catalog": {"file": "c.yaml"}}
    err = _solve_error(stub, pb.Workload(json=json.dumps(doc),
                                         catalog_file=pb.CatalogDocument(path="c.yaml", text=yaml_bomb())))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "catalog.file (c.yaml)" in err.details()


# ---------------------------------------------------------------- issue 25: the same strict reader
@pytest.mark.parametrize("workload, needles", [
    (lambda: pb.Workload(json='{"name": "a", "name": "b",\n "services": []}'),
     ("'name' appears twice", "line 1, column 15", "first at line 1, column 2")),
    (lambda: pb.Workload(yaml="name: a\nservices: []\nname: b\n"), ("'name' appears twice", "line 3, column 1")),
    (lambda: pb.Workload(yaml="name: a\nservices:\n\t- name: b\n"), ("a tab character at line 3, column 1",)),
    (lambda: pb.Workload(json=json.dumps({**SMALL, "services": [{**SMALL["services"][0], "min_replicas": "2"}]})),
     ("services[0].min_replicas", "without quotes: 2")),
    # A Struct holds numbers as numbers and strings as strings: a quoted number stays refused.
    (lambda: pb.Workload(object=convert.dict_to_struct(
        {**SMALL, "services": [{**SMALL["services"][0], "slo": {"percentile": "99", "ttft_ms": 2000}}]})),
     ("services[0].slo.percentile", "without quotes: 99")),
])
def test_repeated_keys_quoted_numbers_and_tabs_are_invalid_argument(stub, workload, needles):
    err = _solve_error(stub, workload())
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
    for needle in needles:
        assert needle in err.details(), (needle, err.details())


def test_the_cp_sat_enum_is_invalid_argument_saying_why(stub):
    request = pb.SolveRequest(workload=pb.Workload(json=json.dumps(SMALL)), backend=pb.BACKEND_CP_SAT)
    with pytest.raises(grpc.RpcError) as err:
        stub[0].Solve(request, timeout=60)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "CP-SAT is not offered" in err.value.details() and "use scip, highs or auto" in err.value.details()
