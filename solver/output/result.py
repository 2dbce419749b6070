"""The planner's answer as plain data, and its JSON form (the CLI's and the API's)."""

from __future__ import annotations

from dataclasses import field, fields, is_dataclass

from solver.dataclass_repr import dataclass
from solver.errors import InfeasibilityReason

HOURS_PER_MONTH = 730.0  # 365 x 24 / 12, the cloud billing convention


@dataclass
class FleetLine:
    """Instances of one offer in the plan, and their price."""

    offer_id: str
    provider: str
    name: str
    region: str
    gpu: str
    gpus_per_instance: int
    instances: int
    price_usd_per_hour: float  # per instance
    subtotal_usd_per_hour: float
    vcpus: float | None = None  # the instance's host size, where the catalog states it
    host_memory_gib: float | None = None
    # Board power at full load (an upper bound; owned servers' host power included):
    # all these instances, and one of them. None: the GPU type has no board power.
    power_kw: float | None = None
    power_kw_per_instance: float | None = None


@dataclass
class SitePower:
    """An owned site in the plan: what its running owned servers draw against its cap."""

    site: str
    power_kw: float  # board power at full load of the owned servers running, host power included
    power_cap_kw: float | None  # None: no cap
    gpus_running: int
    gpus_owned: int  # at this site, of the offers the constraints allow


@dataclass
class SloCheck:
    """One latency bound of a service and the predicted time checked against it."""

    name: str  # "ttft_ms" | "tpot_ms" | "latency_ms"
    predicted_ms: float | None
    slo_ms: float


@dataclass
class LoadBand:
    """The values under load on a replica slower or faster than modelled, per metric:
    [low, high] ms, the replica slowed by the (1 - c) / 2 and (1 + c) / 2 quantiles of the
    calibrated slowdown (widened to contain the model's own value). None: no value for the
    metric; an end None: the replica cannot keep up there."""

    ttft_ms: list[float | None] | None = None
    tpot_ms: list[float | None] | None = None
    latency_ms: list[float | None] | None = None


@dataclass
class EngineSettings:
    """An engine's settings in effect for one configuration, by the workload's engine_options
    names (solver.perf.llm.engine_settings): what the export starts the engine with."""

    max_batch: int  # the engine's cap on concurrent sequences (the plan's batch is the assignment's)
    kv_cache_memory_fraction: float  # in the engine's own meaning
    kv_cache_dtype: str  # "fp16" | "bf16" | "fp8"
    max_num_batched_tokens: int
    scheduler: str  # "chunked_mixed" | "prefill_first"
    kv_admission: str  # "whole_sequence" | "paged_on_demand"
    multi_step: int  # decode steps per scheduling decision


@dataclass
class Verification:
    """Simulation in the loop (solver.verify): one configuration simulated at the rate the
    plan routes to one replica, with the confidence's margins (solver/compile/verified_caps.py)."""

    verdict: str  # "met" | "missed" | "inconclusive" | "not checked"
    rate_per_s: float  # per replica, the rate margin included: the rate simulated
    requests: int  # measured requests, all seeds together
    seeds: int  # independent replications
    percentile: int
    # The simulated percentile of each bounded metric (None: not bounded, or not simulated).
    ttft_ms_p: float | None = None
    tpot_ms_p: float | None = None
    latency_ms_p: float | None = None
    ci: LoadBand | None = None  # each bounded metric's 95 % interval, [low, high] ms
    reason: str = ""


@dataclass
class AtLoad:
    """What a plan promises for one assignment at the rate it routes to each replica, at the
    service's SLO percentile (99 where none is stated), queueing included. None: the
    replica cannot keep up at that rate."""

    percentile: int
    utilization: float  # the real demand's rate per replica (no headroom) / the most one replica sustains
    ttft_ms: float | None
    tpot_ms: float | None
    latency_ms: float | None
    meets_slo: bool  # the model as it is, at the planned rate
    # The bounds hold on the replica slowed by `slowdown`, at the planned rate x (1 + the
    # rate margin): the condition the caps were sized for (solver/confidence.py); the same
    # as meets_slo where the service sizes nominally ("nominal", or no percentile SLO).
    meets_slo_robust: bool
    confidence: float  # of the band: the service's slo.confidence (0.8 where it sizes nominally)
    slowdown: float  # the robust check's factor (1.0 where it sizes nominally, and for measured profiles)
    band: LoadBand | None


