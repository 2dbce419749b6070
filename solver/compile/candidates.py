"""Candidate configurations: offer x GPUs per replica x precision -> per-replica performance.

Measured profiles win; otherwise the LLM performance model estimates. Configurations
that do not fit or miss an SLO are dropped and kept as `Rejection`s for explanations;
configurations that can never be part of a unique cheapest plan are pruned (see
`solver.compile.pruning`).
"""

from __future__ import annotations

import functools

from solver.catalog.types import Catalog, GpuType, Offer
from solver.errors import InputError
from solver.models.library import ModelArch
from solver.perf import Calibration, PerfQuery, estimate
from solver.compile.problem import ClassPerf, Config, Problem, Rejection, ServiceDemand
from solver.compile.pruning import prune_configs, prune_offers, prune_whole_instance_configs
from solver.workload.schema import Service, Workload
from solver.compile.resolve import filter_offers, model_arch, offer_limits


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


def service_demand(svc: Service, headroom: float) -> ServiceDemand:
    rate = svc.demand.rate
    scale = 1.0 + headroom
    if svc.demand.classes:
        names = tuple(c.name for c in svc.demand.classes)
        demand = tuple(rate * c.share * scale for c in svc.demand.classes)
    else:
        names, demand = ("default",), (rate * scale,)
    return ServiceDemand(svc.name, svc.demand.unit, names, demand, rate, svc.min_replicas, svc.max_replicas)


def _class_tokens(svc: Service) -> list[tuple[int, int]]:
    if svc.demand.classes:
        return [(c.prompt_tokens, c.output_tokens) for c in svc.demand.classes]
    return [(svc.demand.prompt_tokens or 0, svc.demand.output_tokens or 0)]


def _slo_miss(svc: Service, ttft: float | None, tpot: float | None, latency: float | None) -> str:
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


