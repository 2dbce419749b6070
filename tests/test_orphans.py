"""Issue 11, item 3: review workers (and the multiprocessing resource tracker) die with
their parent, even when the parent is killed with SIGKILL mid-review: the real CLI and
the real server, as subprocesses, their process trees read from /proc."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from grpc_support import slow_workload
from proc_support import cmdline, descendants, kill_all, survivors, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")


def slow_review(scenarios: int = 4) -> dict:
    """Scenarios that each solve for up to two minutes: workers are busy when the parent dies."""
    return {"name": "slow", "base": {"workload": slow_workload(time_limit_s=120)},
            "time_limit_per_scenario_s": 120, "sensitivity": {"enabled": False},
            "scenarios": [{"name": f"growth {i}", "changes": [{"demand": {"factor": 1 + i / 10}}]}
                          for i in range(1, scenarios + 1)]}


def workers_of(pid: int) -> set[int]:
    """Spawned workers (a threaded parent: the server) or forked ones (the CLI: a copy of its command line)."""
    return {p for p in descendants(pid) if "spawn_main" in cmdline(p) or cmdline(p) == cmdline(pid)}


def test_kill_9_of_cli_review_leaves_no_worker_or_tracker(solver_cli, tmp_path: Path) -> None:
    review = tmp_path / "review.json"
    review.write_text(json.dumps(slow_review()))
    cli = subprocess.Popen([solver_cli, "review", str(review), "--out", str(tmp_path / "out"), "--workers", "2",
                            "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tree: set[int] = set()
    try:
        assert wait_until(lambda: len(workers_of(cli.pid)) == 2, 120), "the review never started its 2 workers"
        tree = descendants(cli.pid)
        # The CLI runs one thread, so its workers are forked: no resource tracker then. Spawned
        # workers (a threaded parent) start one, which must die too.
        if any("spawn_main" in cmdline(p) for p in tree):
            assert any("resource_tracker" in cmdline(p) for p in tree), [cmdline(p) for p in tree]
        wait_until(lambda: False, 3)  # let the workers take their first scenarios
        tree = descendants(cli.pid)
        cli.send_signal(signal.SIGKILL)
        cli.wait(30)
        left = survivors(tree, 60)
        assert not left, f"orphans after kill -9: {[cmdline(p) for p in left]}"
    finally:
        if cli.poll() is None:
            cli.kill()
        kill_all(tree)


class _Server:
    """`solver-cli serve --port 0` as a subprocess; the port from its JSON log."""

    def __init__(self, cli: str):
        self.proc = subprocess.Popen([cli, "serve", "--port", "0", "--max-concurrent-solves", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.events: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.port = self.wait_for("server.listening", 60)["port"]

    def _read(self) -> None:
        for line in self.proc.stderr:
            try:
                self.events.put(json.loads(line))
            except ValueError:
                pass

    def wait_for(self, event: str, timeout_s: float) -> dict:
        while True:
            entry = self.events.get(timeout=timeout_s)
            if entry.get("event") == event:
                return entry


def test_kill_9_of_server_during_review_leaves_no_worker(solver_cli) -> None:
    from planner_client import PlannerClient

    server = _Server(solver_cli)
    tree: set[int] = set()

    def review() -> None:
        try:
            with PlannerClient(f"127.0.0.1:{server.port}", retries=0) as client:
                for _ in client.review(slow_review(2)):
                    pass
        except Exception:  # noqa: BLE001 - the server is killed under the call on purpose
            pass

    caller = threading.Thread(target=review, daemon=True)
    try:
        caller.start()
        server.wait_for("review.start", 60)
        assert wait_until(lambda: len(workers_of(server.proc.pid)) == 1, 120), "the review's worker never started"
        wait_until(lambda: False, 3)
        tree = descendants(server.proc.pid)
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(30)
        left = survivors(tree, 60)
        assert not left, f"orphans after kill -9 of the server: {[cmdline(p) for p in left]}"
        caller.join(30)
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
        kill_all(tree)


def test_a_worker_started_after_its_parent_died_exits_at_once() -> None:
    """The race die_with_parent closes: a parent killed before the worker armed the signal."""
    code = ("import os, sys; from solver.lifeline import die_with_parent; "
            "die_with_parent(int(sys.argv[1])); print('still here')")
    # A parent pid that is not ours: the check must see a different parent and exit 1.
    proc = subprocess.run([sys.executable, "-c", code, str(os.getpid() + 1_000_000)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and "still here" not in proc.stdout


def test_die_with_parent_arms_the_kernel_signal_on_linux() -> None:
    code = ("import os; from solver.lifeline import die_with_parent; "
            "print(die_with_parent(os.getppid()))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "pdeathsig", proc.stderr
