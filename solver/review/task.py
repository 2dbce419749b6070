"""A unit of work for a backend: one scenario, its time limit and its fingerprint."""

from __future__ import annotations

from dataclasses import dataclass

from solver.review.expand import Scenario
from solver.review.result import ScenarioResult


@dataclass(frozen=True)
class Task:
    scenario: Scenario
    time_limit_s: float
    fingerprint: str


def failed_result(task: Task, message: str) -> ScenarioResult:
    """A scenario whose worker failed outside solve_scenario (crash, lost node)."""
    s = task.scenario
    return ScenarioResult(s.id, s.name, s.group, "error", task.fingerprint, s.sweep, s.parameter, s.value, s.relaxes,
                          s.service, s.changes_json(), s.description, error=message)
