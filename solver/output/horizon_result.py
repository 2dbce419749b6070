"""The multi-period part of the planner's answer (PlanResult.horizon): periods, pricing
tiers, reservations, savings, and the changes and rollout from a running fleet. Apart from
solver/output/result.py so that a one-period plan never creates these classes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TierFleetLine:
    """Instances of one offer in one pricing tier, in one period of a multi-period plan."""

    offer_id: str
    provider: str
    name: str
    region: str
    gpu: str
    gpus_per_instance: int
    instances: int
    tier: str  # "on_demand" | "spot" | "reserved_1y" | "reserved_3y"
    price_usd_per_hour: float  # per instance, in this tier
    subtotal_usd_per_hour: float


@dataclass
class PeriodAssignment:
    config: str
    offer_id: str
    spot: bool
    replicas: int


@dataclass
class PeriodService:
    name: str
    unit: str
    demand: float  # in this period, before headroom
    demand_with_headroom: float
    capacity: list[float]  # per request class
    firm_capacity: list[float]  # per class, on on-demand and reserved instances (spot left out)
    replicas: int
    assignments: list[PeriodAssignment]


@dataclass
class UnusedReservation:
    offer_id: str
    instances: int  # reserved, paid, and idle in this period


@dataclass
class PeriodResult:
    name: str
    hours: float
    fleet: list[TierFleetLine]
    total_price_usd_per_hour: float  # every reservation (used or not) + on-demand + spot
    gpus: int  # running
    services: list[PeriodService]
    evaluation: dict  # the independent evaluator's verdict on this period: {ok, violations, cost_usd_per_hour}
    unused_reservations: list[UnusedReservation] = field(default_factory=list)
    expected_spot_interruptions_per_hour: float | None = None  # where the catalog knows the rates


@dataclass
class Reservation:
    offer_id: str
    instances: int
    term: str  # "reserved_1y" | "reserved_3y"
    price_usd_per_hour: float  # per instance, effective
    gpus: int


@dataclass
class Savings:
    baseline: str  # what the plan is compared with
    baseline_usd_per_hour: float
    baseline_usd: float  # over the horizon
    baseline_status: str
    savings_usd: float
    savings_fraction: float


@dataclass
class Change:
    offer_id: str
    action: str  # "add" | "remove" | "keep"
    instances: int
    spot: bool


@dataclass
class RolloutStep:
    step: int
    action: str  # "launch" | "start" | "stop" | "terminate"
    offer_id: str
    spot: bool
    instance: str  # "aws/g6.xlarge#2" (running), "aws/g6.xlarge+1" (launched), "...+surge1" (temporary)
    service: str | None = None  # start and stop: the replica's service
    config: str | None = None
    gpus: int | None = None
    temporary: bool = False  # a surge instance or its replica copy


@dataclass
class Rollout:
    steps: list[RolloutStep]
    surge_instances: int  # temporary instances launched to break a wait cycle
    note: str = ""


@dataclass
class Replan:
    changes: list[Change]
    rollout: Rollout


@dataclass
class HorizonSolverInfo:
    status: str
    horizon_cost_usd: float
    bound_usd: float
    gap: float
    method: str
    distinct_periods: int
    nodes: int
    period_solves: int
    change_cost_usd: float
    detail: str = ""


@dataclass
class HorizonResult:
    """What a multi-period plan adds to the JSON (top-level keys)."""

    periods: list[PeriodResult]
    reservations: list[Reservation]
    horizon_hours: float
    horizon_cost_usd: float
    average_price_usd_per_hour: float
    pricing_tiers: list[str]
    savings: Savings | None  # against the cheapest all-on-demand fleet sized for each service's peak
    replan: Replan | None  # with a running fleet: the changes and the rollout
    solver: HorizonSolverInfo
