"""Alternatives a plan did not take, and why (`--explain`).

Per service, up to `limit` configurations it could have used instead — one per GPU type,
never the same GPU, size and precision it already runs on — each named by its offer and
instance size, with what it would cost:

* "move": exact and instant for every plan: the rest of the plan stays as it is, this
  service alone runs on the alternative (its replicas sized for its demand there), and
  instances are re-counted offer by offer. An upper bound on the best fleet that uses
  the alternative, since re-optimising the others could only make it cheaper.
* "re-solve": on small models (as the tie-break, TIE_BREAK_MAX_INTEGER_VARIABLES), the
  cheapest whole fleet with the service forced onto the alternative, from a MIP under a
  node limit: proven ("exact") when it finishes within it.

Neither depends on the clock, so the same plan always gets the same explanation. The
call's deadline can still end the explanation early (the rest is then left out and the
last entry says so); a cancel stops it at once.
"""

from __future__ import annotations

import math
from collections import defaultdict

from solver.compile.power import power_violations
from solver.compile.problem import Config, Problem
from solver.interrupt import Stop
from solver.optimize.solution import Solution
from solver.optimize.tiebreak import TIE_BREAK_MAX_INTEGER_VARIABLES, TIE_BREAK_NODES
from solver.output.result import Alternative

# Cost differences within the cost MIP's absolute gap (SolveOptions.absolute_gap) are ties:
# far below any real price difference (prices have at most 6 decimals).
TIE_USD_PER_HOUR = 1e-6


def alternatives_for(service: str, problem: Problem, form, solution: Solution, *, backend_name: str,
                     stop: Stop, limit: int = 4, proven: bool = False) -> list[Alternative]:
    """Nearest alternatives not taken (dearer configurations with their cost) and the
    nearest ruled-out ones with their reason. `proven`: the plan is proven optimal (so no
    alternative can be cheaper)."""
    out: list[Alternative] = []
    resolve = form.model.size["integer_variables"] <= TIE_BREAK_MAX_INTEGER_VARIABLES
    for c in _picks(service, problem, form, solution, limit):
        if stop.cancelled:
            stop.check("the explanation")
        if stop.seconds_left(1.0) <= 0.0:
            out.append(Alternative(f"{service}@-", "", 0, None, "time_limit",
                                   "the call's deadline ended the explanation here"))
            return out
        out.append(_priced(c, service, problem, solution, backend_name, stop, resolve, proven))
    out.extend(_ruled_out(service, problem))
    return out


def _picks(service: str, problem: Problem, form, solution: Solution, limit: int) -> list[Config]:
    """The cheapest-looking configuration of each other GPU type (or size or precision)."""
    used = {a.config_key for a in solution.assignments if a.service == service}
    used_shapes = {(problem.offer(a.offer_id).gpu, a.gpus_per_replica, a.precision)
                   for a in solution.assignments if a.service == service}
    demand = problem.service(service)

    def alone_cost(c: Config) -> float:
        offer = problem.offer(c.offer_id)
        per_replica = offer.price_usd_per_hour * c.gpus_per_replica / offer.gpus_per_instance
        tput = sum(k.throughput for k in c.classes) / max(len(c.classes), 1)
        return per_replica * max(demand.total_demand / tput if tput else math.inf, demand.min_replicas, 1)

    seen_gpu: set[str] = set()
    picks = []
    mine = [c for c in problem.configs if c.service == service and c.key not in used
            and (problem.offer(c.offer_id).gpu, c.gpus_per_replica, c.precision) not in used_shapes]
    for c in sorted(mine, key=lambda c: (alone_cost(c), c.key)):
        gpu = problem.offer(c.offer_id).gpu
        if gpu in seen_gpu:
            continue
        seen_gpu.add(gpu)
        picks.append(c)
        if len(picks) == limit:
            break
    return picks


