"""Distributions, their merging and mixture quantiles (numpy; no scipy)."""

from __future__ import annotations

import math

import numpy as np

from solver.perf.queueing.contents import _Atoms
from solver.perf.queueing.exp import exp

# 8-point Gauss-Hermite rule (probabilists'): what np.polynomial.hermite_e.hermegauss(8)
# returns, written out: importing numpy.polynomial and solving the eigenproblem cost ~8 M
# instructions (~0.7 %) of a cold one-service CLI solve (tests/test_queueing.py checks them).
_GH_NODES = np.array([-4.1445471861258945, -2.8024858612875416, -1.636519042435108, -0.5390798113513751,
                      0.5390798113513751, 1.636519042435108, 2.8024858612875416, 4.1445471861258945])
_GH_WEIGHTS = np.array([0.00028228278602621435, 0.02415191518706137, 0.2938768674600929, 0.9350030718823198,
                        0.9350030718823198, 0.2938768674600929, 0.02415191518706137, 0.00028228278602621435])
_GH_WEIGHTS = _GH_WEIGHTS / _GH_WEIGHTS.sum()
_SQRT2 = math.sqrt(2.0)
# Quantile levels standing in for a class's TTFT inside its latency (finer in the tail).
_LAT_LEVELS = np.array([0.0, .05, .1, .15, .2, .25, .3, .35, .4, .45, .5, .55, .6, .65, .7, .75, .8, .85, .9,
                        .93, .95, .97, .98, .99, .995, .998, .999, 1.0])
_LAT_MIDS, _LAT_W = 0.5 * (_LAT_LEVELS[1:] + _LAT_LEVELS[:-1]), np.diff(_LAT_LEVELS)


# Weight-quantile edges for `_compress_tail`: coarse in the body, fine where p90-p99.9 fall.
# The percentiles the model reports (p50, p90, p95, p99) sit inside bins, never on an edge:
# the bins' masses are their widths, so an edge at p leaves the CDF flat at exactly p between
# two bins' values, and any point of that gap would pass for the percentile (a cap search
# judging by the CDF at the bound took 40.03 ms for a p99 TPOT of 40).
_TAIL_EDGES = np.array([.05, .1, .15, .2, .25, .3, .35, .4, .45, .49, .51, .55, .6, .65, .7, .75, .8, .85, .88, .92,
                        .94, .945, .955, .96, .97, .975, .98, .985, .988, .992, .995, .9965, .998, .999, .9995,
                        .9999])


def _compress_tail(nodes: np.ndarray, weights: np.ndarray):
    """[H, K] nodes with [H, K] weights -> [B, K] nodes and weights, B = len(_TAIL_EDGES) + 1:
    per class, the conditional means over the weight-quantile bins between `_TAIL_EDGES`
    (the upper tail kept at the resolution a p99 needs). Each node's weight is split over the
    bins its stretch of the cumulative weight overlaps, so the bins move continuously with
    the nodes' weights: a heavy node given whole to the bin of its midpoint jumped from bin
    to bin as the rate rose, and a p99 TPOT fell by up to 1.3 % with more load. Fewer nodes
    than bins: as they are."""
    if nodes.shape[0] <= len(_TAIL_EDGES) + 1:
        return nodes, weights
    order = np.argsort(nodes, axis=0, kind="stable")
    w = np.take_along_axis(weights, order, axis=0)
    v = np.take_along_axis(nodes, order, axis=0)
    bins = len(_TAIL_EDGES) + 1
    out = np.zeros((bins, nodes.shape[1]))
    out_w = np.zeros((bins, nodes.shape[1]))
    for k in range(nodes.shape[1]):
        share, _, _ = _overlaps(w[:, k], _TAIL_EDGES)
        den = share.sum(axis=0)
        # 0 x inf is nan: a node outside a bin adds nothing to it, whatever its value.
        out[:, k] = np.where(share > 0, share * v[:, k:k + 1], 0.0).sum(axis=0) / np.maximum(den, 1e-300)
        out_w[:, k] = den
    return out, out_w  # an empty bin: node 0.0 of weight 0.0, which no CDF counts


