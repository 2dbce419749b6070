"""The queueing model's fast paths give the plain computation's numbers bit for bit.

The "at load" evaluation of a plan's assignments (`ReplicaLoadModel.at_rate`) runs on
several shortcuts that must not move a single bit of what a plan reports:

* `_phi` evaluates its formula only off the exact tails (|z| >= 12) of large arrays;
* `_linspace` is np.linspace(lo, hi, 33) without numpy's dispatch;
* `_mixture_quantile` takes the CDF at its final bracket from the last grid's rows (a
  row depends on its own point only) instead of evaluating it again, and checks that
  its upper end reaches p on the first grid's last row;
* `_superstep_tokens` evaluates the last and the full steps in one `StepCost.seconds`
  call, `_expected_superstep` the atoms and the tail in one `_superstep_tokens` call,
  and `slot_seconds` every class's prefill step in one;
* `_ttft_parts` computes the co-arrival rows once per distinct step length and
  `_compress_entries` merges entries with one matrix product (checked against the
  groups' weighted means written out, not bit for bit);
* `_ttft_parts` keeps the super-steps' last and full steps from their evaluation instead
  of evaluating them again, and `_own_done` evaluates only the side (one step, or
  chunked) that its np.where picks from;
* the TTFT CDF divides by the step lengths spelled out along the atoms (a contiguous
  array) rather than broadcast;
* the latency CDF and the latency's 500-point TTFT grid evaluate once the rows whose
  every term is exactly 0 or exactly 1 (`_same_rows`);
* `_expected_superstep` keeps the atoms' super-steps per batch across calls and, like
  `_saturation_rate`'s slot time of one batch, computes the tail's in Python floats for
  dense steps (the same IEEE operations, element by element).

Each is checked against the plain computation (the code before the shortcut, kept here
as the reference) on randomised inputs, and the whole `at_rate` / `saturation_rate`
with every reference patched in against the fast code, compared by `repr` (every bit
of every float).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from solver.perf.queueing import model as model_mod
from solver.perf.queueing import numerics
from solver.perf.queueing.contents import _count_pmf
from solver.perf.queueing.model import ReplicaLoadModel
from solver.perf.queueing.physics import Replica, StepCost, TrafficClass


# ---------------------------------------------------------------- the plain computations
def _phi_plain(z):
    return numerics._phi_formula(np.asarray(z, dtype=float))


def _linspace_plain(lo, hi):
    return np.linspace(lo, hi, 33)


def _mixture_quantile_plain(dist, share, p):
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


def _superstep_tokens_plain(self, dec, ctx, tokens, pairs, outer: bool = False):
    dec = np.asarray(dec, dtype=float)
    room = np.maximum(self.budget - dec, 1.0)
    if outer and np.ndim(dec):
        dec, ctx, room = dec[..., None], np.asarray(ctx)[..., None], room[..., None]
    k = np.maximum(np.ceil(tokens / room), 1.0)
    last = tokens - (k - 1.0) * room
    per_token_pairs = np.where(tokens > 0, pairs / np.maximum(tokens, 1e-9), 0.0)
    seconds = self.step.seconds(dec, ctx, last, per_token_pairs * last)
    if (k > 1.0).any():
        seconds = (k - 1.0) * self.step.seconds(dec, ctx, room, per_token_pairs * room) + seconds
    return seconds, k


def _expected_superstep_plain(self, dec, ctx, means):
    means = np.asarray(means, dtype=float)
    at = self.atoms(float(means.max()))
    pmf = _count_pmf(means, self.cv, at.j_max, lump_tail=False)
    w = pmf[:, at.count.astype(int)] * at.comp
    d, k = _superstep_tokens_plain(self, dec, ctx, at.tokens, at.pairs, outer=True)
    tail = np.maximum(1.0 - pmf.sum(axis=1), 0.0)
    j_in = pmf @ np.arange(at.j_max + 1, dtype=float)
    j_tail = np.where(tail > 1e-12, np.maximum(means - j_in, 0.0) / np.maximum(tail, 1e-300), at.j_max + 1.0)
    dt, kt = _superstep_tokens_plain(self, dec, ctx, j_tail * self.mean_prompt, j_tail * self.mean_pairs)
    empty = _count_pmf(means, self.cv, at.j_max)[:, 0]  # its own evaluation of the count law
    return (w * d).sum(axis=-1) + tail * dt, (w * k).sum(axis=-1) + tail * kt, empty


def _slot_seconds_plain(self, n, rate, tau=None):
    n = np.asarray(n, dtype=float)
    tau = self.mean_step(n, rate) if tau is None else tau
    finite = np.isfinite(tau)
    if not finite.all():
        out = np.full(len(n), np.inf)
        if finite.any():
            out[finite] = _slot_seconds_plain(self, n[finite], rate, tau[finite])
        return out
    dec = self._decodes(n)
    ctx = dec * self.context_per_decode
    with_me = rate * tau * self.mean_prompt
    first = np.zeros_like(n)
    for k in range(len(self.share)):
        sec, _ = _superstep_tokens_plain(self, dec, ctx, self.prompt[k] + with_me,
                                         self.prompt[k] ** 2 / 2 + rate * tau * self.mean_pairs)
        first += self.share[k] * sec
    return self.decode_steps_per_request * tau + first


def _ttft_parts_plain(self, st):
    """`_ttft_parts` evaluating the super-steps' last and full steps again."""
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
    # Smooth arrivals keep the Palm count; bursty ones the stationary chain (their
    # clusters' landing is weighted below).
    bursty = self.cv > 1.0 + 1e-6
    if self.cv < 1.0 - 1e-6:
        cur = cur @ self._weights(rate * d, at, palm=True)
    else:
        cur = cur @ trans
    # Content beyond the token budget runs in several steps; an arrival lands in one of
    # them (length-biased) and queues behind what is left of the content after it.
    per_pair = np.where(at.tokens > 0, at.pairs / np.maximum(at.tokens, 1e-9), 0.0)
    full = self.step.seconds(dec0, ctx0, room, per_pair * room)
    last_tokens = at.tokens - (k - 1.0) * room
    last = self.step.seconds(dec0, ctx0, last_tokens, per_pair * last_tokens)
    # The last (or only) step of each content: nothing left behind it; then, atom by
    # atom, its full steps i = 1..k-1 with content left over behind them.
    multi = np.nonzero(k > 1)[0]
    reps = (k[multi] - 1.0).astype(int)
    src = np.repeat(multi, reps)
    i = np.arange(len(src)) - np.repeat(np.cumsum(reps) - reps, reps) + 1
    sub_d = np.concatenate([last, full[src]])
    sub_w = np.concatenate([cur * last, cur[src] * full[src]])
    sub_left = np.concatenate([np.zeros_like(last), at.tokens[src] - i * room])
    sub_content = np.concatenate([at.tokens > 0.0, np.ones(len(src), dtype=bool)])
    sub_after = np.concatenate([np.maximum(k - 1.0, 0.0) * full, (i - 1) * full[src]])
    sub_w /= sub_w.sum()
    # An arrival that finds the replica empty: out of the entries without content.
    bare = np.concatenate([at.tokens <= 0.0, np.zeros(len(sub_w) - len(last), dtype=bool)])
    idle, own_idle = self._idle_arrival(st)
    if bursty:
        sub_w = self._bursty_landing(sub_d, sub_w, sub_content, sub_after, t_bar, rate, idle)
    bare_w = float(sub_w[bare].sum())
    idle = min(idle, bare_w)
    if idle > 0.0:
        sub_w[bare] *= (bare_w - idle) / bare_w
    lengths, length_of = np.unique(sub_d, return_inverse=True)
    same = self._weights(rate * lengths, at, palm=True)  # others arriving in a step of each length
    content = sub_content.astype(float)
    cur_d, cur_w, cur_left, same, merged = model_mod._compress_entries(
        sub_d, sub_w, sub_left, same, rows_of=length_of, extra=np.stack([content, content * sub_after], axis=1))
    elapsed = None
    if bursty:
        after = merged[:, 1] / np.maximum(merged[:, 0], 1e-300)
        elapsed = self._bursty_elapsed(cur_d, merged[:, 0], after, t_bar, rate)
    co, same = model_mod._compress_atoms(at, same, cur_w)
    co, same, ahead = self._split_ahead(co, same, cur_left, dec0)  # where the place among co-arrivals decides a step
    own0 = self._own_done(dec0, ctx0, co, cur_left, ahead)  # [classes, entries, atoms]
    # Waited: admitted at a step end with the batch full, prefilled in the next step.
    decn = float(self._decodes(st.slots))
    ctxn = decn * self.context_per_decode
    wn = self._weights(np.array([rate * float(st.tau(st.slots))]), at)
    con, wn = model_mod._compress_atoms(at, wn, np.ones(1))
    con, wn, ahead_n = self._split_ahead(con, wn, np.zeros(1), decn)
    wn = wn[0]
    ownn = self._own_done(decn, ctxn, con, np.zeros(1), ahead_n)[:, 0, :]
    # A serving engine's fixed time per request (API server, tokenizer) shifts every TTFT.
    own0, ownn = own0 + self.replica.request_overhead_s, ownn + self.replica.request_overhead_s
    return model_mod._TtftParts(cur_d, cur_w, same, own0, wn, ownn, st.wait, st.theta, idle,
                                own_idle + self.replica.request_overhead_s, st.room_k, st.room_theta_k, elapsed)


