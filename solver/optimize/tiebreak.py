"""Tie-break among fleets of the optimal cost: fewest GPUs, then idle GPUs carry replicas.

Tie-breaking never changes the cost, so it gets a small effort that never depends on the
clock (a scheduler calling in a loop must get the same plan for the same input):
1. the LP relaxation of "fewest GPUs at the optimal cost" often proves the plan already
   has the fewest (its bound leaves no room for one GPU less);
2. otherwise, on small models only, a second MIP from the plan as a hint under a node
   limit; on larger ones the cost MIP's fleet stands and the plan says so. Measured on
   the 100-service benchmark and 20-service review scenarios (docs/benchmarks.md): the
   second MIP never proved fewer GPUs within 200 nodes and never changed the fleet, while
   costing as much as the cost MIP itself;
3. idle GPUs of the chosen fleet carry extra replicas (solver/optimize/headroom.py).
Tried and dropped: reduced-cost fixing from the cost LP before the second MIP. The root
LP is 10-12 % below the optimum on the 100-service benchmark, so it fixed no variable.
"""

from __future__ import annotations

import time

from solver.optimize.backends import SolveOptions
from solver.optimize.formulation import Formulation, gpu_objective
from solver.optimize.linear import SolveOutcome

TIE_BREAK_NODES = 200
TIE_BREAK_MAX_INTEGER_VARIABLES = 200  # the second MIP only below this model size
COST_TOLERANCE_USD_PER_HOUR = 1e-6  # the cost MIP's absolute gap: "the same cost"


def tie_break(form: Formulation, backend, first: SolveOutcome, deadline: float, cancel) -> tuple[SolveOutcome, list[str]]:
    """Among fleets of the optimal cost, the one with the fewest GPUs (as far as the effort
    allows); returns it and notes on what was established."""
    lm = form.model
    saved_objective, saved_rows = lm.objective, len(lm.rows)
    notes = []
    values = first.values
    cutoff = first.objective + COST_TOLERANCE_USD_PER_HOUR

    def remaining(cap: float) -> float:
        return max(min(deadline - time.monotonic(), cap), 0.05)

    try:
        lm.row("tie_break_cost", form.cost_terms, ub=cutoff)
        lm.objective = gpu_objective(form)
        gpus = sum(c * values[i] for i, c in form.gpu_terms)
        # The LP relaxation bounds the GPUs of any cheapest fleet in milliseconds; when it
        # leaves no room below the plan's GPU count, the plan already has the fewest.
        lp = backend.solve(lm, SolveOptions(time_limit_s=remaining(5.0), relax_integrality=True, cancel=cancel))
        if lp.status == "optimal" and lp.objective is not None and lp.objective > gpus - 1 + 1e-6:
            notes.append("fewest GPUs")
        elif lm.size["integer_variables"] > TIE_BREAK_MAX_INTEGER_VARIABLES:
            notes.append("fewest GPUs not searched (large model)")
        elif not (cancel is not None and cancel.is_set()):
            second = backend.solve(lm, SolveOptions(time_limit_s=remaining(3600.0), hint=values,
                                                    absolute_gap=0.5, node_limit=TIE_BREAK_NODES, cancel=cancel))
            if second.values is not None:
                values = second.values
                notes.append("fewest GPUs" + ("" if second.status == "optimal" else " (best within the effort limit)"))
    finally:
        lm.objective = saved_objective
        del lm.rows[saved_rows:]
    merged = SolveOutcome(first.status, values, sum(c * values[i] for i, c in form.cost_terms),
                          first.bound, first.solve_time_s, first.backend, first.detail)
    return merged, notes
