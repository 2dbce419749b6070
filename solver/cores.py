"""Whether this machine has a core to spare now (for a helper process or a second solver)."""

from __future__ import annotations

import os


def spare_core() -> bool:
    """A core that nothing else is using now: the 1-minute load average (this planner
    counted) half a core below the cores this process may run on. Without one, work put on
    "the other core" would only take time from the solver (and from other solves on a busy
    server)."""
    try:
        return os.getloadavg()[0] < len(os.sched_getaffinity(0)) - 0.5
    except (AttributeError, OSError):
        return False
