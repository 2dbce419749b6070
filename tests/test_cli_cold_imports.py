"""A one-service `solver-cli solve` imports and loads only what its plan needs.

Every module a cold CLI process imports and every data file it reads is start-up time
(docs/benchmarks.md, the one-service CLI solve). These are the pieces a one-period,
one-service solve with a catalog file never uses; each was once loaded on that path.
"""

import json
import subprocess
import sys

from conftest import EXAMPLES, ROOT

NOT_NEEDED = (
    "cli.estimate_cmd", "cli.serve_cmd", "cli.review_cmd", "cli.export_cmd", "cli.simulate_cmd",  # other commands
    "cli.workload_cmd", "solver.traffic",
    "solver.plan_horizon",  # multi-period plans
    "solver.optimize.service_bounds",  # formulations with service bounds
    "solver.review", "solver.explain.alternatives",  # reviews, --explain
    "difflib",  # "did you mean" for a mistyped name
    "numpy.polynomial",  # the queueing model's quadrature rule is written out
)

_PROBE = """
import contextlib, io, json, sys
from cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["solve", sys.argv[1], "--quiet"])
from solver.catalog.loader import default_catalog
print(json.dumps({"code": code, "modules": sorted(sys.modules),
                  "default_offers_read": default_catalog.cache_info().currsize}))
"""


def test_a_one_service_solve_loads_only_what_it_needs():
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(EXAMPLES / "s3-big-model.json")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["code"] == 0
    assert [m for m in NOT_NEEDED if m in seen["modules"]] == []
    # The workload's catalog file brings its own offers: only the default GPU types are read.
    assert seen["default_offers_read"] == 0
