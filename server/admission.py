"""Admission of solves: at most N run at once, at most Q wait; the rest are turned away.

Solving is CPU-bound (one core per solve), so running more solves than cores only makes
all of them slower. Waiting solves honour their call's deadline and cancellation.
"""

from __future__ import annotations

import collections
import threading
import time
from contextlib import contextmanager

from server.metrics import Metrics
from server.status import QueueFull, WaitCancelled, WaitExpired

__all__ = ["QueueFull", "SolveGate", "WaitCancelled", "WaitExpired"]


class SolveGate:
    """First come, first served: a freed slot passes straight to the call that has waited
    longest (a waiter keeps its place while it wakes every POLL_S to look at its cancel
    event and deadline), so that waits, and with them tail latency, stay even."""

    POLL_S = 0.05  # how often a waiter looks at its cancel event

    def __init__(self, max_running: int, max_waiting: int, metrics: Metrics | None = None):
        if max_running < 1 or max_waiting < 0:
            raise ValueError("need max_running >= 1 and max_waiting >= 0")
        self.max_running, self.max_waiting = max_running, max_waiting
        self._lock = threading.Lock()
        self._running = 0
        self._queue: collections.deque[threading.Event] = collections.deque()  # waiters, oldest first
        self._metrics = metrics

    @contextmanager
    def slot(self, timeout_s: float | None, cancel: threading.Event):
        """Hold one solver slot for the body; raises QueueFull, WaitExpired or WaitCancelled."""
        waited_s = self._acquire(timeout_s, cancel)
        if self._metrics:
            self._metrics.queue_wait.observe(waited_s)
        try:
            yield
        finally:
            with self._lock:
                self._release()

    def _acquire(self, timeout_s: float | None, cancel: threading.Event) -> float:
        t0 = time.monotonic()
        with self._lock:
            if self._running < self.max_running and not self._queue:
                self._running += 1
                self._publish()
                return 0.0
            if len(self._queue) >= self.max_waiting:
                raise QueueFull(self._running, len(self._queue))
            granted = threading.Event()  # set by _release, which hands this waiter its slot
            self._queue.append(granted)
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
                    self._release()
                else:
                    self._queue.remove(granted)
                    self._publish()
            raise

    def _release(self) -> None:
        """Give up one running slot (the lock held): to the oldest waiter, or free it."""
        if self._queue:
            self._queue.popleft().set()  # the slot changes hands: still running
        else:
            self._running -= 1
        self._publish()

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
