"""What a step carries: counts of prompts arriving in a window and their compositions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from solver.perf.queueing.exp import exp
from solver.perf.queueing.renewal import dispersion, palm_count_pmf


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

    @property
    def count_index(self) -> np.ndarray:
        """`count` as integer indices into a count pmf (kept: the models index with it often)."""
        index = self.__dict__.get("_count_index")
        if index is None:
            index = self.count.astype(int)
            object.__setattr__(self, "_count_index", index)
        return index


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


@lru_cache(maxsize=64)
def _count_values(j_max: int) -> np.ndarray:
    """j = 0..j_max as floats (read-only: shared by every call)."""
    j = np.arange(j_max + 1, dtype=float)
    j.flags.writeable = False
    return j


@lru_cache(maxsize=64)
def _counts(j_max: int) -> tuple[np.ndarray, np.ndarray]:
    """j = 1..j_max and log j (read-only: shared by every call)."""
    j = np.arange(1, j_max + 1, dtype=float)
    logj = np.log(j)
    j.flags.writeable = False
    logj.flags.writeable = False
    return j, logj


def _dispersion(m: np.ndarray, cv: float):
    """Variance / mean of the counts. Bursty renewal arrivals (cv > 1): the exact ratio of
    gamma-renewal counts (renewal.py), above 1 even for windows of well under one arrival
    (clusters), cv^2 only over long windows. A smooth process (gamma shape > 1): cv^2."""
    if cv > 1.0:
        return dispersion(m, cv)
    return np.full_like(m, cv * cv)


def _count_pmf(means: np.ndarray, cv: float, j_max: int, lump_tail: bool = True, palm: bool = False) -> np.ndarray:
    """P(count = j), j = 0..j_max (the last holds the tail), of arrivals in windows with the
    given mean counts: Poisson (cv = 1), negative binomial (variance cv^2 x mean, bursty) or
    binomial (smoother than Poisson). `palm`: the count of the *others* in a window seen
    from one of its arrivals (size-biased less one: binomial n - 1; Poisson alike; bursty
    arrivals: the exact gamma-renewal law, renewal.palm_count_pmf, where its table reaches,
    else NB r + 1)."""
    exact = None
    if palm and cv > 1.0 + 1e-6 and lump_tail:
        exact = palm_count_pmf(np.maximum(np.asarray(means, dtype=float), 1e-12), cv, j_max)
        if not np.isnan(exact).any():
            return exact
    m = np.maximum(np.asarray(means, dtype=float), 1e-12)[..., None]
    j, logj = _counts(j_max)
    if abs(cv - 1.0) < 1e-6:  # Poisson: m >= 1e-12, no log of 0 (no error state to set: ~2 % of a call)
        log_first = -m
        log_ratios = np.log(m) - logj
    else:
        with np.errstate(divide="ignore"):  # log(0) = -inf where a binomial runs out of trials
            if cv > 1.0:
                disp = _dispersion(m, cv)
                r = m / np.maximum(disp - 1.0, 1e-9)
                q = m / (r + m)  # NB "failure" probability; mean r q / (1 - q) = m
                if palm:
                    r = r + 1.0
                log_first = r * np.log1p(-q)
                log_ratios = np.log(j - 1.0 + r) - logj + np.log(q)
            else:
                disp = _dispersion(m, cv)
                trials = np.maximum(np.ceil(m / np.maximum(1.0 - disp, 1e-3)), np.ceil(m))
                q = np.clip(m / trials, 1e-300, 1.0 - 1e-12)
                if palm:
                    trials = np.maximum(trials - 1.0, 0.0)
                log_first = trials * np.log1p(-q)
                log_ratios = np.log(np.maximum(trials - j + 1.0, 0.0)) - logj + np.log(q) - np.log1p(-q)
    # In logs: a window holding hundreds of prompts neither under- nor overflows.
    logs = np.concatenate([log_first, log_first + np.cumsum(log_ratios, axis=-1)], axis=-1)
    pmf = exp(logs, inplace=True)  # np.exp bit for bit, without its slow underflow path
    if lump_tail:
        pmf[..., -1] += np.maximum(0.0, 1.0 - pmf.sum(axis=-1))
    if exact is not None:  # windows beyond the exact table's reach: the negative binomial
        pmf = np.where(np.isnan(exact), pmf, exact)
    return pmf