def _own_done_plain(self, dec, ctx, at, left, ahead_share=None):
    room = max(self.budget - dec, 1.0)
    p = self.prompt[:, None, None]
    lft = np.asarray(left, dtype=float)[None, :, None]
    tokens = at.tokens[None, None, :]
    total = lft + p + tokens
    pairs = p * p / 2 + at.pairs[None, None, :] + lft * (p + tokens)
    one = self.step.seconds(dec, ctx, total, pairs)
    ahead = lft + p + (tokens / 2 if ahead_share is None else tokens * ahead_share[None, None, :])
    steps = np.maximum(np.ceil(ahead / room), 1.0)
    frac = pairs / np.maximum(total, 1e-9)
    last = np.clip(total - (steps - 1.0) * room, 1.0, room)
    many = (steps - 1.0) * self.step.seconds(dec, ctx, room, frac * room) + self.step.seconds(dec, ctx, last, frac * last)
    return np.where(total <= room, one, many)


@pytest.fixture
def plain(monkeypatch):
    """Every fast path replaced by its plain computation."""
    monkeypatch.setattr(numerics, "_linspace", _linspace_plain)
    monkeypatch.setattr(model_mod, "_mixture_quantile", _mixture_quantile_plain)
    monkeypatch.setattr(model_mod, "_phi", _phi_plain)
    monkeypatch.setattr(ReplicaLoadModel, "_superstep_tokens", _superstep_tokens_plain)
    monkeypatch.setattr(ReplicaLoadModel, "_expected_superstep", _expected_superstep_plain)
    monkeypatch.setattr(ReplicaLoadModel, "slot_seconds", _slot_seconds_plain)
    monkeypatch.setattr(ReplicaLoadModel, "_ttft_parts", _ttft_parts_plain)
    monkeypatch.setattr(ReplicaLoadModel, "_own_done", _own_done_plain)
    monkeypatch.setattr(model_mod, "_TTFT_SAME_ROWS", False)
    monkeypatch.setattr(model_mod, "_LAT_SAME_ROWS", False)


