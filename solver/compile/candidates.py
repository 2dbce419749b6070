"""Candidate configurations: offer x GPUs per replica x precision -> per-replica performance.

Measured profiles win; otherwise the LLM performance model estimates. Configurations
that do not fit or miss an SLO are dropped and kept as `Rejection`s for explanations;
configurations that can never be part of a unique cheapest plan are pruned (see
`solver.compile.pruning`).

A configuration's performance depends only on the service's performance key (model,
token lengths, SLOs, precisions, engine, profiles), the offer's hardware and the
calibration — never on demand, prices, quotas or the budget. So the candidates of one
(service, offer) pair are cached across calls (`CandidateCache`): review scenarios and
repeated scheduler calls that change only demand, prices or limits rebuild nothing.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from dataclasses import replace

from solver.catalog.types import Catalog, GpuType, Offer
from solver.compile.compiled import compile_problem
from solver.compile.problem import ClassPerf, Config, Problem, Profile, Rejection, ServiceDemand
from solver.compile.pruning import prune_configs, prune_offers, prune_whole_instance_configs
from solver.interrupt import NEVER, Stop
from solver.models.library import ModelArch
from solver.perf import Calibration, PerfQuery, estimate
from solver.workload.schema import Workload


def replica_sizes(gpus_per_instance: int) -> list[int]:
    """GPUs per replica: powers of two dividing the instance's GPU count.

    Powers of two make packing exact: replicas whose sizes are powers of two that each
    divide the instance size fit into n instances iff their GPUs sum to at most n x size.
    """
    sizes, g = [], 1
    while g <= gpus_per_instance:
        if gpus_per_instance % g == 0:
            sizes.append(g)
        g *= 2
    return sizes


def _slo_miss(svc: ServiceDemand, ttft: float | None, tpot: float | None, latency: float | None) -> str:
    slo = svc.slo
    checks = (("TTFT", slo.ttft_ms, ttft), ("TPOT", slo.tpot_ms, tpot), ("latency", slo.latency_ms, latency))
    for label, bound, value in checks:
        if bound is None:
            continue
        if value is None:
            return f"the measured profile gives no {label} to check the {label} SLO against"
        if value > bound + 1e-9:
            return f"misses the {label} SLO: {value:g} ms > {bound:g} ms"
    return ""


def _slo_kind(reason: str) -> str:
    """"misses the TPOT SLO: ..." -> "tpot" (the kinds explanations group by)."""
    words = reason.split(" ")
    if reason.startswith("misses the") and len(words) > 2 and words[2].lower() in ("ttft", "tpot", "latency"):
        return words[2].lower()
    return ""


@functools.lru_cache(maxsize=200_000)
def _cached_estimate(q: PerfQuery):
    return estimate(q)


class CandidateCache:
    """(service performance key, offer hardware, calibration) -> that pair's configurations
    and rejections. Bounded (least recently used out) and safe to share between threads."""

    def __init__(self, max_entries: int = 50_000):
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple, tuple[tuple[Config, ...], tuple[Rejection, ...]]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple):
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            else:
                self.misses += 1
            return found

    def put(self, key: tuple, value) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


SHARED_CACHE = CandidateCache()


def _offer_hardware(offer: Offer, gpu: GpuType, usable_gib: float) -> tuple:
    """What of an offer decides performance (not its price, availability or provenance)."""
    return (offer.id, gpu, offer.gpus_per_instance, usable_gib, offer.interconnect, offer.inter_node_fabric,
            offer.inter_node_gbs)


class CandidateBuilder:
    def __init__(self, catalog: Catalog, offers: list[Offer] | tuple[Offer, ...], calibration: Calibration,
                 cache: CandidateCache | None = None, stop: Stop = NEVER):
        self.stop = stop
        self.catalog = catalog
        self.offers = offers
        self.calibration = calibration
        self.cache = cache
        self.rejections: list[Rejection] = []

    def for_service(self, svc: ServiceDemand) -> list[Config]:
        configs: list[Config] = []
        perf_key = svc.performance_key()
        for offer in self.offers:
            self.stop.check("candidate configurations")  # one offer's estimates take a few ms
            gpu = self.catalog.gpus[offer.gpu]
            key = None
            found = None
            if self.cache is not None:
                key = (perf_key, _offer_hardware(offer, gpu, self.catalog.usable_memory_gib(offer)), self.calibration)
                found = self.cache.get(key)
            if found is None:
                found = _OfferCandidates(self, svc, offer, gpu).build()
                if key is not None:
                    self.cache.put(key, found)
            mine, rejected = found
            if mine and mine[0].service != svc.name:  # cached for another service with the same performance key
                mine = tuple(replace(c, service=svc.name) for c in mine)
            if rejected and rejected[0].service != svc.name:
                rejected = tuple(replace(r, service=svc.name) for r in rejected)
            configs.extend(mine)
            self.rejections.extend(rejected)
        return configs


class _OfferCandidates:
    """The configurations (and rejections) of one service on one offer."""

    def __init__(self, builder: CandidateBuilder, svc: ServiceDemand, offer: Offer, gpu: GpuType):
        self.b = builder
        self.svc = svc
        self.offer = offer
        self.gpu = gpu
        self.usable_gib = builder.catalog.usable_memory_gib(offer)
        self.rejections: list[Rejection] = []

    def build(self) -> tuple[tuple[Config, ...], tuple[Rejection, ...]]:
        svc, offer, model = self.svc, self.offer, self.svc.model
        configs: list[Config] = []
        for g in replica_sizes(offer.gpus_per_instance):
            configs.extend(self._measured(g))
            if model is not None and not self._has_profile(g):
                configs.extend(self._estimated(model, g, 1))
        if model is not None and offer.inter_node_fabric:
            configs.extend(self._spanning(model))
        return tuple(configs), tuple(self.rejections)

    def _has_profile(self, g: int) -> bool:
        return any(self._profile_matches(p, g) for p in self.svc.profiles)

    def _profile_matches(self, p: Profile, g: int) -> bool:
        return p.gpu == self.offer.gpu and p.gpus_per_replica == g and p.offer in (None, self.offer.id)

    def _measured(self, g: int) -> list[Config]:
        svc, offer = self.svc, self.offer
        out = []
        profiles = [p for p in svc.profiles if self._profile_matches(p, g)]
        for precision in sorted({p.precision for p in profiles}, key=lambda x: x or ""):
            perfs = []
            for cname in svc.class_names:
                match = [p for p in profiles if p.precision == precision and p.request_class in (cname, None)]
                match.sort(key=lambda p: p.request_class is None)  # class-specific first
                if not match:
                    perfs.append(ClassPerf(0.0, reason="no measured profile for this request class"))
                    continue
                p = match[0]
                miss = _slo_miss(svc, p.ttft_ms, p.tpot_ms, p.latency_ms)
                perfs.append(ClassPerf(0.0 if miss else p.rate, p.ttft_ms, p.tpot_ms, p.latency_ms, reason=miss,
                                       binding_limit="measured"))
            mem = max((p.memory_gib_per_gpu or 0 for p in profiles), default=0) or None
            if mem is not None and mem > self.usable_gib + 1e-9:
                self._reject(g, precision, "vram", f"measured {mem:g} GiB per GPU exceeds the {self.usable_gib:g} GiB of {offer.gpu}")
                continue
            if all(c.throughput <= 0 for c in perfs):
                reason = next((c.reason for c in perfs if c.reason), "no usable measurement")
                self._reject(g, precision, _slo_kind(reason) or "no_profile", reason)
                continue
            out.append(Config(svc.name, offer.id, g, precision, "measured", tuple(perfs), mem))
        if not profiles and svc.model is None and g == replica_sizes(offer.gpus_per_instance)[0]:
            self._reject(g, None, "no_profile",
                         f"no measured profile for {offer.gpu} and the service has no LLM model to estimate from")
        return out

    def _estimated(self, model: ModelArch, g: int, span: int) -> list[Config]:
        svc, offer, gpu = self.svc, self.offer, self.gpu
        out = []
        for precision in svc.precisions:
            if not gpu.supports(precision):
                self._reject(g * span, precision, "precision", f"{gpu.name} does not support {precision}")
                continue
            if not gpu.llm_estimates:
                self._reject(g * span, precision, "unsupported",
                             f"{gpu.name} has no calibrated LLM estimate; add a measured profile")
                continue
            if model.attention_heads % g:
                self._reject(g * span, precision, "unsupported",
                             f"{g}-way tensor parallelism does not divide {model.attention_heads} attention heads")
                continue
            perfs: list[ClassPerf] = []
            mem, band, fail = None, 0.0, None
            for tokens in svc.class_tokens:
                e = _cached_estimate(self._query(model, g * span, span, precision, tokens.prompt_tokens,
                                                 tokens.output_tokens))
                if not e.feasible and e.reason_kind in ("vram", "unsupported"):
                    fail = (e.reason_kind, e.reason)
                    break
                band = e.error_band
                if not e.feasible:
                    perfs.append(ClassPerf(0.0, e.ttft_ms, e.tpot_ms, e.latency_ms, e.batch, e.binding_limit, e.reason))
                    continue
                mem = max(mem or 0.0, e.memory_gib_per_gpu)
                if svc.size_with_error_band:
                    # Size for the pessimistic end of the band: slower tokens, fewer requests.
                    perfs.append(ClassPerf(e.requests_per_s / (1 + e.error_band), e.ttft_ms * (1 + e.ttft_error_band),
                                           e.tpot_ms * (1 + e.tpot_error_band), e.latency_ms * (1 + e.tpot_error_band),
                                           e.batch, e.binding_limit))
                else:
                    perfs.append(ClassPerf(e.requests_per_s, e.ttft_ms, e.tpot_ms, e.latency_ms, e.batch, e.binding_limit))
            if fail is not None:
                self._reject(g * span, precision, fail[0], fail[1])
                continue
            if all(c.throughput <= 0 for c in perfs):
                first = next(c for c in perfs if c.reason)
                self._reject(g * span, precision, _slo_kind(first.reason) or "latency", first.reason)
                continue
            out.append(Config(svc.name, offer.id, g * span, precision, "estimate", tuple(perfs), mem, band,
                              instances_per_replica=span))
        return out

    def _spanning(self, model: ModelArch) -> list[Config]:
        """Replicas across 2 or 4 instances, only where the model fits no single instance."""
        whole = self.offer.gpus_per_instance
        single = [r for r in self.rejections if r.gpus_per_replica == whole]
        if not single or any(r.kind != "vram" for r in single):
            return []
        out: list[Config] = []
        for span in (2, 4):
            found = self._estimated(model, whole, span)
            out.extend(found)
            if found:
                break
        return out

    def _query(self, model, gpus, span, precision, prompt, output) -> PerfQuery:
        svc, slo, cal = self.svc, self.svc.slo, self.b.calibration
        ttft_shrink = 1.0 + cal.ttft_error_band if svc.size_with_error_band else 1.0
        shrink = 1.0 + cal.tpot_error_band if svc.size_with_error_band else 1.0
        return PerfQuery(
            model=model, gpu=self.gpu, gpus_per_replica=gpus, interconnect=self.offer.interconnect,
            usable_memory_gib=self.usable_gib, precision=precision, engine=svc.engine,
            prompt_tokens=prompt, output_tokens=output,
            ttft_slo_ms=slo.ttft_ms / ttft_shrink if slo.ttft_ms else None,
            tpot_slo_ms=slo.tpot_ms / shrink if slo.tpot_ms else None,
            latency_slo_ms=slo.latency_ms / shrink if slo.latency_ms else None,
            instances_per_replica=span, inter_node_gbs=self.offer.inter_node_gbs, calibration=cal,
        )

    def _reject(self, g, precision, kind, reason):
        self.rejections.append(Rejection(self.svc.name, self.offer.id, self.offer.gpu, g, precision, kind, reason))


def add_candidates(problem: Problem, catalog: Catalog, cache: CandidateCache | None = SHARED_CACHE,
                   stop: Stop = NEVER) -> Problem:
    """The compiled problem with its (pruned) candidate configurations and rejections."""
    limits = problem.offer_limits
    # Offers a measured profile names are not interchangeable with their look-alikes.
    pinned = {p.offer for s in problem.services for p in s.profiles if p.offer is not None}
    # Multi-period plans: offers compare in every pricing tier, spot spread over regions
    # keeps regions apart, and the running fleet's offers stay (changing them costs).
    h = problem.horizon
    tiers = h.tiers if h is not None else None
    by_location = h is not None and h.spot_min_regions is not None
    running = {f.offer_id for f in (h.current_fleet or ())} if h is not None else set()
    offers, dominated = prune_offers(list(problem.offers), limits, catalog, keep=pinned | running, tiers=tiers,
                                     by_location=by_location)
    builder = CandidateBuilder(catalog, offers, problem.calibration, cache, stop)
    offers_by_id = {o.id: o for o in offers}
    configs: list[Config] = []
    for svc in problem.services:
        mine = prune_configs(builder.for_service(svc), svc)
        configs.extend(prune_whole_instance_configs(mine, offers_by_id, limits, problem.gpu_quotas, tiers=tiers,
                                                    by_location=by_location, keep=running))
    return replace(problem, offers=tuple(offers), configs=tuple(configs), rejections=tuple(builder.rejections),
                   filtered_out=problem.filtered_out + tuple(dominated))


def build_problem(workload: Workload, catalog: Catalog, cache: CandidateCache | None = SHARED_CACHE,
                  stop: Stop = NEVER) -> Problem:
    return add_candidates(compile_problem(workload, catalog), catalog, cache, stop)
