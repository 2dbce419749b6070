"""The CLI on a terminal: progress is shown, SCIP's spurious error lines are not.

Runs the installed CLI with stderr on a pseudo-terminal (so it shows progress, which
registers SCIP callbacks, which make SCIP print two harmless ERROR lines to fd 2).
"""

from __future__ import annotations

import os
import pty
import subprocess

from tests.conftest import EXAMPLES


def _run_on_tty(argv: list[str]) -> tuple[int, bytes, bytes]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closes when the process exits
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = proc.stdout.read()
    return proc.wait(timeout=60), out, seen


def test_terminal_shows_progress_without_scip_error_lines(solver_cli):
    rc, out, terminal = _run_on_tty([solver_cli, "solve", str(EXAMPLES / "llm-platform.json")])
    assert rc == 0
    assert b"OPTIMAL" in out
    assert b"plans found" in terminal  # the progress line reached the terminal
    assert b"SCIPcatchEvent" not in terminal and b"gscip_event_handler" not in terminal
    assert b"ERROR" not in terminal
