"""A pool of warm worker processes that run the server's expensive work (server/worker.py).

Why processes: a solve is CPU-bound Python and C++; in the server's own process it would
hold the GIL against health checks and other calls, could not be stopped in the stages
that do not look at a cancel flag, and would keep its memory (each RPC thread its own
malloc arena) after it ends. In a worker, a cancel that the job does not honour within
COOPERATIVE_STOP_S ends with the worker killed: the slot and the CPU are free within
about 0.1 s at any stage, and memory goes back when a worker is recycled.

Shape: `size` workers for the solver slots plus `spare` warm ones, so that a replacement
for a killed or recycled worker never makes a call wait for a start. Workers are forked
by multiprocessing's forkserver, which imports the solver once (server/preload.py); a new
worker then costs a fork and a tiny warm-up solve. A manager thread keeps the pool full.

A worker is recycled after `max_jobs` jobs, or when its resident memory after a job is
above `max_rss_mib` (it gives freed heap back after each large job first). For the job
count, one at a time: a worker due while another is being replaced runs on until the
pool is full again, so that the spare always covers the gap.

Workers die with the server: SIGKILL from the kernel when the forkserver (which exits
when the server does) dies, end-of-file on their pipes, and close() on shutdown.
"""

from __future__ import annotations

import collections
import ctypes
import itertools
import multiprocessing
import multiprocessing.connection
import os
import select
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from server import logs
from server.metrics import Metrics
from server.status import WaitCancelled, WaitExpired

COOPERATIVE_STOP_S = 0.05  # a cancelled job gets this long to stop by itself; then its worker is killed
POLL_S = 0.02  # how often a waiting call looks at its cancel event (answers wake it at once)
START_TIMEOUT_S = 120.0  # a worker's start (fork + warm-up); generous for a loaded machine
# "__main__" first: the main module is imported once, in the forkserver, not again in
# every worker (a program that embeds the server needs the usual `if __name__ == "__main__":`).
PRELOAD = ["__main__", "server.preload"]
STAGE_BYTES = 32


class WorkerDied(Exception):
    """The worker process ended in the middle of a job (killed from outside, out of memory, a crash)."""


class Stopped(Exception):
    """The job was stopped because the call was cancelled (`how`: "cooperative" or "killed")."""

    def __init__(self, stage: str, how: str):
        self.stage, self.how = stage, how
        super().__init__(f"stopped in stage {stage} ({how})")


@dataclass(eq=False)  # identity semantics: workers live in sets
class Worker:
    process: multiprocessing.Process
    conn: object  # multiprocessing Connection: jobs and answers
    cancel_conn: object  # multiprocessing Connection: job ids to cancel
    pid: int
    baseline_rss_mib: float
    stage_buf: object = None  # shared memory the worker writes its job's stage into (no message, no wake-up)
    jobs: int = 0
    stop_how: str = ""  # how the last cancelled job ended: "cooperative" or "killed"
    started: float = field(default_factory=time.monotonic)

    @property
    def stage(self) -> str:
        return self.stage_buf.value.decode("ascii", "replace") or "start"

    @stage.setter
    def stage(self, name: str) -> None:
        self.stage_buf.value = name.encode("ascii", "replace")[:STAGE_BYTES - 1]


# Defaults, read by ServerConfig too (`solver-cli serve` states them as literals, to start
# without importing the server; tests/test_serve_defaults.py keeps them equal).
SPARE_WORKERS = 1
MAX_JOBS = 1000
# A worker holds one 300-service workload's caches (~220 MiB after a solve) under this, and
# the whole process tree stays within 500 MiB over consecutive large solves (docs/grpc.md).
MAX_RSS_MIB = 250.0


