"""Process-tree helpers for the orphan tests, read straight from /proc (Linux only)."""

from __future__ import annotations

import os
import time
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid), or None when the process is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return fields[0], int(fields[1])


def cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir(PROC):
        if entry.isdigit():
            info = _stat(int(entry))
            if info is not None:
                children.setdefault(info[1], []).append(int(entry))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie (dead, waiting to be reaped) counts as gone."""
    info = _stat(pid)
    return info is not None and info[0] not in ("Z", "X")


def wait_until(predicate, timeout_s: float, poll_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()


def survivors(pids: set[int], timeout_s: float) -> set[int]:
    """The pids still alive after waiting up to timeout_s for all of them to end."""
    wait_until(lambda: not any(alive(p) for p in pids), timeout_s)
    return {p for p in pids if alive(p)}


def kill_all(pids: set[int]) -> None:
    """Clean up after a failed test: only the processes this test started."""
    for p in pids:
        try:
            os.kill(p, 9)
        except OSError:
            pass
