"""Discrete-event simulation of one continuous-batching LLM replica (iteration-level scheduling).

What it models, step by step:

* Requests: either a renewal process (gamma inter-arrival times with the given
  coefficient of variation: 1 = Poisson, 0 = evenly spaced, > 1 = bursty; each request
  draws its class - prompt and output tokens - by the classes' shares), or a given list
  (a replayed trace): arrival times, prompt and output tokens per request.
* Admission, FCFS: at most `max_seqs` sequences run at once, and an admitted sequence
  reserves KV cache for its whole length (prompt + output tokens) out of
  `kv_cache_tokens` - the performance model's memory rule, so nothing is preempted. A
  request that does not fit blocks the queue behind it (no overtaking).
* The step's time: `StepCost` (solver.perf.queueing.physics, the analytic model's step
  physics, linear pieces of the roofline) of (decoding sequences, their context tokens,
  prompt tokens, prompt attention pairs), evaluated in solver/sim/kernel.py.
* A request's first token comes at the end of the step that finishes its prompt (TTFT
  from its arrival, plus `request_overhead_s`); then one token per decode step; it leaves
  at the end of the step that makes its last token. TPOT = (latency - TTFT) / (output - 1).

Two schedulers (`scheduler=`):

* `"chunked_mixed"` (the default; vLLM V1, TensorRT-LLM in-flight batching): every step
  decodes one token for every running sequence, then fills the rest of `token_budget`
  with prompt chunks: first the unfinished prompts of admitted sequences, oldest first,
  then newly admitted requests, FCFS (chunked prefill).
* `"prefill_first"` (vLLM V0 without chunked prefill, SGLang's default): when requests
  wait and the head of the queue can be admitted (KV room for its whole length, fewer
  than `max_seqs` running), the step is prefill-only: it admits waiting requests FCFS
  while their whole prompts fit `token_budget` (at least one: a prompt longer than the
  budget is prefilled in consecutive prefill-only chunks, which whole prompts may join
  where the budget allows); running sequences do not decode in that step. Otherwise the
  step is decode-only (every running sequence makes one token).

The event loop is `kernel.simulate_core` (numba-compiled when numba is installed, plain
Python otherwise or with FLEET_SIM_JIT=0); this module builds its arrays and reads its
results. Synthetic traffic is generated in blocks of 4,096 requests, so a run whose
requests outlast the blocks made so far is run again with more (deterministic: the same
seed gives the same requests and the same results).

Deterministic for a given seed. `simulate_replica`'s statistics cover requests that
arrive in [warmup_s, duration_s]; the run goes on (with arrivals) until they have all
finished, up to `drain_limit_s`; requests still unfinished then count as infinitely late.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from solver.perf.queueing.physics import kv_claim_tokens

from solver.sim import kernel

StepSeconds = Callable[[float, float, float, float], float]

# The most requests one run holds (arrays of ~60 bytes per request: ~120 MB at this size).
MAX_REQUESTS_PER_RUN = 2_000_000
BLOCK = 4096  # synthetic requests are drawn in blocks of this many (the old simulator's order of draws)


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
    arrival_s: np.ndarray | None = None  # per measured request
    waiting_growth: int = 0  # requests waiting when the last measured one arrived, minus when the first did

    @property
    def requests(self) -> int:
        return len(self.ttft_s)


class SyntheticTraffic:
    """Renewal arrivals with gamma inter-arrival times (mean 1/rate, CV cv) and a class per
    request drawn by share; generated in blocks (gaps, then classes), extended on demand."""

    def __init__(self, rng: np.random.Generator, rate_per_s: float, cv: float, shares: Sequence[float]):
        self.rng, self.rate, self.cv = rng, float(rate_per_s), float(cv)
        self.cum = np.cumsum(np.asarray(shares, dtype=float) / float(sum(shares)))
        self._times: list[np.ndarray] = []
        self._classes: list[np.ndarray] = []
        self._t = 0.0
        self.count = 0

    def _block(self) -> None:
        n = BLOCK
        mean = 1.0 / self.rate
        if self.cv <= 0:
            gaps = np.full(n, mean)
            if not self._times:
                gaps[0] = self.rng.uniform(0.0, mean)  # a random phase for a regular stream
        else:
            shape = 1.0 / (self.cv * self.cv)
            gaps = self.rng.gamma(shape, mean / shape, size=n)
        t = self._t + np.cumsum(gaps)
        self._t = float(t[-1])
        cls = np.searchsorted(self.cum, self.rng.uniform(0.0, 1.0, size=n), side="right")
        self._times.append(t)
        self._classes.append(np.minimum(cls, len(self.cum) - 1))
        self.count += n

    def first(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """At least the first n requests (whole blocks): arrival times and classes."""
        while self.count < n:
            self._block()
        return np.concatenate(self._times), np.concatenate(self._classes)

    def until(self, horizon_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Every request arriving by horizon_s, and at least one after it (whole blocks)."""
        while not self._times or self._t <= horizon_s:
            self._block()
            if self.count > MAX_REQUESTS_PER_RUN:
                break
        return np.concatenate(self._times), np.concatenate(self._classes)


