"""Latency under load of a measured-profile replica: c parallel servers (M/G/c).

A measured profile gives a replica's throughput mu (per second) and the latency L of one
item. As in the simulator (`solver.sim.servers`), the replica is c = max(1, round(mu L))
servers, each taking s = c / mu seconds per item (deterministic), first come first
served. With arrivals of rate lambda and inter-arrival CV c_a:

    P(wait > 0) = Erlang-C(c, a = lambda s)                       (Poisson arrivals)
    P(wait > t) ~ P(wait > 0) exp(-t (c/s - lambda) / f),   f = (c_a^2 + c_s^2) / 2, c_s = 0

(Allen-Cunneen's scaling of the M/M/c wait to general arrivals and service times.) The
p-quantile of an item's latency is s plus the wait's p-quantile: 0 while
P(wait > 0) <= 1 - p, else ln(P(wait > 0) / (1 - p)) f / (c/s - lambda).
"""

from __future__ import annotations

import math

from solver.perf.queueing.search import DEFAULT_MAX_UTILIZATION

_C_S2 = 0.0  # the simulator's servers take exactly s per item


def servers_for(throughput_per_s: float, latency_s: float | None) -> tuple[int, float]:
    """(servers, seconds per item) of a measured replica (the simulator's rule)."""
    c = max(1, round(throughput_per_s * latency_s)) if latency_s else 1
    return c, c / throughput_per_s


def erlang_c(c: int, a: float) -> float:
    """Probability an arrival waits in M/M/c with offered load a = lambda s (a < c)."""
    if a <= 0:
        return 0.0
    if a >= c:
        return 1.0
    term, total = 1.0, 1.0  # a^k / k!, summed for k < c, computed stably
    for k in range(1, c):
        term *= a / k
        total += term
    last = term * a / c  # a^c / c!
    top = last * c / (c - a)
    return top / (total + top)


def latency_quantile_s(throughput_per_s: float, latency_s: float | None, rate_per_s: float, p: float,
                       arrival_cv: float = 1.0) -> float:
    """The p-quantile (0 < p < 1) of an item's latency at `rate_per_s` (inf at saturation)."""
    c, s = servers_for(throughput_per_s, latency_s)
    if rate_per_s <= 0:
        return s
    slack = c / s - rate_per_s
    if slack <= 0:
        return math.inf
    waits = erlang_c(c, rate_per_s * s)
    if waits <= 1 - p:
        return s
    f = (arrival_cv ** 2 + _C_S2) / 2
    if f <= 0:  # paced arrivals below saturation never queue (D/D/c)
        return s
    return s + math.log(waits / (1 - p)) * f / slack


def wait_quantile_s(throughput_per_s: float, latency_s: float | None, rate_per_s: float, p: float,
                    arrival_cv: float = 1.0) -> float:
    """The p-quantile of the wait before service starts (what queueing adds to TTFT and latency)."""
    _, s = servers_for(throughput_per_s, latency_s)
    return latency_quantile_s(throughput_per_s, latency_s, rate_per_s, p, arrival_cv) - s


def measured_max_rate(throughput_per_s: float, latency_s: float | None, percentile: int, wait_budget_s: float,
                      arrival_cv: float = 1.0, max_utilization: float = DEFAULT_MAX_UTILIZATION) -> float:
    """The largest rate per replica at which the p-th percentile wait stays within
    `wait_budget_s` (the SLO minus the measured time), at most max_utilization x
    throughput; 0.0 when the budget is negative."""
    if wait_budget_s < 0:
        return 0.0
    p = percentile / 100
    top = max_utilization * throughput_per_s
    if wait_quantile_s(throughput_per_s, latency_s, top, p, arrival_cv) <= wait_budget_s:
        return top
    lo, hi = 0.0, top  # the quantile rises with the rate: bisect to 0.1 % of the throughput
    while hi - lo > 1e-3 * throughput_per_s:
        mid = 0.5 * (lo + hi)
        if wait_quantile_s(throughput_per_s, latency_s, mid, p, arrival_cv) <= wait_budget_s:
            lo = mid
        else:
            hi = mid
    return lo
