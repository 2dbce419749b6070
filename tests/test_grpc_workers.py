"""The worker pool behind the service, on the real server: a cancel or a deadline in any
stage of a solve frees the solver slot and the CPU promptly and leaves the pool usable;
explanations end with the call; memory does not pile up over large solves; workers die
with the server; hostile input cannot starve health checks or keep SIGTERM from working.

Bounds are generous (the machine is shared): the figures the issue targets (0.1 s to
stop, 50 ms health checks) are measured by bench/server_pool.py and docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import grpc
import pytest

from grpc_support import SMALL, generated_workload, running_server, slow_workload, yaml_alias_bomb
from planner_client import PlannerClient, PlannerClientError
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
from server.pool import children_of, process_tree_memory_mib
from test_grpc_serve import ServeProcess

STOP_BOUND_S = 1.0  # generous: measured 0.02-0.09 s on the 2-core development machine under load


@pytest.fixture(scope="module")
def server():
    with running_server(max_concurrent_solves=1, max_queue=2) as (planner, target):
        yield planner, target


def _request(workload: dict, explain: bool = False) -> pb.SolveRequest:
    return pb.SolveRequest(workload=pb.Workload(json=json.dumps(workload)), explain=explain)


def _wait_for(condition, timeout_s: float, what: str) -> None:
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s} s")
        time.sleep(0.002)


def _cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == "Z":
        return None  # killed, waiting to be reaped: it uses no CPU
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


ATTEMPTS = 6  # calls cancelled in a stage until one cancel lands in it (see the test)

# Workloads that reach each stage; most stages last long enough to be cancelled in, the
# 60-service tie-break only milliseconds (the test then tries again).
STAGES = [
    # Reading the largest document the limits allow (alias bombs are now refused at once):
    # ~990,000 values to parse and check, then refused for its unknown field.
    ("read", {"json": json.dumps({"name": "big", "services": [
        {"name": "chat", "model": "llama-3.1-8b", "demand": {"requests_per_s": 1, "prompt_tokens": 8, "output_tokens": 8}}],
        "padding": [[1.5] * 1000 for _ in range(990)]})}, False),
    ("candidates", generated_workload(60), False),
    ("model", generated_workload(60), False),
    ("solve", slow_workload(time_limit_s=120), False),
    ("tie_break", generated_workload(60), False),
    ("explain", generated_workload(20, seed=3), True),
]


@pytest.mark.slow
@pytest.mark.parametrize("stage, workload, explain", STAGES, ids=[s[0] for s in STAGES])
def test_a_cancel_in_each_stage_frees_the_slot_and_the_cpu_and_the_pool_stays_usable(server, stage, workload, explain):
    planner, target = server
    stub = pb_grpc.PlannerServiceStub(grpc.insecure_channel(target))
    request = (pb.SolveRequest(workload=pb.Workload(json=workload["json"])) if "json" in workload
               else _request(workload, explain))
    # A stage of a few milliseconds (the tie-break, when a point of its LP settles it) can
    # end before it is seen, or between seeing it and the cancel (the stop then lands in the
    # next stage): the call is made again, until a cancel lands in this stage.
    for _ in range(ATTEMPTS):
        before = sum(n for (s, _how), n in planner.pool.stops.items() if s == stage)
        call = stub.Solve.future(request, timeout=600)
        _wait_for(lambda: stage in planner.pool.busy_stages() or call.done(), 300,
                  f"the solve reaching its {stage} stage")
        if call.done():  # the solve passed the stage (and ended) before it was seen: again
            assert call.exception() is None, call.exception()
            continue
        busy_pids = set(planner.pool.pids()) - set(_idle_pids(planner))
        call.cancel()
        _wait_for(lambda: planner.gate.running == 0, 10, "the slot being freed")
        assert planner.pool.stop_times_s[-1] < STOP_BOUND_S, \
            f"stopped {planner.pool.stop_times_s[-1]:.3f} s after the cancel"
        if sum(n for (s, _how), n in planner.pool.stops.items() if s == stage) == before + 1:
            break
        _wait_for(lambda: len(planner.pool.pids()) == planner.pool.target, 120, "the pool replacing its worker")
    else:
        raise AssertionError(f"no cancel of {ATTEMPTS} landed in the {stage} stage")
    # The CPU is free: the worker was killed, or it is idle again (its CPU time stands still).
    for pid in busy_pids:
        first = _cpu_s(pid)
        time.sleep(0.5)
        second = _cpu_s(pid)
        assert first is None or second is None or second - first < 0.2, f"worker {pid} kept computing"
    # The pool is usable at once (a warm spare), and back to full strength soon.
    with PlannerClient(target, timeout_s=60) as client:
        assert client.solve(SMALL)["status"] == "optimal"
    _wait_for(lambda: len(planner.pool.pids()) == planner.pool.target, 120, "the pool replacing its worker")


def _idle_pids(planner) -> list[int]:
    with planner.pool._cond:
        return [w.pid for w in planner.pool._idle]


@pytest.mark.slow
def test_a_deadline_inside_the_candidates_stage_frees_the_slot(server):
    """Building the candidates of 300 services takes seconds (~1.7 s on a quiet machine;
    60 services took 0.5 s, and their whole solve sometimes ended inside the deadline);
    the call's 1 s deadline still frees the slot in time (the stage stops at the solve's
    time limit, or its worker is killed when the call's deadline passes first)."""
    planner, target = server
    workload = generated_workload(300, seed=7)
    for i, svc in enumerate(s for s in workload["services"] if "model" in s):
        # Prompt lengths no other test asks for: the workers' candidate caches (shared by
        # services with the same performance, and kept by a reused worker) hold none of them.
        svc["demand"]["prompt_tokens"] = 3001 + i
    with PlannerClient(target, timeout_s=1.0, retries=0) as client:
        t0 = time.monotonic()
        with pytest.raises(PlannerClientError) as err:
            client.solve(workload)
    assert err.value.code == "DEADLINE_EXCEEDED"
    _wait_for(lambda: planner.gate.running == 0, 10, "the slot being freed")
    assert time.monotonic() - t0 < 1.0 + STOP_BOUND_S + 1.0
    with PlannerClient(target, timeout_s=60) as client:
        assert client.solve(SMALL)["status"] == "optimal"


