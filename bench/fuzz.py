"""Fuzzing benchmark (issue 11): N generated inputs through every way into the planner,
counted by outcome, and the YAML alias bomb's figures.

    .venv/bin/python bench/fuzz.py                      # 100,000 inputs, seed 0
    .venv/bin/python bench/fuzz.py --inputs 5000 --seed 3 --targets document,server

Targets and outcomes are described in tests/fuzz_harness.py; the inputs come from the
hypothesis strategies in tests/fuzz_strategies.py. Goal: 0 INTERNAL, 0 traceback, 0 hang
(every input answered within 2 s). Exit status 1 when any input failed, with up to five
failing inputs per kind printed.

The bomb section times the 666-byte "billion laughs" of tests/test_input_limits.py:
in process (median of 20), through `solver-cli solve` (wall time, which includes the
CLI's start-up; a one-line invalid workload is timed the same way for comparison), and
through a real server: the Solve call's latency, and health checks' latency while 30
bombs arrive at once (the server's default settings).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import fuzz_harness  # noqa: E402


def cli_path() -> str:
    exe = Path(sys.executable).with_name("solver-cli")
    if not exe.exists():
        sys.exit("solver-cli is not installed next to this Python: pip install -e .")
    return str(exe)


def the_bomb() -> str:
    from test_input_limits import yaml_bomb as issue_bomb

    return issue_bomb()


def bomb_figures(cli: str) -> None:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from server.generated.fleetplanner.v1 import planner_pb2 as pb
    from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
    from solver.errors import InputError
    from solver.documents.parse import parse_text

    bomb = the_bomb()
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        try:
            parse_text(bomb, ".yaml")
        except InputError:
            pass
        times.append(time.perf_counter() - t0)
    print(f"bomb ({len(bomb.encode())} bytes): refused in process in {statistics.median(times) * 1000:.2f} ms "
          f"(median of 20, max {max(times) * 1000:.2f} ms)")

    tmp = Path(fuzz_harness.make_fixture_dir())
    (tmp / "bomb.yaml").write_text(bomb)
    (tmp / "small.json").write_text('{"services": 1}')
    for name in ("bomb.yaml", "small.json"):
        walls = []
        for _ in range(3):
            t0 = time.perf_counter()
            proc = subprocess.run([cli, "solve", str(tmp / name)], capture_output=True, text=True, timeout=120)
            walls.append(time.perf_counter() - t0)
        print(f"solver-cli solve {name}: exit {proc.returncode}, median wall {statistics.median(walls):.2f} s (of 3)")
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()

    # The server's default settings (not the fuzz run's), so the thread count is the real one.
    server_proc = subprocess.Popen([cli, "serve", "--port", "0"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
    port = None
    for line in server_proc.stderr:
        if '"server.listening"' in line:
            port = json.loads(line)["port"]
            break
    threading.Thread(target=lambda: [None for _ in server_proc.stderr], daemon=True).start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = pb_grpc.PlannerServiceStub(channel)
            health = health_pb2_grpc.HealthStub(channel)
            health.Check(health_pb2.HealthCheckRequest(), timeout=10)
            single = []
            for _ in range(20):
                t0 = time.perf_counter()
                try:
                    stub.Solve(pb.SolveRequest(workload=pb.Workload(yaml=bomb)), timeout=10)
                    code = "OK"
                except grpc.RpcError as exc:
                    code = exc.code().name
                single.append(time.perf_counter() - t0)
            print(f"server: one bomb -> {code} in {statistics.median(single) * 1000:.1f} ms (median of 20)")
            # The same burst of a one-line invalid workload: what any 30 quick calls cost the server.
            for label, text in (("bombs", bomb), ("one-line invalid workloads", "services: 1")):
                codes: list[str] = []

                def send(text=text) -> None:
                    try:
                        stub.Solve(pb.SolveRequest(workload=pb.Workload(yaml=text)), timeout=10)
                        codes.append("OK")
                    except grpc.RpcError as exc:
                        codes.append(exc.code().name)

                health_s = []
                for _round in range(5):
                    callers = [threading.Thread(target=send) for _ in range(30)]
                    for c in callers:
                        c.start()
                    t0 = time.perf_counter()
                    health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                    health_s.append(time.perf_counter() - t0)
                    for c in callers:
                        c.join(60)
                counts = {c: codes.count(c) for c in sorted(set(codes))}
                print(f"server: 5 rounds of 30 {label} at once -> {counts}; health check during each: "
                      f"median {statistics.median(health_s) * 1000:.1f} ms, max {max(health_s) * 1000:.1f} ms")
    finally:
        server_proc.terminate()
        server_proc.wait(30)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default=",".join(fuzz_harness.STRATEGIES),
                    help=f"comma-separated subset of {', '.join(fuzz_harness.STRATEGIES)}")
    ap.add_argument("--no-bomb", action="store_true", help="skip the bomb timings")
    args = ap.parse_args()
    cli = cli_path()
    wanted = set(args.targets.split(","))
    counts = {t: n for t, n in fuzz_harness.main_counts(args.inputs).items() if t in wanted}
    print(f"fuzzing {sum(counts.values()):,} inputs (seed {args.seed}): "
          + ", ".join(f"{t} {n:,}" for t, n in counts.items()), flush=True)
    t0 = time.monotonic()
    report = fuzz_harness.run(counts, seed=args.seed, cli=cli,
                              progress=lambda target, r: print(f"  {target} done after {time.monotonic() - t0:.0f} s",
                                                               flush=True))
    print(report.table())
    for kind, examples in report.examples.items():
        print(f"\n{kind}:")
        for e in examples:
            print("  " + e[:1500])
    if not args.no_bomb:
        print()
        bomb_figures(cli)
    return 1 if report.failures() else 0


if __name__ == "__main__":
    sys.exit(main())
