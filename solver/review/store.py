"""Resumable result store: one JSON file per scenario, written as each one finishes.

DIR/scenarios/<scenario id>.json holds the scenario's result and the fingerprint of
what was solved (base workload, catalog and the scenario's changes). A rerun reuses a
stored result when its fingerprint still matches, so an interrupted review resumes and
an edited one re-solves only what changed. Results with status "error" (an unexpected
failure) are not reused: a rerun tries them again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from solver.review.atomic import write_atomic
from solver.review.result import ScenarioResult

RETRIED_STATUSES = ("error",)
log = logging.getLogger(__name__)


class ResultStore:
    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir) / "scenarios"

    def path(self, scenario_id: str) -> Path:
        return self.dir / f"{scenario_id}.json"

    def load(self, scenario_id: str, fingerprint: str) -> ScenarioResult | None:
        """The stored result if it is for the same inputs and finished; otherwise None.

        A file that is there but holds no usable result (half-written by a killed run,
        edited by hand, `null`, a list, from an older format) is treated as missing, with
        a warning: the scenario is solved again and the file replaced."""
        path = self.path(scenario_id)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            return _unusable(path, f"it cannot be read ({exc.__class__.__name__})")
        try:
            result = ScenarioResult.from_dict(json.loads(text))
        except (ValueError, TypeError, RecursionError) as exc:
            return _unusable(path, str(exc) if not isinstance(exc, json.JSONDecodeError) else "it is not whole JSON")
        if result.id != scenario_id:
            return _unusable(path, f"it holds the result of scenario {result.id!r}")
        if result.fingerprint != fingerprint or result.status in RETRIED_STATUSES:
            return None
        result.resumed = True
        return result

    def save(self, result: ScenarioResult) -> Path:
        """Atomically, so a run killed mid-write never leaves a truncated result."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return write_atomic(self.path(result.id), result_json(result))


def result_json(result: ScenarioResult) -> str:
    """The result as JSON, one field per line. Each value is encoded compactly, by json's C
    encoder: an indented dump goes through its pure-Python encoder, about 5 ms a plan, in the
    process that collects every worker's results."""
    fields = ",\n ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in result.to_dict().items())
    return "{\n " + fields + "\n}"


def _unusable(path: Path, why: str) -> None:
    log.warning("warning: %s is not a usable stored result (%s); solving that scenario again", path, why)
    return None
