"""A re-plan's start: the running fleet kept, its replicas kept, each service's shortfall added.

A re-plan's optimum is usually a few changes from the running fleet (demand moved a little,
and every change costs), while the greedy plan builds each service alone from scratch - tens
of changes away. Started from the greedy plan alone, the MIP spent most of a 100-service
re-plan finding plans near the fleet (bench/horizon_scaling.py --case replan: 641 $ at the
start against an optimum of 514 $, and 5-130 s to reach it). This plan is only a start and
an upper bound: the MIP still proves what is optimal.

How: every running replica whose configuration is still a candidate stays; each service's
demand is routed over its kept replicas class by class (time-shared, as the model's rows
are), and what they cannot carry goes to new replicas on the configuration that serves
that class cheapest alone (the greedy plan's choice); min_replicas is met the same way.
Every running instance of the market stays (up to the offer's limit, on offers the plan
may still use), and more are bought where the replicas need them. Quotas, budgets and the
rest are checked by the caller (evaluate_quick).
"""

from __future__ import annotations

import math

from solver.compile.problem import Config, Problem
from solver.optimize.solution import Assignment, Solution

_EPS = 1e-9


def keep_start(problem: Problem, configs: list[Config], spot: bool = False) -> Solution | None:
    """The running fleet of the market (`spot`), its replicas and the shortfall's; None when
    a service has no configuration for a class it must serve, or exceeds max_replicas."""
    h = problem.horizon
    if h is None or not h.current_fleet:
        return None
    by_service: dict[str, list[Config]] = {}
    for c in configs:
        by_service.setdefault(c.service, []).append(c)
    replicas: dict[str, int] = {}
    by_key: dict[str, Config] = {}
    fleet = _Fleet(problem)
    allowed = {o.id for o in problem.offers}
    for f in h.current_fleet:
        if f.spot != spot or f.offer_id not in allowed:
            continue  # the other market's, or an offer the plan may no longer use: they go
        fleet.running[f.offer_id] = fleet.running.get(f.offer_id, 0) + f.instances
        for rep in f.replicas:
            c = running_config(by_service.get(rep.service, ()), f.offer_id, rep.gpus_per_replica, rep.precision)
            if c is not None and rep.count > 0:
                replicas[c.key] = replicas.get(c.key, 0) + rep.count
                by_key[c.key] = c
    routed: dict[str, list[float]] = {}
    short: list[tuple] = []  # (service, class, demand the kept replicas cannot carry)
    services = [s for s in problem.services if not s.role]  # pools: their parent is served by replicas, as greedily
    for s in services:
        kept = sorted((by_key[k] for k in replicas if by_key[k].service == s.name), key=lambda c: c.key)
        time_left = {c.key: float(replicas[c.key]) for c in kept}
        for c in kept:
            routed[c.key] = [0.0] * len(s.class_demand)
        for k, d in enumerate(s.class_demand):
            left = d
            for c in kept:  # time-shared: sum_k routed_k / t_k <= replicas
                t = c.throughputs[k]
                if left <= _EPS or t <= 0 or time_left[c.key] <= _EPS:
                    continue
                x = min(left, time_left[c.key] * t)
                routed[c.key][k] += x
                time_left[c.key] -= x / t
                left -= x
            if left > _EPS:
                short.append((s, k, left))
        # Replicas the demand no longer needs free their GPUs for others' shortfalls.
        spare = sum(replicas[c.key] for c in kept) - s.min_replicas
        for c in kept:
            drop = min(int(time_left[c.key] + _EPS), replicas[c.key], max(spare, 0))
            replicas[c.key] -= drop
            spare -= drop
    for offer_id, limit in problem.offer_limits.items():  # more than the limit cannot stay
        if offer_id in fleet.running:
            fleet.running[offer_id] = min(fleet.running[offer_id], limit)
    for key, r in replicas.items():
        fleet.place(by_key[key], r)
    for s, k, left in short:  # then each shortfall where it costs least: free slots first
        c = fleet.cheapest(by_service.get(s.name, []), k, left)
        if c is None:
            return None
        n = math.ceil(left / c.throughputs[k] - _EPS)
        _add(replicas, by_key, routed, c, n, len(s.class_demand))
        fleet.place(c, n)
        routed[c.key][k] += left
    for s in services:
        mine = by_service.get(s.name, [])
        have = sum(replicas.get(c.key, 0) for c in mine)
        if have < s.min_replicas:
            if not mine:
                return None
            c = min(mine, key=lambda c: (fleet.gpu_cost(c, s.min_replicas - have), c.key))
            _add(replicas, by_key, routed, c, s.min_replicas - have, len(s.class_demand))
            fleet.place(c, s.min_replicas - have)
        if s.max_replicas is not None and sum(replicas.get(c.key, 0) for c in mine) > s.max_replicas:
            return None
    assignments = tuple(sorted(
        (Assignment(k, by_key[k].service, by_key[k].offer_id, by_key[k].gpus_per_replica, by_key[k].precision, r,
                    tuple(routed.get(k, ())), by_key[k].instances_per_replica) for k, r in replicas.items() if r),
        key=lambda a: (a.service, a.config_key)))
    return Solution(tuple(sorted((o, n) for o, n in fleet.instances().items() if n > 0)), assignments)


