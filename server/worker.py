"""A warm worker process: where requests are decoded, parsed and solved, away from the RPC threads.

The server's pool (server/pool.py) forks workers from a forkserver that has already
imported the solver (server/preload.py), so a new worker is warm in a fraction of a
second. A worker runs one job at a time, on its main thread:

    parent -> worker, jobs pipe:    ("job", job_id, kind, payload)      kind: solve | validate | review
    worker -> parent, jobs pipe:    ("progress", job_id, bytes)*  ("done", job_id, Result)
    parent -> worker, cancel pipe:  job_id
    worker -> parent, shared bytes: the running job's stage ("read", "candidates", ...)

The stage goes through shared memory rather than the pipe, so that reporting it costs
no message and wakes nobody; the server reads it when it needs it (a cancel, a test).

A watcher thread reads the cancel pipe and sets the job's cancel event: plan() checks it
in every stage (solver.interrupt.Stop) and stops the MIP on it, and the stage callback
raises Cancelled at the next stage boundary. A job that does not come back in time is
the pool's to end: it kills the worker.

Everything that can be slow or hostile happens here (protobuf decoding, YAML/JSON
parsing, validation, the solve, explanations, conversion to the answer's bytes), so it
can neither hold the server's GIL nor outlive the call. A worker dies with the server:
it asks the kernel for SIGKILL when its parent (the forkserver, which exits with the
server) dies, and exits when either pipe reaches end-of-file.
"""

from __future__ import annotations

import ctypes
import gc
import os
import pickle
import signal
import threading
import time
import traceback
from dataclasses import dataclass

from server import convert, logs
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.read_memo import READS
from server.requests import answer_send_s, backend_name, decode, read_workload, solve_budget
from server.status import Failure, failure
from solver.collector import paused as collector_paused
from solver.errors import Cancelled, InputError, SolverTimeout

MIN_SOLVE_S = 0.05  # below this the solver cannot even load the model
MAX_TIME_LIMIT_S = 86_400.0  # the workload schema's own bound on solver.time_limit_s
TRIM_ABOVE_MIB = 16  # give freed heap back to the system when jobs grew the process by this much since the last time
# Workers run at a lower CPU priority than the server's own process (ServerConfig.worker_nice,
# default 5), so that health checks, admission and answers never wait behind solves for a
# core (CFS weights: nice 0 gets 3x the CPU of nice 5 when both want it; an idle server
# process costs the solves nothing).
PR_SET_PDEATHSIG = 1


@dataclass
class Result:
    """A finished job: the answer's serialized bytes, or the failure to send instead."""

    payload: bytes | None
    failure: Failure | None
    outcome: str  # for metrics: optimal, feasible, deadline, infeasible, invalid, timeout, cancelled, error, ok
    stage: str  # the last stage the job entered
    rss_mib: float  # the worker's resident memory after the job (after giving freed memory back)


class Job:
    """The running job's id, cancel event and stage; shared with the watcher thread."""

    def __init__(self, job_id: int, stage_buf=None):
        self.id = job_id
        self.cancel = threading.Event()
        self.stage_name = "start"
        self._stage_buf = stage_buf

    def stage(self, name: str) -> None:
        """plan()'s on_stage: report the stage; a cancelled job stops here."""
        self.stage_name = name
        if self._stage_buf is not None:
            self._stage_buf.value = name.encode("ascii", "replace")[:31]
        if self.cancel.is_set():
            raise Cancelled(f"the call was cancelled; the solve stopped before its {name} stage")


# ------------------------------------------------------------------ the process
def main(conn, cancel_conn, log_level: str | None, nice: int = 0, stage_buf=None) -> None:
    """The worker's entry point (a multiprocessing target)."""
    _die_with_parent()
    _drop_inherited_lifelines()
    if nice:
        try:
            os.nice(nice)
        except OSError:
            pass
    from solver.optimize.backends import stderr_filter

    stderr_filter.install()  # SCIP's two spurious ERROR lines per cancellable solve stay out of the server's log
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the whole group; the server decides
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if log_level:
        logs.configure(log_level)
    send_lock = threading.Lock()

    def send(message) -> None:
        with send_lock:  # progress may come from a solver thread
            conn.send(message)

    state = {"job": None}
    state_lock = threading.Lock()
    threading.Thread(target=_watch_cancels, args=(cancel_conn, state, state_lock), daemon=True,
                     name="cancel-watch").start()
    _warm_up()
    baseline_mib = rss_mib()
    send(("ready", os.getpid(), baseline_mib))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break  # the pool closed the pipe (retired) or the server is gone
        if message[0] != "job":
            break
        _, job_id, kind, payload = message
        job = Job(job_id, stage_buf)
        with state_lock:
            state["job"] = job
            if state.get("cancelled_id") == job_id:  # the cancel overtook the job
                job.cancel.set()
        result = run_job(job, kind, payload, send)
        with state_lock:
            state["job"] = None
        rss, baseline_mib = settle_memory(baseline_mib)
        result.rss_mib = rss
        try:
            send(("done", job_id, result))
        except (OSError, ValueError):
            break
    os._exit(0)  # no interpreter teardown: nothing to flush, and it could hang on solver threads