@dataclass
class AssignmentView:
    """Replicas of one service on one configuration, as the plan reports them."""

    config: str
    offer_id: str
    gpu: str
    gpus_per_replica: int
    instances_per_replica: int
    precision: str | None
    source: str  # "measured" | "estimate"
    replicas: int
    throughput_per_replica: list[float]  # per class
    routed: list[float]  # per class, as planned: the real demand x (1 + constraints.headroom)
    utilization: float  # the real demand routed / capacity (without the headroom: headroom_utilization)
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    latency_ms: float | None = None
    batch: int | None = None
    memory_gib_per_gpu: float | None = None
    binding_limit: str = ""
    error_band: float = 0.0
    slo_checks: list[SloCheck] = field(default_factory=list)
    # At the service's SLO percentile (99 where none is stated), at the planned rate per
    # replica, queueing included: {percentile, utilization, ttft_ms, tpot_ms, latency_ms,
    # meets_slo, meets_slo_robust, confidence, slowdown, band}.
    at_load: AtLoad | None = None
    # Services with a percentile SLO: the most one replica takes at the mix routed to it, in
    # the service's unit, as planned (at slo.confidence) and as the nominal model allows.
    cap_per_replica: float | None = None
    cap_per_replica_nominal: float | None = None
    # Simulation in the loop (solver.verify). None: not a percentile-capped replica.
    verified: Verification | None = None
    # The share of this configuration's capacity that constraints.headroom holds in reserve:
    # utilization (real demand routed / capacity) + this = the planned load / capacity.
    headroom_utilization: float | None = None  # None: no headroom
    # The engine's settings in effect for this configuration, by the workload's engine_options
    # names (the version's defaults and the service's options): what the export starts it with.
    # None: a measured-profile service.
    engine_options: EngineSettings | None = None


@dataclass
class Alternative:
    """A configuration the plan did not take for a service, and why (--explain)."""

    config: str
    gpu: str
    gpus_per_replica: int
    precision: str | None
    # "dearer" | "tie" (as cheap) | "cheaper" (the plan is not proven optimal) | "not_priced"
    # | "infeasible" (a re-solve proved no fleet) | a move's refusal: "max_replicas", "availability",
    # "quota", "budget", "power", "same_region", "unserved" | "vram" | "ttft" | "tpot" | "latency"
    # | "precision" | ...
    verdict: str
    reason: str
    delta_usd_per_hour: float | None = None
    exact: bool = False  # True: from a re-solve with the service forced onto this configuration
    offer_id: str = ""  # the offer the alternative runs on ("" when it names no offer)
    gpus_per_instance: int = 0  # that offer's instance size
    basis: str = ""  # "re-solve": cheapest whole fleet with it | "move": only this service moved


@dataclass
class ConfidenceView:
    """What a percentile service's caps were sized for (solver/confidence.py)."""

    level: float | str  # slo.confidence: a number, or "nominal"
    slowdown: float  # the replica's factor at that level (1.0 at "nominal")
    rate_margin: float  # the extra traffic every cap holds at (0 at "nominal")


@dataclass
class ServingChoice:
    """Why aggregated or disaggregated serving won (--explain): the workload re-solved with
    every `serving: auto` service forced each way, against this plan's price. None values:
    not computed or no such plan (see note)."""

    aggregated_only_usd_per_hour: float | None
    disaggregated_only_usd_per_hour: float | None
    note: str = ""


@dataclass
class PoolSimulation:
    """The simulator's replay of one disaggregated deployment at the rate the plan routes to
    it (solver/sim/disagg.py), reported on both of its pools."""

    rate_rps: float
    verdict: str  # "met" | "missed" | "inconclusive" (the 95 % interval straddles a bound) | "not checked"
    requests: int = 0  # replayed, after warm-up, all seeds
    percentile: int = 99  # the service's SLO percentile (99 without one)
    ttft_ms: float | None = None  # at the percentile, all seeds pooled
    tpot_ms: float | None = None
    kv_transfer_ms: float = 0.0  # one request's KV cache over the deployment's link


