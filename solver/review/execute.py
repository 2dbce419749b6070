"""Solve one scenario: apply its changes, call `plan()`, record the outcome.

This is what every backend runs in its workers. It never raises for a scenario's own
failure: infeasible, timed-out, invalid or crashing scenarios become results with a
status and reasons, so the rest of the review goes on.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass

from solver.catalog.types import Catalog
from solver.errors import InfeasibleError, InputError, PlannerError, SolverTimeout
from solver.plan import PlanOptions, plan
from solver.review.changes import apply_changes
from solver.review.expand import Scenario
from solver.review.result import ScenarioResult
from solver.workload.schema import Workload


@dataclass(frozen=True)
class BaseCase:
    """What every scenario starts from; sent to each worker once."""

    workload: Workload
    catalog: Catalog


def solve_scenario(base: BaseCase, scenario: Scenario, time_limit_s: float, fingerprint: str = "") -> ScenarioResult:
    t0 = time.monotonic()
    result = ScenarioResult(scenario.id, scenario.name, scenario.group, "error", fingerprint, scenario.sweep,
                            scenario.parameter, scenario.value, scenario.relaxes, scenario.service,
                            scenario.changes_json(), scenario.description)
    try:
        workload, catalog = apply_changes(base.workload, base.catalog, scenario.changes)
        result.slo_ms = {s.name: s.slo.model_dump() for s in workload.services}
        # No cancel event: plan() bounds the MIP by the time limit itself (and a cancellable
        # SCIP solve logs a spurious error line per scenario). Stopping a review kills workers.
        planned = plan(workload, PlanOptions(time_limit_s=time_limit_s, catalog=catalog,  # the workers fill
                                             prefetch_at_load=False, race_backends=False))  # every core
        _record_plan(result, planned.to_dict())
    except InputError as exc:
        result.status = "invalid"
        result.reasons = [{"constraint": v.field, "message": v.message, "fix": v.fix, "service": None}
                          for v in exc.violations]
    except InfeasibleError as exc:
        result.status = "infeasible"
        result.reasons = [asdict(r) for r in exc.reasons]
    except SolverTimeout as exc:
        result.status = "timeout"
        result.error = str(exc)
    except PlannerError as exc:
        result.error = str(exc)
    except Exception as exc:  # noqa: BLE001 - one scenario's bug must not stop the review
        result.error = f"{exc.__class__.__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    result.wall_s = round(time.monotonic() - t0, 4)
    return result


def _record_plan(result: ScenarioResult, d: dict) -> None:
    result.status = d["status"]
    result.usd_per_hour = d["total_price_usd_per_hour"]
    if "horizon_cost_usd" in d:
        # Several periods: compare scenarios by what the whole horizon costs, per hour.
        result.usd_per_hour = d["average_price_usd_per_hour"]
        result.horizon_cost_usd = d["horizon_cost_usd"]
        result.reserved_gpus = sum(r["gpus"] for r in d["reservations"])
    result.gpus = d["gpus"]
    result.optimality_gap = d.get("optimality_gap")
    result.solve_time_s = d.get("solve_time_s")
    result.fleet = [{k: f[k] for k in ("offer_id", "gpu", "gpus_per_instance", "instances", "price_usd_per_hour",
                                        "subtotal_usd_per_hour")} for f in d["fleet"]]
    by_type: Counter[str] = Counter()
    for f in d["fleet"]:
        by_type[f["gpu"]] += f["gpus_per_instance"] * f["instances"]
    result.gpus_by_type = dict(sorted(by_type.items()))
    result.latency_ms = {s["name"]: _worst_latency(s["assignments"]) for s in d["services"]}
    result.plan = d


def _worst_latency(assignments: list[dict]) -> dict[str, float | None]:
    """The slowest predicted (or measured) latency over a service's replicas, per metric."""
    out: dict[str, float | None] = {}
    for metric in ("ttft_ms", "tpot_ms", "latency_ms"):
        values = [a[metric] for a in assignments if a.get(metric) is not None]
        out[metric] = round(max(values), 4) if values else None
    return out
