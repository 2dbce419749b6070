"""Local backend: a pool of worker processes on this machine (the default).

Workers are forked when the caller runs no other Python thread (the CLI, scripts): they
start in milliseconds with the solver already imported and warmed up. A caller with
threads (the gRPC server) gets `spawn` workers, clean interpreters (forking a threaded
process can deadlock the child on a lock another thread held), which import the solver
once (about a second each). Either way the base case reaches each worker once, through
the pool initializer; each task then carries only its scenario. Each worker dies with
the process that started it, even one killed with SIGKILL (solver/lifeline.py).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import queue
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from solver.interrupt import Stop
from solver.review.execute import BaseCase, solve_scenario
from solver.lifeline import die_with_parent
from solver.review.result import ScenarioResult
from solver.review.task import Task, failed_result

POLL_S = 0.25  # how often a waiting runner looks at its cancel event

_BASE: BaseCase | None = None  # set in each worker by _init_worker


def _init_worker(base: BaseCase, parent_pid: int) -> None:
    global _BASE
    die_with_parent(parent_pid)
    _BASE = base
    warm_up()
    # What the worker starts with (the solver's modules, the catalog, caches a forked worker
    # inherits) lives as long as it does: out of the cyclic collector's way, so the
    # collections that follow each scenario walk only what scenarios added.
    gc.freeze()


def warm_up() -> None:
    """Import the solver backends now (about a second), once per worker, not inside the first solve."""
    from solver.optimize.backends import get_backend

    get_backend("auto")


def _solve_in_worker(task: Task) -> ScenarioResult:
    assert _BASE is not None, "the pool initializer sets the base case"
    return solve_scenario(_BASE, task.scenario, task.time_limit_s, task.fingerprint)


def prewarm(base: BaseCase, time_limit_s: float, cancel: threading.Event | None) -> None:
    """Build the base's candidate configurations in this process before forking: the
    candidate and estimate caches they fill are inherited, so the workers do not each
    build them for their first scenario (about half a second on a 20-service workload)."""
    from solver.compile.candidates import build_problem

    try:
        build_problem(base.workload, base.catalog, stop=Stop(cancel, time.monotonic() + time_limit_s, time_limit_s))
    except Exception:  # noqa: BLE001 - only a cache warm-up: the scenarios' own solves report any problem
        pass


def start_method() -> str:
    """"fork" on Linux when this process runs one Python thread, else "spawn" (macOS
    frameworks are not fork-safe; another thread may hold a lock the child would wait on).
    The output filter's thread (stderr_filter, which `solver-cli review` installs) holds no
    such lock and does not count: with it every CLI review used to spawn its workers."""
    from solver.optimize.backends.stderr_filter import forwarding_thread

    safe = (threading.main_thread(), forwarding_thread())
    others = [t for t in threading.enumerate() if t not in safe]
    if sys.platform.startswith("linux") and not others:
        return "fork"
    return "spawn"


class LocalBackend:
    name = "local"

    def __init__(self, workers: int):
        self.workers = max(1, workers)

    def run(self, base: BaseCase, tasks: list[Task], cancel: threading.Event | None = None) -> Iterator[ScenarioResult]:
        if not tasks:
            return
        method = start_method()
        if method == "fork":  # once, here: every forked worker inherits it
            warm_up()
            prewarm(base, tasks[0].time_limit_s, cancel)
        pool = ProcessPoolExecutor(max_workers=min(self.workers, len(tasks)),
                                   mp_context=multiprocessing.get_context(method),
                                   initializer=_init_worker, initargs=(base, os.getpid()))
        # Finished futures arrive on a queue (one callback each): waiting on every pending
        # future at once would register with each of them per result, quadratic in scenarios.
        finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
        pending: dict[Future, Task] = {}
        for t in tasks:
            future = pool.submit(_solve_in_worker, t)
            pending[future] = t
            future.add_done_callback(finished.put)
        try:
            while pending:
                if cancel is not None and cancel.is_set():
                    return
                try:
                    future = finished.get(timeout=POLL_S)
                except queue.Empty:
                    continue
                if cancel is not None and cancel.is_set():
                    return
                task = pending.pop(future)
                try:
                    yield future.result()
                except BrokenProcessPool as exc:
                    yield failed_result(task, f"the worker process died ({exc}); a rerun retries this scenario")
                except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be unpickled
                    yield failed_result(task, f"{exc.__class__.__name__}: {exc}")
        finally:
            if pending:  # cancelled or abandoned by the caller: drop queued work, stop running work
                _terminate(pool)
            pool.shutdown(wait=True, cancel_futures=True)


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Kill the workers now rather than letting running solves finish unseen."""
    terminate = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if terminate is not None:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()
