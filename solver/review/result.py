"""One scenario's outcome as plain data; also the per-scenario JSON file's content."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from solver.output.result import HOURS_PER_MONTH

# "optimal"/"feasible": a plan; "infeasible": no fleet fits (reasons say why); "timeout": no
# plan within the scenario's time limit; "invalid": the changes make the workload invalid;
# "error": anything unexpected (a rerun retries these).
STATUSES = ("optimal", "feasible", "infeasible", "timeout", "invalid", "error")
PLANNED = ("optimal", "feasible")


@dataclass
class ScenarioResult:
    id: str
    name: str
    group: str
    status: str
    fingerprint: str = ""
    sweep: str | None = None
    parameter: str | None = None
    value: float | None = None
    relaxes: str | None = None
    service: str | None = None
    changes: list[dict] = field(default_factory=list)
    description: str = ""
    usd_per_hour: float | None = None
    gpus: int | None = None
    gpus_by_type: dict[str, int] = field(default_factory=dict)
    optimality_gap: float | None = None
    solve_time_s: float | None = None
    wall_s: float = 0.0
    fleet: list[dict] = field(default_factory=list)  # offer_id, gpu, gpus_per_instance, instances, $/h
    latency_ms: dict[str, dict[str, float | None]] = field(default_factory=dict)  # service -> worst predicted ttft/tpot/latency
    slo_ms: dict[str, dict[str, float | None]] = field(default_factory=dict)  # service -> its SLO bounds
    reasons: list[dict] = field(default_factory=list)  # constraint, message, fix, service
    error: str = ""
    plan: dict | None = None  # the full plan JSON (PlanResult.to_dict()) when there is one
    horizon_cost_usd: float | None = None  # multi-period plans: usd_per_hour is then the horizon's average
    reserved_gpus: int | None = None  # multi-period plans: GPUs reserved for the horizon
    resumed: bool = False  # read back from a previous run rather than solved now

    @property
    def usd_per_month(self) -> float | None:
        return None if self.usd_per_hour is None else round(self.usd_per_hour * HOURS_PER_MONTH, 4)

    @property
    def planned(self) -> bool:
        return self.status in PLANNED

    def to_dict(self, with_plan: bool = True) -> dict:
        """The JSON-ready fields. Shallow: the lists and dicts inside are the result's own
        (plain JSON data already), not copies - a deep copy of the plan (dataclasses.asdict)
        cost more than solving's bookkeeping; callers add keys, they never edit nested values."""
        d = {name: getattr(self, name) for name in _SAVED}
        d["usd_per_month"] = self.usd_per_month
        if not with_plan:
            d.pop("plan")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ScenarioResult":
        """A result read back from its JSON file; ValueError when the file holds anything
        but a result (null, a list, wrong types): the report must never meet such a value."""
        if not isinstance(d, dict):
            raise ValueError(f"a stored result is an object, not {'null' if d is None else type(d).__name__}")
        names = {f.name for f in fields(cls)}
        kept = {k: v for k, v in d.items() if k in names}
        for key, value in kept.items():
            allowed = _FIELD_TYPES[key]
            if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
                raise ValueError(f"field {key!r} of a stored result has the wrong type ({type(value).__name__})")
        if kept.get("status") not in STATUSES:
            raise ValueError(f"a stored result's status {kept.get('status')!r} is not one of {', '.join(STATUSES)}")
        return cls(**kept)


_SAVED = tuple(f.name for f in fields(ScenarioResult) if f.name != "resumed")
_NUMBER = (int, float)
_OPTIONAL_NUMBER = (int, float, type(None))
_OPTIONAL_TEXT = (str, type(None))
# What each field of a stored result may hold (JSON types); checked when reading one back.
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,), "name": (str,), "group": (str,), "status": (str,), "fingerprint": (str,),
    "sweep": _OPTIONAL_TEXT, "parameter": _OPTIONAL_TEXT, "value": _OPTIONAL_NUMBER, "relaxes": _OPTIONAL_TEXT,
    "service": _OPTIONAL_TEXT, "changes": (list,), "description": (str,), "usd_per_hour": _OPTIONAL_NUMBER,
    "gpus": (int, type(None)), "gpus_by_type": (dict,), "optimality_gap": _OPTIONAL_NUMBER,
    "solve_time_s": _OPTIONAL_NUMBER, "wall_s": _NUMBER, "fleet": (list,), "latency_ms": (dict,), "slo_ms": (dict,),
    "reasons": (list,), "error": (str,), "plan": (dict, type(None)), "horizon_cost_usd": _OPTIONAL_NUMBER,
    "reserved_gpus": (int, type(None)), "resumed": (bool,),
}
