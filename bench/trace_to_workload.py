#!/usr/bin/env python3
"""Issue 27's target: a day-long synthetic trace of 1 million requests turned into a
workload in <= 10 s with bounded memory.

Writes the trace (not timed): seeded (numpy default_rng(--seed)), 86,400 s, a diurnal
rate (a sine over the day, trough at 0 h at 1/4 of the peak at 12 h), two services with a
model column (chat: 80 % of requests, prompt ~ lognormal median 400 sigma 0.9, output
median 150 sigma 0.7; summarize: prompt median 3,000 sigma 0.5, output median 300),
arrivals a Poisson process at the diurnal rate. Then runs
`solver-cli workload from-trace TRACE --out W.yaml` as a child process and prints its wall
seconds and peak RSS (getrusage of the child; the trace is written by another child, so
that the parent stays small: a forked child's peak RSS includes its parent's until it
execs), the trace's size and what was derived;
`--check-solve` also solves the result (not timed).

Usage: PYTHONPATH=. .venv/bin/python bench/trace_to_workload.py [--requests 1000000] [--seed 0] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DAY_S = 86_400


def write_trace(path: Path, requests: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    grid = np.arange(DAY_S + 1, dtype=np.float64)
    rate = 1.0 + 0.75 * np.sin(2 * np.pi * (grid / DAY_S - 0.25))  # 0.25 at 0 h, 1.75 at 12 h (relative)
    cum = np.concatenate([[0.0], np.cumsum((rate[1:] + rate[:-1]) / 2)])
    # n arrivals of a Poisson process at this rate, given n: sorted uniforms through the inverse of its cumulative rate
    arrival = np.interp(np.sort(rng.uniform(0, cum[-1], requests)), cum, grid)
    summarize = rng.uniform(size=requests) < 0.2
    prompt = np.where(summarize, rng.lognormal(np.log(3000), 0.5, requests), rng.lognormal(np.log(400), 0.9, requests))
    output = np.where(summarize, rng.lognormal(np.log(300), 0.5, requests), rng.lognormal(np.log(150), 0.7, requests))
    prompt = np.clip(np.rint(prompt), 1, 30_000).astype(np.int64)
    output = np.clip(np.rint(output), 1, 4_000).astype(np.int64)
    service = np.where(summarize, "summarize,qwen3-8b", "chat,llama-3.1-8b")
    with path.open("w") as f:
        f.write("# synthetic day-long trace: bench/trace_to_workload.py\narrival_s,prompt_tokens,output_tokens,service,model\n")
        step = 200_000
        for i in range(0, requests, step):
            j = min(i + step, requests)
            f.write("".join(f"{t:.3f},{p},{o},{s}\n" for t, p, o, s in
                            zip(arrival[i:j].tolist(), prompt[i:j].tolist(), output[i:j].tolist(), service[i:j].tolist())))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", default=None, help="write the trace and the workload here (default: a temporary folder)")
    ap.add_argument("--check-solve", action="store_true", help="solve the derived workload (not timed)")
    ap.add_argument("--write-only", default=None, metavar="PATH", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.write_only:  # the trace is written in a child process: a forked child's peak RSS counts its parent's
        write_trace(Path(a.write_only), a.requests, a.seed)
        return 0
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="trace27-"))
    root.mkdir(parents=True, exist_ok=True)
    trace, out = root / "day.csv", root / "day-workload.yaml"
    t = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--write-only", str(trace), "--requests", str(a.requests), "--seed",
                    str(a.seed)], check=True)
    print(f"trace: {trace} ({a.requests:,} requests, {trace.stat().st_size / 2**20:.1f} MiB), written in "
          f"{time.perf_counter() - t:.1f} s (not timed)")
    cli = str(Path(sys.executable).with_name("solver-cli"))
    err = root / "stderr.txt"
    t = time.perf_counter()
    with err.open("w") as stderr:
        child = subprocess.Popen([cli, "workload", "from-trace", str(trace), "--out", str(out)], stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own peak RSS (not the trace writer's)
    wall = time.perf_counter() - t
    child.returncode = os.waitstatus_to_exitcode(status)
    peak_kib = usage.ru_maxrss
    run = subprocess.CompletedProcess(child.args, child.returncode, "", err.read_text())
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    print(f"from-trace: {wall:.2f} s wall, peak RSS {peak_kib / 1024:.0f} MiB (the child process)")
    print(run.stderr.strip())
    print("".join(line for line in out.read_text().splitlines(True) if not line.startswith("#"))[:1500])
    if a.check_solve:
        t = time.perf_counter()
        solved = subprocess.run([cli, "solve", str(out), "--no-verify"], capture_output=True, text=True)
        print(f"solve (not timed above): exit {solved.returncode} in {time.perf_counter() - t:.1f} s: "
              f"{solved.stdout.splitlines()[0] if solved.stdout else solved.stderr[-300:]}")
    if not a.keep:
        for p in root.iterdir():
            p.unlink()
        os.rmdir(root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