@pytest.mark.slow
def test_explanations_end_in_time_for_the_answer(server):
    """An explained solve under a deadline answers OK before the deadline, explanation
    included (the explain stage never outlives the call: see the cancel test above)."""
    planner, target = server
    workload = generated_workload(12, seed=3)
    stub = pb_grpc.PlannerServiceStub(grpc.insecure_channel(target))
    t0 = time.monotonic()
    plain = stub.Solve(_request(workload), timeout=300)
    deadline_s = 3 * (time.monotonic() - t0) + 2.0
    t0 = time.monotonic()
    response = stub.Solve(_request(workload, explain=True), timeout=deadline_s)
    assert time.monotonic() - t0 < deadline_s
    assert response.plan.total_price_usd_per_hour == pytest.approx(plain.plan.total_price_usd_per_hour)
    assert [a for s in response.plan.services for a in s.alternatives], "the explanation ran"
    assert planner.gate.running == 0


# ------------------------------------------------------------------ memory
@pytest.mark.slow
def test_memory_stays_bounded_over_repeated_large_solves():
    """Four 100-service solves in the real server: a worker whose memory after a job is
    above the bound is recycled, and the server's whole process tree stays far below what
    the old in-process server reached (about 124 MiB more per large solve, never returned)."""
    with running_server(max_concurrent_solves=1, max_queue=2, worker_max_rss_mib=200) as (planner, target):
        tree = [os.getpid()]  # the test process is the server's process here
        with PlannerClient(target, timeout_s=600) as client:
            sizes = []
            for seed in range(4):
                assert client.solve(generated_workload(100, seed))["status"] in ("optimal", "feasible")
                pids = planner.pool.pids() + children_of(os.getpid())
                sizes.append(process_tree_memory_mib(sorted(set(tree + pids))))
        # The bound holds after every job (a worker above it is replaced) ...
        for pid in planner.pool.pids():
            with open(f"/proc/{pid}/statm") as f:
                rss_mib = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
            assert rss_mib < 200 + 50
        # ... and the process tree does not grow from solve to solve.
        assert sizes[-1]["pss_mib"] < sizes[0]["pss_mib"] + 150, sizes


