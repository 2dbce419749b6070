"""`solver-cli serve` as a real process: startup, SIGTERM that drains calls in flight, bad flags."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time

import pytest

from cli.main import main as cli_main
from grpc_support import SMALL, slow_workload
from planner_client import PlannerClient, PlannerClientError


class ServeProcess:
    """`solver-cli serve --port 0` with its JSON log lines collected as they come."""

    def __init__(self, cli: str, *flags: str):
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([cli, "serve", "--port", "0", *flags], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.port = self.wait_for("server.listening", 60)["port"]

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.put(line)

    def drain(self) -> None:
        """Parse the log lines that have arrived so far into `seen`."""
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            try:
                self.seen.append(json.loads(line))
            except ValueError:
                continue

    def wait_for(self, event: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # the solver library's own lines
            self.seen.append(entry)
            if entry.get("event") == event:
                return entry
        raise AssertionError(f"no {event!r} log line; saw {[e.get('event') for e in self.seen]}")


def test_sigterm_drains_the_call_in_flight_then_exits_0(solver_cli):
    server = ServeProcess(solver_cli, "--grace-s", "20", "--max-concurrent-solves", "1")
    try:
        result: dict = {}

        def solve() -> None:
            with PlannerClient(f"127.0.0.1:{server.port}") as c:
                try:
                    result["plan"] = c.solve(slow_workload(), time_limit_s=3.0)
                except PlannerClientError as exc:
                    result["error"] = exc

        caller = threading.Thread(target=solve)
        caller.start()
        started = server.wait_for("solve.start", 30)
        server.proc.send_signal(signal.SIGTERM)
        draining = server.wait_for("server.draining", 10)
        assert draining["solves_running"] == 1
        # New calls are refused while the old one finishes.
        with PlannerClient(f"127.0.0.1:{server.port}", timeout_s=5, retries=0) as c:
            with pytest.raises(PlannerClientError) as err:
                c.solve(SMALL)
            # UNAVAILABLE normally; CANCELLED when the new connection raced the shutdown.
            assert err.value.code in ("UNAVAILABLE", "CANCELLED")
        caller.join(30)
        assert "error" not in result, result.get("error")
        assert result["plan"]["status"] == "feasible"  # the full 3 s solve ran to its limit
        assert server.proc.wait(30) == 0
        server.wait_for("server.stopped", 5)
        end = [e for e in server.seen if e.get("event") == "rpc.end" and e.get("method", "").endswith("/Solve")]
        assert end and end[0]["code"] == "OK" and end[0]["request_id"] == started["request_id"]
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


@pytest.mark.parametrize("flags, message", [
    (["--tls-cert", "{tmp}/cert.pem"], "both --tls-cert and --tls-key"),
    (["--max-concurrent-solves", "0"], "--max-concurrent-solves must be at least 1"),
    (["--workers", "3", "--max-concurrent-solves", "2", "--max-queue", "4"], "--workers (3) must exceed"),
    (["--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"], "cannot read --tls-cert"),
    (["--tls-cert", "{tmp}/cert.pem", "--tls-key", "{tmp}/cert.pem"], "--tls-cert is not a PEM file"),
])
def test_bad_serve_flags_exit_2_without_a_traceback(capsys, tmp_path, flags, message):
    (tmp_path / "cert.pem").write_text("not used")
    assert cli_main(["serve", "--port", "0", *(f.format(tmp=tmp_path) for f in flags)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_taken_port_exits_5(capsys):
    from grpc_support import running_server

    with running_server() as (_planner, target):
        port = target.rsplit(":", 1)[1]
        assert cli_main(["serve", "--port", port]) == 5
    err = capsys.readouterr().err
    assert "cannot start the server" in err and "Traceback" not in err
