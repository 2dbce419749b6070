"""Ray backend: the same scenarios as Ray tasks, for reviews that outgrow one machine.

Optional: needs `pip install ray` (the `ray` extra). With RAY_ADDRESS set it joins that
cluster (whose nodes must have this package installed); otherwise it starts a local Ray
with `workers` CPUs and shuts it down afterwards. The base case is put in Ray's object
store once; Ray reuses worker processes, so each imports the solver once.
"""

from __future__ import annotations

import os
import time
import threading
from collections.abc import Iterator

from solver.errors import InputError
from solver.review.execute import BaseCase, solve_scenario
from solver.review.result import ScenarioResult
from solver.review.task import Task, failed_result

POLL_S = 0.25


def _solve_task(base: BaseCase, task: Task) -> ScenarioResult:
    return solve_scenario(base, task.scenario, task.time_limit_s, task.fingerprint)


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


# A local Ray start that times out (Ray 2.60 waits a fixed 30 s for its raylet, not
# configurable, and a busy machine can take longer - twice in a row seen once on the 2-core
# CI machine) is tried again, after a pause that lets the load settle, before the review
# gives up.
START_ATTEMPTS = 3
RETRY_PAUSE_S = 5.0


def _start_ray(workers: int) -> None:
    """Join RAY_ADDRESS's cluster, or start a local Ray with `workers` CPUs. A failed start
    leaves no processes behind (Ray's GCS and monitor would outlive the review) and ends in
    an error that names the backend and what to do."""
    import ray

    address = os.environ.get("RAY_ADDRESS")
    attempts = 1 if address else START_ATTEMPTS
    for attempt in range(1, attempts + 1):
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises bare Exception / RuntimeError on a failed start
            ray.shutdown()
            if attempt < attempts:
                time.sleep(RETRY_PAUSE_S)
            if attempt == attempts:
                where = f"the Ray cluster at RAY_ADDRESS={address}" if address else "a local Ray"
                raise InputError.single(
                    "backend", f"the ray backend could not start {where} ({attempts} attempt(s)): "
                    f"{exc.__class__.__name__}: {exc}",
                    "use --backend local, or start Ray yourself (ray start --head) and set RAY_ADDRESS") from exc


class RayBackend:
    name = "ray"

    def __init__(self, workers: int):
        if not ray_available():
            raise InputError.single("backend", "the ray backend needs the `ray` package, which is not installed.",
                                    "pip install 'gpu-fleet-planner[ray]', or use --backend local")
        self.workers = max(1, workers)

    def run(self, base: BaseCase, tasks: list[Task], cancel: threading.Event | None = None) -> Iterator[ScenarioResult]:
        if not tasks:
            return
        import ray

        started_here = not ray.is_initialized()
        if started_here:
            _start_ray(self.workers)
        pending: dict = {}
        try:
            remote = ray.remote(num_cpus=1, max_retries=0)(_solve_task)
            base_ref = ray.put(base)
            pending = {remote.remote(base_ref, t): t for t in tasks}
            while pending:
                if cancel is not None and cancel.is_set():
                    break
                # Every result ready within the poll, not one per call: one wait per result
                # over all pending refs was quadratic in the scenarios.
                done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=POLL_S)
                for ref in done:
                    if cancel is not None and cancel.is_set():
                        break
                    task = pending.pop(ref)
                    try:
                        yield ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - a lost worker or node fails one scenario
                        yield failed_result(task, f"{exc.__class__.__name__}: {exc}")
        finally:
            for ref in pending:  # cancelled or abandoned by the caller: stop the rest
                ray.cancel(ref, force=True)
            if started_here:
                ray.shutdown()
