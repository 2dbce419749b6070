"""Load benchmark of the gRPC service: N concurrent clients on loopback, each solving in a loop.

    .venv/bin/python bench/load_grpc.py                       # spawns `solver-cli serve`
    .venv/bin/python bench/load_grpc.py --clients 1,4,16 --duration-s 20
    .venv/bin/python bench/load_grpc.py --target host:port    # an already running server

Prints, per workload and client count: solves completed, errors by status, solves/s and
p50/p99 latency (client side, call to answer), and the CPU time each solve cost: in the
clients (this process), the server's own process, and its worker processes (from
/proc; a spawned server only). The CPU split does not depend on how busy the machine
is, the latency does: read the load average printed with each row. The server runs in its own process, as
deployed, so that the clients' Python does not compete with it for the GIL. Each
workload is solved once before measuring: the performance-model cache is warm, as it is
on a server that has been up for a while.

Workloads: "small" is one LLM service (the CLI's minimal example); "medium" is
examples/llm-platform.json (three services, two request classes, measured profiles).

With --jitter F, every call scales each service's demand by its own factor, drawn
uniformly from [1 - F, 1 + F] (4 significant digits): no two calls are likely to send the
same request, so nothing that a process remembers by its exact input (the solves that
ended in a proof, solver/optimize/backends/mathopt_backend.py) answers for them, while
what depends only on the services' performance (candidate configurations, estimates)
still does. Without it, every call sends the same request.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import queue
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from planner_client import PlannerClient, PlannerClientError

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"name": "small", "services": [{
    "name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
    "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256},
    "slo": {"ttft_ms": 2000, "tpot_ms": 60}}]}
WORKLOADS = {"small": SMALL, "medium": json.loads((ROOT / "examples" / "llm-platform.json").read_text())}


def cpu_s(pid: int, reaped_children: bool = False) -> float:
    """User + system CPU seconds a process has used so far (0 if it is gone); with
    reaped_children, plus that of its children that have ended and been waited for (a
    recycled worker's CPU stays counted in the forkserver that forked it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int) -> tuple[float, float]:
    """(CPU seconds of the process itself, of all its descendants alive now), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    below, stack = 0.0, list(children.get(pid, []))
    while stack:
        p = stack.pop()
        below += cpu_s(p, reaped_children=True)
        stack.extend(children.get(p, []))
    return cpu_s(pid), below


def jittered(workload: dict, rng: random.Random, fraction: float) -> dict:
    """The workload with each service's demand scaled by a factor from [1 - fraction, 1 + fraction]."""
    out = copy.deepcopy(workload)
    for service in out["services"]:
        demand = service["demand"]
        factor = rng.uniform(1 - fraction, 1 + fraction)
        for key in ("requests_per_s", "items_per_min"):
            if demand.get(key) is not None:
                demand[key] = float(f"{demand[key] * factor:.4g}")
    return out


def run_load(target: str, workload: dict, clients: int, duration_s: float, server_pid: int | None = None,
             jitter: float = 0.0) -> dict:
    latencies_s: list[float] = []
    errors: Counter = Counter()
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    stop_at: list[float] = []

    def client_loop(seed: int) -> None:
        rng = random.Random(seed)
        with PlannerClient(target, timeout_s=300) as c:
            c.health()  # connect before the clock starts
            start.wait()
            while time.monotonic() < stop_at[0]:
                request = jittered(workload, rng, jitter) if jitter else workload
                t0 = time.perf_counter()
                try:
                    c.solve(request)
                except PlannerClientError as exc:
                    with lock:
                        errors[exc.code] += 1
                    continue
                with lock:
                    latencies_s.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    t_start = time.monotonic()
    stop_at.append(t_start + duration_s)
    me0 = cpu_s(os.getpid())
    server0 = tree_cpu_s(server_pid) if server_pid else None
    start.wait()
    for t in threads:
        t.join()
    elapsed_s = time.monotonic() - t_start
    me1 = cpu_s(os.getpid())
    server1 = tree_cpu_s(server_pid) if server_pid else None
    latencies_s.sort()
    n = max(len(latencies_s), 1)
    cpu = {"client_cpu_ms": round((me1 - me0) * 1000 / n, 2)}
    if server0 is not None:
        cpu["server_cpu_ms"] = round((server1[0] - server0[0]) * 1000 / n, 2)
        cpu["workers_cpu_ms"] = round((server1[1] - server0[1]) * 1000 / n, 2)
    return {
        "clients": clients, "jitter": jitter, "solves": len(latencies_s), "errors": dict(errors),
        "elapsed_s": round(elapsed_s, 2),
        "solves_per_s": round(len(latencies_s) / elapsed_s, 2),
        "p50_ms": round(_quantile(latencies_s, 0.50) * 1000, 1) if latencies_s else None,
        "p99_ms": round(_quantile(latencies_s, 0.99) * 1000, 1) if latencies_s else None,
        **cpu, "load_avg_1m": os.getloadavg()[0],
    }


def _quantile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank quantile: the smallest value with at least q of the values at or below it."""
    rank = max(1, -(-int(q * 1000) * len(sorted_values) // 1000))  # ceil(q * n) without float error
    return sorted_values[min(rank, len(sorted_values)) - 1]


def reference_plan_ms(workload: dict, runs: int = 50) -> tuple[float, float]:
    """plan() in this process, warm, same machine and minute: (median wall ms, CPU ms per
    solve). What the service adds is the rest of each call's latency and CPU."""
    import statistics

    from solver.plan import plan
    from solver.workload.documents import parse_workload

    w = parse_workload(workload)
    for _ in range(3):
        plan(w)
    walls = []
    cpu0 = time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        plan(w)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls) * 1000, (time.process_time() - cpu0) * 1000 / runs


