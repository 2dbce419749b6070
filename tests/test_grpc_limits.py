"""Hostile and oversized input at the service's edge: garbage bytes, invalid UTF-8, huge
error lists, a best plan too big for trailers; plus the bearer scheme's case, the /metrics
token, reflection under v1, and the CLI's exit codes and catalog upload through --server.
All against the real server on a loopback port.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha import reflection_pb2
from grpc_status import rpc_status

from cli.main import main as cli_main
from grpc_support import EXAMPLES, SMALL, running_server, slow_workload
from planner_client import PlannerClient, PlannerClientError
from server import convert
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
from server.status import MAX_DETAILS_BYTES, MAX_MESSAGE_BYTES, failure
from solver.errors import FieldViolation, InfeasibilityReason, InfeasibleError, InputError

TRAILER_LIMIT = 8192  # gRPC's default grpc.max_metadata_size, which clients enforce on trailers

SERVICE = "/fleetplanner.v1.PlannerService/"


@pytest.fixture(scope="module")
def server():
    with running_server(max_concurrent_solves=2, max_queue=4) as (planner, target):
        yield planner, target


def raw_call(target: str, method: str, body: bytes, timeout: float = 60, metadata=()):
    """Send bytes as they are (no serializer) and return (response bytes or None, error or None)."""
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(SERVICE + method)
        try:
            return call(body, timeout=timeout, metadata=metadata), None
        except grpc.RpcError as exc:
            return None, exc


def trailer_bytes(exc: grpc.RpcError) -> int:
    """What the error's trailers weigh on the wire (binary values travel base64-encoded)."""
    total = len(exc.details().encode()) * 3  # percent-encoding, at worst
    for key, value in exc.trailing_metadata() or ():
        total += len(key) + (len(base64.b64encode(value)) if isinstance(value, bytes) else len(value))
    return total


def details_of(exc: grpc.RpcError, cls):
    status = rpc_status.from_call(exc)
    out = []
    for d in status.details:
        if d.Is(cls.DESCRIPTOR):
            msg = cls()
            d.Unpack(msg)
            out.append(msg)
    return out


# ------------------------------------------------------------------ garbage on the wire
# A string field holding bytes that are not UTF-8: workload.json (1.2) or model/gpu (1).
NOT_UTF8 = {"Solve": b"\x0a\x05\x12\x03\xff\xfe\xfd", "Validate": b"\x0a\x05\x12\x03\xff\xfe\xfd",
            "Estimate": b"\x0a\x03\xff\xfe\xfd", "GetCatalog": b"\x0a\x03\xff\xfe\xfd"}


@pytest.mark.parametrize("method", ["Solve", "Validate", "Estimate", "GetCatalog"])
@pytest.mark.parametrize("kind", ["garbage", "invalid-utf8-string"])
def test_garbage_and_invalid_utf8_are_invalid_argument_with_details(server, method, kind):
    body = b"\xff\xfe\xfd garbage \x00\x01" if kind == "garbage" else NOT_UTF8[method]
    _, exc = raw_call(server[1], method, body)
    assert exc is not None and exc.code() == grpc.StatusCode.INVALID_ARGUMENT, (exc.code(), exc.details())
    [bad] = details_of(exc, error_details_pb2.BadRequest)
    assert bad.field_violations[0].field == "request"
    assert "protobuf decoding failed" in bad.field_violations[0].description
    assert "UTF-8" in bad.field_violations[0].description