def _priced(c: Config, service: str, problem: Problem, solution: Solution, backend_name: str, stop: Stop,
            resolve: bool, proven: bool = False) -> Alternative:
    offer = problem.offer(c.offer_id)
    base_cost = sum(problem.offer(o).price_usd_per_hour * n for o, n in solution.fleet)
    moved, why_not, refused = move_cost(c, service, problem, solution)
    exact_delta = None
    if resolve:
        exact_delta = _resolve_delta(c, service, problem, base_cost, backend_name, stop)
    alt = Alternative(c.key, offer.gpu, c.gpus_per_replica, c.precision, "dearer", "", offer_id=offer.id,
                      gpus_per_instance=offer.gpus_per_instance)
    if exact_delta == "infeasible":
        # Proven by the re-solve; which rule rules it out is not (a quota, availability, the
        # budget, a replica limit, a failure domain, a power cap or the region rule).
        alt.verdict = "infeasible"
        alt.reason = "no feasible fleet with this service on it (the re-solve proves none exists)"
        return alt
    if exact_delta is None and moved is None:
        alt.verdict = refused
        alt.reason = f"moving this service here {why_not}"
        return alt
    tol = tie_tolerance(base_cost)
    if isinstance(exact_delta, float):
        alt.delta_usd_per_hour, alt.exact, alt.basis = round(exact_delta, 6), True, "re-solve"
        alt.verdict, alt.reason = _compared(exact_delta, "cheapest whole fleet with this service here", True,
                                            proven, tol)
        return alt
    if _has_domain(problem.service(service)):
        # One configuration alone keeps no N+1: the move would not be a plan of this problem.
        alt.verdict = "not_priced"
        alt.reason = ("not priced: moving only this service here ignores its failure domain "
                      "(constraints.redundancy); --explain re-solves exactly only on smaller models")
        return alt
    delta = moved - base_cost
    alt.delta_usd_per_hour, alt.basis = round(delta, 6), "move"
    alt.verdict, alt.reason = _compared(delta, "this service moved here, the rest of the plan kept", False, proven,
                                        tol)
    return alt


def tie_tolerance(cost_usd_per_hour: float) -> float:
    """Cost differences this small are ties: the cost MIP's absolute gap, or the margin a
    plan proven by the services' own bounds may sit above them, whichever is larger."""
    from solver.optimize.formulation import bound_reached

    return max(TIE_USD_PER_HOUR, bound_reached(cost_usd_per_hour))


def _compared(delta_usd_per_hour: float, basis: str, exact: bool, proven: bool = False,
              tol: float = TIE_USD_PER_HOUR) -> tuple[str, str]:
    """(verdict, reason) of an alternative that costs `delta_usd_per_hour` more than the
    plan: "dearer", "tie" (within `tol`: equally cheap fleets, between which the plan's
    tie-break or the solver chose), "cheaper" (possible only when the plan is not proven
    optimal), or "not_priced" where a proven plan meets a cheaper figure (a figure that
    breaks a rule the plan keeps is no alternative)."""
    if delta_usd_per_hour > tol:
        amount = f"${delta_usd_per_hour:.4f}/hour"
        return "dearer", (f"dearer by {amount} ({basis})" if exact else f"at most {amount} dearer ({basis})")
    if delta_usd_per_hour >= -tol:
        return "tie", f"as cheap ({basis}): a tie between equally cheap fleets"
    if proven:
        return "not_priced", (f"not priced: the figure ({basis}) is below the plan's proven optimum, so it breaks "
                              "a rule the plan keeps")
    return "cheaper", f"cheaper by ${-delta_usd_per_hour:.4f}/hour ({basis}): the plan is not proven optimal"


def _has_domain(s) -> bool:
    return bool(s.redundancy_domain) and sum(s.redundancy_demand) > 0


