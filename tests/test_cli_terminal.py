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


def test_a_review_still_forks_its_workers_beside_the_output_filter(tmp_path):
    """`solver-cli review` installs the filter, whose thread only moves bytes between file
    descriptors: it used to make every CLI review spawn its workers (no fork warm-up);
    any other thread still does."""
    import sys

    script = tmp_path / "method.py"
    script.write_text(
        "import threading, time\n"
        "from solver.optimize.backends import stderr_filter\n"
        "from solver.review.local_backend import start_method\n"
        "stderr_filter.install(take_stdout=True)\n"
        "print(start_method())\n"
        "threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n"
        "print(start_method())\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, timeout=60, cwd=str(EXAMPLES.parent),
                          text=True)
    assert done.returncode == 0, done.stderr
    expected = "fork" if sys.platform.startswith("linux") else "spawn"
    assert done.stdout.split() == [expected, "spawn"]


def test_a_review_on_a_terminal_shows_its_progress_bar(solver_cli, tmp_path):
    """The bar is shown when stderr is a terminal: asked after the filter was installed, the
    question saw the filter's pipe and the bar never showed."""
    rc, _, terminal = _run_on_tty([solver_cli, "review", str(EXAMPLES / "review-quarterly.yaml"),
                                   "--out", str(tmp_path / "out"), "--workers", "1"])
    assert rc == 0
    assert b"scenarios" in terminal and b"elapsed" in terminal