@dataclass
class RedundancyView:
    """A service's failure domain and its worst single-domain loss in the plan
    (constraints.redundancy; solver/survival.py)."""

    domain: str  # "instance" | "zone" | "region" | "provider"; "spot_pool" for spot_interruptions
    serve_fraction: float  # required after the loss
    worst_domain: str  # the loss that leaves the least, e.g. "aws/us-east-1", "one instance of aws/p5.48xlarge"
    surviving_fraction: float  # of the demand (without headroom) served after that loss
    exact: bool = True  # False: instance loss bounded as the optimizer bounds it (too many packings to list)


@dataclass
class ServiceResult:
    """One service in the plan: demand, capacity, assignments, alternatives and warnings."""

    name: str
    unit: str
    demand: float
    demand_with_headroom: float
    capacity: float
    utilization: float
    classes: list[str]
    assignments: list[AssignmentView]
    alternatives: list[Alternative] = field(default_factory=list)
    model: str | None = None  # library model name or the inline model's name; None: measured profiles only
    engine: str | None = None  # serving engine the estimates assume (vllm, sglang, tensorrt-llm); None without a model
    warnings: list[str] = field(default_factory=list)  # e.g. bounds that p99 under load would miss
    confidence: ConfidenceView | None = None  # services with a percentile SLO
    # 1 - capacity at the plan's caps / capacity at the nominal caps, over the chosen
    # assignments: the share of capacity slo.confidence sets aside. None without a cap under load.
    capacity_margin: float | None = None
    # A pool of a disaggregated deployment (docs/disaggregation.md): "prefill" | "decode", the
    # service it serves, and the link tier its KV transfer runs over. None: a service of the workload.
    role: str | None = None
    serves: str | None = None
    link: str | None = None
    simulated: PoolSimulation | None = None  # pools: the simulator's replay of their deployment
    # The share of capacity constraints.headroom holds in reserve: (demand_with_headroom -
    # demand) / capacity. utilization is demand / capacity (the real demand, without it).
    headroom_utilization: float | None = None  # None: no headroom
    redundancy: RedundancyView | None = None  # services with a failure domain
    # constraints.spot_interruptions (multi-period plans: the first period's; each period's in
    # horizon.periods[].services): the reclaimed spot pool that leaves the least served.
    spot_interruptions: RedundancyView | None = None
    # Power (solver/output/power.py): the service's replicas' GPUs at full board power, kW;
    # LLM services: kWh per million output tokens at demand (before headroom).
    power_kw: float | None = None
    energy_kwh_per_million_tokens: float | None = None


@dataclass
class RedundancyCost:
    """What the failure domains cost (--explain): the same workload re-solved without
    constraints.redundancy. None values: not computed (see note)."""

    without_usd_per_hour: float | None
    extra_usd_per_hour: float | None  # this plan's price - the plan without failure domains
    note: str = ""


@dataclass
class ConfidenceCost:
    """What the services' slo.confidence costs (--explain): the same workload re-solved with
    every service at "nominal". None values: not computed (see note)."""

    nominal_price_usd_per_hour: float | None
    margin_usd_per_hour: float | None  # this plan's price - the nominal plan's
    note: str = ""


@dataclass
class SolverInfo:
    """How the plan was solved: backend, times, gap, bound and model size."""

    backend: str
    solve_time_s: float
    total_time_s: float
    gap: float | None
    bound_usd_per_hour: float | None
    model_size: dict[str, int]
    candidates: int
    rejected: int
    pruned_offers: int
    tie_break: str
    detail: str = ""
    timings: dict[str, float] = field(default_factory=dict)


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
    # constraints.spot_interruptions: the reclaimed spot pool that leaves the least served in
    # this period (domain "spot_pool"). None: no cover asked for this service.
    spot_interruptions: RedundancyView | None = None


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
    power_kw: float | None = None  # the period's running instances at full board power
    energy_kwh: float | None = None  # power_kw x the period's hours


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