class WorkerPool:
    def __init__(self, size: int, spare: int = SPARE_WORKERS, max_jobs: int = MAX_JOBS, max_rss_mib: float = MAX_RSS_MIB,
                 log_level: str | None = None, metrics: Metrics | None = None, nice: int = 5):
        if size < 1 or spare < 0 or max_jobs < 1 or max_rss_mib <= 0:
            raise ValueError("need size >= 1, spare >= 0, max_jobs >= 1 and max_rss_mib > 0")
        self.size, self.spare = size, spare
        self.max_jobs, self.max_rss_mib = max_jobs, max_rss_mib
        self._log_level = log_level
        self._nice = nice
        self._metrics = metrics
        self._ctx = multiprocessing.get_context("forkserver")
        self._cond = threading.Condition()
        self._idle: collections.deque[Worker] = collections.deque()
        self._busy: set[Worker] = set()
        self._starting = 0
        self._closed = False
        self._ids = itertools.count(1)
        self._manager: threading.Thread | None = None
        self.restarts: collections.Counter = collections.Counter()  # why workers were replaced
        self.stops: collections.Counter = collections.Counter()  # (stage, how) of cancelled jobs
        self.stop_times_s: collections.deque[float] = collections.deque(maxlen=1000)  # cancel -> worker free

    # ------------------------------------------------------------ lifecycle
    def start(self, wait: bool = True) -> "WorkerPool":
        """Start the forkserver and the manager thread; with wait, return once every
        worker is ready (raises RuntimeError if none could start)."""
        from multiprocessing import forkserver

        forkserver.set_forkserver_preload(PRELOAD)  # read once, when the forkserver starts
        _start_forkserver()
        self._manager = threading.Thread(target=self._manage, daemon=True, name="worker-pool")
        self._manager.start()
        if wait:
            deadline = time.monotonic() + START_TIMEOUT_S
            with self._cond:
                while len(self._idle) < self.target and time.monotonic() < deadline and not self._closed:
                    self._cond.wait(0.1)
                if not self._idle:
                    raise RuntimeError("no worker process could start; the server's log has the reason")
        return self

    @property
    def target(self) -> int:
        return self.size + self.spare

    def close(self) -> None:
        """Stop every worker now (their calls have ended or are being cancelled)."""
        with self._cond:
            self._closed = True
            workers = list(self._idle) + list(self._busy)
            self._idle.clear()
            self._cond.notify_all()
        for w in workers:
            self._kill(w)
        if self._manager is not None:
            self._manager.join(5)

    # ------------------------------------------------------------ introspection
    def pids(self) -> list[int]:
        with self._cond:
            return [w.pid for w in [*self._idle, *self._busy]]

    def busy_stages(self) -> list[str]:
        """The stage of each job running now (tests and logs use it)."""
        with self._cond:
            return [w.stage for w in self._busy]

    @property
    def idle(self) -> int:
        return len(self._idle)

    # ------------------------------------------------------------ running jobs
    def run(self, kind: str, payload: tuple, cancel: threading.Event,
            deadline: float | None = None) -> Iterator[tuple]:
        """Run one job; yields the worker's ("progress", id, bytes) messages, then its
        ("done", id, Result). Raises Stopped when `cancel` is set (the job stops itself
        or its worker is killed), WorkerDied if the worker ends on its own, WaitCancelled
        or WaitExpired while waiting for a worker (normally there is an idle one)."""
        worker = self._checkout(cancel, deadline)
        job_id = next(self._ids)
        settled = False
        try:
            try:
                worker.conn.send(("job", job_id, kind, payload))
            except (OSError, ValueError) as exc:
                raise WorkerDied(f"could not hand the job to worker {worker.pid}: {exc}") from None
            # A cancel event with a fileno (server.calls.CallCancel) wakes the wait at once;
            # a plain threading.Event is looked at every POLL_S. One poll object for the
            # job (multiprocessing.connection.wait builds a selector on every call).
            conn_fd = worker.conn.fileno()
            poller = select.poll()
            poller.register(conn_fd, select.POLLIN)
            if hasattr(cancel, "fileno"):
                poller.register(cancel.fileno(), select.POLLIN)
                timeout_ms = None
            else:
                timeout_ms = POLL_S * 1000
            while True:
                if cancel.is_set():
                    self._stop(worker, job_id, getattr(cancel, "set_at", None))
                    settled = True
                    raise Stopped(worker.stage, worker.stop_how)
                # Any event on the pipe (data, end-of-file, error) means: read it.
                if not any(fd == conn_fd for fd, _ in poller.poll(timeout_ms)):
                    continue
                message = self._recv(worker)
                if message[0] == "progress":
                    yield message
                elif message[0] == "done" and message[1] == job_id:
                    settled = True
                    self._checkin(worker, message[2].rss_mib)
                    yield message
                    return
        except WorkerDied:
            settled = True
            self._discard(worker, "died")
            raise
        finally:
            if not settled:  # the caller walked away (a stream closed) or an error here: stop the job
                self._stop(worker, job_id)

    def _recv(self, worker: Worker):
        try:
            return worker.conn.recv()
        except (EOFError, OSError) as exc:
            worker.process.join(1)
            code = worker.process.exitcode
            raise WorkerDied(f"the worker process {worker.pid} ended during the job (exit code {code}); "
                             f"it has been replaced. ({exc.__class__.__name__})") from None

    def _stop(self, worker: Worker, job_id: int, cancelled_at: float | None = None) -> None:
        """Ask the job to stop; give it COOPERATIVE_STOP_S, then kill the worker."""
        stage = worker.stage
        cancelled_at = cancelled_at or time.monotonic()
        try:
            worker.cancel_conn.send(job_id)
        except (OSError, ValueError):
            pass
        deadline = time.monotonic() + COOPERATIVE_STOP_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                if not worker.conn.poll(left):
                    break
                message = worker.conn.recv()
            except (EOFError, OSError):
                break
            if message[0] == "done" and message[1] == job_id:
                worker.stop_how = "cooperative"
                self._checkin(worker, message[2].rss_mib)
                self._record_stop(stage, "cooperative", cancelled_at)
                return
        worker.stop_how = "killed"
        self._discard(worker, "killed")
        self._record_stop(stage, "killed", cancelled_at)

    def _record_stop(self, stage: str, how: str, cancelled_at: float) -> None:
        """Count a stopped job; the time from the cancel to a free worker slot is measured here."""
        after_s = time.monotonic() - cancelled_at
        self.stops[(stage, how)] += 1
        self.stop_times_s.append(after_s)
        if self._metrics is not None:
            self._metrics.stops.labels(stage, how).inc()
            self._metrics.stop_latency.observe(after_s)
        logs.event("worker.stop", stage=stage, how=how, after_ms=round(after_s * 1000, 1))

    # ------------------------------------------------------------ checkout / checkin
    def _checkout(self, cancel: threading.Event, deadline: float | None) -> Worker:
        while True:
            with self._cond:
                while not self._idle:
                    if self._closed:
                        raise WaitCancelled()
                    if cancel.is_set():
                        raise WaitCancelled()
                    if deadline is not None and time.monotonic() >= deadline:
                        raise WaitExpired()
                    self._cond.wait(POLL_S)
                # Most recently used first: its caches are warm, and the other workers stay
                # small (their pages still shared with the forkserver) unless load needs them.
                worker = self._idle.pop()
                self._busy.add(worker)
                worker.stage = "start"
                worker.stop_how = ""
            # An idle worker may have died (killed from outside, OOM): its sentinel is then
            # readable. Looked at directly, as is_alive() would, without building a selector.
            if not _readable(worker.process.sentinel) or worker.process.is_alive():
                return worker
            self._discard(worker, "died")

    def _checkin(self, worker: Worker, rss_mib: float) -> None:
        worker.jobs += 1
        worker.stage = "idle"
        with self._cond:
            # A worker due for its job count waits while another one is being replaced:
            # workers started together reach the count together, and retiring them at once
            # would leave fewer workers than slots (the spare covers one) and fork them all
            # in the same moment. Memory never waits.
            due = worker.jobs >= self.max_jobs and len(self._idle) + len(self._busy) >= self.target
        why = ("jobs" if due else
               "memory" if rss_mib > self.max_rss_mib else None)
        if why is not None:
            self._discard(worker, why)
            return
        with self._cond:
            self._busy.discard(worker)
            if self._closed:
                pass
            else:
                self._idle.append(worker)
                self._cond.notify_all()
                return
        self._kill(worker)

    def _discard(self, worker: Worker, why: str) -> None:
        """Take a worker out of the pool (killed, died or recycled); the manager replaces it."""
        with self._cond:
            self._busy.discard(worker)
            try:
                self._idle.remove(worker)
            except ValueError:
                pass
            self._cond.notify_all()
        self.restarts[why] += 1
        if self._metrics is not None:
            self._metrics.worker_restarts.labels(why).inc()
        logs.event("worker.retired", pid=worker.pid, reason=why, jobs=worker.jobs)
        self._kill(worker)

    def _kill(self, worker: Worker) -> None:
        for conn in (worker.conn, worker.cancel_conn):
            try:
                conn.close()
            except OSError:
                pass
        try:
            worker.process.kill()
        except (OSError, ValueError, AttributeError):
            pass
        # Reaped in the background: a SIGKILLed process ends at once, but joining takes a
        # round trip through the forkserver that the caller need not wait for.
        threading.Thread(target=_reap, args=(worker.process,), daemon=True, name="worker-reap").start()

    # ------------------------------------------------------------ the manager
    def _manage(self) -> None:
        """Keep `target` workers alive: start one whenever there are fewer."""
        failures = 0
        while True:
            with self._cond:
                while not self._closed and len(self._idle) + len(self._busy) + self._starting >= self.target:
                    self._cond.wait(0.5)
                if self._closed:
                    return
                self._starting += 1
            try:
                worker = self._spawn()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - keep trying; the log says why
                worker = None
                failures += 1
                logs.event("worker.start_failed", error=f"{exc.__class__.__name__}: {exc}", attempt=failures)
            with self._cond:
                self._starting -= 1
                if worker is not None:
                    if self._closed:
                        self._kill(worker)
                        return
                    self._idle.appendleft(worker)  # new (cold) workers are used last
                self._cond.notify_all()
            if worker is None:
                time.sleep(min(0.5 * 2 ** min(failures, 6), 30.0))

    def _spawn(self) -> Worker:
        from server.worker import main

        conn, child_conn = self._ctx.Pipe(duplex=True)
        cancel_r, cancel_w = self._ctx.Pipe(duplex=False)
        stage_buf = self._ctx.RawArray(ctypes.c_char, STAGE_BYTES)
        process = self._ctx.Process(target=main, args=(child_conn, cancel_r, self._log_level, self._nice, stage_buf),
                                    daemon=True, name="planner-worker")
        process.start()
        child_conn.close()
        cancel_r.close()
        try:
            if not conn.poll(START_TIMEOUT_S):
                raise RuntimeError(f"worker {process.pid} did not start within {START_TIMEOUT_S:g} s")
            tag, pid, rss = conn.recv()
        except (EOFError, OSError, RuntimeError, ValueError) as exc:
            process.kill()
            process.join(5)
            raise RuntimeError(f"worker {process.pid} failed to start (exit code {process.exitcode}): {exc}") from None
        worker = Worker(process, conn, cancel_w, pid, rss, stage_buf)
        worker.stage = "idle"
        logs.event("worker.started", pid=pid, rss_mib=round(rss, 1))
        if self._metrics is not None:
            self._metrics.workers_started.inc()
        return worker


