"""Benchmark: small solves while large jobs run on the same server (issue 26, fair service).

    PYTHONPATH=. .venv/bin/python bench/fair_lanes.py                 # 2 large jobs, 1 small client, 40 s
    PYTHONPATH=. .venv/bin/python bench/fair_lanes.py --large 2 --duration-s 60 --services 200

Spawns `solver-cli serve` on loopback with --max-concurrent-solves 2 (the 2-core target),
starts `--large` clients that each solve a large multi-period workload in a loop (the
generator of bench/solve_scaling.py, `--services` services over 3 periods with a spot
tier, time limit `--large-time-limit-s`; its request is over the server's large-job size),
waits until they hold the server, then one client solves the "small" workload of
bench/load_grpc.py (one LLM service) back to back for `--duration-s`, each call with a
30 s deadline. Prints the small solves' count, p50 / p99 / max latency, how many missed
their deadline, and how many large solves finished meanwhile.

Run it with PYTHONPATH at another checkout to measure that checkout's server (the code
under test is printed). Not a test: record the figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_grpc import SMALL, _quantile, code_under_test, spawn_server  # noqa: E402
from planner_client import PlannerClient, PlannerClientError  # noqa: E402
from horizon_scaling import with_periods  # noqa: E402
from solve_scaling import generate  # noqa: E402


def large_workload(services: int, time_limit_s: float) -> dict:
    w = with_periods(generate(services, 0), 3, 0)
    w["constraints"] = {"pricing_tiers": ["on_demand", "spot"], "max_spot_share": 0.3}
    w["solver"] = {"time_limit_s": time_limit_s}
    return w


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--large", type=int, default=2, help="clients solving the large workload (default 2)")
    p.add_argument("--services", type=int, default=200, help="services of the large workload (default 200)")
    p.add_argument("--large-time-limit-s", type=float, default=20.0)
    p.add_argument("--duration-s", type=float, default=40.0, help="seconds of small solves (default 40)")
    a = p.parse_args(argv)
    proc, target = spawn_server(2, 16)
    print(f"code under test: {code_under_test()}; server {target}; load average {os.getloadavg()[0]:.2f}")
    big = large_workload(a.services, a.large_time_limit_s)
    stop = threading.Event()
    large_done: list[float] = []
    large_errors: list[str] = []

    def large_loop() -> None:
        with PlannerClient(target, timeout_s=600) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                try:
                    c.solve(big)
                    large_done.append(time.perf_counter() - t0)
                except PlannerClientError as exc:
                    large_errors.append(exc.code)

    try:
        with PlannerClient(target, timeout_s=60) as c:
            c.solve(SMALL)  # warm: the small workload's candidates are cached, as on a live server
        threads = [threading.Thread(target=large_loop, daemon=True) for _ in range(a.large)]
        for t in threads:
            t.start()
        time.sleep(3.0)  # the large jobs hold (or wait for) their slots
        latencies, missed = [], 0
        with PlannerClient(target, timeout_s=30) as c:
            t_end = time.monotonic() + a.duration_s
            while time.monotonic() < t_end:
                t0 = time.perf_counter()
                try:
                    c.solve(SMALL)
                    latencies.append(time.perf_counter() - t0)
                except PlannerClientError as exc:
                    missed += exc.code == "DEADLINE_EXCEEDED"
                    latencies.append(time.perf_counter() - t0)
        stop.set()
        latencies.sort()
        print(f"small solves: {len(latencies)} in {a.duration_s:g} s beside {a.large} large job loops "
              f"({a.services} services x 3 periods); p50 {_quantile(latencies, 0.5) * 1000:.0f} ms, "
              f"p99 {_quantile(latencies, 0.99) * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms; "
              f"past the 30 s deadline: {missed}")
        print(f"large solves finished meanwhile: {len(large_done)} "
              f"(each {', '.join(f'{x:.1f}' for x in large_done)} s); errors: {large_errors or 'none'}; "
              f"load average {os.getloadavg()[0]:.2f}")
    finally:
        stop.set()
        proc.terminate()  # large jobs may still run: the server would give them its 30 s grace
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.terminate()  # a second signal ends the grace: calls in flight answer CANCELLED
            proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
