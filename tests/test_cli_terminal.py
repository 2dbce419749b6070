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


def test_c_level_prints_on_stdout_stay_out_of_the_answer(tmp_path):
    """HiGHS prints a debugging line straight to fd 1 during some MIP searches; it used to land
    inside `solve --format json`'s answer. With the filter installed (as the CLI and the server
    do) fd 1 goes through it to stderr, and Python's stdout keeps the real stdout."""
    import sys

    script = tmp_path / "c_prints.py"
    script.write_text(
        "import os, sys\n"
        "from solver.optimize.backends import stderr_filter\n"
        "stderr_filter.install()\n"
        "print('{\"status\": \"optimal\"')\n"
        "os.write(1, b'HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();\\n')\n"
        "os.write(1, b'a C library line\\n')\n"
        "os.write(2, b'SCIPcatchEvent does not support variable or row change events\\n')\n"
        "print('}')\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=60,
                          cwd=str(EXAMPLES.parent))
    assert done.returncode == 0, done.stderr
    assert done.stdout == b'{"status": "optimal"\n}\n'  # the answer alone, in order
    assert b"a C library line" in done.stderr  # not lost: on stderr
    assert b"HighsMipSolverData" not in done.stderr and b"SCIPcatchEvent" not in done.stderr