# ---------------------------------------------------------------- random inputs
def _random_replica(rng) -> Replica:
    moe = rng.random() < 0.4
    step = StepCost(weights_s=float(rng.uniform(2e-3, 3e-2)),
                    expert_weights_s=float(rng.uniform(1e-3, 2e-2)) if moe else 0.0,
                    expert_fraction=float(rng.uniform(0.03, 0.3)) if moe else 0.0,
                    gemm_s_per_token=float(rng.uniform(2e-6, 6e-5)),
                    lm_head_s_per_decode=float(rng.uniform(0.0, 2e-6)),
                    s_per_token=float(rng.uniform(0.0, 2e-6)),
                    s_per_context_token=float(rng.uniform(0.0, 2e-8)),
                    s_per_pair=float(rng.uniform(0.0, 2e-10)),
                    fixed_s=float(rng.uniform(0.0, 3e-3)), decode_fixed_s=float(rng.uniform(0.0, 2e-3)),
                    s_per_sampled=float(rng.choice([0.0, rng.uniform(1e-6, 3e-5)])))
    return Replica(step, int(rng.integers(2, 512)), float(rng.uniform(2e3, 2e6)), int(rng.choice([512, 2048, 8192, 16384])),
                   float(rng.choice([0.0, rng.uniform(0.0, 0.05)])))