def spawn_server(max_concurrent_solves: int, max_queue: int, worker_nice: int = 5,
                 extra_args: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """`solver-cli serve --port 0`; the port comes from its "server.listening" log line. It
    runs this interpreter with this environment (PYTHONPATH included), so it serves the
    same code as `code_under_test()` names."""
    cli = Path(sys.executable).with_name("solver-cli")
    proc = subprocess.Popen([str(cli), "serve", "--port", "0", "--max-concurrent-solves", str(max_concurrent_solves),
                             "--max-queue", str(max_queue), "--worker-nice", str(worker_nice), *extra_args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))
    ports: queue.Queue = queue.Queue()

    def read_logs() -> None:  # keeps draining the pipe so the server never blocks on its logs
        for line in proc.stderr:
            if b'"server.listening"' in line:
                ports.put(json.loads(line)["port"])
                break
        # Then read in bulk, not line by line: the clients' process (whose CPU the table
        # reports) should spend nothing on the server's four log lines per solve.
        while proc.stderr.read1(1 << 16):
            pass
        ports.put(None)

    threading.Thread(target=read_logs, daemon=True).start()
    try:
        port = ports.get(timeout=60)
    except queue.Empty:
        port = None
    if port is None:
        proc.kill()
        raise SystemExit("the server did not start; run `solver-cli serve --port 0` to see why")
    return proc, f"127.0.0.1:{port}"


def code_under_test() -> str:
    """The checkout whose server and solver this interpreter imports (an editable install,
    or PYTHONPATH pointing at another worktree)."""
    import server
    import solver

    roots = {str(Path(m.__file__).resolve().parents[1]) for m in (server, solver)}
    return " + ".join(sorted(roots))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", help="host:port of a running server (default: spawn one on loopback)")
    p.add_argument("--clients", default="1,2,4,8", help="comma-separated client counts (default 1,2,4,8)")
    p.add_argument("--duration-s", type=float, default=10.0, help="seconds per measurement (default 10)")
    p.add_argument("--workloads", default="small,medium", help=f"comma-separated, from {', '.join(WORKLOADS)}")
    p.add_argument("--max-concurrent-solves", type=int, default=os.cpu_count() or 1,
                   help="for the spawned server (default: CPU count)")
    p.add_argument("--max-queue", type=int, default=64, help="for the spawned server (default 64)")
    p.add_argument("--worker-nice", type=int, default=5,
                   help="for the spawned server (default 5, the server's; 0 gives the workers a fair share "
                        "against other programs on a shared machine)")
    p.add_argument("--server-args", default="",
                   help='more `solver-cli serve` flags for the spawned server, e.g. "--worker-max-jobs 10000"')
    p.add_argument("--jitter", type=float, default=0.0,
                   help="scale each call's demand by a random factor in [1-F, 1+F], so that calls differ (default 0)")
    p.add_argument("--json", action="store_true", help="one JSON object per measurement instead of a table")
    args = p.parse_args(argv)

    proc = None
    target = args.target
    if target is None:
        proc, target = spawn_server(args.max_concurrent_solves, args.max_queue, args.worker_nice,
                                    tuple(args.server_args.split()))
    try:
        if not args.json:
            print(f"server {target}, {os.cpu_count()} CPUs here, {args.duration_s:g} s per row"
                  + (f", demand jittered by up to {args.jitter:.0%} per call" if args.jitter else "")
                  + (f", max {args.max_concurrent_solves} concurrent solves, code in {code_under_test()}" if proc else ""))
            print(f"{'workload':<9}{'clients':>8}{'solves':>8}{'errors':>8}{'solves/s':>10}{'p50 ms':>10}{'p99 ms':>10}"
                  f"{'CPU ms/solve: client':>22}{'server':>8}{'workers':>9}{'load':>7}")
        for name in args.workloads.split(","):
            workload = WORKLOADS[name]
            if not args.json:
                wall_ms, cpu_ms = reference_plan_ms(workload)
                print(f"{name}: plan() in-process, warm: median {wall_ms:.1f} ms wall, {cpu_ms:.1f} ms CPU "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
            with PlannerClient(target, timeout_s=300) as c:
                c.solve(workload)  # warm-up
            for clients in (int(n) for n in args.clients.split(",")):
                row = run_load(target, workload, clients, args.duration_s, proc.pid if proc else None, args.jitter)
                if args.json:
                    print(json.dumps({"workload": name, **row}))
                else:
                    errs = sum(row["errors"].values())
                    print(f"{name:<9}{clients:>8}{row['solves']:>8}{errs:>8}{row['solves_per_s']:>10}"
                          f"{row['p50_ms']!s:>10}{row['p99_ms']!s:>10}{row['client_cpu_ms']:>22}"
                          f"{row.get('server_cpu_ms', '-')!s:>8}{row.get('workers_cpu_ms', '-')!s:>9}"
                          f"{row['load_avg_1m']:>7.2f}", flush=True)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
