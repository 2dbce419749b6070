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


def usable_cores() -> float:
    """The CPUs this process may run on (its affinity), capped by its cgroup's CPU quota
    (`cpu.max`, as a container's CPU limit sets it)."""
    try:
        cores: float = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max" and float(period) > 0:
            cores = min(cores, float(quota) / float(period))
    except (OSError, ValueError):
        pass
    return cores


def cpu_sample() -> tuple[int, int] | None:
    """(idle, total) CPU time so far of the CPUs this process may run on, in clock ticks
    (Linux's /proc/stat); None where there is no such file."""
    try:
        allowed = {f"cpu{i}".encode() for i in os.sched_getaffinity(0)}
        with open("/proc/stat", "rb") as f:
            lines = f.read().splitlines()
    except (AttributeError, OSError):
        return None
    idle = total = 0
    for line in lines:
        fields = line.split()
        if not fields or fields[0] not in allowed:
            continue
        ticks = [int(x) for x in fields[1:9]]  # user nice system idle iowait irq softirq steal
        idle += ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
        total += sum(ticks)
    return (idle, total) if total else None


def spare_core_since(sample: tuple[int, int] | None) -> bool:
    """A core left idle since `sample` (cpu_sample()) on the CPUs this process may use: at
    least half a core's time unused over that span, and at least two usable cores. The load
    average lags by a minute - a burst of work that just ended still counts, one that just
    began does not - where this measures the span itself."""
    cores = usable_cores()
    if cores < 2:
        return False
    now = cpu_sample()
    if sample is None or now is None or now[1] <= sample[1]:
        return spare_core()
    idle_share = (now[0] - sample[0]) / (now[1] - sample[1])
    return idle_share * cores >= 0.5
