"""The fleet planning MIP.

Sets: services s, request classes k of s, offers o, configurations c (each of one
service s(c), one offer o(c), g_c GPUs per replica, per-class throughput t_ck).

Variables
  n_o  in Z+   instances of offer o            (<= availability / quota)
  r_c  in Z+   replicas of configuration c
  x_ck >= 0    class-k traffic routed to c     (only for services with several classes)

Minimise  sum_o price_o * n_o                                   [cost, $/hour]
s.t.
  demand[s]      sum_c t_c r_c >= D_s                     (one class: no routing variables)
  demand[s,k]    sum_c x_ck >= D_sk                       (several classes)
  capacity[c]    sum_k x_ck / t_ck <= r_c                 (replicas time-share the classes:
                                                           exact for fractional routing)
  min_replicas[s] sum_c r_c >= m_s ;  max_replicas[s] sum_c r_c <= M_s
  pack[o]        sum_{c on o} g_c r_c <= G_o n_o          (exact: replica sizes are powers of
                                                           two dividing G_o, or whole instances)
  quota[t]       sum_{o of GPU t} G_o n_o <= Q_t
  budget         sum_o price_o n_o <= B

Tie-break: a second solve with the cost fixed at the optimum (+1e-6 $/h) minimises
GPUs; then idle GPUs of the chosen fleet carry extra replicas (solver/optimize/headroom.py).

The formulation is written per period so that several periods, pricing tiers and a
current fleet can be added as more index sets without changing the rows' meaning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from solver.interrupt import NEVER, Stop
from solver.optimize.linear import INF, LinearModel
from solver.compile.problem import Config, Problem


@dataclass
class Formulation:
    problem: Problem
    model: LinearModel
    configs: list[Config]
    n: dict[str, int] = field(default_factory=dict)  # offer id -> var index
    r: dict[str, int] = field(default_factory=dict)  # config key -> var index
    x: dict[tuple[str, int], int] = field(default_factory=dict)  # (config key, class) -> var index
    cost_terms: list[tuple[int, float]] = field(default_factory=list)
    gpu_terms: list[tuple[int, float]] = field(default_factory=list)
    headroom_terms: list[tuple[int, float]] = field(default_factory=list)
    by_service: dict[str, list[Config]] = field(default_factory=dict)


def replica_upper_bound(c: Config, p: Problem) -> int:
    """Replicas of one configuration beyond this are never needed (nor allowed)."""
    s = p.service(c.service)
    need = 0
    for t, d in zip((k.throughput for k in c.classes), s.class_demand):
        if t > 0 and d > 0:
            need += math.ceil(d / t - 1e-9)
    ub = max(need, s.min_replicas, 1 if s.total_demand > 0 or s.min_replicas else 0)
    if s.max_replicas is not None:
        ub = min(ub, s.max_replicas)
    limit = p.offer_limits.get(c.offer_id)
    if limit is not None:
        offer = p.offer(c.offer_id)
        ub = min(ub, limit * offer.gpus_per_instance // c.gpus_per_replica)
    return ub


def build(problem: Problem, configs: list[Config] | None = None, *, budget: bool = True,
          quotas: bool = True, stop: Stop = NEVER) -> Formulation:
    configs = list(problem.configs if configs is None else configs)
    lm = LinearModel()
    f = Formulation(problem, lm, configs)
    ub = {c.key: replica_upper_bound(c, problem) for c in configs}
    configs = [c for c in configs if ub[c.key] > 0]
    f.configs = configs
    for c in configs:
        f.by_service.setdefault(c.service, []).append(c)
    by_offer: dict[str, list[Config]] = {}
    for c in configs:
        by_offer.setdefault(c.offer_id, []).append(c)
    for o in problem.offers:
        if o.id not in by_offer:
            continue
        gpus_needed = sum(c.gpus_per_replica * ub[c.key] for c in by_offer[o.id])
        n_ub = math.ceil(gpus_needed / o.gpus_per_instance)
        if quotas and o.id in problem.offer_limits:
            n_ub = min(n_ub, problem.offer_limits[o.id])
        f.n[o.id] = lm.var(f"n[{o.id}]", 0, n_ub, integer=True)
        f.cost_terms.append((f.n[o.id], o.price_usd_per_hour))
        f.gpu_terms.append((f.n[o.id], float(o.gpus_per_instance)))
    for c in configs:
        f.r[c.key] = lm.var(f"r[{c.key}]", 0, ub[c.key], integer=True)
    stop.check("model building")
    _demand_rows(f, stop)
    _replica_rows(f)
    _packing_rows(f, by_offer)
    if quotas:
        _quota_rows(f)
    if budget and problem.budget_usd_per_hour is not None:
        lm.row("budget", f.cost_terms, ub=problem.budget_usd_per_hour)
    lm.objective = dict(f.cost_terms)
    return f


def _demand_rows(f: Formulation, stop: Stop) -> None:
    p, lm = f.problem, f.model
    for i, s in enumerate(p.services):
        if i % 64 == 0:
            stop.check("model building")
        mine = f.by_service.get(s.name, [])
        if len(s.class_demand) == 1:
            if s.class_demand[0] > 0:
                terms = [(f.r[c.key], c.classes[0].throughput) for c in mine]
                lm.row(f"demand[{s.name}]", terms, lb=s.class_demand[0])
                f.headroom_terms += [(i, t / s.class_demand[0]) for i, t in terms]
            continue
        for k, (cname, d) in enumerate(zip(s.class_names, s.class_demand)):
            terms = []
            for c in mine:
                t = c.classes[k].throughput
                if t > 0:
                    f.x[(c.key, k)] = lm.var(f"x[{c.key},{cname}]", 0, INF)
                    terms.append((f.x[(c.key, k)], 1.0))
            if d > 0:
                lm.row(f"demand[{s.name},{cname}]", terms, lb=d)
        for c in mine:
            share = [(f.x[(c.key, k)], 1.0 / c.classes[k].throughput) for k in range(len(s.class_names))
                     if (c.key, k) in f.x]
            lm.row(f"capacity[{c.key}]", share + [(f.r[c.key], -1.0)], ub=0.0)
            f.headroom_terms += [(f.r[c.key], sum(k.throughput for k in c.classes) / max(s.total_demand, 1e-9))]


def _replica_rows(f: Formulation) -> None:
    for s in f.problem.services:
        terms = [(f.r[c.key], 1.0) for c in f.by_service.get(s.name, [])]
        if s.min_replicas:
            f.model.row(f"min_replicas[{s.name}]", terms, lb=s.min_replicas)
        if s.max_replicas is not None:
            f.model.row(f"max_replicas[{s.name}]", terms, ub=s.max_replicas)


def _packing_rows(f: Formulation, by_offer: dict[str, list[Config]]) -> None:
    for o in f.problem.offers:
        if o.id not in f.n:
            continue
        terms = [(f.r[c.key], float(c.gpus_per_replica)) for c in by_offer[o.id]]
        f.model.row(f"pack[{o.id}]", terms + [(f.n[o.id], -float(o.gpus_per_instance))], ub=0.0)


def _quota_rows(f: Formulation) -> None:
    p = f.problem
    for gpu, quota in sorted(p.gpu_quotas.items()):
        terms = [(f.n[o.id], float(o.gpus_per_instance)) for o in p.offers if o.gpu == gpu and o.id in f.n]
        if terms:
            f.model.row(f"quota[{gpu}]", terms, ub=quota)


def gpu_objective(f: Formulation) -> dict[int, float]:
    """Tie-break 1: total GPUs (integer coefficients, so bounds are proven quickly)."""
    return dict(f.gpu_terms)
