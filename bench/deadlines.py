#!/usr/bin/env python3
"""Benchmark: does every time-limited call come back by its limit, within bounded memory?

Issue 26's targets: "every time-limited call returns within limit + 1 s with its best plan
or the honest status; peak memory of any request within the documented schema limits
<= 1 GiB". This runs the installed `solver-cli` (the door a person or a script uses) as a
subprocess on workloads that used to overrun their limits or their memory (issue 26's
reproducers) and on the largest generated cases of the other benchmarks, each with a
short `--time-limit`, and prints per case:

* wall s: from the process's start to its exit (imports, parsing, candidates, solve,
  evaluation, writing the JSON answer: what the caller waits for); over: wall - limit;
* peak MiB: the largest summed RSS of the process and its children (helper processes
  included), sampled every 20 ms; pages a forked helper shares with its parent count
  twice, so this is an upper bound on the memory the call holds;
* PSS MiB: the largest summed proportional set size (a page shared by k of the processes
  counts 1/k in each): the memory they hold together; read at a new RSS high at most every
  0.5 s, else every 2 s (reading it costs ~30 ms for a 2 GB process), so it may miss a
  short peak;
* exit code and status (`optimal`, `feasible`, `no_plan_in_time`, ...; for exit 2/3/4 the
  first line of the error);
* the answer's size.

Then: calls within limit + 1 s, and calls within 1 GiB. Timings move with the machine's
load: read them against the limit, not against another day's run.

`--door grpc`: the same workloads sent to `solver-cli serve` on loopback (2 solver slots)
by the Python client, with the limit as the call's gRPC deadline and no time limit of its
own (a scheduler's call): wall time is the call's, peak MiB the server's whole process
tree during the call, status the plan's or the gRPC status the client got. The tier cases'
catalog goes inline (the server reads no files).

Usage: python bench/deadlines.py [--cases NAME ...] [--door cli|grpc] [--list]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from solve_scaling import generate  # noqa: E402
from queueing_speed import with_percentile  # noqa: E402

def _tier_catalog(path: Path, inline: bool = False) -> dict:
    """bench/horizon_scaling.py's catalog (assumed reserved prices) as a catalog file, or inline."""
    from horizon_scaling import tier_catalog

    keys = ("provider", "name", "region", "gpu", "gpus_per_instance", "price_usd_per_hour",
            "spot_price_usd_per_hour", "reserved_1y_price_usd_per_hour", "reserved_3y_price_usd_per_hour",
            "gpu_memory_gib", "interconnect", "inter_node_fabric", "inter_node_gbs", "available_instances",
            "source", "as_of")
    offers = [{k: getattr(o, k) for k in keys if getattr(o, k) not in (None, "")} for o in tier_catalog().offers]
    if inline:
        return {"source": "inline", "offers": offers}
    path.write_text(json.dumps({"include_default_gpus": True, "gpus": [], "offers": offers}))
    return {"source": "file", "file": str(path)}


def _periods(doc: dict, n: int, seed: int, tiers: dict | None) -> dict:
    """n hourly periods of a daily cycle (bench/horizon_scaling.py's); with a `tiers` catalog its
    four pricing tiers, else on-demand alone."""
    from horizon_scaling import with_periods

    doc = with_periods(doc, n, seed)
    if tiers:
        doc["catalog"] = tiers
    else:
        del doc["constraints"]
    return doc


def _classes(n: int) -> dict:
    """One Llama-3.1-8B service with n request classes and a p99 SLO (issue 26: 256 classes ran 190 s at 20)."""
    lengths = [(int(64 * 2 ** (7 * i / (n - 1))), int(16 * 2 ** (6 * ((i * 7) % n) / (n - 1)))) for i in range(n)]
    classes = [{"name": f"c{i}", "share": 1.0 / n, "prompt_tokens": p, "output_tokens": o}
               for i, (p, o) in enumerate(lengths)]
    classes[0]["share"] += 1.0 - sum(c["share"] for c in classes)
    return {"name": f"classes-{n}", "services": [{
        "name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
        "demand": {"requests_per_s": 40, "classes": classes},
        "slo": {"ttft_ms": 2000, "tpot_ms": 80, "percentile": 99}}]}


