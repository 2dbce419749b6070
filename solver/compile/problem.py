"""The compiled planning problem: the workload resolved once, in solver-neutral form.

`solver.compile.compiled.compile_problem` turns a validated workload and a catalog into a
`Problem`: per service its demand per request class, token lengths, model architecture,
precisions, engine, SLOs, measured profiles and replica limits (`ServiceDemand`); the
allowed offers priced for the chosen tier; quotas, limits and the budget. Candidate
configurations (`Config`) are added by `solver.compile.candidates`. Every later stage —
pruning, the MIP, the tie-break, explanations, rendering — reads this and never the raw
workload again; caches and re-solves key on it. The independent evaluator is the one
exception: it re-derives everything from the raw workload on purpose.
No pydantic, no OR-Tools here.
"""

from __future__ import annotations

from dataclasses import field, replace

from solver.catalog.types import Offer
from solver.dataclass_repr import dataclass
from solver.models.library import ModelArch


@dataclass(frozen=True)
class ClassPerf:
    """A configuration's performance for one request class (or the only class)."""

    throughput: float  # per replica, in the service's demand unit; 0 = cannot serve this class
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    latency_ms: float | None = None
    batch: int | None = None
    binding_limit: str = ""
    reason: str = ""  # why this class cannot be served here (SLO miss), if throughput == 0


class _computed_once:
    """A property computed on first read and kept in the instance's __dict__ (which then
    answers every later read): functools.cached_property without its per-read lock and
    checks, for a frozen dataclass read on hot paths."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


@dataclass(frozen=True)
class Config:
    """One way to run one replica of a service: offer x GPUs per replica x precision."""

    service: str
    offer_id: str
    gpus_per_replica: int
    precision: str | None
    source: str  # "measured" | "estimate"
    classes: tuple[ClassPerf, ...]
    memory_gib_per_gpu: float | None = None
    error_band: float = 0.0
    instances_per_replica: int = 1  # > 1: the replica spans instances over the inter-node fabric
    # Percentile SLOs: set while the throughput is only an upper bound on the rate the
    # queueing model allows (solver/compile/lazy_caps.py); the exact cap is computed only
    # for configurations a plan uses. Never dominates another in pruning while set.
    pending_cap: tuple | None = field(default=None, compare=False)

    @_computed_once  # read millions of times by pruning and model building
    def key(self) -> str:
        span = f"x{self.instances_per_replica}inst" if self.instances_per_replica > 1 else ""
        return f"{self.service}@{self.offer_id}:{self.gpus_per_replica}gpu{span}:{self.precision or 'measured'}"

    @_computed_once  # part of the grouping key of every model build
    def throughputs(self) -> tuple[float, ...]:
        """Per-class throughput."""
        return tuple(k.throughput for k in self.classes)

    @_computed_once  # the grouping key of every model build (solver/optimize/formulation.py)
    def replica_kind(self) -> tuple:
        """What makes replicas interchangeable across offers: service, GPUs per replica,
        span, precision, source and per-class throughputs."""
        return (self.service, self.gpus_per_replica, self.instances_per_replica, self.precision, self.source,
                self.throughputs)

    @property
    def throughput(self) -> float:
        """Single-class throughput (the first class)."""
        return self.classes[0].throughput


@dataclass(frozen=True)
class Rejection:
    """A configuration that was dropped, kept so explanations can say why."""

    service: str
    offer_id: str
    gpu: str
    gpus_per_replica: int
    precision: str | None
    kind: str  # "vram" | "ttft" | "tpot" | "latency" | "unsupported" | "no_profile" | "precision" | "profile_size"
    reason: str


@dataclass(frozen=True)
class Slo:
    """A service's latency bounds, in milliseconds (None: no bound), and the percentile of
    requests they hold at under load (None: bounds on service times without queueing)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    latency_ms: float | None = None
    percentile: int | None = None
    # With a percentile: the confidence the caps are sized for (solver/confidence.py);
    # None sizes nominally (confidence "nominal", or no percentile).
    confidence: float | None = None

    def bounds(self) -> tuple[tuple[str, float], ...]:
        """The stated bounds as (field name, ms), in a fixed order."""
        return tuple((name, v) for name, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms),
                                               ("latency_ms", self.latency_ms)) if v is not None)


@dataclass(frozen=True)
class ClassTokens:
    """Token lengths of one request class (0 for services without an LLM model)."""

    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class Profile:
    """A measured per-replica throughput (in the service's demand unit) and latency."""

    gpu: str
    gpus_per_replica: int
    precision: str | None
    offer: str | None
    request_class: str | None
    rate: float
    latency_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    memory_gib_per_gpu: float | None = None


@dataclass(frozen=True)
class Period:
    """One stretch of the planning horizon (e.g. "peak", 8 hours)."""

    name: str
    hours: float


