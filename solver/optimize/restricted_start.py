"""A start near the optimum: the MIP restricted to the replica groups a relaxation or a start uses.

Where the services' own plans (solver/optimize/service_bounds.py) or a re-plan's starts are
a few percent from the optimum and the solver's own heuristics take long to close that
distance, the MIP with every other group's replicas held at 0 (a few hundred groups of a
few thousand) finds a plan close to the optimum within a fixed effort. That plan is a plan
of the whole model (a restriction only removes plans), so it is only a start: the MIP still
proves what is optimal, and the optimum is the same with it and without it.

Used where it was measured to pay (its LP and node-limited MIP cost 0.1-5 s):
* re-plans from the running fleet (solver/optimize/replan.py): the optimum re-packs
  replicas over the running instances, which SCIP's heuristics found slowly
  (bench/horizon_scaling.py --case replan: 481.67 $ after 0.4 s, then nothing better for
  13 s, against an optimum of 478.00; this start gives 479.8-517.5 $ in 0.1-1 s);
* failure domains by place (zone, region, provider; solver/solve_stage.py): every service
  spread over two places makes the services' own plans pack badly together
  (bench/redundancy.py, 100 services by zone: SCIP's best after 30 s $934.66 against a
  bound of $864.11; this start $885.94 in 4.8 s). Instance domains gain nothing (the same
  plan either way on that benchmark, 8 s later), so they do without.
"""

from __future__ import annotations

import time

from solver.optimize.backends import SolveOptions

# Its node limit (it answers the same way on any machine unless the time share binds), its
# share of the time left (for the LP, then for the MIP), and the LP value above which a
# group counts as used.
RESTRICTED_NODES = 1000
RESTRICTED_SHARE = 0.25
_LP_USED = 1e-6
RELATIVE_GAP = 1e-9  # a proven optimum, as the re-plan's own MIP asks (it imports this)


def restricted_start(form, backend, hints: list[list[float]], deadline: float, cancel) -> list[float] | None:
    """The values of the MIP restricted to the groups whose replicas the LP relaxation or
    a hint uses (every other group's replicas held at 0), within RESTRICTED_NODES nodes and
    a share of the time left; None when nothing is restricted or no plan is found. The
    model's bounds are restored whatever happens."""
    left = deadline - time.monotonic()
    if left <= 0.1 or not form.r:
        return None
    lm = form.model
    lp = backend.solve(lm, SolveOptions(time_limit_s=left * RESTRICTED_SHARE, relax_integrality=True, cancel=cancel))
    if lp.values is None:
        return None
    keep = {i for i in form.r.values() if lp.values[i] > _LP_USED or any(h[i] > 0.5 for h in hints)}
    held = [i for i in form.r.values() if i not in keep]
    if not held:
        return None
    saved = [(i, lm.variables[i].lb, lm.variables[i].ub) for i in held]
    try:
        for i in held:
            lm.variables[i].lb = lm.variables[i].ub = 0.0
        out = backend.solve(lm, SolveOptions(
            time_limit_s=max((deadline - time.monotonic()) * RESTRICTED_SHARE, 0.05), hint=hints[0] if hints else None,
            extra_hints=hints[1:], cancel=cancel, relative_gap=RELATIVE_GAP, node_limit=RESTRICTED_NODES))
    finally:
        for i, lb, ub in saved:
            lm.variables[i].lb, lm.variables[i].ub = lb, ub
    return out.values