@dataclass
class PlanResult:
    """The planner's answer for a workload (one period; a multi-period plan adds `horizon`)."""

    status: str  # "optimal" | "feasible" | "infeasible"
    workload: str
    total_price_usd_per_hour: float | None
    gpus: int
    fleet: list[FleetLine]
    services: list[ServiceResult]
    placements: list[dict]
    solver: SolverInfo | None
    infeasibility: list[InfeasibilityReason] = field(default_factory=list)
    evaluation: dict = field(default_factory=dict)
    catalog: str = ""
    pricing: str = "on_demand"
    horizon: HorizonResult | None = None  # multi-period plans: the first period is the plan above
    confidence_cost: ConfidenceCost | None = None  # --explain, where a service sizes at a confidence
    serving_choice: ServingChoice | None = None  # --explain, where a service has serving: auto
    redundancy_cost: RedundancyCost | None = None  # --explain, where a service has a failure domain
    spot_cover_cost: RedundancyCost | None = None  # --explain, where a service has spot cover (per horizon hour)
    # Power and energy (solver/output/power.py): the fleet's (first period's) kW at full board
    # power; kWh over the plan's horizon (one hour for a single-hour plan); owned hardware's
    # amortised cost, paid whether used or not and not in total_price_usd_per_hour; owned sites.
    power_kw: float | None = None
    energy_kwh: float | None = None
    owned_amortised_usd_per_hour: float | None = None
    sites: list[SitePower] = field(default_factory=list)

    @property
    def monthly_usd(self) -> float | None:
        return None if self.total_price_usd_per_hour is None else self.total_price_usd_per_hour * HOURS_PER_MONTH

    @property
    def price_usd_per_minute(self) -> float | None:
        return None if self.total_price_usd_per_hour is None else self.total_price_usd_per_hour / 60.0

    def to_dict(self) -> dict:
        d = plain(self)
        d["monthly_usd"] = _round(self.monthly_usd)
        d["total_price_usd_per_minute"] = _round(self.price_usd_per_minute, 8)
        d["total_price_usd_per_hour"] = _round(self.total_price_usd_per_hour)
        d["infeasibility"] = [plain(r) for r in self.infeasibility]
        if self.solver is not None:
            d["optimality_gap"] = self.solver.gap
            d["solve_time_s"] = round(self.solver.solve_time_s, 4)
        order = ["status", "workload", "total_price_usd_per_hour", "total_price_usd_per_minute", "monthly_usd",
                 "gpus", "optimality_gap", "solve_time_s", "pricing", "catalog", "fleet", "services", "placements",
                 "infeasibility", "evaluation", "solver", "confidence_cost", "serving_choice",
                 "redundancy_cost", "spot_cover_cost"]  # proto declaration order (70, 71: declared here)
        out = {k: d[k] for k in order if k in d}
        if self.horizon is not None:
            h = d["horizon"]
            # Proto field order (Plan 40-49): the wire keeps the same keys in the same order.
            out.update({"periods": h["periods"], "reservations": h["reservations"],
                        "horizon_hours": h["horizon_hours"], "horizon_cost_usd": h["horizon_cost_usd"],
                        "average_price_usd_per_hour": h["average_price_usd_per_hour"],
                        "pricing_tiers": h["pricing_tiers"], "savings": h["savings"]})
            if h["replan"] is not None:
                out["changes"] = h["replan"]["changes"]
                out["rollout"] = h["replan"]["rollout"]
            out["horizon_solver"] = h["solver"]
        for key in POWER_KEYS:  # proto Plan 60-63, after the horizon's 40-49
            out[key] = d[key]
        return out


POWER_KEYS = ("power_kw", "energy_kwh", "owned_amortised_usd_per_hour", "sites")


def plain(value):
    """Dataclasses, lists and dicts as plain JSON-ready data: what dataclasses.asdict does,
    several times faster (no deep copies of strings and numbers, which are immutable)."""
    t = type(value)
    if t in _LEAVES:
        return value
    names = _FIELD_NAMES.get(t)
    if names is None:
        # A dataclass instance's field names (a dataclass type itself is a value, not converted).
        names = _FIELD_NAMES[t] = tuple(f.name for f in fields(t)) if is_dataclass(t) else False
    if names is not False:
        return {name: plain(getattr(value, name)) for name in names}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


_LEAVES = frozenset((str, int, float, bool, type(None)))  # exactly these types: returned as they are
_FIELD_NAMES: dict[type, tuple[str, ...] | bool] = {}  # type -> its dataclass fields' names; False if none


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)