def _random_classes(rng) -> tuple[TrafficClass, ...]:
    k = int(rng.integers(1, 4))
    return tuple(TrafficClass(float(rng.uniform(0.05, 1.0)), int(rng.choice([0, rng.integers(1, 12000)])),
                              int(rng.integers(1, 1500))) for _ in range(k))


def _cases(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield _random_replica(rng), _random_classes(rng), float(rng.choice([0.5, 1.0, 1.0, 2.0])), rng


def _evaluate(replica, classes, cv, rng_state):
    """Saturation and the percentiles at three rates (below, near and at saturation)."""
    rng = np.random.default_rng(rng_state)
    model = ReplicaLoadModel(replica, classes, cv)
    sat = model.saturation_rate()
    out = [repr(sat)]
    for share in (rng.uniform(0.05, 0.6), rng.uniform(0.6, 0.97), 1.0):
        out.append(repr(model.at_rate(share * sat if sat > 0 else 1.0)))
    return out


# ---------------------------------------------------------------- the checks
def test_phi_sparse_is_the_formula_bit_for_bit():
    rng = np.random.default_rng(7)
    for size in (1, 100, 2047, 2048, 5000, 40000):
        for spread in (1.0, 20.0, 200.0, 1e6):
            z = rng.normal(0.0, spread, size)
            z[rng.random(size) < 0.01] = rng.choice([12.0, -12.0, 11.999999999999998, -11.999999999999998,
                                                     0.0, -0.0, np.inf, -np.inf, np.nan])
            got, want = numerics._phi(z), _phi_plain(z)
            assert got.dtype == want.dtype and got.shape == want.shape
            # NaN in, NaN out - its sign bit follows numpy's loop (SIMD or not), not the value.
            nan = np.isnan(want)
            assert (np.isnan(got) == nan).all()
            assert got[~nan].tobytes() == want[~nan].tobytes(), (size, spread)
    z = rng.normal(0.0, 50.0, (33, 2, 27, 16))  # the latency CDF's shape
    assert numerics._phi(z).tobytes() == _phi_plain(z).tobytes()


def test_phi_tails_beyond_the_cut_are_exact():
    z = np.linspace(numerics._PHI_EXACT_BEYOND, 60.0, 100_001)
    assert (_phi_plain(z) == 1.0).all() and (_phi_plain(-z) == 0.0).all()


def test_linspace_is_numpys_bit_for_bit():
    rng = np.random.default_rng(3)
    special = [0.0, 5e-324, 1e-310, 1e-300, 1.0, np.nextafter(1.0, 2.0), 1e300]
    pairs = [(a, b) for a in special for b in special]
    pairs += [tuple(sorted(rng.random(2) * 10.0 ** rng.integers(-12, 6))) for _ in range(20_000)]
    pairs += [(np.float64(a), np.float64(b)) for a, b in pairs[-100:]]
    for lo, hi in pairs:
        assert numerics._linspace(lo, hi).tobytes() == _linspace_plain(lo, hi).tobytes(), (lo, hi)


def test_superstep_parts_match_the_plain_ones_bit_for_bit():
    for replica, classes, cv, rng in _cases(11, 60):
        model = ReplicaLoadModel(replica, classes, cv)
        n = np.sort(rng.uniform(1.0, max(model.slots, 2), int(rng.integers(1, 9))))
        dec = model._decodes(n)
        ctx = dec * model.context_per_decode
        means = rng.uniform(0.0, 60.0, len(n)) * rng.choice([0.01, 1.0, 5.0])
        got, want = model._expected_superstep(dec, ctx, means), _expected_superstep_plain(model, dec, ctx, means)
        assert len(got) == len(want) == 3
        for g, w in zip(got, want):
            assert g.tobytes() == w.tobytes()
        tau = model.mean_step(n, 0.0) * rng.uniform(1.0, 3.0, len(n))
        rate = float(rng.uniform(0.0, 50.0))
        assert model.slot_seconds(n, rate, tau).tobytes() == _slot_seconds_plain(model, n, rate, tau).tobytes()
        tokens = rng.uniform(0.0, 4.0, len(n)) * model.budget  # spills past the token budget too
        pairs = tokens * rng.uniform(0.0, 3000.0, len(n))
        for args in ((dec, ctx, tokens, pairs), (float(dec[0]), float(ctx[0]), tokens, pairs)):
            for got, want in zip(model._superstep_tokens(*args), _superstep_tokens_plain(model, *args)):
                assert np.shape(got) == np.shape(want) and np.asarray(got).tobytes() == np.asarray(want).tobytes()


def _loaded_states(seed: int, n: int):
    """(model, its state at a random load below saturation, rng) for the random replicas
    that have a slot and a positive saturation rate."""
    for replica, classes, cv, rng in _cases(seed, n):
        model = ReplicaLoadModel(replica, classes, cv)
        sat = model.saturation_rate()
        if model.slots < 1 or sat <= 0:
            continue
        yield model, model._state(float(rng.uniform(0.05, 0.97)) * sat), rng


def test_ttft_parts_match_the_plain_ones_bit_for_bit():
    """Every part of the TTFT, at rates up to saturation (contents that spill beyond the
    token budget included: the random replicas' budgets go down to 512 tokens)."""
    checked = 0
    for model, st, _ in _loaded_states(5, 40):
        got, want = model._ttft_parts(st), _ttft_parts_plain(model, st)
        for name in ("cur_d", "cur_w", "same", "own0", "wn", "ownn", "wait", "theta", "idle", "own_idle", "room",
                     "room_theta", "elapsed"):
            a, b = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), name
        checked += 1
    assert checked >= 20