def _overlaps(w: np.ndarray, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Members of weights `w` (sorted by value) laid end to end on [0, 1] by cumulative
    weight: ([members, bins] the length of each member's stretch inside each bin between
    `edges`, [members] the upper end of each stretch, the total weight). What
    `_compress_tail` and `_split_shares` split weights by."""
    cum = np.cumsum(w)
    total = max(float(cum[-1]), 1e-300)
    hi = cum / total
    lo = hi - w / total
    e = np.concatenate([[0.0], edges, [1.0]])
    return np.clip(np.minimum(hi[:, None], e[None, 1:]) - np.maximum(lo[:, None], e[None, :-1]), 0.0, None), hi, total


def _refined_edges(bins: int) -> np.ndarray:
    """Weight-quantile edges for `bins` bins, fine in the upper tail where a p99 TTFT's
    step contents and queued work lie: 30 % of the bins spread evenly over the lower 80 %,
    the rest geometric in the top 20 % (to the top 0.2 %)."""
    body = max(int(round(0.3 * bins)), 1)
    tail = 1.0 - np.geomspace(0.2, 0.002, bins - body)
    return np.unique(np.concatenate([np.linspace(0.0, 0.8, body + 1)[1:], tail[1:]]))


# Merging step contents and steps an arrival can land in. Equal-weight bins, each member
# given whole to the bin of its midpoint, lost the upper tail (p99 TTFT 5-15 % low against
# no merging at all, on long prompts and bursty arrivals) and moved members from bin to bin
# as the rate rose (p99 TTFT fell by up to 3 % with more load); split weights over
# tail-refined bins keep both within ~3 % and monotone (docs/queueing.md).
_ATOM_EDGES = _refined_edges(32)
_ENTRY_EDGES = _refined_edges(24)


def _split_shares(values: np.ndarray, weights: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """[members, bins]: the share of each member's weight in each bin between `edges`
    (weight quantiles), the members sorted by value. A member's weight is split over the
    bins its stretch of the cumulative weight overlaps, so the bins change continuously
    with the weights; a weightless member joins the bin its position falls in (with
    nothing, as it has nothing)."""
    order = np.argsort(values, kind="stable")
    w = weights[order]
    overlap, hi, total = _overlaps(w, edges)
    shares = np.zeros(overlap.shape)
    heavy = w > 0
    shares[heavy] = overlap[heavy] / (w[heavy, None] / total)
    light = np.nonzero(~heavy)[0]
    if len(light):
        shares[light, np.minimum(np.searchsorted(edges, hi[light], side="right"), len(edges))] = 1.0
    out = np.empty_like(shares)
    out[order] = shares
    return out


def _compress_atoms(at: _Atoms, rows: np.ndarray, row_w: np.ndarray, edges: np.ndarray = _ATOM_EDGES):
    """Merge step-content atoms by prompt tokens into at most len(edges) + 1 bins between
    weight quantiles `edges` (`_split_shares`; each bin's weighted means), summing each
    row's weights per merged atom. No more atoms than bins: as they are."""
    if len(at.tokens) <= len(edges) + 1:
        return at, rows
    marginal = row_w @ rows
    shares = _split_shares(at.tokens, marginal, edges)  # [atoms, bins]
    mw = marginal @ shares
    keep = mw > 0
    shares, mw = shares[:, keep], mw[keep]
    tokens = (marginal * at.tokens) @ shares / mw
    pairs = (marginal * at.pairs) @ shares / mw
    return _Atoms(np.zeros(len(tokens)), tokens, pairs, np.ones(len(tokens)), at.j_max), rows @ shares


def _compress_entries(dur, weight, left, rows, edges: np.ndarray = _ENTRY_EDGES, rows_of=None, extra=None):
    """Merge the steps an arrival can land in: those with nothing left behind them by
    length, those with content left over by that amount, each group into at most
    len(edges) + 1 bins (`_split_shares`); each merged entry is the weighted mean of its
    members' shares (length, content left and row). `rows_of`: entry -> its row of `rows`
    when entries share rows (steps of the same length: rows of distinct lengths)."""
    none = left <= 0
    blocks = []
    for mask, key in ((none, dur), (~none, left)):
        if mask.any() and weight[mask].sum() > 0:
            blocks.append(_merging(key, weight, np.nonzero(mask)[0], edges))
    # One matrix of merge weights [merged entries, entries] for both groups: the merged rows
    # are one product with the rows, which are neither copied nor sorted (bursty or long
    # prompts give thousands of entries by hundreds of atoms).
    merge = np.zeros((sum(len(b[0]) for b in blocks), len(dur)))
    out_w = []
    at = 0
    for w, members, coef in blocks:
        merge[at:at + len(w), members] = coef
        out_w.append(w)
        at += len(w)
    if rows_of is not None:
        merge_rows = np.stack([np.bincount(rows_of, weights=m, minlength=len(rows)) for m in merge])
        out = merge @ dur, np.concatenate(out_w), merge @ left, merge_rows @ rows
    else:
        out = merge @ dur, np.concatenate(out_w), merge @ left, merge @ rows
    return out if extra is None else out + (merge @ extra,)


def _merging(values: np.ndarray, weights: np.ndarray, members: np.ndarray, edges: np.ndarray):
    """The entries `members` merged into at most len(edges) + 1 bins by `values`: (bin
    weights, the members, [bins, members] coefficients of each bin's weighted mean)."""
    v, w = values[members], weights[members]
    if len(members) <= len(edges) + 1:
        return w, members, np.eye(len(members))
    shares = _split_shares(v, w, edges)  # [members, bins]
    group_w = w @ shares
    keep = group_w > 0
    return group_w[keep], members, (w[:, None] * shares[:, keep] / group_w[keep]).T


# Beyond |z| = 12 the formula below gives exactly 1.0 (z > 0) or 0.0 (z < 0): there
# exp(-z^2 / 2) < 6e-32 and the polynomial x t < 1.2, so y = 1 - (a number < 2^-54) rounds
# to 1.0 (checked numerically: every |z| above 8.38 already gives exactly 0 or 1).
_PHI_EXACT_BEYOND = 12.0
_PHI_SPARSE_MIN_SIZE = 2048  # below this many elements the mask costs more than it saves


def _phi(z):
    """Standard normal CDF (Abramowitz-Stegun 7.1.26 erf, |error| < 1.5e-7).

    Large arrays of which most elements lie in the exact tails (the latency CDF's grid
    against every TTFT atom and TPOT node: ~96 % of them in plans) evaluate the formula
    only on the others and set the tails to their exact 0.0 / 1.0: the same numbers bit
    for bit, at a fraction of the cost."""
    z = np.asarray(z, dtype=float)
    if z.ndim and z.size >= _PHI_SPARSE_MIN_SIZE:
        near = ~(np.abs(z) >= _PHI_EXACT_BEYOND)  # NaN counts as near: the formula keeps it NaN
        count = int(np.count_nonzero(near))
        if count < z.size // 4:
            out = (z > 0).astype(float)  # the formula's exact tails: +1.0 above, +0.0 below
            out[near] = _phi_formula(z[near])
            return out
    return _phi_formula(z)


def _phi_formula(z: np.ndarray):
    """`_phi` evaluated on every element."""
    if z.ndim == 0:
        x = np.abs(z) / _SQRT2
        t = 1.0 / (1.0 + 0.3275911 * x)
        y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * np.exp(-x * x)
        return 0.5 * (1.0 + np.sign(z) * y)
    # In place, operation for operation the same as
    #   x = |z| / sqrt2;  t = 1 / (1 + 0.3275911 x)
    #   y = 1 - (((((1.061405429 t - 1.453152027) t) + 1.421413741) t - 0.284496736) t + 0.254829592) t exp(-x x)
    #   0.5 (1 + sign(z) y)
    # (bit for bit: each step is the same IEEE operation; only the temporary arrays go).
    x = np.abs(z)
    x /= _SQRT2
    t = x * 0.3275911
    t += 1.0
    np.divide(1.0, t, out=t)
    y = t * 1.061405429
    y -= 1.453152027
    y *= t
    y += 1.421413741
    y *= t
    y -= 0.284496736
    y *= t
    y += 0.254829592
    y *= t
    np.multiply(x, x, out=x)
    np.negative(x, out=x)  # -x x: (-x) x and -(x x) are the same number
    x = exp(x, inplace=True)  # bit for bit np.exp, without its slow underflow path
    y *= x
    np.subtract(1.0, y, out=y)
    out = np.sign(z)
    out *= y
    out += 1.0
    out *= 0.5
    return out


def _mixture_quantile(dist, share: np.ndarray, p: float) -> float:
    """The x with sum_k share_k F_k(x) = p: a coarse grid, then two finer ones."""
    cdf, top = dist
    hi = max(top, 1e-6)
    # The first grid runs from 0 to hi, so its last row is the CDF at hi (a row depends on
    # its own point only): the check that hi reaches p reads it there rather than
    # evaluating the CDF at hi alone (the same dot product on the same row); where hi falls
    # short (rare), the grid at the doubled hi replaces it.
    for attempt in range(61):
        xs = _linspace(0.0, hi)
        rows = cdf(xs)
        if attempt == 60 or float(np.dot(rows[-1], share)) >= p:
            break
        hi *= 2.0
    lo = 0.0
    for r in range(3):
        if r:
            xs = _linspace(lo, hi)
            rows = cdf(xs)
        f = rows @ share
        i = int(np.searchsorted(f, p - 1e-12))
        i = min(max(i, 1), len(xs) - 1)
        lo, hi = xs[i - 1], xs[i]
    # The CDF at lo and hi, the last grid's points i - 1 and i: a CDF's row depends on its
    # own point only (tests/test_queueing_fast_paths.py), so the rows just computed are the
    # ones a new evaluation would give; the same [2, K] product with the shares as before.
    f_lo, f_hi = (rows[[i - 1, i]] @ share).tolist()
    # A step of the CDF inside the bracket (`cdf.jumps`: the TTFT of an arrival that finds the
    # replica empty): the quantile is the step itself where p falls within it, else the
    # interpolation runs on the side of the step that holds p (across it, it would land
    # below the step, where the CDF is short of p).
    for s in getattr(cdf, "jumps", ()):
        if lo < s <= hi:
            f_below, f_at = (cdf(np.array([np.nextafter(s, -np.inf), s])) @ share).tolist()
            if f_below < p <= f_at:
                return float(s)
            if p <= f_below:
                hi, f_hi = float(np.nextafter(s, -np.inf)), f_below
            else:
                lo, f_lo = float(s), f_at
    if f_hi > f_lo:
        return float(lo + (hi - lo) * min(max((p - f_lo) / (f_hi - f_lo), 0.0), 1.0))
    return float(hi)


_GRID_POINTS = 33
_GRID_STEPS = np.arange(_GRID_POINTS, dtype=float)
_GRID_STEPS.flags.writeable = False


def _linspace(lo: float, hi: float) -> np.ndarray:
    """np.linspace(lo, hi, 33) for two floats, the same numbers bit for bit: numpy's own
    steps (i x (hi - lo) / 32 + lo, the last point hi; i / 32 x (hi - lo) where the step
    underflows to 0) without its ~20 us of generic dispatch, three times per quantile."""
    delta = np.float64(hi) - np.float64(lo)
    step = delta / (_GRID_POINTS - 1)
    y = _GRID_STEPS.copy()
    if step == 0:
        y /= _GRID_POINTS - 1
        y *= delta
    else:
        y *= step
    y += lo
    y[-1] = hi
    return y


_NEAR_COARSE = np.geomspace(0.125, 8.0, 17)  # ratios to the bound, 30 % apart
_NEAR_FINE = np.linspace(0.0, 1.0, 17)


def _quantile_near(dist, share: np.ndarray, p: float, x0: float) -> float:
    """A cheap mixture quantile for a search: within [x0 / 8, 8 x0] (clamped to it), two
    17-point rounds (geometric, then linear inside the bracketing cell) and linear
    interpolation: ~0.1 % of the value, enough to guide steps (not to decide them)."""
    cdf, _ = dist
    xs = x0 * _NEAR_COARSE
    f = cdf(xs) @ share
    i = int(np.searchsorted(f, p))
    if i == 0:
        return float(xs[0])
    if i >= len(xs):
        return float(xs[-1])
    a, b = xs[i - 1], xs[i]
    xs = a + (b - a) * _NEAR_FINE
    f = cdf(xs) @ share
    i = min(max(int(np.searchsorted(f, p)), 1), len(xs) - 1)
    f_lo, f_hi = f[i - 1], f[i]
    t = min(max((p - f_lo) / (f_hi - f_lo), 0.0), 1.0) if f_hi > f_lo else 1.0
    return float(xs[i - 1] + (xs[i] - xs[i - 1]) * t)
