"""The values under load of the likely plan, computed in a forked process while the MIP runs.

Every assignment of a plan reports its percentiles at the planned load (`at_load`, a
queueing-model run of ~4-10 ms each): ~0.4 s of a 100-service plan and ~5 s of a
1,000-service one, all of it after the solver has finished. Which assignments the plan
will have is known well before that: the services' own best plans (the MIP's start,
solver/optimize/service_bounds.py) share 98-100 % of the final plan's (service,
configuration, replicas, routed traffic) on the benchmark workloads (104 of 104 and 114
of 117 at 100 services, 1,106 of 1,112 at 1,000). So as the solve starts, a forked child
computes `at_load` for the start plan's assignments, while the solver - C++ that runs
on the other core - searches. When the plan is final, `values` reads what the child has
finished; the planner computes the rest itself, from the front, while the child carries
on from the back; whatever the child has not reached is dropped. Only with a spare core
(`spare_core`): on a busy machine the child's work would be taken from the solver's core.

Same function, same inputs, so the same values: a prefetched value is the one the planner
would compute (tests/test_prefetch.py). A child, not a thread: a thread would hold the
GIL that the solver's callbacks need at every node.

The child dies with the planner (PR_SET_PDEATHSIG; solver/lifeline.py), is killed
when the plan is done, cancelled or fails (`close`), writes only to an anonymous
in-memory file, and never runs the parent's exit handlers.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys

# Imported here, not in the child: nothing is imported after the fork.
from solver.compile.load_caps import at_load, real_routed
from solver.lifeline import die_with_parent

# Below this many LLM assignments the child's start (a fork: ~5-30 ms) costs about what it saves.
MIN_ASSIGNMENTS = 16


def usable() -> bool:
    """A fork and a second core to run it on (Linux; macOS forks are unsafe with threads)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) >= 2


def spare_core() -> bool:
    """A core that nothing else is using now: the 1-minute load average (this planner
    counted) half a core below the cores this process may run on. Without one the child
    would only take time from the solver (and from other solves on a busy server)."""
    try:
        return os.getloadavg()[0] < len(os.sched_getaffinity(0)) - 0.5
    except (AttributeError, OSError):
        return False


class AtLoadPrefetch:
    """`start` once with the likely plan; `values` for the final plan's assignments; `close` always."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.problem = None
        self._pid: int | None = None
        self._fd: int | None = None  # the child's records: 4-byte length, then the pickle
        self._read_to = 0  # how far they have been read (pread: the child's offset is shared)
        self._items: list[tuple] = []
        self._done: dict[int, object] = {}
        self._index: dict[tuple, int] = {}

    def start(self, problem, catalog, solution) -> bool:
        """Fork the child for `solution`'s estimated assignments (measured ones are cheap).
        Does nothing when disabled, already started or the plan is small; never raises."""
        if not self.enabled or self._pid is not None or solution is None:
            return False
        by_key = {c.key: c for c in problem.configs}
        services = {s.name: s for s in problem.services}
        items = []
        for a in solution.assignments:
            c = by_key.get(a.config_key)
            if c is not None and c.source != "measured" and a.replicas > 0:
                svc = services[a.service]  # at the real demand's rate, as service_results asks
                items.append((svc, c, a.replicas, real_routed(problem, svc, a.routed)))
        # (Checked here, not per plan: most plans are small and never get this far.)
        if len(items) < MIN_ASSIGNMENTS or not usable() or not spare_core():
            return False
        try:
            self._fd = os.memfd_create("at-load-prefetch") if hasattr(os, "memfd_create") else _temporary_fd()
        except OSError:
            return False
        self.problem = problem
        self._items = items
        self._index = {_key(svc.name, c, r, routed): i for i, (svc, c, r, routed) in enumerate(items)}
        parent = os.getpid()
        pid = fork_flushed()
        if pid is None:
            self._drop_file()
            return False
        if pid == 0:  # the child: compute from the back, then leave without the parent's teardown
            try:
                _child(parent, self._fd, catalog, problem.calibration, items)
            finally:
                os._exit(0)
        self._pid = pid
        return True

    def values(self, problem, svc_name: str, config, replicas: int, routed) -> object | None:
        """The child's `at_load` for this assignment if it has finished it, else None (the
        caller computes it). Only for the problem the child was started for."""
        if self._pid is None or problem is not self.problem:
            return None
        i = self._index.get(_key(svc_name, config, replicas, tuple(routed)))
        if i is None:
            return None
        if i not in self._done:
            self._read()
        return self._done.get(i)

    def close(self) -> None:
        """Kill and reap the child (if any); drop its file. Safe to call more than once."""
        pid, self._pid = self._pid, None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self._drop_file()

    def _read(self) -> None:
        """The records the child has written since the last read; a record still being
        written ends the read and is read whole next time."""
        try:
            data = os.pread(self._fd, _READ_MAX, self._read_to)
        except OSError:
            return
        at = 0
        while at + 4 <= len(data):
            n = int.from_bytes(data[at:at + 4], "little")
            if at + 4 + n > len(data):
                break
            i, value = pickle.loads(data[at + 4:at + 4 + n])
            self._done[i] = value
            at += 4 + n
        self._read_to += at

    def _drop_file(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None


def fork_flushed() -> int | None:
    """os.fork() after flushing this process's output (else the child's exit could write the
    parent's buffers again); None where the fork fails."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        return os.fork()
    except OSError:
        return None


def _key(svc_name: str, config, replicas: int, routed: tuple) -> tuple:
    return svc_name, config, replicas, routed


_READ_MAX = 1 << 26  # far more than any plan's records (~200 bytes each)


def _temporary_fd() -> int:
    import tempfile

    fd, path = tempfile.mkstemp(prefix="at-load-prefetch-")
    os.unlink(path)
    return fd


def _child(parent: int, fd: int, catalog, calibration, items: list[tuple]) -> None:
    die_with_parent(parent)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    # Short-lived: a collection would walk (and copy, page by page) the parent's whole heap.
    gc.disable()
    for i in range(len(items) - 1, -1, -1):  # from the back: the planner starts at the front
        svc, c, replicas, routed = items[i]
        try:
            value = at_load(catalog, calibration, svc, c, replicas, routed)
        except Exception:
            continue  # the planner computes it again and reports whatever went wrong
        record = pickle.dumps((i, value), protocol=pickle.HIGHEST_PROTOCOL)
        data = memoryview(len(record).to_bytes(4, "little") + record)
        while data:  # the reader takes only whole records
            data = data[os.write(fd, data):]
