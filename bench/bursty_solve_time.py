#!/usr/bin/env python3
"""Benchmark: plan time of examples/llm-platform.json with every service's arrivals bursty.

What it measures: wall time of `solver-cli solve` (a fresh process each, simulation in the
loop included) with `demand.arrival_cv` set to each given CV on all three services, the
plan's status and price, and the percentile stages' own timings (settle: the queueing
models of every candidate; caps: the lazy caps' rounds). Bursty arrivals spread the
count of prompts in a step over many more values (up to 48 per size group), which is what
the queueing model's cost grows with.

Command (2-core VM; ~1 minute for the default CVs):

    PYTHONPATH=. .venv/bin/python bench/bursty_solve_time.py [--cv 1 2 5 10 20] [--time-limit 400]

Not a test: record the figures in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cv", type=float, nargs="+", default=[1.0, 2.0, 5.0, 10.0, 20.0])
    ap.add_argument("--time-limit", type=float, default=400.0)
    args = ap.parse_args()
    cli = shutil.which("solver-cli") or str(Path(sys.executable).parent / "solver-cli")
    base = json.loads((ROOT / "examples" / "llm-platform.json").read_text())
    print(f"{'CV':>5} {'exit':>4} {'wall s':>7} {'status':>8} {'$/hour':>10} {'settle s':>9} {'caps s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for cv in args.cv:
            doc = json.loads(json.dumps(base))
            for s in doc["services"]:
                s["demand"]["arrival_cv"] = cv
            doc.setdefault("solver", {})["time_limit_s"] = args.time_limit
            path = Path(tmp) / f"cv{cv:g}.json"
            path.write_text(json.dumps(doc))
            t0 = time.monotonic()
            proc = subprocess.run([cli, "solve", str(path), "--format", "json"], capture_output=True, text=True)
            wall = time.monotonic() - t0
            try:
                d = json.loads(proc.stdout)
            except json.JSONDecodeError:
                d = {}
            t = d.get("solver", {}).get("timings", {})
            price = d.get("total_price_usd_per_hour")
            print(f"{cv:5g} {proc.returncode:4d} {wall:7.1f} {str(d.get('status')):>8} "
                  f"{price if price is not None else '-':>10} {t.get('percentile_settle_s', 0.0):9.1f} "
                  f"{t.get('percentile_caps_total_s', 0.0):7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
