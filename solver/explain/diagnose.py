"""Why no fleet fits: services nobody can serve, and the binding budget or quota."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import replace

from solver.catalog.types import Catalog
from solver.compile.fleet_size import replicas_needed
from solver.compile.problem import Config, Problem, Rejection, ServiceDemand
from solver.errors import InfeasibilityReason
from solver.interrupt import Stop
from solver.output.render import plural

_KIND_WORDS = {"vram": "does not fit in VRAM", "ttft": "misses the TTFT SLO", "tpot": "misses the TPOT SLO",
               "latency": "misses the latency SLO", "precision": "precision not supported",
               "unsupported": "not supported", "no_profile": "no measured profile",
               "profile_size": "replica size cannot be packed exactly"}


def diagnose_unservable(problem: Problem, catalog: Catalog) -> list[InfeasibilityReason]:
    """Services that no candidate configuration can serve at all, with the fix.

    Linear in configurations plus rejections: both are grouped by service once.
    """
    if not problem.offers:
        return [InfeasibilityReason("offers", "the constraints remove every offer in the catalog "
                                    f"({len(problem.filtered_out)} removed: " +
                                    "; ".join(sorted({w for _, w in problem.filtered_out})[:4]) + ").",
                                    "widen constraints.providers/regions/gpu_types, or allow spot/consumer GPUs")]
    configs: dict[str, list[Config]] = defaultdict(list)
    for c in problem.configs:
        configs[c.service].append(c)
    # The dominated configurations and the rejections, grouped only when a reason quotes
    # them (most plans have none to give: the ~3,500 rejections of a 20-service plan).
    grouped: dict[str, dict] = {}

    def by_service(name: str, items) -> dict:
        if name not in grouped:
            out = grouped[name] = defaultdict(list)
            for x in items:
                out[x.service].append(x)
        return grouped[name]

    reasons = []
    # A service with a disaggregated deployment (both pools with workers) is served by it.
    fed = defaultdict(set)
    for svc in problem.services:
        if svc.role and configs.get(svc.name):
            fed[(svc.feeds, svc.link)].add(svc.role)
    split = {parent for (parent, _), roles in fed.items() if len(roles) == 2}
    for svc in problem.services:
        if svc.role:
            continue  # a pool: its parent is the one served or not
        if svc.name in split:
            continue
        if svc.name in configs:
            mine = configs[svc.name]
            if _all_classes_served(svc, mine):
                continue
            reasons.extend(_unserved_classes(svc, mine, mine + by_service("dominated", problem.dominated)[svc.name]))
            continue
        if svc.total_demand <= 0 and svc.min_replicas == 0:
            continue
        reasons.extend(_unservable_reasons(svc, by_service("rejections", problem.rejections)[svc.name], problem,
                                           catalog))
    return reasons


def _all_classes_served(svc: ServiceDemand, mine: list[Config]) -> bool:
    """Every request class with demand has a configuration that serves it (the test
    `_unserved_classes` starts with: it finds nothing to say then)."""
    return all(d <= 0 or any(c.classes[k].throughput > 0 for c in mine) for k, d in enumerate(svc.class_demand))


def _unserved_classes(svc: ServiceDemand, mine: list[Config], quotable: list[Config]) -> list[InfeasibilityReason]:
    """A service with configurations, one of whose request classes none of them can serve.

    The message quotes the configuration that comes closest to the class's SLO (smallest
    value against its bound), among all, the pruned ones included: pruning drops a larger
    replica whose other classes a smaller one serves as well, even when the larger one is
    the nearest to this class's SLO."""
    out = []
    name = svc.name
    bounds = dict(svc.slo.bounds())
    for k, (cname, d) in enumerate(zip(svc.class_names, svc.class_demand)):
        if d <= 0 or any(c.classes[k].throughput > 0 for c in mine):
            continue
        closest = None  # (value / bound, field, value, config)
        for c in quotable:
            perf = c.classes[k]
            for field_name in ("ttft_ms", "tpot_ms", "latency_ms"):
                value, bound = getattr(perf, field_name), bounds.get(field_name)
                if value is not None and bound is not None and value > bound and perf.reason:
                    key = (value / bound, field_name, value, c.key)
                    if closest is None or key < closest[:4]:
                        closest = (*key, c)
        if closest is None:
            why = next((c.classes[k].reason for c in mine if c.classes[k].reason), "no configuration serves it")
            out.append(InfeasibilityReason(
                f"class[{name},{cname}]", f"{name}: request class {cname!r} cannot be served by any configuration "
                f"({why}).", "add a measured profile for this class, relax its SLO, or allow faster GPUs", name))
            continue
        _, field_name, value, _, c = closest
        label = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}[field_name]
        out.append(InfeasibilityReason(
            f"class[{name},{cname}]", f"{name}: request class {cname!r} cannot meet the {label} SLO on any allowed "
            f"configuration; the closest is {c.offer_id} with {plural(c.gpus_per_replica, 'GPU')} per replica at "
            f"{c.precision or 'measured'}: {c.classes[k].reason}.",
            f"relax slo.{field_name} to at least {math.ceil(value)} ms, or allow faster GPUs, or add a measured "
            "profile for this class", name))
    return out


