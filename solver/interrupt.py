"""Cooperative stops: every stage of a solve checks its caller's cancel event and deadline.

The MIP backends stop through the solver's own interrupter; the stages around them
(candidates, model building, diagnosis, explanations, evaluation) call `Stop.check()`
between units of work that each take well under 100 ms, so a cancel or an expired
deadline ends any stage promptly, with the stage named in the error.
"""

from __future__ import annotations

import threading
import time
from solver.dataclass_repr import dataclass
from solver.errors import Cancelled, SolverTimeout


@dataclass
class Stop:
    """When planning must stop: a cancel event, a deadline, or both."""

    cancel: threading.Event | None = None
    deadline: float | None = None  # time.monotonic() value; None: no deadline
    time_limit_s: float | None = None  # for messages

    def check(self, stage: str) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled(f"the solve was cancelled during {stage}")
        if self.deadline is not None and time.monotonic() > self.deadline:
            limit = f" of {self.time_limit_s:g} s" if self.time_limit_s is not None else ""
            raise SolverTimeout(f"the time limit{limit} ended during {stage}, before any fleet was found. "
                                "To fix: raise the time limit (solver.time_limit_s, --time-limit or the call's deadline)")

    def seconds_left(self, cap: float) -> float:
        """At most `cap` seconds, and never past the deadline."""
        if self.deadline is None:
            return cap
        return max(min(cap, self.deadline - time.monotonic()), 0.0)

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()


NEVER = Stop()
