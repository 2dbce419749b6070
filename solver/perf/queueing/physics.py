"""The replica's physics as queueing needs it: the engine step as linear pieces, the limits."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Callable

import numpy as np


# ---------------------------------------------------------------- inputs
@dataclass(frozen=True)
class TrafficClass:
    """One request class routed to the replica: its share of the replica's requests."""

    share: float
    prompt_tokens: int
    output_tokens: int
    name: str = ""


@dataclass(frozen=True)
class StepCost:
    """The engine step as linear pieces (the roofline of `solver.perf.llm._pass`):

    seconds = max(weights_s + expert_weights_s x touched(t),
                  gemm_s_per_token x t + lm_head_s_per_decode x decodes)
              + s_per_token x t + s_per_context_token x context + s_per_pair x pairs
              + s_per_sampled x (decodes + prompts finishing) + (fixed_s if prefill tokens > 0 else decode_fixed_s)
              + (eager_gap_s if prefill tokens = 0 and decodes > graph_max_decodes)
    t = decodes + prefill tokens; touched(t) = 1 - (1 - expert_fraction)^t (MoE experts read).
    Steps that prefill run eagerly (no CUDA graph): their fixed time differs; so do decode
    steps of more sequences than the engine captured CUDA graphs for. s_per_sampled
    is a host-scheduled engine's time per sequence sampled in a step; the prompts a step
    finishes are counted as prefill^2 / (2 pairs) (one per whole prompt).
    """

    weights_s: float
    expert_weights_s: float
    expert_fraction: float
    gemm_s_per_token: float
    lm_head_s_per_decode: float
    s_per_token: float
    s_per_context_token: float
    s_per_pair: float
    fixed_s: float  # steps that prefill
    decode_fixed_s: float  # decode-only steps
    s_per_sampled: float = 0.0
    graph_max_decodes: float = math.inf  # decode-only steps beyond this many sequences run eagerly
    eager_gap_s: float = 0.0  # what running a decode step eagerly adds to its fixed time

    def seconds(self, decodes, context, prefill, pairs):
        """Floats or numpy arrays (broadcast). Plain numbers take a scalar path (the same
        formula in Python floats: numpy's overhead on one element is ~10x the arithmetic)."""
        if type(decodes) in _SCALARS and type(context) in _SCALARS and type(prefill) in _SCALARS \
                and type(pairs) in _SCALARS:
            return self._scalar_seconds(float(decodes), float(context), float(prefill), float(pairs))
        t = decodes + prefill
        w = self.weights_s
        if self.expert_fraction > 0:
            w = w + self.expert_weights_s * (1.0 - (1.0 - self.expert_fraction) ** t)
        prefill_a = np.asarray(prefill, dtype=float)
        fixed = np.where(prefill_a > 0, self.fixed_s, self.decode_fixed_s)
        if self.eager_gap_s:
            fixed = fixed + np.where((prefill_a <= 0) & (np.asarray(decodes) > self.graph_max_decodes),
                                     self.eager_gap_s, 0.0)
        out = (np.maximum(w, self.gemm_s_per_token * t + self.lm_head_s_per_decode * decodes)
               + self.s_per_token * t + self.s_per_context_token * context + self.s_per_pair * pairs + fixed)
        if self.s_per_sampled:
            pairs_a = np.asarray(pairs, dtype=float)
            # Where pairs is 0 the quotient is not used; divide only where it is (no overflow warnings).
            prompts = np.divide(prefill_a ** 2, 2.0 * pairs_a, out=np.zeros(np.broadcast(prefill_a, pairs_a).shape),
                                where=pairs_a > 0)
            out = out + self.s_per_sampled * (decodes + prompts)
        return out

    def _scalar_seconds(self, decodes: float, context: float, prefill: float, pairs: float) -> float:
        t = decodes + prefill
        w = self.weights_s
        if self.expert_fraction > 0:
            w = w + self.expert_weights_s * (1.0 - (1.0 - self.expert_fraction) ** t)
        fixed = self.fixed_s if prefill > 0 else (
            self.decode_fixed_s + self.eager_gap_s if decodes > self.graph_max_decodes else self.decode_fixed_s)
        out = (max(w, self.gemm_s_per_token * t + self.lm_head_s_per_decode * decodes)
               + self.s_per_token * t + self.s_per_context_token * context + self.s_per_pair * pairs + fixed)
        if self.s_per_sampled:
            prompts = prefill * prefill / (2.0 * max(pairs, 1e-300)) if pairs > 0 else 0.0
            out = out + self.s_per_sampled * (decodes + prompts)
        return np.float64(out)


_SCALARS = (float, int, np.float64)


