"""The calls in flight, so that shutdown can wait for them and then cancel them itself.

gRPC's own stop(grace) ends the calls still running at the end of the grace by dropping
them, which clients see as UNAVAILABLE. The server instead sets each call's cancel
event when the grace ends: the call's work stops (server/pool.py) and the call answers
CANCELLED (reason SHUTTING_DOWN), as docs/grpc.md says.
"""

from __future__ import annotations

import os
import threading
import time


class CallCancel(threading.Event):
    """A call's cancel event that can also be waited on with select(): setting it writes
    to a pipe, so a thread waiting for a worker's answer wakes at once (server/pool.py)."""

    def __init__(self) -> None:
        super().__init__()
        self._r, self._w = os.pipe()
        self._lock = threading.Lock()

    set_at: float | None = None  # time.monotonic() of the first set()

    def set(self) -> None:
        if self.set_at is None:
            self.set_at = time.monotonic()
        super().set()
        with self._lock:
            if self._w >= 0:
                try:
                    os.write(self._w, b"x")
                except OSError:
                    pass
                os.close(self._w)  # one wake-up is all it takes; end-of-file keeps it readable
                self._w = -1

    def fileno(self) -> int:
        return self._r

    def close(self) -> None:
        with self._lock:
            for fd in (self._r, self._w):
                if fd >= 0:
                    os.close(fd)
            self._r = self._w = -1


class CallRegistry:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._active: set[threading.Event] = set()
        self.shutting_down = False
        self._cancelled = False  # the grace has ended: calls are cancelled as they come

    def enter(self, context) -> CallCancel:
        """A cancel event for this call: set when the call ends (cancelled, expired or
        answered) or when the shutdown grace ends. Give it back with leave()."""
        cancel = CallCancel()
        if not context.add_callback(cancel.set):  # the call has already ended
            cancel.set()
        with self._cond:
            self._active.add(cancel)
            if self._cancelled:
                cancel.set()
        return cancel

    def leave(self, cancel: CallCancel) -> None:
        with self._cond:
            self._active.discard(cancel)
            self._cond.notify_all()
        cancel.close()

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
