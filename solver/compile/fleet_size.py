"""Refuse, before any solve, a workload whose fleet could not be planned or written out.

Tiny documents can ask for absurd fleets: 275 bytes with `requests_per_s: 1e9` (the schema
allows it) need tens of millions of replicas, and a 10 KB running fleet can list 10^6
instances of every offer. The MIP copes with such counts as numbers, but evaluating,
placing and writing out the plan is per replica and per instance: gigabytes and minutes
(issue 26). So the work is estimated from the request first - cheap, linear in the
candidates - and refused with a clear error when it is beyond any real fleet.

The estimate is a lower bound, so nothing plannable is refused: a service needs at least
sum over classes of demand / (the most one replica of any candidate serves of that class)
replicas (the candidates' throughputs are at or above any cap the SLO puts on them), in
its busiest period.
"""

from __future__ import annotations

from collections import defaultdict

from solver.compile.problem import Problem
from solver.errors import FieldViolation, InputError

# The largest public inference fleets run ~10^5 GPUs. A plan (or running fleet) at these
# limits is evaluated, rolled out (a step per instance) and written in seconds and a few
# hundred MiB; ten times more took 36 s, 2.2 GB and a 257 MB answer (900,000 instances).
MAX_PLAN_REPLICAS = 100_000
MAX_RUNNING_INSTANCES = 100_000


def replicas_needed(problem: Problem) -> dict[str, float]:
    """Per service, a lower bound on the replicas its demand (as compiled, before period
    multipliers) needs: replicas time-share classes, so any plan runs at least
    sum_k D_k / max_c t_ck of them (also what `diagnose` holds max_replicas against)."""
    fastest: dict[tuple[str, int], float] = defaultdict(float)
    for c in problem.configs:
        for k, perf in enumerate(c.classes):
            fastest[(c.service, k)] = max(fastest[(c.service, k)], perf.throughput)
    return {s.name: sum(d / fastest[(s.name, k)] for k, d in enumerate(s.class_demand)
                        if d > 0 and fastest[(s.name, k)] > 0)
            for s in problem.services}


def check_fleet_size(problem: Problem) -> None:
    """InputError naming each service (and the running fleet) beyond the limits."""
    violations: list[FieldViolation] = []
    total = 0.0
    needed = replicas_needed(problem)
    for i, s in enumerate(problem.services):
        # in the busiest period, and never fewer than min_replicas
        need = max(max(s.period_multipliers, default=1.0) * needed[s.name], float(s.min_replicas))
        total += need
        if need > MAX_PLAN_REPLICAS:
            violations.append(FieldViolation(
                f"services[{i}].demand",
                f"service {s.name!r} needs at least {need:,.0f} replicas at its demand, even on its fastest "
                f"configuration; a plan is limited to {MAX_PLAN_REPLICAS:,} replicas.",
                "check the demand's unit and value (requests_per_s is per second), or split the workload"))
    if not violations and total > MAX_PLAN_REPLICAS:
        violations.append(FieldViolation(
            "services", f"the services together need at least {total:,.0f} replicas; a plan is limited to "
            f"{MAX_PLAN_REPLICAS:,}.", "check the demands' units and values, or split the workload"))
    h = problem.horizon
    if h is not None and h.current_fleet:
        running = sum(f.instances for f in h.current_fleet)
        if running > MAX_RUNNING_INSTANCES:
            violations.append(FieldViolation(
                "current_fleet", f"the running fleet lists {running:,} instances; at most {MAX_RUNNING_INSTANCES:,} "
                "are supported.", "list the instances that run now (counts per offer)"))
    if violations:
        raise InputError(violations)
