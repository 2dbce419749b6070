"""Drop SCIP's spurious event-handler error lines from this process's stderr.

Whenever a SCIP solve registers a callback (progress reports, cancellation), OR-Tools'
gSCIP event handler asks SCIP for an event type it cannot catch globally, and SCIP
prints two harmless `ERROR` lines straight to file descriptor 2 (C code, not Python
logging). Callbacks still work. `install()` routes fd 2 through a pipe whose reader
forwards every line except exactly those two to the real stderr; programs that show
progress (the CLI on a terminal, the server) call it once at start. The library itself
never touches the process's file descriptors.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

SPURIOUS = (b"SCIPcatchEvent does not support variable or row change events",
            b"[gscip_event_handler.cc:124] ERROR: Error <-9> in function call")
_installed: list[tuple[int, threading.Thread]] = []


def install() -> None:
    """Idempotent; a no-op where file descriptors cannot be redirected."""
    if _installed or not hasattr(os, "pipe"):
        return
    try:
        real = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
    except OSError:
        return
    thread = threading.Thread(target=_forward, args=(read_end, real), daemon=True, name="stderr-filter")
    thread.start()
    _installed.append((real, thread))
    atexit.register(restore)


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


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data):]


def restore() -> None:
    """Put the real stderr back and let the reader drain what is left (at exit, or before
    an os._exit, which skips atexit)."""
    if not _installed:
        return
    real, thread = _installed.pop()
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        os.dup2(real, 2)  # closes the pipe's last write end, so the reader sees EOF
    except OSError:
        return
    thread.join(timeout=1.0)
