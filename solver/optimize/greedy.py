"""Greedy baseline: each service alone on the configuration that serves it cheapest.

No instance sharing between services or configurations, and no quota or budget
awareness. Used as the warm start and upper bound of the MIP, and by the tests as the
baseline the optimum must never exceed.
"""

from __future__ import annotations

import math
from itertools import groupby
from operator import attrgetter

from solver.compile.problem import Config, Problem
from solver.optimize.solution import Assignment, Solution


def _alone_cost(c: Config, replicas: int, p: Problem) -> tuple[float, int]:
    offer = p.offer(c.offer_id)
    instances = math.ceil(replicas * c.gpus_per_replica / offer.gpus_per_instance - 1e-9)
    return instances * offer.price_usd_per_hour, instances


_SERVICE = attrgetter("service")


def greedy_solution(p: Problem, configs: list[Config] | None = None) -> Solution | None:
    configs = list(p.configs if configs is None else configs)
    replicas: dict[str, int] = {}
    routed: dict[str, list[float]] = {}
    by_key: dict[str, Config] = {}  # the chosen configurations
    by_service: dict[str, list[Config]] = {}
    for name, run in groupby(configs, _SERVICE):  # runs of one service (candidates come service by service)
        found = by_service.get(name)
        if found is None:
            by_service[name] = list(run)
        else:
            found.extend(run)
    offers = {o.id: (o.price_usd_per_hour, o.gpus_per_instance) for o in p.offers}
    ceil = math.ceil
    for s in p.services:
        if s.role:  # a disaggregated pool: the greedy plan serves its parent aggregated
            continue
        mine = by_service.get(s.name, [])
        if not mine:
            return None
        placed = 0  # replicas placed for this service below
        for k, d in enumerate(s.class_demand):
            if d <= 0:
                continue
            best = None
            best_cost = 0.0
            for c in mine:
                t = c.throughputs[k]
                if t <= 0:
                    continue
                r = ceil(d / t - 1e-9)
                price, per_instance = offers[c.offer_id]  # _alone_cost, inlined
                g = c.gpus_per_replica
                cost = ceil(r * g / per_instance - 1e-9) * price
                # Only a cost no higher can win the (cost, GPUs, key) comparison below
                # (a NaN loses both ways): most configurations stop here, untupled.
                if best is not None and not cost <= best_cost:
                    continue
                key = (cost, r * g, c.key)
                if best is None or key < best[0]:
                    best = (key, c, r)
                    best_cost = cost
            if best is None:
                return None
            _, c, r = best
            by_key[c.key] = c
            replicas[c.key] = replicas.get(c.key, 0) + r
            routed.setdefault(c.key, [0.0] * len(s.class_demand))[k] += d
            placed += r
        # The replicas of `mine` are at least those placed above (each one of `mine`):
        # counted over every configuration only when that may be short of min_replicas.
        if placed >= s.min_replicas:
            continue
        have = sum(replicas.get(c.key, 0) for c in mine)
        if have < s.min_replicas:
            c = min(mine, key=lambda c: (_alone_cost(c, 1, p)[0], c.key))
            by_key[c.key] = c
            replicas[c.key] = replicas.get(c.key, 0) + s.min_replicas - have
            routed.setdefault(c.key, [0.0] * len(s.class_demand))
    gpus_per_offer: dict[str, int] = {}
    fleet: dict[str, int] = {}
    for key, r in replicas.items():
        c = by_key[key]
        # Alone: each configuration gets its own instances.
        _, instances = _alone_cost(c, r, p)
        fleet[c.offer_id] = fleet.get(c.offer_id, 0) + instances
        gpus_per_offer[c.offer_id] = gpus_per_offer.get(c.offer_id, 0) + r * c.gpus_per_replica
    assignments = tuple(sorted(
        (Assignment(k, by_key[k].service, by_key[k].offer_id, by_key[k].gpus_per_replica, by_key[k].precision, r,
                    tuple(routed[k]), by_key[k].instances_per_replica) for k, r in replicas.items()),
        key=lambda a: (a.service, a.config_key)))
    return Solution(tuple(sorted(fleet.items())), assignments)


def solution_cost(p: Problem, sol: Solution) -> float:
    return sum(p.offer(o).price_usd_per_hour * n for o, n in sol.fleet)
