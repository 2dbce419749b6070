"""Request classes by length, from a trace's requests or from length histograms.

The rule (docs/traces.md): requests are ordered by their total length, prompt + output
tokens (what a request holds in the KV cache at its end, and roughly its work).

* The tail: requests longer than the `tail_quantile` (default 0.95) length, that is the
  length of the ceil(0.95 n)-th shortest request, form a class of their own, so that the
  longest requests are neither averaged into the rest nor dropped.
* The body, the others, is cut into `body_classes` (default 3) classes of about equal
  numbers of requests, at the lengths of the ceil(j m / k)-th shortest of its m requests;
  requests of the same length stay together, so ties can leave fewer classes.
* Each class's share is its requests over all; its prompt and output tokens are the
  class's mean prompt and mean output, rounded up: the token work of every class (and so
  of the whole trace) is kept, never understated. Shares are written to 4 decimals; the
  tail's is rounded up, and the largest body class takes the rounding.

From histograms (Prometheus, which has each length's distribution but not which prompt
went with which output) the same quantile ranges are used on each length separately, the
longest prompts paired with the longest outputs (the pairing that puts the most tokens in
the tail class); within a bucket lengths are taken as evenly spread, the open last bucket
(+Inf) as the bucket's lower bound; then the exact sum of lengths (the histogram's _sum)
is kept: the tail class takes what the body classes leave, or, where evenly spread lengths
overstate the body (wide buckets), the body classes are scaled down to fit, the tail never.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SHARE_DECIMALS = 4


@dataclass(frozen=True)
class LengthClass:
    name: str
    share: float
    prompt_tokens: int
    output_tokens: int
    requests: float  # requests in the class (a histogram's may be fractional)
    total_min: int | None = None  # shortest and longest total length in the class (trace)
    total_max: int | None = None
    tail: bool = False


def _rank_value(keys: np.ndarray, cum: np.ndarray, rank: int) -> int:
    """The key of the rank-th smallest request (1-based), given keys and cumulative counts."""
    return int(keys[np.searchsorted(cum, rank, side="left")])


def classes_from_lengths(total_keys: np.ndarray, counts: np.ndarray, prompt_sums: np.ndarray,
                         output_sums: np.ndarray, body_classes: int = 3, tail_quantile: float = 0.95
                         ) -> list[LengthClass]:
    """Classes from a table of distinct total lengths (sorted) with their requests and summed
    prompt and output tokens (the module docstring's rule)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = int(round(counts.sum()))
    cum = np.cumsum(counts)
    tail_at = _rank_value(total_keys, cum, max(1, math.ceil(tail_quantile * n - 1e-9)))
    body = total_keys <= tail_at
    m = int(round(counts[body].sum()))
    body_cum = np.cumsum(counts[body])
    edges = [_rank_value(total_keys[body], body_cum, max(1, math.ceil(j * m / body_classes - 1e-9)))
             for j in range(1, body_classes)] + [tail_at]
    groups: list[tuple[np.ndarray, bool]] = []
    low = -1
    for edge in edges:
        sel = (total_keys > low) & (total_keys <= edge)
        if sel.any():
            groups.append((sel, False))
        low = max(low, edge)
    if (~body).any():
        groups.append((~body, True))
    out = []
    for sel, tail in groups:
        c = float(counts[sel].sum())
        lo, hi = int(total_keys[sel][0]), int(total_keys[sel][-1])
        name = f"tail-over-{tail_at}-tokens" if tail else f"tokens-{lo}-{hi}"
        out.append(LengthClass(name, c / n, math.ceil(float(prompt_sums[sel].sum()) / c - 1e-9),
                               math.ceil(float(output_sums[sel].sum()) / c - 1e-9), c, lo, hi, tail))
    return rounded_shares(out)


def rounded_shares(classes: list[LengthClass]) -> list[LengthClass]:
    """Shares to SHARE_DECIMALS that add up to 1: the tail's rounded up, the largest body
    class absorbing the difference."""
    scale = 10 ** SHARE_DECIMALS
    units = [math.ceil(c.share * scale - 1e-9) if c.tail else round(c.share * scale) for c in classes]
    units = [max(u, 1) for u in units]  # every class keeps a share (the schema wants > 0)
    body = [i for i, c in enumerate(classes) if not c.tail] or [0]
    largest = max(body, key=lambda i: units[i])
    units[largest] += scale - sum(units)
    return [LengthClass(c.name, u / scale, c.prompt_tokens, c.output_tokens, c.requests, c.total_min, c.total_max,
                        c.tail) for c, u in zip(classes, units)]


def quantile_of(keys: np.ndarray, counts: np.ndarray, q: float) -> int:
    """The length of the ceil(q n)-th shortest request."""
    cum = np.cumsum(np.asarray(counts, dtype=np.float64))
    return _rank_value(keys, cum, max(1, math.ceil(q * cum[-1] - 1e-9)))


# ---------------------------------------------------------------- from histograms
def _quantile_mean(bounds: np.ndarray, cum: np.ndarray, a: float, b: float) -> float:
    """Mean of the lengths between probabilities a and b of a histogram with finite upper
    bounds `bounds` (sorted) and cumulative fractions `cum` at them (the rest above the last
    bound): lengths spread evenly within each bucket, from the bucket below's bound (0 for
    the first); above the last bound, the last bound."""
    lows = np.concatenate([[0.0], bounds[:-1]])
    p_lo = np.concatenate([[0.0], cum[:-1]])
    total = 0.0
    for lo, hi, pa, pb in zip(lows, bounds, p_lo, cum):
        x, y = max(a, pa), min(b, pb)
        if y <= x or pb <= pa:
            continue
        # the quantile function is linear over the bucket: lo at pa, hi at pb
        at = lambda p: lo + (hi - lo) * (p - pa) / (pb - pa)  # noqa: E731
        total += (y - x) * (at(x) + at(y)) / 2
    x = max(a, float(cum[-1]))
    if b > x:
        total += (b - x) * float(bounds[-1])
    return total / (b - a)


def classes_from_histograms(prompt: tuple[np.ndarray, np.ndarray, float, float],
                            output: tuple[np.ndarray, np.ndarray, float, float],
                            body_classes: int = 3, tail_quantile: float = 0.95) -> list[LengthClass]:
    """Classes from two histograms, each (finite upper bounds, cumulative counts at them,
    total count, sum of lengths): the module docstring's rule for histograms."""
    cuts = [tail_quantile * j / body_classes for j in range(body_classes + 1)] + [1.0]
    reps = []
    for bounds, cum_counts, count, total in (prompt, output):
        cum = np.asarray(cum_counts, dtype=np.float64) / count
        means = [_quantile_mean(np.asarray(bounds, dtype=np.float64), cum, a, b) for a, b in zip(cuts, cuts[1:])]
        body_sum = sum(mean * (b - a) for mean, a, b in zip(means[:-1], cuts, cuts[1:]))
        tail_share = 1.0 - tail_quantile
        exact = total / count  # the histogram's _sum is exact: the classes keep it
        if body_sum + tail_share * means[-1] <= exact:
            means[-1] = (exact - body_sum) / tail_share  # the tail takes what the body leaves
        elif body_sum > 0:
            # Evenly spread lengths overstate the body in wide buckets: scale it down, never the tail.
            scale = max(exact - tail_share * means[-1], 0.0) / body_sum
            means[:-1] = [m * scale for m in means[:-1]]
        reps.append([max(1, math.ceil(x - 1e-9)) for x in means])
    out = []
    for j, (a, b) in enumerate(zip(cuts, cuts[1:])):
        tail = j == body_classes
        name = f"tail-q{round(100 * a):02d}" if tail else f"q{round(100 * a):02d}-{round(100 * b):02d}"
        out.append(LengthClass(name, b - a, reps[0][j], reps[1][j], (b - a) * prompt[2], tail=tail))
    return rounded_shares(out)
