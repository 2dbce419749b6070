#!/usr/bin/env python3
"""Write tests/data/sim_reference.json: the old (pure-Python, event-by-event) simulator's
per-request results on a few replicas, for tests/test_sim_replica.py to compare the
compiled core with.

The old simulator is read from git (`git show COMMIT:solver/sim/replica.py`, default
c2f5a0c, main before branch sim-fast) and given `StepCost.seconds` as its step function
(the physics the new core evaluates). Each case stores its inputs (the StepCost fields
and the replica's limits as numbers, so later changes to the performance model do not
move the reference) and the old results: per measured request TTFT, latency, class and
whether it waited, plus the run's summary numbers.

Usage: python scripts/sim_reference.py [--commit c2f5a0c] [--out tests/data/sim_reference.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

# (name, (model, gpu, gpus, precision), [(share, prompt, output)], arrival_cv, load, requests, drain_limit_s)
CASES = [
    ("h100-8b-1024/256", ("llama-3.1-8b", "H100-SXM", 1, "fp16"), [(1.0, 1024, 256)], 1.0, 0.8, 600, None),
    ("a10g-7b-mix-kv-limited", ("llama-2-7b", "A10G", 1, "fp16"), [(0.7, 300, 150), (0.3, 3500, 400)], 1.0, 0.9,
     400, None),
    ("mixtral-2xh100-bursty", ("mixtral-8x7b", "H100-SXM", 2, "fp16"), [(1.0, 700, 200)], 2.0, 0.85, 600, None),
    ("h200-7b-long-outputs-regular", ("qwen2.5-7b", "H200", 1, "fp16"), [(1.0, 400, 900)], 0.0, 0.7, 500, None),
    ("l4-overloaded-one-token", ("llama-3.1-8b", "L4", 1, "fp8"), [(0.5, 3000, 1), (0.5, 200, 30)], 1.0, 1.3, 400,
     60.0),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", default="c2f5a0c")
    ap.add_argument("--out", default=str(ROOT / "tests" / "data" / "sim_reference.json"))
    a = ap.parse_args()
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{a.commit}:solver/sim/replica.py"], check=True,
                            capture_output=True, text=True).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("old_replica", f.name)
    old = importlib.util.module_from_spec(spec)
    sys.modules["old_replica"] = old
    spec.loader.exec_module(old)

    from queueing_accuracy import replica

    from solver.perf.queueing import ReplicaLoadModel, TrafficClass

    out = {"generated_by": f"scripts/sim_reference.py --commit {a.commit}", "cases": []}
    for name, cfg, mix, cv, load, requests, drain in CASES:
        rep = replica(*cfg)
        classes = [TrafficClass(s, p, o) for s, p, o in mix]
        sat = ReplicaLoadModel(rep, classes, cv).saturation_rate()
        rate = load * sat
        duration = requests / rate / 0.9
        kw = dict(max_seqs=rep.max_seqs, kv_cache_tokens=rep.kv_cache_tokens, token_budget=rep.token_budget,
                  request_overhead_s=rep.request_overhead_s, duration_s=duration, seed=11, arrival_cv=cv,
                  drain_limit_s=drain)
        sim = old.simulate_replica(rep.step.seconds, classes, rate, **kw)
        out["cases"].append({
            "name": name, "step": dataclasses.asdict(rep.step), "classes": mix, "rate_per_s": rate, **kw,
            "ttft_s": sim.ttft_s.tolist(), "latency_s": sim.latency_s.tolist(),
            "class_index": sim.class_index.tolist(), "waited": sim.waited.astype(int).tolist(),
            "mean_batch": sim.mean_batch, "batch_sd": sim.batch_sd, "completed_per_s": sim.completed_per_s,
            "busy_fraction": sim.busy_fraction, "steps": sim.steps, "simulated_s": sim.simulated_s,
            "unfinished": sim.unfinished})
        print(f"{name}: {sim.requests} requests, {sim.steps} steps, {sim.unfinished} unfinished")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
