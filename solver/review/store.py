"""Resumable result store: one JSON file per scenario, written as each one finishes.

DIR/scenarios/<scenario id>.json holds the scenario's result and the fingerprint of
what was solved (base workload, catalog and the scenario's changes). A rerun reuses a
stored result when its fingerprint still matches, so an interrupted review resumes and
an edited one re-solves only what changed. Results with status "error" (an unexpected
failure) are not reused: a rerun tries them again.
"""

from __future__ import annotations

import json
from pathlib import Path

from solver.review.atomic import write_atomic
from solver.review.result import ScenarioResult

RETRIED_STATUSES = ("error",)


class ResultStore:
    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir) / "scenarios"

    def path(self, scenario_id: str) -> Path:
        return self.dir / f"{scenario_id}.json"

    def load(self, scenario_id: str, fingerprint: str) -> ScenarioResult | None:
        """The stored result if it is for the same inputs and finished; otherwise None."""
        try:
            data = json.loads(self.path(scenario_id).read_text())
            result = ScenarioResult.from_dict(data)
        except (OSError, ValueError, TypeError):
            return None  # missing, half-written by a killed run, or from an older format: solve again
        if result.fingerprint != fingerprint or result.status in RETRIED_STATUSES:
            return None
        result.resumed = True
        return result

    def save(self, result: ScenarioResult) -> Path:
        """Atomically, so a run killed mid-write never leaves a truncated result."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return write_atomic(self.path(result.id), json.dumps(result.to_dict(), indent=1))
