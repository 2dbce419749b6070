"""Discrete-event simulation of a measured-profile replica: c parallel servers, FCFS.

A measured profile gives a replica's throughput mu (items or requests per second) and the
latency L of one item. The replica is c = max(1, round(mu x L)) servers (Little's law:
mu x L items are in service when it runs flat out), each taking c / mu seconds per item,
so it serves mu per second and an item alone takes about L. Arrivals are the same renewal
process as the LLM simulator's (gamma inter-arrival times with CV `arrival_cv`), or a
trace's times. The loop is `kernel.servers_core`.
"""

from __future__ import annotations

import math

import numpy as np

from solver.sim import kernel


def servers_for(throughput_per_s: float, latency_s: float | None) -> tuple[int, float]:
    """(servers, seconds per item) for a measured replica."""
    c = max(1, round(throughput_per_s * latency_s)) if latency_s else 1
    return c, c / throughput_per_s


def serve(arrival_s: np.ndarray, servers: int, service_s: float) -> np.ndarray:
    """Start time of each item (arrivals non-decreasing), FCFS on identical servers."""
    arrival_s = np.ascontiguousarray(arrival_s, dtype=np.float64)
    start = np.zeros(len(arrival_s))
    if kernel.jit_enabled():
        kernel.compiled().servers_core(arrival_s, int(servers), float(service_s), start)
        return start
    out = start.tolist()
    kernel.compiled().servers_core(arrival_s.tolist(), int(servers), float(service_s), out)
    return np.asarray(out, dtype=float)


def waiting_at(arrival_s: np.ndarray, start_s: np.ndarray, k: int) -> int:
    """Items waiting (arrived, not started) just before item k arrives (starts are non-decreasing)."""
    return int(k - np.searchsorted(start_s[:k], arrival_s[k], side="right"))


def simulate_servers(throughput_per_s: float, latency_s: float | None, rate_per_s: float, *, duration_s: float,
                     seed: int = 0, arrival_cv: float = 1.0, warmup_s: float | None = None) -> np.ndarray:
    """Latency (s) of each item arriving in [warmup_s, duration_s]; the run drains them."""
    if rate_per_s <= 0 or not math.isfinite(rate_per_s):
        raise ValueError(f"rate_per_s must be a positive finite number, got {rate_per_s}")
    c, service = servers_for(throughput_per_s, latency_s)
    warmup = duration_s * 0.1 if warmup_s is None else warmup_s
    rng = np.random.default_rng(seed)
    mean = 1.0 / rate_per_s
    n = int(rate_per_s * duration_s * 1.2) + 64
    if arrival_cv > 0:
        shape = 1.0 / (arrival_cv * arrival_cv)
        gaps = rng.gamma(shape, mean / shape, size=n)
    else:
        gaps = np.full(n, mean)
        gaps[0] = rng.uniform(0.0, mean)
    arrivals = np.cumsum(gaps)
    arrivals = arrivals[arrivals <= duration_s]
    out = serve(arrivals, c, service) + service - arrivals
    return out[arrivals >= warmup]
