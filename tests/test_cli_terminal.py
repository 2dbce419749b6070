"""The CLI on a terminal: progress is shown, SCIP's spurious error lines are not.

Runs the installed CLI with stderr on a pseudo-terminal (so it shows progress, which
registers SCIP callbacks, which make SCIP print two harmless ERROR lines to fd 2).
"""

from __future__ import annotations

import os
import pty
import subprocess

import pytest

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


@pytest.mark.parametrize("unbuffered", [False, True])
def test_c_level_prints_on_stdout_stay_out_of_the_answer(tmp_path, unbuffered):
    """HiGHS prints a debugging line straight to fd 1 during some MIP searches; it used to land
    inside `solve --format json`'s answer. With the filter installed as the CLI does
    (take_stdout) fd 1 goes through it to stderr, and Python's stdout keeps the real stdout:
    raw writes and libc's own buffered printf (flushed through the filter before fd 1 is
    put back), with Python's output buffered or not (PYTHONUNBUFFERED)."""
    import sys

    script = tmp_path / "c_prints.py"
    script.write_text(
        "import ctypes, os, sys\n"
        "from solver.optimize.backends import stderr_filter\n"
        "stderr_filter.install(take_stdout=True)\n"
        "libc = ctypes.CDLL(None)\n"
        "print('{\"status\": \"optimal\"')\n"
        "os.write(1, b'HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();\\n')\n"
        "os.write(1, b'a C library line\\n')\n"
        "libc.printf(b'HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();\\n')\n"
        "libc.printf(b'a C stdio line\\n')\n"
        "os.write(2, b'SCIPcatchEvent does not support variable or row change events\\n')\n"
        "print('}')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=60,
                          cwd=str(EXAMPLES.parent), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b'{"status": "optimal"\n}\n'  # the answer alone, in order
    assert b"a C library line" in done.stderr and b"a C stdio line" in done.stderr  # not lost: on stderr
    assert b"HighsMipSolverData" not in done.stderr and b"SCIPcatchEvent" not in done.stderr
