"""A list of independent computations shared with a forked child on the spare core.

`map_split(fn, items)` is `[fn(x) for x in items]`. Where a second core is free (Linux, two
usable cores, the load average half a core below them: solver/output/prefetch.py's rule)
and the work is worth a fork, the items' indices go into a pipe first; then this process
and a forked child both take the next index from the pipe (a 4-byte read of a pipe that
holds whole 4-byte records is atomic, so each index goes to exactly one of them), in the
order given: the most urgent items first. The child writes each result into an anonymous
in-memory file; when the pipe is empty the parent waits for the child's last item, reads
its results, and computes itself whatever the child did not deliver (it failed, or was
killed). Same function, same inputs: the same results as computed here (the queueing
model's caps are deterministic functions of their arguments; tests/test_lazy_caps.py
compares).

The child dies with the parent (PR_SET_PDEATHSIG), is killed when the parent stops early
(a cancel, the deadline, an error), never runs the parent's exit handlers, and never
collects garbage (a collection would touch, and so copy, the parent's whole heap).
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence

from solver.interrupt import NEVER, Stop
from solver.lifeline import die_with_parent
from solver.cores import spare_core
from solver.output.prefetch import anonymous_file, usable

_RECORD = 4  # bytes per index in the pipe
_MAX_ITEMS = 16_000  # indices the pipe holds (64 KiB) without blocking the writer
_READ_MAX = 1 << 28

# Switched off by tests that compare with the sequential path, and by FLEET_SPLIT_WORK=0.
ENABLED = os.environ.get("FLEET_SPLIT_WORK", "") not in ("0", "false", "off")


def map_split(fn: Callable[[object], object], items: Sequence, *, helper: bool = True, stop: Stop = NEVER,
              min_items: int = 4, stats: dict | None = None) -> list:
    """[fn(x) for x in items], shared with a forked child when `helper` and a spare core
    allow it. `stop` is checked between items (a cancel or the deadline kills the child and
    raises). `stats` (if given) gets "helper_items" added: how many results the child delivered."""
    n = len(items)
    if not (helper and ENABLED and min_items <= n <= _MAX_ITEMS and usable() and spare_core()):
        out = []
        for x in items:
            stop.check("the percentile caps")
            out.append(fn(x))
        return out
    try:
        rq, wq = os.pipe()
        fd = anonymous_file("split-work")
    except OSError:
        return [fn(x) for x in items]
    try:
        os.write(wq, b"".join(i.to_bytes(_RECORD, "little") for i in range(n)))
    finally:
        os.close(wq)
    parent = os.getpid()
    pid = _fork_flushed()
    if pid == 0:  # the child
        try:
            _child(parent, rq, fd, fn, items)
        finally:
            os._exit(0)
    results: dict[int, object] = {}
    try:
        if pid is None:  # no fork: everything here
            os.close(rq)
            rq = None
            for i, x in enumerate(items):
                stop.check("the percentile caps")
                results[i] = fn(x)
            return [results[i] for i in range(n)]
        while True:
            stop.check("the percentile caps")
            raw = os.read(rq, _RECORD)
            if len(raw) < _RECORD:
                break
            i = int.from_bytes(raw, "little")
            results[i] = fn(items[i])
        _wait(pid)
        pid = None
        theirs = _read(fd)
        if stats is not None:
            stats["helper_items"] = stats.get("helper_items", 0) + sum(1 for i in theirs if i not in results)
        for i, value in theirs.items():
            results.setdefault(i, value)
        for i in range(n):  # what the child did not deliver
            if i not in results:
                stop.check("the percentile caps")
                results[i] = fn(items[i])
        return [results[i] for i in range(n)]
    finally:
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _wait(pid)
        if rq is not None:
            os.close(rq)
        os.close(fd)


def _wait(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _read(fd: int) -> dict[int, object]:
    try:
        data = os.pread(fd, _READ_MAX, 0)
    except OSError:
        return {}
    out = {}
    at = 0
    while at + 4 <= len(data):
        size = int.from_bytes(data[at:at + 4], "little")
        if at + 4 + size > len(data):
            break
        try:
            i, ok, value = pickle.loads(data[at + 4:at + 4 + size])
        except Exception:  # noqa: BLE001 - a record that does not load is computed again
            break
        if ok:
            out[i] = value
        at += 4 + size
    return out


def _fork_flushed() -> int | None:
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


def _child(parent: int, rq: int, fd: int, fn, items) -> None:
    die_with_parent(parent)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    gc.disable()
    while True:
        raw = os.read(rq, _RECORD)
        if len(raw) < _RECORD:
            return
        i = int.from_bytes(raw, "little")
        try:
            record = pickle.dumps((i, True, fn(items[i])), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - the parent computes it again and sees what went wrong
            record = pickle.dumps((i, False, None), protocol=pickle.HIGHEST_PROTOCOL)
        data = memoryview(len(record).to_bytes(4, "little") + record)
        while data:
            data = data[os.write(fd, data):]
