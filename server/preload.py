"""Imported once by the worker pool's forkserver (server/pool.py), before it forks workers.

Everything a solve needs is imported, and the read-only data (catalog, model library,
calibration) is loaded here, so each forked worker starts warm and shares these pages
with the forkserver until it writes to them. Nothing here starts a thread: forking a
process with threads (a solver's thread pool) could deadlock the child.

The worker's warm-up solve runs here once too (without a cancel event it starts no
thread: SCIP runs on the calling thread). What it fills (performance estimates,
candidate configurations, the solver's first-use state) is then inherited by every
worker, whose own warm-up then costs ~9 ms of CPU instead of ~50-70 ms (measured on a
2-core machine): a worker recycled under load takes that much less from the solves.
"""

import server.worker  # noqa: F401 - the workers' code and its imports (protobuf, the planner's request reading)
import solver.optimize.backends.mathopt_backend  # noqa: F401 - OR-Tools: about half a second to import
import solver.plan  # noqa: F401
import solver.explain.alternatives  # noqa: F401 - solver.plan imports it only when a plan is explained
import solver.optimize.service_bounds  # noqa: F401 - solver.plan imports it only for formulations with service bounds
import solver.review  # noqa: F401 - review documents are parsed in workers too
from solver.catalog import default_catalog

default_catalog()
server.worker._warm_up()

# What the forkserver holds now is shared by every worker it forks; keep the collector from
# touching it (and so copying its pages into each worker) in the workers.
import gc  # noqa: E402

gc.freeze()
