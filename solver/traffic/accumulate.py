"""Running counts of one service's requests, fed batch by batch: memory grows with the
distinct token lengths and the trace's span in seconds, never with the number of requests.

* lengths: per distinct total length (prompt + output tokens), the requests and their summed
  prompt and output tokens; per distinct prompt and output length, the requests;
* arrivals: requests per whole second of the trace, and per window of `cv_window_s` the
  number, sum and sum of squares of the gaps between consecutive arrivals that fall in the
  same window (a gap across a window's edge is not counted: it belongs to no one window).
"""

from __future__ import annotations

import numpy as np


def _merge(keys: np.ndarray, columns: list[np.ndarray], new_keys: np.ndarray, new_columns: list[np.ndarray]):
    """Sorted distinct keys with their columns added up, of two such tables."""
    k = np.concatenate([keys, new_keys])
    uniq, inv = np.unique(k, return_inverse=True)
    return uniq, [np.bincount(inv, weights=np.concatenate([a, b]), minlength=len(uniq))
                  for a, b in zip(columns, new_columns)]


def _table(values: np.ndarray, *weights: np.ndarray):
    uniq, inv, counts = np.unique(values, return_inverse=True, return_counts=True)
    return uniq, [counts.astype(np.float64)] + [np.bincount(inv, weights=w, minlength=len(uniq)) for w in weights]


def _grow(a: np.ndarray, size: int) -> np.ndarray:
    if size <= len(a):
        return a
    out = np.zeros(max(size, 2 * len(a)), dtype=a.dtype)
    out[:len(a)] = a
    return out


class ServiceCounts:
    """What the derivation needs of one service's requests (see the module docstring)."""

    def __init__(self, cv_window_s: float):
        self.cv_window_s = cv_window_s
        self.requests = 0
        self.total_keys = np.zeros(0, dtype=np.int64)  # prompt + output tokens, distinct, sorted
        self.total_columns = [np.zeros(0)] * 3  # requests, summed prompt tokens, summed output tokens
        self.prompt_keys = np.zeros(0, dtype=np.int64)
        self.prompt_counts = [np.zeros(0)]
        self.output_keys = np.zeros(0, dtype=np.int64)
        self.output_counts = [np.zeros(0)]
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
        total = prompt + output
        keys, cols = _table(total, prompt.astype(np.float64), output.astype(np.float64))
        self.total_keys, self.total_columns = _merge(self.total_keys, self.total_columns, keys, cols)
        keys, cols = _table(prompt)
        self.prompt_keys, self.prompt_counts = _merge(self.prompt_keys, self.prompt_counts, keys, cols)
        keys, cols = _table(output)
        self.output_keys, self.output_counts = _merge(self.output_keys, self.output_counts, keys, cols)

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