_SLO_KINDS = {"ttft_ms": "ttft", "tpot_ms": "tpot", "latency_ms": "latency"}


def _unservable_reasons(svc: ServiceDemand, rej: list[Rejection], problem: Problem,
                        catalog: Catalog) -> list[InfeasibilityReason]:
    """Why no configuration serves the service: one reason, or one per SLO bound that no
    configuration meets even alone (a configuration's rejection names only the first bound
    it misses, TTFT before TPOT, so TTFT's miss hid an impossible TPOT)."""
    if any(r.kind in _SLO_KINDS.values() for r in rej) and len(svc.slo.bounds()) > 1:
        alone = [_slo_reason(svc, kind, misses) for kind, misses in _impossible_alone(svc, problem, catalog)]
        if alone:
            return alone
    return [_unservable_reason(svc, rej, problem, catalog)]


def _impossible_alone(svc: ServiceDemand, problem: Problem, catalog: Catalog) -> list[tuple[str, list[Rejection]]]:
    """Each bound of the service's SLO that no allowed configuration meets with the other
    bounds removed, with those configurations' misses. Candidates are built again, once per
    bound, for this service only: only a plan that has no fleet pays for it."""
    from solver.compile.candidates import CandidateBuilder

    out = []
    for field_name, bound in svc.slo.bounds():
        only = replace(svc, slo=replace(svc.slo, **{f: None for f, _ in svc.slo.bounds() if f != field_name}))
        builder = CandidateBuilder(catalog, problem.offers, problem.calibration, cache=None)
        (configs,) = builder.for_services([only])
        kind = _SLO_KINDS[field_name]
        misses = [r for r in builder.rejections if r.kind == kind]
        if not configs and misses:
            out.append((kind, misses))
    return out