class _Fleet:
    """Instances per offer as replicas are placed: the running ones stay; GPUs of
    single-instance replicas pack into instances, replicas spanning instances take whole ones."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.running: dict[str, int] = {}
        self.gpus: dict[str, int] = {}
        self.spanning: dict[str, int] = {}

    def _count(self, offer_id: str, gpus: int, spanning: int) -> int:
        per_instance = self.problem.offer(offer_id).gpus_per_instance
        return max(self.running.get(offer_id, 0), math.ceil(gpus / per_instance - _EPS) + spanning)

    def place(self, c: Config, n: int) -> None:
        o = c.offer_id
        if c.instances_per_replica > 1:
            self.spanning[o] = self.spanning.get(o, 0) + n * c.instances_per_replica
        else:
            self.gpus[o] = self.gpus.get(o, 0) + n * c.gpus_per_replica

    def cheapest(self, mine: list[Config], k: int, demand: float) -> Config | None:
        """The configuration that adds `demand` of class k for the least price per hour:
        free slots of the instances already there cost nothing, other GPUs their share of
        an instance's price (not the whole instance's: the next shortfalls fill the rest, as
        the services' own bounds price GPUs), then the fewest GPUs, then by key."""
        best = None
        for c in mine:
            t = c.throughputs[k]
            if t <= 0:
                continue
            n = math.ceil(demand / t - _EPS)
            key = (self.gpu_cost(c, n), n * c.gpus_per_replica * c.instances_per_replica, c.key)
            if best is None or key < best[0]:
                best = (key, c)
        return best[1] if best else None

    def gpu_cost(self, c: Config, n: int) -> float:
        offer = self.problem.offer(c.offer_id)
        if c.instances_per_replica > 1:
            return n * c.instances_per_replica * offer.price_usd_per_hour
        o = c.offer_id
        free = self._count(o, self.gpus.get(o, 0), self.spanning.get(o, 0)) * offer.gpus_per_instance \
            - self.gpus.get(o, 0) - self.spanning.get(o, 0) * offer.gpus_per_instance
        extra = max(0, n * c.gpus_per_replica - free)
        return extra * offer.price_usd_per_hour / offer.gpus_per_instance

    def instances(self) -> dict[str, int]:
        return {o: self._count(o, self.gpus.get(o, 0), self.spanning.get(o, 0))
                for o in set(self.running) | set(self.gpus) | set(self.spanning)}


def running_config(mine, offer_id: str, gpus_per_replica: int, precision: str | None) -> Config | None:
    """The candidate configuration running replicas are on; None if it is no longer one. A
    running replica without a precision is a measured-profile one (the schema's meaning,
    and the rollout's: solver/plan_horizon.py names it `:measured`), never a guess among a
    model's precisions."""
    found = [c for c in mine if c.offer_id == offer_id and c.gpus_per_replica == gpus_per_replica
             and c.precision == precision]
    return min(found, key=lambda c: c.key) if found else None


def _add(replicas: dict, by_key: dict, routed: dict, c: Config, n: int, classes: int) -> None:
    replicas[c.key] = replicas.get(c.key, 0) + n
    by_key[c.key] = c
    routed.setdefault(c.key, [0.0] * classes)