@dataclass(frozen=True)
class RunningReplicas:
    """Replicas of one service that running instances host today."""

    service: str
    count: int
    gpus_per_replica: int
    precision: str | None = None


@dataclass(frozen=True)
class RunningInstances:
    """Instances of one offer that run today: the fleet a re-plan starts from."""

    offer_id: str
    instances: int
    spot: bool = False
    replicas: tuple[RunningReplicas, ...] = ()


@dataclass(frozen=True)
class HorizonTerms:
    """Everything a multi-period plan adds to the single-hour problem: the pricing tiers
    it may buy from, the spot policy, budgets over the horizon, reservation bounds, and
    the running fleet with the cost of changing it."""

    tiers: tuple[str, ...] = ("on_demand",)  # in solver.workload.schema.PRICING_TIERS order
    max_spot_share: float | None = None
    spot_min_regions: int | None = None
    budget_usd_per_day: float | None = None
    budget_usd_per_month: float | None = None
    reserved_gpus_min: int | None = None
    reserved_gpus_max: int | None = None
    current_fleet: tuple[RunningInstances, ...] | None = None
    add_instance_usd: float = 0.0
    remove_instance_usd: float = 0.0
    max_changed_instances: int | None = None


@dataclass(frozen=True)
class ServiceDemand:
    """One service, compiled: demand per class plus everything that decides performance."""

    name: str
    unit: str  # "requests/s" | "items/min"
    class_names: tuple[str, ...]
    class_demand: tuple[float, ...]  # demand x share x (1 + headroom), per class
    raw_demand: float  # demand before headroom, all classes
    min_replicas: int = 0
    max_replicas: int | None = None
    class_tokens: tuple[ClassTokens, ...] = ()  # per class
    model: ModelArch | None = None  # None: measured profiles only
    model_label: str = ""  # the model as the user named it, for messages
    precisions: tuple[str, ...] = ("fp16",)
    engine: str = "vllm"
    slo: Slo = Slo()
    profiles: tuple[Profile, ...] = ()
    size_with_error_band: bool = False
    kv_cache_dtype: str | None = None  # engine_options.kv_cache_dtype; None = "auto"
    max_batch: int | None = None  # engine_options.max_batch; None: the engine's default
    kv_cache_memory_fraction: float | None = None  # engine_options.kv_cache_memory_fraction; None: the engine's
    max_num_batched_tokens: int | None = None  # engine_options.max_num_batched_tokens; None: the engine's
    scheduler: str | None = None  # engine_options.scheduler; None: the engine's
    kv_admission: str | None = None  # engine_options.kv_admission; None: the engine's
    multi_step: int | None = None  # engine_options.multi_step; None: 1
    class_shares: tuple[float, ...] = (1.0,)  # of the service's requests, per class (the mix a replica serves)
    arrival_cv: float = 1.0  # of inter-arrival times (1: Poisson)
    period_multipliers: tuple[float, ...] = ()  # one per Problem.periods entry (1.0 where unnamed)
    serving: str = "aggregated"  # "aggregated" | "disaggregated" | "auto" (solver/compile/disagg.py)
    prefill_gpu_types: tuple[str, ...] | None = None  # disaggregation limits; None: any
    decode_gpu_types: tuple[str, ...] | None = None
    # A pool of a disaggregated deployment is a service of its own (solver/compile/disagg.py):
    # its configurations are workers, and its demand row takes the rate its parent routes to
    # the link it sits on (class_demand is then only an upper bound, for replica bounds).
    # Failure domains (solver/optimize/redundancy.py): after losing any one domain of this kind
    # the surviving replicas serve redundancy_demand (serve_fraction x the demand without
    # headroom, per class). "" : none.
    redundancy_domain: str = ""  # "instance" | "zone" | "region" | "provider"
    redundancy_demand: tuple[float, ...] = ()
    redundancy_fraction: float = 0.0  # serve_fraction
    # Reclaimed spot capacity (solver/optimize/spot_cover.py): after losing every spot
    # replica of any one offer the rest serve spot_cover_demand (serve_fraction x the demand
    # without headroom, per class). (): no cover.
    spot_cover_demand: tuple[float, ...] = ()
    spot_cover_fraction: float = 0.0  # serve_fraction
    role: str = ""  # "prefill" | "decode"; "" for a service the workload names
    feeds: str = ""  # the parent service's name
    link: str = ""  # the link tier the pool's workers meet (one per provider, region, fabric and speed)
    link_gbit_s: float = 0.0  # that tier's speed per worker, gigabits per second

    @property
    def total_demand(self) -> float:
        return sum(self.class_demand)

    def in_period(self, index: int) -> "ServiceDemand":
        """This service with its demand scaled to period `index` (performance is unchanged)."""
        m = self.period_multipliers[index] if self.period_multipliers else 1.0
        return replace(self, class_demand=tuple(d * m for d in self.class_demand), raw_demand=self.raw_demand * m,
                       redundancy_demand=tuple(d * m for d in self.redundancy_demand),
                       spot_cover_demand=tuple(d * m for d in self.spot_cover_demand))

    def performance_key(self) -> tuple:
        """Everything but the name and demand levels that decides a configuration's
        per-replica performance: services (or scenarios) equal in it share candidates."""
        # The class mix and arrival variability matter only under a percentile SLO (queueing).
        queueing = (self.class_shares, self.arrival_cv) if self.slo.percentile is not None else ()
        return (self.unit, self.class_names, self.class_tokens, self.model, self.precisions, self.engine,
                self.slo, self.profiles, self.size_with_error_band, self.kv_cache_dtype, self.max_batch,
                self.kv_cache_memory_fraction, self.max_num_batched_tokens, self.scheduler, self.kv_admission,
                self.multi_step, queueing)

    @property
    def mixed_routing(self) -> bool:
        """Several classes under a percentile SLO: every replica serves the service's mix, so
        the percentile a replica is capped for is the one its traffic has (exact; and the
        service's percentile holds when every replica's does)."""
        return self.slo.percentile is not None and len(self.class_demand) > 1 and self.model is not None