def _slo_reason(svc: ServiceDemand, kind: str, misses: list[Rejection]) -> InfeasibilityReason:
    """The bound no configuration meets, the configuration that comes closest and what
    relaxing the bound would take. Without a percentile every value is exact. Under a
    percentile SLO a miss "under load" (at a trickle, on the slowed replica) is that
    configuration's exact threshold, but a miss without load is only a lower bound on its
    threshold (its value under load is higher), and some misses give no number at all (no
    capacity even at a trickle). The closest configuration is the one with the lowest exact
    threshold; the advice names that threshold only where it is the least one and the
    configuration misses no other bound there, and otherwise what is known: the range the
    least admitting bound lies in, or the value below which no bound admits a fleet."""
    name = svc.name
    slo_field = {"tpot": "tpot_ms", "ttft": "ttft_ms", "latency": "latency_ms"}[kind]
    label = kind.upper() if kind != "latency" else "latency"
    relax, other = f"relax slo.{slo_field}", "or allow faster GPUs / fp8"
    if not misses:
        return InfeasibilityReason(f"slo[{name}].{slo_field}", f"{name}: no allowed configuration meets the {label} "
                                   "SLO.", f"{relax}, {other}", name)
    numbered = [r for r in misses if math.isfinite(_value_in(r.reason))]
    exact = [r for r in numbered if svc.slo.percentile is None or "under load" in r.reason]
    lower = [r for r in numbered if r not in exact]
    # Among equal values, one that misses only this bound ("; p..." lists the others).
    best = min(exact or lower, key=lambda r: (_value_in(r.reason), "; p" in r.reason)) if numbered else misses[0]
    message = (f"{name}: no allowed configuration meets the {label} SLO; the best is {_shape(best)}: "
               f"{best.reason}.")
    if not numbered:
        fix = f"{relax} (no configuration gives a value to relax it to), {other}"
        return InfeasibilityReason(f"slo[{name}].{slo_field}", message, fix, name)
    # A value without load may be printed to a tenth ("10.2"): the value itself can be 0.05 below.
    least = min([_value_in(r.reason) for r in exact] + [_value_in(r.reason) - 0.05 for r in lower])
    if not exact:
        fix = (f"{relax} to more than {_ms_down(least)} ms (the value without load; the p{svc.slo.percentile} "
               f"under load is higher), {other}")
        return InfeasibilityReason(f"slo[{name}].{slo_field}", message, fix, name)
    at = _value_in(best.reason)
    alone = "; p" not in best.reason  # the miss under load names every bound it misses, ";"-separated
    closest = min(lower, key=lambda r: _value_in(r.reason)) if lower else None
    if not alone:
        fix = (f"{relax}: no bound below {_ms_down(least)} ms admits a fleet, and at {_ms_up(at)} ms "
               f"{_shape(best)} still misses the other bounds its reason names (relax those too), {other}")
    elif closest is None or _value_in(closest.reason) >= at:
        fix = f"{relax} to at least {_ms_up(at)} ms, {other}"
    else:
        fix = (f"{relax} to {_ms_up(at)} ms ({_shape(best)} meets it there at a trickle of requests) or a little "
               f"less: the least bound that admits a fleet lies between {_ms_down(least)} and {_ms_up(at)} ms "
               f"({_shape(closest)} takes {_value_in(closest.reason):g} ms without load, more under load). "
               f"{other.capitalize()}")
    return InfeasibilityReason(f"slo[{name}].{slo_field}", message, fix, name)


def _shape(r: Rejection) -> str:
    return f"{r.gpu} x{r.gpus_per_replica} at {r.precision or 'measured'}"


def _ms_up(ms: float) -> str:
    """A bound in ms rounded up, never below `ms`: to a tenth below 100 ms (a TPOT of 10.3
    ms admits a plan where 11 ms admits a far cheaper one: both are worth telling apart),
    to a whole ms above."""
    return _ms_rounded(ms, math.ceil)


def _ms_down(ms: float) -> str:
    """A lower bound in ms as `_ms_up` shows it, rounded down (never above `ms`)."""
    return _ms_rounded(ms, math.floor)


def _ms_rounded(ms: float, rounding) -> str:
    if not math.isfinite(ms):
        return "?"
    if ms < 100:
        return f"{rounding(round(ms * 10.0, 6)) / 10.0:g}"
    return f"{rounding(round(ms, 6))}"


def _unservable_reason(svc: ServiceDemand, rej: list[Rejection], problem: Problem, catalog: Catalog) -> InfeasibilityReason:
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
        model = svc.model_label or "the model"
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
            return _slo_reason(svc, kind, [r for r in rej if r.kind == kind])
    if kinds.get("profile_size") and not any(kinds.get(k) for k in ("ttft", "tpot", "latency", "vram")):
        # The service's only measurements are for replica sizes that cannot be planned.
        sample = next(r for r in rej if r.kind == "profile_size")
        message, fix = sample.reason.split(". To fix: ", 1)
        return InfeasibilityReason(f"profiles[{name}]", f"{name}: its measured profiles cannot be planned "
                                   f"({sample.offer_id}: {message}).", fix, name)
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


# Each relaxed re-solve gets at most this long (and never runs past the call's deadline).
RELAXED_SOLVE_CAP_S = 10.0