def test_own_done_matches_the_plain_one_bit_for_bit():
    """Contents that all fit in one step, that all spill and a mix of both."""
    seen = set()
    for replica, classes, cv, rng in _cases(17, 60):
        model = ReplicaLoadModel(replica, classes, cv)
        dec = float(rng.uniform(0.0, model.budget * 1.2))  # room clamps at 1 token past the budget
        ctx = dec * model.context_per_decode
        at = model.atoms(float(rng.uniform(0.0, 30.0)))
        left = rng.uniform(0.0, 2.0, int(rng.integers(1, 11))) * model.budget * rng.choice([0.0, 0.01, 1.0])
        got, want = model._own_done(dec, ctx, at, left), _own_done_plain(model, dec, ctx, at, left)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
        share = rng.choice([0.25, 0.5, 0.75], size=len(at.tokens))
        got, want = model._own_done(dec, ctx, at, left, share), _own_done_plain(model, dec, ctx, at, left, share)
        assert got.shape == want.shape and got.tobytes() == want.tobytes()
        room = max(model.budget - dec, 1.0)
        fits = (left[None, :, None] + model.prompt[:, None, None] + at.tokens[None, None, :]) <= room
        seen.add("all" if fits.all() else "none" if not fits.any() else "some")
    assert seen == {"all", "none", "some"}


def _ttft_cdf_plain(tp, x):
    """The TTFT CDF of `_cdfs` as a formula: np.clip((x - s) / d, 0, 1) x w, summed."""
    x = np.asarray(x, dtype=float)[:, None, None, None]
    left = np.clip((x - tp.own0[None]) / tp.cur_d[None, None, :, None], 0.0, 1.0)
    if tp.elapsed is not None:  # bursty arrivals: the tabled law of the step left, read linearly
        z = left * (tp.elapsed.shape[1] - 1)
        lo = np.minimum(np.floor(z).astype(int), tp.elapsed.shape[1] - 2)
        entry = np.arange(len(tp.cur_d))[:, None]
        left = tp.elapsed[entry, lo] * (1.0 - (z - lo)) + tp.elapsed[entry, lo + 1] * (z - lo)
    nowait = (left * (tp.cur_w[:, None] * tp.same)[None, None]).sum(axis=(2, 3))
    if tp.idle > 0.0:  # an arrival that finds the replica empty: its own steps alone
        nowait = nowait + tp.idle * (x[:, :, 0, 0] >= tp.own_idle[None, :])
    xe = x[:, :, 0, :]
    sn = tp.ownn[None]
    gap = np.maximum(xe - sn, 0.0)  # (xe - sn where np.where reads it; no overflow where it does not)
    waited = (tp.wn * np.where(xe > sn, -np.expm1(-gap / max(tp.theta, 1e-12)), 0.0)).sum(axis=-1)
    if tp.room is None or not tp.room.any():
        return (1.0 - tp.wait) * nowait + tp.wait * waited
    room_theta = np.maximum(tp.room_theta, 1e-12)[None, :, None]  # a wait for room in the KV cache, per class
    for_room = np.minimum((tp.wn * np.where(xe > sn, -np.expm1(-gap / room_theta), 0.0)).sum(axis=-1), nowait)
    return (1.0 - tp.wait - tp.room) * nowait + tp.wait * waited + tp.room * for_room