def step_cost_of(step):
    """The StepCost the simulator evaluates, from a StepCost, a Replica (its `step`), or a
    step-time callable `seconds(decodes, context, prefill, pairs)` (the old signature):
    a callable is read into linear pieces with `fit_step_cost`, as `replica_for` does, its
    MoE expert fraction found from the curvature of 1-4 token steps (the experts touched,
    1 - (1 - a)^t, are the only non-linear piece there). Exact for single-stage,
    full-attention replicas; elsewhere the analytic model's own approximation."""
    from solver.perf.queueing.physics import Replica, StepCost, fit_step_cost

    if isinstance(step, StepCost):
        return step
    if isinstance(step, Replica):
        return step.step
    if getattr(step, "__self__", None) is not None and isinstance(step.__self__, StepCost):
        return step.__self__  # StepCost.seconds, bound
    if not callable(step):
        raise TypeError(f"step must be a StepCost, a Replica or a step-time function, got {type(step).__name__}")
    ys = [float(step(0, 0, t, 0)) for t in (1.0, 2.0, 3.0, 4.0)]
    d1, d2, d3 = ys[1] - ys[0], ys[2] - ys[1], ys[3] - ys[2]
    curvature = d2 - d1
    fraction = 0.0
    if abs(curvature) > 1e-9 * abs(ys[0]) and curvature < 0:
        # Second differences of E (1 - (1 - a)^t) shrink by (1 - a) per token.
        fraction = min(max(1.0 - (d3 - d2) / curvature, 0.0), 1.0)
    return fit_step_cost(step, fraction)


@dataclass
class CoreRun:
    """One run of the core over a request list (index = arrival order)."""

    status: int
    first_s: np.ndarray  # end of the prefill step (inf: never)
    done_s: np.ndarray  # end of the last token's step (inf: never)
    waited: np.ndarray
    batch_time_s: np.ndarray
    stats: np.ndarray  # kernel.ST_* slots


def run_core(params: np.ndarray, arrival_s: np.ndarray, prompt_tokens: np.ndarray, output_tokens: np.ndarray, *,
             open_ended: bool, max_seqs: int, kv_cache_tokens: float, token_budget: int, scheduler: str,
             measure: tuple[int, int], stop_after_s: float, time_limit_s: float,
             window_s: tuple[float, float], kv_admission: str = "whole_sequence", multi_step: int = 1) -> CoreRun:
    """Allocate the core's arrays, run it, return what it filled. `max_seqs` as given is
    capped by `token_budget` here (every running sequence decodes one token per step)."""
    if scheduler not in kernel.SCHEDULERS:
        raise ValueError(f"scheduler must be one of {', '.join(kernel.SCHEDULERS)}, got {scheduler!r}")
    if not (isinstance(multi_step, int) and multi_step >= 1):
        raise ValueError(f"multi_step must be a whole number of decode steps, at least 1, got {multi_step!r}")
    n = len(arrival_s)
    max_seqs = int(min(max_seqs, token_budget))
    wheel = int(np.max(output_tokens)) + 1 if n else 2
    first = np.full(n, math.inf)
    done = np.full(n, math.inf)
    waited = np.zeros(n, dtype=bool)
    got = np.zeros(n, dtype=np.int64)
    nxt = np.full(n, -1, dtype=np.int64)
    head = np.full(wheel, -1, dtype=np.int64)
    batch_time = np.zeros(max_seqs + 1)
    stats = np.zeros(kernel.N_STATS)
    claims = kv_claim_tokens(np.asarray(prompt_tokens, dtype=np.int64), np.asarray(output_tokens, dtype=np.int64),
                             kv_admission)
    args = [np.ascontiguousarray(arrival_s, dtype=np.float64), np.ascontiguousarray(prompt_tokens, dtype=np.int64),
            np.ascontiguousarray(output_tokens, dtype=np.int64), np.ascontiguousarray(claims, dtype=np.int64)]
    outs = [first, done, waited, got, nxt, head, batch_time, stats]
    if not kernel.jit_enabled():
        # Plain Python indexes lists ~3x faster than numpy arrays (no scalar boxing).
        args = [a.tolist() for a in args]
        outs = [a.tolist() for a in outs]
    status = kernel.compiled().simulate_core(args[0], args[1], args[2], args[3], bool(open_ended), params, max_seqs,
                                  float(kv_cache_tokens), int(token_budget), kernel.SCHEDULERS[scheduler],
                                  int(multi_step), int(measure[0]), int(measure[1]), float(stop_after_s), float(time_limit_s),
                                  float(window_s[0]), float(window_s[1]), *outs)
    if not kernel.jit_enabled():
        first, done = np.asarray(outs[0], dtype=float), np.asarray(outs[1], dtype=float)
        waited = np.asarray(outs[2], dtype=bool)
        batch_time, stats = np.asarray(outs[6], dtype=float), np.asarray(outs[7], dtype=float)
    return CoreRun(int(status), first, done, waited, batch_time, stats)


