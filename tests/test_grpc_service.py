"""The gRPC service end to end: the real server on a loopback port, driven by the real client.

Every RPC, each error status with its details, deadline -> time limit, cancellation,
the concurrency limit, message-size limits, reflection, retries, metrics, and the CLI
giving the same plan locally and through the service.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.request
from dataclasses import asdict
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase
from grpc_status import rpc_status

from cli.main import main as cli_main
from grpc_support import EXAMPLES, INFEASIBLE, SMALL, running_server, slow_workload, without_timings
from planner_client import PlannerClient, PlannerClientError
from server import convert
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
from solver.catalog import default_catalog
from solver.plan import PlanOptions, plan
from solver.workload.documents import load_workload, parse_workload


@pytest.fixture(scope="module")
def server():
    with running_server(max_concurrent_solves=2, max_queue=4) as (planner, target):
        yield planner, target


@pytest.fixture()
def client(server):
    with PlannerClient(server[1], timeout_s=60) as c:
        yield c


# ------------------------------------------------------------------ every RPC
def test_solve_returns_the_same_plan_as_the_local_planner(client):
    remote = client.solve(SMALL)
    local = plan(parse_workload(SMALL)).to_dict()
    assert remote["status"] == "optimal"
    assert without_timings(remote) == without_timings(local)
    assert list(remote) == list(local)  # same keys in the same order: renders identically


def test_solve_with_a_catalog_file_sends_the_file(client):
    path = EXAMPLES / "s1-throughput.json"
    remote = client.solve(path)
    local = plan(load_workload(path), PlanOptions(base_dir=str(path.parent))).to_dict()
    assert remote["catalog"] == local["catalog"] == str(path.parent / "catalogs" / "seed-a10-a100.json")
    assert without_timings(remote) == without_timings(local)


def test_solve_stream_reports_progress_then_the_plan(client):
    events = list(client.solve_stream(SMALL))
    assert events[-1]["event"] == "plan"
    assert [e["event"] for e in events[:-1]] == ["progress"] * (len(events) - 1)
    progress = events[:-1]
    assert progress, "the solver reports at least the plan it finds"
    assert [p["solutions_found"] for p in progress] == sorted(p["solutions_found"] for p in progress)
    final = events[-1]["plan"]
    assert final["status"] == "optimal"
    assert progress[-1]["best_usd_per_hour"] == pytest.approx(final["total_price_usd_per_hour"], abs=1e-6)
    assert without_timings(final) == without_timings(client.solve(SMALL))


def test_validate(client):
    ok = client.validate(SMALL)
    assert ok == {"valid": True, "violations": [], "workload": "demo", "services": 1}
    bad = client.validate({"services": [{"name": "x", "model": "llama-3.1-8bb", "demand": {"requests_per_s": 1,
                                         "prompt_tokens": 1, "output_tokens": 1}}]})
    assert bad["valid"] is False
    assert bad["violations"][0]["field"] == "services[0].model"
    assert "llama-3.1-8b" in bad["violations"][0]["message"]  # did you mean
    assert bad["violations"][0]["fix"]


def test_estimate_gives_the_cli_estimate_numbers(client, capsys):
    """Same host choice and the same performance model as `solver-cli estimate` (which rounds)."""
    args = ["--gpus-per-replica", "2", "--precision", "fp8", "--tpot-ms", "50", "--format", "json"]
    assert cli_main(["estimate", "llama-3.1-70b", "--gpu", "H100-SXM", *args]) == 0
    cli_rows = json.loads(capsys.readouterr().out)
    rows = client.estimate("llama-3.1-70b", gpu="H100-SXM", gpus_per_replica=2, precision="fp8", tpot_ms=50)
    assert len(rows) == len(cli_rows) == 1
    row, cli_row = rows[0], cli_rows[0]
    for key, value in cli_row.items():
        if key in row and isinstance(value, float):
            assert row[key] == pytest.approx(value, rel=1e-3, abs=0.01), key
        elif key in row:
            assert row[key] == value, key
    assert {"offer", "batch", "ttft_ms", "tpot_ms", "requests_per_s", "binding_limit"} <= set(cli_row) & set(row)
    every_gpu = client.estimate("llama-3.1-8b")
    assert len(every_gpu) > 5 and {r["gpu"] for r in every_gpu} >= {"H100-SXM", "L4"}


def test_estimate_rejects_unknown_names_with_field_violations(client):
    with pytest.raises(PlannerClientError) as err:
        client.estimate("llama-3.1-8bb", gpu="H100", gpus_per_replica=1000, tpot_ms=-1)
    assert err.value.code == "INVALID_ARGUMENT" and err.value.exit_code == 2
    assert {v["field"] for v in err.value.violations} == {"model", "gpu", "gpus_per_replica", "tpot_ms"}


@pytest.mark.parametrize("time_limit_s", [0.0, -1.0, float("nan")])
def test_bad_time_limits_are_invalid_arguments(client, server, time_limit_s):
    with pytest.raises(PlannerClientError) as err:
        client.solve(SMALL, time_limit_s=time_limit_s)  # refused by the client
    assert err.value.exit_code == 2
    with grpc.insecure_channel(server[1]) as channel:  # and by the server
        with pytest.raises(grpc.RpcError) as raw:
            pb_grpc.PlannerServiceStub(channel).Solve(
                pb.SolveRequest(workload=pb.Workload(json=json.dumps(SMALL)), time_limit_s=time_limit_s), timeout=30)
    assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_get_catalog(client):
    catalog = default_catalog()
    everything = client.get_catalog()
    assert everything["description"] == catalog.description
    assert len(everything["offers"]) == len(catalog.offers)
    assert [g["name"] for g in everything["gpus"]] == list(catalog.gpus)
    first = catalog.offers[0]
    assert everything["offers"][0] == {"id": first.id, **asdict(first)}
    lam = client.get_catalog(provider="lambda")
    assert lam["offers"] and all(o["provider"] == "lambda" for o in lam["offers"])
    # Issue 12's GPU fields travel too: FP4 rate, NVLink domain, int4 support, vendor.
    gpus = {g["name"]: g for g in everything["gpus"]}
    assert gpus["GB200"]["fp4_tflops"] == catalog.gpus["GB200"].fp4_tflops and gpus["GB200"]["nvlink_domain_gpus"] == 72
    assert gpus["H100-SXM"]["supports_int4"] and gpus["H100-SXM"].get("fp4_tflops") is None
    assert gpus["MI300X"]["vendor"] == "AMD" and not gpus["MI300X"].get("supports_int4")
    with pytest.raises(PlannerClientError) as err:
        client.get_catalog(gpu="H100")
    assert err.value.violations[0]["field"] == "gpu" and "H100-SXM" in err.value.violations[0]["message"]


def test_health_and_reflection(server, client):
    assert client.health() == "SERVING"
    assert client.health("fleetplanner.v1.PlannerService") == "SERVING"
    with grpc.insecure_channel(server[1]) as channel:
        db = ProtoReflectionDescriptorDatabase(channel)  # what grpcurl uses
        services = set(db.get_services())
        assert {"fleetplanner.v1.PlannerService", "grpc.health.v1.Health"} <= services
        proto = db.FindFileContainingSymbol("fleetplanner.v1.Plan")
        assert proto.name == "fleetplanner/v1/planner.proto"


# ------------------------------------------------------------------ error statuses
@pytest.mark.parametrize("admission", ["lazy", "", "PAGED_ON_DEMAND", 1, float("nan"), ["whole_sequence"],
                                       {"a": {"b": {}}}, "paged_on_demand" * 10_000, "whole_sequence\ud800"])
def test_a_bad_kv_admission_is_an_invalid_argument_naming_the_field(client, admission):
    svc = {"name": "chat", "model": "llama-3.1-8b", "engine": "tensorrt-llm",
           "demand": {"requests_per_s": 1, "prompt_tokens": 512, "output_tokens": 256},
           "engine_options": {"kv_admission": admission}}
    with pytest.raises(PlannerClientError) as err:
        client.solve({"services": [svc]})
    e = err.value
    assert (e.code, e.exit_code) == ("INVALID_ARGUMENT", 2)
    assert any("services[0].engine_options.kv_admission" in v["field"] and v["fix"] for v in e.violations), e.violations


@pytest.mark.parametrize("opts", [{"scheduler": "prefill_first", "multi_step": bad}
                                  for bad in (0, -1, 65, 2.5, float("nan"), float("inf"), "8", True, 10 ** 400, [8],
                                              {"a": {}})]
                         + [{"scheduler": "chunked_mixed", "multi_step": 8}])  # modelled for prefill-first only
def test_a_bad_multi_step_is_an_invalid_argument_naming_the_field(client, opts):
    svc = {"name": "chat", "model": "llama-3.1-8b", "engine": "vllm-0.9",
           "demand": {"requests_per_s": 1, "prompt_tokens": 512, "output_tokens": 256}, "engine_options": opts}
    with pytest.raises(PlannerClientError) as err:
        client.solve({"services": [svc]})
    e = err.value
    assert (e.code, e.exit_code) == ("INVALID_ARGUMENT", 2)
    assert any("services[0].engine_options" in v["field"] and v["fix"] for v in e.violations), e.violations
    assert any("multi_step" in v["field"] + v["message"] for v in e.violations), e.violations


def test_invalid_argument_carries_field_violations(client, server):
    bad = {"services": [{"name": "chat", "model": "llama-3.1-8b",
                         "demand": {"requests_per_s": -1, "prompt_tokens": 512, "output_tokens": 256}}]}
    with pytest.raises(PlannerClientError) as err:
        client.solve(bad)
    e = err.value
    assert (e.code, e.exit_code, e.reason) == ("INVALID_ARGUMENT", 2, "INVALID_WORKLOAD")
    assert e.violations[0]["field"] == "services[0].demand.requests_per_s"
    assert e.violations[0]["fix"]
    assert e.request_id
    assert "services[0].demand.requests_per_s" in str(e)
    # A generic gRPC client sees the standard google.rpc.BadRequest detail.
    with grpc.insecure_channel(server[1]) as channel:
        stub = pb_grpc.PlannerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raw:
            stub.Solve(pb.SolveRequest(workload=pb.Workload(object=convert.dict_to_struct(bad))), timeout=30)
        status = rpc_status.from_call(raw.value)
        details = [d for d in status.details if d.Is(error_details_pb2.BadRequest.DESCRIPTOR)]
        assert len(details) == 1
        br = error_details_pb2.BadRequest()
        details[0].Unpack(br)
        assert br.field_violations[0].field == "services[0].demand.requests_per_s"


@pytest.mark.parametrize("workload, field", [
    ("services: [", "workload"),  # YAML syntax
    ('{"services": [1,]}', "workload"),  # JSON syntax
    ({"services": [{"name": "x", "model": "llama-3.1-8b", "demand": {"requests_per_s": 1, "prompt_tokens": 1,
      "output_tokens": 1}}], "catalog": {"file": "/nonexistent/catalog.json"}}, "catalog.file"),
])
def test_malformed_documents_and_unreadable_files_are_invalid_arguments(client, workload, field):
    with pytest.raises(PlannerClientError) as err:
        client.solve(workload)
    assert err.value.code == "INVALID_ARGUMENT"
    assert err.value.violations[0]["field"].startswith(field)


def test_a_catalog_file_is_never_read_on_the_server(server):
    """A request naming a server-side path without sending its content is refused."""
    doc = {"services": SMALL["services"], "catalog": {"file": "examples/catalogs/seed-a10-a100.json"}}
    with grpc.insecure_channel(server[1]) as channel:
        stub = pb_grpc.PlannerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raw:
            stub.Solve(pb.SolveRequest(workload=pb.Workload(json=json.dumps(doc))), timeout=30)
        verdict = stub.Validate(pb.ValidateRequest(workload=pb.Workload(json=json.dumps(doc))), timeout=30)
    assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "does not read files" in raw.value.details()
    assert not verdict.valid and verdict.violations[0].field == "catalog.file"


def test_workload_as_a_struct_and_as_yaml(server):
    yaml_text = ("name: demo\nservices:\n  - name: chat\n    model: llama-3.1-8b\n    precisions: [fp16, fp8]\n"
                 "    demand: {requests_per_s: 5, prompt_tokens: 512, output_tokens: 256}\n"
                 "    slo: {ttft_ms: 2000, tpot_ms: 60}\n")
    with grpc.insecure_channel(server[1]) as channel:
        stub = pb_grpc.PlannerServiceStub(channel)
        by_struct = stub.Solve(pb.SolveRequest(workload=pb.Workload(object=convert.dict_to_struct(SMALL))), timeout=60)
        by_yaml = stub.Solve(pb.SolveRequest(workload=pb.Workload(yaml=yaml_text)), timeout=60)
    a, b = (without_timings(convert.plan_from_proto(r.plan)) for r in (by_struct, by_yaml))
    assert a == b and a["status"] == "optimal"


def test_the_readme_grpcurl_request_solves(server):
    """The grpcurl example's JSON body, read by protobuf's JSON mapping (as grpcurl does)."""
    readme = (Path(__file__).resolve().parents[1] / "clients" / "python" / "README.md").read_text()
    body = re.search(r"-d '(\{.*?\})' localhost:50051 fleetplanner\.v1\.PlannerService/Solve", readme, re.S).group(1)
    request = json_format.Parse(body, pb.SolveRequest())
    with grpc.insecure_channel(server[1]) as channel:
        response = pb_grpc.PlannerServiceStub(channel).Solve(request, timeout=60)
    assert convert.plan_from_proto(response.plan)["status"] == "optimal"


def test_failed_precondition_carries_the_infeasibility_explanation(client):
    with pytest.raises(PlannerClientError) as err:
        client.solve(INFEASIBLE)
    e = err.value
    assert (e.code, e.exit_code, e.reason) == ("FAILED_PRECONDITION", 3, "INFEASIBLE")
    assert e.infeasibility and set(e.infeasibility[0]) == {"constraint", "message", "fix", "service"}
    assert e.infeasibility[0]["service"] == "huge" and e.infeasibility[0]["fix"]
    assert e.best_plan is None and e.violations == []


def test_deadline_becomes_the_time_limit_and_returns_the_best_plan(client):
    """The request asks for 60 s; the call's 3 s deadline ends the solve in time to answer
    with DEADLINE_EXCEEDED and the best plan found so far."""
    t0 = time.monotonic()
    with pytest.raises(PlannerClientError) as err:
        with PlannerClient(client.target, timeout_s=3.0) as short:
            short.solve(slow_workload(time_limit_s=60))
    elapsed = time.monotonic() - t0
    e = err.value
    assert (e.code, e.exit_code, e.reason) == ("DEADLINE_EXCEEDED", 4, "DEADLINE_BEST_PLAN")
    assert elapsed < 3.0  # answered by the server before the deadline, not cut off by it
    assert e.best_plan is not None and e.best_plan["status"] == "feasible"
    assert e.best_plan["optimality_gap"] > 0
    assert e.best_plan["solver"]["total_time_s"] < 3.0
    assert e.best_plan["evaluation"]["ok"] is True


def test_a_stream_reports_progress_then_the_deadline_with_the_best_plan(client):
    progress = []
    with PlannerClient(client.target, timeout_s=2.0) as short:
        with pytest.raises(PlannerClientError) as err:
            for event in short.solve_stream(slow_workload(time_limit_s=60)):
                progress.append(event)
    assert progress and all(e["event"] == "progress" for e in progress)
    e = err.value
    assert e.code == "DEADLINE_EXCEEDED" and e.best_plan["status"] == "feasible"
    assert e.best_plan["total_price_usd_per_hour"] == pytest.approx(progress[-1]["best_usd_per_hour"], abs=1e-6)


def test_a_deadline_too_short_to_solve_is_deadline_exceeded_without_a_plan(client):
    with PlannerClient(client.target, timeout_s=0.3, retries=0) as short:
        with pytest.raises(PlannerClientError) as err:
            short.solve(SMALL)
    assert err.value.code == "DEADLINE_EXCEEDED" and err.value.best_plan is None


def test_time_limit_ends_the_solve_with_a_feasible_plan_like_the_cli(client):
    """An explicit time limit (the CLI's --time-limit) is not an error: status feasible."""
    t0 = time.monotonic()
    result = client.solve(slow_workload(), time_limit_s=1.5)
    assert result["status"] == "feasible" and result["optimality_gap"] > 0
    assert time.monotonic() - t0 < 1.5 + 2.0


def test_cancelling_a_call_stops_its_solve(server, client):
    planner, _ = server
    cancelled_before = planner.metrics.value("planner_solves_total", {"outcome": "cancelled"})
    stream = client.solve_stream(slow_workload(time_limit_s=60))
    first = next(stream)
    assert first["event"] == "progress"
    assert planner.gate.running == 1
    stream.close()  # the client walks away: cancels the call
    t0 = time.monotonic()
    while planner.gate.running and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    stopped_after_s = time.monotonic() - t0
    assert planner.gate.running == 0
    assert stopped_after_s < 3.0, "the 60 s solve stopped soon after the cancel"
    assert planner.metrics.value("planner_solves_total", {"outcome": "cancelled"}) == cancelled_before + 1


def test_concurrency_limit_and_bounded_queue():
    with running_server(max_concurrent_solves=1, max_queue=1) as (planner, target):
        results: dict[str, object] = {}

        def solve(name: str, limit_s: float) -> None:
            with PlannerClient(target) as c:
                try:
                    results[name] = c.solve(slow_workload(), time_limit_s=limit_s)
                except PlannerClientError as exc:
                    results[name] = exc

        running = threading.Thread(target=solve, args=("running", 2.0))
        running.start()
        _wait_for(lambda: planner.gate.running == 1)
        queued = threading.Thread(target=solve, args=("queued", 1.0))
        queued.start()
        _wait_for(lambda: planner.gate.waiting == 1)
        with PlannerClient(target, retries=0) as c:
            with pytest.raises(PlannerClientError) as err:
                c.solve(SMALL)
        e = err.value
        assert (e.code, e.reason, e.exit_code) == ("RESOURCE_EXHAUSTED", "QUEUE_FULL", 5)
        assert e.retry_after_s and e.retry_after_s > 0
        running.join(30)
        queued.join(30)
        assert results["running"]["status"] == "feasible" and results["queued"]["status"] == "feasible"
        assert planner.metrics.value("planner_solves_total", {"outcome": "rejected"}) == 1
        assert planner.metrics.value("planner_solve_queue_seconds_count") == 2  # the two admitted solves


def test_message_size_limit():
    with running_server(max_receive_bytes=32 * 1024) as (_planner, target):
        big = {"services": [dict(SMALL["services"][0], name=f"chat{i}") for i in range(300)]}
        assert len(json.dumps(big)) > 32 * 1024
        with PlannerClient(target, retries=0) as c:
            with pytest.raises(PlannerClientError) as err:
                c.validate(big)
            assert err.value.code == "RESOURCE_EXHAUSTED"
            assert c.validate(SMALL)["valid"]  # the server is fine afterwards


# ------------------------------------------------------------------ plumbing
def test_client_retries_while_the_server_is_unavailable():
    port = _free_port()
    started: list = []

    def start_late() -> None:
        time.sleep(0.8)
        started.append(running_server_at(port))

    threading.Thread(target=start_late).start()
    try:
        with PlannerClient(f"127.0.0.1:{port}", timeout_s=20, retries=8, backoff_s=0.1) as c:
            assert c.validate(SMALL)["valid"]
    finally:
        _wait_for(lambda: started)
        started[0].stop(0).wait(5)
    with PlannerClient(f"127.0.0.1:{port}", timeout_s=5, retries=0) as c:
        with pytest.raises(PlannerClientError) as err:
            c.validate(SMALL)
    assert err.value.code == "UNAVAILABLE" and err.value.exit_code == 5


def running_server_at(port: int):
    from server.app import ServerConfig, create_server

    planner, _ = create_server(ServerConfig(port=port, max_concurrent_solves=1, max_queue=1))
    return planner


def test_request_id_is_echoed_and_named_in_errors(server):
    with grpc.insecure_channel(server[1]) as channel:
        stub = pb_grpc.PlannerServiceStub(channel)
        _, call = stub.GetCatalog.with_call(pb.GetCatalogRequest(provider="lambda"), timeout=10,
                                            metadata=(("x-request-id", "sched-42"),))
        assert ("x-request-id", "sched-42") in tuple(call.initial_metadata())
        with pytest.raises(grpc.RpcError) as raw:
            stub.GetCatalog(pb.GetCatalogRequest(provider="nope"), timeout=10, metadata=(("x-request-id", "sched-43"),))
    info = [d for d in rpc_status.from_call(raw.value).details if d.Is(error_details_pb2.RequestInfo.DESCRIPTOR)]
    ri = error_details_pb2.RequestInfo()
    info[0].Unpack(ri)
    assert ri.request_id == "sched-43"


def test_prometheus_metrics_over_http():
    with running_server(metrics_port=0) as (planner, target):
        with PlannerClient(target) as c:
            c.solve(SMALL)
            with pytest.raises(PlannerClientError):
                c.solve(INFEASIBLE)
        text = urllib.request.urlopen(f"http://127.0.0.1:{planner.metrics_port}/metrics", timeout=10).read().decode()
    assert 'planner_solves_total{outcome="optimal"} 1.0' in text
    assert 'planner_solves_total{outcome="infeasible"} 1.0' in text
    assert 'planner_rpcs_total{code="FAILED_PRECONDITION",method="Solve"} 1.0' in text
    assert "planner_solve_seconds_bucket" in text


# ------------------------------------------------------------------ the CLI through the service
@pytest.mark.parametrize("example", ["llm-platform.json", "s1-throughput.json"])
def test_cli_gives_the_same_plan_locally_and_through_the_service(server, capsys, example):
    path = str(EXAMPLES / example)
    assert cli_main(["solve", path, "--format", "json", "--quiet"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert cli_main(["solve", path, "--format", "json", "--server", server[1], "--send-catalog-file"]) == 0
    remote = json.loads(capsys.readouterr().out)
    # The plan is the same; the solver's statistics of the way there (the last MIP's size, the
    # configurations still in it) are not with percentile caps: which caps are still upper
    # bounds depends on those this process computed before, in other tests.
    path = ("model_size", "candidates", "rejected", "pruned_offers", "bound_usd_per_hour", "detail")
    remote_solver, local_solver = (without_timings(d).pop("solver") for d in (remote, local))
    assert {k: v for k, v in remote_solver.items() if k not in path} == \
        {k: v for k, v in local_solver.items() if k not in path}
    assert remote_solver["bound_usd_per_hour"] == pytest.approx(local_solver["bound_usd_per_hour"], rel=1e-9)
    assert {k: v for k, v in without_timings(remote).items() if k != "solver"} == \
        {k: v for k, v in without_timings(local).items() if k != "solver"}
    assert list(remote) == list(local)


def test_cli_through_the_service_reports_infeasibility_like_locally(server, capsys, tmp_path):
    path = tmp_path / "infeasible.json"
    path.write_text(json.dumps(INFEASIBLE))
    assert cli_main(["solve", str(path), "--format", "json", "--quiet"]) == 3
    local = json.loads(capsys.readouterr().out)
    assert cli_main(["solve", str(path), "--format", "json", "--server", server[1]]) == 3
    remote = json.loads(capsys.readouterr().out)
    assert remote == local


# ------------------------------------------------------------------ helpers
def _wait_for(condition, timeout_s: float = 15.0) -> None:
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
