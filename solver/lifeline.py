"""Worker processes that die with the process that started them.

A worker pool's `finally` stops its workers when the parent ends normally, on Ctrl-C
or when a caller cancels. It cannot run when the parent is killed (kill -9, the OOM
killer, a crash): the workers would go on solving for nobody, and the multiprocessing
resource tracker, which waits for every holder of its pipe, would stay with them.

`die_with_parent(parent_pid)`, called first in each worker, closes that gap:
- on Linux, prctl(PR_SET_PDEATHSIG, SIGKILL) makes the kernel kill the worker the
  moment its parent dies. (The signal is tied to the parent *thread* that started the
  worker: the pools here start and wait for their workers from one thread, which
  outlives them.)
- elsewhere, a daemon thread polls the parent's pid every half second.
- either way, a parent that died before the worker got here (spawned workers take a
  second or two to start) is noticed at once: the worker exits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 0.5


def die_with_parent(parent_pid: int) -> str:
    """Arrange for this process to end when `parent_pid` does; returns how ("pdeathsig" or "watchdog")."""
    how = "pdeathsig" if _arm_pdeathsig() else "watchdog"
    if os.getppid() != parent_pid:  # the parent is already gone: we were re-parented
        os._exit(1)
    if how == "watchdog":
        threading.Thread(target=_watch, args=(parent_pid,), daemon=True, name="parent-watchdog").start()
    return how


def _arm_pdeathsig() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(POLL_S)
    os._exit(1)
