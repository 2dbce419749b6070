"""Running counts of one service's requests, fed batch by batch: memory grows with the
distinct token lengths and the trace's span in seconds, never with the number of requests.

* lengths: per distinct total length (prompt + output tokens), the requests and their summed
  prompt and output tokens; per distinct prompt and output length, the requests (CountTable);
* arrivals: requests per whole second of the trace, and per window of `cv_window_s` the
  number, sum and sum of squares of the gaps between consecutive arrivals that fall in the
  same window (a gap across a window's edge is not counted: it belongs to no one window).
"""

from __future__ import annotations

import numpy as np


DENSE_KEYS = 1 << 16  # lengths below this are counted in arrays indexed by length (0.5 MB a column)


def _merge(keys: np.ndarray, columns: list[np.ndarray], new_keys: np.ndarray, new_columns: list[np.ndarray]):
    """Sorted distinct keys with their columns added up, of two such tables."""
    k = np.concatenate([keys, new_keys])
    uniq, inv = np.unique(k, return_inverse=True)
    return uniq, [np.bincount(inv, weights=np.concatenate([a, b]), minlength=len(uniq))
                  for a, b in zip(columns, new_columns)]


def _grow(a: np.ndarray, size: int) -> np.ndarray:
    if size <= len(a):
        return a
    out = np.zeros(max(size, 2 * len(a)), dtype=a.dtype)
    out[:len(a)] = a
    return out


class CountTable:
    """Per distinct whole-number key (a length in tokens): the requests, and the sums of
    further columns. Keys below DENSE_KEYS go to arrays indexed by the key (a bincount per
    batch); longer ones, rare, to a sorted table of the distinct keys."""

    def __init__(self, sums: int = 0):
        self.dense = [np.zeros(0) for _ in range(1 + sums)]
        self.sparse_keys = np.zeros(0, dtype=np.int64)
        self.sparse = [np.zeros(0) for _ in range(1 + sums)]

    def add(self, keys: np.ndarray, *sums: np.ndarray) -> None:
        small = keys < DENSE_KEYS
        every = bool(small.all())
        k = keys if every else keys[small]
        if len(k):
            top = int(k.max()) + 1
            for c, w in enumerate((None, *sums)):
                self.dense[c] = _grow(self.dense[c], top)
                weights = None if w is None else (w if every else w[small])
                self.dense[c][:top] += np.bincount(k, weights=weights, minlength=top)
        if not every:
            big = keys[~small]
            uniq, inv, counts = np.unique(big, return_inverse=True, return_counts=True)
            cols = [counts.astype(np.float64)] + [np.bincount(inv, weights=w[~small], minlength=len(uniq))
                                                  for w in sums]
            self.sparse_keys, self.sparse = _merge(self.sparse_keys, self.sparse, uniq, cols)

    def table(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """Sorted distinct keys and their columns (requests first)."""
        at = np.flatnonzero(self.dense[0] > 0)
        keys = np.concatenate([at.astype(np.int64), self.sparse_keys])
        return keys, [np.concatenate([d[at], sp]) for d, sp in zip(self.dense, self.sparse)]


class ServiceCounts:
    """What the derivation needs of one service's requests (see the module docstring)."""

    def __init__(self, cv_window_s: float):
        self.cv_window_s = cv_window_s
        self.requests = 0
        self.totals = CountTable(sums=2)  # by prompt + output tokens: requests, summed prompt, summed output
        self.prompts = CountTable()  # by prompt tokens: requests
        self.outputs = CountTable()
        self.per_second = np.zeros(0, dtype=np.int64)  # requests arriving in [s, s + 1)
        self.seconds = 0  # used length of per_second
        self.gap_n = np.zeros(0, dtype=np.float64)  # per cv window: gaps, their sum and sum of squares
        self.gap_sum = np.zeros(0, dtype=np.float64)
        self.gap_sq = np.zeros(0, dtype=np.float64)
        self.last_arrival_s: float | None = None
        self.first_line: int | None = None
        self.models: dict[str, list[int]] = {}  # model column value -> [requests, first line]

    def add(self, arrival_s: np.ndarray, prompt: np.ndarray, output: np.ndarray) -> None:
        """One batch of this service's requests, in arrival order."""
        if not len(arrival_s):
            return
        self.requests += len(arrival_s)
        self.totals.add(prompt + output, prompt.astype(np.float64), output.astype(np.float64))
        self.prompts.add(prompt)
        self.outputs.add(output)

        second = arrival_s.astype(np.int64)  # floor: arrivals are >= 0
        top = int(second[-1]) + 1
        self.per_second = _grow(self.per_second, top)
        self.per_second[:top] += np.bincount(second, minlength=top)
        self.seconds = max(self.seconds, top)

        times = arrival_s if self.last_arrival_s is None else np.concatenate([[self.last_arrival_s], arrival_s])
        self.last_arrival_s = float(arrival_s[-1])
        if len(times) > 1:
            window = np.floor(times / self.cv_window_s).astype(np.int64)
            same = window[1:] == window[:-1]
            gaps = np.diff(times)[same]
            where = window[1:][same]
            if len(where):
                top = int(where[-1]) + 1
                for name in ("gap_n", "gap_sum", "gap_sq"):
                    setattr(self, name, _grow(getattr(self, name), top))
                self.gap_n[:top] += np.bincount(where, minlength=top)
                self.gap_sum[:top] += np.bincount(where, weights=gaps, minlength=top)
                self.gap_sq[:top] += np.bincount(where, weights=gaps * gaps, minlength=top)

    def counts_per_second(self, seconds: int) -> np.ndarray:
        """Requests per second over [0, seconds), zeros where none arrived."""
        out = np.zeros(seconds, dtype=np.int64)
        n = min(seconds, self.seconds)
        out[:n] = self.per_second[:n]
        return out