def test_ttft_cdf_matches_its_formula_bit_for_bit():
    """On the latency's 500-point grid and on 33-point grids and single points."""
    checked = 0
    for model, st, rng in _loaded_states(23, 30):
        cdf, top = model._cdfs(st, ("ttft_ms",))["ttft_ms"]
        tp = model._ttft_parts(st)
        for xs in (np.linspace(0.0, top, 500), numerics._linspace(0.0, top * float(rng.uniform(0.01, 1.0))),
                   np.array([top * float(rng.uniform(0.0, 1.0))])):
            assert cdf(xs).tobytes() == _ttft_cdf_plain(tp, xs).tobytes()
        checked += 1
    assert checked >= 15


CASES = list(range(24))


@pytest.fixture(scope="module")
def fast_results():
    return {i: _evaluate(r, c, cv, i) for i, (r, c, cv, _) in enumerate(_cases(2026, len(CASES)))}


def test_at_rate_and_saturation_match_the_plain_computation(plain, fast_results):
    """The whole model with every plain computation patched in: the same reprs."""
    for i, (replica, classes, cv, _) in enumerate(_cases(2026, len(CASES))):
        assert _evaluate(replica, classes, cv, i) == fast_results[i], i


def test_cdf_rows_depend_on_their_own_point_only():
    """What `_mixture_quantile` relies on: the CDFs' rows for two points, evaluated alone,
    are bit for bit those of a 33-point grid (and so is their product with the shares)."""
    for replica, classes, cv, rng in _cases(99, 30):
        classes = classes + tuple(TrafficClass(float(rng.uniform(0.05, 1.0)), int(rng.integers(0, 9000)),
                                               int(rng.integers(1, 1200))) for _ in range(int(rng.integers(0, 6))))
        model = ReplicaLoadModel(replica, classes, cv)
        sat = model.saturation_rate()
        if model.slots < 1 or sat <= 0:
            continue
        cdfs = model._cdfs(model._state(float(rng.uniform(0.05, 0.97)) * sat))
        for cdf, top in cdfs.values():
            xs = numerics._linspace(0.0, top * float(rng.uniform(0.2, 1.5)))
            rows = cdf(xs)
            for i in (1, int(rng.integers(2, 32)), 32):
                pair = cdf(np.array([xs[i - 1], xs[i]]))
                assert pair.tobytes() == rows[[i - 1, i]].tobytes()
                assert (pair @ model.share).tobytes() == (rows[[i - 1, i]] @ model.share).tobytes()
            # The grid's last point alone (`_mixture_quantile` checks hi there): the same row and dot.
            one = cdf(np.array([xs[-1]]))
            assert one.tobytes() == rows[-1:].tobytes()
            assert float(np.dot(one[0], model.share)) == float(np.dot(rows[-1], model.share))


def test_latency_cdf_with_shared_rows_matches_every_row_evaluated(monkeypatch):
    """The latency CDF's TTFT quantile atoms (rows at or below every own0: all terms 0;
    beyond every own0 + d: all 1) and the latency CDF's own rows (every z <= -12.5 or
    >= 12.5) evaluated once, against every row evaluated: on grids that reach far below
    and beyond the support, 33-point grids and single points."""
    checked = 0
    for model, st, rng in _loaded_states(31, 40):
        top = model._cdfs(st, ("latency_ms",))["latency_ms"][1]
        xs = [np.sort(rng.uniform(0.0, 1.0, 40)) * top * 2.0, numerics._linspace(0.0, top),
              numerics._linspace(top * 0.3, top * 0.31), np.array([top * 0.5])]
        for same in ((True, False), (False, True), (True, True)):
            got = []
            for flags in (same, (False, False)):
                monkeypatch.setattr(model_mod, "_TTFT_SAME_ROWS", flags[0])
                monkeypatch.setattr(model_mod, "_LAT_SAME_ROWS", flags[1])
                cdf, _ = model._cdfs(st, ("latency_ms",))["latency_ms"]
                got.append([cdf(x).tobytes() for x in xs])
            assert got[0] == got[1]
        checked += 1
    assert checked >= 20