def diagnose_infeasible(problem: Problem, backend, stop: Stop, known_infeasible: bool = True) -> list[InfeasibilityReason]:
    """Every service can be served alone, yet no fleet fits: find the binding constraint.

    Cheap checks first (linear: replica limits against demand); then at most two relaxed
    re-solves (without the budget; without quotas), each bounded by the call's deadline.
    Each reason is proven by a re-solve; [] where this problem has a fleet after all (the
    caller's extra terms are then the cause). `known_infeasible` False: the problem as given
    is solved first, and [] returned where it has a fleet.
    """
    from solver.optimize.backends import SolveOptions
    from solver.optimize.formulation import build

    replicas = _replica_limits(problem)
    if replicas:
        return replicas

    def relaxed(budget: bool, quotas: bool, power: bool | frozenset[str] = True):
        stop.check("the infeasibility diagnosis")
        form = build(problem, budget=budget, quotas=quotas, stop=stop, power=power)
        seconds = stop.seconds_left(RELAXED_SOLVE_CAP_S)
        if seconds <= 0.01:
            return form, None
        return form, backend.solve(form.model, SolveOptions(time_limit_s=seconds, cancel=stop.cancel))

    if not known_infeasible:  # the caller only suspects it (a period of a horizon): show it first
        form, out = relaxed(budget=True, quotas=True)
        if out is not None and out.values is not None:
            return []
        if out is None or out.status != "infeasible":
            stop.check("the infeasibility diagnosis")
            return [InfeasibilityReason("time_limit", "no fleet fits, and the time limit ended before the binding "
                                        "constraint was found.", "raise the time limit to get the diagnosis")]
    if problem.budget_usd_per_hour is not None:
        form, out = relaxed(budget=False, quotas=True)
        if out is not None and out.values is not None:
            cheapest = out.objective
            exact = "costs" if out.status == "optimal" else "found costs"
            return [InfeasibilityReason(
                "budget", f"the cheapest fleet that meets demand and quotas {exact} ${cheapest:.4f}/hour, above the "
                f"budget of ${problem.budget_usd_per_hour:g}/hour.",
                f"raise constraints.budget_usd_per_hour to at least {math.ceil(cheapest * 100) / 100:g}, or lower demand")]
    if problem.power is not None and problem.power.sites:
        # Site power caps next, with quotas and availability kept: a plan without the caps
        # (and without the budget, which the step above cleared) proves a cap binds.
        found = _power_caps(problem, relaxed)
        if found:
            return found
    form, out = relaxed(budget=False, quotas=False, power=False)
    if out is None or (out.values is None and out.status != "infeasible"):
        stop.check("the infeasibility diagnosis")
        return [InfeasibilityReason("time_limit", "no fleet fits, and the time limit ended before the binding "
                                    "constraint was found.", "raise the time limit to get the diagnosis")]
    if out.values is None and any(s.redundancy_domain for s in problem.services):
        reasons = _redundancy_reasons(problem, backend, stop)
        if reasons:
            return reasons
    if out.values is None:
        return [InfeasibilityReason("replicas", "no fleet fits even without budget and quotas "
                                    "(min/max replicas and demand conflict).", "check min_replicas and max_replicas")]
    reasons: list[InfeasibilityReason] = []
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
    if problem.power is not None:
        reasons += [_site_reason(problem, site, kw, "quotas and power caps")
                    for site, kw in _sites_over(problem, form, out.values)]
    if reasons:
        return reasons
    # The cheapest fleet without quotas keeps every quota and limit, so they bind nothing.
    # The budget does, if that fleet costs more (no fleet is cheaper than the cheapest
    # without quotas); otherwise this problem has a fleet, and the cause lies in what it
    # leaves out (a horizon's terms, a change limit): say nothing rather than guess.
    budget = problem.budget_usd_per_hour
    if budget is not None and out.status == "optimal" and out.objective > budget * (1 + 1e-9) + 1e-9:
        return [InfeasibilityReason(
            "budget", f"the cheapest fleet that meets demand costs "
            f"${out.objective:.4f}/hour, above the budget of ${budget:g}/hour.",
            f"raise constraints.budget_usd_per_hour to at least {math.ceil(out.objective * 100) / 100:g}, or lower demand")]
    return []