def _redundancy(n: int, domain: str) -> dict:
    doc = generate(n, 0)
    doc["constraints"] = {"redundancy": {"domain": domain, "serve_fraction": 1.0}}
    return doc


def cases(tmp: Path, inline: bool = False) -> dict[str, tuple]:
    """name -> (a function that builds the workload, time limit s): built when the case runs."""
    from disagg import speed_services
    from horizon_honesty import workload as day_night
    from horizon_scaling import replan_workload

    tier = _tier_catalog(tmp / "tier-catalog.json", inline)
    return {
        "services-1000": (lambda: generate(1000, 0), 25.0),
        "services-5000": (lambda: generate(5000, 0), 30.0),
        "day-night-500": (lambda: day_night(500, 0, "share"), 6.0),  # issue 26's first reproducer
        "periods-10000x20": (lambda: _periods(generate(20, 0), 10_000, 0, None), 30.0),
        "day-24x20-tiers": (lambda: _periods(generate(20, 0), 24, 0, tier), 10.0),
        "week-168x50-tiers": (lambda: _periods(generate(50, 0), 168, 0, tier), 20.0),
        "replan-100": (lambda: replan_workload(100, 0, 60.0), 2.0),
        "classes-256-p99": (lambda: _classes(256), 20.0),
        "p99-100": (lambda: with_percentile(generate(100, 1)), 12.0),
        "instance-100": (lambda: _redundancy(100, "instance"), 10.0),
        "zone-100": (lambda: _redundancy(100, "zone"), 10.0),
        "auto-100": (lambda: {"name": "auto-100", "services": speed_services(100, 0, serving="auto")}, 20.0),
    }


class _Peaks:
    """Peak summed RSS and PSS of a process and its descendants. RSS is read at every sample
    (microseconds); PSS (/proc/PID/smaps_rollup: ~30 ms for a 2 GB process, so at every 20 ms
    sample it would take a core from the call it measures) at a new RSS high at most every
    0.5 s, else every 2 s: a few percent of a core."""

    def __init__(self, proc: psutil.Process):
        self.proc = proc
        self.rss = self.pss = 0
        self._pss_at = -1.0

    def sample(self) -> None:
        try:
            procs = [self.proc] + self.proc.children(recursive=True)
        except psutil.Error:
            return
        rss = 0
        for p in procs:
            try:
                rss += p.memory_info().rss
            except psutil.Error:
                pass
        now = time.monotonic()
        due = now - self._pss_at >= (0.5 if rss > self.rss else 2.0)
        self.rss = max(self.rss, rss)
        if not due:
            return
        self._pss_at = now
        pss = 0
        for p in procs:
            try:
                m = p.memory_full_info()
            except psutil.Error:
                continue
            pss += getattr(m, "pss", m.rss)
        self.pss = max(self.pss, pss)


def run_case(cli: str, path: Path, limit: float) -> dict:
    out = path.with_suffix(".out")
    with open(out, "wb") as stdout, open(path.with_suffix(".err"), "wb") as stderr:
        t0 = time.perf_counter()
        popen = subprocess.Popen([cli, "solve", str(path), "--format", "json", "--quiet",
                                  "--time-limit", str(limit)], stdout=stdout, stderr=stderr)
        peaks = _Peaks(psutil.Process(popen.pid))
        while popen.poll() is None:
            peaks.sample()
            if time.perf_counter() - t0 > 10 * limit + 60:  # a hang: stop it, it is a row too
                popen.kill()
            time.sleep(0.02)
        wall = time.perf_counter() - t0
    rc = popen.returncode
    # Under --format json every outcome is JSON on stdout, failures included (exit 2/3/4: its error)
    try:
        answer = json.loads(out.read_text())
        status = answer.get("status", "?")
        if rc != 0:
            status += ": " + str(answer.get("error") or answer.get("errors") or answer.get("infeasibility"))[:100]
    except ValueError:
        lines = [ln for ln in path.with_suffix(".err").read_text(errors="replace").splitlines() if ln.strip()]
        status = "unreadable answer" + (": " + " | ".join(lines[:2])[:100] if lines else "")
    return {"wall_s": wall, "over_s": wall - limit, "peak_mib": peaks.rss / 2 ** 20, "pss_mib": peaks.pss / 2 ** 20,
            "rc": rc, "status": status, "answer_kib": out.stat().st_size / 1024}