class CandidateBuilder:
    def __init__(self, workload: Workload, catalog: Catalog, offers: list[Offer]):
        self.workload = workload
        self.catalog = catalog
        self.offers = offers
        try:
            self.calibration = Calibration.from_overrides(workload.solver.calibration)
        except ValueError as exc:
            raise InputError.single("solver.calibration", str(exc), "use a constant named in docs/performance-model.md") from None
        self.rejections: list[Rejection] = []
        self._seen: dict[tuple, object] = {}

    def for_service(self, svc: Service) -> list[Config]:
        model = model_arch(svc.model) if svc.model is not None else None
        configs: list[Config] = []
        for offer in self.offers:
            self._mark = len(self.rejections)  # this offer's rejections start here
            gpu = self.catalog.gpus[offer.gpu]
            for g in replica_sizes(offer.gpus_per_instance):
                configs.extend(self._measured(svc, offer, gpu, g))
                if model is not None and not self._has_profile(svc, offer, g):
                    configs.extend(self._estimated(svc, model, offer, gpu, g, 1))
            if model is not None and offer.inter_node_fabric:
                configs.extend(self._spanning(svc, model, offer, gpu))
        return configs

    def _has_profile(self, svc: Service, offer: Offer, g: int) -> bool:
        return any(self._profile_matches(p, offer, g) for p in svc.profiles)

    @staticmethod
    def _profile_matches(p, offer: Offer, g: int) -> bool:
        return p.gpu == offer.gpu and p.gpus_per_replica == g and p.offer in (None, offer.id)

    def _measured(self, svc: Service, offer: Offer, gpu: GpuType, g: int) -> list[Config]:
        out = []
        profiles = [p for p in svc.profiles if self._profile_matches(p, offer, g)]
        for precision in sorted({p.precision for p in profiles}, key=lambda x: x or ""):
            class_names = [c.name for c in svc.demand.classes] if svc.demand.classes else ["default"]
            perfs = []
            for cname in class_names:
                match = [p for p in profiles if p.precision == precision and p.request_class in (cname, None)]
                match.sort(key=lambda p: p.request_class is None)  # class-specific first
                if not match:
                    perfs.append(ClassPerf(0.0, reason="no measured profile for this request class"))
                    continue
                p = match[0]
                rate = p.requests_per_s if p.requests_per_s is not None else p.items_per_min
                miss = _slo_miss(svc, p.ttft_ms, p.tpot_ms, p.latency_ms)
                perfs.append(ClassPerf(0.0 if miss else rate, p.ttft_ms, p.tpot_ms, p.latency_ms, reason=miss,
                                       binding_limit="measured"))
            mem = max((p.memory_gib_per_gpu or 0 for p in profiles), default=0) or None
            if mem is not None and mem > self.catalog.usable_memory_gib(offer) + 1e-9:
                self._reject(svc, offer, g, precision, "vram",
                             f"measured {mem:g} GiB per GPU exceeds the {self.catalog.usable_memory_gib(offer):g} GiB of {offer.gpu}")
                continue
            if all(c.throughput <= 0 for c in perfs):
                reason = next((c.reason for c in perfs if c.reason), "no usable measurement")
                self._reject(svc, offer, g, precision, _slo_kind(reason) or "no_profile", reason)
                continue
            out.append(Config(svc.name, offer.id, g, precision, "measured", tuple(perfs), mem))
        if not profiles and svc.model is None and g == replica_sizes(offer.gpus_per_instance)[0]:
            self._reject(svc, offer, g, None, "no_profile",
                         f"no measured profile for {offer.gpu} and the service has no LLM model to estimate from")
        return out

    def _estimated(self, svc: Service, model: ModelArch, offer: Offer, gpu: GpuType, g: int, span: int) -> list[Config]:
        out = []
        for precision in svc.precisions:
            if not gpu.supports(precision):
                self._reject(svc, offer, g * span, precision, "precision", f"{gpu.name} does not support {precision}")
                continue
            if not gpu.llm_estimates:
                self._reject(svc, offer, g * span, precision, "unsupported",
                             f"{gpu.name} has no calibrated LLM estimate; add a measured profile")
                continue
            tp = g
            if model.attention_heads % tp:
                self._reject(svc, offer, g * span, precision, "unsupported",
                             f"{tp}-way tensor parallelism does not divide {model.attention_heads} attention heads")
                continue
            perfs: list[ClassPerf] = []
            mem, band, fail = None, 0.0, None
            for prompt, output in _class_tokens(svc):
                # Offers that share GPU, size, interconnect and memory give the same query.
                key = (svc.name, gpu.name, g, span, offer.interconnect, self.catalog.usable_memory_gib(offer),
                       offer.inter_node_gbs, precision, prompt, output)
                e = self._seen.get(key)
                if e is None:
                    e = self._seen[key] = _cached_estimate(
                        self._query(svc, model, offer, gpu, g * span, span, precision, prompt, output))
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
                self._reject(svc, offer, g * span, precision, fail[0], fail[1])
                continue
            if all(c.throughput <= 0 for c in perfs):
                first = next(c for c in perfs if c.reason)
                self._reject(svc, offer, g * span, precision, _slo_kind(first.reason) or "latency", first.reason)
                continue
            out.append(Config(svc.name, offer.id, g * span, precision, "estimate", tuple(perfs), mem, band,
                              instances_per_replica=span))
        return out

    def _spanning(self, svc: Service, model: ModelArch, offer: Offer, gpu: GpuType) -> list[Config]:
        """Replicas across 2 or 4 instances, only where the model fits no single instance."""
        whole = offer.gpus_per_instance
        single = [r for r in self.rejections[self._mark:] if r.offer_id == offer.id and r.gpus_per_replica == whole]
        if not single or any(r.kind != "vram" for r in single):
            return []
        out: list[Config] = []
        for span in (2, 4):
            found = self._estimated(svc, model, offer, gpu, whole, span)
            out.extend(found)
            if found:
                break
        return out

    def _query(self, svc, model, offer, gpu, gpus, span, precision, prompt, output) -> PerfQuery:
        slo = svc.slo
        cal = self.calibration
        ttft_shrink = 1.0 + cal.ttft_error_band if svc.size_with_error_band else 1.0
        shrink = 1.0 + cal.tpot_error_band if svc.size_with_error_band else 1.0
        return PerfQuery(
            model=model, gpu=gpu, gpus_per_replica=gpus, interconnect=offer.interconnect,
            usable_memory_gib=self.catalog.usable_memory_gib(offer), precision=precision, engine=svc.engine,
            prompt_tokens=prompt, output_tokens=output,
            ttft_slo_ms=slo.ttft_ms / ttft_shrink if slo.ttft_ms else None,
            tpot_slo_ms=slo.tpot_ms / shrink if slo.tpot_ms else None,
            latency_slo_ms=slo.latency_ms / shrink if slo.latency_ms else None,
            instances_per_replica=span, inter_node_gbs=offer.inter_node_gbs, calibration=self.calibration,
            kv_precision=None if svc.engine_options.kv_cache_dtype == "auto" else svc.engine_options.kv_cache_dtype,
        )

    def _reject(self, svc, offer, g, precision, kind, reason):
        self.rejections.append(Rejection(svc.name, offer.id, offer.gpu, g, precision, kind, reason))


def build_problem(workload: Workload, catalog: Catalog) -> Problem:
    offers, filtered_out = filter_offers(workload, catalog)
    limits = offer_limits(workload, offers)
    # Offers a measured profile names are not interchangeable with their look-alikes.
    pinned = {p.offer for s in workload.services for p in s.profiles if p.offer is not None}
    offers, dominated = prune_offers(offers, limits, catalog, keep=pinned)
    builder = CandidateBuilder(workload, catalog, offers)
    headroom = workload.constraints.headroom
    services = tuple(service_demand(s, headroom) for s in workload.services)
    configs: list[Config] = []
    offers_by_id = {o.id: o for o in offers}
    quotas = workload.constraints.gpu_quotas
    for svc, demand in zip(workload.services, services):
        mine = prune_configs(builder.for_service(svc), demand)
        configs.extend(prune_whole_instance_configs(mine, offers_by_id, limits, quotas))
    return Problem(
        services=services, offers=tuple(offers), configs=tuple(configs), rejections=tuple(builder.rejections),
        gpu_quotas=dict(workload.constraints.gpu_quotas), offer_limits=limits,
        budget_usd_per_hour=workload.constraints.budget_usd_per_hour, headroom=headroom,
        filtered_out=tuple(filtered_out) + tuple(dominated),
    )
