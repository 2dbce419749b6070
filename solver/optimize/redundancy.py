"""Failure domains in the MIP (constraints.redundancy; docs/redundancy.md).

A service s with a domain must still serve N_s (serve_fraction x its demand without
headroom, per class k) after losing any one domain d, with its SLO-capped rates:

  places (zone, region, provider): groups never span two places (formulation.build splits
  them), so for every place d the service could use
      one class:   sum_{G not in d} t_G R_G >= N_s                         survive[s,d]
      classes:     sum_{G not in d} x^d_Gk >= N_sk,  sum_k x^d_Gk / t_Gk <= R_G
                   (the survivors' own routing: traffic moves after a failure)
  instance: every group is one configuration on one offer o (no pooling). One instance of o
  holds at most m_G = G_o / g_G replicas of G (1 for replicas of whole instances), so it
  takes u_G >= min(R_G, m_G) of them:
      u_G >= R_G - ub(R_G) b_G,  u_G >= m_G b_G,  b_G binary    (u_G = R_G when ub(R_G) <= m_G)
      one class:   sum_G t_G R_G - sum_{G on o} t_G u_G >= N_s            survive[s,o]
      classes:     capacity rows with R_G - u_G for G on o
  The instance rows count each configuration's worst case at once: exact when a service
  runs one configuration per offer (the usual plan), a safe over-count when it runs
  several on one offer (their replicas share the instance's GPUs).

Exact: a plan meets the rows iff it survives every single-domain loss (for instances, in
the worst packing of one configuration per offer); solver/survival.py checks the same
worst case by enumeration, and the evaluator re-checks it from the raw workload.
"""

from __future__ import annotations

import math

from solver.compile.problem import Config, Problem
from solver.optimize.linear import INF
from solver.survival import LOCATION_DOMAINS, Held, Survival, domain_key, worst_loss


def active(problem: Problem) -> bool:
    return any(s.redundancy_domain and sum(s.redundancy_demand) > 0 for s in problem.services)


def per_instance(c: Config, problem: Problem) -> int:
    """m_G: replicas of `c` one instance of its offer holds."""
    return _held(c, problem, 0).per_instance


def grouping_places(problem: Problem) -> dict[str, tuple] | None:
    """offer id -> place, for formulation.build to split groups by (None: no place domain)."""
    if not any(s.redundancy_domain in LOCATION_DOMAINS for s in problem.services):
        return None
    return {o.id: (o.provider, o.region) for o in problem.offers}


def needs_configs_apart(problem: Problem) -> bool:
    """Instance domains need every group to be one configuration on one offer."""
    return any(s.redundancy_domain == "instance" for s in problem.services)


def raised_bound(c: Config, need: int, problem: Problem) -> int:
    """A group's replica bound: with an instance domain one instance's worth more (the
    replicas demand asks for, plus those one instance can take down)."""
    if problem.service(c.service).redundancy_domain != "instance":
        return need
    return need + per_instance(c, problem)


def add_rows(f, services=None) -> None:
    """The survive rows of every service with a failure domain (formulation.build), or of
    `services` only (a service's own bound, service_bound)."""
    p, lm = f.problem, f.model
    for s in (p.services if services is None else services):
        groups = f.by_service.get(s.name, [])
        if not s.redundancy_domain or sum(s.redundancy_demand) <= 0:
            continue
        mixed = len(s.class_demand) == 1 or s.mixed_routing
        if s.redundancy_domain in LOCATION_DOMAINS:
            places = sorted({_place(g.rep, p, s.redundancy_domain) for g in groups})
            for place in places:
                kept = [g for g in groups if _place(g.rep, p, s.redundancy_domain) != place]
                survive_rows(f, s, kept, f"{s.name},{'/'.join(place)}", s.redundancy_demand)
            continue
        lost = {g.key: _lost_var(f, g) for g in groups}
        for offer_id in sorted({g.rep.offer_id for g in groups}):
            here = {g.key for g in groups if g.rep.offer_id == offer_id}
            tag = f"{s.name},{offer_id}"
            if mixed:
                terms = [(f.r[g.key], g.rep.classes[0].throughput) for g in groups]
                for g in groups:
                    if g.key in here:
                        terms.append((lost[g.key], -g.rep.classes[0].throughput))
                lm.row(f"survive[{tag}]", terms, lb=sum(s.redundancy_demand))
            else:
                _rerouted(f, s, groups, {k: lost[k] for k in here}, tag, s.redundancy_demand)


