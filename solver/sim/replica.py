"""Discrete-event simulation of one continuous-batching LLM replica (iteration-level scheduling).

What it models, step by step (vLLM V1's scheduler, TensorRT-LLM in-flight batching alike):

* Requests arrive by a renewal process: gamma inter-arrival times with the given
  coefficient of variation (1 = Poisson, 0 = evenly spaced, > 1 = bursty); each draws its
  class (prompt and output tokens) by the classes' shares.
* A request waits (FCFS) for admission: at most `max_seqs` sequences run at once, and an
  admitted sequence reserves KV cache for its whole length (prompt + output tokens) out
  of `kv_cache_tokens` - the performance model's memory rule, so nothing is preempted.
  A request that does not fit blocks the queue behind it (no overtaking).
* Each engine step has a token budget: one token for every decoding sequence, and the
  rest of the budget for prompt tokens, in chunks: first the unfinished prompts of
  admitted sequences, oldest first, then newly admitted requests (chunked prefill).
* The step takes `step_seconds(decode seqs, their context tokens, prefill tokens,
  prefill attention pairs)` - the performance model's physics (`solver.perf.llm.step_time_fn`).
* A request's first token comes at the end of the step that finishes its prompt (TTFT
  from its arrival); then one token per step; it leaves at the end of the step that makes
  its last token. TPOT = (latency - TTFT) / (output tokens - 1).

Deterministic for a given seed. Statistics cover requests that arrive in
[warmup_s, duration_s]; the run goes on (with arrivals) until they have all finished,
up to `drain_limit_s`; requests still unfinished then count as infinitely late.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

StepSeconds = Callable[[float, float, float, float], float]


@dataclass
class SimResult:
    """Per measured request (arrival in [warmup, duration]), seconds; inf = never finished."""

    class_index: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray  # nan for one-token outputs
    latency_s: np.ndarray
    mean_batch: float  # time-average of sequences admitted (decoding or prefilling)
    batch_sd: float  # its standard deviation over time
    batch_time_s: np.ndarray  # seconds spent with n sequences admitted, n = 0..max_seqs
    waited: np.ndarray  # per measured request: it waited for a KV slot (a step started without admitting it)
    completed_per_s: float  # requests finished per second during [warmup_s, duration_s] (throughput)
    busy_fraction: float  # share of time the engine was stepping
    steps: int
    simulated_s: float
    unfinished: int

    @property
    def requests(self) -> int:
        return len(self.ttft_s)


class _Arrivals:
    """Lazily generated renewal arrivals with gamma inter-arrival times (mean 1/rate, CV cv)."""

    def __init__(self, rng: np.random.Generator, rate: float, cv: float, shares: Sequence[float]):
        self.rng, self.rate, self.cv = rng, rate, cv
        self.cum = np.cumsum(np.asarray(shares, dtype=float) / float(sum(shares)))
        self.times: list[float] = []
        self.classes: list[int] = []
        self.i = 0
        self.t = 0.0
        self._more(first=True)

    def _gaps(self, n: int) -> np.ndarray:
        mean = 1.0 / self.rate
        if self.cv <= 0:
            return np.full(n, mean)
        shape = 1.0 / (self.cv * self.cv)
        return self.rng.gamma(shape, mean / shape, size=n)

    def _more(self, first: bool = False) -> None:
        n = 4096
        gaps = self._gaps(n)
        if first and self.cv <= 0:
            gaps[0] = self.rng.uniform(0.0, 1.0 / self.rate)  # a random phase for a regular stream
        t = self.t + np.cumsum(gaps)
        self.t = float(t[-1])
        cls = np.searchsorted(self.cum, self.rng.uniform(0.0, 1.0, size=n), side="right")
        cls = np.minimum(cls, len(self.cum) - 1)
        self.times = self.times[self.i:] + t.tolist()
        self.classes = self.classes[self.i:] + cls.tolist()
        self.i = 0

    def peek(self) -> float:
        if self.i >= len(self.times):
            self._more()
        return self.times[self.i]

    def pop(self) -> tuple[float, int]:
        if self.i >= len(self.times):
            self._more()
        out = self.times[self.i], self.classes[self.i]
        self.i += 1
        return out


def simulate_replica(step_seconds: StepSeconds, classes: Sequence, rate_per_s: float, *, max_seqs: int,
                     kv_cache_tokens: float, token_budget: int, duration_s: float, seed: int = 0,
                     arrival_cv: float = 1.0, warmup_s: float | None = None,
                     drain_limit_s: float | None = None, request_overhead_s: float = 0.0) -> SimResult:
    """Simulate one replica. `classes`: objects with share, prompt_tokens, output_tokens.
    `request_overhead_s`: a serving engine's fixed time before a request's first token
    (outside the GPU's steps), added to its TTFT and latency."""
    if rate_per_s <= 0 or not math.isfinite(rate_per_s):
        raise ValueError(f"rate_per_s must be a positive finite number, got {rate_per_s}")
    if arrival_cv < 0 or not math.isfinite(arrival_cv):
        raise ValueError(f"arrival_cv must be a non-negative number, got {arrival_cv}")
    if max_seqs < 1 or token_budget < 1:
        raise ValueError("max_seqs and token_budget must be at least 1")
    prompts = [int(c.prompt_tokens) for c in classes]
    outputs = [max(int(c.output_tokens), 1) for c in classes]
    need = [p + o for p, o in zip(prompts, outputs)]
    if min(need) > kv_cache_tokens:
        raise ValueError(f"a request of {min(need)} tokens does not fit the {kv_cache_tokens:g}-token KV cache")
    warmup = duration_s * 0.1 if warmup_s is None else warmup_s
    drain_limit = drain_limit_s if drain_limit_s is not None else max(2.0 * duration_s, duration_s + 600.0)
    rng = np.random.default_rng(seed)
    arrivals = _Arrivals(rng, rate_per_s, arrival_cv, [c.share for c in classes])
    max_seqs = min(max_seqs, token_budget)  # every running sequence decodes one token per step

    # Per request (index = arrival order), filled as it goes.
    arrive: list[float] = []
    cls_of: list[int] = []
    first: list[float] = []
    blocked: list[bool] = []
    prev_start = -math.inf  # start of the previous step
    finished_in_window = 0
    done: list[float] = []

    waiting: deque[int] = deque()
    prefilling: deque[list] = deque()  # [request, prompt tokens done]
    finish_heap: list[tuple[int, int]] = []  # (step index at whose end it leaves, request)
    n_dec = 0
    ctx_sum = 0.0  # context tokens of the decoding sequences
    running = 0  # admitted: decoding or prefilling
    kv_used = 0
    t = 0.0
    step = 0
    busy = 0.0
    batch_area = 0.0
    batch_sq_area = 0.0
    batch_time = [0.0] * (max_seqs + 1)
    measured_left = None  # requests measured but not finished, once arrivals past duration stop counting
    last_measured = -1

    while True:
        # Arrivals up to now join the queue.
        while arrivals.peek() <= t:
            at, c = arrivals.pop()
            idx = len(arrive)
            arrive.append(at)
            cls_of.append(c)
            first.append(math.inf)
            done.append(math.inf)
            blocked.append(False)
            if at <= duration_s:
                last_measured = idx
            waiting.append(idx)
        if t > duration_s:
            if measured_left is None:
                measured_left = sum(1 for i in range(last_measured + 1) if arrive[i] >= warmup and done[i] == math.inf)
            if measured_left <= 0 or t > drain_limit:
                break
        if running == 0 and not waiting:
            nxt = arrivals.peek()  # idle until the next arrival
            batch_time[0] += nxt - t
            t = nxt
            continue

        # Schedule one step: decodes first, then prompt chunks within the token budget.
        budget = token_budget - n_dec
        chunks: list[tuple[list, int]] = []
        pre_tokens = 0
        pairs = 0.0
        for entry in prefilling:
            if budget <= 0:
                break
            req, got = entry
            take = min(budget, prompts[cls_of[req]] - got)
            chunks.append((entry, take))
            pre_tokens += take
            pairs += take * (2.0 * got + take) / 2.0
            budget -= take
        while waiting and budget > 0 and running < max_seqs:
            req = waiting[0]
            k = cls_of[req]
            if kv_used + need[k] > kv_cache_tokens:
                break  # FCFS: the head of the queue waits for KV room
            waiting.popleft()
            if prev_start >= arrive[req]:
                blocked[req] = True
            running += 1
            kv_used += need[k]
            entry = [req, 0]
            prefilling.append(entry)
            take = min(budget, prompts[k])
            chunks.append((entry, take))
            pre_tokens += take
            pairs += take * take / 2.0
            budget -= take
        if n_dec == 0 and pre_tokens == 0:
            # Only possible when a waiting request cannot be admitted into an empty engine.
            raise RuntimeError("simulation stalled: a request fits neither the batch nor the KV cache")

        tau = step_seconds(n_dec, ctx_sum, pre_tokens, pairs)
        prev_start = t
        batch_area += running * tau
        batch_sq_area += running * running * tau
        batch_time[running] += tau
        busy += tau
        t += tau
        ctx_sum += n_dec  # every decoding sequence grew by one token

        # Sequences whose last token this step made leave.
        while finish_heap and finish_heap[0][0] == step:
            _, req = heapq.heappop(finish_heap)
            k = cls_of[req]
            done[req] = t
            finished_in_window += warmup <= t <= duration_s
            n_dec -= 1
            ctx_sum -= prompts[k] + outputs[k]
            running -= 1
            kv_used -= need[k]
            if measured_left is not None and warmup <= arrive[req] <= duration_s:
                measured_left -= 1
        # Prompts finished this step give their first token.
        for entry, take in chunks:
            entry[1] += take
        while prefilling and prefilling[0][1] >= prompts[cls_of[prefilling[0][0]]]:
            req = prefilling.popleft()[0]
            k = cls_of[req]
            first[req] = t
            if outputs[k] <= 1:
                done[req] = t
                finished_in_window += warmup <= t <= duration_s
                running -= 1
                kv_used -= need[k]
                if measured_left is not None and warmup <= arrive[req] <= duration_s:
                    measured_left -= 1
            else:
                n_dec += 1
                ctx_sum += prompts[k] + 1
                heapq.heappush(finish_heap, (step + outputs[k] - 1, req))
        step += 1

    arr = np.asarray(arrive)
    sel = (arr >= warmup) & (arr <= duration_s)
    cls = np.asarray(cls_of, dtype=int)[sel]
    a = arr[sel]
    ttft = np.asarray(first)[sel] - a + request_overhead_s
    lat = np.asarray(done)[sel] - a + request_overhead_s
    outs = np.asarray(outputs, dtype=float)[cls]
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(outs > 1, (lat - ttft) / np.maximum(outs - 1, 1), np.nan)
    tpot[~np.isfinite(lat)] = math.inf
    mean_batch = batch_area / t if t > 0 else 0.0
    batch_sd = math.sqrt(max(batch_sq_area / t - mean_batch ** 2, 0.0)) if t > 0 else 0.0
    return SimResult(class_index=cls, ttft_s=ttft, tpot_s=tpot, latency_s=lat,
                     mean_batch=mean_batch, batch_sd=batch_sd, batch_time_s=np.asarray(batch_time),
                     waited=np.asarray(blocked, dtype=bool)[sel],
                     completed_per_s=finished_in_window / max(duration_s - warmup, 1e-12), busy_fraction=busy / t if t > 0 else 0.0,
                     steps=step, simulated_s=t, unfinished=int(np.sum(~np.isfinite(lat))))