def fit_step_cost(step_seconds: Callable[[float, float, float, float], float], expert_fraction: float = 0.0,
                  graph_max_decodes: float = math.inf, eager_gap_s: float = 0.0) -> StepCost:
    """Read the linear pieces off the physics with twelve probes.

    Large prompt-only steps are compute-bound (slope, intercept); 1-3 token steps are
    memory-bound (weight reads; for MoE the experts touched); two large decode-only steps
    give the output head's cost per sampled token and the decode steps' fixed time;
    context and pair slopes come from differences. Exact for single-stage replicas of
    full-attention models (tests check it); pipeline stages and sliding windows are
    approximated by the same form.
    """
    xa, xb = 8192.0, 16384.0
    qa, qb = step_seconds(0, 0, xa, 0), step_seconds(0, 0, xb, 0)
    # Large decode probes, both beyond the CUDA graphs or both within (the engine's
    # graph limit, `graph_max_decodes`, gives the decode steps' two fixed times).
    da_at = max(xa, graph_max_decodes + 1.0) if graph_max_decodes < xb else xa
    db_at = da_at + (xb - xa)
    slope = (qb - qa) / (xb - xa)
    fixed = qa - slope * xa
    ys = [step_seconds(0, 0, t, 0) - fixed for t in (1.0, 2.0, 3.0)]
    if expert_fraction > 0:
        a = expert_fraction
        rows = [[1.0, 1.0 - (1.0 - a) ** t, t] for t in (1.0, 2.0, 3.0)]
        weights, experts, per_token = (float(v) for v in np.linalg.solve(np.array(rows), np.array(ys)))
    else:
        per_token = ys[1] - ys[0]
        weights, experts = ys[0] - per_token, 0.0
    gemm = slope - per_token
    per_context = (step_seconds(1, 1e5, 0, 0) - step_seconds(1, 0, 0, 0)) / 1e5
    per_pair = (step_seconds(0, 0, xa, xa * xa / 2) - qa) / (xa * xa / 2)
    da, db = step_seconds(da_at, 0, 0, 0), step_seconds(db_at, 0, 0, 0)
    decode_slope = (db - da) / (db_at - da_at)  # gemm + lm head + per token + host per sequence
    # One and two decodes are memory-bound: what they add beyond the per-token time is host
    # time per sequence (outside the roofline's max, unlike the output head's FLOPs).
    touched = (1.0 - (1.0 - expert_fraction) ** 2) - expert_fraction if expert_fraction > 0 else 0.0
    sampled = max(step_seconds(2, 0, 0, 0) - step_seconds(1, 0, 0, 0) - per_token - experts * touched, 0.0)
    lm_head = max(decode_slope - slope - sampled, 0.0)
    decode_fixed = da - decode_slope * da_at
    if da_at > graph_max_decodes:  # the probes ran eagerly: the graphs' fixed time is the gap less
        decode_fixed -= eager_gap_s
    return StepCost(weights, experts, expert_fraction, gemm, lm_head, per_token, max(per_context, 0.0),
                    max(per_pair, 0.0), fixed, decode_fixed, sampled,
                    graph_max_decodes if eager_gap_s > 0 else math.inf, eager_gap_s)


@dataclass(frozen=True)
class Replica:
    """What queueing needs of one configuration's physics (hashable: models are cached by it)."""

    step: StepCost
    max_seqs: int  # the engine's cap on running sequences (vLLM max_num_seqs)
    kv_cache_tokens: float  # KV-cache room of the replica, in tokens of context
    token_budget: int  # tokens per step, decodes + prompt chunks (vLLM max_num_batched_tokens)
    request_overhead_s: float = 0.0  # added to every request's first token, outside the GPU's steps
    step_seconds: Callable[[float, float, float, float], float] | None = field(default=None, compare=False, hash=False)
    # How a step is filled (SCHEDULERS): "chunked_mixed" - every step decodes one token for
    # each running sequence and fills the rest of the token budget with prompt chunks (vLLM
    # V1, TensorRT-LLM in-flight batching); "prefill_first" - while admitted prompts wait,
    # steps prefill only and running sequences pause (vLLM V0 without chunked prefill,
    # SGLang without mixed chunks).
    scheduler: str = "chunked_mixed"
    # How the KV cache admits sequences (KV_ADMISSIONS): "whole_sequence" - a sequence
    # reserves its prompt and every output token when admitted, so none is ever preempted
    # (TensorRT-LLM's default GUARANTEED_NO_EVICT); "paged_on_demand" - pages are allocated as
    # tokens arrive and a full cache preempts (vLLM, SGLang): more sequences run at once.
    kv_admission: str = "whole_sequence"
    # Decode steps a prefill-first engine runs per scheduling decision (vLLM V0's
    # num_scheduler_steps; SGLang declares num_continuous_decode_steps but 0.5.9 reads it
    # nowhere): once it decodes, it
    # decodes this many steps before it looks at waiting prompts again, so a prompt that
    # arrives during them waits for the block's end. 1: it looks before every step.
    multi_step: int = 1

    def __post_init__(self):
        if self.scheduler not in SCHEDULERS:
            raise ValueError(f"scheduler must be one of {', '.join(SCHEDULERS)}, got {self.scheduler!r}")
        if self.kv_admission not in KV_ADMISSIONS:
            raise ValueError(f"kv_admission must be one of {', '.join(KV_ADMISSIONS)}, got {self.kv_admission!r}")
        if not (isinstance(self.multi_step, int) and 1 <= self.multi_step <= MAX_MULTI_STEP):
            raise ValueError(f"multi_step must be a whole number of decode steps from 1 to {MAX_MULTI_STEP}, "
                             f"got {self.multi_step!r}")
        if self.multi_step > 1 and self.scheduler != "prefill_first":
            # vLLM V0's multi-step with chunked prefill runs prompt chunks inside the block
            # too: neither the model nor the simulator represents that.
            raise ValueError("multi_step above 1 is modelled for the prefill_first scheduler only (vLLM V0 without "
                             "chunked prefill, SGLang)")

    def slowed(self, factor: float) -> "Replica":
        """This replica running `factor` times slower: every time of its step (all of
        `StepCost` but the experts' fraction, a count) and its per-request overhead
        multiplied by `factor`; limits (slots, KV room, token budget) and the scheduler
        unchanged. How the planner sizes for a real replica slower than the model
        (solver/confidence.py). `factor` 1 gives this very object (caches keyed on it hit)."""
        if factor == 1:
            return self
        if not (factor > 0 and math.isfinite(factor)):
            raise ValueError(f"a slowdown factor must be a positive finite number, got {factor!r}")
        step = replace(self.step, **{f.name: getattr(self.step, f.name) * factor for f in fields(StepCost)
                                     if f.name not in _STEP_COUNTS})
        exact = self.step_seconds
        return replace(self, step=step, request_overhead_s=self.request_overhead_s * factor,
                       step_seconds=None if exact is None else _Slowed(exact, factor))


