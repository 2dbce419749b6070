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


def cpu_sample() -> tuple[int, int] | None:
    """(idle, total) CPU time of the whole machine so far, in clock ticks (Linux's
    /proc/stat); None where there is no such file."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 5 or fields[0] != b"cpu":
        return None
    ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return idle, sum(ticks)


def spare_core_since(sample: tuple[int, int] | None) -> bool:
    """A core left idle since `sample` (cpu_sample()): at least half a core's time unused
    over that span. The load average lags by a minute - a burst of work that just ended
    still counts, one that just began does not - where this measures the span itself."""
    now = cpu_sample()
    if sample is None or now is None or now[1] <= sample[1]:
        return spare_core()
    idle_share = (now[0] - sample[0]) / (now[1] - sample[1])
    return idle_share * (os.cpu_count() or 1) >= 0.5
