"""Why no fleet fits: services nobody can serve, and the binding budget or quota."""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict

from solver.catalog.types import Catalog
from solver.compile.problem import Problem, Rejection
from solver.errors import InfeasibilityReason
from solver.workload.schema import Workload

_KIND_WORDS = {"vram": "does not fit in VRAM", "ttft": "misses the TTFT SLO", "tpot": "misses the TPOT SLO",
               "latency": "misses the latency SLO", "precision": "precision not supported",
               "unsupported": "not supported", "no_profile": "no measured profile"}


def diagnose_unservable(workload: Workload, catalog: Catalog, problem: Problem) -> list[InfeasibilityReason]:
    """Services that no candidate configuration can serve at all, with the fix."""
    reasons = []
    if not problem.offers:
        return [InfeasibilityReason("offers", "the constraints remove every offer in the catalog "
                                    f"({len(problem.filtered_out)} removed: " +
                                    "; ".join(sorted({w for _, w in problem.filtered_out})[:4]) + ").",
                                    "widen constraints.providers/regions/gpu_types, or allow spot/consumer GPUs")]
    have = {c.service for c in problem.configs}
    for svc, demand in zip(workload.services, problem.services):
        if svc.name in have:
            reasons.extend(_unserved_classes(svc.name, demand, problem))
            continue
        if demand.total_demand <= 0 and demand.min_replicas == 0:
            continue
        rej = [r for r in problem.rejections if r.service == svc.name]
        reasons.append(_unservable_reason(svc, rej, problem, catalog))
    return reasons


def _unserved_classes(name: str, demand, problem: Problem) -> list[InfeasibilityReason]:
    """A service with configurations, one of whose request classes none of them can serve."""
    out = []
    mine = [c for c in problem.configs if c.service == name]
    for k, (cname, d) in enumerate(zip(demand.class_names, demand.class_demand)):
        if d <= 0 or any(c.classes[k].throughput > 0 for c in mine):
            continue
        why = next((c.classes[k].reason for c in mine if c.classes[k].reason), "no configuration serves it")
        out.append(InfeasibilityReason(
            f"class[{name},{cname}]", f"{name}: request class {cname!r} cannot be served by any configuration "
            f"({why}).", "add a measured profile for this class, relax its SLO, or allow faster GPUs", name))
    return out


def _unservable_reason(svc, rej: list[Rejection], problem: Problem, catalog: Catalog) -> InfeasibilityReason:
    kinds = Counter(r.kind for r in rej)
    name = svc.name
    if not rej:
        return InfeasibilityReason(f"candidates[{name}]", f"{name}: no configuration to evaluate.",
                                   "add measured profiles or a model", name)
    if kinds.get("vram", 0) and not any(kinds.get(k) for k in ("ttft", "tpot", "latency")):
        largest = max(problem.offers, key=lambda o: catalog.usable_memory_gib(o) * o.gpus_per_instance)
        largest_gib = catalog.usable_memory_gib(largest) * largest.gpus_per_instance
        vram = [r for r in rej if r.kind == "vram"]
        need = _needed_gib(vram)
        model = svc.model if isinstance(svc.model, str) else getattr(svc.model, "name", "the model")
        precisions = "/".join(svc.precisions)
        fix = []
        if "fp8" not in svc.precisions:
            if any(catalog.gpus[o.gpu].supports_fp8 for o in problem.offers):
                fix.append("allow fp8 (halves weight memory on GPUs that support it)")
            else:
                fix.append("allow fp8 together with FP8-capable GPUs (Hopper, Ada: H100, H200, L4, L40S; "
                           "none is allowed now)")
        if "fp4" not in svc.precisions:
            fp4_gpus = sorted({o.gpu for o in problem.offers if catalog.gpus[o.gpu].supports("fp4")})
            if fp4_gpus:  # only where an allowed GPU has FP4 tensor cores
                fix.append(f"allow fp4 (about a quarter of 16-bit weight memory on {', '.join(fp4_gpus)})")
        fix.append(f"allow offers with {need:.0f} GB or more per instance (e.g. 2x80 GB, 8x80 GB)")
        need_text = f"~{need:.0f} GB per replica" if need else "more memory than any allowed GPU"
        return InfeasibilityReason(
            f"vram[{name}]",
            f"{name}: {model} at {precisions} needs {need_text}; the largest allowed offer "
            f"({largest.id}) has {largest_gib:.0f} GB.", " or ".join(fix), name)
    for kind in ("tpot", "ttft", "latency"):
        if kinds.get(kind):
            misses = [r for r in rej if r.kind == kind]
            best = min(misses, key=lambda r: _value_in(r.reason))
            slo_field = {"tpot": "tpot_ms", "ttft": "ttft_ms", "latency": "latency_ms"}[kind]
            achieved = _value_in(best.reason)
            return InfeasibilityReason(
                f"slo[{name}].{slo_field}",
                f"{name}: no allowed configuration meets the {kind.upper() if kind != 'latency' else 'latency'} SLO; "
                f"the best is {best.gpu} x{best.gpus_per_replica} at {best.precision or 'measured'}: {best.reason}.",
                f"relax slo.{slo_field} to at least {math.ceil(achieved)} ms, or allow faster GPUs / fp8", name)
    top = kinds.most_common(1)[0][0]
    sample = next(r for r in rej if r.kind == top)
    return InfeasibilityReason(f"candidates[{name}]", f"{name}: every configuration is ruled out ({_KIND_WORDS.get(top, top)}: "
                               f"{sample.reason}).", "add measured profiles for the allowed GPUs, or allow more GPU types", name)


