"""Alternatives a plan did not take, and why (`--explain`)."""

from __future__ import annotations

import math

from solver.compile.problem import Config, Problem
from solver.interrupt import Stop
from solver.optimize.solution import Solution
from solver.output.result import Alternative


def alternatives_for(service: str, problem: Problem, form, solution: Solution, *, backend_name: str,
                     stop: Stop, limit: int = 4) -> list[Alternative]:
    """Nearest alternatives not taken: dearer configurations (exact re-solve while the
    explanation's time budget lasts, approximate after) and the nearest ruled-out ones
    with their reason. A cancel stops it at once (Cancelled)."""
    from solver.optimize.backends import SolveOptions, get_backend
    from solver.optimize.formulation import build

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
        if stop.cancelled:
            stop.check("the explanation")
        if stop.seconds_left(2.0) > 0.05:
            form2 = build(problem, others + [c])
            res = backend.solve(form2.model, SolveOptions(time_limit_s=stop.seconds_left(2.0), cancel=stop.cancel))
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
