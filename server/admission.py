"""Admission of solves: at most N run at once, at most Q wait; the rest are turned away.

Solving is CPU-bound (one core per solve), so running more solves than cores only makes
all of them slower. Waiting solves honour their call's deadline and cancellation.

Two lanes: a large job (a review, or a solve whose request is over LARGE_REQUEST_BYTES -
hundreds of services, many periods) may hold at most N - 1 slots when N >= 2, so one slot
always serves small solves: two long multi-period jobs on a 2-core server used to fill both
slots and queue every small solve behind them (p50 wait 11.9 s, 8 of 37 past a 30 s
deadline). Within what each may take, waiters are served first come, first served.
"""

from __future__ import annotations

import collections
import threading
import time
from contextlib import contextmanager

from server.metrics import Metrics
from server.status import QueueFull, WaitCancelled, WaitExpired

__all__ = ["LARGE_REQUEST_BYTES", "QueueFull", "SolveGate", "WaitCancelled", "WaitExpired"]

# A request this large is a large job. A small solve (a few services) is 1-5 KiB; 100
# generated services are ~40 KiB, and size is what grows the work of a solve.
LARGE_REQUEST_BYTES = 32 * 1024


class SolveGate:
    """First come, first served: a freed slot passes straight to the call that has waited
    longest among those that may take it (a large job not while large jobs hold their
    share); a waiter keeps its place while it wakes every POLL_S to look at its cancel
    event and deadline, so that waits, and with them tail latency, stay even."""

    POLL_S = 0.05  # how often a waiter looks at its cancel event

    def __init__(self, max_running: int, max_waiting: int, metrics: Metrics | None = None):
        if max_running < 1 or max_waiting < 0:
            raise ValueError("need max_running >= 1 and max_waiting >= 0")
        self.max_running, self.max_waiting = max_running, max_waiting
        self.max_large = max(max_running - 1, 1)  # slots large jobs may hold together
        self._lock = threading.Lock()
        self._running = 0
        self._large = 0  # of the running, large jobs
        # waiters, oldest first: (event set when the slot is handed over, large?)
        self._queue: collections.deque[tuple[threading.Event, bool]] = collections.deque()
        self._metrics = metrics

    @contextmanager
    def slot(self, timeout_s: float | None, cancel: threading.Event, large: bool = False):
        """Hold one solver slot for the body; raises QueueFull, WaitExpired or WaitCancelled."""
        waited_s = self._acquire(timeout_s, cancel, large)
        if self._metrics:
            self._metrics.queue_wait.observe(waited_s)
        try:
            yield
        finally:
            with self._lock:
                self._release(large)

    def _may_run(self, large: bool) -> bool:
        return self._running < self.max_running and (not large or self._large < self.max_large)

    def _acquire(self, timeout_s: float | None, cancel: threading.Event, large: bool) -> float:
        t0 = time.monotonic()
        with self._lock:
            # Every waiter that may run has been handed its slot (`_hand_over` after each
            # change), so one that may run now is ahead of nobody who could.
            if self._may_run(large):
                self._start(large)
                self._publish()
                return 0.0
            if len(self._queue) >= self.max_waiting:
                raise QueueFull(self._running, len(self._queue))
            granted = threading.Event()  # set by _hand_over, which gives this waiter its slot
            entry = (granted, large)
            self._queue.append(entry)
            self._publish()
        try:
            while not granted.is_set():
                if cancel.is_set():
                    raise WaitCancelled()
                left = None if timeout_s is None else timeout_s - (time.monotonic() - t0)
                if left is not None and left <= 0:
                    raise WaitExpired()
                granted.wait(self.POLL_S if left is None else min(self.POLL_S, left))
            return time.monotonic() - t0
        except BaseException:
            with self._lock:
                if granted.is_set():  # the slot came as we gave up: pass it on
                    self._release(large)
                else:
                    self._queue.remove(entry)
                    self._hand_over()  # a large waiter behind it may be first now
                    self._publish()
            raise

    def _start(self, large: bool) -> None:
        self._running += 1
        self._large += large

    def _release(self, large: bool) -> None:
        """Give up one running slot (the lock held), then hand free slots to the oldest
        waiters that may take them."""
        self._running -= 1
        self._large -= large
        self._hand_over()
        self._publish()

    def _hand_over(self) -> None:
        for entry in list(self._queue):
            granted, large = entry
            if self._may_run(large):
                self._queue.remove(entry)
                self._start(large)
                granted.set()

    def _publish(self) -> None:
        if self._metrics:
            self._metrics.in_flight.set(self._running)
            self._metrics.queued.set(len(self._queue))

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return len(self._queue)