def survive_rows(f, s, kept, tag: str, need: tuple[float, ...], row: str = "survive") -> None:
    """The `kept` groups alone serve `need` (per class) with their SLO-capped rates: one row
    where every replica serves the service's mix, else the survivors' own routing."""
    if len(s.class_demand) == 1 or s.mixed_routing:
        f.model.row(f"{row}[{tag}]", [(f.r[g.key], g.rep.classes[0].throughput) for g in kept], lb=sum(need))
    else:
        _rerouted(f, s, kept, {}, tag, need, row)


def _lost_var(f, g) -> int:
    """u_G >= min(R_G, m_G): R_G itself when the bound never exceeds m_G. Remembered in
    f.lost (group key -> (u, b, m, ub)) so that hints can set them (complete_hint)."""
    lm = f.model
    r = f.r[g.key]
    m = per_instance(g.rep, f.problem)
    ub = lm.variables[r].ub
    if ub <= m:
        return r
    u = lm.var(f"lost[{g.key}]", 0, m)
    b = lm.var(f"lost_all[{g.key}]", 0, 1, integer=True)
    lm.row(f"lost_many[{g.key}]", [(u, 1.0), (r, -1.0), (b, float(ub))], lb=0.0)
    lm.row(f"lost_few[{g.key}]", [(u, 1.0), (b, -float(m))], lb=0.0)
    f.lost[g.key] = (u, b, m)
    return u


def complete_hint(f, values: list[float] | None) -> list[float] | None:
    """A plan's values with the instance domains' u_G and b_G set from its replicas (a hint
    without them breaks the lost rows, and the solver drops it)."""
    if values is None or not getattr(f, "lost", None):
        return values
    for key, (u, b, m) in f.lost.items():
        r = values[f.r[key]]
        values[b] = 1.0 if r > m else 0.0
        values[u] = float(min(r, m))
    return values


def start_replicas(form, s) -> dict[str, int] | None:
    """A plan for one service that survives its domain, to start the MIP from when its own
    MIP had no time (one class, or its mix on every replica; else None): for an instance
    domain the cheapest single configuration with max(ceil(D/t), ceil(N/t) + m) replicas;
    for a place, the two cheapest places (by price per throughput), each carrying
    max(N, D/2). Priced at the group's cheapest price per GPU."""
    from solver.optimize.service_bounds import group_cost

    if not (len(s.class_demand) == 1 or s.mixed_routing):
        return None
    p = form.problem
    groups = [g for g in form.by_service.get(s.name, []) if g.rep.classes[0].throughput > 0]
    need, demand = sum(s.redundancy_demand), s.total_demand
    ub = {g.key: form.model.variables[form.r[g.key]].ub for g in groups}
    if s.redundancy_domain == "instance":
        best = None
        for g in groups:
            t = g.rep.classes[0].throughput
            r = max(math.ceil(demand / t - 1e-9), math.ceil(need / t - 1e-9) + per_instance(g.rep, p), s.min_replicas)
            if r <= ub[g.key] and (best is None or group_cost(g, p) * r < best[0]):
                best = (group_cost(g, p) * r, {g.key: r})
        return best[1] if best else None
    by_place: dict[tuple, tuple[float, object]] = {}
    for g in groups:
        place = _place(g.rep, p, s.redundancy_domain)
        per = group_cost(g, p) / g.rep.classes[0].throughput
        if place not in by_place or per < by_place[place][0]:
            by_place[place] = (per, g)
    two = sorted(by_place.values(), key=lambda x: x[0])[:2]
    if len(two) < 2:
        return None
    out = {}
    for _, g in two:
        r = math.ceil(max(need, demand / 2) / g.rep.classes[0].throughput - 1e-9)
        if r > ub[g.key]:
            return None
        out[g.key] = r
    return out


