"""The values under load of the likely plan, computed in a helper process while the MIP runs.

Every assignment of a plan reports its percentiles at the planned load (`at_load`, a
queueing-model run of ~4-10 ms each): ~0.4 s of a 100-service plan and ~5 s of a
1,000-service one, all of it after the solver has finished. Which assignments the plan
will have is known well before that: the services' own best plans (the MIP's start,
solver/optimize/service_bounds.py) share 98-100 % of the final plan's (service,
configuration, replicas, routed traffic) on the benchmark workloads (104 of 104 and 114
of 117 at 100 services, 1,106 of 1,112 at 1,000). So as the solve starts, a helper
process computes `at_load` for the start plan's assignments, while the solver - C++ that
runs on the other core - searches. When the plan is final, `values` reads what the helper
has finished; the planner computes the rest itself, from the front, while the helper
carries on from the back; whatever the helper has not reached is dropped. Only with a
spare core (`spare_core`): on a busy machine its work would be taken from the solver's core.

Same function, same inputs, so the same values: a prefetched value is the one the planner
would compute (tests/test_prefetch.py). A process, not a thread: a thread would hold the
GIL that the solver's callbacks (progress reports, an objective limit) need. A fresh interpreter
(solver/output/prefetch_child.py), not a fork: a forked child shares the planner's heap
page by page, and every page the planner writes while the MIP runs (reference counts of
every configuration it reads) is then copied - the child of a 5,000-service plan held
640 MB of such copies beside the planner's 1.9 GB. The fresh one reads only its inputs (a
pickle of the catalog, the calibration and the assignments: 0.8 MB at 1,000 services) and
starts in ~0.15 s.

The helper dies with the planner (PR_SET_PDEATHSIG; solver/lifeline.py), is killed when
the plan is done, cancelled or fails (`close`), and reads and writes only anonymous
in-memory files.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

from solver.compile.load_caps import real_routed
from solver.cores import spare_core

# Below this many LLM assignments the helper's start (~0.15 s, on the other core) costs
# about what it saves.
MIN_ASSIGNMENTS = 16
# The helper imports exactly what this process would: isolated (-I: no current directory,
# no PYTHON* variables, no user site-packages), on this process's own module path. A
# `solver` package in the working directory would otherwise come first under `-m`.
_HELPER = "import sys; sys.path[:] = {path!r}; from solver.output.prefetch_child import main; sys.exit(main(sys.argv[1:]))"
# One core's work: no thread pools in the numeric libraries (the CLI sets the same for itself).
_ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def usable() -> bool:
    """Linux with a second core for a helper process (the prefetch's; solver/compile/split_work.py
    forks, and macOS forks are unsafe with threads)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) >= 2


class AtLoadPrefetch:
    """`start` once with the likely plan; `values` for the final plan's assignments; `close` always."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.problem = None
        self._proc: subprocess.Popen | None = None
        self._pid: int | None = None  # the helper's
        self._fd: int | None = None  # the child's records: 4-byte length, then the pickle
        self._read_to = 0  # how far they have been read (pread: the child's offset is shared)
        self._items: list[tuple] = []
        self._done: dict[int, object] = {}
        self._index: dict[tuple, int] = {}

    def start(self, problem, catalog, solution) -> bool:
        """Start the helper for `solution`'s estimated assignments (measured ones are cheap).
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
        if len(items) < MIN_ASSIGNMENTS or not usable() or not spare_core() or getattr(sys, "frozen", False):
            return False  # (frozen: sys.executable is the application, not an interpreter)
        try:
            inputs = pickle.dumps((catalog, problem.calibration, items), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an object that does not pickle: the planner computes them all
            return False
        in_fd = None
        try:
            self._fd = anonymous_file("at-load-prefetch")
            in_fd = anonymous_file("at-load-inputs")
            view = memoryview(inputs)
            while view:
                view = view[os.write(in_fd, view):]
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-c", _HELPER.format(path=list(sys.path)), str(os.getpid()), str(in_fd),
                 str(self._fd)],
                pass_fds=(in_fd, self._fd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env={**os.environ, **_ONE_THREAD})
        except (OSError, ValueError, TypeError, subprocess.SubprocessError):
            self._drop_file()
            return False
        finally:
            if in_fd is not None:
                os.close(in_fd)  # the helper holds its own copy of the descriptor
        self.problem = problem
        self._items = items
        self._index = {_key(svc.name, c, r, routed): i for i, (svc, c, r, routed) in enumerate(items)}
        self._pid = self._proc.pid
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
        """Kill and reap the helper (if any); drop its file. Safe to call more than once."""
        proc, self._proc, self._pid = self._proc, None, None
        if proc is not None:
            proc.kill()  # nothing if it has ended already
            proc.wait()
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


def _key(svc_name: str, config, replicas: int, routed: tuple) -> tuple:
    return svc_name, config, replicas, routed


_READ_MAX = 1 << 26  # far more than any plan's records (~200 bytes each)


def anonymous_file(name: str) -> int:
    """A read-write descriptor of a file in memory that no path names."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create(name)  # close-on-exec: a spawned helper gets it through pass_fds
    import tempfile

    fd, path = tempfile.mkstemp(prefix=name + "-")
    os.unlink(path)
    return fd