def check_fits(prompt_tokens: np.ndarray, output_tokens: np.ndarray, kv_cache_tokens: float,
               kv_admission: str = "whole_sequence") -> None:
    need = np.asarray(kv_claim_tokens(np.asarray(prompt_tokens, dtype=np.int64),
                                      np.asarray(output_tokens, dtype=np.int64), kv_admission), dtype=np.int64)
    if len(need) and int(need.max()) > kv_cache_tokens:
        i = int(np.argmax(need))
        raise ValueError(f"a request of {int(need[i])} tokens (prompt + output) does not fit the "
                         f"{kv_cache_tokens:g}-token KV cache")


def simulate_replica(step, classes: Sequence, rate_per_s: float, *, max_seqs: int,
                     kv_cache_tokens: float, token_budget: int, duration_s: float, seed: int = 0,
                     arrival_cv: float = 1.0, warmup_s: float | None = None,
                     drain_limit_s: float | None = None, request_overhead_s: float = 0.0,
                     scheduler: str | None = None, kv_admission: str | None = None) -> SimResult:
    """Simulate one replica under synthetic traffic for `duration_s` seconds of arrivals.

    `step`: a `StepCost`, a `Replica` (its step), or a step-time callable (read into a
    StepCost, see `step_cost_of`). `classes`: objects with share, prompt_tokens,
    output_tokens. `request_overhead_s`: a serving engine's fixed time before a request's
    first token (outside the GPU's steps), added to its TTFT and latency. Measured: the
    requests arriving in [warmup_s (default 10 % of duration_s), duration_s]."""
    # A Replica brings its engine's scheduler and KV admission; a bare StepCost runs today's defaults.
    scheduler = scheduler or getattr(step, "scheduler", "chunked_mixed")
    kv_admission = kv_admission or getattr(step, "kv_admission", "whole_sequence")
    multi_step = getattr(step, "multi_step", 1)  # a Replica's; a bare StepCost decides every step
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"rate_per_s must be a positive finite number, got {rate_per_s}")
    if not (arrival_cv >= 0 and math.isfinite(arrival_cv)):
        raise ValueError(f"arrival_cv must be a non-negative number, got {arrival_cv}")
    if max_seqs < 1 or token_budget < 1:
        raise ValueError("max_seqs and token_budget must be at least 1")
    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise ValueError(f"duration_s must be a positive number of seconds, got {duration_s}")
    params = kernel.step_params(step_cost_of(step))
    prompts = np.array([int(c.prompt_tokens) for c in classes], dtype=np.int64)
    outputs = np.array([max(int(c.output_tokens), 1) for c in classes], dtype=np.int64)
    check_fits(prompts, outputs, kv_cache_tokens, kv_admission)
    warmup = duration_s * 0.1 if warmup_s is None else warmup_s
    drain_limit = drain_limit_s if drain_limit_s is not None else max(2.0 * duration_s, duration_s + 600.0)
    traffic = SyntheticTraffic(np.random.default_rng(seed), rate_per_s, arrival_cv, [c.share for c in classes])
    horizon = duration_s * 1.1 + 120.0  # measured requests are usually done within this; else run again with more
    while True:
        times, cls = traffic.until(horizon)
        if len(times) > MAX_REQUESTS_PER_RUN:
            raise ValueError(f"{rate_per_s:g} requests/s for {horizon:g} s is more than {MAX_REQUESTS_PER_RUN:,} "
                             "requests in one run: shorten duration_s")
        lo = int(np.searchsorted(times, warmup, side="left"))
        hi = int(np.searchsorted(times, duration_s, side="right"))
        run = run_core(params, times, prompts[cls], outputs[cls], open_ended=True, max_seqs=max_seqs,
                       kv_cache_tokens=kv_cache_tokens, token_budget=token_budget, scheduler=scheduler,
                       measure=(lo, hi), stop_after_s=duration_s, time_limit_s=drain_limit,
                       window_s=(warmup, duration_s), kv_admission=kv_admission, multi_step=multi_step)
        if run.status != kernel.EXHAUSTED:
            break
        # The run outlasted the arrivals drawn so far (it stops by drain_limit, so this ends).
        horizon = horizon * 2.0
    if run.status == kernel.STALLED:
        raise RuntimeError("simulation stalled: a request fits neither the batch nor the KV cache")
    return _result(run, times, cls, outputs[cls], (lo, hi), request_overhead_s,
                   completed_per_s=run.stats[kernel.ST_FINISHED_IN_WINDOW] / max(duration_s - warmup, 1e-12))