def service_bound(form, s, groups, costs: dict[str, float], ubs: dict[str, int], stop):
    """LB_s of a service with a failure domain (solver/optimize/service_bounds.py): its own
    MIP - replicas at c_G each, demand, min/max replicas and its survive rows - on HiGHS.
    Returns (a valid lower bound or None, replicas and routed traffic of its best plan)."""
    from types import SimpleNamespace

    from solver.optimize.backends import SolveOptions, get_backend
    from solver.optimize.service_bounds import best_found, service_model

    lm, r, x = service_model(s, groups, ubs, one_row=len(s.class_demand) == 1 or s.mixed_routing)
    add_rows(SimpleNamespace(problem=form.problem, model=lm, r=r, by_service={s.name: groups}, lost={}),
             services=(s,))
    lm.objective = {r[g.key]: costs[g.key] for g in groups}
    out = get_backend("highs").solve(lm, SolveOptions(time_limit_s=max(stop.seconds_left(1.0), 0.05),
                                                      cancel=stop.cancel))
    replicas, routed = best_found(out, groups, r, x)
    # The dual bound, not the objective: it proves plans (plan.py), so it never exceeds the optimum.
    bound = out.bound if out.bound is not None and math.isfinite(out.bound) else None
    return bound, replicas, routed


def _rerouted(f, s, kept, lost: dict[str, int], tag: str, need: tuple[float, ...], row: str = "survive") -> None:
    """Several classes: the survivors' own routing x^d (capacity reduced by `lost` replicas)."""
    lm = f.model
    routed: dict[int, list] = {k: [] for k in range(len(s.class_demand))}
    for g in kept:
        share = []
        for k, perf in enumerate(g.rep.classes):
            if perf.throughput > 0 and need[k] > 0:
                x = lm.var(f"x[{g.key},{s.class_names[k]}|{tag}]", 0, INF)
                routed[k].append((x, 1.0))
                share.append((x, 1.0 / perf.throughput))
        if not share:
            continue
        terms = share + [(f.r[g.key], -1.0)]
        if g.key in lost:
            terms.append((lost[g.key], 1.0))
        lm.row(f"{row}_capacity[{g.key}|{tag}]", terms, ub=0.0)
    for k, n in enumerate(need):
        if n > 0:
            lm.row(f"{row}[{tag},{s.class_names[k]}]", routed[k], lb=n)


def _place(c: Config, p: Problem, domain: str) -> tuple[str, ...]:
    o = p.offer(c.offer_id)
    return domain_key(domain, o.provider, o.region)


def _held(c: Config, p: Problem, replicas: int) -> Held:
    o = p.offer(c.offer_id)
    return Held(c.offer_id, (o.provider, o.region), o.gpus_per_instance, c.gpus_per_replica,
                c.instances_per_replica, replicas, tuple(k.throughput for k in c.classes))


def survivals(problem: Problem, solution) -> dict[str, Survival]:
    """Each service's worst single-domain loss in a plan (the planner's own configurations)."""
    covered = {s.name for s in problem.services if s.redundancy_domain}
    mine = solution.by_service()
    used = {a.config_key for name in covered for a in mine.get(name, ())}
    configs = {c.key: c for c in problem.configs if c.key in used}
    out: dict[str, Survival] = {}
    for s in problem.services:
        if not s.redundancy_domain:
            continue
        held = [_held(configs[a.config_key], problem, a.replicas) for a in mine.get(s.name, ())
                if a.config_key in configs]
        demand = tuple(d / s.redundancy_fraction for d in s.redundancy_demand)
        out[s.name] = worst_loss(held, demand, s.redundancy_domain, s.redundancy_fraction)
    return out


def violations(problem: Problem, solution) -> list[str]:
    """Services whose plan does not survive its worst single-domain loss."""
    return [f"{name} serves {sv.surviving_fraction:.1%} of its demand after losing {sv.worst_domain}, below "
            f"serve_fraction {sv.serve_fraction:g}"
            for name, sv in survivals(problem, solution).items() if not sv.met]
