"""Workloads a worker has read, by the exact bytes of the request they came in.

A scheduler asks again with the same request, and many clients send the same one: for a
one-service workload, reading it (the Struct to a dict, the document checks, pydantic
validation, the catalog, the references) is ~0.1-0.3 ms of a ~1.5-3 ms job. The same
bytes read to the same workload and catalog (reading depends on nothing else), and both
are immutable (frozen models; plans never change their inputs), so a request whose bytes
were read before gets the objects read then. The planner's own caches are keyed on what
they depend on, so the answer is the one a fresh read would give (bench/plan_identity.py
and tests/test_read_memo.py). A request that fails to read is not remembered: it fails
the same way, with the same violations, every time.
"""

from __future__ import annotations

from solver.catalog.types import Catalog
from solver.lru import LockedLru
from solver.workload.schema import Workload

# Small requests only (64 KiB of request is a workload of ~100 services): for larger ones
# reading is a small part of the solve, and a handful of entries stay a few MiB at most.
MAX_REQUEST_BYTES = 64 * 2**10


class ReadMemo(LockedLru):
    """(workload, catalog) by request bytes, least recently used out first. Thread-safe."""

    def __init__(self, max_entries: int = 16, max_request_bytes: int = MAX_REQUEST_BYTES):
        super().__init__(max_entries)
        self.max_request_bytes = max_request_bytes

    def get(self, key: bytes) -> tuple[Workload, Catalog] | None:
        if len(key) > self.max_request_bytes:
            return None
        with self._lock:
            return self._lookup(key)

    def put(self, key: bytes, read: tuple[Workload, Catalog]) -> None:
        if len(key) > self.max_request_bytes:
            return
        with self._lock:
            self._store(key, read)


READS = ReadMemo()
