"""Verify a replica configuration at a rate: simulated percentiles with confidence intervals
and a verdict per latency bound ("met", "missed" or "inconclusive").

`verify_replica(replica, classes, rate_per_s, percentile=99, bounds={"ttft_ms": ..., ...})`
runs `seeds` independent replications (solver/sim/stats.py: sectioning), each a separate
run from an empty replica with its own random stream:

* Size: enough requests that the percentile rests on at least `min_tail_requests`
  requests beyond it over all seeds: ceil(min_tail / (1 - p/100)) in total (20,000 at
  p99 with 200), split evenly over the seeds, and at least MIN_REQUESTS_PER_SEED per
  seed (a seed's own percentile and warm-up need some length).
* Warm-up: each seed's first max(10 % of its measured requests, 2 x max_seqs) requests
  are simulated and discarded (the replica starts empty; it fills within about one batch
  of requests).
* Drain: arrivals go on after the last measured request until every measured request
  has finished (the last ones are served under the same load), up to a time limit of
  max(2 x, + 600 s) the measured arrivals' span.
* Verdict per bound: "met" when the interval lies at or below the bound, "missed" when it
  lies above, "inconclusive" when it straddles it. Overall: missed if any bound is, else
  inconclusive if any is, else met.
* More simulation, within `max_requests` and while no bound is missed (`next_step`): when
  a bound's estimate spreads by more than +-MAX_RELATIVE_HALF_WIDTH (25 %) of its value
  (unless it is met with half an interval to spare), every seed is run again twice as
  long (the same streams); else, while a bound is inconclusive, the number of seeds
  doubles. Longer seeds first because a wide spread is the mark of a heavy tail - rare,
  long congestion episodes (bursty arrivals, small KV-limited replicas) that short seeds
  all tend to miss together, which more short seeds do not repair
  (bench/sim_ci_coverage.py: 8b on an L4 at 80 % load with CV 2 arrivals, p99 TTFT
  covered by 63-72 % of intervals from 4-32 seeds of 5,000 requests, 88 % from 4-8 seeds
  of 20,000-40,000).

Memory: one seed's run holds ~60 bytes per request it simulates (solver/sim/replica.py,
MAX_REQUESTS_PER_RUN = 2,000,000 per run); `max_requests` bounds the measured requests of
all seeds together (MAX_REQUESTS, 2,000,000, at most); the results kept are three float
arrays per seed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from solver.sim import kernel
from solver.sim.replica import (MAX_REQUESTS_PER_RUN, SyntheticTraffic, check_fits, run_core, step_cost_of)
from solver.sim.stats import Estimate, overall, sectioned_percentile, verdict

METRICS = ("ttft_ms", "tpot_ms", "latency_ms")
PERCENTILES = (50, 90, 95, 99)
MIN_REQUESTS_PER_SEED = 1000
GROWTH_SHARE = 0.05
MAX_RELATIVE_HALF_WIDTH = 0.25
MAX_REQUESTS = 2_000_000
DEFAULT_MAX_REQUESTS = 200_000
CONFIDENCE = 0.95


def requests_for(percentile: float, min_tail_requests: int = 200) -> int:
    """Measured requests (all seeds together) that put min_tail_requests beyond the percentile."""
    return math.ceil(min_tail_requests / (1.0 - percentile / 100.0) - 1e-9)


@dataclass
class SeedRun:
    """One replication: the measured requests' metrics (ms; nan where a metric does not
    apply, inf where a request never finished) and whether the replica kept up."""

    metrics: dict[str, np.ndarray]
    requests: int
    unfinished: int
    waiting_growth: int
    simulated_s: float
    mean_batch: float = math.nan


def seed_rng(seed: int, *key: int) -> np.random.Generator:
    """The random stream of replication `key` (e.g. (index,) or (service, assignment, index))
    of run `seed`: independent streams (numpy SeedSequence spawn keys)."""
    return np.random.default_rng(np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(int(k) for k in key)))


def run_replica_seed(replica, classes: Sequence, rate_per_s: float, *, arrival_cv: float, scheduler: str | None,
                     rng: np.random.Generator, measured: int | None = None, warmup: int | None = None,
                     duration_s: float | None = None, params: np.ndarray | None = None) -> SeedRun:
    """One replication of a replica under synthetic traffic: `measured` requests after
    `warmup` ones, or (duration_s given) the requests arriving in [10 %, 100 %] of duration_s.
    `scheduler` None: the replica's own (its engine's); the KV cache admits as the replica's
    engine does (`Replica.kv_admission`)."""
    scheduler = scheduler or getattr(replica, "scheduler", "chunked_mixed")
    admission = getattr(replica, "kv_admission", "whole_sequence")
    if params is None:
        params = kernel.step_params(step_cost_of(replica))
    prompts = np.array([int(c.prompt_tokens) for c in classes], dtype=np.int64)
    outputs = np.array([max(int(c.output_tokens), 1) for c in classes], dtype=np.int64)
    check_fits(prompts, outputs, replica.kv_cache_tokens, admission)
    traffic = SyntheticTraffic(rng, rate_per_s, arrival_cv, [c.share for c in classes])
    if duration_s is not None:
        times, cls = traffic.until(duration_s * 1.1 + 120.0)
        lo = int(np.searchsorted(times, 0.1 * duration_s, side="left"))
        hi = int(np.searchsorted(times, duration_s, side="right"))
        want = len(times)
    else:
        lo, hi = warmup, warmup + measured
        want = hi + max(measured // 10, int(rate_per_s * 60.0), 256)  # arrivals after the last measured
        times, cls = traffic.first(want)
    while True:
        if len(times) > MAX_REQUESTS_PER_RUN:
            raise ValueError(f"a replication needs more than {MAX_REQUESTS_PER_RUN:,} requests: use fewer "
                             "requests per seed (or a shorter duration)")
        span = float(times[hi - 1]) if hi > 0 else 0.0
        run = run_core(params, times, prompts[cls], outputs[cls], open_ended=True, max_seqs=replica.max_seqs,
                       kv_cache_tokens=replica.kv_cache_tokens, token_budget=replica.token_budget,
                       scheduler=scheduler, measure=(lo, hi), stop_after_s=span,
                       time_limit_s=max(2.0 * span, span + 600.0), window_s=(float(times[lo]) if hi > lo else 0.0,
                                                                              span), kv_admission=admission,
                       multi_step=getattr(replica, "multi_step", 1))
        if run.status != kernel.EXHAUSTED:
            break
        times, cls = traffic.first(2 * len(times))  # the run outlasted the arrivals drawn: run again with more
    if run.status == kernel.STALLED:
        raise RuntimeError("simulation stalled: a request fits neither the batch nor the KV cache")
    a = times[lo:hi]
    overhead = replica.request_overhead_s
    ttft = run.first_s[lo:hi] - a + overhead
    lat = run.done_s[lo:hi] - a + overhead
    outs = outputs[cls[lo:hi]].astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(outs > 1, (lat - ttft) / np.maximum(outs - 1, 1), np.nan)
    tpot[~np.isfinite(lat)] = math.inf
    end = float(run.stats[kernel.ST_END_S])
    return SeedRun({"ttft_ms": ttft * 1e3, "tpot_ms": tpot * 1e3, "latency_ms": lat * 1e3}, hi - lo,
                   int(np.sum(~np.isfinite(lat))),
                   int(run.stats[kernel.ST_WAITING_AT_LAST] - run.stats[kernel.ST_WAITING_AT_FIRST]), end,
                   float(run.stats[kernel.ST_BATCH_AREA] / end) if end > 0 else 0.0)


def run_servers_seed(throughput_per_s: float, latency_s: float | None, rate_per_s: float, *, arrival_cv: float,
                     rng: np.random.Generator, measured: int | None = None, warmup: int | None = None,
                     duration_s: float | None = None) -> SeedRun:
    """One replication of a measured-profile replica (solver/sim/servers.py): latency only."""
    from solver.sim.servers import serve, servers_for, waiting_at

    c, service = servers_for(throughput_per_s, latency_s)
    traffic = SyntheticTraffic(rng, rate_per_s, arrival_cv, [1.0])
    if duration_s is not None:
        times, _ = traffic.until(duration_s)
        lo = int(np.searchsorted(times, 0.1 * duration_s, side="left"))
        hi = int(np.searchsorted(times, duration_s, side="right"))
    else:
        lo, hi = warmup, warmup + measured
        times, _ = traffic.first(hi)
    times = times[:hi]  # FCFS: later arrivals do not delay earlier items
    start = serve(times, c, service)
    lat = (start[lo:] + service - times[lo:]) * 1e3
    nan = np.full(len(lat), np.nan)
    growth = waiting_at(times, start, hi - 1) - waiting_at(times, start, lo) if hi > lo else 0
    return SeedRun({"ttft_ms": nan, "tpot_ms": nan, "latency_ms": lat}, hi - lo, 0, growth,
                   float(start[-1] + service) if hi else 0.0)


def keep_up_problem(runs: Sequence[SeedRun]) -> str | None:
    """Why the replica cannot keep up, or None."""
    unfinished = sum(r.unfinished for r in runs)
    if unfinished:
        total = sum(r.requests for r in runs)
        return (f"cannot keep up: {unfinished:,} of {total:,} measured requests had not finished by the time limit "
                "(twice the arrivals' span, at least + 600 s)")
    if runs and all(r.waiting_growth > GROWTH_SHARE * r.requests for r in runs):
        growth = sorted(r.waiting_growth for r in runs)[len(runs) // 2]
        per_seed = runs[0].requests
        return (f"cannot keep up: the waiting queue grew by {growth:,} requests (median over {len(runs)} seeds) "
                f"while {per_seed:,} arrived, in every seed: arrivals outpace service")
    return None


@dataclass
class Verification:
    """What verify_replica found. Percentile values and intervals in ms."""

    verdict: str  # "met", "missed" or "inconclusive"
    reason: str
    percentile: int
    rate_per_s: float
    requests: int  # measured requests, all seeds
    seeds: int
    requests_per_seed: int
    warmup_requests_per_seed: int
    estimates: dict[str, Estimate | None]  # per metric, at `percentile`
    bounds: dict[str, float]
    verdicts: dict[str, str]  # per bound
    keeps_up: bool
    confidence: float = CONFIDENCE
    method: str = "independent replications (sectioning): pooled percentile +- t(R-1) x sd(seed percentiles) / sqrt(R)"
    mean_batch: float = math.nan
    runs: list[SeedRun] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "percentile": self.percentile,
                "rate_per_s": self.rate_per_s, "requests": self.requests, "seeds": self.seeds,
                "requests_per_seed": self.requests_per_seed, "confidence": self.confidence, "method": self.method,
                "keeps_up": self.keeps_up, "bounds": dict(self.bounds), "verdicts": dict(self.verdicts),
                "estimates": {m: (e.to_dict() if e is not None else None) for m, e in self.estimates.items()}}


def check_bounds(bounds: Mapping[str, float]) -> dict[str, float]:
    out = {}
    for m, b in bounds.items():
        if m not in METRICS:
            raise ValueError(f"bounds: unknown metric {m!r} (one of {', '.join(METRICS)})")
        if b is None:
            continue
        if not (float(b) > 0 and math.isfinite(float(b))):
            raise ValueError(f"bounds[{m!r}] must be a positive number of ms, got {b}")
        out[m] = float(b)
    return out


def judge(runs: Sequence[SeedRun], percentile: float, bounds: Mapping[str, float],
          confidence: float = CONFIDENCE, weights: Sequence[float] | None = None
          ) -> tuple[dict[str, Estimate | None], dict[str, str], str | None]:
    """Estimates of every metric at `percentile`, a verdict per bound, and the keep-up problem."""
    estimates = {}
    for m in METRICS:
        sections = [[(r.metrics[m], 1.0 if weights is None else weights[i])] for i, r in enumerate(runs)]
        estimates[m] = sectioned_percentile(sections, percentile, confidence)
    problem = keep_up_problem(runs)
    verdicts = {m: ("missed" if problem else verdict(estimates[m], b)) for m, b in bounds.items()}
    return estimates, verdicts, problem


def verify_replica(replica, classes: Sequence, rate_per_s: float, *, arrival_cv: float = 1.0,
                   percentile: int = 99, bounds: Mapping[str, float], scheduler: str | None = None,
                   seeds: int = 4, min_tail_requests: int = 200, max_requests: int = DEFAULT_MAX_REQUESTS,
                   seed: int = 0, confidence: float = CONFIDENCE, deadline: float | None = None) -> Verification:
    """Simulate `replica` (a `solver.perf.queueing.Replica`) at `rate_per_s` requests/s of the
    class mix `classes` and judge `bounds` ({"ttft_ms"|"tpot_ms"|"latency_ms": ms}) at
    `percentile` (see the module docstring). Deterministic for a seed; past `deadline`
    (time.monotonic()) it runs no further extension and judges what it has (a planner's
    time limit: the first round always runs)."""
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise ValueError(f"rate_per_s must be a positive finite number, got {rate_per_s}")
    if not (arrival_cv >= 0 and math.isfinite(arrival_cv)):
        raise ValueError(f"arrival_cv must be a non-negative number, got {arrival_cv}")
    if percentile not in PERCENTILES:
        raise ValueError(f"percentile must be one of {', '.join(map(str, PERCENTILES))}, got {percentile}")
    if not (isinstance(seeds, int) and seeds >= 2):
        raise ValueError(f"seeds must be a whole number >= 2 (an interval needs a spread), got {seeds}")
    if not (isinstance(min_tail_requests, int) and min_tail_requests >= 1):
        raise ValueError(f"min_tail_requests must be a positive whole number, got {min_tail_requests}")
    if not (0 < confidence < 1):
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not classes:
        raise ValueError("classes: at least one traffic class")
    bounds = check_bounds(bounds)
    per_seed = max(math.ceil(requests_for(percentile, min_tail_requests) / seeds), MIN_REQUESTS_PER_SEED)
    if not (isinstance(max_requests, int) and per_seed * seeds <= max_requests <= MAX_REQUESTS):
        raise ValueError(f"max_requests must be a whole number from {per_seed * seeds:,} (this check's first "
                         f"round: {seeds} seeds x {per_seed:,}) to {MAX_REQUESTS:,}, got {max_requests}")
    params = kernel.step_params(step_cost_of(replica))

    def run(indices, length: int) -> list[SeedRun]:
        return [run_replica_seed(replica, classes, rate_per_s, arrival_cv=arrival_cv, scheduler=scheduler,
                                 rng=seed_rng(seed, i), measured=length, warmup=warmup_for(length, replica),
                                 params=params) for i in indices]

    runs = run(range(seeds), per_seed)
    out_of_time = False
    while True:
        estimates, verdicts, problem = judge(runs, percentile, bounds, confidence)
        step = None if problem else next_step(estimates, verdicts, bounds)
        if step is not None and deadline is not None and time.monotonic() > deadline:
            out_of_time = True
            break
        if step == "longer" and 2 * per_seed * len(runs) <= max_requests:
            per_seed *= 2  # the same streams, twice as long: a longer stretch of each seed's traffic
            runs = run(range(len(runs)), per_seed)
        elif step is not None and 2 * per_seed * len(runs) <= max_requests:
            runs += run(range(len(runs), 2 * len(runs)), per_seed)  # twice the replications: ~sqrt(2) and a smaller t
        else:
            break
    result = overall(list(verdicts.values())) if verdicts else "met"
    if problem:
        reason = problem
    else:
        parts = []
        for m, b in bounds.items():
            e = estimates[m]
            shown = "none" if e is None else _shown(e)
            parts.append(f"p{percentile} {m[:-3]} {shown} vs {b:g} ms: {verdicts[m]}")
        reason = "; ".join(parts) if parts else "no bounds to check"
        if result == "inconclusive":
            reason += (f" (still straddling after {len(runs)} seeds x {per_seed:,} requests; "
                       f"max_requests {max_requests:,})")
        if out_of_time:
            reason += " (the time for checks ran out before more requests could settle it)"
        elif step == "longer":
            reason += (f" (the seeds' percentiles still spread by more than +-{100 * MAX_RELATIVE_HALF_WIDTH:g} % "
                       f"after {len(runs)} seeds x {per_seed:,} requests: a heavy tail that more requests would pin "
                       "down better)")
    return Verification(result, reason, int(percentile), float(rate_per_s), per_seed * len(runs), len(runs), per_seed,
                        warmup_for(per_seed, replica), estimates, dict(bounds), verdicts, problem is None, confidence,
                        mean_batch=float(np.mean([r.mean_batch for r in runs])), runs=runs)


def warmup_for(measured: int, replica) -> int:
    """Requests simulated and discarded before a seed's measured ones: the replica starts
    empty and fills within about one batch of requests; 10 % of the run at least."""
    return max(measured // 10, 2 * min(replica.max_seqs, replica.token_budget))


def relative_half_width(e: Estimate | None) -> float:
    if e is None or e.ci_ms is None or not (e.value_ms > 0 and math.isfinite(e.value_ms)):
        return 0.0
    return (e.ci_ms[1] - e.ci_ms[0]) / 2.0 / e.value_ms


def next_step(estimates: Mapping[str, Estimate | None], verdicts: Mapping[str, str],
              bounds: Mapping[str, float]) -> str | None:
    """What would settle the verdicts: None (settled: a bound is missed, or each bound is
    met on an estimate within +-MAX_RELATIVE_HALF_WIDTH or with a margin of half an
    interval above its upper end), "longer" seeds (an unsettled bound's seeds spread
    widely - a heavy tail of rare, long congestion episodes, which short seeds
    under-sample together: more short seeds do not fix that, longer ones do), or "more"
    seeds (a bound straddles its interval)."""
    if "missed" in verdicts.values():
        return None
    for m, v in verdicts.items():
        e = estimates[m]
        if relative_half_width(e) <= MAX_RELATIVE_HALF_WIDTH:
            continue
        lo, hi = e.ci_ms
        if v == "met" and bounds[m] >= hi + (hi - lo) / 2.0:
            continue  # wide, but far below the bound
        return "longer"
    if "inconclusive" in verdicts.values():
        return "more"
    return None


def _shown(e: Estimate) -> str:
    if not math.isfinite(e.value_ms):
        return "never (unfinished)"
    if e.ci_ms is None:
        return f"{e.value_ms:.4g} ms"
    hi = "inf" if not math.isfinite(e.ci_ms[1]) else f"{e.ci_ms[1]:.4g}"
    return f"{e.value_ms:.4g} ms [{e.ci_ms[0]:.4g}, {hi}]"
