"""Admission of solves: at most N run at once, at most Q wait; the rest are turned away.

Solving is CPU-bound (one core per solve), so running more solves than cores only makes
all of them slower. Waiting solves honour their call's deadline and cancellation.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from server.metrics import Metrics
from server.status import QueueFull, WaitCancelled, WaitExpired

__all__ = ["QueueFull", "SolveGate", "WaitCancelled", "WaitExpired"]


class SolveGate:
    POLL_S = 0.05  # how often a waiter looks at its cancel event

    def __init__(self, max_running: int, max_waiting: int, metrics: Metrics | None = None):
        if max_running < 1 or max_waiting < 0:
            raise ValueError("need max_running >= 1 and max_waiting >= 0")
        self.max_running, self.max_waiting = max_running, max_waiting
        self._cond = threading.Condition()
        self._running = 0
        self._waiting = 0
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
            with self._cond:
                self._running -= 1
                self._publish()
                self._cond.notify()

    def _acquire(self, timeout_s: float | None, cancel: threading.Event) -> float:
        t0 = time.monotonic()
        with self._cond:
            if self._running < self.max_running and self._waiting == 0:
                self._running += 1
                self._publish()
                return 0.0
            if self._waiting >= self.max_waiting:
                raise QueueFull(self._running, self._waiting)
            self._waiting += 1
            self._publish()
            try:
                while self._running >= self.max_running:
                    if cancel.is_set():
                        raise WaitCancelled()
                    left = None if timeout_s is None else timeout_s - (time.monotonic() - t0)
                    if left is not None and left <= 0:
                        raise WaitExpired()
                    self._cond.wait(self.POLL_S if left is None else min(self.POLL_S, left))
                self._running += 1
                return time.monotonic() - t0
            finally:
                self._waiting -= 1
                self._publish()

    def _publish(self) -> None:
        if self._metrics:
            self._metrics.in_flight.set(self._running)
            self._metrics.queued.set(self._waiting)

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return self._waiting
