"""The cyclic garbage collector held off while a plan runs.

A plan allocates ~10^5 objects that outlive many collections (candidate configurations,
estimates, cache entries, model rows) and makes no reference cycles: what it drops is freed
at once by reference counting (tests/test_collector.py checks the examples, explanations,
horizons and infeasible workloads). CPython's collector nonetheless walks the young objects
every 700 allocations and the whole heap each time enough of them survive: 4-5 full
collections per 100-service plan, about a fifth of its time, that find nothing. So
`paused()` keeps the collector off while a plan runs and lets it resume when the last plan
running in the process ends (plans in several threads: the first one in pauses, the last
one out resumes; a collector the caller had disabled stays disabled).
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_running = 0  # plans inside paused() now
_resume = False  # whether the collector was on when the first of them came in


@contextmanager
def paused() -> Iterator[None]:
    global _running, _resume
    with _lock:
        if _running == 0:
            _resume = gc.isenabled()
            gc.disable()
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0 and _resume:
                gc.enable()
