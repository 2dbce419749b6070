#!/usr/bin/env python3
"""Plans of this tree, timings removed, for comparing two trees byte for byte.

A speed change must not move a plan. `dump` writes, for every example (JSON and YAML,
with and without --explain; multi-period examples with examples/running-fleet.json) and
for generated workloads (10 services seeds 0-5 with and without explain, 100 services
seeds 0-3), the plan's JSON without its timing fields, or the infeasibility reasons;
`compare` prints the cases that differ.

Usage:
  PYTHONPATH=<tree> python bench/plan_identity.py dump OUT.json      (run in <tree>)
  python bench/plan_identity.py compare BASE.json NEW.json           (exit 1 if any differ)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# The tree whose plans are dumped: the current directory (with PYTHONPATH pointing at it), so
# this script can dump an older tree that does not have it.
ROOT = Path.cwd()
TIMING_FIELDS = ("solve_time_s", "total_time_s", "timings")


def _strip(d: dict) -> dict:
    d.pop("solve_time_s", None)
    for key in ("solver", "horizon_solver"):
        if isinstance(d.get(key), dict):
            for field in TIMING_FIELDS:
                d[key].pop(field, None)
    return d


def _run(workload, explain: bool, base_dir: str | None = None) -> dict:
    from solver.caches import clear_all
    from solver.errors import InfeasibleError
    from solver.plan import PlanOptions, plan

    clear_all()  # every case cold: a warm cache must give the same plan, but that is tested elsewhere
    try:
        return _strip(plan(workload, PlanOptions(explain=explain, base_dir=base_dir)).to_dict())
    except InfeasibleError as exc:
        return {"infeasible": [str(r) for r in exc.reasons]}
    except Exception as exc:  # noqa: BLE001 - an example the planner refuses (e.g. a running fleet of a
        return {"error": repr(exc)}  # catalog it is not given) is a case too: the refusal must not move


def dump(out: Path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from solve_scaling import generate
    from solver.documents.parse import load_document
    from solver.workload.documents import load_current_fleet, parse_workload

    cases: dict[str, object] = {}
    files = sorted(ROOT.glob("examples/*.json")) + sorted(ROOT.glob("examples/*.yaml")) + \
        [ROOT / "examples" / "scheduler" / "workload.yaml"]
    for f in files:
        name = str(f.relative_to(ROOT))
        try:
            data = load_document(f)
            if isinstance(data, dict) and "change_costs" in data and "current_fleet" not in data:
                data = dict(data, current_fleet=load_current_fleet(ROOT / "examples" / "running-fleet.json"))
            workload = parse_workload(data)
        except Exception as exc:  # noqa: BLE001 - a document that does not load is a case too
            cases[name] = f"load error {exc!r}"
            continue
        for explain in (False, True):
            cases[f"{name} explain={explain}"] = _run(workload, explain, str(f.parent.relative_to(ROOT)))  # relative: plans quote it
    for n, seeds in ((10, range(6)), (100, range(4))):
        for seed in seeds:
            workload = parse_workload(generate(n, seed))
            cases[f"gen {n} {seed}"] = _run(workload, False)
            if n == 10:
                cases[f"gen {n} {seed} explain"] = _run(workload, True)
    out.write_text(json.dumps(cases, indent=1, sort_keys=True, default=str))
    print(f"{len(cases)} cases written to {out}")


def compare(base: Path, new: Path) -> int:
    a, b = json.loads(base.read_text()), json.loads(new.read_text())
    differ = [k for k in sorted(set(a) | set(b))
              if json.dumps(a.get(k), sort_keys=True) != json.dumps(b.get(k), sort_keys=True)]
    for k in differ:
        print("DIFF", k)
    print(f"{len(set(a) | set(b))} cases, {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "dump":
        dump(Path(sys.argv[2]))
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        return compare(Path(sys.argv[2]), Path(sys.argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