def _result(run: CoreRun, times: np.ndarray, cls: np.ndarray, outs_all: np.ndarray, measure: tuple[int, int],
            request_overhead_s: float, completed_per_s: float) -> SimResult:
    lo, hi = measure
    a = times[lo:hi]
    ttft = run.first_s[lo:hi] - a + request_overhead_s
    lat = run.done_s[lo:hi] - a + request_overhead_s
    outs = outs_all[lo:hi].astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(outs > 1, (lat - ttft) / np.maximum(outs - 1, 1), np.nan)
    tpot[~np.isfinite(lat)] = math.inf
    st = run.stats
    t = float(st[kernel.ST_END_S])
    mean_batch = st[kernel.ST_BATCH_AREA] / t if t > 0 else 0.0
    batch_sd = math.sqrt(max(st[kernel.ST_BATCH_SQ_AREA] / t - mean_batch ** 2, 0.0)) if t > 0 else 0.0
    return SimResult(class_index=np.asarray(cls[lo:hi], dtype=int), ttft_s=ttft, tpot_s=tpot, latency_s=lat,
                     mean_batch=float(mean_batch), batch_sd=batch_sd, batch_time_s=run.batch_time_s,
                     waited=run.waited[lo:hi], completed_per_s=float(completed_per_s),
                     busy_fraction=float(st[kernel.ST_BUSY_S] / t) if t > 0 else 0.0,
                     steps=int(st[kernel.ST_STEPS]), simulated_s=t, unfinished=int(np.sum(~np.isfinite(lat))),
                     arrival_s=a,
                     waiting_growth=int(st[kernel.ST_WAITING_AT_LAST] - st[kernel.ST_WAITING_AT_FIRST]))


def simulate_requests(step, arrival_s, prompt_tokens, output_tokens, *, max_seqs: int, kv_cache_tokens: float,
                      token_budget: int, request_overhead_s: float = 0.0,
                      scheduler: str | None = None, kv_admission: str | None = None) -> SimResult:
    """Replay a given request list (a trace) on one replica until every request has finished.

    `arrival_s` non-decreasing seconds from the start; `prompt_tokens`, `output_tokens`
    positive integers per request. Every request is measured (a replay has no warm-up);
    `class_index` is the request's index in the list."""
    scheduler = scheduler or getattr(step, "scheduler", "chunked_mixed")
    kv_admission = kv_admission or getattr(step, "kv_admission", "whole_sequence")
    multi_step = getattr(step, "multi_step", 1)  # a Replica's; a bare StepCost decides every step
    arrival_s = np.asarray(arrival_s, dtype=np.float64)
    prompts = np.asarray(prompt_tokens, dtype=np.int64)
    outputs = np.asarray(output_tokens, dtype=np.int64)
    n = len(arrival_s)
    if not (len(prompts) == n == len(outputs)):
        raise ValueError("arrival_s, prompt_tokens and output_tokens must have one entry per request")
    if n > MAX_REQUESTS_PER_RUN:
        raise ValueError(f"{n:,} requests is more than the {MAX_REQUESTS_PER_RUN:,} one run holds")
    if n and not (np.all(np.isfinite(arrival_s)) and arrival_s[0] >= 0 and np.all(np.diff(arrival_s) >= 0)):
        raise ValueError("arrival_s must be finite, non-negative and non-decreasing")
    if n and (prompts.min() < 1 or outputs.min() < 1):
        raise ValueError("prompt_tokens and output_tokens must be positive")
    if max_seqs < 1 or token_budget < 1:
        raise ValueError("max_seqs and token_budget must be at least 1")
    check_fits(prompts, outputs, kv_cache_tokens, kv_admission)
    params = kernel.step_params(step_cost_of(step))
    run = run_core(params, arrival_s, prompts, outputs, open_ended=False, max_seqs=max_seqs,
                   kv_cache_tokens=kv_cache_tokens, token_budget=token_budget, scheduler=scheduler,
                   measure=(0, n), stop_after_s=-1.0, time_limit_s=math.inf, window_s=(0.0, math.inf),
                   kv_admission=kv_admission, multi_step=multi_step)
    if run.status == kernel.STALLED:
        raise RuntimeError("simulation stalled: a request fits neither the batch nor the KV cache")
    span = float(run.stats[kernel.ST_END_S])
    return _result(run, arrival_s, np.arange(n), outputs, (0, n), request_overhead_s,
                   completed_per_s=n / span if span > 0 else 0.0)
