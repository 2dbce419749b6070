"""`--explain`: alternatives named by offer and size, deterministic figures, sound bounds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from solver.explain.alternatives import move_cost
from solver.plan import PlanOptions, plan
from solver.workload.documents import load_workload, parse_workload
from tests.conftest import EXAMPLES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from solve_scaling import generate  # noqa: E402


def test_alternatives_never_repeat_what_the_service_runs_on_and_name_the_offer():
    r = plan(load_workload(EXAMPLES / "llm-platform.json"), PlanOptions(explain=True, base_dir=str(EXAMPLES)))
    for s in r.services:
        used = {(a.gpu, a.gpus_per_replica, a.precision) for a in s.assignments}
        for alt in s.alternatives:
            if alt.verdict == "dearer":
                assert (alt.gpu, alt.gpus_per_replica, alt.precision) not in used, alt
                assert alt.offer_id and alt.gpus_per_instance >= alt.gpus_per_replica
                assert alt.delta_usd_per_hour >= -1e-6 and alt.basis in ("re-solve", "move")


def test_large_model_explanations_are_deterministic_bounds(solver_cli, tmp_path):
    # Above the re-solve size the figures come from moving one service: instant and the
    # same on every run, whatever the machine's load.
    path = tmp_path / "w.json"
    path.write_text(json.dumps(generate(40, 5)))
    runs = [json.loads(subprocess.run([solver_cli, "solve", str(path), "--explain", "--format", "json"],
                                      capture_output=True, text=True, timeout=300, check=True).stdout)
            for _ in range(2)]
    alts = [[s["alternatives"] for s in run["services"]] for run in runs]
    assert alts[0] == alts[1]
    moved = [a for per in alts[0] for a in per if a["verdict"] == "dearer"]
    assert moved and all(a["basis"] == "move" and not a["exact"] for a in moved)
    assert all(a["delta_usd_per_hour"] >= -1e-6 for a in moved)


def test_move_bound_is_never_below_the_exact_re_solve():
    # The move keeps the other services as planned, so it can only cost more than (or as
    # much as) the cheapest whole fleet with the service on the alternative.
    workload = parse_workload(generate(3, 11))
    r = plan(workload, PlanOptions(explain=True))
    exact = [(s.name, a) for s in r.services for a in s.alternatives if a.exact]
    assert exact
    from solver.compile.candidates import build_problem
    from solver.compile.resolve import resolve_catalog
    from solver.optimize.solution import Assignment, Solution

    problem = build_problem(workload, resolve_catalog(workload))
    by_key = {c.key: c for c in problem.configs}
    sol = Solution(tuple((f.offer_id, f.instances) for f in r.fleet), tuple(
        Assignment(a.config, s.name, a.offer_id, a.gpus_per_replica, a.precision, a.replicas, tuple(a.routed),
                   a.instances_per_replica) for s in r.services for a in s.assignments))
    for name, alt in exact:
        moved, _ = move_cost(by_key[alt.config], name, problem, sol)
        assert moved is None or moved - r.total_price_usd_per_hour >= alt.delta_usd_per_hour - 1e-6
