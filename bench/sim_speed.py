#!/usr/bin/env python3
"""Benchmark: the replica simulator before and after the compiled core.

Per configuration (20,000 requests by default, one seed), wall-clock seconds, engine
steps per second and requests per second of:
* old (exact): the old simulator (`git show OLD:solver/sim/replica.py`, default c2f5a0c)
  with the performance model's step function `Replica.step_seconds`, as its callers ran it;
* old (StepCost): the same with `StepCost.seconds` (the physics the new core evaluates);
* new (plain): the new core as plain Python (FLEET_SIM_JIT=0, in a child process);
* new (numba): the new core compiled (cache warm; compile and load costs are measured
  apart, in fresh processes with an empty and a filled NUMBA_CACHE_DIR).
The new and old (StepCost) runs simulate the same requests and steps (bit for bit: tests/test_sim_replica.py).
Timings are best of --repeat (the old ones once unless --repeat-old), interleaved.

Usage: python bench/sim_speed.py [--requests 20000] [--repeat 3] [--old c2f5a0c] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# (label, (model, gpu, gpus, precision), [(share, prompt, output)], arrival_cv, load)
CONFIGS = [
    ("llama-3.1-8b fp16 1xH100-SXM 1024/256 @0.8", ("llama-3.1-8b", "H100-SXM", 1, "fp16"), [(1.0, 1024, 256)], 1.0,
     0.8),
    ("llama-2-7b fp16 1xA10G mix 300/150+3500/400 @0.9", ("llama-2-7b", "A10G", 1, "fp16"),
     [(0.7, 300, 150), (0.3, 3500, 400)], 1.0, 0.9),
    ("mixtral-8x7b fp16 2xH100-SXM 700/200 cv2 @0.85", ("mixtral-8x7b", "H100-SXM", 2, "fp16"), [(1.0, 700, 200)], 2.0,
     0.85),
    ("qwen2.5-7b fp16 1xH200 400/900 @0.7", ("qwen2.5-7b", "H200", 1, "fp16"), [(1.0, 400, 900)], 1.0, 0.7),
]


def _setup(cfg, mix, cv, load, requests):
    from queueing_accuracy import replica

    from solver.perf.queueing import ReplicaLoadModel, TrafficClass

    rep = replica(*cfg)
    classes = [TrafficClass(s, p, o) for s, p, o in mix]
    rate = load * ReplicaLoadModel(rep, classes, cv).saturation_rate()
    kw = dict(max_seqs=rep.max_seqs, kv_cache_tokens=rep.kv_cache_tokens, token_budget=rep.token_budget,
              request_overhead_s=rep.request_overhead_s, duration_s=requests / rate, seed=1, arrival_cv=cv)
    return rep, classes, rate, kw


def _old_module(commit: str):
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:solver/sim/replica.py"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_replica.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_replica", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_replica"] = mod
    spec.loader.exec_module(mod)
    return mod


def _time(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _child_new(requests: int, repeat: int) -> None:
    """In a child (FLEET_SIM_JIT set by the parent): time the new core per configuration, print JSON."""
    from solver.sim.replica import simulate_replica

    out = []
    for _, cfg, mix, cv, load in CONFIGS[:int(os.environ.get("SIM_SPEED_CONFIGS", len(CONFIGS)))]:
        rep, classes, rate, kw = _setup(cfg, mix, cv, load, requests)
        simulate_replica(rep.step, classes, rate, **{**kw, "duration_s": 10.0 / rate})  # compile / load first
        seconds, sim = _time(lambda: simulate_replica(rep.step, classes, rate, **kw), repeat)
        out.append({"seconds": seconds, "steps": sim.steps, "requests": sim.requests})
    print(json.dumps(out))


_FIRST_CALL = """
import time, sys
t0 = time.perf_counter()
from solver.perf.queueing.physics import StepCost
from solver.perf.queueing import TrafficClass
from solver.sim.replica import simulate_replica
t1 = time.perf_counter()
import numba
t2 = time.perf_counter()
simulate_replica(StepCost(0.005, 0, 0, 1e-5, 1e-6, 1e-6, 1e-8, 1e-10, 0.004, 0.002, 1e-6), [TrafficClass(1, 100, 10)],
                 1.0, max_seqs=8, kv_cache_tokens=1e5, token_budget=512, duration_s=5)
t3 = time.perf_counter()
print(t2 - t1, t3 - t2)
"""


def _first_call(cache_dir: str) -> tuple[float, float]:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, FLEET_SIM_JIT="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    proc = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True, check=True)
    numba_import, first = (float(x) for x in proc.stdout.split())
    return numba_import, first


def _run_child(jit: str, requests: int, repeat: int, configs: int) -> list[dict]:
    env = dict(os.environ, FLEET_SIM_JIT=jit, SIM_SPEED_CONFIGS=str(configs),
               PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    proc = subprocess.run([sys.executable, __file__, "--child", "--requests", str(requests), "--repeat", str(repeat)],
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N for the new core")
    ap.add_argument("--repeat-old", type=int, default=1, help="best of N for the old simulator")
    ap.add_argument("--old", default="c2f5a0c", help="commit of the old simulator")
    ap.add_argument("--quick", action="store_true", help="the first configuration only")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child_new(a.requests, a.repeat)
        return 0
    configs = 1 if a.quick else len(CONFIGS)
    old = _old_module(a.old)
    plain = _run_child("0", a.requests, 1, configs)
    compiled = _run_child("1", a.requests, a.repeat, configs)
    print(f"{a.requests:,} requests per configuration, seed 1; old = {a.old}; seconds (best of {a.repeat} new, "
          f"{a.repeat_old} old)")
    header = (f"{'configuration':52} {'steps':>8} {'old exact s':>11} {'old StepCost s':>14} {'new plain s':>11} "
              f"{'new numba s':>11} {'steps/s old':>11} {'steps/s new':>11} {'req/s new':>10} {'x exact':>8} "
              f"{'x StepCost':>10}")
    print(header)
    for (label, cfg, mix, cv, load), p, c in zip(CONFIGS[:configs], plain, compiled):
        rep, classes, rate, kw = _setup(cfg, mix, cv, load, a.requests)
        t_exact, sim = _time(lambda: old.simulate_replica(rep.step_seconds, classes, rate, **kw), a.repeat_old)
        t_step, sim2 = _time(lambda: old.simulate_replica(rep.step.seconds, classes, rate, **kw), a.repeat_old)
        assert sim2.steps == c["steps"] and sim2.requests == c["requests"], "old and new simulated different runs"
        print(f"{label:52} {c['steps']:>8,} {t_exact:>11.3f} {t_step:>14.3f} {p['seconds']:>11.3f} "
              f"{c['seconds']:>11.4f} {c['steps'] / t_exact:>11,.0f} {c['steps'] / c['seconds']:>11,.0f} "
              f"{c['requests'] / c['seconds']:>10,.0f} {t_exact / c['seconds']:>8.0f} {t_step / c['seconds']:>10.0f}")
    with tempfile.TemporaryDirectory() as cache:
        cold = _first_call(cache)
        warm = _first_call(cache)
    print(f"numba import {cold[0]:.2f} s; first simulation in a fresh process: {cold[1]:.2f} s compiling "
          f"(empty cache), {warm[1]:.2f} s loading the cache (numba import then {warm[0]:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
