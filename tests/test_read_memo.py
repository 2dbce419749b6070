"""A worker's memo of the workloads it read (server/read_memo.py): a repeated request gets
the objects read before and the same answer a fresh read gives; a failed read is not
remembered; the memo stays bounded."""

from __future__ import annotations

import copy

import pytest

from grpc_support import SMALL
from planner_client import PlannerClient
from server import worker
from server.convert import plan_from_proto
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.read_memo import ReadMemo, READS
from server.requests import read_workload

TIMINGS = ("solve_time_s", "total_time_s", "timings")


def _request_bytes(workload: dict, **fields) -> bytes:
    client = PlannerClient("127.0.0.1:1")  # builds requests only; never connects
    try:
        request = client._solve_request(workload, None, False, None, None)
    finally:
        client.close()
    for name, value in fields.items():
        setattr(request, name, value)
    return request.SerializeToString()


def _solve(data: bytes) -> dict:
    result = worker.run_job(worker.Job(1), "solve", (data, None, False, "test"), lambda message: None)
    assert result.failure is None, result.failure
    plan = pb.SolveResponse.FromString(result.payload).plan
    d = plan_from_proto(plan)
    d.pop("solve_time_s", None)
    for key in ("solver", "horizon_solver"):  # timings, as bench/plan_identity.py leaves them out
        if isinstance(d.get(key), dict):
            for field in TIMINGS:
                d[key].pop(field, None)
    return d


@pytest.fixture(autouse=True)
def _empty_memo():
    READS.clear()
    yield
    READS.clear()


def test_a_repeated_request_reuses_its_read_and_answers_as_a_fresh_read():
    data = _request_bytes(SMALL)
    first = _solve(data)
    assert (READS.misses, READS.hits, len(READS)) == (1, 0, 1)
    remembered = READS.get(data)
    again = _solve(data)
    assert READS.get(data) is remembered  # the same objects, not a new read
    assert READS.hits >= 2
    READS.clear()
    assert _solve(data) == again == first


def test_requests_that_differ_in_any_byte_are_read_apart():
    other = copy.deepcopy(SMALL)
    other["services"][0]["demand"]["requests_per_s"] = 6
    a, b = _request_bytes(SMALL), _request_bytes(other)
    _solve(a), _solve(b)
    assert len(READS) == 2
    assert READS.get(a)[0].services[0].demand.requests_per_s == 5
    assert READS.get(b)[0].services[0].demand.requests_per_s == 6


def test_a_request_that_fails_to_read_is_not_remembered_and_fails_alike_every_time():
    bad = copy.deepcopy(SMALL)
    bad["services"][0]["model"] = "no-such-model"
    data = _request_bytes(bad)
    failures = [worker.run_job(worker.Job(1), "solve", (data, None, False, "test"), lambda m: None).failure
                for _ in range(2)]
    assert all(f is not None and f.code == "INVALID_ARGUMENT" for f in failures)
    assert failures[0].message == failures[1].message
    assert len(READS) == 0


def test_the_memo_keeps_its_most_recent_entries_and_no_large_request():
    memo = ReadMemo(max_entries=2, max_request_bytes=100)
    read = read_workload(pb.SolveRequest.FromString(_request_bytes(SMALL)).workload)
    for key in (b"a", b"b", b"c"):
        memo.put(key, read)
    assert memo.get(b"a") is None and memo.get(b"b") is read and memo.get(b"c") is read
    memo.put(b"x" * 101, read)
    assert memo.get(b"x" * 101) is None and len(memo) == 2
