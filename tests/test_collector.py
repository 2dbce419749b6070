"""The garbage collector around plans (solver/collector.py).

* A plan makes no reference cycles: after it, a collection finds nothing to free, for the
  examples with and without explanations, a horizon, a percentile SLO, generated workloads
  (service bounds' branch and bound ran a self-referencing closure) and an infeasible
  workload. So what a plan drops is freed at once, not when a collection comes (the
  collector is off while plans run: solver/collector.py), and long-running processes
  (the server's workers, review workers) do not grow between collections.

It runs in a fresh interpreter, cold (the caches emptied between a first run, whose imports
may make cycles of their own, and the one checked).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_plans_make_no_reference_cycles():
    out = _run("""
        import gc, sys
        from pathlib import Path
        sys.path.insert(0, "bench")
        from solve_scaling import generate
        from solver.caches import clear_all
        from solver.errors import InfeasibleError
        from solver.plan import PlanOptions, plan
        from solver.documents.parse import load_document
        from solver.workload.documents import load_current_fleet, parse_workload

        cases = []
        for name in ("llm-platform.json", "s1-throughput.json", "s2-latency.json", "s3-big-model.json",
                     "periods-day.yaml"):
            for explain in (False, True):
                data = load_document(Path("examples") / name)
                if "change_costs" in data:  # the horizon example plans against the running fleet
                    data["current_fleet"] = load_current_fleet(Path("examples/running-fleet.json"))
                cases.append((name, parse_workload(data), explain))
        for seed in (0, 1):
            cases.append((f"gen {seed}", parse_workload(generate(30, seed)), seed == 1))
        chat = {"name": "p", "services": [{"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp8"],
                "demand": {"requests_per_s": 20, "prompt_tokens": 1024, "output_tokens": 256},
                "slo": {"ttft_ms": 800, "tpot_ms": 40, "percentile": 99}}],
                "constraints": {"providers": ["lambda"], "gpu_types": ["H100-SXM"]}}
        cases.append(("p99", parse_workload(chat), True))
        tight = {"name": "t", "services": [{"name": "chat", "model": "llama-3.1-70b",
                 "demand": {"requests_per_s": 5, "prompt_tokens": 1024, "output_tokens": 256},
                 "slo": {"ttft_ms": 1, "tpot_ms": 1}}]}
        cases.append(("infeasible", parse_workload(tight), True))

        def once(workload, explain):
            try:
                plan(workload, PlanOptions(explain=explain, base_dir="examples")).to_dict()
                return "plan"
            except InfeasibleError:
                return "infeasible"

        gc.disable()
        for name, workload, explain in cases:
            once(workload, explain)  # first: imports made here (protobuf descriptors) may hold cycles
            clear_all()  # then cold again: the work the caches would skip runs too
            gc.collect()
            outcome = once(workload, explain)
            print(name, explain, outcome, gc.collect())
    """)
    lines = out.splitlines()
    assert len(lines) == 14 and "infeasible True infeasible 0" in lines, out
    assert [line for line in lines if not line.endswith(" 0")] == [], out
