"""Benchmarks of the server's worker pool, against `solver-cli serve` in its own process.

    .venv/bin/python bench/server_pool.py memory [--solves 100] [--services 300]
    .venv/bin/python bench/server_pool.py cancel [--services 60] [--repeats 3]
    .venv/bin/python bench/server_pool.py bombs  [--bombs 30]

memory  consecutive N-service solves; after each, the memory of the server's whole process
        tree (server, forkserver, resource tracker, workers): the sum of RSS (which counts
        the pages workers share with the forkserver once per process) and of PSS (shared
        pages split among their users: what the tree really occupies).
cancel  calls cancelled at increasing delays after they start, so that the cancels land in
        every stage; the server logs each stop (worker.stop: stage, cooperative or killed,
        and the time from the cancel to the free worker slot), which this prints by stage.
bombs   N YAML alias bombs at once while a health check runs every 20 ms: the health
        checks' latency, the bombs' status codes, and how long SIGTERM takes to stop it all.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from grpc_support import SMALL, generated_workload, yaml_alias_bomb  # noqa: E402
from server.generated.fleetplanner.v1 import planner_pb2 as pb  # noqa: E402
from server.pool import children_of, process_tree_memory_mib  # noqa: E402


class Server:
    """`solver-cli serve --port 0` with its JSON log lines collected."""

    def __init__(self, *flags: str):
        cli = Path(sys.executable).with_name("solver-cli")
        self.proc = subprocess.Popen([str(cli), "serve", "--port", "0", *flags], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.events: queue.Queue = queue.Queue()
        self.lines: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.port = self.wait("server.listening", 120)["port"]
        self.target = f"127.0.0.1:{self.port}"

    def _read(self) -> None:
        for line in self.proc.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # the solver library's own lines
            self.lines.append(entry)
            self.events.put(entry)

    def wait(self, event: str, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                entry = self.events.get(timeout=0.2)
            except queue.Empty:
                continue
            if entry.get("event") == event:
                return entry
        raise SystemExit(f"no {event} from the server within {timeout_s} s")

    def tree(self) -> list[int]:
        out, stack = [self.proc.pid], [self.proc.pid]
        while stack:
            for child in children_of(stack.pop()):
                out.append(child)
                stack.append(child)
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def solve_request(workload: dict, explain: bool = False) -> bytes:
    return pb.SolveRequest(workload=pb.Workload(json=json.dumps(workload)), explain=explain).SerializeToString()


def bench_memory(args) -> None:
    flags = ["--max-concurrent-solves", str(args.slots)]
    if args.worker_max_rss_mib:
        flags += ["--worker-max-rss-mib", str(args.worker_max_rss_mib)]
    server = Server(*flags)
    channel = grpc.insecure_channel(server.target)
    solve = channel.unary_unary("/fleetplanner.v1.PlannerService/Solve")
    start = process_tree_memory_mib(server.tree())
    print(f"{args.solves} consecutive {args.services}-service solves; server tree at start: "
          f"RSS {start['rss_mib']:.0f} MiB, PSS {start['pss_mib']:.0f} MiB ({len(server.tree())} processes)")
    print(f"{'solve':>5} {'seconds':>8} {'tree RSS MiB':>13} {'tree PSS MiB':>13} {'processes':>10} "
          f"{'server RSS':>11} {'retired':>8}  load", flush=True)
    rows = []
    for i in range(args.solves):
        t0 = time.monotonic()
        solve(solve_request(generated_workload(args.services, seed=i % args.distinct)), timeout=3600)
        took = time.monotonic() - t0
        time.sleep(0.2)  # let a recycled worker's replacement register
        tree = server.tree()
        mem = process_tree_memory_mib(tree)
        own = process_tree_memory_mib([server.proc.pid])
        retired = sum(1 for e in server.lines if e.get("event") == "worker.retired")
        rows.append(mem)
        print(f"{i + 1:>5} {took:>8.1f} {mem['rss_mib']:>13.0f} {mem['pss_mib']:>13.0f} {len(tree):>10} "
              f"{own['rss_mib']:>11.0f} {retired:>8}  {os.getloadavg()[0]:.1f}", flush=True)
    half = rows[len(rows) // 2:]
    print(f"max tree RSS {max(r['rss_mib'] for r in rows):.0f} MiB, max tree PSS {max(r['pss_mib'] for r in rows):.0f} MiB; "
          f"second half: RSS {min(r['rss_mib'] for r in half):.0f}-{max(r['rss_mib'] for r in half):.0f}, "
          f"PSS {min(r['pss_mib'] for r in half):.0f}-{max(r['pss_mib'] for r in half):.0f} MiB")
    server.stop()


def bench_cancel(args) -> None:
    server = Server("--max-concurrent-solves", "1")
    channel = grpc.insecure_channel(server.target)
    solve = channel.unary_unary("/fleetplanner.v1.PlannerService/Solve")
    requests = [("bomb", pb.SolveRequest(workload=pb.Workload(yaml=yaml_alias_bomb())).SerializeToString()),
                (f"{args.services} services + explain", solve_request(generated_workload(args.services), explain=True))]
    delays = [0.02, 0.1, 0.3, 0.6, 1, 1.5, 2, 3, 4, 6, 8, 11, 15, 20, 30]
    for _ in range(args.repeats):
        for name, body in requests:
            for delay in delays if name != "bomb" else delays[:5]:
                call = solve.future(body, timeout=600)
                time.sleep(delay)
                if call.done():
                    break  # later delays would find it done too
                call.cancel()
                time.sleep(0.3)  # the replacement worker, if any, starts meanwhile
    time.sleep(1)
    stops = [e for e in server.lines if e.get("event") == "worker.stop"]
    by_stage: dict[tuple, list[float]] = defaultdict(list)
    for e in stops:
        by_stage[(e["stage"], e["how"])].append(e["after_ms"])
    print(f"{len(stops)} cancels; time from the cancel to a free slot (server side), by stage:")
    print(f"{'stage':<12}{'how':<13}{'count':>6}{'median ms':>11}{'max ms':>9}")
    for (stage, how), times in sorted(by_stage.items()):
        print(f"{stage:<12}{how:<13}{len(times):>6}{statistics.median(times):>11.1f}{max(times):>9.1f}")
    every = [t for times in by_stage.values() for t in times]
    print(f"all: median {statistics.median(every):.1f} ms, max {max(every):.1f} ms, "
          f"over 100 ms: {sum(t > 100 for t in every)}; load {os.getloadavg()[0]:.1f}")
    server.stop()


def bench_bombs(args) -> None:
    server = Server("--max-concurrent-solves", "2", "--grace-s", "1")
    channel = grpc.insecure_channel(server.target)
    solve = channel.unary_unary("/fleetplanner.v1.PlannerService/Solve")
    health = channel.unary_unary("/grpc.health.v1.Health/Check")
    health(b"", timeout=10)
    bomb = pb.SolveRequest(workload=pb.Workload(yaml=yaml_alias_bomb())).SerializeToString()
    codes: Counter = Counter()

    def send() -> None:
        t0 = time.monotonic()
        try:
            solve(bomb, timeout=args.deadline_s)
            codes["OK"] += 1
        except grpc.RpcError as exc:
            codes[exc.code().name] += 1
        answered.append(time.monotonic() - t0)

    answered: list[float] = []
    threads = [threading.Thread(target=send) for _ in range(args.bombs)]
    for t in threads:
        t.start()
    latencies = []
    t_end = time.monotonic() + args.watch_s
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        health(b"", timeout=5)
        latencies.append((time.monotonic() - t0) * 1000)
        time.sleep(0.02)
    for t in threads:
        t.join()
    t0 = time.monotonic()
    quick = channel.unary_unary("/fleetplanner.v1.PlannerService/Solve")
    quick(solve_request(SMALL), timeout=60)
    after_s = time.monotonic() - t0
    latencies.sort()
    print(f"{args.bombs} alias bombs at once ({len(yaml_alias_bomb())} bytes each, deadline {args.deadline_s} s): "
          f"statuses {dict(codes)}; slowest answered after {max(answered):.2f} s")
    print(f"health checks while they ran: {len(latencies)}, median {statistics.median(latencies):.1f} ms, "
          f"p99 {latencies[int(0.99 * (len(latencies) - 1))]:.1f} ms, max {latencies[-1]:.1f} ms")
    print(f"a one-service solve afterwards: {after_s * 1000:.0f} ms")
    tree = server.tree()
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    code = server.proc.wait(60)
    stopped_s = time.monotonic() - t0
    left = [p for p in tree if os.path.exists(f"/proc/{p}")]
    time.sleep(2)
    still = [(p, Path(f"/proc/{p}/cmdline").read_bytes()[:80]) for p in tree if os.path.exists(f"/proc/{p}")]
    print(f"SIGTERM: exit code {code} after {stopped_s:.2f} s; processes of the tree still there at that moment: "
          f"{len(left)}, 2 s later: {still}; load {os.getloadavg()[0]:.1f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    m = sub.add_parser("memory")
    m.add_argument("--solves", type=int, default=100)
    m.add_argument("--services", type=int, default=300)
    m.add_argument("--distinct", type=int, default=5, help="distinct workloads, cycled (seeds)")
    m.add_argument("--slots", type=int, default=os.cpu_count() or 1, help="--max-concurrent-solves")
    m.add_argument("--worker-max-rss-mib", type=float, default=None, help="for the server (default: its own)")
    c = sub.add_parser("cancel")
    c.add_argument("--services", type=int, default=60)
    c.add_argument("--repeats", type=int, default=2)
    b = sub.add_parser("bombs")
    b.add_argument("--bombs", type=int, default=30)
    b.add_argument("--deadline-s", type=float, default=10.0)
    b.add_argument("--watch-s", type=float, default=5.0)
    args = p.parse_args()
    {"memory": bench_memory, "cancel": bench_cancel, "bombs": bench_bombs}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
