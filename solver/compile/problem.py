"""The planning problem in solver-neutral form: demands, offers, candidate configurations.

Built from a validated workload by `solver.compile.candidates.build_problem`; read by the
formulation, the evaluator and the explainer. No pydantic, no OR-Tools here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from solver.catalog.types import Offer


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

    @property
    def key(self) -> str:
        span = f"x{self.instances_per_replica}inst" if self.instances_per_replica > 1 else ""
        return f"{self.service}@{self.offer_id}:{self.gpus_per_replica}gpu{span}:{self.precision or 'measured'}"

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
    kind: str  # "vram" | "ttft" | "tpot" | "latency" | "unsupported" | "no_profile" | "precision" | "dominated"
    reason: str


@dataclass(frozen=True)
class ServiceDemand:
    name: str
    unit: str  # "requests/s" | "items/min"
    class_names: tuple[str, ...]
    class_demand: tuple[float, ...]  # demand x share x (1 + headroom), per class
    raw_demand: float  # demand before headroom, all classes
    min_replicas: int = 0
    max_replicas: int | None = None

    @property
    def total_demand(self) -> float:
        return sum(self.class_demand)


@dataclass(frozen=True)
class Problem:
    services: tuple[ServiceDemand, ...]
    offers: tuple[Offer, ...]  # filtered, priced for the chosen tier
    configs: tuple[Config, ...]
    rejections: tuple[Rejection, ...] = ()
    gpu_quotas: dict[str, int] = field(default_factory=dict)  # GPU type -> GPUs
    offer_limits: dict[str, int] = field(default_factory=dict)  # offer id -> instances
    budget_usd_per_hour: float | None = None
    headroom: float = 0.0
    filtered_out: tuple[tuple[str, str], ...] = ()  # (offer id, why the constraints removed it)

    def offer(self, offer_id: str) -> Offer:
        return self._offers_by_id[offer_id]

    @property
    def _offers_by_id(self) -> dict[str, Offer]:
        cache = self.__dict__.get("_offer_index")
        if cache is None:
            cache = {o.id: o for o in self.offers}
            object.__setattr__(self, "_offer_index", cache)
        return cache

    def service(self, name: str) -> ServiceDemand:
        return next(s for s in self.services if s.name == name)