def test_non_finite_numbers_in_a_struct_workload_are_invalid_argument(server):
    doc = json.loads(json.dumps(SMALL))
    struct = convert.dict_to_struct(doc)
    struct["services"][0]["demand"]["requests_per_s"] = float("nan")
    request = pb.SolveRequest(workload=pb.Workload(object=struct))
    with grpc.insecure_channel(server[1]) as channel, pytest.raises(grpc.RpcError) as err:
        pb_grpc.PlannerServiceStub(channel).Solve(request, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    [bad] = details_of(err.value, error_details_pb2.BadRequest)
    assert bad.field_violations[0].field == "workload.services[0].demand.requests_per_s"


# ------------------------------------------------------------------ error details that fit
def many_violations(n: int = 70) -> dict:
    return {"name": "bad", "services": [
        {"name": f"svc{i}", "model": "llama-3.1-8b",
         "demand": {"requests_per_s": -1, "prompt_tokens": 512, "output_tokens": 256}} for i in range(n)]}


def many_infeasible(n: int = 40) -> dict:
    return {"name": "too-big", "constraints": {"gpu_types": ["L4"]}, "services": [
        {"name": f"huge-service-with-a-long-name-{i}", "model": "llama-3.1-405b", "precisions": ["fp16"],
         "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256}} for i in range(n)]}


def test_many_field_violations_stay_invalid_argument_and_fit_the_trailer(server):
    _, exc = raw_call(server[1], "Solve",
                      pb.SolveRequest(workload=pb.Workload(json=json.dumps(many_violations()))).SerializeToString())
    assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT  # never RESOURCE_EXHAUSTED
    assert trailer_bytes(exc) < TRAILER_LIMIT
    [bad] = details_of(exc, error_details_pb2.BadRequest)
    [info] = details_of(exc, error_details_pb2.ErrorInfo)
    sent, total = int(info.metadata["items_sent"]), int(info.metadata["items_total"])
    assert total == 70 and 0 < sent == len(bad.field_violations) < 70
    assert "more problems" in exc.details()
    with PlannerClient(server[1], timeout_s=60) as client:
        with pytest.raises(PlannerClientError) as err:
            client.solve(many_violations())
        assert (err.value.code, err.value.exit_code) == ("INVALID_ARGUMENT", 2)
        assert err.value.omitted == 70 - sent and f"and {70 - sent} more" in str(err.value)
        every = client.validate(many_violations())  # the response has room for all of them
        assert len(every["violations"]) == 70


def test_many_infeasible_services_stay_failed_precondition_and_fit_the_trailer(server):
    _, exc = raw_call(server[1], "Solve",
                      pb.SolveRequest(workload=pb.Workload(json=json.dumps(many_infeasible()))).SerializeToString())
    assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert trailer_bytes(exc) < TRAILER_LIMIT
    [info] = details_of(exc, error_details_pb2.ErrorInfo)
    assert info.metadata["items_total"] == "40" and 0 < int(info.metadata["items_sent"]) < 40
    with PlannerClient(server[1], timeout_s=60) as client:
        with pytest.raises(PlannerClientError) as err:
            client.solve(many_infeasible())
    assert (err.value.code, err.value.exit_code) == ("FAILED_PRECONDITION", 3)
    assert err.value.infeasibility and err.value.omitted == 40 - len(err.value.infeasibility)


@pytest.mark.parametrize("error", [
    InputError([FieldViolation("services[%d].name" % i, "x" * 5000 + "\ud800", "y" * 5000) for i in range(3000)]),
    InfeasibleError([InfeasibilityReason(f"vram[{i}]", "m" * 3000, "f" * 3000, "s\ud800" * 500) for i in range(500)]),
    InputError([FieldViolation("f" * 100_000, "m")]),
], ids=["3000-long-violations", "500-long-reasons", "one-huge-field"])
def test_every_status_fits_whatever_the_error(error):
    f = failure(error, "rid")
    assert len(f.details) <= MAX_DETAILS_BYTES
    assert len(f.message.encode()) <= MAX_MESSAGE_BYTES
    assert f.code in ("INVALID_ARGUMENT", "FAILED_PRECONDITION")
    assert len(f.details) * 4 / 3 + 3 * len(f.message.encode()) < TRAILER_LIMIT - 500


@pytest.mark.parametrize("workload, local_exit", [(many_violations(), 2), (many_infeasible(), 3)],
                         ids=["violations", "infeasible"])
def test_cli_exit_codes_are_the_same_locally_and_through_the_service(server, tmp_path, capsys, workload, local_exit):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(workload))
    assert cli_main(["solve", str(path), "--quiet"]) == local_exit
    assert cli_main(["solve", str(path), "--quiet", "--server", server[1]]) == local_exit
    err = capsys.readouterr().err
    assert "Traceback" not in err


# ------------------------------------------------------------------ a best plan on the deadline
def test_a_best_plan_on_the_deadline_travels_in_the_response(server):
    request = pb.SolveRequest(workload=pb.Workload(json=json.dumps(slow_workload(time_limit_s=60))))
    with grpc.insecure_channel(server[1]) as channel:
        response, call = pb_grpc.PlannerServiceStub(channel).Solve.with_call(request, timeout=3.0)
    assert call.code() == grpc.StatusCode.OK
    assert response.deadline_exceeded and response.plan.status == pb.PLAN_STATUS_FEASIBLE
    assert not any(k == "grpc-status-details-bin" for k, _ in call.trailing_metadata() or ())
    with PlannerClient(server[1], timeout_s=3.0, retries=0) as client:
        with pytest.raises(PlannerClientError) as err:
            client.solve(slow_workload(time_limit_s=60))
    assert (err.value.code, err.value.exit_code, err.value.reason) == ("DEADLINE_EXCEEDED", 4, "DEADLINE_BEST_PLAN")
    assert err.value.best_plan["status"] == "feasible" and err.value.best_plan["evaluation"]["ok"]


def test_a_stream_ends_with_the_best_plan_on_the_deadline(server):
    request = pb.SolveRequest(workload=pb.Workload(json=json.dumps(slow_workload(time_limit_s=60))))
    with grpc.insecure_channel(server[1]) as channel:
        events = list(pb_grpc.PlannerServiceStub(channel).SolveStream(request, timeout=2.5))
    assert events[-1].WhichOneof("event") == "plan" and events[-1].deadline_exceeded
    assert all(e.WhichOneof("event") == "progress" for e in events[:-1])


# ------------------------------------------------------------------ tokens, metrics, reflection
@pytest.mark.parametrize("header, ok", [("Bearer s3cret", True), ("bearer s3cret", True), ("BEARER s3cret", True),
                                        ("Bearer  s3cret", True), ("Basic s3cret", False), ("bearer s3cre", False),
                                        ("bearers3cret", False)])
def test_the_bearer_scheme_is_case_insensitive(header, ok):
    with running_server(token="s3cret", max_concurrent_solves=1, max_queue=1) as (_planner, target):
        body = pb.GetCatalogRequest(provider="lambda").SerializeToString()
        response, exc = raw_call(target, "GetCatalog", body, metadata=(("authorization", header),))
        assert (exc is None) == ok, exc and exc.details()
        if not ok:
            assert exc.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "--token" not in exc.details()  # the server speaks to any gRPC caller


def test_auth_errors_speak_to_each_audience(capsys):
    with running_server(token="s3cret", max_concurrent_solves=1, max_queue=1) as (_planner, target):
        with PlannerClient(target, token="wrong", timeout_s=30) as client:
            with pytest.raises(PlannerClientError) as err:
                client.validate(SMALL)
        assert "PlannerClient(target, token=...)" in err.value.message and "--token" not in err.value.message
        path = EXAMPLES / "llm-platform.json"
        assert cli_main(["solve", str(path), "--server", target, "--token", "wrong", "--quiet"]) == 5
        assert "--token" in capsys.readouterr().err


def test_metrics_need_the_token_when_the_server_has_one():
    with running_server(token="s3cret", metrics_port=0, max_concurrent_solves=1, max_queue=1) as (planner, _target):
        url = f"http://127.0.0.1:{planner.metrics_port}/metrics"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(url, timeout=10)
        assert err.value.code == 401
        for scheme in ("Bearer", "bearer"):
            req = urllib.request.Request(url, headers={"Authorization": f"{scheme} s3cret"})
            assert b"planner_solves_total" in urllib.request.urlopen(req, timeout=10).read()
    with running_server(token="s3cret", metrics_port=0, metrics_token="scrape", metrics_address="127.0.0.1",
                        max_concurrent_solves=1, max_queue=1) as (planner, _target):
        url = f"http://127.0.0.1:{planner.metrics_port}/metrics"
        for token, code in (("s3cret", 401), ("scrape", 200)):
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            try:
                assert urllib.request.urlopen(req, timeout=10).status == code
            except urllib.error.HTTPError as exc:
                assert exc.code == code


def test_reflection_answers_under_v1_and_v1alpha(server):
    list_services = reflection_pb2.ServerReflectionRequest(list_services="")
    describe_v1 = reflection_pb2.ServerReflectionRequest(file_containing_symbol="grpc.reflection.v1.ServerReflection")
    describe_api = reflection_pb2.ServerReflectionRequest(file_containing_symbol="fleetplanner.v1.SolveResponse")
    with grpc.insecure_channel(server[1]) as channel:
        for version in ("v1", "v1alpha"):
            # v1 and v1alpha messages are the same on the wire.
            call = channel.stream_stream(f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
                                         request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                                         response_deserializer=reflection_pb2.ServerReflectionResponse.FromString)
            listed, v1_file, api_file = list(call(iter([list_services, describe_v1, describe_api]), timeout=30))
            names = {s.name for s in listed.list_services_response.service}
            assert {"fleetplanner.v1.PlannerService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                    "grpc.reflection.v1alpha.ServerReflection"} <= names
            assert v1_file.HasField("file_descriptor_response"), v1_file
            assert api_file.file_descriptor_response.file_descriptor_proto


# ------------------------------------------------------------------ the CLI never uploads a file silently
def test_solve_server_sends_a_catalog_file_only_when_asked(server, capsys):
    path = str(EXAMPLES / "s1-throughput.json")  # names examples/catalogs/seed-a10-a100.json
    assert cli_main(["solve", path, "--server", server[1]]) == 2
    err = capsys.readouterr().err
    assert "--send-catalog-file" in err and "seed-a10-a100.json" in err
    assert cli_main(["solve", path, "--format", "json", "--server", server[1]]) == 2
    refusal = json.loads(capsys.readouterr().out)
    assert refusal["status"] == "invalid" and refusal["errors"][0]["field"] == "catalog.file"
    assert "--send-catalog-file" in refusal["errors"][0]["fix"]
    assert cli_main(["solve", path, "--format", "json", "--server", server[1], "--send-catalog-file"]) == 0
    captured = capsys.readouterr()
    assert "sending the catalog file" in captured.err and "seed-a10-a100.json" in captured.err
    assert json.loads(captured.out)["status"] == "optimal"
