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
  transfer at a time over its share of the network).
* A decode worker (requests spread over the workers in proportion to their batch slots)
  takes the request at its next step boundary if a slot is free (else the request waits,
  FIFO). TTFT = arrival to that admission: a wait for a slot is seen by the user, and the
  worker model assumes such waits are rare (its Poisson batch), which this checks.
  Each step makes one token for every running sequence and lasts step(n) seconds for n
  running (the same calibrated step the worker model uses); a sequence leaves after its
  last token. TPOT = its decode time / (output tokens - 1).

Plain Python: a deployment at tens of requests per second for a few minutes
of traffic takes a fraction of a second.
"""

from __future__ import annotations

import math
import random

import numpy as np

from solver.dataclass_repr import dataclass
from solver.perf.api import PerfQuery
from solver.perf.disagg import decode_worker, kv_transfer_bytes, prefill_worker
from solver.perf.llm import _pipelined, _setup
from solver.sim.stats import weighted_percentile


@dataclass(frozen=True)
class PoolWorker:
    """One worker type of a pool and how many of it run."""

    query: PerfQuery
    count: int


@dataclass(frozen=True)
class DeploymentSim:
    """One replay: each measured request's TTFT and TPOT (after warm-up), in ms."""

    ttft_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    max_decode_wait_ms: float  # longest a request waited for a decode slot

    @property
    def requests(self) -> int:
        return len(self.ttft_ms)

    def percentile(self, metric: str, p: float) -> float:
        """The p-th percentile of "ttft_ms" or "tpot_ms" (nan without requests)."""
        values = getattr(self, metric)
        return weighted_percentile(np.asarray(values, dtype=float), None, p) if values else math.nan


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
    # 2. Decode: route each delivered request to the worker with the lowest share of its
    # slots claimed; each worker runs steps, admitting at step boundaries.
    ttft, tpot, waits = [], [], []
    claimed = [0] * len(dec)
    queues: list[list[tuple[float, float]]] = [[] for _ in dec]
    for d, a in delivered:
        i = min(range(len(dec)), key=lambda j: (claimed[j] / dec[j]["slots"], j))
        queues[i].append((d, a))
        claimed[i] += 1  # a routing share only (the router balances requests, not steps)
    for i, worker in enumerate(dec):
        ttft_i, tpot_i, wait_i = _run_decode(queues[i], worker["slots"], worker["table"], output, warmup_s)
        ttft.extend(ttft_i)
        tpot.extend(tpot_i)
        waits.extend(wait_i)
    return DeploymentSim(tuple(ttft), tuple(tpot), round(max(waits, default=0.0) * 1e3, 3))


def _run_decode(requests: list[tuple[float, float]], slots: int, table: list[float], output: int,
                warmup_s: float) -> tuple[list[float], list[float], list[float]]:
    """One decode worker: requests (KV delivered at, arrival) in delivery order. Returns the
    measured requests' TTFT and TPOT (ms) and every request's wait for a slot (s)."""
    ttft, tpot, waits = [], [], []
    running: list[list[float]] = []  # [tokens left, decode start, arrival, delivered]
    clock, k = 0.0, 0
    while k < len(requests) or running:
        if not running and k < len(requests) and requests[k][0] > clock:
            clock = requests[k][0]  # idle until the next delivery
        while k < len(requests) and requests[k][0] <= clock and len(running) < slots:
            d, a = requests[k]
            running.append([float(output - 1), clock, a, d])
            waits.append(clock - d)
            if a >= warmup_s:
                ttft.append((clock - a) * 1e3)
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
    return ttft, tpot, waits

