"""The common part of the planner's process-wide memos: an OrderedDict kept least recently
used first, a lock (plans run on several threads), and hit and miss counts for tests and
benchmarks. Each memo adds its own key, bound and get/put (solver/caches.py empties them all)."""

from __future__ import annotations

import threading
from collections import OrderedDict


class LockedLru:
    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0
            self._cleared()

    def _lookup(self, key):
        """The entry under `key`, now the most recently used, or None; counted as a hit or
        a miss. With the lock held."""
        found = self._data.get(key)
        if found is None:
            self.misses += 1
            return None
        self._data.move_to_end(key)
        self.hits += 1
        return found

    def _store(self, key, entry) -> None:
        """`entry` under `key`, the most recently used; the least recently used beyond
        max_entries dropped. With the lock held."""
        self._data[key] = entry
        self._data.move_to_end(key)
        while len(self._data) > self.max_entries:
            self._data.popitem(last=False)

    def _cleared(self) -> None:
        """What else a subclass resets when emptied (under the lock)."""