def _redundancy_reasons(problem: Problem, backend, stop: Stop) -> list[InfeasibilityReason]:
    """No fleet even without budget and quotas, but one without the failure domains: they
    bind (proven by that re-solve). Services whose configurations all sit in one place are
    named with the place (no plan of theirs can survive losing it)."""
    import dataclasses

    from solver.optimize.backends import SolveOptions
    from solver.optimize.formulation import build

    plain = dataclasses.replace(problem, services=tuple(
        dataclasses.replace(s, redundancy_domain="", redundancy_demand=(), redundancy_fraction=0.0)
        for s in problem.services))
    stop.check("the infeasibility diagnosis")
    seconds = stop.seconds_left(RELAXED_SOLVE_CAP_S)
    if seconds <= 0.01:
        return []
    out = backend.solve(build(plain, budget=False, quotas=False, stop=stop).model,
                        SolveOptions(time_limit_s=seconds, cancel=stop.cancel))
    if out.values is None:
        return []
    reasons = []
    for s in problem.services:
        if not s.redundancy_domain or s.redundancy_domain == "instance":
            continue
        places = {(problem.offer(c.offer_id).provider,) if s.redundancy_domain == "provider"
                  else (problem.offer(c.offer_id).provider, problem.offer(c.offer_id).region)
                  for c in problem.configs if c.service == s.name}
        if len(places) == 1:
            where = "/".join(next(iter(places)))
            reasons.append(InfeasibilityReason(
                f"redundancy[{s.name}]", f"{s.name}'s configurations all sit in one {s.redundancy_domain} ({where}): no plan survives "
                f"losing it.", "allow more regions or providers (constraints.regions, providers, gpu_types), or lower "
                "the service's redundancy domain", service=s.name))
    return reasons or [InfeasibilityReason(
        "redundancy", "a fleet meets demand, but none survives the loss of one failure domain within min/max "
        "replicas.", "raise max_replicas, allow more regions, providers or offers, or lower "
        "redundancy.serve_fraction")]


def _sites_over(problem: Problem, form, values) -> list[tuple[object, float]]:
    """(site, kW) for each capped site whose cap the fleet in `values` exceeds."""
    from solver.compile.power import site_power_kw

    running = {offer_id: int(round(values[i])) for offer_id, i in form.n.items()}
    return [(site, kw) for site in problem.power.sites
            if (kw := site_power_kw(site, running)) > site.cap_kw * (1 + 1e-9) + 1e-9]


def _site_reason(problem: Problem, site, kw: float, without: str) -> InfeasibilityReason:
    return InfeasibilityReason(
        f"power[{site.name}]", f"site {site.name}'s power cap of {site.cap_kw:g} kW binds: the cheapest fleet without "
        f"{without} runs owned servers there drawing {kw:.4g} kW (board power at full load), and no mix of the "
        "other allowed offers makes up for it.",
        f"raise site {site.name}'s power_cap_kw (that fleet fits in {math.ceil(kw * 100) / 100:g} kW), allow cloud "
        "offers to take the rest (constraints.providers, gpu_types, regions), or lower demand")


def _power_caps(problem: Problem, relaxed) -> list[InfeasibilityReason]:
    """The capped sites to blame, each proven by a re-solve: without every cap a plan exists
    (else [] - the caps are not the cause); then each site over its cap in that plan is
    relaxed alone, and the sites whose cap alone blocks every plan are named; when none
    alone does, every site the plan exceeds is named (their caps bind together)."""
    form, out = relaxed(budget=False, quotas=True, power=False)
    if out is None or out.values is None:
        return []
    over = _sites_over(problem, form, out.values)
    if len(over) > 1:
        alone = []
        for site, kw in over:
            f1, o1 = relaxed(budget=False, quotas=True, power=frozenset({site.name}))
            if o1 is not None and o1.values is not None:
                alone.append((site, kw))
        over = alone or over
    return [_site_reason(problem, site, kw, "the cap" if len(over) == 1 else "the caps") for site, kw in over]


def unexplained_reason() -> InfeasibilityReason:
    """The MIP found no fleet, yet every relaxation the diagnosis tried has one within all
    the constraints it knows: a contradiction it cannot resolve, said as such."""
    return InfeasibilityReason(
        "unexplained", "the solver reported no feasible fleet, but the diagnosis found one within every constraint it "
        "re-solved; the claim is not proven.", "retry with another backend (solver.backend) or report the workload")


def _replica_limits(problem: Problem) -> list[InfeasibilityReason]:
    """max_replicas below what the demand needs even on each class's fastest configuration
    (`fleet_size.replicas_needed`: replicas time-share classes)."""
    needed = replicas_needed(problem)
    out = []
    for s in problem.services:
        need = needed[s.name]
        if s.max_replicas is not None and need > s.max_replicas + 1e-9:
            out.append(InfeasibilityReason(
                f"replicas[{s.name}]", f"{s.name}: its demand needs at least {math.ceil(need - 1e-9)} replicas even on "
                f"its fastest configurations; max_replicas is {s.max_replicas}.",
                f"raise max_replicas to at least {math.ceil(need - 1e-9)}, or lower the demand", s.name))
    return out