def move_cost(c: Config, service: str, problem: Problem, solution: Solution) -> tuple[float | None, str, str]:
    """Cost of the plan with `service` served only by `c` and everything else unchanged, or
    None, the reason and the rule that refuses it ("unserved", "max_replicas", "availability",
    "quota", "power", "same_region", "budget": the alternative's verdict)."""
    s = problem.service(service)
    need = 0.0
    for k, d in enumerate(s.class_demand):
        if d <= 0:
            continue
        t = c.classes[k].throughput
        if t <= 0:
            return None, f"cannot serve class {s.class_names[k]!r} ({c.classes[k].reason or 'no throughput'})", \
                "unserved"
        need += d / t  # replicas time-share the classes
    replicas = max(math.ceil(need - 1e-9), s.min_replicas, 1 if s.total_demand > 0 else 0)
    if s.max_replicas is not None and replicas > s.max_replicas:
        return None, f"would need {replicas} replicas, above max_replicas {s.max_replicas}", "max_replicas"
    gpus_used: dict[str, int] = defaultdict(int)
    for a in solution.assignments:
        if a.service != service:
            gpus_used[a.offer_id] += a.replicas * a.gpus_per_replica
    gpus_used[c.offer_id] += replicas * c.gpus_per_replica
    instances = {o: math.ceil(g / problem.offer(o).gpus_per_instance) for o, g in gpus_used.items() if g > 0}
    for o, n in instances.items():
        limit = problem.offer_limits.get(o)
        if limit is not None and n > limit:
            return None, f"would need {n} instances of {o}; {limit} are available", "availability"
    for gpu, quota in problem.gpu_quotas.items():
        used = sum(problem.offer(o).gpus_per_instance * n for o, n in instances.items() if problem.offer(o).gpu == gpu)
        if used > quota:
            return None, f"would need {used} {gpu} GPUs; the quota is {quota}", "quota"
    over = power_violations(problem, instances)
    if over:
        return None, f"would exceed a power cap: {over[0]}", "power"
    if problem.same_region == "fleet":
        regions = {(problem.offer(o).provider, problem.offer(o).region) for o in instances}
        if len(regions) > 1:
            return None, "would put the fleet in two regions (constraints.same_region is fleet)", "same_region"
    cost = sum(problem.offer(o).price_usd_per_hour * n for o, n in instances.items())
    if problem.budget_usd_per_hour is not None and cost > problem.budget_usd_per_hour + 1e-9:
        return None, f"would cost ${cost:.4f}/hour, above the budget", "budget"
    return cost, "", ""


def _resolve_delta(c: Config, service: str, problem: Problem, base_cost: float, backend_name: str,
                   stop: Stop) -> float | str | None:
    """The cheapest whole fleet with the service on `c` only: its extra cost, "infeasible",
    or None when the node limit ended the search before a proof."""
    from solver.optimize.backends import SolveOptions
    from solver.optimize.backends.base import backend_for
    from solver.optimize.formulation import build

    others = [x for x in problem.configs if x.service != service]
    form = build(problem, others + [c], stop=stop)
    res = backend_for(backend_name, form.model).solve(form.model, SolveOptions(time_limit_s=max(stop.seconds_left(3600.0), 0.05),
                                                                   node_limit=TIE_BREAK_NODES, cancel=stop.cancel))
    if res.status == "optimal":
        return res.objective - base_cost
    if res.status == "infeasible":
        return "infeasible"
    return None


def _ruled_out(service: str, problem: Problem) -> list[Alternative]:
    """Nearest ruled-out configurations: one per reason kind, on the cheapest GPUs."""
    out = []
    rejected = [r for r in problem.rejections if r.service == service]
    seen_kind: set[str] = set()
    offers = problem._offers_by_id
    for r in sorted(rejected, key=lambda r: (offers[r.offer_id].price_usd_per_gpu_hour if r.offer_id in offers else 0,
                                            r.offer_id)):
        if r.kind in seen_kind:
            continue
        seen_kind.add(r.kind)
        offer = offers.get(r.offer_id)
        out.append(Alternative(f"{service}@{r.offer_id}:{r.gpus_per_replica}gpu:{r.precision}", r.gpu,
                               r.gpus_per_replica, r.precision, r.kind, r.reason, offer_id=r.offer_id,
                               gpus_per_instance=offer.gpus_per_instance if offer else 0))
    for offer_id, why in problem.filtered_out:
        if "quota" in why:
            # A whole offer removed by a zero quota: no GPU size or precision to name.
            out.append(Alternative(f"{service}@{offer_id}", "", 0, None, "quota", f"{offer_id}: {why}",
                                   offer_id=offer_id))
            break
    return out