def run_grpc_case(target: str, server: psutil.Process, doc: dict, limit: float) -> dict:
    """One Solve with `limit` as the call's deadline (the client's timeout, no time_limit_s)."""
    from planner_client import PlannerClient, PlannerClientError

    client = PlannerClient(target, timeout_s=limit, retries=0, max_message_bytes=256 * 2 ** 20)

    peaks = _Peaks(server)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peaks.sample()
            time.sleep(0.02)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    try:
        plan = client.solve(doc)
        status, rc, size = plan.get("status", "?"), 0, len(json.dumps(plan))
    except PlannerClientError as exc:
        best = exc.best_plan
        status = f"{exc.code}" + (f" (best plan: {best.get('status')})" if best else "") + f": {exc.message[:80]}"
        rc, size = exc.exit_code, len(json.dumps(best)) if best else 0
    wall = time.perf_counter() - t0
    done.set()
    watcher.join()
    client.close()
    return {"wall_s": wall, "over_s": wall - limit, "peak_mib": peaks.rss / 2 ** 20, "pss_mib": peaks.pss / 2 ** 20,
            "rc": rc, "status": status, "answer_kib": size / 1024}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", help="only these cases (default: all)")
    ap.add_argument("--door", choices=("cli", "grpc"), default="cli",
                    help="cli: solver-cli solve --time-limit; grpc: solver-cli serve, the limit as the call's deadline")
    ap.add_argument("--list", action="store_true", help="list the cases and stop")
    args = ap.parse_args()
    beside = Path(sys.executable).with_name("solver-cli")  # this environment's own, before any other on PATH
    cli = str(beside) if beside.exists() else shutil.which("solver-cli")
    server = target = None
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        table = cases(tmp, inline=args.door == "grpc")
        if args.list:
            for name, (_, limit) in table.items():
                print(f"{name:<20} --time-limit {limit:g}")
            return 0
        unknown = set(args.cases or ()) - set(table)
        if unknown:
            ap.error(f"unknown case(s) {sorted(unknown)}; --list shows them")
        if args.door == "grpc":
            from load_grpc import spawn_server

            server, target = spawn_server(2, 16)
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {open('/proc/loadavg').read().split()[:3]}, "
              f"door {args.door}")
        print(f"{'case':<20} {'limit s':>7} {'wall s':>7} {'over s':>7} {'peak MiB':>9} {'PSS MiB':>8} {'answer KiB':>10} {'rc':>3}  status")
        rows = []
        for name, (build, limit) in table.items():
            if args.cases and name not in args.cases:
                continue
            doc = build()
            if server is not None:
                doc.get("solver", {}).pop("time_limit_s", None)  # the deadline alone limits the call
                r = run_grpc_case(target, psutil.Process(server.pid), doc, limit)
            else:
                path = tmp / f"{name}.json"
                path.write_text(json.dumps(doc))
                r = run_case(cli, path, limit)
            rows.append(r)
            print(f"{name:<20} {limit:>7.1f} {r['wall_s']:>7.2f} {r['over_s']:>+7.2f} {r['peak_mib']:>9.0f} "
                  f"{r['pss_mib']:>8.0f} {r['answer_kib']:>10.0f} {r['rc']:>3}  {r['status']}", flush=True)
        late = sum(r["over_s"] > 1.0 for r in rows)
        big = sum(r["peak_mib"] > 1024 for r in rows)
        big_pss = sum(r["pss_mib"] > 1024 for r in rows)
        print(f"\nwithin limit + 1 s: {len(rows) - late} / {len(rows)}; peak <= 1 GiB: {len(rows) - big} / {len(rows)} "
              f"(summed RSS), {len(rows) - big_pss} / {len(rows)} (summed PSS)")
    if server is not None:
        server.terminate()
        server.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
