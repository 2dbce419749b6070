"""Explanations: why no fleet fits, and which alternatives a plan did not take and why."""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict

from solver.catalog.types import Catalog
from solver.errors import InfeasibilityReason
from solver.problem import Config, Problem, Rejection
from solver.result import Alternative
from solver.schema import Workload
from solver.solution import Solution

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
    from solver.backends import SolveOptions
    from solver.formulation import build

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


def alternatives_for(service: str, problem: Problem, form, solution: Solution, *, backend_name: str,
                     deadline: float, limit: int = 4) -> list[Alternative]:
    """Nearest alternatives not taken: dearer configurations (exact re-solve when cheap
    enough) and the nearest ruled-out ones with their reason."""
    from solver.backends import SolveOptions, get_backend
    from solver.formulation import build

    used = {a.config_key for a in solution.assignments if a.service == service}
    base_cost = sum(problem.offer(o).price_usd_per_hour * n for o, n in solution.fleet)
    mine = [c for c in problem.configs if c.service == service and c.key not in used]
    demand = problem.service(service)

    def alone_cost(c: Config) -> float:
        offer = problem.offer(c.offer_id)
        per_replica = offer.price_usd_per_hour * c.gpus_per_replica / offer.gpus_per_instance
        tput = sum(k.throughput for k in c.classes) / max(len(c.classes), 1)
        return per_replica * max(demand.total_demand / tput if tput else math.inf, demand.min_replicas, 1)

    # One per GPU type, the cheapest-looking first.
    seen_gpu: set[str] = set()
    picks = []
    for c in sorted(mine, key=lambda c: (alone_cost(c), c.key)):
        gpu = problem.offer(c.offer_id).gpu
        if gpu in seen_gpu:
            continue
        seen_gpu.add(gpu)
        picks.append(c)
        if len(picks) == limit:
            break
    out: list[Alternative] = []
    backend = get_backend(backend_name)
    others = [c for c in problem.configs if c.service != service]
    for c in picks:
        gpu = problem.offer(c.offer_id).gpu
        delta, exact = None, False
        if time.monotonic() < deadline:
            form2 = build(problem, others + [c])
            res = backend.solve(form2.model, SolveOptions(time_limit_s=max(min(deadline - time.monotonic(), 2.0), 0.05)))
            if res.status == "optimal":
                delta, exact = res.objective - base_cost, True
            elif res.status == "infeasible":
                out.append(Alternative(c.key, gpu, c.gpus_per_replica, c.precision, "quota",
                                       "no feasible fleet if this service used only this configuration "
                                       "(over a quota, availability or the budget)"))
                continue
        if delta is None:
            delta = alone_cost(c) - base_cost / max(len(problem.services), 1)
        out.append(Alternative(c.key, gpu, c.gpus_per_replica, c.precision, "dearer",
                               f"dearer by ${delta:.4f}/hour" + ("" if exact else " (approximate)"),
                               round(delta, 6), exact))
    # Nearest ruled-out configurations: one per reason kind, on the cheapest GPUs.
    rejected = [r for r in problem.rejections if r.service == service]
    seen_kind: set[str] = set()
    for r in sorted(rejected, key=lambda r: (problem.offer(r.offer_id).price_usd_per_gpu_hour if r.offer_id in problem._offers_by_id else 0, r.offer_id)):
        if r.kind in seen_kind:
            continue
        seen_kind.add(r.kind)
        out.append(Alternative(f"{service}@{r.offer_id}:{r.gpus_per_replica}gpu:{r.precision}", r.gpu,
                               r.gpus_per_replica, r.precision, r.kind, r.reason))
    for offer_id, why in problem.filtered_out:
        if "quota" in why:
            # A whole offer removed by a zero quota: no GPU size or precision to name.
            out.append(Alternative(f"{service}@{offer_id}", "", 0, None, "quota", f"{offer_id}: {why}"))
            break
    return out