@dataclass(frozen=True)
class Problem:
    """What the optimizer solves: the services' demands, the offers, the candidate configurations and the
    constraints."""

    services: tuple[ServiceDemand, ...]
    offers: tuple[Offer, ...]  # filtered, priced for the chosen tier
    configs: tuple[Config, ...]
    rejections: tuple[Rejection, ...] = ()
    dominated: tuple[Config, ...] = ()  # pruned as dominated: never in a plan, but explanations quote them
    gpu_quotas: dict[str, int] = field(default_factory=dict)  # GPU type -> GPUs
    offer_limits: dict[str, int] = field(default_factory=dict)  # offer id -> instances
    budget_usd_per_hour: float | None = None
    same_region: str | None = None  # "service" | "fleet": replicas of each service / all in one region
    headroom: float = 0.0
    relative_gap: float = 0.0  # solver.relative_gap: stop at the first plan proven within it
    filtered_out: tuple[tuple[str, str], ...] = ()  # (offer id, why the constraints removed it)
    name: str = "workload"
    pricing: str = "on_demand"
    calibration: object = None  # solver.perf.Calibration (kept untyped: no perf import here)
    periods: tuple[Period, ...] = ()  # empty: one static hour, as before periods existed
    horizon: HorizonTerms | None = None  # None: today's single-period problem
    # Simulation in the loop (solver/compile/verified_caps.py): per configuration key, the
    # highest per-replica rate the simulator confirmed and the lowest it refuted, and the
    # cap a configuration had before the simulator first lowered it.
    verified: dict[str, tuple[float, float]] = field(default_factory=dict)
    first_caps: dict[str, float] = field(default_factory=dict)
    checks: dict = field(default_factory=dict)  # config key -> verified_caps.Check: the final plan's
    # Site power caps, kW per instance and the owned hardware's amortised cost
    # (solver/compile/power.py); None: no power figures at all.
    power: object = None

    def offer(self, offer_id: str) -> Offer:
        return self._offers_by_id[offer_id]

    @property
    def _offers_by_id(self) -> dict[str, Offer]:
        cache = self.__dict__.get("_offer_index")
        if cache is None:
            cache = {o.id: o for o in self.offers}
            object.__setattr__(self, "_offer_index", cache)
        return cache

    @_computed_once  # read by every round of the planner's loop over percentile caps
    def pending_config_keys(self) -> frozenset[str]:
        """Keys of the configurations whose cap is still an upper bound (lazy_caps.py)."""
        return frozenset(c.key for c in self.configs if c.pending_cap is not None)

    @property
    def redundancy_by_location(self) -> bool:
        """Some service must survive losing a zone, region or provider: offers in different
        places are then never interchangeable (pruning keeps one per place)."""
        return any(s.redundancy_domain in ("zone", "region", "provider") for s in self.services)

    def spot_pools(self) -> set[str]:
        """Offers whose spot instances are a pool some service must outlive
        (constraints.spot_interruptions; solver/optimize/spot_cover.py): pruning never
        swaps them for another offer. Empty without cover or without spot."""
        if self.horizon is None or "spot" not in self.horizon.tiers \
                or not any(sum(s.spot_cover_demand) > 0 for s in self.services):
            return set()
        return {o.id for o in self.offers if o.spot_price_usd_per_hour is not None}

    def service(self, name: str) -> ServiceDemand:
        cache = self.__dict__.get("_service_index")
        if cache is None:
            cache = {s.name: s for s in self.services}
            object.__setattr__(self, "_service_index", cache)
        return cache[name]
