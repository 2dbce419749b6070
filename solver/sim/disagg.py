"""Discrete-event simulation of one disaggregated deployment: prefill workers, the KV
transfer, decode workers.

The worker model (solver/perf/disagg.py) sizes each worker with queueing formulas (an
M/D/1 queue per prefill worker, a Poisson batch per decode worker). This replays the
deployment request by request, so a plan's percentiles are checked by something other
than the formulas that sized it:

* Requests arrive as a Poisson process at the rate the plan routes to the deployment.
* A router sends each to the prefill worker that would finish it first (a shared view of
  the workers' queues, as Dynamo's and llm-d's routers have); the worker prefills prompts
  one at a time, FIFO, each in D seconds (its own GPU type and size).
* The prompt's KV cache then crosses the worker's link (FIFO per prefill worker: one
  transfer at a time over its share of the network). TTFT = arrival to KV delivered.
* A decode worker (the one with the lowest share of its batch slots busy) takes the
  request at its next step boundary if a slot is free (else the request waits, FIFO).
  Each step makes one token for every running sequence and lasts step(n) seconds for n
  running (the same calibrated step the worker model uses); a sequence leaves after its
  last token. TPOT = its decode time / (output tokens - 1).

Plain Python: a deployment at tens of requests per second for a few minutes
of traffic takes a fraction of a second.
"""

from __future__ import annotations

import math
import random

from solver.dataclass_repr import dataclass
from solver.perf.api import PerfQuery
from solver.perf.disagg import decode_worker, kv_transfer_bytes, prefill_worker
from solver.perf.llm import _pipelined, _setup


@dataclass(frozen=True)
class PoolWorker:
    """One worker type of a pool and how many of it run."""

    query: PerfQuery
    count: int


@dataclass(frozen=True)
class DeploymentSim:
    requests: int  # measured (after warm-up)
    ttft_ms: dict  # percentile label -> ms ("p50", "p90", "p99")
    tpot_ms: dict
    max_decode_wait_ms: float  # longest a request waited for a decode slot


def _quantile(values: list[float], p: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    k = min(max(int(math.ceil(p / 100 * len(s))) - 1, 0), len(s) - 1)
    return s[k]


def _step_table(q: PerfQuery, slots: int) -> list[float]:
    """Seconds of one decode step with n = 0..slots sequences running."""
    s = _setup(q)
    p, o = float(q.prompt_tokens), float(max(q.output_tokens, 1))
    return [0.0] + [float(_pipelined(s, n, n, p + o / 2, 0, p).seconds) for n in range(1, slots + 1)]


def simulate_deployment(prefill: list[PoolWorker], decode: list[PoolWorker], rate_rps: float, link_gbit_s: float,
                        *, duration_s: float = 300.0, warmup_s: float = 30.0, seed: int = 0,
                        percentile: float | None = None) -> DeploymentSim:
    rng = random.Random(seed)
    link_bytes_per_s = link_gbit_s * 1e9 / 8 * prefill[0].query.calibration.link_efficiency
    # Prefill workers: (free at, service seconds, transfer free at)
    pre = []
    for w in prefill:
        worker = prefill_worker(w.query, link_gbit_s=link_gbit_s)
        for _ in range(w.count):
            pre.append([0.0, worker.prompt_ms / 1e3, 0.0])
    xfer_s = kv_transfer_bytes(prefill[0].query) / link_bytes_per_s
    # Decode workers: slots B* (as the worker model holds them) and the step table.
    dec = []
    for w in decode:
        worker = decode_worker(w.query, link_gbit_s=link_gbit_s, percentile=percentile)
        table = _step_table(w.query, worker.batch)
        for _ in range(w.count):
            dec.append({"slots": worker.batch, "table": table})
    output = max(decode[0].query.output_tokens, 1)
    # 1. Arrivals and prefill (FIFO per worker, router picks the earliest finish).
    t, arrivals = 0.0, []
    while t < duration_s:
        t += rng.expovariate(rate_rps)
        arrivals.append(t)
    delivered = []  # (KV delivered at, arrival)
    for a in arrivals:
        w = min(pre, key=lambda x: max(x[0], a) + x[1])
        start = max(w[0], a)
        done = start + w[1]
        w[0] = done
        send = max(done, w[2])
        w[2] = send + xfer_s
        delivered.append((send + xfer_s, a))
    delivered.sort()
    ttft = [(d - a) * 1e3 for d, a in delivered if a >= warmup_s]
    # 2. Decode: route each delivered request to the worker with the lowest share of its
    # slots claimed; each worker runs steps, admitting at step boundaries.
    tpot, waits = [], []
    claimed = [0] * len(dec)
    queues: list[list[tuple[float, float]]] = [[] for _ in dec]
    for d, a in delivered:
        i = min(range(len(dec)), key=lambda j: (claimed[j] / dec[j]["slots"], j))
        queues[i].append((d, a))
        claimed[i] += 1  # a routing share only (the router balances requests, not steps)
    for i, worker in enumerate(dec):
        tpot_i, wait_i = _run_decode(queues[i], worker["slots"], worker["table"], output, warmup_s)
        tpot.extend(tpot_i)
        waits.extend(wait_i)
    labels = {"p50": 50, "p90": 90, "p95": 95, "p99": 99}
    return DeploymentSim(len(ttft), {k: round(_quantile(ttft, p), 3) for k, p in labels.items()},
                         {k: round(_quantile(tpot, p), 3) for k, p in labels.items()},
                         round(max(waits, default=0.0) * 1e3, 3))


def _run_decode(requests: list[tuple[float, float]], slots: int, table: list[float], output: int,
                warmup_s: float) -> tuple[list[float], list[float]]:
    """One decode worker: requests (KV delivered at, arrival) in delivery order."""
    tpot, waits = [], []
    running: list[list[float]] = []  # [tokens left, decode start, arrival, delivered]
    clock, k = 0.0, 0
    while k < len(requests) or running:
        if not running and k < len(requests) and requests[k][0] > clock:
            clock = requests[k][0]  # idle until the next delivery
        while k < len(requests) and requests[k][0] <= clock and len(running) < slots:
            d, a = requests[k]
            running.append([float(output - 1), clock, a, d])
            waits.append(clock - d)
            k += 1
        n = len(running)
        step = table[n]
        clock += step
        keep = []
        for r in running:
            r[0] -= 1
            if r[0] <= 0:
                if r[2] >= warmup_s and output > 1:
                    tpot.append((clock - r[1]) / (output - 1) * 1e3)
            else:
                keep.append(r)
        running = keep
    return tpot, waits