def _start_forkserver() -> None:
    """Start multiprocessing's forkserver (if not running yet) importing from this
    process's own path. Python 3.11's forkserver runs `python -c ...`, whose path begins
    with the current directory, and ignores the path it is handed: its workers would
    import `server` and `solver` from wherever the server was started (another checkout,
    any folder with a server/ in it), not the code this process runs. So it starts with
    PYTHONSAFEPATH (no current directory) and PYTHONPATH set to this process's path."""
    from multiprocessing import forkserver

    path = [os.path.abspath(p or os.curdir) for p in sys.path if os.path.isdir(p or os.curdir)]
    env = {"PYTHONSAFEPATH": "1", "PYTHONPATH": os.pathsep.join(path)}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        forkserver.ensure_running()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _readable(fd: int) -> bool:
    """Whether a file descriptor has something to read (or has reached end-of-file), now."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))


def _reap(process: multiprocessing.Process) -> None:
    try:
        process.join(10)
    except (OSError, ValueError, AssertionError):
        pass


def process_tree_memory_mib(pids: list[int]) -> dict[str, float]:
    """Resident (RSS) and proportional (PSS: shared pages split among their users) memory
    summed over `pids`, MiB. RSS counts pages the forked workers share with the forkserver
    once per process; PSS is what the processes cost together."""
    rss = pss = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1]) / 1024
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1]) / 1024
        except OSError:
            continue
    return {"rss_mib": rss, "pss_mib": pss}


def stop_forkserver(timeout_s: float = 5.0) -> None:
    """End the forkserver and multiprocessing's resource tracker and reap them (a server
    process about to exit: otherwise they end by themselves a moment later, as orphans).
    Private multiprocessing APIs, hence the guards; never waits longer than timeout_s."""
    from multiprocessing import forkserver, resource_tracker

    def stop() -> None:
        for obj in (getattr(forkserver, "_forkserver", None), getattr(resource_tracker, "_resource_tracker", None)):
            try:
                getattr(obj, "_stop", lambda: None)()
            except (OSError, ChildProcessError, AttributeError, ValueError):
                pass

    t = threading.Thread(target=stop, daemon=True, name="forkserver-stop")
    t.start()
    t.join(timeout_s)


def forkserver_pid() -> int | None:
    """The forkserver's pid (part of the server's process tree), if it runs."""
    from multiprocessing import forkserver

    return getattr(forkserver._forkserver, "_forkserver_pid", None)


def children_of(pid: int) -> list[int]:
    """Direct children of a process (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Field 4 (ppid) follows the command name, which is in parentheses and may hold spaces.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out
