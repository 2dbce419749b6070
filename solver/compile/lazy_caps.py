"""Exact percentile caps, computed only where a plan needs them.

A configuration of a service with a percentile SLO enters the problem with an upper bound
on its usable rate (`Config.pending_cap` set; solver/compile/load_caps.py). The planner
solves, computes the exact cap (the queueing model's search) of every pending
configuration its plan uses, and solves again, until the plan uses none:

* the problem with upper bounds is a relaxation (every plan that meets the exact caps
  meets the bounds), so its optimum costs at most the true optimum;
* a relaxed optimum that uses only exact configurations is a plan of the true problem,
  hence optimal for it. Each round makes at least one more configuration exact, so the
  loop ends, at worst with every cap computed.

Pruning never lets a pending configuration dominate another (solver/compile/pruning.py),
so nothing that could be optimal is dropped on the strength of a bound.
"""

from __future__ import annotations

from dataclasses import replace

from solver.compile.load_caps import _kind, exact_cap
from solver.compile.problem import Problem, Rejection


def pending_keys(problem: Problem, config_keys) -> set[str]:
    """The configurations among `config_keys` whose cap is still an upper bound."""
    return set(problem.pending_config_keys.intersection(config_keys))


def has_pending(problem: Problem) -> bool:
    return bool(problem.pending_config_keys)


def resolve_caps(problem: Problem, keys: set[str] | None = None) -> Problem:
    """The problem with the exact cap of each pending configuration in `keys` (all when
    None); one that meets the SLO at no load becomes a rejection, as when built eagerly."""
    configs = []
    rejections = list(problem.rejections)
    for c in problem.configs:
        if c.pending_cap is None or (keys is not None and c.key not in keys):
            configs.append(c)
            continue
        exact = exact_cap(c)
        if all(k.throughput <= 0 for k in exact.classes):
            reason = next((k.reason for k in exact.classes if k.reason), "misses its SLO under any load")
            rejections.append(Rejection(c.service, c.offer_id, problem.offer(c.offer_id).gpu, c.gpus_per_replica,
                                        c.precision, _kind(reason), reason))
            continue
        configs.append(exact)
    return replace(problem, configs=tuple(configs), rejections=tuple(rejections))


def frontier_keys(problem: Problem, services: set[str]) -> set[str]:
    """Pending configurations of `services` whose bound makes them look cheaper per unit of
    rate than the best exact configuration of their service: the ones the next solves
    would try one at a time. Computing them together saves rounds (each round is a MIP);
    which ones are computed never changes the answer, only how soon the loop ends."""
    def usd_per_rate(c) -> float:
        o = problem.offer(c.offer_id)
        price = o.price_usd_per_hour * c.instances_per_replica * min(c.gpus_per_replica / o.gpus_per_instance, 1.0)
        rate = max(k.throughput for k in c.classes)
        return price / rate if rate > 0 else float("inf")

    best_exact: dict[str, float] = {}
    for c in problem.configs:
        if c.service in services and c.pending_cap is None:
            best_exact[c.service] = min(best_exact.get(c.service, float("inf")), usd_per_rate(c))
    return {c.key for c in problem.configs
            if c.service in services and c.pending_cap is not None
            and usd_per_rate(c) < best_exact.get(c.service, float("inf"))}
