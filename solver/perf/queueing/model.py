"""One replica serving one class mix at one arrival CV, evaluated at any rate."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Mapping, Sequence

import numpy as np

from solver.perf.queueing.contents import _atoms, _Atoms, _count_pmf, _count_values, _size_groups
from solver.perf.queueing.exp import exp
from solver.perf.queueing.numerics import (_GH_NODES, _GH_WEIGHTS, _LAT_MIDS, _LAT_W, _compress_atoms,
                                           _compress_entries, _compress_tail, _mixture_quantile, _phi,
                                           _quantile_near)
from solver.perf.queueing.physics import Replica, TrafficClass, kv_claim_tokens
from solver.perf.queueing.renewal import dispersion, forward_excess, regularized_lower_gamma

PERCENTILES = (50, 90, 95, 99)
METRICS = ("ttft_ms", "tpot_ms", "latency_ms")
# The latency's TTFT grid evaluates the part without a wait once for the rows where it is
# all 0 or all 1 (`_cdfs`; off: every row, the reference the tests compare with).
_TTFT_SAME_ROWS = True
# Likewise the latency CDF for the points where every term is exactly 0 or 1 (off: every row).
_LAT_SAME_ROWS = True


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
        # Prefill-first engines run prompts in steps of their own, with running sequences
        # paused (physics.Replica.scheduler); the step content's cost, the own prompt's
        # prefill and the prefill limit follow that rule below.
        self.prefill_first = replica.scheduler == "prefill_first"
        # Decode steps per decision to decode (physics.Replica.multi_step): a prefill-first
        # engine's block of decode steps between two looks at the waiting prompts.
        self.block_steps = float(replica.multi_step)
        # A class holds its slot about O steps: it weighs the batch's composition by share x O.
        slot_w = self.share * self.output
        slot_w /= slot_w.sum()
        # A sequence's claim on the KV cache: its whole length where the engine reserves it
        # at admission; where pages come as tokens arrive (vLLM, SGLang), what it holds on
        # average over its stay - its prompt and half its output (the engine preempts when a
        # full cache would overflow; both here and in the simulator a sequence is admitted
        # against that mean claim, `physics.kv_claim_tokens`).
        claims = kv_claim_tokens(self.prompt, self.output, replica.kv_admission)
        self._claims, self._slot_w = np.asarray(claims, dtype=float), slot_w
        reserve = float(np.dot(slot_w, claims))
        kv_slots = replica.kv_cache_tokens / reserve if reserve > 0 else math.inf
        # Sequences of each class the whole cache holds at once (`_held_back`).
        self._class_fit = np.floor(replica.kv_cache_tokens / np.maximum(claims, 1.0) + 1e-9)
        # The batch cap; `slots`, the batch the engine settles at under overload, is searched
        # on first use (`_effective_slots`): a model built for a cap's first bound needs only
        # `throughput_ceiling`, and large plans build thousands of those.
        self._slot_cap = int(max(0, min(replica.max_seqs, self.budget, math.floor(kv_slots + 1e-9))))
        self._slots: int | None = None
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
        self._sat: float | None = None  # with the slots busy (`_saturation_rate_at`)
        self._sat_held: float | None = None  # ... and no class beyond its own room (`_held_capacity`)
        self._prefill_limits: dict[float, float] = {}
        self._atom_steps: dict = {}  # (decodes, context, j_max) -> the atoms' super-steps [M, A]
        self._batch_parts: dict = {}  # batches -> their decodes, context, bare step and prefill limits
        self._prompt_floats: tuple | None = None  # prompts, prompt^2 / 2 and shares as Python floats
        # Kingman's service variability: slot times differ across classes by their O.
        ms = float(np.dot(self.share, self.output))
        self.cs2 = float(np.dot(self.share, (self.output - ms) ** 2)) / (ms * ms)
        self.kingman = max((self.cv ** 2 + self.cs2) / 2.0, 1e-3)
        # Per model, not per rate: the decode steps (at least 1, and >= 0), the decode
        # windows' weights and the prompt work's second moment (the same expressions as
        # where they are used, evaluated once). Read-only.
        self._steps1 = np.maximum(self.output - 1.0, 1.0)
        self._o1 = np.maximum(self.output - 1.0, 0.0)
        self._decode_w = self.share * np.maximum(self.output - 1.0, 0.0)
        self._decode_w_sum = self._decode_w.sum()
        work = self.prompt * (self.step.gemm_s_per_token + self.step.s_per_token) + self.step.s_per_pair * self.prompt ** 2 / 2
        self._work_sq = float(np.dot(self.share, work ** 2))
        # Third cumulant of the prompt work arriving per unit of mean count: the compound sum
        # of works w over counts of dispersion d = cv^2 (Poisson d = 1: E[w^3]; negative
        # binomial or binomial counts: k3(N) = m d (2 d - 1)).
        m1 = self._work_mean = float(np.dot(self.share, work))
        d = self.cv ** 2
        k3w = float(np.dot(self.share, (work - m1) ** 3))
        self._work_k3 = k3w + 3.0 * d * m1 * (self._work_sq - m1 * m1) + d * (2.0 * d - 1.0) * m1 ** 3
        for a in (self._steps1, self._o1, self._decode_w):
            a.flags.writeable = False

    @property
    def slots(self) -> int:
        """The batch the engine holds under overload (`_effective_slots`), searched once."""
        if self._slots is None:
            self._slots = self._effective_slots(self._slot_cap)
        return self._slots

    def throughput_ceiling(self) -> float:
        """An upper bound on the saturation rate at the batch the engine settles at
        (`slots`), without searching for it: f(n) = n / the bare slot time and g(n) = the
        prefill limit both bound the saturation rate at n (arriving prompts only lengthen
        steps). Where g >= f at the cap the engine holds the cap, and f(cap) is the bound.
        Else `_effective_slots` bisects on "the limit binds" (the rate reaches g), and this
        bisects on f > g over the same midpoints: the rate never exceeds f, so wherever the
        limit binds f > g too, and the settled batch lies at or above lo - 1 .. within the
        bracket this ends with; max(f(lo), g(hi)) then bounds min(f, g) there as long as g
        falls with n (it never rose in 1,243 models of a review) - not because f rises: f
        dips at a CUDA-graph limit or where prompts spill into another step. Keep the two
        bisections alike (tests/test_queueing.py checks the bound on a budget sweep)."""
        cap = self._slot_cap
        if cap < 1:
            return 0.0
        f_cap, g_cap = self._bare_slot_rate(cap), self.prefill_limit(float(cap))
        if f_cap <= g_cap or self.prefill_first:  # prefill-first engines hold the cap (`_effective_slots`)
            return min(f_cap, g_cap)
        lo, hi = 0, cap  # f <= g at lo (0: no batch), f > g at hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._bare_slot_rate(mid) > self.prefill_limit(float(mid)):
                hi = mid
            else:
                lo = mid
        return max(self._bare_slot_rate(lo) if lo >= 1 else 0.0, self.prefill_limit(float(hi)))

    def _bare_slot_rate(self, n: int) -> float:
        """n / the slot time at batch n with no prompts arriving (the mean step is the bare step)."""
        dec = n * self.decode_fraction
        bare = float(self.step.seconds(dec, dec * self.context_per_decode, 0.0, 0.0))
        slot = self._slot_seconds_float(float(n), 0.0, bare)
        if slot is None:
            slot = float(self.slot_seconds(np.array([float(n)]), 0.0)[0])
        return n / slot

    # -- building blocks
    def atoms(self, mean_count: float) -> _Atoms:
        if not math.isfinite(mean_count):
            mean_count = 1e6
        j = int(min(_ATOMS_MAX, max(3, math.ceil(self._atoms_reach(mean_count)))))
        return _atoms(*self._groups, j)

    def _weights(self, means, at: _Atoms, palm: bool = False) -> np.ndarray:
        pmf = _count_pmf(means, self.cv, at.j_max, palm=palm)
        return pmf[..., at.count_index] * at.comp

    def _decodes(self, n):
        return np.asarray(n, dtype=float) * self.decode_fraction

    def _superstep(self, dec, ctx, at: _Atoms):
        """Seconds and steps to run a step's content; content beyond the token budget spills
        into further steps (chunked prefill), counted here as one longer 'super-step'."""
        return self._superstep_tokens(dec, ctx, at.tokens, at.pairs, outer=True)

    def _superstep_tokens(self, dec, ctx, tokens, pairs, outer: bool = False):
        """As `_superstep` for given tokens; `outer`: batches along a new leading axis."""
        if self.prefill_first:
            return self._prefill_first_superstep(dec, ctx, tokens, pairs, outer)
        last, full, k = self._superstep_steps(dec, ctx, tokens, pairs, outer)
        if full is None:  # else the full steps add exactly 0 x a finite time
            return last, k
        return (k - 1.0) * full + last, k

    def _prefill_first_superstep(self, dec, ctx, tokens, pairs, outer: bool = False):
        """A prefill-first engine's super-step: the content's prompts in prefill-only steps
        (running sequences paused), then its block of decode steps (one, or multi_step);
        (seconds, decode steps)."""
        dec = np.asarray(dec, dtype=float)
        ctx = np.asarray(ctx, dtype=float)
        if outer and np.ndim(dec):
            dec, ctx = dec[..., None], ctx[..., None]
        seconds = self._prefill_only_parts(tokens, pairs)[3] + self.block_steps * self.step.seconds(dec, ctx, 0.0, 0.0)
        return seconds, np.full(np.shape(seconds), self.block_steps)

    def _prefill_only_parts(self, tokens, pairs):
        """Prefill-only steps of a content of `tokens` prompt tokens (`pairs` attention pairs),
        in chunks of the token budget: (seconds of a full chunk, of the last chunk, chunks,
        total seconds); 0 chunks and 0 seconds for an empty content."""
        tokens = np.asarray(tokens, dtype=float)
        has = tokens > 0
        chunks = np.ceil(tokens / self.budget)
        last = tokens - np.maximum(chunks - 1.0, 0.0) * self.budget
        per_token_pairs = np.where(has, np.asarray(pairs, dtype=float) / np.maximum(tokens, 1e-9), 0.0)
        one = self.step.seconds(0.0, 0.0, last, per_token_pairs * last)
        full = self.step.seconds(0.0, 0.0, np.full(np.shape(per_token_pairs), self.budget),
                                 per_token_pairs * self.budget)
        total = np.where(has, np.maximum(chunks - 1.0, 0.0) * full + one, 0.0)
        return full, one, chunks, total

    def _prefill_chain(self, dec: np.ndarray, ctx: np.ndarray, decode: np.ndarray, rate: float,
                       n: np.ndarray) -> np.ndarray:
        """[M] mean seconds of prefill-only steps between two decode steps of a prefill-first
        engine at batches n. It prefills whenever a prompt waits and a slot is free, so the
        prompts that arrive during a prefill step get another before the next decode: a
        chain that starts with the prompts of the decode step (`decode` seconds) and ends at
        a step that gathers none, or when the slots it may fill are taken (the free ones,
        cap - n, and those the decode step freed). Level by level:
        the chance s_i that step i runs and its mean length u_i given that it runs (the
        prompts of a window of rate x u_(i-1), at least one); sum s_i u_i, each level's
        prompts counted against the free slots. Once the levels settle, the rest is their
        geometric tail.

        Why: the super-step before prefilled all of a window's prompts in one step, then
        decoded - at most one prefill step per decode step. An MoE pays about a decode step's
        expert reads for each (Qwen3-30B-A3B fp8 on an H100: 15.6 ms for one 256-token
        prompt): at 49 requests/s the simulator runs 1.25 prefill steps per decode step where
        the super-step had 0.75, and its p50 TPOT is 38 ms against the super-step's 29 (the
        chain: 38)."""
        total = np.zeros(len(decode))
        alive = np.ones(len(decode))
        window = np.asarray(decode, dtype=float)
        # Prompts it may admit: the free slots and those the decode step frees (its finishers).
        n = np.asarray(n, dtype=float)
        room = (np.maximum(float(self._slot_cap) - n, 0.0)
                + self.block_steps * n / max(self.decode_steps_per_request, 1.0))
        for _ in range(60):
            means = np.maximum(rate * window, 1e-12)
            e, _, empty = self._expected_superstep(dec, ctx, means)
            prefill = np.maximum(e - decode, 0.0)  # E[prefill seconds of the window's prompts]
            some = np.maximum(1.0 - empty, 1e-300)
            admitted = alive * means  # the level's prompts (their mean count, the empty case included)
            part = np.clip(room / np.maximum(admitted, 1e-300), 0.0, 1.0)  # of this level, what the slots allow
            total += alive * prefill * part  # s_(i-1) x P(>= 1) x E[length | >= 1]
            room = room - admitted * part
            alive = alive * some * (part >= 1.0)
            nxt = prefill / some  # the step's mean length given that it runs
            settled = np.abs(nxt - window) <= 1e-6 * np.maximum(window, 1e-12)
            window = nxt
            if float(alive.max()) < 1e-9:
                return total
            if settled.all():
                break
        # Settled levels (or 60 of them): each further one adds the same mean length and
        # prompts with the same chance to run again, until the free slots are taken.
        means = np.maximum(rate * window, 1e-12)
        at = self.atoms(float(means.max()))
        some = 1.0 - _count_pmf(means, self.cv, at.j_max)[:, 0]
        levels = np.where(some < 1.0 - 1e-12, 1.0 / np.maximum(1.0 - some, 1e-300), math.inf)  # sum of some^i
        levels = np.minimum(levels, room / np.maximum(alive * means, 1e-300))  # the slots' share
        return total + np.where(alive > 0, alive * window * some * levels, 0.0)

    def _superstep_steps(self, dec, ctx, tokens, pairs, outer: bool = False):
        """The parts of `_superstep_tokens`: seconds of the last (or only) step of each
        content, of one full step (`room` prefill tokens; None where no content spills
        beyond the token budget) and the steps k."""
        dec = np.asarray(dec, dtype=float)
        room = np.maximum(self.budget - dec, 1.0)
        if outer and np.ndim(dec):
            dec, ctx, room = dec[..., None], np.asarray(ctx)[..., None], room[..., None]
        k = np.maximum(np.ceil(tokens / room), 1.0)
        last = tokens - (k - 1.0) * room
        per_token_pairs = np.where(tokens > 0, pairs / np.maximum(tokens, 1e-9), 0.0)
        if not np.count_nonzero(k > 1.0):
            return self.step.seconds(dec, ctx, last, per_token_pairs * last), None, k
        # The last step and a full one (`room` prefill tokens) in one call along a new
        # leading axis: elementwise the same numbers as two calls, at one call's numpy overhead.
        prefill = np.empty((2,) + np.broadcast_shapes(np.shape(last), np.shape(per_token_pairs)))
        prefill[0] = last
        prefill[1] = room
        seconds = self.step.seconds(dec, ctx, prefill, per_token_pairs * prefill)
        return seconds[0], seconds[1], k

    def _expected_superstep(self, dec, ctx, means):
        """E[seconds], E[steps] of the content of windows with `means` prompts on average,
        and the chance that a window gathers none (the count law's first column: the prefill
        chain needs it, and reading it here spares a second evaluation of the law).
        Counts beyond the enumerated atoms are one atom at their conditional mean, so the
        means stay right however many prompts a step gathers.

        The atoms' super-steps depend on the batch and the atoms only, so they are kept per
        (decodes, context, atoms) across calls (a search evaluates the same batches again and
        again); the tail's, one per window, in Python floats where the step is dense (the same
        IEEE operations as numpy's, element by element: `_tail_supersteps`). Each element is
        the number the one combined evaluation (atoms and tail along one axis) gave: where
        only one part spills beyond the token budget, the other adds 0 x (a finite full
        step) = exactly 0 there."""
        means = np.asarray(means, dtype=float)
        at = self.atoms(float(means.max()))
        pmf = _count_pmf(means, self.cv, at.j_max, lump_tail=False)  # [M, J+1]
        w = pmf[:, at.count_index] * at.comp
        tail = np.maximum(1.0 - pmf.sum(axis=1), 0.0)
        j_in = pmf @ _count_values(at.j_max)
        dec = np.asarray(dec, dtype=float)
        ctx = np.asarray(ctx, dtype=float)
        d, k = self._atom_supersteps(dec, ctx, at)
        dt, kt = self._tail_supersteps(dec, ctx, means, tail, j_in, at.j_max)
        return (w * d).sum(axis=-1) + tail * dt, (w * k).sum(axis=-1) + tail * kt, pmf[:, 0]

    def _atom_supersteps(self, dec: np.ndarray, ctx: np.ndarray, at: _Atoms):
        """Seconds and steps [M, A] of the atoms' contents at each batch (kept)."""
        key = (dec.tobytes(), ctx.tobytes(), at.j_max)
        got = self._atom_steps.get(key)
        if got is None:
            tokens = np.empty((dec.size, len(at.tokens)))
            tokens[:] = at.tokens
            pairs = np.empty((dec.size, len(at.tokens)))
            pairs[:] = at.pairs
            got = self._superstep_tokens(dec.reshape(-1, 1), ctx.reshape(-1, 1), tokens, pairs)
            if len(self._atom_steps) >= 256:
                self._atom_steps.clear()
            self._atom_steps[key] = got
        return got

    def _tail_supersteps(self, dec: np.ndarray, ctx: np.ndarray, means: np.ndarray, tail: np.ndarray,
                         j_in: np.ndarray, j_max: int):
        """Seconds and steps [M] of the tail's content (j_tail prompts at their mean)."""
        if not self.step.expert_fraction > 0 and not self.prefill_first and dec.size == means.size <= 16:
            out = self._tail_supersteps_floats(dec.tolist(), ctx.tolist(), means.tolist(), tail.tolist(),
                                               j_in.tolist(), j_max)
            if out is not None:
                return np.array(out[0]), np.array(out[1])
        j_tail = np.where(tail > 1e-12, np.maximum(means - j_in, 0.0) / np.maximum(tail, 1e-300), j_max + 1.0)
        sec, steps = self._superstep_tokens(dec.reshape(-1, 1), ctx.reshape(-1, 1), (j_tail * self.mean_prompt)[:, None],
                                            (j_tail * self.mean_pairs)[:, None])
        return sec[:, 0], steps[:, 0]

    def _tail_supersteps_floats(self, dec, ctx, means, tail, j_in, j_max: int):
        """`_tail_supersteps` in Python floats for a dense step: operation for operation the
        numpy path's (np.maximum / np.where / np.ceil as comparisons; IEEE +, -, x, / are
        the same in both); None where a value is not finite (numpy's NaN rules then decide)."""
        mean_prompt, mean_pairs = self.mean_prompt, self.mean_pairs
        superstep = self._superstep_float
        isfinite = math.isfinite
        secs, steps = [], []
        for d, c, m, tl, ji in zip(dec, ctx, means, tail, j_in):
            if not (isfinite(m) and isfinite(ji)):
                return None
            if tl > 1e-12:
                v = m - ji
                jt = (v if v > 0.0 else 0.0) / tl
            else:
                jt = j_max + 1.0
            got = superstep(d, c, jt * mean_prompt, jt * mean_pairs)
            if got is None:
                return None
            secs.append(got[0])
            steps.append(got[1])
        return secs, steps

    def _superstep_float(self, d: float, c: float, tokens: float, pairs: float):
        """`_superstep_tokens` of one content in Python floats for a dense step (operation
        for operation the numpy path's: np.maximum / np.where / np.ceil as comparisons, IEEE
        +, -, x, / alike); (seconds, steps), or None where a value is not finite."""
        isfinite = math.isfinite
        r = self.budget - d
        room = r if r > 1.0 else 1.0
        q = tokens / room
        if not (isfinite(q) and isfinite(pairs) and isfinite(d) and isfinite(c)):
            return None
        k = float(math.ceil(q))
        if not k > 1.0:
            k = 1.0
        last = tokens - (k - 1.0) * room
        ptp = pairs / (tokens if tokens > 1e-9 else 1e-9) if tokens > 0 else 0.0
        sec = self._seconds_float(d, c, last, ptp * last)
        if k > 1.0:
            sec = (k - 1.0) * self._seconds_float(d, c, room, ptp * room) + sec
        if not isfinite(sec):
            return None
        return sec, k

    def _seconds_float(self, d: float, c: float, prefill: float, pairs: float) -> float:
        """`StepCost.seconds`' array formula for one dense step (no expert term) in Python floats."""
        st = self.step
        t = d + prefill
        a = st.gemm_s_per_token * t + st.lm_head_s_per_decode * d
        w = st.weights_s
        out = ((a if a > w else w) + st.s_per_token * t + st.s_per_context_token * c + st.s_per_pair * pairs
               + (st.fixed_s if prefill > 0 else (st.decode_fixed_s + st.eager_gap_s if d > st.graph_max_decodes
                                                    else st.decode_fixed_s)))
        if st.s_per_sampled:
            out = out + st.s_per_sampled * (d + (prefill * prefill / (2.0 * pairs) if pairs > 0 else 0.0))
        return out

    def _slot_seconds_float(self, n: float, rate: float, tau: float):
        """`slot_seconds([n], rate, [tau])[0]` in Python floats for a dense step (the same
        operations in the same order); None where numpy's path must decide."""
        if self.step.expert_fraction > 0 or self.prefill_first or not math.isfinite(tau):
            return None
        if self._prompt_floats is None:
            # prompt^2 / 2 as slot_seconds forms it (a scalar for one class, an array for several)
            halves = [float(self.prompt[0] ** 2 / 2)] if len(self.share) == 1 else (self.prompt ** 2 / 2).tolist()
            self._prompt_floats = (self.prompt.tolist(), halves, self.share.tolist())
        prompts, halves, shares = self._prompt_floats
        dec = n * self.decode_fraction
        ctx = dec * self.context_per_decode
        rt = rate * tau
        with_me = rt * self.mean_prompt
        more = rt * self.mean_pairs
        first = 0.0
        for p, h, s in zip(prompts, halves, shares):
            got = self._superstep_float(dec, ctx, p + with_me, h + more)
            if got is None:
                return None
            first += s * got[0]
        return self.decode_steps_per_request * tau + first

    def prefill_limit(self, n: float) -> float:
        """The rate at which prompts alone would fill every step (prefill load 1) at batch n."""
        key = float(n)
        if key not in self._prefill_limits:
            self._prefill_limits[key] = self._prefill_limit(key)
        return self._prefill_limits[key]

    def _prefill_limit(self, n: float) -> float:
        if self.prefill_first:
            # Prompts in budget-sized prefill-only steps take all the time: per prompt, its
            # share of a full step (weights and fixed time spread over the budget's tokens).
            per_token_pairs = self.mean_pairs / self.mean_prompt if self.mean_prompt > 0 else 0.0
            full = float(self.step.seconds(0.0, 0.0, self.budget, per_token_pairs * self.budget))
            per_prompt = full / self.budget * self.mean_prompt
            return 1.0 / per_prompt if per_prompt > 0 else math.inf
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
        dec, ctx, base, limits = self._batch_step_parts(n)
        if rate <= 0:
            return base.copy()
        load = rate / limits  # elementwise the IEEE quotients rate / prefill_limit(n_i)
        out = np.full(len(n), math.inf)
        ok = load < 1.0 - 1e-9
        if not ok.any():
            return out
        dec, ctx, base = dec[ok], ctx[ok], base[ok]
        if self.prefill_first:
            # A block of decode steps and the chain of prefill steps before the next (no
            # fixed point); per decode step.
            block = self.block_steps * base
            out[ok] = (block + self._prefill_chain(dec, ctx, block, rate, n[ok])) / self.block_steps
            return out

        def gap(span):
            e, k, _ = self._expected_superstep(dec, ctx, rate * span)
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
        side = np.zeros(len(lo))  # +1: lo replaced last, -1: hi replaced last
        for _ in range(40):  # Illinois: regula falsi that halves the value at a stale end
            denom = np.where(g_hi != g_lo, g_hi - g_lo, -1.0)
            span = np.clip(hi - g_hi * (hi - lo) / denom, lo, hi)
            g, e, k = gap(span)
            if np.all(np.abs(g) <= 1e-4 * span):
                break
            left = g > 0  # the root lies above span
            lo, hi = np.where(left, span, lo), np.where(left, hi, span)
            g_lo = np.where(left, g, np.where(side < 0, g_lo * 0.5, g_lo))
            g_hi = np.where(left, np.where(side > 0, g_hi * 0.5, g_hi), g)
            side = np.where(left, 1.0, -1.0)
        out[ok] = e / k  # the content at the last span evaluated
        return out

    def _batch_step_parts(self, n: np.ndarray):
        """Decodes, their context, the bare step and the prefill limits at batches n: they
        depend on n alone, so are kept per n (`_state` asks the same grid at every rate).
        Read-only arrays."""
        key = n.tobytes()
        got = self._batch_parts.get(key)
        if got is None:
            dec = self._decodes(n)
            ctx = dec * self.context_per_decode
            base = self.step.seconds(dec, ctx, 0.0, 0.0)
            limits = np.array([self.prefill_limit(x) for x in n])
            for a in (dec, ctx, base, limits):
                a.flags.writeable = False
            got = (dec, ctx, base, limits)
            if len(self._batch_parts) >= 64:
                self._batch_parts.clear()
            self._batch_parts[key] = got
        return got

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
        sec = self._first_steps(n, rate, tau)
        first = np.zeros_like(n)
        for k in range(len(self.share)):
            first += self.share[k] * sec[k]
        return self.decode_steps_per_request * tau + first

    def _first_steps(self, n: np.ndarray, rate: float, tau: np.ndarray):
        """Per class, the seconds of a request's first step at batches n (its prefill: its
        prompt and those arriving alongside), mean steps `tau` (finite)."""
        dec = self._decodes(n)
        ctx = dec * self.context_per_decode
        with_me = rate * tau * self.mean_prompt  # tokens of the prompts arriving alongside
        if self.prefill_first:
            # Its first token comes from a prefill-only step (its prompt and those arriving
            # alongside, over a block of decode steps); each of the O - 1 others from a
            # super-step of mean tau.
            with_me = with_me * self.block_steps
            return [self._prefill_only_parts(self.prompt[k] + with_me,
                                             self.prompt[k] ** 2 / 2
                                             + rate * tau * self.block_steps * self.mean_pairs)[3]
                    for k in range(len(self.share))]
        # Every class's prefill step in one call, classes along a new leading axis (the
        # same numbers as a call per class). One class: its call as it is (the new axis
        # would only add numpy calls).
        if len(self.share) == 1:
            sec, _ = self._superstep_tokens(dec, ctx, self.prompt[0] + with_me,
                                            self.prompt[0] ** 2 / 2 + rate * tau * self.mean_pairs)
            return (sec,)
        sec, _ = self._superstep_tokens(dec, ctx, self.prompt[:, None] + with_me,
                                        (self.prompt ** 2 / 2)[:, None] + rate * tau * self.mean_pairs)
        return sec

    # -- capacity
    def saturation_rate(self) -> float:
        """Requests/s with all N slots busy all the time: the replica's ceiling for this mix.

        The rate r with r = N / (steps per request x mean step at batch N and rate r) - the
        prompts arriving at rate r ride along in the steps - below the prefill limit.

        Solved in x, the mean number of prompts a super-step gathers, rather than in r: the
        mean step's fixed point s = E[content of a window of r s prompts] then holds by
        construction (s = E[content | x], r = x / s), so each trial costs one expectation
        instead of a fixed-point solve. r(x) rises with x and the slot rate N / L falls, so
        h(x) = N / L - r(x) has one root; Illinois steps on x to |h| <= 1e-4 r (the
        tolerance of the rate-space search this replaces).
        """
        if self._sat_held is None:
            if self._sat is None:
                self.slots  # the settled batch's search may find the rate on its way (`_effective_slots`)
            if self._sat is None:
                self._sat = self._saturation_rate()
            self._sat_held = min(self._sat, self._held_capacity(self._sat))
        return self._sat_held

    def _few_fit(self, slots: int) -> np.ndarray:
        """The classes of which the KV cache holds only one or two while the replica runs more."""
        fit = self._class_fit
        return np.flatnonzero((fit >= 1) & (fit <= 2) & (fit < slots))

    def _class_stays(self, m: float, tau: float, rate: float) -> np.ndarray:
        """[K] the seconds a request of each class holds its slot at batch m, mean step tau:
        its O - 1 decode steps and its first step."""
        first = self._first_steps(np.array([m]), rate, np.array([tau]))
        return np.array([(self.output[k] - 1.0) * tau + float(first[k][0]) for k in range(len(self.share))])

    def _held_capacity(self, slot_rate: float) -> float:
        """The most requests/s the classes the cache holds one or two of let through, or inf
        where none is held back or they pass `slot_rate` (the rate with the slots busy).

        Such a class is c = 1 or 2 servers of its own, each held for its slot time L(r) (the
        queue `_held_back` models): it takes at most c / (share x L(r)) requests/s of the
        whole stream. Beyond that its queue grows, and with FCFS admission its waiting head
        blocks every request behind it, so the replica saturates with it: the rate r with
        r = min_k c_k / (share_k L_k(r)), L rising with r (Illinois steps, 1e-4 relative). On a
        Llama-2-7B A10G (SGLang) with 20 % of 3,500-token prompts the cache holds one of,
        0.251 requests/s against the simulator's 0.264 under overload; the slots alone said
        0.347 (docs/queueing.md, "A held-back class saturates the replica")."""
        slots = self.slots
        few = self._few_fit(slots)
        if not len(few) or not slot_rate > 0:
            return math.inf

        def room(r):
            # at the fluid batch at r, as `_state` finds it (its mean step on the batch grid)
            grid, tau_grid, _, _, fluid = self._fluid_point(r, slots)
            m = max(min(fluid, slots), 1.0)
            stay = self._class_stays(m, float(np.interp(m, grid, tau_grid)), r)
            return float(np.min(self._class_fit[few] / (self.share[few] * stay[few])))

        top = room(slot_rate)
        if not math.isfinite(top) or top >= slot_rate:
            return math.inf  # no finite bound below the slots' rate (never seen NaN: a guard)
        low = room(0.0)
        if not math.isfinite(low):
            return math.inf
        # room(r) - r falls with r (L rises with the rate): Illinois steps from (0, slot_rate)
        # to 1e-4 of the rate, the saturation searches' tolerance (~6 evaluations)
        r, _ = _illinois(lambda x: (room(x) - x, x), 0.0, low, slot_rate, top - slot_rate, slot_rate, 60)
        return r if math.isfinite(r) else math.inf

    def _saturation_rate(self) -> float:
        return self._saturation_rate_at(self.slots)[0]

    def _effective_slots(self, slots: int) -> int:
        """The batch the engine can hold under overload: `slots`, unless a full batch's
        decodes would leave the token budget too little room for prompts.

        Decodes go first into each step; prompts get what remains of the budget. Where N
        decodes nearly fill it (a budget near the batch cap, e.g. TensorRT-LLM's 768 tokens
        with 768 sequences), the prompts' rate at batch N - the prefill limit - collapses, so
        a model holding N sequences busy would call the replica nearly dead (0.23 req/s for
        a B200 replica measured at 27). The engine instead settles lower: below the batch
        n* where prompts are prefilled as fast as sequences finish, prompts enter faster
        and the batch grows; above it they finish faster and it shrinks. So the replica
        holds at most n* = argmax_n min(slot rate, prefill limit), the rate both sides
        meet - found where the saturation rate, which rises with n until the prefill limit
        binds and then falls, peaks. Only searched where the limit binds at N.

        Below the peak the limit does not bind (the rate rises with n), from it on it does
        (the rate is the limit, which falls with n): the first n where it binds, n_c, is
        found by bisection on that flag, and the peak is n_c - 1 or n_c (the higher rate;
        the larger n on a tie). About log2(N) probes where a ternary search on the rate
        took ~20, and a probe needs the rate's full solve only where its bracket cannot
        tell the flag (`decide`)."""
        if slots < 2 or self.prefill_first:
            return slots
        # Only the flag first: most replicas' prefill limit lies above their rate without
        # queueing, which needs no solve at all, and a model built for a cap's first bound
        # (thousands per large plan) may never need its saturation rate.
        rate, prefill_bound = self._saturation_rate_at(slots, decide=True)
        if not prefill_bound:
            if not math.isnan(rate):
                self._sat = rate
            return slots
        lo, hi, at_hi = 0, slots, rate  # the limit binds at hi, not at lo (lo = 0: no batch)
        solved = {}  # probes the bracket could not decide were solved in full: their rates
        while hi - lo > 1:
            mid = (lo + hi) // 2
            r, bound = self._saturation_rate_at(mid, decide=True)
            if bound:
                hi, at_hi = mid, r
            else:
                lo = mid
                if not math.isnan(r):
                    solved[mid] = r
        below = solved[lo] if lo in solved else (self._saturation_rate_at(lo)[0] if lo >= 1 else -math.inf)
        best, self._sat = (lo, below) if below > at_hi else (hi, at_hi)
        return best

    def _saturation_rate_at(self, slots: int, decide: bool = False) -> tuple[float, bool]:
        """The saturation rate with `slots` sequences busy, and whether the prefill limit
        at that batch is what bounds it. `decide`: only the flag is needed - where the
        bracket already shows the root below the limit, (nan, False) without solving for it."""
        if slots < 1:
            return 0.0, False
        N = float(slots)
        n = np.array([N])
        no_queue = N / float(self.slot_seconds(n, 0.0)[0])  # h at rate 0
        # The answer never exceeds the rate without queueing, nor the prefill limit.
        top = min(no_queue, self.prefill_limit(N) * (1.0 - 1e-9))
        prefill_bound = self.prefill_limit(N) * (1.0 - 1e-9) < no_queue
        if decide and not prefill_bound:  # the root lies at or below no_queue, the ceiling
            return math.nan, False
        if self.prefill_first:
            return self._saturation_prefill_first(N, no_queue, top, prefill_bound, decide)
        dec = self._decodes(n)
        ctx = dec * self.context_per_decode

        def h(x):
            e, k, _ = self._expected_superstep(dec, ctx, np.array([x]))
            span = float(e[0])
            r = x / span
            tau = span / float(k[0])
            slot = self._slot_seconds_float(N, r, tau)
            if slot is None:
                slot = float(self.slot_seconds(n, r, np.array([tau]))[0])
            return N / slot - r, r

        base = float(self.step.seconds(dec, ctx, 0.0, 0.0)[0])
        lo, h_lo = 0.0, no_queue
        hi = no_queue * base  # r(x) <= x / base: at most no_queue here
        for _ in range(48):  # bracket; r(x) nears the prefill limit within 1e-9 by 2^30 x this
            h_hi, r_hi = h(hi)
            if h_hi < 0:
                if decide and r_hi < top:  # the root's rate lies below r_hi, so below the ceiling
                    return math.nan, False
                break
            if r_hi >= top:
                return top, prefill_bound  # the root lies at or beyond the ceiling
            lo, h_lo = hi, h_hi
            hi *= 2.0
        else:
            return top, prefill_bound
        _, r = _illinois(h, lo, h_lo, hi, h_hi, r_hi, 60)
        return min(r, top), prefill_bound and r >= top

    def _saturation_prefill_first(self, N: float, no_queue: float, top: float, prefill_bound: bool,
                                  decide: bool) -> tuple[float, bool]:
        """`_saturation_rate_at` for a prefill-first engine, in the rate itself: its mean step
        (a decode step and the chain of prefill steps, `_prefill_chain`) has no fixed point
        to parametrize by. h(r) = N / L(N, r) - r falls with r; Illinois steps in (0, top)
        to |h| <= 1e-4 r, as the other search.

        This is the rate where prompts trickling in stop being served as they come, not the
        engine's capacity with a standing queue (which prefills the freed slots' prompts
        together: 1.9x this on an MoE). Between the two the engine gets there only by letting
        a queue build - seconds of TTFT - so this is the rate to plan at
        (tests/test_prefill_chain.py; docs/queueing.md, "A prefill-first engine's two rates")."""
        n = np.array([N])

        def h(r):
            tau = self.mean_step(n, r)
            if not np.isfinite(tau[0]):
                return -r, r
            return N / float(self.slot_seconds(n, r, tau)[0]) - r, r

        h_top, _ = h(top)
        if h_top >= 0:
            return top, prefill_bound
        if decide:
            return math.nan, False
        r, _ = _illinois(h, 0.0, no_queue, top, h_top, top, 80)
        return min(r, top), False

    def _window_nodes(self, rate: float, rho: float, tau: np.ndarray, skewed: bool = False,
                      batch: np.ndarray | None = None, st: "_State | None" = None):
        """Decode window seconds T at Gauss-Hermite nodes xi of the prompt work arriving in it:
        T (1 - rho) = D + a xi sqrt(T), D = (O - 1) x tau x (1 - rho), a = ca sqrt(lambda E[w^2]).
        tau: [..., K] mean steps; returns [Hz, ..., K] window seconds. `skewed` (a TPOT's
        window, seen from its own request): the work's nodes carry its skewness at the mean
        window (`_skewed_nodes`: a few long prompts per window, or bursty arrivals, make the
        arriving work a skewed compound sum whose upper tail the normal cuts short), bursty
        arrivals add their cluster-mates, and the window is capped by what is admitted.
        `batch` ([..., K] batch nodes whose mean steps are `tau`) with the state `st`: a window
        that receives more work also decodes a larger batch (`_batch_shifted_decode`)."""
        steps = self._steps1
        g = self._work_scale(rate, rho)
        a_marginal = max(self.cv, 0.05) * math.sqrt(rate * self._work_sq)
        a = g * a_marginal
        rho = min(rho, 0.95)
        decode = steps * tau * (1.0 - rho)
        xi = _GH_NODES.reshape((-1,) + (1,) * np.ndim(decode))
        if skewed and self.cv > 1.0 + 1e-6:
            # Seen from an arrival, its cluster-mates keep coming (`_cluster_excess`).
            decode = decode + self._cluster_excess(rate * tau * _OWN_LAG_STEPS, rate * steps * tau) * g * self._work_mean
        if skewed and a > 0:
            # Skewness of the work in the mean window T = steps x tau: k3 / k2^1.5 with
            # k2 = a^2 T and k3 = lambda T k3(work per arrival); scale-free, so the marginal
            # work's (the prefill-first scale g cancels).
            gamma = rate * self._work_k3 / (a_marginal ** 3 * np.sqrt(steps * tau))
            xi = _skewed_nodes(xi, gamma)
        if batch is not None:
            # The work's excess of xi spreads is about xi x cv sqrt(lambda T) arrivals.
            excess = xi * max(self.cv, 0.05) * np.sqrt(rate * steps * tau)
            decode = decode + self._batch_shifted_decode(st, batch[None], excess, rho) - steps * tau * (1.0 - rho)
        root = (a * xi + np.sqrt((a * xi) ** 2 + 4.0 * (1.0 - rho) * decode)) / (2.0 * (1.0 - rho))
        if not skewed:
            return root ** 2
        return np.minimum(root ** 2, steps * tau * (1.0 - rho) + self._admitted_work(g))

    def _cluster_excess(self, lag0, m):
        """Arrivals beyond its mean count m that a bursty arrival's decode window holds, the
        window starting lag0 mean gaps after the arrival (about a step): g(lag0 + m) -
        g(lag0), g the renewal function's excess (its cluster-mates keep coming)."""
        return forward_excess(lag0 + m, self.cv) - forward_excess(lag0, self.cv)

    def _batch_shifted_decode(self, st: "_State", batch: np.ndarray, excess: np.ndarray, rho: float,
                              steps: np.ndarray | None = None) -> np.ndarray:
        """Pure decode seconds of a window (steps x mean step x (1 - rho)) whose batch is
        `batch` plus half the arrivals it receives beyond the mean (`excess`, broadcast with
        `batch`): an arrival joins the batch once prefilled and decodes alongside for the rest
        of the window, on average its second half. The batch and the window's prompt work
        were independent before: a long bursty prompt's p99 TPOT was 14 % below the
        simulator (signed median, grid long-prompt CV 2) and the robust caps' edges missed
        65 of 100 there (now 48; docs/queueing.md)."""
        steps = self._steps1 if steps is None else steps
        shifted = np.clip(batch + 0.5 * excess, 1.0, st.slots)
        return steps * st.tau(shifted.ravel()).reshape(shifted.shape) * (1.0 - rho)

    def _work_scale(self, rate: float, rho: float) -> float:
        """Seconds a prompt arriving in a decode window costs it, over its marginal prompt work
        (`_work_mean`): 1 where prompts ride along in decode steps (chunked). A prefill-first
        engine prefills them in steps of their own, each paying the fixed costs and (an MoE)
        the expert reads again: at the state's prefill share rho of a step, rho / rate
        seconds per arriving prompt (at least the marginal work). Without it the windows of a
        prefill-first MoE carried prompts at their marginal 1.6 ms where each costs ~8.6 ms
        (Qwen3-30B-A3B on an H100 at 71/s): p50 TPOT 58 ms, its own mean step 70, the
        simulator 71."""
        if not self.prefill_first or rate <= 0 or self._work_mean <= 0:
            return 1.0
        return max(rho / (rate * self._work_mean), 1.0)

    def _admitted_work(self, scale: float = 1.0) -> np.ndarray:
        """[K] the most prompt work a class's decode window can prefill. Only admitted prompts
        are prefilled: the other N - 1 slots admit at most one each at the start and one more
        each time a stay ends, so a window holds at most (N - 1) x (1 + steps / shortest
        steps) prompts (few-slot replicas: a 2-slot A10G's p99 TPOT was 40-70 % high with a
        burst's whole work in one window)."""
        steps = self._steps1
        return (self.slots - 1) * (1.0 + steps / max(float(steps.min()), 1.0)) * scale * self._work_mean

    def _discrete_windows(self, rate: float, rho: float, tau_b: np.ndarray, batch: np.ndarray, st: "_State"):
        """Decode windows T from the prompt work W arriving in them, W over the step-content
        atoms (counts and compositions: `atoms`) at each window's mean count m = lambda x
        steps x tau: T = D + W with D the pure decode time, the excess over the mean window
        stretched by 1 / (1 - rho) (a longer window collects more), capped by what the other
        slots admit. Bursty arrivals: the count law seen from an arrival mixes the stationary
        and the size-biased (Palm) laws with the share that gives the renewal function's
        forward excess. A window that receives more prompts also decodes them
        (`_batch_shifted_decode`: `batch` [Hb, K] are the batch nodes of `tau_b`). Returns
        [Hb*A, K] window seconds and their [Hb*A, K] weights (batch node x atom), or None
        when the atoms do not cover the windows' counts."""
        steps = self._steps1
        g = self._work_scale(rate, rho)
        rho = min(rho, 0.95)
        m = rate * steps * tau_b  # [Hb, K]
        m_max = float(m.max())
        if self._atoms_reach(m_max) > _ATOMS_MAX:
            return None
        at = self.atoms(m_max)
        step = self.step
        works = g * (at.tokens * (step.gemm_s_per_token + step.s_per_token) + at.pairs * step.s_per_pair)  # [A]
        flat = np.maximum(m.ravel(), 1e-12)
        w = self._weights(flat, at)
        if self.cv > 1.0 + 1e-6:
            extra = self._cluster_excess((rate * tau_b * _OWN_LAG_STEPS).ravel(), flat)
            d = dispersion(flat, self.cv)
            share = np.clip(extra / np.maximum(d - 1.0, 1e-9), 0.0, 1.0)[:, None]
            w = (1.0 - share) * w + share * self._weights(flat, at, palm=True)
        w = w / w.sum(axis=1, keepdims=True)
        decode = steps * tau_b * (1.0 - rho)  # [Hb, K]
        cap = decode + self._admitted_work(g)
        mean_t = (steps * tau_b)[:, :, None]
        excess = at.count[None, None, :] - m[:, :, None]  # [Hb, K, A] arrivals beyond the mean
        shifted = self._batch_shifted_decode(st, batch[:, :, None], excess, rho, steps[None, :, None])
        raw = shifted + works[None, None, :]
        # Above its mean a window keeps collecting arrivals at the mean rate while it lasts
        # longer: the excess over the mean is stretched by 1 / (1 - rho).
        raw = np.where(raw > mean_t, mean_t + (raw - mean_t) / (1.0 - rho), raw)
        t = np.minimum(raw, cap[:, :, None])  # [Hb, K, A]
        wk = w.reshape(tau_b.shape + (len(works),)) * _GH_WEIGHTS[:, None, None]  # [Hb, K, A]
        nodes = np.transpose(t, (0, 2, 1)).reshape(-1, tau_b.shape[1])
        weights = np.transpose(wk, (0, 2, 1)).reshape(-1, tau_b.shape[1])
        return _compress_tail(nodes, weights)

    def _atoms_reach(self, m_max: float) -> float:
        """How many arrivals the atoms must cover for windows of mean count up to m_max (its
        upper tail at five spreads): the discrete windows hold up to _ATOMS_MAX."""
        return m_max + 5.0 * max(self.cv, 1.0) * math.sqrt(m_max + 0.5) + 2.0

    def _stretch(self, rate: float, rho: float, tau: float) -> float:
        """Mean decode window over its fluid value (>= 1), weighted by the classes' windows."""
        t = self._window_nodes(rate, rho, np.full(len(self.share), tau))  # [Hz, K]
        mean_t = _GH_WEIGHTS @ t
        base = self._steps1 * tau
        w, w_sum = self._decode_w, self._decode_w_sum
        return float(np.dot(w, mean_t / base) / w_sum) if w_sum > 0 else 1.0

    # -- state at a rate
    def _fluid_point(self, rate: float, N: int):
        """(batch grid, its mean steps, n = 1..N, L(n) the seconds a request holds its slot,
        the fluid batch m = rate x L(m)) at `rate`: where `_state` and `_held_capacity` read
        the replica's batch."""
        grid = _batch_grid(N)
        tau_grid = self.mean_step(grid, rate)
        ns = np.arange(1, N + 1, dtype=float)
        L = np.interp(ns, grid, self.slot_seconds(grid, rate, tau_grid))
        return grid, tau_grid, ns, L, _fluid_batch(rate, ns, L)

    def _state(self, rate: float) -> "_State":
        N = self.slots
        grid, tau_grid, ns, L, fluid = self._fluid_point(rate, N)
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
        # Below one busy slot on average the chain centres on the fluid batch itself (a trickle
        # leaves the replica empty): centred at one slot, a 2-slot replica waited 22 % of the
        # time at any load.
        centre = min(kappa * max(min(fluid, N), 1e-6), N - 0.5) if m < N else m
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
        p = exp(logp, inplace=True)  # n = 0..N (np.exp bit for bit, without its slow underflow path)
        sigma = _queue_ratio(rho, self.cv)
        tail = p[-1] * sigma / (1.0 - sigma)  # the queue beyond N: geometric, as GI/M/N
        total = p.sum() + tail
        p /= total
        # An arrival finds all N slots busy: the time-average (PASTA for Poisson; for bursty
        # arrivals it matched the simulator's full-batch time within 15 %, tests/test_bursty_full_batch.py).
        wait_m = float(p[-1] + tail / total)
        mean_b = float(np.dot(p, busy) + tail / total * N)
        var_b = float(np.dot(p, (busy - mean_b) ** 2) + tail / total * (N - mean_b) ** 2)
        # Kingman / Allen-Cunneen scale G/G/N waits by z = (ca^2 + cs^2) / 2. Burstiness is
        # already in the chain (its spread), and a full replica frees slots at a shared step
        # clock rather than as N independent deterministic servers: against the simulator the
        # chance to wait stays M/M's and the wait shrinks only by (1 + z) / 2.
        wait = min(wait_m, 1.0)
        theta = (1.0 + self.kingman) / 2.0 / max(sat - rate, 1e-9 * sat)
        K = len(self.share)
        waits = self._class_waits(p, sigma, wait, theta, rate, L, rho)
        room_k, room_theta_k = (np.zeros(K), np.full(K, theta)) if waits is None else waits
        return _State(rate, N, grid, tau_grid, fluid, eps, wait, theta, mean_b, var_b, rho_p, room_k, room_theta_k)

    def _class_waits(self, p: np.ndarray, sigma: float, wait: float, theta: float, rate: float,
                     stay_s: np.ndarray, load: float) -> tuple[np.ndarray, np.ndarray] | None:
        """([K] each class's chance to wait for room in the KV cache beyond the slots' own
        chance `wait`, [K] its mean wait then), the cache's claims counted (`_cache_law`), or
        None where the slots alone decide. A class waits with chance wait (a full batch, for
        theta, as before) plus this: never less, and never shorter, than the slot model says.

        p: the batch chain over n = 0..N (normalised with its queue beyond N, ratio sigma).
        With n < N running a class waits where their claims leave it no room; an arrival
        blocked there does not join the batch then, so each step up the chain is thinned by
        the chance that an arrival is blocked (the batch piles up less where long prompts fill
        the cache first; against the simulator's batch on an A10G's RAG mix within ~20 % from
        one running to a full batch, the empty replica's time 1.4-2.2x). Such a request waits
        for the departures that free its deficit, which leave at n / L(n) with n running, L(n)
        the seconds a request then holds its slot (stay_s, n = 1..N). The queue being FCFS, any
        arrival also waits behind the requests waiting for room (M/G/1, below). A full batch (the
        chain's top and its queue) waits theta, as before. Never below the slots' own chance; the
        chain the TPOT reads is unchanged. (docs/queueing.md, "Waiting for room in the KV cache".)
        """
        law = self._cache_law
        if law is None:
            return None
        blocks, departures = law
        thin = p.copy()
        thin[1:] *= np.cumprod(1.0 - self.share @ blocks)
        full = thin[-1] / (1.0 - sigma)  # all N busy, or a queue beyond (GI/M/N's geometric tail)
        total = float(thin[:-1].sum() + full)
        q = thin[:-1] / total  # n = 0..N-1
        full /= total
        if self.cv > 1.0 + 1e-6:
            # A bursty arrival finds its cluster-mates still running: the batch it sees exceeds
            # the time-average by the renewal excess over a stay (`_palm_batch_excess`'s g),
            # so it reads the tables that many sequences further on (a full batch beyond N).
            mean_n = max(float(np.dot(q, np.arange(len(q)))), 1.0)
            ahead = float(forward_excess(np.array([rate * float(np.interp(mean_n, np.arange(1, len(q) + 1),
                                                                            stay_s))]), self.cv)[0])
            at_n = np.arange(len(q)) + ahead
            blocks = np.stack([np.interp(at_n, np.arange(len(q) + 1), np.append(b, 1.0)) for b in blocks])
            departures = np.stack([np.interp(at_n, np.arange(len(q)), d) for d in departures])
        extra = blocks @ q  # [K]: blocked with fewer than N running
        # [K] chance x mean wait for room: departures needed / their rate n / L(n), the
        # seconds a request holds its slot with n running (stay_s[n - 1])
        room_s = departures[:, 1:] @ (q[1:] * stay_s[:len(q) - 1] / np.arange(1, len(q))) if len(q) > 1 \
            else np.zeros(len(extra))
        if not float(np.dot(self.share, extra)) > 1e-12:  # nothing is blocked below N at this rate
            return None
        # The requests waiting for room form one FCFS queue whose head is served by the
        # departures, at load rho (their mean number being served, Little): an arrival finds it
        # busy with chance rho and then waits M/G/1's residual, ahead_s / (1 - rho) on average,
        # times Kingman's (ca^2 + cs^2) / 2 for the arrival CV (the head's wait taken as
        # exponential, cs^2 = 1). Its load is held below the replica's own (a head waiting
        # for room stops admissions, so the cache drains: the queue clears as long as the
        # replica keeps up - the M/G/1 load of a rare huge prompt's long waits overstates it).
        mixed = float(np.dot(self.share, extra))
        ahead_s = float(np.dot(self.share, room_s)) / mixed
        rho = min(rate * float(np.dot(self.share, room_s)), load, 1.0 - 1e-9)
        own = np.minimum(full + extra, 1.0)
        chance = own + (1.0 - own) * rho  # 1 - (1 - own)(1 - rho), without its cancellation
        room_k = np.maximum(chance - wait, 0.0)
        # its mean: the own deficit's departures and the queue ahead (an arrival blocked itself
        # waits behind it too), over the chance of either
        queue_s = ahead_s / (1.0 - rho) * (1.0 + self.cv ** 2) / 2.0
        either = extra + (1.0 - own) * rho
        room_theta_k = np.where(either > 1e-12, (room_s + rho * queue_s) / np.maximum(either, 1e-12), theta)
        return room_k, room_theta_k

    # -- distributions
    def _held_back(self, st: "_State") -> tuple:
        """Classes of which the KV cache holds at most two sequences at once while the
        replica runs more (a long prompt on a small cache): such a request waits for one of
        its own class to leave, however free the other slots are - a queue of its own with
        c = 1 or 2 servers, each held for the class's slot time L.

        It waits when the c requests of its class before it arrived within the last L (the
        class's arrivals as a gamma renewal stream, the service's thinned by the class's
        share: P(c k, L / theta); bursts make this far more than rho), or by Erlang's C where queueing
        says more (c = 1: rho; c = 2: 2 rho^2 / (1 + rho)). Then it waits L - g, g the time
        since the c-th of them (gamma, given g < L), stretched by 1 / (1 - rho) for those
        queued ahead: for Poisson arrivals at low load, M/D/1's uniform residual (docs/
        queueing.md, "A class the cache holds one of"). (class, chance, waits: equal-weight
        atoms in seconds) each; chance 1 and infinite waits where the class overloads them."""
        fit = self._class_fit
        few = self._few_fit(st.slots)
        if not len(few):
            return ()
        m = max(min(st.fluid, st.slots), 1.0)
        stays = self._class_stays(m, float(st.tau(m)), st.rate)
        out = []
        for k in few:
            # The class's own stream, each arrival of it with chance share: CV^2 = 1 + share
            # (cv^2 - 1), the geometric sum of the service's gaps (gamma: shape 1 / CV^2).
            shape = 1.0 / max(1.0 + self.share[k] * (self.cv ** 2 - 1.0), 1e-6)
            slot_s = float(stays[k])
            c = float(fit[k])
            lam = self.share[k] * st.rate
            rho = lam * slot_s / c
            if not rho < 1.0:
                out.append((int(k), 1.0, np.full(len(_HELD_ATOMS), math.inf)))
                continue
            erlang = rho if c == 1.0 else 2.0 * rho * rho / (1.0 + rho)
            # Time since the c-th previous arrival of the class, in units of its scale.
            gaps = slot_s * np.linspace(0.0, 1.0, 257)
            cdf = regularized_lower_gamma(np.full(len(gaps), c * shape), gaps * lam * shape)
            chance = min(max(erlang, float(cdf[-1])), 1.0)
            if cdf[-1] > 1e-12:
                since = np.interp(_HELD_ATOMS * cdf[-1], cdf, gaps)
                waits = (slot_s - since) / (1.0 - rho)
            else:
                waits = _HELD_ATOMS * slot_s / (1.0 - rho)
            out.append((int(k), chance, waits))
        return tuple(out)

    def _ttft_parts(self, st: "_State"):
        """Pieces of every class's TTFT: uniforms (no wait) and shifted exponentials (waited)."""
        rate = st.rate
        n0 = max(min(st.fluid, st.slots), 1.0)
        dec0 = float(self._decodes(n0))
        ctx0 = dec0 * self.context_per_decode
        t_bar = float(st.tau(n0))
        # A super-step's mean length: a prefill-first engine's holds its block of decode steps
        # (block_steps is 1 for every other engine).
        span = t_bar * self.block_steps
        at = self.atoms(rate * span * 8.0)
        room = max(self.budget - dec0, 1.0)
        if self.prefill_first:
            pre_full, pre_last, pre_k, pre_total = self._prefill_only_parts(at.tokens, at.pairs)
            decode_step = float(self.step.seconds(dec0, ctx0, 0.0, 0.0))
            block = self.block_steps * decode_step  # the decode steps before it looks at prompts again
            d = pre_total + block
        else:
            # The super-steps' last and full steps, kept: the arrival's view below needs them
            # apart (the same numbers as evaluating them again: the same operations).
            last, full, k = self._superstep_steps(dec0, ctx0, at.tokens, at.pairs)
            d = last if full is None else (k - 1.0) * full + last
        # The step in progress carries the prompts that arrived during the step before it:
        # two rounds of the step-length chain from its mean.
        prev = self._weights(np.array([rate * span]), at)[0]
        trans = self._weights(rate * d, at)  # [from atom, to atom]
        # Long steps gather more prompts for the next: follow the chain until its memory
        # (about the prefill share of a step per step) has faded.
        rho = min(max(1.0 - float(self.step.seconds(dec0, ctx0, 0.0, 0.0)) / t_bar, 0.0), 0.95)
        cur = prev
        for _ in range(int(min(max(math.ceil(math.log(0.02) / math.log(max(rho, 1e-3))), 2), 30)) - 1):
            cur = cur @ trans
        # Smooth arrivals (CV < 1) keep the Palm count. Bursty ones keep the stationary
        # chain: where their clusters land is `_bursty_landing`'s (below).
        bursty = self.cv > 1.0 + 1e-6
        if self.cv < 1.0 - 1e-6:
            cur = cur @ self._weights(rate * d, at, palm=True)
        else:
            cur = cur @ trans
        if self.prefill_first:
            # The content's prefill-only chunks i = 1..k (what is left of the content after
            # chunk i comes first when prefill resumes), then its block of decode steps, after
            # which the arrival's own prompt is prefilled at once (prefill has priority): an
            # arrival during the block waits for the rest of it.
            pos = np.nonzero(pre_k >= 1)[0]
            reps = pre_k[pos].astype(int)
            src = np.repeat(pos, reps)
            i = np.arange(len(src)) - np.repeat(np.cumsum(reps) - reps, reps) + 1
            chunk = np.where(i == pre_k[src], pre_last[src], pre_full[src])
            sub_d = np.concatenate([np.full(1, block), chunk])
            sub_w = np.concatenate([np.full(1, block), cur[src] * chunk])
            sub_left = np.concatenate([np.zeros(1), np.maximum(at.tokens[src] - i * self.budget, 0.0)])
            if bursty:  # each chunk's start after its content's first: the chunks before it
                sub_content = np.concatenate([np.zeros(1, dtype=bool), np.ones(len(src), dtype=bool)])
                sub_after = np.concatenate([np.zeros(1), (i - 1) * pre_full[src]])
        else:
            # Content beyond the token budget runs in several steps; an arrival lands in one of
            # them (length-biased) and queues behind what is left of the content after it.
            # The last (or only) step of each content: nothing left behind it; then, atom by
            # atom, its full steps i = 1..k-1 with content left over behind them.
            multi = np.nonzero(k > 1)[0]
            reps = (k[multi] - 1.0).astype(int)
            src = np.repeat(multi, reps)
            i = np.arange(len(src)) - np.repeat(np.cumsum(reps) - reps, reps) + 1
            if full is None:  # no content spills: no full steps (src is empty)
                full = last
            sub_d = np.concatenate([last, full[src]])
            sub_w = np.concatenate([cur * last, cur[src] * full[src]])
            sub_left = np.concatenate([np.zeros_like(last), at.tokens[src] - i * room])
            if bursty:  # each step's start after its content's first: the full steps before it
                sub_content = np.concatenate([at.tokens > 0.0, np.ones(len(src), dtype=bool)])
                sub_after = np.concatenate([np.maximum(k - 1.0, 0.0) * full, (i - 1) * full[src]])
        sub_w /= sub_w.sum()
        # An arrival that finds the replica empty starts its own step at once, alone: no step
        # in progress to wait for, no later arrival joins it. Its chance comes out of the
        # entries without content (a decode step, or a prefill-first engine's decode block):
        # content in progress means the replica is busy.
        if self.prefill_first:
            bare = np.zeros(len(sub_w), dtype=bool)
            bare[0] = True
        else:
            bare = np.concatenate([at.tokens <= 0.0, np.zeros(len(sub_w) - len(last), dtype=bool)])
        idle, own_idle = self._idle_arrival(st)
        if bursty:
            sub_w = self._bursty_landing(sub_d, sub_w, sub_content, sub_after, span, rate, idle)
        bare_w = float(sub_w[bare].sum())
        # (a sliver stays: with every entry bare and the chance 1 - a trickle of smooth
        # arrivals - no entry would be left to build the law on)
        idle = min(idle, bare_w * (1.0 - 1e-9))
        if idle > 0.0:
            sub_w[bare] *= (bare_w - idle) / bare_w
        # Others arriving in that step [distinct step lengths, atoms]: a content's full steps
        # all have one length, so a burst's thousands of entries have far fewer lengths.
        lengths, length_of = np.unique(sub_d, return_inverse=True)
        same = self._weights(rate * lengths, at, palm=True)
        if bursty:
            # (each merged entry's share of content and, over its content, mean start after it)
            content = sub_content.astype(float)
            cur_d, cur_w, cur_left, same, merged = _compress_entries(
                sub_d, sub_w, sub_left, same, rows_of=length_of, extra=np.stack([content, content * sub_after], axis=1))
            after = merged[:, 1] / np.maximum(merged[:, 0], 1e-300)
            elapsed = self._bursty_elapsed(cur_d, merged[:, 0], after, span, rate)
        else:
            cur_d, cur_w, cur_left, same = _compress_entries(sub_d, sub_w, sub_left, same, rows_of=length_of)
            elapsed = None
        co, same = _compress_atoms(at, same, cur_w)
        # Prefill-first: the own prompt's steps carry no decodes.
        own_dec, own_ctx = (0.0, 0.0) if self.prefill_first else (dec0, ctx0)
        co, same, ahead = self._split_ahead(co, same, cur_left, own_dec)
        own0 = self._own_done(own_dec, own_ctx, co, cur_left, ahead)  # [classes, entries, atoms]
        # Waited: admitted at a step end with the batch full, prefilled in the next step.
        decn = float(self._decodes(st.slots))
        ctxn = decn * self.context_per_decode
        wn = self._weights(np.array([rate * float(st.tau(st.slots)) * self.block_steps]), at)
        con, wn = _compress_atoms(at, wn, np.ones(1))
        wn = wn[0]
        if self.prefill_first:
            decn, ctxn = 0.0, 0.0
        con, wn, ahead_n = self._split_ahead(con, wn[None, :], np.zeros(1), decn)
        wn = wn[0]
        ownn = self._own_done(decn, ctxn, con, np.zeros(1), ahead_n)[:, 0, :]
        # A serving engine's fixed time per request (API server, tokenizer) shifts every TTFT.
        own0, ownn = own0 + self.replica.request_overhead_s, ownn + self.replica.request_overhead_s
        return _TtftParts(cur_d, cur_w, same, own0, wn, ownn, st.wait, st.theta, idle,
                          own_idle + self.replica.request_overhead_s, st.room_k, st.room_theta_k, elapsed)

    def _landings(self, after: np.ndarray, lengths: np.ndarray, span: float, rate: float) -> np.ndarray:
        """Bursty arrivals expected in a window [after, after + lengths] of a step with content
        (seconds after its content's first step started), beyond the long-run rate's share:
        E[g(lambda (a + r + l)) - g(lambda (a + r))] with g = M - u the renewal function's
        excess seen from the content's last arrival, which came r before that first step
        started, r uniform over the step before it (`span`: its mean length)."""
        r = _LAG_POSITIONS * span
        start = rate * (after[..., None] + r)
        end = forward_excess(start + rate * lengths[..., None], self.cv)
        return (end - forward_excess(start, self.cv)).mean(axis=-1)

    def _bursty_landing(self, d, w, content, after, span: float, rate: float, idle: float) -> np.ndarray:
        """The entries' weights seen from a bursty arrival (CV > 1). The time-stationary
        weights (length-biased: Poisson arrivals see time averages) give a step with content
        lambda d arrivals; one that a cluster's prompt set going gathers that prompt's
        cluster-mates: lambda d + the renewal excess over the step (`_landings`). Steps with
        content are weighted up by that ratio; the steps without content (and the idle
        replica) keep what is left, or, where every entry has content, only the ratios count."""
        boosted = w.copy()
        boosted[content] *= 1.0 + self._landings(after[content], d[content], span, rate) \
            / np.maximum(rate * d[content], 1e-300)
        with_content = float(boosted[content].sum())
        without = float(w[~content].sum())
        if with_content <= 0.0:  # no content in progress anywhere: nothing to weight up
            return w
        if without <= 0.0:
            return boosted / with_content
        target = min(with_content, (1.0 - idle) * (1.0 - 1e-9))
        return np.where(content, boosted * (target / with_content), w * ((1.0 - target) / without))

    def _bursty_elapsed(self, d, content, after, span: float, rate: float) -> np.ndarray:
        """[C, Z] for each entry (step length d, share of content, start after its content's
        first step): the chance that at most a fraction z (`_ELAPSED_Z`) of the step in
        progress is left when a bursty arrival lands in it. Where the step has content the
        arrival is more likely early in it, near its cluster's earlier prompts: the time e
        since the step started has the law of the expected landings H(e) = lambda e + the
        excess (`_landings`) - uniform for Poisson, where the excess is 0 - so the chance is
        (H(d) - H((1 - z) d)) / H(d). Without content: uniform."""
        z = _ELAPSED_Z
        e = d[:, None] * (1.0 - z[None, :])
        total = rate * d + self._landings(after, d, span, rate)
        early = rate * e + self._landings(after[:, None], e, span, rate)
        ok = (total > 0.0) & np.isfinite(total)
        law = np.where(ok[:, None], (total[:, None] - early) / np.where(ok, total, 1.0)[:, None], z[None, :])
        out = content[:, None] * np.clip(law, 0.0, 1.0) + (1.0 - content[:, None]) * z[None, :]
        # exactly 0 and 1 at the ends (the CDF's fast path reads entries there as 0 and 1)
        out[:, 0], out[:, -1] = 0.0, 1.0
        return out

    def _idle_arrival(self, st: "_State") -> tuple[float, np.ndarray]:
        """(the chance that an arrival finds the replica empty, [K] seconds to its first token
        then, the engine's fixed time per request not included).

        Every earlier arrival has left when the one before it arrived a whole stay S earlier
        or more: for gamma-renewal arrivals of CV c (shape k = 1 / c^2) that is
        P(gap > S) = Q(k, k lambda S), with lambda S the requests in the replica by Little's
        law at the fluid point. Poisson: exp(-lambda S), M/G/inf's chance of an empty system;
        exact for one class of fixed stay at any CV, the mean stay standing in for a mix."""
        ell = max(float(st.fluid), 0.0)
        if self.cv < 1e-6:
            chance = 1.0 if ell < 1.0 else 0.0
        else:
            k = 1.0 / self.cv ** 2
            chance = float(1.0 - regularized_lower_gamma(np.array([k]), np.array([k * ell]))[0])
        return chance, self._own_idle_s

    @cached_property
    def _cache_law(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(blocks, departures), each [K, N], for n = 0..N-1 running sequences, each of a class
        drawn by the batch's composition (share x stay, the weights the slots are counted on):
        blocks[k, n], the chance that a class-k arrival's KV claim does not fit beside them;
        departures[k, n], the departures it then waits for (at most the n running), times that
        chance. None where no arrival is ever blocked below N (one claim size, or N of the
        largest claim fit: the slot count's model, bit for bit).

        The cache admits a sequence against its claim (the simulator's and the engines'
        rule), not a slot of the mean claim: with mixed lengths a long prompt waits while
        the running sequences' claims leave it no room, however few they are. Their total is
        a sum of n draws of the claim law, on a grid of the cache (1,024 bins, each claim's
        mass split between its two neighbouring bins: its mean kept). A blocked request fits
        once the sequences that leave have freed its deficit (their total + its claim - the
        cache): departures leave by the classes' shares (each class's sequences leave at the
        rate its requests arrive), so the count it waits for is the renewal function of that
        claim law at the deficit. The same at every rate, so computed once per model."""
        N, C = self.slots, float(self.replica.kv_cache_tokens)
        claims, w = self._claims, self._slot_w
        if N < 2 or float(claims.max() - claims.min()) <= 0.0 or not math.isfinite(C) \
                or N * float(claims.max()) <= C:  # N of the largest claim fit (a batch cap binds first)
            return None
        bins = _CLAIM_BINS
        width = C / bins
        pos = claims / width
        lo = np.floor(pos).astype(int)
        frac = pos - lo
        room = np.floor((C - claims) / width + 1e-9).astype(int)  # bins a class-k arrival fits within
        if int(room.max()) < 0:  # no claim fits beside any other
            return None

        def moves(weights):
            return [(int(sh), float(m)) for j in range(len(claims))
                    for sh, m in ((lo[j], weights[j] * (1.0 - frac[j])), (lo[j] + 1, weights[j] * frac[j]))
                    if m > 0.0 and sh <= bins]

        running = moves(w)
        # Departures to free d bins: U(d) = sum over j >= 0 of P(j departures free < d), d up to
        # the largest deficit (a claim: the running total is within the cache).
        dmax = int(lo.max()) + 2
        left = moves(self.share)
        renewal = np.zeros(dmax + 1)
        law = np.zeros(dmax + 1)
        law[0] = 1.0
        for _ in range(100_000):
            below = np.concatenate([[0.0], np.cumsum(law)[:-1]])  # P(freed < d), d = 0..dmax
            renewal += below
            if below[-1] < 1e-12:
                break
            nxt = np.zeros(dmax + 1)
            for shift, mass in left:
                if shift <= dmax:
                    nxt[shift:] += mass * law[:dmax + 1 - shift]
            law = nxt
        # Below n0 running every class fits whatever they are (n0 + 1 of the largest claim
        # fit), and with up to n1 a class is blocked with chance under 1e-13 by Hoeffding's
        # bound on their total (counted as 0 below, as every chance under 1e-12): the law at
        # the first n that can block comes in one step, the claim law's power by FFT. Its
        # length keeps what wraps around under the same bound (the total beyond twice the
        # cache, or beyond bins + n0 where n0 of the largest claim fit).
        n0 = math.floor(C / float(claims.max())) - 1
        mean_bins, spread_bins = float(np.dot(w, pos)), float(lo.max() + 1 - lo.min())
        b = spread_bins * math.sqrt(math.log(1e13) / 2.0)
        x = (-b + math.sqrt(b * b + 4.0 * mean_bins * (C - float(claims.max())) / width)) / (2.0 * mean_bins)
        n_start = int(min(max(n0, math.floor(x * x), 0), N - 1))
        one = np.zeros(bins + 1)
        for shift, mass in running:
            one[shift] += mass
        size = 1 << int(math.ceil(math.log2(bins + n_start + 2)))
        # The running claims' total on bins 0..bins (the cache; mass beyond is dropped: such
        # states are not reached, and every class is blocked there).
        pmf = np.fft.irfft(np.fft.rfft(one, 2 * size) ** n_start, 2 * size)[:bins + 1] if n_start > 0 \
            else np.eye(1, bins + 1)[0]
        np.clip(pmf, 0.0, None, out=pmf)
        fits = room >= 0
        at = np.clip(room, 0, bins)
        # per class: the deficits 1..bins - room_k beyond its room, and their renewal values
        need = [renewal[np.minimum(np.arange(1, bins - r + 1), dmax)] if r >= 0 else None for r in at]
        blocks = np.ones((len(claims), N))
        departures = np.zeros((len(claims), N))
        blocks[:, :n_start] = 0.0
        # (the room's fraction of a bin counts that share of the next bin: a total at the
        # cache's edge fits as often as the claims' split puts it there)
        room_frac = np.where(fits, (C - claims) / width - room, 0.0)
        nxt_at = np.minimum(at + 1, bins)
        for n in range(n_start, N):
            cdf = np.cumsum(pmf)
            blocks[:, n] = 1.0 - np.where(fits, cdf[at] + room_frac * np.where(at < bins, pmf[nxt_at], 0.0), 0.0)
            # (at most the n running leave before it fits: then the cache is empty)
            for k, r in enumerate(at):
                departures[k, n] = float(np.dot(pmf[r + 1:], np.minimum(need[k], n))) if fits[k] else 1.0
            # (totals beyond the cache, dropped: the largest deficit)
            departures[:, n] += max(1.0 - float(pmf.sum()), 0.0) * min(renewal[dmax], n)
            nxt = np.zeros(bins + 1)
            for shift, mass in running:
                nxt[shift:] += mass * pmf[:bins + 1 - shift]
            pmf = nxt
        np.clip(blocks, 0.0, 1.0, out=blocks)
        # A class the cache holds only one or two of waits for its own (`_held_back`).
        off = ((self._class_fit >= 1) & (self._class_fit <= 2))[:, None] | (blocks < 1e-12)
        blocks[off] = 0.0
        departures[off] = 0.0
        return (blocks, departures) if blocks.any() else None

    @cached_property
    def _own_idle_s(self) -> np.ndarray:
        """[K] seconds to the first token of a prompt that runs alone (no decode, no company,
        nothing before it): the same at every rate, so computed once per model."""
        alone = _Atoms(count=np.zeros(1), tokens=np.zeros(1), pairs=np.zeros(1), comp=np.ones(1), j_max=0)
        return self._own_done(0.0, 0.0, alone, np.zeros(1))[:, 0, 0]

    def _tpot_parts(self, st: "_State"):
        """A class's TPOT is the mean step over its O - 1 decode steps. Two things move it:
        the batch over its stay (slow: normal, capped at N) and the prompt work that arrives
        during its stay. Over a window of T seconds, decode takes D = (O - 1) x mean step x
        (1 - rho_p) and prompts arrive with work lambda T x E[w] + xi x ca x sqrt(lambda T
        E[w^2]) (xi standard normal), so T (1 - rho_p) = D + a xi sqrt(T), a quadratic in
        sqrt(T); windows of a few arrivals take the compound law itself (`_discrete_windows`).
        Returns TPOT nodes [H, K], their weights ([H], or [H, K] per class) and a small
        smoothing sd [K]."""
        life = _life_fraction(self.share, self.output, st.eps)
        center = st.fluid + 1.0 + self._palm_batch_excess(st)
        b = np.clip(center + np.sqrt(st.var_batch * life)[None, :] * _GH_NODES[:, None], 1.0, st.slots)
        tau_b = st.tau(b)  # [Hb, K]
        steps = self._steps1
        # Windows of a few arrivals: the compound count law itself (atoms: counts and their
        # compositions), where "no long prompt" or "one" decides the tail and a normal (or
        # its Cornish-Fisher skew) puts mass where there is none (p95 TPOT of a mix with 20 %
        # 8,192-token prompts at CV 2, 0.27/s: 98.8 ms by the skewed normal, 75.9 by the plain
        # one, 58.0 discrete, the simulator 55.0). Windows of more arrivals than the atoms hold (48 a size group):
        # the sum is near normal there, and the skewed normal stands.
        # Between the two, each quantile moves from the one's to the other's as the windows'
        # counts approach what the atoms hold: a switch at one rate made the percentile jump
        # (-6 % on a Mixtral replica at p99) and fall with more load, so the cap search, which
        # needs it to rise, found a cap above rates that miss. (A mixture of the two laws
        # would not do: its p99 keeps the heavier tail's until that tail's share is nearly
        # gone, then drops.)
        reach = self._atoms_reach(float((st.rate * steps * tau_b).max()))
        normal = min(max((reach - _ATOMS_BLEND) / (_ATOMS_MAX - _ATOMS_BLEND), 0.0), 1.0)
        disc = self._discrete_windows(st.rate, st.rho_p, tau_b, b, st) if normal < 1.0 else None
        if disc is not None:
            nodes, weights = disc
            nodes = nodes / steps
        if disc is None or normal > 0.0:
            n_nodes = (self._window_nodes(st.rate, st.rho_p, tau_b, skewed=True, batch=b, st=st)
                       / steps).reshape(-1, len(self.share))  # [Hz*Hb, K]
            if disc is None:
                nodes, weights = n_nodes, _GH_PAIR_WEIGHTS
            else:
                nodes, weights = _quantile_blend(nodes, weights, n_nodes, _GH_PAIR_WEIGHTS, normal)
        t_bar = float(st.tau(max(min(st.fluid, st.slots), 1.0)))
        smooth = 0.02 * t_bar / np.sqrt(steps)
        return nodes, weights, smooth

    def _palm_batch_excess(self, st: "_State") -> np.ndarray:
        """[K] others sharing a request's batch beyond the stationary mean, seen from the
        request (bursty arrivals): at s seconds into its stay of L, those that arrived in the
        last L hold (0, s] after it and (s - L, 0) before it, whose counts exceed the long-run
        rate's by the renewal excess g of each lag; averaged over its stay, 2 x mean g(rate s).
        0 for Poisson and smoother arrivals."""
        if self.cv <= 1.0 + 1e-6:
            return np.zeros(len(self.share))
        n0 = max(min(st.fluid, st.slots), 1.0)
        stay = self._steps1 * float(st.tau(n0)) * st.rate  # [K] arrivals per stay
        lags = stay[:, None] * _STAY_POSITIONS[None, :]
        return 2.0 * forward_excess(lags, self.cv).mean(axis=1)

    def _split_ahead(self, at: _Atoms, rows: np.ndarray, left: np.ndarray, dec: float):
        """(atoms, rows [R, atoms], the share of each atom's prompts ahead of the arrival's
        own, or None for a half everywhere). The arrival's place among the atom's prompts
        (FCFS) is uniform; where the content fits one step it finishes with the step wherever
        it is, but where it does not, being ahead of them or behind decides the step it
        finishes in, and half of them ahead (the mean) finished it in the later step. Such
        atoms (some class and entry beyond the step's room, prompts of their own) become two,
        each with half the weight: a quarter and three quarters of them ahead (the midpoint
        rule over the uniform place: the place is discrete - with one co-arrival, first or
        second - and two points are the coarsest rule that tells the orders apart; a review's
        four-point rule put the p99 below at 621 ms, nearer the old value: part of the gain
        offsets `_own_done`'s fluid packing, which fills steps to the budget where a
        prefill-first engine admits whole prompts). On a prefill-first A100 with 3,000-token
        prompts and a 4,096-token budget, one prompt's co-arrival put the arrival's TTFT at both
        prompts' prefill whichever came first: p99 664 ms against the simulator's 540 (now 588)."""
        room = max(self.budget - dec, 1.0)
        total = np.asarray(left, dtype=float)[None, :, None] + self.prompt[:, None, None] + at.tokens[None, None, :]
        split = np.nonzero((at.tokens > 0.0) & (total > room).any(axis=(0, 1)))[0]
        if not len(split):
            return at, rows, None
        n = len(at.tokens)
        idx = np.concatenate([np.arange(n), split])
        ahead = np.full(len(idx), 0.5)
        ahead[split], ahead[n:] = 0.25, 0.75
        weight = np.ones(len(idx))
        weight[split], weight[n:] = 0.5, 0.5
        return (_Atoms(at.count[idx], at.tokens[idx], at.pairs[idx], at.comp[idx], at.j_max),
                rows[:, idx] * weight[None, :], ahead)

    def _own_done(self, dec: float, ctx: float, at: _Atoms, left: np.ndarray, ahead_share=None) -> np.ndarray:
        """[classes, entries, atoms]: seconds from a step start until the own prompt is
        prefilled, behind `left` tokens of earlier content and alongside the atom's other
        prompts (FCFS among those: half of them ahead, or `ahead_share` [atoms] of them)."""
        room = max(self.budget - dec, 1.0)
        p = self.prompt[:, None, None]
        lft = np.asarray(left, dtype=float)[None, :, None]
        tokens = at.tokens[None, None, :]
        total = lft + p + tokens
        pairs = p * p / 2 + at.pairs[None, None, :] + lft * (p + tokens)  # behind the left-over context
        fits = total <= room
        # Only the side np.where would pick from: most plans' contents all fit in one step
        # (a token budget of thousands), so the chunked evaluation (two more step-time
        # calls on the whole array) is skipped there; the same numbers either way.
        every = bool(fits.all())
        one = self.step.seconds(dec, ctx, total, pairs) if every or fits.any() else None
        if every:
            return one
        ahead = lft + p + (tokens / 2 if ahead_share is None else tokens * ahead_share[None, None, :])
        steps = np.maximum(np.ceil(ahead / room), 1.0)
        frac = pairs / np.maximum(total, 1e-9)
        last = np.clip(total - (steps - 1.0) * room, 1.0, room)
        many = (steps - 1.0) * self.step.seconds(dec, ctx, room, frac * room) + self.step.seconds(dec, ctx, last, frac * last)
        return many if one is None else np.where(fits, one, many)

    def _cdfs(self, st: "_State", need: Sequence[str] = METRICS):
        """Per-class CDFs (on arrays of seconds) and an upper end of their support, for the
        metrics in `need` (the parts of the others are not built)."""
        need_ttft = "ttft_ms" in need or "latency_ms" in need
        need_tpot = "tpot_ms" in need or "latency_ms" in need
        tp = self._ttft_parts(st) if need_ttft else None
        tau_life, life_w, sd_fast = self._tpot_parts(st) if need_tpot else (None, None, None)
        o1 = self._o1
        K = len(self.share)

        if need_ttft:
            # Per state, not per call: the step lengths spelled out along the atoms (a
            # contiguous [C, A] divisor: numpy's loops run ~25 % faster than against the
            # broadcast [C, 1]; the same divisions) and the pair weights [C, A].
            cur_d_ca = np.ascontiguousarray(np.broadcast_to(tp.cur_d[:, None], tp.own0.shape[1:]))
            pair_w = tp.pair_w
            # a wait for room in the KV cache beside the full batch's (`_class_waits`), per class
            room = tp.room if tp.room is not None and tp.room.any() else None
            if room is not None:
                room_theta = np.maximum(tp.room_theta, 1e-12)[None, :, None]  # [1, K, 1]

        every = slice(None)

        def nowait(x, empty=True, ks=every, arrival=True):
            # x: [X, 1, 1, 1] seconds -> [X, K]; `empty`: with the idle arrivals
            # (`ks`: the classes evaluated, all by default; `arrival`: the step in progress
            # met at the arrival - False: at a later moment, uniform in the step).
            # In chunks of points of about _HELD_CHUNK_ELEMENTS [X, K, C, A] elements (a row
            # depends on its own point only): 256 classes on a 500-point grid held 3 GB at once.
            step = max(1, _HELD_CHUNK_ELEMENTS // max(tp.own0[ks].size, 1))
            if len(x) > step:
                return np.concatenate([nowait_rows(x[i:i + step], empty, ks, arrival)
                                       for i in range(0, len(x), step)])
            return nowait_rows(x, empty, ks, arrival)

        def nowait_rows(x, empty, ks, arrival):
            s = tp.own0[None, ks]  # [1,K,C,A]
            # In place on the one [X,K,C,A] array (the latency's TTFT grid has X = 500): the
            # same operations in the same order as np.clip((x - s) / d, 0, 1) * w.
            u = x - s
            u /= cur_d_ca
            np.clip(u, 0.0, 1.0, out=u)
            if arrival and tp.elapsed is not None:  # bursty arrivals: the tabled law of the step left
                u = _table_read(tp.elapsed, u)
            u *= pair_w
            out = u.sum(axis=(2, 3))
            if tp.idle > 0.0:
                if empty:
                    out += tp.idle * (x[:, :, 0, 0] >= tp.own_idle[None, ks])
                else:  # an arrival that found the replica busy: the other entries' own law
                    out /= 1.0 - tp.idle
            return out

        def ttft_slots(x, no_wait=None, empty=True, ks=every, arrival=True):
            # x: [X] seconds -> [X, K]; `no_wait`: its part without a wait, if known
            x = np.asarray(x, dtype=float)[:, None, None, None]
            if no_wait is None:
                no_wait = nowait(x, empty, ks, arrival)
            xe = x[:, :, 0, :]
            sn = tp.ownn[None, ks]
            # (the gap clipped at 0 where it is not used: no overflow in the branch np.where drops)
            past, gap = xe > sn, np.maximum(xe - sn, 0.0)
            waited = (tp.wn * np.where(past, -np.expm1(-gap / max(tp.theta, 1e-12)), 0.0)).sum(axis=-1)
            if room is None:
                return (1.0 - tp.wait) * no_wait + tp.wait * waited
            for_room = (tp.wn * np.where(past, -np.expm1(-gap / room_theta[:, ks]), 0.0)).sum(axis=-1)
            # a request that waits for room is never earlier than had it not waited (the law
            # after admission omits the step in progress, which a short wait can leave in front)
            np.minimum(for_room, no_wait, out=for_room)
            return (1.0 - tp.wait - room[ks]) * no_wait + tp.wait * waited + room[ks] * for_room

        held = self._held_back(st) if need_ttft else ()

        def ttft(x, no_wait=None):
            out = ttft_slots(x, no_wait)
            if held:
                # A class the cache holds only one or two of at a time waits for one of its
                # own to finish (`_held_back`): with chance p, by one of the wait atoms.
                x = np.asarray(x, dtype=float)
                for k, p, waits in held:
                    if not np.isfinite(waits).all():
                        out[:, k] *= 1.0 - p
                        continue
                    # It found its class's slots taken (the replica was not empty), and meets
                    # the step in progress when a slot frees, not when it arrives: a moment
                    # its cluster does not set, so uniform in the step. Class k alone (each
                    # class's column is computed on its own), in chunks of points (a row
                    # depends on its own point only; the latency's 500-point grid times the
                    # wait atoms at once held [12,000, K, C, A] arrays of up to ~600 MB).
                    points = (x[:, None] - waits[None, :]).ravel()
                    step = max(1, _HELD_CHUNK_ELEMENTS // max(tp.own0[k].size, 1))
                    later = np.concatenate([ttft_slots(points[i:i + step], empty=False, ks=slice(k, k + 1),
                                                       arrival=False)[:, 0]
                                            for i in range(0, len(points), step)])
                    out[:, k] = (1.0 - p) * out[:, k] + p * later.reshape(len(x), -1).mean(axis=1)
            return out

        def ttft_grid(grid):
            """`ttft(grid)` bit for bit, the part without a wait evaluated on fewer rows: a
            row depends on its own point only (tests/test_queueing_fast_paths.py), and at
            every point at or below each own0 every clipped term is exactly 0.0, at every
            point beyond each own0 + d exactly 1.0, so those rows are all the same row."""
            own0, cur_d = tp.own0, cur_d_ca
            if not (np.isfinite(own0).all() and np.isfinite(pair_w).all() and (cur_d > 0).all()
                    and np.isfinite(cur_d).all()):
                return ttft(grid)
            low = float(own0.min())
            if tp.idle > 0.0:  # the idle arrival's step: 0 below its TTFT, 1 from it on
                if not np.isfinite(tp.own_idle).all():
                    return ttft(grid)
                low = min(low, float(np.nextafter(tp.own_idle.min(), -np.inf)))
            # x - s >= d holds in the reals beyond this (s + d rounded, plus a margin), so
            # (x - s) / d >= 1 in floating point too (rounding is monotone).
            high = max(float((own0 + cur_d).max()) * (1.0 + 1e-12), float(tp.own_idle.max()) if tp.idle > 0.0 else 0.0)
            if not high > 0:
                return ttft(grid)
            no_wait = _same_rows(grid, grid <= low, grid >= high, lambda x: nowait(x[:, None, None, None]))
            return ttft(grid, no_wait)

        def tpot(x):
            x = np.asarray(x, dtype=float)[:, None, None]
            z = (x - tau_life[None, :, :]) / np.maximum(sd_fast[None, None, :], 1e-9)
            return (_phi(z) * (life_w[None, :, :] if life_w.ndim == 2 else life_w[None, :, None])).sum(axis=1)

        # The TTFT CDF steps up at each idle arrival's TTFT: the quantile search lands on the
        # step rather than interpolating across it (numerics._mixture_quantile), and the
        # latency's TTFT grid has the step's two sides.
        jumps = _sorted_unique(tp.own_idle) if need_ttft and tp.idle > 0.0 and np.isfinite(tp.own_idle).all() \
            else np.zeros(0)
        ttft.jumps = jumps
        jumps_around = np.concatenate([np.nextafter(jumps, -np.inf), jumps])

        # Latency: the TTFT as quantile atoms (finer in the tail), plus the decode time.
        cache: dict = {}

        def ttft_atoms():
            if "tq" not in cache:
                top = float(tp.ownn.max() + tp.cur_d.max() + tp.own0.max()) + _longest_wait(tp) * 40.0
                top += max((float(h[2].max()) for h in held if np.isfinite(h[2]).all()), default=0.0)
                grid = _sorted_unique(np.concatenate([np.linspace(0.0, top, 400),
                                                 np.geomspace(max(top * 1e-4, 1e-6), top, 100), jumps_around]))
                fk = ttft_grid(grid) if _TTFT_SAME_ROWS else ttft(grid)  # [G, K]
                cache["tq"] = np.stack([np.interp(_LAT_MIDS, np.maximum.accumulate(fk[:, k]), grid) for k in range(K)])
            return cache["tq"]  # [K, Q]

        # The life-average steps' law in tail bins whose nodes move continuously with the
        # rate (weight split over bins): midpoint bins made a mixture's p90 latency jump by
        # up to 24 % between neighbouring rates (one class's node crossing a bin edge).
        lat_nodes, lat_w = _compress_tail(tau_life, life_w if life_w.ndim == 2 else np.broadcast_to(
            life_w[:, None], tau_life.shape)) if need_tpot else (None, None)

        def latency(x):
            x = np.asarray(x, dtype=float)
            if "lat" not in cache:  # independent of x: once per state
                a = ttft_atoms()[None, :, :, None] + (o1[None, :, None, None] * lat_nodes.T[None, :, None, :])
                sd = np.maximum(o1 * sd_fast, 1e-7)[None, :, None, None]  # [1,K,Q,H], [1,K,1,1]
                cache["lat"] = (a, sd)
                # Points at or beyond these have every z <= -12.5 or >= 12.5 (a +- 13 sd rounded:
                # the rounding is far below 0.5 sd where sd > 1e-12 x |a|): every term there is
                # exactly 0.0 or 1.0 (`_phi`'s exact tails), so those rows are all the same row.
                bounds = None
                if _LAT_SAME_ROWS and np.isfinite(a).all() and np.isfinite(sd).all():
                    scale = max(float(np.abs(a).max()), 1.0)
                    if float(sd.min()) > 1e-12 * scale:
                        bounds = (float((a - 13.0 * sd).min()), float((a + 13.0 * sd).max()))
                cache["lat_bounds"] = bounds
            bounds = cache["lat_bounds"]
            if bounds is not None and len(x) >= 4:
                return _same_rows(x, x <= bounds[0], x >= bounds[1], latency_rows)
            return latency_rows(x)

        def latency_rows(x):  # x: [X] -> [X, K]
            x = x[:, None, None, None]  # [X,1,1,1]
            a, sd = cache["lat"]
            z = x - a
            z /= sd
            f = _phi(z)
            f *= _LAT_W[None, None, :, None]  # in place: (f x level weights) x node weights, as before
            f *= lat_w.T[None, :, None, :]
            return f.sum(axis=(2, 3))

        top_ttft = float(tp.ownn.max() + tp.cur_d.max() + tp.own0.max()) + _longest_wait(tp) * 40.0 \
            if need_ttft else 0.0
        top_ttft += max((float(h[2].max()) for h in held if np.isfinite(h[2]).all()), default=0.0) if need_ttft else 0.0
        top_tpot = float(tau_life.max() + 8.0 * sd_fast.max()) + 1e-6 if need_tpot else 0.0
        out = {"ttft_ms": (ttft, top_ttft), "tpot_ms": (tpot, top_tpot),
               "latency_ms": (latency, top_ttft + float(o1.max()) * top_tpot)}
        return {m: out[m] for m in need}

    # -- public
    def at_rate(self, rate_per_s: float, percentiles: Sequence[int] = PERCENTILES) -> LoadPercentiles:
        rate = _check_rate(rate_per_s)
        bad = [p for p in percentiles if p not in PERCENTILES]
        if bad:
            raise ValueError(f"percentiles must be among {', '.join(map(str, PERCENTILES))}, got {bad[0]}")
        N = self.slots
        sat = self.saturation_rate()
        if N < 1 or rate >= sat:
            inf = {p: math.inf for p in percentiles}
            return LoadPercentiles(rate, rate / sat if sat > 0 else math.inf, sat, float(N), N, 1.0, inf, inf, inf)
        st = self._state(max(rate, 1e-9 * sat))
        cdfs = self._cdfs(st)
        values = {m: {p: _mixture_quantile(cdfs[m], self.share, p / 100.0) * 1e3 for p in percentiles}
                  for m in METRICS}
        wait = st.wait + float(np.dot(self.share, st.room_k)) if st.room_k.any() else st.wait
        return LoadPercentiles(rate, rate / sat, sat, st.mean_batch, N, wait, values["ttft_ms"],
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

    def margin_and_gap(self, rate: float, percentile: int, bounds_ms: Mapping[str, float]) -> tuple[float, float]:
        """`margin` and, from the same state, the gap min over the bounds of
        bound / percentile value - 1: zero at the same edge, but smooth in the rate where
        the margin is flat (a CDF at 1 well below the edge) and close to linear near the
        edge (a percentile grows about as 1 / (saturation - rate) there), so a secant on it
        homes in on the edge in a few steps. -1 at or beyond saturation."""
        sat = self.saturation_rate()
        if self.slots < 1 or rate >= sat:
            return -1.0, -1.0
        st = self._state(max(rate, 1e-9 * sat))
        cdfs = self._cdfs(st, tuple(bounds_ms))
        p = percentile / 100.0
        margin = min(float(np.dot(cdfs[m][0](np.array([b / 1e3]))[0], self.share)) - p for m, b in bounds_ms.items())
        gap = min(b / 1e3 / max(_quantile_near(cdfs[m], self.share, p, b / 1e3), 1e-300) - 1.0
                  for m, b in bounds_ms.items())
        return margin, gap

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
    room_k: np.ndarray  # [K] each class's chance to wait for room in the KV cache beyond `wait` (`_class_waits`)
    room_theta_k: np.ndarray  # [K] its mean wait then

    def tau(self, n):
        return np.interp(n, self.grid, self.tau_grid)


@dataclass(frozen=True)
class _TtftParts:
    cur_d: np.ndarray  # [C] lengths of the step in progress
    cur_w: np.ndarray  # [C] their length-biased weights
    same: np.ndarray  # [C, A] co-arrival weights given the step in progress (A: with `_split_ahead`'s copies)
    own0: np.ndarray  # [K, C, A] time to own first token from the next step's start, no wait
    wn: np.ndarray  # [A] co-admission weights when the batch is full
    ownn: np.ndarray  # [K, A] same at batch N
    wait: float
    theta: float
    idle: float = 0.0  # an arrival finds the replica empty: its step starts at once, alone
    own_idle: np.ndarray | None = None  # [K] its TTFT then
    room: np.ndarray | None = None  # [K] the chance to wait for room in the KV cache beyond `wait`
    room_theta: np.ndarray | None = None  # [K] its mean wait
    # [C, Z] bursty arrivals: the chance that at most a fraction _ELAPSED_Z of the step in
    # progress is left (None: uniform)
    elapsed: np.ndarray | None = None

    @property
    def pair_w(self) -> np.ndarray:
        return self.cur_w[:, None] * self.same


_OWN_LAG_STEPS = 1.0
# Bursty arrivals' view of the step in progress (`_bursty_elapsed`): the fractions of it left
# on which its law is tabled (read between them linearly), and the positions over the step
# before it at which a content's last prompt may have come (`_landings`).
_ELAPSED_Z = np.linspace(0.0, 1.0, 33)
_LAG_POSITIONS = (np.arange(8) + 0.5) / 8.0
# The TTFT's part without a wait, and a held-back class's later TTFT over its wait atoms (`_cdfs`),
# are evaluated in chunks of points of about this many [points, K, C, A] elements (a row depends
# on its own point only).
_HELD_CHUNK_ELEMENTS = 2_000_000
_STAY_POSITIONS = (np.arange(16) + 0.5) / 16.0

# Cornish-Fisher nodes of standardised skewness gamma: x = (xi + c (xi^2 - 1)) / sqrt(1 + 2 c^2)
# keeps the normal's mean 0 and variance 1 under Gauss-Hermite weights and has skewness
# (6 c + 8 c^3) / (1 + 2 c^2)^1.5, which rises monotonically to 2^1.5 as c grows: c is read
# from that curve. Skewness beyond _MAX_SKEW (a window of well under one long prompt) is
# held there: the family has no more.
_MAX_SKEW = 2.5
_CF_C = np.linspace(-3.0, 3.0, 601)
_CF_SKEW = (6.0 * _CF_C + 8.0 * _CF_C ** 3) / (1.0 + 2.0 * _CF_C ** 2) ** 1.5


# Bins of the KV cache on which the running claims' total is counted (`_cache_law`):
# the claims' means are kept (each split between two bins); a bin is 0.1 % of the cache.
_CLAIM_BINS = 1024

# Equal-weight levels of [0, 1] (`_held_back`'s wait atoms).
_HELD_ATOMS = (np.arange(24) + 0.5) / 24


def _table_read(table: np.ndarray, u: np.ndarray) -> np.ndarray:
    """table [C, Z] (rows on `_ELAPSED_Z`) read linearly at u [..., C, A] in [0, 1], row by
    entry (axis -2): exactly table[:, 0] at 0 and table[:, -1] at 1."""
    last = table.shape[1] - 1
    frac = np.multiply(u, last)
    with np.errstate(invalid="ignore"):  # (NaN stays NaN below: its index is clipped)
        lo = frac.astype(np.intp)
    np.minimum(lo, last - 1, out=lo)
    frac -= lo
    # flat indices into the table, the entry's row offset added (np.take on a flat array is
    # several times faster than indexing [rows, lo] with broadcast index arrays); the same
    # operations as table[lo] * (1 - frac) + table[lo + 1] * frac, in place
    lo += (np.arange(table.shape[0]) * table.shape[1])[:, None]
    flat = table.ravel()
    out = np.take(flat, lo, mode="clip")
    lo += 1
    upper = np.take(flat, lo, mode="clip")
    upper *= frac
    np.subtract(1.0, frac, out=frac)
    out *= frac
    out += upper
    return out


def _longest_wait(tp: _TtftParts) -> float:
    """The longest mean wait of the TTFT's waited parts (its support's scale)."""
    if tp.room is None or not tp.room.any():
        return tp.theta
    return max(tp.theta, float(tp.room_theta[tp.room > 0].max()))


def _queue_ratio(rho: float, cv: float) -> float:
    """The geometric ratio of the queue beyond N busy slots, GI/M/N with gamma-renewal
    arrivals of CV cv at load rho: the root sigma in (0, 1) of sigma = A*(N mu (1 - sigma)),
    A* the gaps' Laplace transform, (1 + (1 - sigma) / (k rho))^-k with shape k = 1 / cv^2
    (Poisson: sigma = rho)."""
    if abs(cv - 1.0) < 1e-9 or rho <= 0.0:
        return rho
    k = 1.0 / max(cv * cv, 1e-6)

    def f(x):
        return x - (1.0 + (1.0 - x) / (k * rho)) ** -k

    lo, hi = 0.0, 1.0 - 1e-12
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if f(mid) < 0.0:
            lo = mid
        else:
            hi = mid
    return min(0.5 * (lo + hi), 1.0 - 1e-9)


def _illinois(f, lo: float, f_lo: float, hi: float, f_hi: float, scale: float, iterations: int):
    """The root of a falling f in [lo, hi] (f_lo > 0 > f_hi) by Illinois steps (regula falsi
    that halves the value kept at a stale end): (x, its scale) where |f(x)| <= 1e-4 x scale
    or the bracket is 1e-9 wide. f returns (value, scale): the tolerance is relative to the
    scale, the saturation searches' rate. `scale`: what to return if no step runs."""
    x, side = hi, 0  # side: which end the last step replaced
    for _ in range(iterations):
        x = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        fx, scale = f(x)
        if abs(fx) <= 1e-4 * max(scale, 1e-12) or hi - lo <= 1e-9 * hi:
            break
        if fx > 0:
            lo, f_lo = x, fx
            if side > 0:
                f_hi *= 0.5
            side = 1
        else:
            hi, f_hi = x, fx
            if side < 0:
                f_lo *= 0.5
            side = -1
    return x, scale


def _skewed_nodes(xi: np.ndarray, gamma) -> np.ndarray:
    """Gauss-Hermite nodes `xi` turned into nodes of a unit-variance law of skewness `gamma`."""
    g = np.clip(np.nan_to_num(np.asarray(gamma, dtype=float)), -_MAX_SKEW, _MAX_SKEW)
    c = np.interp(g, _CF_SKEW, _CF_C)
    return (xi + c * (xi * xi - 1.0)) / np.sqrt(1.0 + 2.0 * c * c)


@lru_cache(maxsize=1024)
def _batch_grid(slots: int) -> np.ndarray:
    """The batches at which `_state` solves the mean step: up to 8, geometric in 1..N.
    Depends on N alone, so kept (read-only: every state at that N shares it)."""
    grid = _sorted_unique(np.round(np.geomspace(1, slots, min(slots, 8)))) if slots > 1 else np.array([1.0])
    grid.flags.writeable = False
    return grid


_GH_PAIR_WEIGHTS = (_GH_WEIGHTS[:, None] * _GH_WEIGHTS[None, :]).reshape(-1)  # the decode windows' node pairs
# The discrete windows' atoms cover counts up to _ATOMS_MAX arrivals (`atoms`: a size
# group); from _ATOMS_BLEND on, the TPOT's window law moves quantile by quantile to the
# skewed normal's, all of the way at _ATOMS_MAX.
_ATOMS_MAX = 48.0
_ATOMS_BLEND = 36.0


def _quantile_blend(a: np.ndarray, wa: np.ndarray, b: np.ndarray, wb: np.ndarray, t: float):
    """The law whose every quantile is (1 - t) x a's + t x b's, per column: nodes [H, K] and
    weights [H, K] (a zero weight pads a column). Exact for discrete laws: the quantile
    functions are steps, so the cells between the union of both laws' cumulative weights
    carry one value each; at t = 0 it is a's law, at t = 1 b's (cells split, values kept)."""
    K = a.shape[1]
    cols = []
    for k in range(K):
        steps = []
        for nodes, w in ((a, wa), (b, wb)):
            x = nodes[:, k]
            u = (w[:, k] if w.ndim == 2 else w).astype(float)
            order = np.argsort(x, kind="stable")
            x, u = x[order], u[order]
            cum = np.cumsum(u) / u.sum()
            cum[-1] = 1.0  # rounding may end it above 1, and the top cell would be dropped below
            steps.append((x, cum))
        edges = np.unique(np.concatenate([[0.0], steps[0][1], steps[1][1]]))
        edges = edges[edges <= 1.0]
        mids, widths = 0.5 * (edges[1:] + edges[:-1]), np.diff(edges)
        keep = widths > 0
        mids, widths = mids[keep], widths[keep]
        qa = steps[0][0][np.minimum(np.searchsorted(steps[0][1], mids), len(steps[0][0]) - 1)]
        qb = steps[1][0][np.minimum(np.searchsorted(steps[1][1], mids), len(steps[1][0]) - 1)]
        cols.append(((1.0 - t) * qa + t * qb, widths))
    n = max(len(v) for v, _ in cols)
    nodes = np.stack([np.pad(v, (0, n - len(v)), mode="edge") for v, _ in cols], axis=1)
    weights = np.stack([np.pad(w, (0, n - len(w))) for _, w in cols], axis=1)
    return nodes, weights
_GH_PAIR_WEIGHTS.flags.writeable = False


def _same_rows(x: np.ndarray, zero: np.ndarray, one: np.ndarray, rows):
    """rows(x) [X, K], evaluated once for the points marked `zero` and once for those marked
    `one` (points whose rows are known to be the same row: a row depends on its own point
    only) and at every other point."""
    rest = np.nonzero(~(zero | one))[0]
    first_zero = int(np.argmax(zero)) if zero.any() else None
    first_one = int(np.argmax(one)) if one.any() else None
    pick = [rest] + [np.array([i]) for i in (first_zero, first_one) if i is not None]
    idx = np.concatenate(pick)
    if len(idx) >= len(x):
        return rows(x)
    part = rows(x[idx])
    out = np.empty((len(x), part.shape[1]))
    out[rest] = part[:len(rest)]
    j = len(rest)
    if first_zero is not None:
        out[zero] = part[j]
        j += 1
    if first_one is not None:
        out[one] = part[j]
    return out


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """np.unique of a 1-D float array, the same values: without NumPy 2's np.unique, which
    imports numpy.ma (~15 ms of a cold one-service CLI run) to check for a masked array."""
    values = np.sort(np.asarray(values, dtype=float).ravel())
    if len(values) < 2:
        return values
    return values[np.concatenate(([True], values[1:] != values[:-1]))]


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