# ------------------------------------------------------------------ hostile input, signals, orphans
@pytest.mark.slow
def test_alias_bombs_do_not_starve_health_checks_and_sigterm_stops_the_server(solver_cli):
    """30 YAML alias bombs at once (each takes seconds to walk): health checks keep
    answering promptly (the parsing happens in worker processes, not on the RPC threads),
    no bomb gets an INTERNAL error, and SIGTERM stops the server and its workers."""
    server = ServeProcess(solver_cli, "--grace-s", "1", "--max-concurrent-solves", "2", "--max-queue", "16")
    target = f"127.0.0.1:{server.port}"
    try:
        workers = set(server.seen[-1].get("worker_processes") or [])
        bomb = pb.SolveRequest(workload=pb.Workload(yaml=yaml_alias_bomb())).SerializeToString()
        codes: list = []
        channel = grpc.insecure_channel(target)
        solve = channel.unary_unary("/fleetplanner.v1.PlannerService/Solve")
        health = channel.unary_unary("/grpc.health.v1.Health/Check")
        from grpc_health.v1 import health_pb2

        def send_bomb() -> None:
            try:
                solve(bomb, timeout=8)
                codes.append(grpc.StatusCode.OK)
            except grpc.RpcError as exc:
                codes.append(exc.code())

        check = health_pb2.HealthCheckRequest().SerializeToString()
        health(check, timeout=5)  # connected
        bombers = [threading.Thread(target=send_bomb) for _ in range(30)]
        for t in bombers:
            t.start()
        latencies = []
        t_end = time.monotonic() + 4.0
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            answer = health_pb2.HealthCheckResponse.FromString(health(check, timeout=5))
            latencies.append(time.monotonic() - t0)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING
            time.sleep(0.05)
        for t in bombers:
            t.join(30)
        server.drain()
        latencies.sort()
        assert latencies[-1] < 0.5, f"slowest health check {latencies[-1]:.3f} s; median {latencies[len(latencies) // 2]:.3f} s"
        assert len(codes) == 30
        assert not {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN} & set(codes), codes
        workers |= {e["pid"] for e in server.seen if e.get("event") == "worker.started"}
        t0 = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(20) == 0
        assert time.monotonic() - t0 < 1 + 2 + 5  # grace, cancel margin, slack
        _wait_for(lambda: not any(_alive(p) for p in workers), 10, "the workers ending with the server")
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


def test_workers_die_with_a_killed_server(solver_cli):
    """kill -9 of the server: its forkserver sees its lifeline close and exits, and the
    kernel then kills every worker (parent-death signal): nothing is left behind."""
    server = ServeProcess(solver_cli, "--max-concurrent-solves", "2")
    try:
        descendants = _descendants(server.proc.pid)
        assert len(descendants) >= 3, descendants  # forkserver + 2 workers + 1 spare (+ resource tracker)
        with PlannerClient(f"127.0.0.1:{server.port}", timeout_s=60) as client:
            assert client.solve(SMALL)["status"] == "optimal"
        server.proc.kill()
        server.proc.wait(10)
        _wait_for(lambda: not any(_alive(p) for p in descendants), 15, f"the server's processes {descendants} ending")
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        for child in children_of(stack.pop()):
            out.append(child)
            stack.append(child)
    return out


def test_at_the_end_of_the_grace_calls_in_flight_are_cancelled():
    with running_server(max_concurrent_solves=1, max_queue=2) as (planner, target):
        outcome: dict = {}

        def solve() -> None:
            with PlannerClient(target, timeout_s=120, retries=0) as client:
                try:
                    client.solve(slow_workload(time_limit_s=100))
                except PlannerClientError as exc:
                    outcome["error"] = exc

        caller = threading.Thread(target=solve)
        caller.start()
        _wait_for(lambda: "solve" in planner.pool.busy_stages(), 60, "the solve running")
        t0 = time.monotonic()
        done = planner.stop(1.0)
        caller.join(30)
        assert done.wait(30)
        e = outcome["error"]
        assert (e.code, e.reason) == ("CANCELLED", "SHUTTING_DOWN"), (e.code, e.reason, e.message)
        assert "grace" in e.message
        assert 1.0 <= time.monotonic() - t0 < 1.0 + 5.0
        assert planner.pool.pids() == []