def _watch_cancels(cancel_conn, state: dict, lock: threading.Lock) -> None:
    while True:
        try:
            job_id = cancel_conn.recv()
        except (EOFError, OSError):
            os._exit(0)  # the server closed the pipe or died: nothing left to work for
        with lock:
            job = state["job"]
            if job is not None and job.id == job_id:
                job.cancel.set()
            else:
                state["cancelled_id"] = job_id


def run_job(job: Job, kind: str, payload: tuple, send) -> Result:
    """One job, every error turned into the failure the caller receives."""
    request_id = payload[-1]
    token = logs.request_id_var.set(request_id)
    try:
        if kind == "solve":
            data, deadline, stream, _ = payload
            body, outcome = _solve(job, data, deadline, stream, send)
        elif kind == "validate":
            body, outcome = _validate(payload[0]), "ok"
        elif kind == "review":
            body, outcome = _read_review(payload[0]), "ok"
        else:
            raise ValueError(f"unknown job kind {kind!r}")
        return Result(body, None, outcome, job.stage_name, 0.0)
    except Exception as exc:  # noqa: BLE001 - every error becomes a status; none may kill the worker
        f = failure(exc, request_id)
        if f.code == "INTERNAL":
            logs.log.error("rpc.internal_error", exc_info=exc, extra={"fields": {"stage": job.stage_name}})
        if kind == "solve":
            logs.event("solve.end", status=f.outcome, stage=job.stage_name, error=f.message)
        return Result(None, f, f.outcome, job.stage_name, 0.0)
    except BaseException:  # e.g. RecursionError is an Exception; this is SystemExit/KeyboardInterrupt
        traceback.print_exc()
        os._exit(70)
    finally:
        logs.request_id_var.reset(token)


# ------------------------------------------------------------------ jobs
def _solve(job: Job, data: bytes, deadline: float | None, stream: bool, send) -> tuple[bytes, str]:
    from solver.plan import PlanOptions, plan

    job.stage("read")
    request = decode(pb.SolveRequest, data)
    read = READS.get(data)  # the same bytes read before: the same workload and catalog
    if read is None:
        read = read_workload(request.workload, current_fleet=request.current_fleet
                             if request.HasField("current_fleet") else None)
        READS.put(data, read)
    workload, catalog = read
    backend = backend_name(request.backend)
    requested_s = request.time_limit_s if request.HasField("time_limit_s") else workload.solver.time_limit_s
    if not 0 < requested_s <= MAX_TIME_LIMIT_S:
        raise InputError.single("time_limit_s", f"must be between 0 and {MAX_TIME_LIMIT_S:g} s, got {requested_s:g}.",
                                "give the seconds the solver may take, or leave it unset")
    remaining_s = None if deadline is None else deadline - time.monotonic()
    limit_s, by_deadline = solve_budget(requested_s, remaining_s, len(workload.services))
    if limit_s < MIN_SOLVE_S:
        raise SolverTimeout(f"the call's deadline leaves {limit_s:.2f} s to solve. To fix: give the call a longer deadline")
    on_progress = None
    if stream:
        def on_progress(p) -> None:
            send(("progress", job.id, pb.SolveEvent(progress=convert.progress_to_proto(_progress_dict(p)))
                  .SerializeToString()))
    logs.event("solve.start", services=len(workload.services), time_limit_s=round(limit_s, 3),
               limit_from="deadline" if by_deadline else "request", explain=request.explain)
    # The collector stays paused from the plan through its answer: resumed when plan()
    # returns, its first collection walked every object the plan made while they were still
    # alive (5,000 services: 3 s in to_dict, past a 30 s deadline; bench/deadlines.py --door
    # grpc). The plan is dropped before it resumes; neither makes reference cycles.
    with collector_paused():
        result = plan(workload, PlanOptions(time_limit_s=limit_s, backend=backend, explain=request.explain,
                                            on_progress=on_progress, cancel=job.cancel, catalog=catalog,
                                            references_checked=True,  # read_workload checked them
                                            on_stage=job.stage,
                                            # leave time to convert and send the answer
                                            answer_by=None if deadline is None else
                                            deadline - answer_send_s(len(workload.services))))
        job.stage("answer")
        d = result.to_dict()
        del result
        late = by_deadline and d["status"] != "optimal"
        plan_msg = convert.plan_to_proto(d)
        message = (pb.SolveEvent(plan=plan_msg, deadline_exceeded=late) if stream
                   else pb.SolveResponse(plan=plan_msg, deadline_exceeded=late))
        body = message.SerializeToString()
        status, price, solve_time_s = d["status"], d["total_price_usd_per_hour"], d.get("solve_time_s")
        del d, plan_msg, message
    outcome = "deadline" if late else status
    logs.event("solve.end", status=outcome, total_price_usd_per_hour=price, solve_time_s=solve_time_s)
    return body, outcome