def _needed_gib(vram: list[Rejection]) -> float:
    """Total GB per replica from the per-GPU need in the rejection text (\"needs ~N GiB per GPU\")."""
    best = 0.0
    for r in vram:
        per_gpu = _value_in(r.reason, after="needs ~")
        if per_gpu != math.inf:
            best = max(best, per_gpu * r.gpus_per_replica) if best == 0 else min(best, per_gpu * r.gpus_per_replica)
    return best


def _value_in(text: str, after: str = ": ") -> float:
    """The first number after a marker in a reason string (e.g. 'misses ...: 63.2 ms > 50 ms')."""
    idx = text.find(after)
    if idx < 0:
        return math.inf
    num = ""
    for ch in text[idx + len(after):]:
        if ch.isdigit() or ch == "." or (ch == "~" and not num):
            num += "" if ch == "~" else ch
        elif num:
            break
    try:
        return float(num)
    except ValueError:
        return math.inf


def diagnose_infeasible(workload: Workload, problem: Problem, backend, deadline: float) -> list[InfeasibilityReason]:
    """Every service can be served alone, yet no fleet fits: find the binding constraint."""
    from solver.optimize.backends import SolveOptions
    from solver.optimize.formulation import build

    reasons: list[InfeasibilityReason] = []

    def relaxed(budget: bool, quotas: bool):
        form = build(problem, budget=budget, quotas=quotas)
        out = backend.solve(form.model, SolveOptions(time_limit_s=max(min(deadline - time.monotonic(), 10.0), 1.0)))
        return form, out

    form, out = relaxed(budget=False, quotas=True)
    if out.values is not None and problem.budget_usd_per_hour is not None:
        cheapest = out.objective
        reasons.append(InfeasibilityReason(
            "budget", f"the cheapest fleet that meets demand and quotas costs ${cheapest:.4f}/hour, above the "
            f"budget of ${problem.budget_usd_per_hour:g}/hour.",
            f"raise constraints.budget_usd_per_hour to at least {math.ceil(cheapest * 100) / 100:g}, or lower demand"))
        return reasons
    form, out = relaxed(budget=False, quotas=False)
    if out.values is None:
        return [InfeasibilityReason("replicas", "no fleet fits even without budget and quotas "
                                    "(min/max replicas and demand conflict).", "check min_replicas and max_replicas")]
    used_gpu: dict[str, int] = defaultdict(int)
    used_offer: dict[str, int] = {}
    for offer_id, i in form.n.items():
        n = int(round(out.values[i]))
        if n:
            o = problem.offer(offer_id)
            used_gpu[o.gpu] += n * o.gpus_per_instance
            used_offer[offer_id] = n
    for gpu, quota in sorted(problem.gpu_quotas.items()):
        if used_gpu.get(gpu, 0) > quota:
            reasons.append(InfeasibilityReason(
                f"quota[{gpu}]", f"the cheapest fleet without quotas needs {used_gpu[gpu]} {gpu} GPUs; the quota is {quota}, "
                "and no mix of the other allowed GPUs makes up for it.",
                f"raise constraints.gpu_quotas.{gpu} to {used_gpu[gpu]}, or allow more GPU types or providers"))
    for offer_id, limit in sorted(problem.offer_limits.items()):
        if used_offer.get(offer_id, 0) > limit:
            reasons.append(InfeasibilityReason(
                f"availability[{offer_id}]", f"the cheapest fleet without limits needs {used_offer[offer_id]} "
                f"instances of {offer_id}; only {limit} are available.",
                f"raise constraints.offer_quotas.{offer_id}, or allow other offers"))
    if not reasons:
        reasons.append(InfeasibilityReason("quotas", "quotas and availability together leave too little capacity.",
                                           "raise GPU quotas or offer availability"))
    return reasons