def test_float_slot_seconds_match_the_numpy_ones_bit_for_bit():
    """`_saturation_rate`'s slot time of one batch in Python floats against `slot_seconds`
    (dense steps; MoE ones and non-finite values take numpy's path: None)."""
    checked = 0
    for replica, classes, cv, rng in _cases(41, 80):
        model = ReplicaLoadModel(replica, classes, cv)
        n = float(rng.uniform(1.0, max(model.slots, 2)))
        for _ in range(4):
            tau = float(model.mean_step(np.array([n]), 0.0)[0] * rng.uniform(1.0, 5.0))
            rate = float(rng.uniform(0.0, 80.0)) * rng.choice([0.01, 1.0, 20.0])  # prompts past the budget too
            got = model._slot_seconds_float(n, rate, tau)
            if replica.step.expert_fraction > 0:
                assert got is None
                continue
            want = float(_slot_seconds_plain(model, np.array([n]), rate, np.array([tau]))[0])
            assert got is not None and got.hex() == want.hex(), (got, want)
            checked += 1
    assert checked >= 100


def _compress_entries_naive(dur, weight, left, rows, edges):
    """Weight quantiles by length (nothing left) or by content left, each bin between
    `edges` the weighted mean of the parts of its members' weights inside it (a member's
    stretch [cum - w, cum] of the cumulative weight, cut at the edges), written out entry
    by entry; a weightless member adds nothing to any bin."""
    out = []
    bounds = [0.0, *edges, 1.0]
    for mask, key in ((left <= 0, dur), (left > 0, left)):
        idx = [i for i in range(len(dur)) if mask[i]]
        if not idx or sum(weight[i] for i in idx) <= 0:
            continue
        if len(idx) <= len(edges) + 1:
            out += [(dur[i], weight[i], left[i], rows[i]) for i in idx]
            continue
        idx.sort(key=lambda i: key[i])
        total = sum(weight[i] for i in idx)
        parts: dict[int, list[tuple[int, float]]] = {}
        cum = 0.0
        for i in idx:
            lo, cum = cum, cum + weight[i]
            for g in range(len(bounds) - 1):
                inside = min(cum / total, bounds[g + 1]) - max(lo / total, bounds[g])
                if inside > 0:
                    parts.setdefault(g, []).append((i, inside * total))
        for g in sorted(parts):
            w = sum(x for _, x in parts[g])
            if w > 0:
                out.append((sum(x * dur[i] for i, x in parts[g]) / w, w,
                            sum(x * left[i] for i, x in parts[g]) / w,
                            sum(x * rows[i] for i, x in parts[g]) / w))
    return (np.array([o[0] for o in out]), np.array([o[1] for o in out]), np.array([o[2] for o in out]),
            np.array([o[3] for o in out]))


@pytest.mark.parametrize("seed", range(6))
def test_compress_entries_is_each_groups_weighted_mean(seed):
    """The merge-matrix form of `_compress_entries` (rows by their distinct lengths too)
    against the groups' weighted means written out; zero weights and lone entries included."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 400))
    lengths = rng.uniform(0.01, 0.2, int(rng.integers(1, 30)))
    length_of = rng.integers(0, len(lengths), n)
    dur = lengths[length_of]
    weight = rng.uniform(0, 1, n) * (rng.uniform(0, 1, n) > (0.2 if seed % 2 else 0.9))  # weightless groups too
    left = np.where(rng.uniform(0, 1, n) < 0.5, 0.0, rng.uniform(1, 5000, n))
    rows_distinct = rng.uniform(0, 1, (len(lengths), 7))
    edges = numerics._ENTRY_EDGES
    want = _compress_entries_naive(dur, weight, left, rows_distinct[length_of], edges)
    for got in (numerics._compress_entries(dur, weight, left, rows_distinct[length_of]),
                numerics._compress_entries(dur, weight, left, rows_distinct, rows_of=length_of)):
        for g, w in zip(got, want):
            assert g.shape == w.shape and np.allclose(g, w, rtol=1e-12, atol=1e-15)