def _progress_dict(p) -> dict:
    from dataclasses import asdict

    return asdict(p)


def _validate(data: bytes) -> bytes:
    from dataclasses import asdict

    request = decode(pb.ValidateRequest, data)
    try:
        workload, _catalog = read_workload(request.workload)
    except InputError as exc:
        # The response has no trailer limit: every violation goes back.
        return pb.ValidateResponse(valid=False, violations=[
            pb.FieldViolation(**{k: _clean(v) for k, v in asdict(v).items()}) for v in exc.violations]
        ).SerializeToString()
    return pb.ValidateResponse(valid=True, workload=_clean(workload.name), services=len(workload.services)
                               ).SerializeToString()


def _clean(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _read_review(data: bytes) -> bytes:
    from server.review import read_review

    request = decode(pb.ReviewRequest, data)
    review, limit_s = read_review(request)
    return pickle.dumps((review, limit_s), protocol=pickle.HIGHEST_PROTOCOL)


# ------------------------------------------------------------------ process plumbing
def rss_mib() -> float:
    """This process's resident memory, MiB."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def settle_memory(baseline_mib: float) -> tuple[float, float]:
    """After a job: (this process's resident MiB, the baseline for the next job). Freed
    heap goes back to the system when jobs grew the process by TRIM_ABOVE_MIB since the
    baseline. What a trim cannot give back (caches that jobs filled, pages inherited from
    the forkserver that jobs touched) becomes the new baseline: otherwise every later job
    would pay for a full collection and a trim that return nothing (~3-5 ms a job, seen
    with a different request on every call)."""
    rss = rss_mib()
    if rss - baseline_mib > TRIM_ABOVE_MIB:
        _give_back_memory()
        rss = rss_mib()
        baseline_mib = max(baseline_mib, rss)
    return rss, baseline_mib


def _give_back_memory() -> None:
    """Return the heap freed by a large job to the system (glibc keeps it otherwise)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass  # not glibc: the pool's RSS bound recycles the worker instead


def _die_with_parent() -> None:
    """SIGKILL when the parent (the forkserver) dies: the kernel's guarantee, which holds
    even while a solver holds the GIL in C++."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: end-of-file on the pipes still stops the worker between jobs
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(0)


def _drop_inherited_lifelines() -> None:
    """Close the forkserver's "alive" pipe that every forked child inherits: while any
    child held it, the forkserver would outlive a killed server, and so would we."""
    try:
        from multiprocessing import forkserver

        fd = forkserver._forkserver._forkserver_alive_fd
        if fd is not None:
            os.close(fd)
            forkserver._forkserver._forkserver_alive_fd = None
    except (ImportError, AttributeError, OSError):
        pass


def _warm_up() -> None:
    """One tiny solve, so that the first request does not pay for first-use costs
    (solver libraries initialising, caches filling)."""
    from solver.plan import PlanOptions, plan
    from solver.workload.documents import parse_workload

    try:
        plan(parse_workload(WARM_UP_WORKLOAD), PlanOptions(time_limit_s=10))
    except Exception:  # noqa: BLE001 - a failed warm-up only makes the first solve slower
        logs.log.warning("worker.warm_up_failed", exc_info=True, extra={"fields": {}})


WARM_UP_WORKLOAD = {"name": "warm-up", "services": [{
    "name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
    "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256},
    "slo": {"ttft_ms": 2000, "tpot_ms": 60}}]}
