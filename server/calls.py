"""The calls in flight, so that shutdown can wait for them and then cancel them itself.

gRPC's own stop(grace) ends the calls still running at the end of the grace by dropping
them, which clients see as UNAVAILABLE. The server instead sets each call's cancel
event when the grace ends: the call's work stops (server/pool.py) and the call answers
CANCELLED (reason SHUTTING_DOWN), as docs/grpc.md says.
"""

from __future__ import annotations

import threading
import time


class CallRegistry:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active: set[threading.Event] = set()
        self.shutting_down = False
        self._cancelled = False  # the grace has ended: calls are cancelled as they come

    def enter(self, context) -> threading.Event:
        """A cancel event for this call: set when the call ends (cancelled, expired or
        answered) or when the shutdown grace ends."""
        cancel = threading.Event()
        if not context.add_callback(cancel.set):  # the call has already ended
            cancel.set()
        with self._cond:
            self._active.add(cancel)
            if self._cancelled:
                cancel.set()
        return cancel

    def leave(self, cancel: threading.Event) -> None:
        with self._cond:
            self._active.discard(cancel)
            self._cond.notify_all()

    def begin_shutdown(self) -> None:
        with self._cond:
            self.shutting_down = True

    def wait_idle(self, timeout_s: float) -> bool:
        """True once no call is in flight; False if some still are after timeout_s."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._active:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def cancel_all(self) -> int:
        """Cancel every call in flight (and any that enters from now on); returns how many."""
        with self._cond:
            self.shutting_down = True
            self._cancelled = True
            for cancel in self._active:
                cancel.set()
            return len(self._active)

    @property
    def active(self) -> int:
        return len(self._active)
