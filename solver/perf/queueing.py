"""Queueing model of one continuous-batching LLM replica: latency percentiles at a load.

`percentiles_at_rate(replica, classes, rate_per_s)` gives TTFT, TPOT and end-to-end
latency percentiles (p50/p90/p95/p99 over all requests: the classes' shares weigh the
tail) when `rate_per_s` requests/s are routed to one replica; `max_rate_for_slo(...)` is
the inverse the planner needs: the largest rate per replica at which every stated bound
holds at a percentile. docs/formulation.md ("Latency under load") has the maths;
`solver.sim.replica` is the discrete-event simulator that checks it
(bench/queueing_accuracy.py, docs/queueing.md).

In short, for rate lambda and request classes k (share pi_k, prompt P_k, output O_k):

* Physics: the engine step as a function of (decoding sequences, their context tokens,
  prompt tokens prefilled, prompt attention pairs) - the performance model's roofline,
  reduced to its linear pieces (`StepCost`, read off `solver.perf.llm.step_time_fn` by
  nine probes). At most N sequences run at once: N = min(engine cap, KV-cache tokens /
  tokens a sequence reserves).
* Step content: each step carries the prompts that arrived during the step before
  (chunked prefill), so prefill slows decode; step lengths form a short Markov chain.
* Batch: centred on the fluid point m = lambda x L(m), L(n) the time a request holds its
  slot at batch n (O steps, each slower as n grows). Because every request's stay
  stretches when the batch grows, the batch spreads as ca^2 m / (1 - eps)^2 (eps: the
  elasticity of L in n); a tempered birth-death chain has exactly that spread. Requests
  that find all N slots busy wait: the chain's mass at N with a Kingman-scaled
  geometric queue beyond it ((ca^2 + cs^2) / 2).
* TTFT = wait for a slot (if any) + the rest of the step in progress (length-biased) +
  the step(s) that prefill the prompt with those that arrived alongside it.
* TPOT = the mean step over a request's decode: the batch over its lifetime (normal,
  capped at N) plus step-to-step noise averaged over its O - 1 steps.
* Percentiles over all requests: the mixture CDF sum_k pi_k F_k(x) = p, solved for x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping, Sequence

import numpy as np

PERCENTILES = (50, 90, 95, 99)
METRICS = ("ttft_ms", "tpot_ms", "latency_ms")
DEFAULT_MAX_UTILIZATION = 0.9  # the planner never fills a replica beyond this share of its saturation rate
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(8)
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()
_SQRT2 = math.sqrt(2.0)
# Quantile levels standing in for a class's TTFT inside its latency (finer in the tail).
_LAT_LEVELS = np.array([0.0, .05, .1, .15, .2, .25, .3, .35, .4, .45, .5, .55, .6, .65, .7, .75, .8, .85, .9,
                        .93, .95, .97, .98, .99, .995, .998, .999, 1.0])
_LAT_MIDS, _LAT_W = 0.5 * (_LAT_LEVELS[1:] + _LAT_LEVELS[:-1]), np.diff(_LAT_LEVELS)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


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
    t = decodes + prefill tokens; touched(t) = 1 - (1 - expert_fraction)^t (MoE experts read).
    Steps that prefill run eagerly (no CUDA graph): their fixed time differs. s_per_sampled
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

    def seconds(self, decodes, context, prefill, pairs):
        """Floats or numpy arrays (broadcast)."""
        t = decodes + prefill
        w = self.weights_s
        if self.expert_fraction > 0:
            w = w + self.expert_weights_s * (1.0 - (1.0 - self.expert_fraction) ** t)
        prefill_a = np.asarray(prefill, dtype=float)
        fixed = np.where(prefill_a > 0, self.fixed_s, self.decode_fixed_s)
        out = (np.maximum(w, self.gemm_s_per_token * t + self.lm_head_s_per_decode * decodes)
               + self.s_per_token * t + self.s_per_context_token * context + self.s_per_pair * pairs + fixed)
        if self.s_per_sampled:
            pairs_a = np.asarray(pairs, dtype=float)
            prompts = np.where(pairs_a > 0, prefill_a ** 2 / (2.0 * np.maximum(pairs_a, 1e-300)), 0.0)
            out = out + self.s_per_sampled * (decodes + prompts)
        return out


def fit_step_cost(step_seconds: Callable[[float, float, float, float], float], expert_fraction: float = 0.0) -> StepCost:
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
    da, db = step_seconds(xa, 0, 0, 0), step_seconds(xb, 0, 0, 0)
    decode_slope = (db - da) / (xb - xa)  # gemm + lm head + per token + host per sequence
    # One and two decodes are memory-bound: what they add beyond the per-token time is host
    # time per sequence (outside the roofline's max, unlike the output head's FLOPs).
    touched = (1.0 - (1.0 - expert_fraction) ** 2) - expert_fraction if expert_fraction > 0 else 0.0
    sampled = max(step_seconds(2, 0, 0, 0) - step_seconds(1, 0, 0, 0) - per_token - experts * touched, 0.0)
    lm_head = max(decode_slope - slope - sampled, 0.0)
    decode_fixed = da - decode_slope * xa
    return StepCost(weights, experts, expert_fraction, gemm, lm_head, per_token, max(per_context, 0.0),
                    max(per_pair, 0.0), fixed, decode_fixed, sampled)


@dataclass(frozen=True)
class Replica:
    """What queueing needs of one configuration's physics (hashable: models are cached by it)."""

    step: StepCost
    max_seqs: int  # the engine's cap on running sequences (vLLM max_num_seqs)
    kv_cache_tokens: float  # KV-cache room of the replica, in tokens of context
    token_budget: int  # tokens per step, decodes + prompt chunks (vLLM max_num_batched_tokens)
    request_overhead_s: float = 0.0  # added to every request's first token, outside the GPU's steps
    step_seconds: Callable[[float, float, float, float], float] | None = field(default=None, compare=False, hash=False)


def replica_for(q) -> Replica:
    """The queueing view of a `PerfQuery` (its prompt/output lengths and SLOs are not used):
    the engine's batch cap and token budget (its policy, `engine_options` included), the
    KV room at that cap, and the step physics."""
    from solver.perf.llm import engine_policy, kv_gib_per_sequence, memory_budget, request_overhead_s, step_time_fn

    step_seconds = step_time_fn(q)
    policy = engine_policy(q)
    mem = memory_budget(q)
    cap = policy.max_batch if q.batch is None else min(policy.max_batch, q.batch)
    per_token_gib = kv_gib_per_sequence(q, 1000.0) / 1000.0
    kv_tokens = mem.kv_capacity_gib(cap) / per_token_gib if per_token_gib > 0 else 1e12
    m = q.model
    fraction = m.active_experts / m.experts if m.is_moe else 0.0
    return Replica(fit_step_cost(step_seconds, fraction), int(cap), max(kv_tokens, 0.0), int(policy.token_budget),
                   request_overhead_s(q), step_seconds)