# StepCost's fields that are not times (kept as they are when a replica is slowed).
_STEP_COUNTS = ("expert_fraction", "graph_max_decodes")


@dataclass(frozen=True)
class _Slowed:
    """An exact step function, `factor` times slower (picklable, unlike a closure)."""

    seconds: Callable[[float, float, float, float], float]
    factor: float

    def __call__(self, decodes, context, prefill, pairs):
        return self.seconds(decodes, context, prefill, pairs) * self.factor


SCHEDULERS = ("chunked_mixed", "prefill_first")
MAX_MULTI_STEP = 64  # decode steps per scheduling decision (vLLM V0's examples use 8-16)
KV_ADMISSIONS = ("whole_sequence", "paged_on_demand")


def kv_claim_tokens(prompt, output, kv_admission: str):
    """KV-cache tokens a sequence is admitted against: prompt + output where the engine
    reserves the whole sequence; prompt + half the output (rounded up) where pages are
    allocated on demand - what it holds on average over its stay. Numbers or arrays."""
    if kv_admission == "paged_on_demand":
        return prompt + np.ceil(np.asarray(output, dtype=float) / 2.0)
    return prompt + output


def replica_for(q) -> Replica:
    """The queueing view of a `PerfQuery` (its prompt/output lengths and SLOs are not used):
    the engine's batch cap and token budget (its policy, `engine_options` included), the
    KV room at that cap, and the step physics.

    Kept with the query's group (`solver.perf.llm.GROUPS`: what a setup depends on), so
    the configurations of services that differ only in lengths or SLOs share one fit.
    Not for a pinned batch, nor static batching, whose KV room depends on the prompt."""
    if q.batch is not None or q.batching == "static":
        return _replica_for(q)
    from solver.perf.llm import GROUPS

    group = GROUPS.get(q)
    if group.replica is None:
        group.replica = _replica_for(q)
    return group.replica


def _replica_for(q) -> Replica:
    from solver.perf.llm import (engine_policy, graph_limits, kv_gib_per_sequence, memory_budget, profile,
                                 request_overhead_s, step_time_fn)

    step_seconds = step_time_fn(q)
    policy = engine_policy(q)
    mem = memory_budget(q)
    cap = policy.max_batch if q.batch is None else min(policy.max_batch, q.batch)
    per_token_gib = kv_gib_per_sequence(q, 1000.0) / 1000.0
    kv_tokens = mem.kv_capacity_gib(cap) / per_token_gib if per_token_gib > 0 else 1e12
    m = q.model
    fraction = m.active_experts / m.experts if m.is_moe else 0.0
    engine = profile(q)
    graph_max, gap = graph_limits(q)
    return Replica(fit_step_cost(step_seconds, fraction, graph_max, gap), int(cap), max(kv_tokens, 0.0), int(policy.token_budget),
                   request_overhead_s(q), step_seconds, scheduler=q.scheduler or engine.scheduler,
                   kv_admission=q.kv_admission or engine.kv_admission, multi_step=q.multi_step or 1)
