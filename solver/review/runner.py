"""Run a review: skip finished scenarios, solve the rest on a backend, store as they finish.

    for result in run_review(review, out_dir, workers=4, backend="local"):
        ...  # one ScenarioResult per scenario, in completion order

`run_review` is a generator: stored results that are still valid come first (with
`resumed=True`), then each newly solved scenario as soon as it finishes, already
written to DIR/scenarios/<id>.json. Stopping the iteration (or setting `cancel`) stops
the workers; what finished is kept, so the next run resumes. The report is written
separately (`solver.review.report.write_report`) from the full list of results.

Scenarios that solve exactly the same workload and catalog (`SolveKeys`) are solved once:
the others' results are copies, under their own names, yielded right after it.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from collections.abc import Iterator
from pathlib import Path

from solver.errors import InputError
from solver.review.changes import SolveKeys
from solver.review.execute import BaseCase
from solver.review.expand import Review
from solver.review.result import ScenarioResult
from solver.review.store import ResultStore
from solver.review.task import Task

BACKENDS = ("local", "ray")


def default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def make_backend(name: str, workers: int):
    if name == "local":
        from solver.review.local_backend import LocalBackend

        return LocalBackend(workers)
    if name == "ray":
        from solver.review.ray_backend import RayBackend

        return RayBackend(workers)
    raise InputError.single("backend", f"unknown backend {name!r}.", f"use one of {', '.join(BACKENDS)}")


def run_review(review: Review, out_dir: str | Path, *, workers: int | None = None, backend: str = "local",
               time_limit_per_scenario_s: float | None = None, cancel: threading.Event | None = None,
               fresh: bool = False) -> Iterator[ScenarioResult]:
    """Yield every scenario's result as it becomes available (see the module docstring).

    `fresh=True` ignores stored results and solves everything again.
    """
    if time_limit_per_scenario_s is not None and not time_limit_per_scenario_s > 0:
        raise InputError.single("time_limit_per_scenario_s", f"{time_limit_per_scenario_s} is not positive.",
                                "give a time limit in seconds above 0")
    if workers is not None and workers < 1:
        raise InputError.single("workers", f"{workers} workers is too few.", "use 1 or more")
    executor = make_backend(backend, workers or default_workers())
    time_limit = time_limit_per_scenario_s or review.spec.time_limit_per_scenario_s
    store = ResultStore(out_dir)
    todo: list[Task] = []
    for scenario in review.scenarios:
        fingerprint = review.fingerprint(scenario)
        stored = None if fresh else store.load(scenario.id, fingerprint)
        if stored is not None:
            # Labels may have been edited without changing what is solved: take today's.
            yield replace(stored, name=scenario.name, group=scenario.group, description=scenario.description,
                          sweep=scenario.sweep, parameter=scenario.parameter, value=scenario.value,
                          relaxes=scenario.relaxes, service=scenario.service)
        else:
            todo.append(Task(scenario, time_limit, fingerprint))
    base = BaseCase(review.workload, review.catalog)
    # Scenarios that solve the same thing (e.g. a sweep point at the base's value, a quota
    # set twice) are solved once; the others get a copy of the result under their own names.
    keys = SolveKeys(review.workload)
    first: dict[str, Task] = {}
    copies: dict[str, list[Task]] = {}
    unique: list[Task] = []
    for task in todo:
        key = keys.key(task.scenario.changes)
        if key is not None and key in first:
            copies[first[key].scenario.id].append(task)
        else:
            unique.append(task)
            copies[task.scenario.id] = []
            if key is not None:
                first[key] = task
    for result in executor.run(base, unique, cancel):
        store.save(result)
        yield result
        for task in copies.get(result.id, ()):
            if cancel is not None and cancel.is_set():
                return
            copy = copied_result(result, task)
            store.save(copy)
            yield copy


def copied_result(result: ScenarioResult, task: Task) -> ScenarioResult:
    """`result` (of a scenario that solves the same thing) under `task`'s scenario."""
    s = task.scenario
    return replace(result, id=s.id, name=s.name, group=s.group, fingerprint=task.fingerprint, sweep=s.sweep,
                   parameter=s.parameter, value=s.value, relaxes=s.relaxes, service=s.service,
                   changes=s.changes_json(), description=s.description)


def in_review_order(review: Review, results: list[ScenarioResult]) -> list[ScenarioResult]:
    by_id = {r.id: r for r in results}
    return [by_id[s.id] for s in review.scenarios if s.id in by_id]