# ---------------------------------------------------------------- outputs
@dataclass(frozen=True)
class LoadPercentiles:
    """Latency percentiles at one rate per replica, in ms; inf where the replica cannot keep up."""

    rate_per_s: float
    utilization: float  # rate / saturation rate
    saturation_rate_per_s: float  # the most requests/s one replica sustains with this class mix
    mean_batch: float  # sequences in the replica, time average
    slots: int  # N: sequences that fit at once
    wait_probability: float  # share of requests that wait for a KV slot
    ttft_ms: Mapping[int, float]
    tpot_ms: Mapping[int, float]
    latency_ms: Mapping[int, float]

    def value(self, metric: str, percentile: int) -> float:
        return getattr(self, metric)[percentile]


# ---------------------------------------------------------------- step contents
@dataclass(frozen=True)
class _Atoms:
    """Possible prompt contents of one step: count, tokens, attention pairs, and how to weigh them.

    Compositions are exact up to two prompts (every pair of prompt-size groups); three or
    more prompts carry the mean composition. `comp` is the composition's probability given
    its count.
    """

    count: np.ndarray
    tokens: np.ndarray
    pairs: np.ndarray
    comp: np.ndarray
    j_max: int


def _size_groups(share: np.ndarray, prompt: np.ndarray, limit: int = 3):
    """Up to `limit` groups of similar prompt length: (shares, mean tokens, mean pairs)."""
    order = np.argsort(prompt, kind="stable")
    s, p = share[order], prompt[order].astype(float)
    if len(s) <= limit:
        bounds = list(range(len(s) + 1))
    else:
        gaps = np.diff(np.log(np.maximum(p, 1.0)))
        cuts = sorted((np.argsort(gaps, kind="stable")[-(limit - 1):] + 1).tolist())
        bounds = [0, *cuts, len(s)]
    gs, gt, gp = [], [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        w = s[a:b]
        if w.sum() <= 0:
            continue
        gs.append(w.sum())
        gt.append(float(np.dot(w, p[a:b]) / w.sum()))
        gp.append(float(np.dot(w, p[a:b] ** 2 / 2) / w.sum()))
    gs = np.array(gs)
    return gs / gs.sum(), np.array(gt), np.array(gp)


@lru_cache(maxsize=1024)
def _atoms(share: tuple, tokens: tuple, pairs: tuple, j_max: int) -> _Atoms:
    """Compositions of j prompts from the size groups: exact up to three prompts; beyond,
    the largest-prompt group against the others (merged), binomially. Negligible
    compositions (probability < 1e-9 given their count) are left out."""
    g = len(share)
    count, tok, pr, comp = [0.0], [0.0], [0.0], [1.0]
    for j in range(1, min(3, j_max) + 1):
        for combo in _multisets(g, j):
            n = [combo.count(i) for i in range(g)]
            prob = math.factorial(j)
            for i in range(g):
                prob = prob / math.factorial(n[i]) * share[i] ** n[i]
            if prob < 1e-9:
                continue
            count.append(float(j))
            tok.append(sum(n[i] * tokens[i] for i in range(g)))
            pr.append(sum(n[i] * pairs[i] for i in range(g)))
            comp.append(prob)
    big = max(range(g), key=lambda i: tokens[i])
    s_big = share[big]
    rest = 1.0 - s_big
    mean_t = sum(a * b for a, b in zip(share, tokens))
    mean_p = sum(a * b for a, b in zip(share, pairs))
    t_rest = (mean_t - s_big * tokens[big]) / rest if rest > 1e-12 else 0.0
    p_rest = (mean_p - s_big * pairs[big]) / rest if rest > 1e-12 else 0.0
    for j in range(4, j_max + 1):
        for i in range(j + 1):
            prob = math.comb(j, i) * s_big ** i * rest ** (j - i)
            if prob < 1e-9:
                continue
            count.append(float(j))
            tok.append(i * tokens[big] + (j - i) * t_rest)
            pr.append(i * pairs[big] + (j - i) * p_rest)
            comp.append(prob)
    return _Atoms(np.array(count), np.array(tok), np.array(pr), np.array(comp), j_max)


def _multisets(g: int, j: int) -> list[list[int]]:
    if j == 0:
        return [[]]
    out = []
    for first in range(g):
        for rest in _multisets(g, j - 1):
            if not rest or rest[0] >= first:
                out.append([first, *rest])
    return out


def _count_pmf(means: np.ndarray, cv: float, j_max: int, lump_tail: bool = True, palm: bool = False) -> np.ndarray:
    """P(count = j), j = 0..j_max (the last holds the tail), of arrivals in windows with the
    given mean counts: Poisson (cv = 1), negative binomial (variance cv^2 x mean, bursty) or
    binomial (smoother than Poisson). `palm`: the count of the *others* in a window seen
    from one of its arrivals (size-biased less one: NB r + 1, binomial n - 1; Poisson alike)."""
    m = np.maximum(np.asarray(means, dtype=float), 1e-12)[..., None]
    j = np.arange(1, j_max + 1, dtype=float)
    # A bursty renewal process's counts have variance cv^2 x mean only over windows holding
    # many arrivals; windows of well under one arrival hold 0 or 1 (variance ~ mean). A
    # smooth one (gamma shape > 1) is regular at short lags too: variance cv^2 x mean.
    disp = 1.0 + (cv * cv - 1.0) * (m / (m + 1.0) if cv > 1.0 else 1.0)
    logj = np.log(j)
    with np.errstate(divide="ignore"):  # log(0) = -inf where a binomial runs out of trials
        if abs(cv - 1.0) < 1e-6:
            log_first = -m
            log_ratios = np.log(m) - logj
        elif cv > 1.0:
            r = m / np.maximum(disp - 1.0, 1e-9)
            q = m / (r + m)  # NB "failure" probability; mean r q / (1 - q) = m
            if palm:
                r = r + 1.0
            log_first = r * np.log1p(-q)
            log_ratios = np.log(j - 1.0 + r) - logj + np.log(q)
        else:
            trials = np.maximum(np.ceil(m / np.maximum(1.0 - disp, 1e-3)), np.ceil(m))
            q = np.clip(m / trials, 1e-300, 1.0 - 1e-12)
            if palm:
                trials = np.maximum(trials - 1.0, 0.0)
            log_first = trials * np.log1p(-q)
            log_ratios = np.log(np.maximum(trials - j + 1.0, 0.0)) - logj + np.log(q) - np.log1p(-q)
    # In logs: a window holding hundreds of prompts neither under- nor overflows.
    logs = np.concatenate([log_first, log_first + np.cumsum(log_ratios, axis=-1)], axis=-1)
    pmf = np.exp(logs)
    if lump_tail:
        pmf[..., -1] += np.maximum(0.0, 1.0 - pmf.sum(axis=-1))
    return pmf


# ---------------------------------------------------------------- the model
class ReplicaLoadModel:
    """One replica serving one class mix with one arrival CV; evaluate at any rate."""

    def __init__(self, replica: Replica, classes: Sequence[TrafficClass], arrival_cv: float = 1.0):
        _check_classes(classes)
        if not (arrival_cv >= 0 and math.isfinite(arrival_cv)):
            raise ValueError(f"arrival_cv must be a non-negative number, got {arrival_cv}")
        self.replica = replica
        self.step = replica.step
        self.cv = float(arrival_cv)
        share = np.array([c.share for c in classes], dtype=float)
        keep = share > 0
        self.classes = tuple(c for c, k in zip(classes, keep) if k)
        self.share = share[keep] / share[keep].sum()
        self.prompt = np.array([max(int(c.prompt_tokens), 0) for c in self.classes], dtype=float)
        self.output = np.array([max(int(c.output_tokens), 1) for c in self.classes], dtype=float)
        self.budget = float(max(replica.token_budget, 1))
        # A class holds its slot about O steps: it weighs the batch's composition by share x O.
        slot_w = self.share * self.output
        slot_w /= slot_w.sum()
        reserve = float(np.dot(slot_w, self.prompt + self.output))
        kv_slots = replica.kv_cache_tokens / reserve if reserve > 0 else math.inf
        self.slots = int(max(0, min(replica.max_seqs, self.budget, math.floor(kv_slots + 1e-9))))
        dec_w = self.share * (self.output - 1.0)
        self.context_per_decode = (float(np.dot(dec_w, self.prompt + self.output / 2) / dec_w.sum())
                                   if dec_w.sum() > 0 else float(np.dot(self.share, self.prompt)))
        steps_k = self.output.copy()  # one prefill step (first token) + O - 1 decode steps
        self.steps_per_request = float(np.dot(self.share, steps_k))
        self.decode_fraction = float(np.dot(self.share, self.output - 1.0)) / self.steps_per_request
        self.decode_steps_per_request = float(np.dot(self.share, self.output - 1.0))
        self.mean_prompt = float(np.dot(self.share, self.prompt))
        self.mean_pairs = float(np.dot(self.share, self.prompt ** 2 / 2))
        gs, gt, gp = _size_groups(self.share, self.prompt)
        self._groups = (tuple(gs.tolist()), tuple(gt.tolist()), tuple(gp.tolist()))
        self._sat: float | None = None
        # Kingman's service variability: slot times differ across classes by their O.
        ms = float(np.dot(self.share, self.output))
        self.cs2 = float(np.dot(self.share, (self.output - ms) ** 2)) / (ms * ms)
        self.kingman = max((self.cv ** 2 + self.cs2) / 2.0, 1e-3)

    # -- building blocks
    def atoms(self, mean_count: float) -> _Atoms:
        spread = max(self.cv, 1.0)
        if not math.isfinite(mean_count):
            mean_count = 1e6
        j = int(min(48, max(3, math.ceil(mean_count + 5.0 * spread * math.sqrt(mean_count + 0.5) + 2))))
        return _atoms(*self._groups, j)

    def _weights(self, means, at: _Atoms, palm: bool = False) -> np.ndarray:
        pmf = _count_pmf(means, self.cv, at.j_max, palm=palm)
        return pmf[..., at.count.astype(int)] * at.comp

    def _decodes(self, n):
        return np.asarray(n, dtype=float) * self.decode_fraction

    def _superstep(self, dec, ctx, at: _Atoms):
        """Seconds and steps to run a step's content; content beyond the token budget spills
        into further steps (chunked prefill), counted here as one longer 'super-step'."""
        return self._superstep_tokens(dec, ctx, at.tokens, at.pairs, outer=True)

    def _superstep_tokens(self, dec, ctx, tokens, pairs, outer: bool = False):
        """As `_superstep` for given tokens; `outer`: batches along a new leading axis."""
        dec = np.asarray(dec, dtype=float)
        room = np.maximum(self.budget - dec, 1.0)
        if outer and np.ndim(dec):
            dec, ctx, room = dec[..., None], np.asarray(ctx)[..., None], room[..., None]
        k = np.maximum(np.ceil(tokens / room), 1.0)
        last = tokens - (k - 1.0) * room
        per_token_pairs = np.where(tokens > 0, pairs / np.maximum(tokens, 1e-9), 0.0)
        seconds = ((k - 1.0) * self.step.seconds(dec, ctx, room, per_token_pairs * room)
                   + self.step.seconds(dec, ctx, last, per_token_pairs * last))
        return seconds, k

    def _expected_superstep(self, dec, ctx, means):
        """E[seconds], E[steps] of the content of windows with `means` prompts on average.
        Counts beyond the enumerated atoms are one atom at their conditional mean, so the
        means stay right however many prompts a step gathers."""
        means = np.asarray(means, dtype=float)
        at = self.atoms(float(means.max()))
        pmf = _count_pmf(means, self.cv, at.j_max, lump_tail=False)  # [M, J+1]
        w = pmf[:, at.count.astype(int)] * at.comp
        d, k = self._superstep(dec, ctx, at)
        tail = np.maximum(1.0 - pmf.sum(axis=1), 0.0)
        j_in = pmf @ np.arange(at.j_max + 1, dtype=float)
        j_tail = np.where(tail > 1e-12, np.maximum(means - j_in, 0.0) / np.maximum(tail, 1e-300), at.j_max + 1.0)
        dt, kt = self._superstep_tokens(dec, ctx, j_tail * self.mean_prompt, j_tail * self.mean_pairs)
        return (w * d).sum(axis=-1) + tail * dt, (w * k).sum(axis=-1) + tail * kt

    def prefill_limit(self, n: float) -> float:
        """The rate at which prompts alone would fill every step (prefill load 1) at batch n."""
        dec = float(self._decodes(n))
        fixed = float(self.step.seconds(dec, dec * self.context_per_decode, 0.0, 0.0))
        room = max(self.budget - dec, 1.0)
        st = self.step
        per_prompt = ((st.gemm_s_per_token + st.s_per_token + fixed / room) * self.mean_prompt
                      + st.s_per_pair * self.mean_pairs)
        return 1.0 / per_prompt if per_prompt > 0 else math.inf

    def mean_step(self, n, rate: float) -> np.ndarray:
        """Mean step at batches n (sequences in the replica) when `rate` requests/s arrive;
        inf where prompts arrive faster than the replica can prefill them.

        A fixed point: a step carries the prompts that arrived during the super-step before
        it, so the mean super-step s solves s = E[content of a window of rate x s prompts];
        E[...] grows about linearly in s with slope rate / prefill_limit < 1 (Illinois steps
        in a bracket).
        """
        n = np.atleast_1d(np.asarray(n, dtype=float))
        dec = self._decodes(n)
        ctx = dec * self.context_per_decode
        base = self.step.seconds(dec, ctx, 0.0, 0.0)
        if rate <= 0:
            return base
        load = np.array([rate / self.prefill_limit(x) for x in n])
        out = np.full(len(n), math.inf)
        ok = load < 1.0 - 1e-9
        if not ok.any():
            return out
        dec, ctx, base = dec[ok], ctx[ok], base[ok]

        def gap(span):
            e, k = self._expected_superstep(dec, ctx, rate * span)
            return e - span, e, k

        lo = base.copy()
        g_lo, _, _ = gap(lo)
        # Beyond the memory-bound kink the content grows linearly with slope `load`: the
        # linear root is close; bracket it tightly.
        lin = np.maximum((g_lo + base - load[ok] * base) / (1.0 - load[ok]), base)
        hi = lin * 1.02 + 1e-9
        g_hi, _, _ = gap(hi)
        for _ in range(40):
            bad = g_hi >= 0
            if not bad.any():
                break
            hi = np.where(bad, hi * 2.0, hi)
            g_hi = np.where(bad, gap(hi)[0], g_hi)
        span = lo
        for _ in range(40):  # Illinois: regula falsi that halves the value at a stale end
            denom = np.where(g_hi != g_lo, g_hi - g_lo, -1.0)
            span = np.clip(hi - g_hi * (hi - lo) / denom, lo, hi)
            g, _, _ = gap(span)
            if np.all(np.abs(g) <= 1e-4 * span):
                break
            left = g > 0  # the root lies above span
            lo, hi = np.where(left, span, lo), np.where(left, hi, span)
            g_lo, g_hi = np.where(left, g, g_lo * 0.5), np.where(left, g_hi * 0.5, g)
        e, k = self._expected_superstep(dec, ctx, rate * span)
        out[ok] = e / k
        return out

    def slot_seconds(self, n: np.ndarray, rate: float, tau: np.ndarray | None = None) -> np.ndarray:
        """L(n): seconds a request holds its slot at batch n - its prefill step (longer than
        most: it carries its prompt and those arriving with it) and O - 1 mean steps."""
        n = np.asarray(n, dtype=float)
        tau = self.mean_step(n, rate) if tau is None else tau
        finite = np.isfinite(tau)
        if not finite.all():
            out = np.full(len(n), math.inf)
            if finite.any():
                out[finite] = self.slot_seconds(n[finite], rate, tau[finite])
            return out
        dec = self._decodes(n)
        ctx = dec * self.context_per_decode
        with_me = rate * tau * self.mean_prompt  # tokens of the prompts arriving alongside
        first = np.zeros_like(n)
        for k in range(len(self.share)):
            sec, _ = self._superstep_tokens(dec, ctx, self.prompt[k] + with_me,
                                            self.prompt[k] ** 2 / 2 + rate * tau * self.mean_pairs)
            first += self.share[k] * sec
        return self.decode_steps_per_request * tau + first

    # -- capacity
    def saturation_rate(self) -> float:
        """Requests/s with all N slots busy all the time: the replica's ceiling for this mix.

        The rate r with r = N / (steps per request x mean step at batch N and rate r) - the
        prompts arriving at rate r ride along in the steps - below the prefill limit;
        Illinois steps on r.
        """
        if self._sat is None:
            if self.slots < 1:
                self._sat = 0.0
                return 0.0
            N = float(self.slots)

            def h(rate):
                return N / float(self.slot_seconds(np.array([N]), rate)[0]) - rate

            lo, hi = 0.0, min(N / float(self.slot_seconds(np.array([N]), 0.0)[0]),
                              self.prefill_limit(N) * (1.0 - 1e-9))
            h_lo, h_hi = h(lo), h(hi)
            if h_hi >= 0:
                self._sat = hi
                return hi
            r = hi
            for _ in range(60):
                r = hi - h_hi * (hi - lo) / (h_hi - h_lo)
                hr = h(r)
                if abs(hr) <= 1e-6 * max(r, 1e-12) or hi - lo <= 1e-9 * hi:
                    break
                if hr > 0:
                    lo, h_lo = r, hr
                    h_hi *= 0.5
                else:
                    hi, h_hi = r, hr
                    h_lo *= 0.5
            self._sat = r
        return self._sat

    def _window_nodes(self, rate: float, rho: float, tau: np.ndarray):
        """Decode window seconds T at Gauss-Hermite nodes xi of the prompt work arriving in it:
        T (1 - rho) = D + a xi sqrt(T), D = (O - 1) x tau x (1 - rho), a = ca sqrt(lambda E[w^2]).
        tau: [..., K] mean steps; returns [Hz, ..., K] window seconds."""
        steps = np.maximum(self.output - 1.0, 1.0)
        work = self.prompt * (self.step.gemm_s_per_token + self.step.s_per_token) + self.step.s_per_pair * self.prompt ** 2 / 2
        a = max(self.cv, 0.05) * math.sqrt(rate * float(np.dot(self.share, work ** 2)))
        rho = min(rho, 0.95)
        decode = steps * tau * (1.0 - rho)
        xi = _GH_NODES.reshape((-1,) + (1,) * np.ndim(decode))
        root = (a * xi + np.sqrt((a * xi) ** 2 + 4.0 * (1.0 - rho) * decode)) / (2.0 * (1.0 - rho))
        return root ** 2

    def _stretch(self, rate: float, rho: float, tau: float) -> float:
        """Mean decode window over its fluid value (>= 1), weighted by the classes' windows."""
        t = self._window_nodes(rate, rho, np.full(len(self.share), tau))  # [Hz, K]
        mean_t = _GH_WEIGHTS @ t
        base = np.maximum(self.output - 1.0, 1.0) * tau
        w = self.share * np.maximum(self.output - 1.0, 0.0)
        return float(np.dot(w, mean_t / base) / w.sum()) if w.sum() > 0 else 1.0

    # -- state at a rate
    def _state(self, rate: float) -> "_State":
        N = self.slots
        grid = np.unique(np.round(np.geomspace(1, N, min(N, 8)))) if N > 1 else np.array([1.0])
        tau_grid = self.mean_step(grid, rate)
        ns = np.arange(1, N + 1, dtype=float)
        L = np.interp(ns, grid, self.slot_seconds(grid, rate, tau_grid))  # seconds a request holds its slot
        fluid = _fluid_batch(rate, ns, L)
        # Elasticity of the slot time in the batch at the fluid point.
        lo, hi = max(fluid * 0.9, 1.0), min(max(fluid * 1.1, 1.0 + 1e-9), float(N))
        eps = 0.0
        if hi > lo:
            eps = math.log(np.interp(hi, ns, L) / np.interp(lo, ns, L)) / math.log(hi / lo)
        eps = min(max(eps, 0.0), 0.95)
        # Prefill's share of a step at the fluid point: a surge of arrivals also brings a
        # surge of prompts that slows everyone's decode, widening the batch further.
        m = max(min(fluid, N), 1.0)
        dec_m = float(self._decodes(m))
        tau_m = float(np.interp(m, grid, tau_grid))
        rho_p = min(max(1.0 - float(self.step.seconds(dec_m, dec_m * self.context_per_decode, 0.0, 0.0)) / tau_m,
                        0.0), 0.95)
        # Static gains give variance ca^2 m / ((1 - eps)(1 - rho_p))^2; fluctuations faster
        # than the feedback loop are amplified less: exponent 1.6, fitted to the simulator on
        # nine configurations outside the validation grid (docs/queueing.md).
        temper = (1.0 - eps) ** 0.6 * (1.0 - rho_p) ** 1.6 / max(self.cv ** 2, 0.05)
        # Requests stay longer on average than at the fluid point: the prompt work arriving
        # during a stay fluctuates and slows it more when high than it speeds it when low
        # (the window equation of `_tpot_parts`). Little's law puts the batch's centre at
        # lambda x mean stay = kappa x fluid.
        decode_m = float(np.dot(self.share, self.output - 1.0)) * tau_m
        first_m = float(np.interp(m, ns, L)) - decode_m
        kappa = (decode_m * self._stretch(rate, rho_p, tau_m) + first_m) / (decode_m + first_m)
        centre = min(kappa * m, N - 0.5) if m < N else m
        base_logr = temper * (math.log(rate) + np.log(L) - np.log(ns))
        # While requests queue, each freed slot admits one at once: the replica runs at its
        # saturation rate (prompts arrive with the admissions), so the queue drains at
        # saturation - rate.
        sat = self.saturation_rate()
        rho = min(rate / sat, 1.0 - 1e-9)
        busy = np.arange(N + 1, dtype=float)
        logr = base_logr - temper * (math.log(rate) + math.log(float(np.interp(centre, ns, L))) - math.log(centre))
        logp = np.concatenate([[0.0], np.cumsum(logr)])
        logp -= logp.max()
        p = np.exp(logp)  # n = 0..N
        tail = p[-1] * rho / (1.0 - rho)  # the queue beyond N: geometric, as M/M/N
        total = p.sum() + tail
        p /= total
        wait_m = float(p[-1] + tail / total)  # an arrival finds all N slots busy (PASTA)
        mean_b = float(np.dot(p, busy) + tail / total * N)
        var_b = float(np.dot(p, (busy - mean_b) ** 2) + tail / total * (N - mean_b) ** 2)
        # Kingman / Allen-Cunneen scale G/G/N waits by z = (ca^2 + cs^2) / 2. Burstiness is
        # already in the chain (its spread), and a full replica frees slots at a shared step
        # clock rather than as N independent deterministic servers: against the simulator the
        # chance to wait stays M/M's and the wait shrinks only by (1 + z) / 2.
        wait = min(wait_m, 1.0)
        theta = (1.0 + self.kingman) / 2.0 / max(sat - rate, 1e-9 * sat)
        return _State(rate, N, grid, tau_grid, fluid, eps, wait, theta, mean_b, var_b, rho_p)

    # -- distributions
    def _ttft_parts(self, st: "_State"):
        """Pieces of every class's TTFT: uniforms (no wait) and shifted exponentials (waited)."""
        rate = st.rate
        n0 = max(min(st.fluid, st.slots), 1.0)
        dec0 = float(self._decodes(n0))
        ctx0 = dec0 * self.context_per_decode
        t_bar = float(st.tau(n0))
        at = self.atoms(rate * t_bar * 8.0)
        room = max(self.budget - dec0, 1.0)
        d, k = self._superstep(dec0, ctx0, at)
        # The step in progress carries the prompts that arrived during the step before it:
        # two rounds of the step-length chain from its mean.
        prev = self._weights(np.array([rate * t_bar]), at)[0]
        trans = self._weights(rate * d, at)  # [from atom, to atom]
        # Long steps gather more prompts for the next: follow the chain until its memory
        # (about the prefill share of a step per step) has faded.
        rho = min(max(1.0 - float(self.step.seconds(dec0, ctx0, 0.0, 0.0)) / t_bar, 0.0), 0.95)
        cur = prev
        for _ in range(int(min(max(math.ceil(math.log(0.02) / math.log(max(rho, 1e-3))), 2), 30)) - 1):
            cur = cur @ trans
        # Bursty arrivals come in clusters: seen from an arrival, the step before it more
        # likely gathered some of its cluster (Palm counts; the same as stationary if Poisson).
        cur = cur @ (self._weights(rate * d, at, palm=True) if abs(self.cv - 1.0) > 1e-6 else trans)
        # Content beyond the token budget runs in several steps; an arrival lands in one of
        # them (length-biased) and queues behind what is left of the content after it.
        per_pair = np.where(at.tokens > 0, at.pairs / np.maximum(at.tokens, 1e-9), 0.0)
        full = self.step.seconds(dec0, ctx0, room, per_pair * room)
        last_tokens = at.tokens - (k - 1.0) * room
        last = self.step.seconds(dec0, ctx0, last_tokens, per_pair * last_tokens)
        multi = np.nonzero(k > 1)[0]
        sub_d = [last]  # the last (or only) step of each content: nothing left behind it
        sub_w = [cur * last]
        sub_left = [np.zeros_like(last)]
        sub_src = [np.arange(len(d))]
        for a in multi:
            for i in range(1, int(k[a])):
                sub_d.append(np.array([full[a]]))
                sub_w.append(np.array([cur[a] * full[a]]))
                sub_left.append(np.array([at.tokens[a] - i * room]))
                sub_src.append(np.array([a]))
        sub_d, sub_w, sub_left = np.concatenate(sub_d), np.concatenate(sub_w), np.concatenate(sub_left)
        sub_w /= sub_w.sum()
        same = self._weights(rate * sub_d, at, palm=True)  # others arriving in that step [entries, atoms]
        cur_d, cur_w, cur_left, same = _compress_entries(sub_d, sub_w, sub_left, same, 10)
        co, same = _compress_atoms(at, same, cur_w, 24)
        own0 = self._own_done(dec0, ctx0, co, cur_left)  # [classes, entries, atoms]
        # Waited: admitted at a step end with the batch full, prefilled in the next step.
        decn = float(self._decodes(st.slots))
        ctxn = decn * self.context_per_decode
        wn = self._weights(np.array([rate * float(st.tau(st.slots))]), at)
        con, wn = _compress_atoms(at, wn, np.ones(1), 24)
        wn = wn[0]
        ownn = self._own_done(decn, ctxn, con, np.zeros(1))[:, 0, :]
        # A serving engine's fixed time per request (API server, tokenizer) shifts every TTFT.
        own0, ownn = own0 + self.replica.request_overhead_s, ownn + self.replica.request_overhead_s
        return _TtftParts(cur_d, cur_w, same, own0, wn, ownn, st.wait, st.theta)

    def _tpot_parts(self, st: "_State"):
        """A class's TPOT is the mean step over its O - 1 decode steps. Two things move it:
        the batch over its stay (slow: normal, capped at N) and the prompt work that arrives
        during its stay. Over a window of T seconds, decode takes D = (O - 1) x mean step x
        (1 - rho_p) and prompts arrive with work lambda T x E[w] + xi x ca x sqrt(lambda T
        E[w^2]) (xi standard normal), so T (1 - rho_p) = D + a xi sqrt(T), a quadratic in
        sqrt(T). Returns TPOT nodes [H, K], their weights [H] and a small smoothing sd [K]."""
        life = _life_fraction(self.share, self.output, st.eps)
        b = np.clip(st.fluid + 1.0 + np.sqrt(st.var_batch * life)[None, :] * _GH_NODES[:, None], 1.0, st.slots)
        tau_b = st.tau(b)  # [Hb, K]
        steps = np.maximum(self.output - 1.0, 1.0)
        nodes = (self._window_nodes(st.rate, st.rho_p, tau_b) / steps).reshape(-1, len(self.share))  # [Hz*Hb, K]
        weights = (_GH_WEIGHTS[:, None] * _GH_WEIGHTS[None, :]).reshape(-1)
        t_bar = float(st.tau(max(min(st.fluid, st.slots), 1.0)))
        smooth = 0.02 * t_bar / np.sqrt(steps)
        return nodes, weights, smooth

    def _own_done(self, dec: float, ctx: float, at: _Atoms, left: np.ndarray) -> np.ndarray:
        """[classes, entries, atoms]: seconds from a step start until the own prompt is
        prefilled, behind `left` tokens of earlier content and alongside the atom's other
        prompts (FCFS among those: half of them ahead)."""
        room = max(self.budget - dec, 1.0)
        p = self.prompt[:, None, None]
        lft = np.asarray(left, dtype=float)[None, :, None]
        tokens = at.tokens[None, None, :]
        total = lft + p + tokens
        pairs = p * p / 2 + at.pairs[None, None, :] + lft * (p + tokens)  # behind the left-over context
        one = self.step.seconds(dec, ctx, total, pairs)
        ahead = lft + p + tokens / 2
        steps = np.maximum(np.ceil(ahead / room), 1.0)
        frac = pairs / np.maximum(total, 1e-9)
        last = np.clip(total - (steps - 1.0) * room, 1.0, room)
        many = (steps - 1.0) * self.step.seconds(dec, ctx, room, frac * room) + self.step.seconds(dec, ctx, last, frac * last)
        return np.where(total <= room, one, many)

    def _cdfs(self, st: "_State", need: Sequence[str] = METRICS):
        """Per-class CDFs (on arrays of seconds) and an upper end of their support, for the
        metrics in `need` (the parts of the others are not built)."""
        need_ttft = "ttft_ms" in need or "latency_ms" in need
        need_tpot = "tpot_ms" in need or "latency_ms" in need
        tp = self._ttft_parts(st) if need_ttft else None
        tau_life, life_w, sd_fast = self._tpot_parts(st) if need_tpot else (None, None, None)
        o1 = np.maximum(self.output - 1.0, 0.0)
        K = len(self.share)

        def ttft(x):  # x: [X] seconds -> [X, K]
            x = np.asarray(x, dtype=float)[:, None, None, None]
            s = tp.own0[None]  # [1,K,C,A]
            u = np.clip((x - s) / tp.cur_d[None, None, :, None], 0.0, 1.0)
            nowait = (u * tp.pair_w[None, None]).sum(axis=(2, 3))
            xe = x[:, :, 0, :]
            sn = tp.ownn[None]
            waited = (tp.wn * np.where(xe > sn, -np.expm1(-(xe - sn) / max(tp.theta, 1e-12)), 0.0)).sum(axis=-1)
            return (1.0 - tp.wait) * nowait + tp.wait * waited

        def tpot(x):
            x = np.asarray(x, dtype=float)[:, None, None]
            z = (x - tau_life[None, :, :]) / np.maximum(sd_fast[None, None, :], 1e-9)
            return (_phi(z) * life_w[None, :, None]).sum(axis=1)

        # Latency: the TTFT as quantile atoms (finer in the tail), plus the decode time.
        cache: dict = {}

        def ttft_atoms():
            if "tq" not in cache:
                top = float(tp.ownn.max() + tp.cur_d.max() + tp.own0.max()) + tp.theta * 40.0
                grid = np.unique(np.concatenate([np.linspace(0.0, top, 400),
                                                 np.geomspace(max(top * 1e-4, 1e-6), top, 100)]))
                fk = ttft(grid)  # [G, K]
                cache["tq"] = np.stack([np.interp(_LAT_MIDS, np.maximum.accumulate(fk[:, k]), grid) for k in range(K)])
            return cache["tq"]  # [K, Q]

        lat_nodes, lat_w = _compress_nodes(tau_life, life_w, 16) if need_tpot else (None, None)

        def latency(x):
            x = np.asarray(x, dtype=float)[:, None, None, None]  # [X,1,1,1]
            a = ttft_atoms()[None, :, :, None] + (o1[None, :, None, None] * lat_nodes.T[None, :, None, :])  # [1,K,Q,H]
            sd = np.maximum(o1 * sd_fast, 1e-7)[None, :, None, None]
            f = _phi((x - a) / sd)
            return (f * _LAT_W[None, None, :, None] * lat_w.T[None, :, None, :]).sum(axis=(2, 3))

        top_ttft = float(tp.ownn.max() + tp.cur_d.max() + tp.own0.max()) + tp.theta * 40.0 if need_ttft else 0.0
        top_tpot = float(tau_life.max() + 8.0 * sd_fast.max()) + 1e-6 if need_tpot else 0.0
        out = {"ttft_ms": (ttft, top_ttft), "tpot_ms": (tpot, top_tpot),
               "latency_ms": (latency, top_ttft + float(o1.max()) * top_tpot)}
        return {m: out[m] for m in need}

    # -- public
    def at_rate(self, rate_per_s: float) -> LoadPercentiles:
        rate = _check_rate(rate_per_s)
        N = self.slots
        sat = self.saturation_rate()
        if N < 1 or rate >= sat:
            inf = {p: math.inf for p in PERCENTILES}
            return LoadPercentiles(rate, rate / sat if sat > 0 else math.inf, sat, float(N), N, 1.0, inf, inf, inf)
        st = self._state(max(rate, 1e-9 * sat))
        cdfs = self._cdfs(st)
        values = {m: {p: _mixture_quantile(cdfs[m], self.share, p / 100.0) * 1e3 for p in PERCENTILES}
                  for m in METRICS}
        return LoadPercentiles(rate, rate / sat, sat, st.mean_batch, N, st.wait, values["ttft_ms"],
                               values["tpot_ms"], values["latency_ms"])

    def margin(self, rate: float, percentile: int, bounds_ms: Mapping[str, float]) -> float:
        """min over the bounds of (mixture CDF at the bound - p): >= 0 where every bound holds
        at the percentile; falls as the rate rises; -1 at or beyond saturation."""
        sat = self.saturation_rate()
        if self.slots < 1 or rate >= sat:
            return -1.0
        st = self._state(max(rate, 1e-9 * sat))
        cdfs = self._cdfs(st, tuple(bounds_ms))
        p = percentile / 100.0
        return min(float(np.dot(cdfs[m][0](np.array([b / 1e3]))[0], self.share)) - p for m, b in bounds_ms.items())

    def meets(self, rate: float, percentile: int, bounds_ms: Mapping[str, float]) -> bool:
        """Every bound holds at the percentile: the mixture CDF at each bound reaches it."""
        return self.margin(rate, percentile, bounds_ms) >= -1e-9


@dataclass(frozen=True)
class _State:
    rate: float
    slots: int
    grid: np.ndarray
    tau_grid: np.ndarray
    fluid: float
    eps: float
    wait: float
    theta: float
    mean_batch: float
    var_batch: float
    rho_p: float  # prefill's share of a step at the fluid batch

    def tau(self, n):
        return np.interp(n, self.grid, self.tau_grid)


@dataclass(frozen=True)
class _TtftParts:
    cur_d: np.ndarray  # [C] lengths of the step in progress
    cur_w: np.ndarray  # [C] their length-biased weights
    same: np.ndarray  # [C, A] co-arrival composition weights given the step in progress
    own0: np.ndarray  # [K, C, A] time to own first token from the next step's start, no wait
    wn: np.ndarray  # [A] co-admission weights when the batch is full
    ownn: np.ndarray  # [K, A] same at batch N
    wait: float
    theta: float

    @property
    def pair_w(self) -> np.ndarray:
        return self.cur_w[:, None] * self.same


def _check_rate(rate_per_s) -> float:
    try:
        rate = float(rate_per_s)
    except (TypeError, ValueError):
        raise ValueError(f"rate_per_s must be a number, got {rate_per_s!r}") from None
    if not (rate >= 0 and math.isfinite(rate)):
        raise ValueError(f"rate_per_s must be a non-negative finite number, got {rate_per_s}")
    return rate


def _check_classes(classes: Sequence[TrafficClass]) -> None:
    if not classes:
        raise ValueError("give at least one request class")
    for c in classes:
        if not (c.share >= 0 and math.isfinite(c.share)):
            raise ValueError(f"class share must be a non-negative number, got {c.share}")
        if c.prompt_tokens < 0 or c.output_tokens < 1:
            raise ValueError(f"class tokens out of range: prompt {c.prompt_tokens}, output {c.output_tokens}")
    if sum(c.share for c in classes) <= 0:
        raise ValueError("class shares are all zero")


def _life_fraction(share: np.ndarray, output: np.ndarray, eps: float = 0.0) -> np.ndarray:
    """Per class k: Var(batch averaged over k's decode) / Var(batch).

    The batch counts requests of every class j, each staying O_j steps; its autocovariance
    at lag s is sum_j lambda_j (O_j - s)^+ (M/G/infinity), so averaging over a window of
    W = O_k - 1 steps keeps sum_j lambda_j h(O_j, W) / sum_j lambda_j O_j of the variance,
    h(L, W) = L - W/3 if L >= W else L^2/W - L^3/(3 W^2). One class: 2/3. The feedback of
    the batch on the step time (elasticity eps) makes a deviation last 1 / (1 - eps) longer.
    """
    out = np.empty(len(output))
    output = output / (1.0 - eps)
    for k, o in enumerate(output * (1.0 - eps)):
        win = max(o - 1.0, 1.0)
        h = np.where(output >= win, output - win / 3.0, output ** 2 / win - output ** 3 / (3.0 * win * win))
        out[k] = float(np.dot(share, h) / np.dot(share, output))
    return out


def _fluid_batch(rate: float, ns: np.ndarray, L: np.ndarray) -> float:
    """The batch m with m = rate x L(m) (Little's law at the mean step), capped at N."""
    gap = rate * L - ns
    if gap[-1] >= 0:
        return float(ns[-1])
    i = int(np.argmax(gap < 0))
    if i == 0:
        return float(max(rate * L[0], 0.0))
    a, b = gap[i - 1], gap[i]
    return float(ns[i - 1] + a / (a - b))


def _compress_nodes(nodes: np.ndarray, weights: np.ndarray, bins: int):
    """[H, K] weighted nodes -> [bins, K] nodes and [bins, K] weights: per class, weighted
    means over weight quantiles."""
    order = np.argsort(nodes, axis=0, kind="stable")
    w = weights[order]  # [H, K]
    cum = np.cumsum(w, axis=0)
    label = np.minimum((cum - 0.5 * w) / cum[-1] * bins, bins - 1).astype(int)
    out = np.zeros((bins, nodes.shape[1]))
    out_w = np.zeros((bins, nodes.shape[1]))
    for k in range(nodes.shape[1]):
        num = np.bincount(label[:, k], weights=w[:, k] * nodes[order[:, k], k], minlength=bins)
        den = np.bincount(label[:, k], weights=w[:, k], minlength=bins)
        out[:, k] = num / np.maximum(den, 1e-300)
        out_w[:, k] = den / den.sum()
    return out, out_w


def _compress_atoms(at: _Atoms, rows: np.ndarray, row_w: np.ndarray, bins: int):
    """Merge step-content atoms by prompt tokens into at most `bins` (weighted means),
    summing each row's weights per merged atom."""
    if len(at.tokens) <= bins:
        return at, rows
    marginal = row_w @ rows
    order = np.argsort(at.tokens, kind="stable")
    cum = np.cumsum(marginal[order])
    label = np.empty(len(order), dtype=int)
    label[order] = np.minimum((cum - 0.5 * marginal[order]) / max(cum[-1], 1e-300) * bins, bins - 1).astype(int)
    mw = np.bincount(label, weights=marginal, minlength=bins)
    keep = mw > 0
    tokens = np.bincount(label, weights=marginal * at.tokens, minlength=bins)[keep] / mw[keep]
    pairs = np.bincount(label, weights=marginal * at.pairs, minlength=bins)[keep] / mw[keep]
    merged = np.zeros((rows.shape[0], bins))
    for b in range(bins):
        if keep[b]:
            merged[:, b] = rows[:, label == b].sum(axis=1)
    merged = merged[:, keep]
    return _Atoms(np.zeros(len(tokens)), tokens, pairs, np.ones(len(tokens)), at.j_max), merged


def _compress_entries(dur, weight, left, rows, bins: int):
    """Merge the steps an arrival can land in: those with nothing left behind them by
    length, those with content left over by that amount."""
    none = left <= 0
    parts = []
    for mask, key, nb in ((none, dur, bins), (~none, left, max(bins // 2, 1))):
        if mask.any() and weight[mask].sum() > 0:
            idx = np.nonzero(mask)[0]
            _, w, r = _compress_rows(key[idx], weight[idx], np.column_stack([dur[idx], left[idx], rows[idx]]), nb)
            parts.append((w, r))
    w = np.concatenate([p[0] for p in parts])
    r = np.concatenate([p[1] for p in parts])
    return r[:, 0], w, r[:, 1], r[:, 2:]


def _compress_rows(values: np.ndarray, weights: np.ndarray, rows: np.ndarray, bins: int):
    """Merge atoms (and their rows) into at most `bins` by weight quantiles of `values`."""
    if len(values) <= bins:
        return values, weights, rows
    order = np.argsort(values, kind="stable")
    v, w, r = values[order], weights[order], rows[order]
    cum = np.cumsum(w)
    label = np.minimum((cum - 0.5 * w) / cum[-1] * bins, bins - 1).astype(int)
    out_w = np.bincount(label, weights=w, minlength=bins)
    keep = out_w > 0
    out_v = np.bincount(label, weights=w * v, minlength=bins)[keep] / out_w[keep]
    out_r = np.zeros((bins, r.shape[1]))
    np.add.at(out_r, label, r * w[:, None])
    out_r = out_r[keep] / out_w[keep, None]
    return out_v, out_w[keep], out_r


def _phi(z):
    """Standard normal CDF (Abramowitz-Stegun 7.1.26 erf, |error| < 1.5e-7)."""
    z = np.asarray(z, dtype=float)
    x = np.abs(z) / _SQRT2
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * y)


def _uniform_normal_cdf(x, a, t, sd):
    """P(U + Z <= x), U ~ uniform[a, a + t], Z ~ normal(0, sd)."""
    def psi(u):
        return u * _phi(u) + np.exp(-0.5 * u * u) * _INV_SQRT_2PI

    return sd * (psi((x - a) / sd) - psi((x - a - t) / sd)) / np.maximum(t, 1e-12)


def _exp_normal_cdf(x, a, theta, sd):
    """P(a + E + Z <= x), E ~ exponential with mean theta, Z ~ normal(0, sd)."""
    u = (x - a) / sd
    lam = 1.0 / max(theta, 1e-12)
    expo = np.clip(-lam * (x - a) + 0.5 * (lam * sd) ** 2, -700.0, 700.0)
    return np.clip(_phi(u) - np.exp(expo) * _phi(u - lam * sd), 0.0, 1.0)


def _mixture_quantile(dist, share: np.ndarray, p: float) -> float:
    """The x with sum_k share_k F_k(x) = p: a coarse grid, then two finer ones."""
    cdf, top = dist
    hi = max(top, 1e-6)
    for _ in range(60):
        if float(np.dot(cdf(np.array([hi]))[0], share)) >= p:
            break
        hi *= 2.0
    lo = 0.0
    for _ in range(3):
        xs = np.linspace(lo, hi, 33)
        f = cdf(xs) @ share
        i = int(np.searchsorted(f, p - 1e-12))
        i = min(max(i, 1), len(xs) - 1)
        lo, hi = xs[i - 1], xs[i]
    f_lo, f_hi = (cdf(np.array([lo, hi])) @ share).tolist()
    if f_hi > f_lo:
        return float(lo + (hi - lo) * min(max((p - f_lo) / (f_hi - f_lo), 0.0), 1.0))
    return float(hi)


# ---------------------------------------------------------------- public functions
@lru_cache(maxsize=4096)
def load_model(replica: Replica, classes: tuple[TrafficClass, ...], arrival_cv: float = 1.0) -> ReplicaLoadModel:
    """A cached model: the planner asks the same configuration and mix many times."""
    return ReplicaLoadModel(replica, classes, arrival_cv)


def percentiles_at_rate(replica: Replica, classes: Sequence[TrafficClass], rate_per_s: float,
                        arrival_cv: float = 1.0) -> LoadPercentiles:
    """TTFT/TPOT/latency percentiles (ms) with `rate_per_s` requests/s routed to one replica."""
    return load_model(replica, tuple(classes), float(arrival_cv)).at_rate(rate_per_s)


def saturation_rate(replica: Replica, classes: Sequence[TrafficClass]) -> float:
    """Requests/s one replica sustains with every KV slot busy (utilization 1)."""
    return load_model(replica, tuple(classes), 1.0).saturation_rate()


def max_rate_for_slo(replica: Replica, classes: Sequence[TrafficClass], percentile: int, *,
                     ttft_ms: float | None = None, tpot_ms: float | None = None, latency_ms: float | None = None,
                     arrival_cv: float = 1.0, max_utilization: float = DEFAULT_MAX_UTILIZATION,
                     rel_tol: float = 0.005) -> float:
    """The largest rate per replica (requests/s) at which every stated bound holds at `percentile`.

    Monotone search: the percentiles rise with the rate, so bisection on the rate finds the
    edge; the answer is the largest rate found to pass (within `rel_tol` of the saturation
    rate below the edge), never above `max_utilization` x saturation. 0.0 when even a
    trickle misses a bound. With several classes the percentile is over the mixture at
    their shares - exact for that mix (see docs/formulation.md for mixes that vary).
    """
    if percentile not in PERCENTILES:
        raise ValueError(f"percentile must be one of {', '.join(map(str, PERCENTILES))}, got {percentile}")
    bounds = {m: float(v) for m, v in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("latency_ms", latency_ms))
              if v is not None}
    for m, v in bounds.items():
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"{m} must be a positive number, got {v}")
    if not (0 < max_utilization <= 1):
        raise ValueError(f"max_utilization must be in (0, 1], got {max_utilization}")
    model = load_model(replica, tuple(classes), float(arrival_cv))
    sat = model.saturation_rate()
    if sat <= 0:
        return 0.0
    top = max_utilization * sat
    if not bounds:
        return top
    h_hi = model.margin(top, percentile, bounds)
    if h_hi >= -1e-9:
        return top
    lo = 1e-6 * sat
    h_lo = model.margin(lo, percentile, bounds)
    if h_lo < -1e-9:
        return 0.0
    hi = top
    # Illinois (regula falsi halving a stale end) on the margin, which falls with the rate;
    # a bisection step whenever the bracket shrinks too little.
    width = hi - lo
    while hi - lo > rel_tol * sat:
        guess = hi - h_hi * (hi - lo) / (h_hi - h_lo) if h_lo != h_hi else 0.5 * (lo + hi)
        mid = guess if hi - lo < 0.5 * width and lo < guess < hi else 0.5 * (lo + hi)
        mid = min(max(mid, lo + 0.25 * rel_tol * sat), hi - 0.25 * rel_tol * sat)
        width = hi - lo
        h = model.margin(mid, percentile, bounds)
        if h >= -1e-9:
            lo, h_lo = mid, h
            h_hi *= 0.5
        else:
            hi, h_hi = mid, h
            h_lo *= 0.5
    return lo


def class_rate_caps(replica: Replica, classes: Sequence[TrafficClass], percentile: int, *,
                    ttft_ms: float | None = None, tpot_ms: float | None = None, latency_ms: float | None = None,
                    arrival_cv: float = 1.0, max_utilization: float = DEFAULT_MAX_UTILIZATION) -> tuple[float, ...]:
    """Per-class caps c_k for a linear capacity row sum_k x_k / c_k <= replicas, when the
    planner routes a replica any mix of the classes.

    c_k starts as class k's own `max_rate_for_slo`; the row then allows, for a mix w, a
    total rate 1 / sum_k (w_k / c_k). Every cap is scaled by the smallest ratio of the
    model's true cap to that allowance over the checked mixes (each class alone, every pair
    at 1/4, 1/2, 3/4, all classes at their shares), so the row never allows more than the
    model does at those mixes (docs/formulation.md, "Several classes on one replica").
    """
    bounds = dict(ttft_ms=ttft_ms, tpot_ms=tpot_ms, latency_ms=latency_ms, arrival_cv=arrival_cv,
                  max_utilization=max_utilization)
    alone = [max_rate_for_slo(replica, (TrafficClass(1.0, c.prompt_tokens, c.output_tokens, c.name),), percentile,
                              **bounds) for c in classes]
    if len(classes) == 1:
        return tuple(alone)
    mixes = [tuple(c.share for c in classes)]
    for i in range(len(classes)):
        for j in range(i + 1, len(classes)):
            for a in (0.25, 0.5, 0.75):
                w = [0.0] * len(classes)
                w[i], w[j] = a, 1.0 - a
                mixes.append(tuple(w))
    scale = 1.0
    for w in mixes:
        if any(wk > 0 and ck <= 0 for wk, ck in zip(w, alone)):
            continue  # the row already forbids this mix
        allowed = 1.0 / sum(wk / ck for wk, ck in zip(w, alone) if wk > 0)
        mix = tuple(TrafficClass(wk, c.prompt_tokens, c.output_tokens, c.name) for wk, c in zip(w, classes) if wk > 0)
        true = max_rate_for_slo(replica, mix, percentile, **bounds)
        scale = min(scale, true / allowed)
    return tuple(scale * c for c in alone)
