#!/usr/bin/env python3
"""Benchmark: the cost MIP of one generated workload on each backend, and the warm start.

Builds the same model as `plan()` (all candidate configurations, no greedy-bound
pruning) and solves it with SCIP (with and without the greedy hint), HiGHS, and "auto"
(SCIP raced by HiGHS from 1 s on when a core is spare: solver/optimize/backends/race.py),
printing time, status, objective and the backend that answered. Not a test: run it and
record the figures.

Usage: python bench/backends.py [--services 100] [--seed 0] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solve_scaling import generate  # noqa: E402

from solver.optimize.backends import SolveOptions, get_backend  # noqa: E402
from solver.optimize.backends.base import backend_for  # noqa: E402
from solver.compile.candidates import build_problem  # noqa: E402
from solver.optimize.formulation import build  # noqa: E402
from solver.optimize.greedy import greedy_solution  # noqa: E402
from solver.compile.resolve import resolve_catalog  # noqa: E402
from solver.workload.documents import parse_workload  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--services", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    workload = parse_workload(generate(args.services, args.seed))
    problem = build_problem(workload, resolve_catalog(workload))
    form = build(problem)
    greedy = greedy_solution(problem)
    hint = form.values_from(greedy) if greedy is not None else None
    print(f"{args.services} services, seed {args.seed}: {form.model.size}")
    # A first, untimed solve pays the solver's one-off start-up so the rows compare fairly.
    get_backend("scip").solve(form.model, SolveOptions(time_limit_s=args.time_limit))
    runs = [("scip + greedy hint", "scip", hint), ("scip, no hint", "scip", None),
            ("highs + greedy hint", "highs", hint),  # CP-SAT: withdrawn in issue 25 (no proofs on this model)
            ("auto + greedy hint", "auto", hint)]
    for label, name, h in runs:
        t0 = time.perf_counter()
        out = backend_for(name, form.model).solve(form.model, SolveOptions(time_limit_s=args.time_limit, hint=h))
        elapsed = time.perf_counter() - t0
        obj = f"{out.objective:.5f}" if out.objective is not None else "-"
        print(f"{label:<22} {elapsed:8.3f} s  {out.status:<9} $/hour {obj}  answered by {out.backend}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
