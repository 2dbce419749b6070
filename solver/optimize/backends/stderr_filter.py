"""Keep the MIP solvers' own prints out of the answer, and their spurious lines out of sight.

Whenever a SCIP solve registers a callback (progress reports, an objective limit) or
takes an interrupter (a cancel), OR-Tools' gSCIP event handler asks SCIP for an event
type it cannot catch globally, and SCIP prints two harmless `ERROR` lines straight to
file descriptor 2 (C code, not Python logging). Both still work. HiGHS's MIP search prints a debugging line
(`HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();`) straight to
file descriptor 1, where it landed inside `solver-cli solve --format json`'s answer and
made it unreadable (a 100-service plan with failure domains by zone, which falls back to
HiGHS). `install()` routes fd 2 - and with `take_stdout` fd 1 - through a pipe whose
reader forwards every line except exactly those to the real stderr; Python's
`sys.stdout`, where the program writes its answer, keeps the real stdout. The CLI's
commands (take_stdout) and the server's workers (fd 2 only: their log is on stderr) call
it once at start. The library itself never touches the process's file descriptors.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

SPURIOUS = (b"SCIPcatchEvent does not support variable or row change events",
            b"[gscip_event_handler.cc:124] ERROR: Error <-9> in function call",
            b"HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();")
_installed: list[tuple[int, threading.Thread, int | None]] = []


def install(take_stdout: bool = False) -> None:
    """Idempotent; a no-op where file descriptors cannot be redirected. With `take_stdout`
    (programs whose stdout is their answer: the CLI) fd 1 is taken too, only while
    `sys.stdout` writes to it (not under a test's capture, which keeps its own); the server
    leaves it, its log is on stderr."""
    if _installed or not hasattr(os, "pipe"):
        return
    try:
        real = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
    except OSError:
        return
    real_out = _take_stdout(write_end) if take_stdout else None
    os.close(write_end)
    thread = threading.Thread(target=_forward, args=(read_end, real), daemon=True, name="stderr-filter")
    thread.start()
    _installed.append((real, thread, real_out))
    atexit.register(restore)


def forwarding_thread() -> threading.Thread | None:
    """The filter's thread, where installed. It only reads and writes raw file descriptors
    (no lock a forked child could wait on): a process that runs it may still fork
    (solver/review/local_backend.py)."""
    return _installed[0][1] if _installed else None


def _take_stdout(write_end: int) -> int | None:
    """Point fd 1 (C code's stdout) at the filter and reopen `sys.stdout` on a copy of the
    real stdout; the copy's fd, or None where sys.stdout is not fd 1."""
    out = sys.stdout
    try:
        if out is None or out is not sys.__stdout__ or out.fileno() != 1:
            return None
        out.flush()
        real_out = os.dup(1)
        os.dup2(write_end, 1)
    except (OSError, ValueError, AttributeError):
        return None
    stream = open(real_out, "w", encoding=out.encoding, errors=out.errors, closefd=False,
                  buffering=1 if out.line_buffering else -1)
    if out.write_through:  # python -u / PYTHONUNBUFFERED: every write reaches the fd at once
        stream.reconfigure(write_through=True)
    sys.stdout = stream
    return real_out


def _forward(read_end: int, real: int) -> None:
    pending = b""
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        kept = [line for line in lines if not any(s in line for s in SPURIOUS)]
        if kept:
            _write_all(real, b"\n".join(kept) + b"\n")
        if pending and b"\r" in pending:  # progress lines rewrite themselves without a newline
            _write_all(real, pending)
            pending = b""
    if pending:
        _write_all(real, pending)
    os.close(read_end)


def _flush_c_stdio() -> None:
    """libc's fflush(NULL): C code's stdout is fully buffered into a pipe or file, and libc
    flushes it only at process exit, after fd 1 is the real stdout again."""
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, ImportError):
        pass


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def restore() -> None:
    """Put the real stderr back and let the reader drain what is left (at exit, or before
    an os._exit, which skips atexit)."""
    if not _installed:
        return
    real, thread, real_out = _installed.pop()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a failed or re-entered flush (Ctrl-C in a write): go on restoring
            pass
    _flush_c_stdio()  # what C code printed and libc still buffers goes through the filter, not around it
    try:
        if real_out is not None:
            os.dup2(real_out, 1)
        os.dup2(real, 2)  # closes the pipe's last write ends, so the reader sees EOF
    except OSError:
        return
    thread.join(timeout=1.0)
