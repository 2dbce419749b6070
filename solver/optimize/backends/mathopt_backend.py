"""OR-Tools MathOpt backend: SCIP (GSCIP), HiGHS or CP-SAT behind one translation."""

from __future__ import annotations

import datetime
import threading
import time

from ortools.math_opt import model_pb2
from ortools.math_opt.python import mathopt
from ortools.util.python import solve_interrupter

from solver.optimize.backends.base import SolveOptions
from solver.optimize.linear import LinearModel, Progress, SolveOutcome

_SOLVERS = {"scip": mathopt.SolverType.GSCIP, "highs": mathopt.SolverType.HIGHS, "cp-sat": mathopt.SolverType.CP_SAT}
# Only these report improving solutions through MathOpt callbacks.
_CALLBACKS = {"scip", "cp-sat"}


class MathOptBackend:
    def __init__(self, solver: str):
        self.name = solver
        self._type = _SOLVERS[solver]

    def _translate(self, lm: LinearModel, relax: bool = False):
        """Build the ModelProto in bulk: ~15x faster than adding terms through the Python API."""
        p = model_pb2.ModelProto(name="fleet")
        nv = len(lm.variables)
        v = p.variables
        v.ids.extend(range(nv))
        v.lower_bounds.extend(x.lb for x in lm.variables)
        v.upper_bounds.extend(x.ub for x in lm.variables)
        v.integers.extend((x.integer and not relax) for x in lm.variables)
        v.names.extend(x.name for x in lm.variables)
        p.objective.maximize = False
        obj = sorted(lm.objective.items())
        p.objective.linear_coefficients.ids.extend(i for i, _ in obj)
        p.objective.linear_coefficients.values.extend(c for _, c in obj)
        c = p.linear_constraints
        c.ids.extend(range(len(lm.rows)))
        c.lower_bounds.extend(r.lb for r in lm.rows)
        c.upper_bounds.extend(r.ub for r in lm.rows)
        c.names.extend(r.name for r in lm.rows)
        rows, cols, vals = [], [], []
        for j, r in enumerate(lm.rows):
            merged: dict[int, float] = {}
            for i, coef in r.terms:
                merged[i] = merged.get(i, 0.0) + coef
            for i in sorted(merged):
                if merged[i] != 0.0:
                    rows.append(j)
                    cols.append(i)
                    vals.append(merged[i])
        mat = p.linear_constraint_matrix
        mat.row_ids.extend(rows)
        mat.column_ids.extend(cols)
        mat.coefficients.extend(vals)
        model = mathopt.Model.from_model_proto(p)
        return model, list(model.variables())

    def _rows(self, model) -> list:
        return list(model.linear_constraints())

    def solve(self, lm: LinearModel, options: SolveOptions) -> SolveOutcome:
        start = time.monotonic()
        model, xs = self._translate(lm, options.relax_integrality)
        solver_type = mathopt.SolverType.GLOP if options.relax_integrality else self._type
        params = mathopt.SolveParameters(
            time_limit=datetime.timedelta(seconds=max(options.time_limit_s, 0.01)),
            relative_gap_tolerance=None if options.relax_integrality else options.relative_gap,
            absolute_gap_tolerance=None if options.relax_integrality else options.absolute_gap,
            threads=options.threads if self.name != "highs" and not options.relax_integrality else None,
            # CP-SAT has no node limit; the time limit bounds it instead.
            node_limit=None if options.relax_integrality or self.name == "cp-sat" else options.node_limit,
        )
        model_params = None
        if options.hint is not None and not options.relax_integrality:
            hint = mathopt.SolutionHint(variable_values={x: v for x, v in zip(xs, options.hint)})
            model_params = mathopt.ModelSolveParameters(solution_hints=[hint])
        kwargs: dict = {}
        stop_watch = threading.Event()
        if options.cancel is not None:
            # Only when cancellable: SCIP's interrupter logs a harmless event-handler error line.
            interrupter = solve_interrupter.SolveInterrupter()
            stop_watch = _watch_cancel(options.cancel, interrupter)
            kwargs["interrupter"] = interrupter
        if options.on_progress is not None and self.name in _CALLBACKS:
            found = [0]
            reported = [float("inf")]

            def cb(data: mathopt.CallbackData) -> mathopt.CallbackResult:
                stats = data.mip_stats
                # SCIP also calls back before its first solution (primal bound 0 or inf): not a plan.
                if stats.number_of_solutions_found <= 0 or abs(stats.primal_bound) >= 1e30 or data.solution is None:
                    return mathopt.CallbackResult()
                values = [data.solution.get(x, 0.0) for x in xs]
                cost = sum(c * values[i] for i, c in lm.objective.items())
                # A new solution is not always an improving one: report only those that are.
                if cost >= reported[0] - 1e-9:
                    return mathopt.CallbackResult()
                reported[0] = cost
                found[0] += 1
                scale = options.objective_scale
                bound = stats.dual_bound / scale if abs(stats.dual_bound) < 1e30 else None
                options.on_progress(Progress(time.monotonic() - start, cost / scale, bound, found[0]), values)
                return mathopt.CallbackResult()

            kwargs["callback_reg"] = mathopt.CallbackRegistration(events={mathopt.Event.MIP_SOLUTION})
            kwargs["cb"] = cb
        try:
            result = mathopt.solve(model, solver_type, params=params, model_params=model_params, **kwargs)
        finally:
            stop_watch.set()
        elapsed = time.monotonic() - start
        reason = result.termination.reason
        has_solution = result.has_primal_feasible_solution()
        values = list(result.variable_values(xs)) if has_solution else None
        objective = result.objective_value() if has_solution else None
        bound = result.termination.objective_bounds.dual_bound
        bound = bound if abs(bound) < 1e30 else None
        if reason == mathopt.TerminationReason.OPTIMAL and self.name == "cp-sat":
            # CP-SAT scales real coefficients (prices, throughputs) to integers, so its proof
            # covers an approximation of this model: seen claiming a dearer plan optimal.
            status, bound = "feasible", None
        elif reason == mathopt.TerminationReason.OPTIMAL:
            status = "optimal"
        elif reason in (mathopt.TerminationReason.INFEASIBLE,):
            status = "infeasible"
        elif options.cancel is not None and options.cancel.is_set():
            status = "cancelled" if not has_solution else "feasible"
        elif has_solution:
            status = "feasible"
        else:
            status = "no_solution"
        duals = None
        if options.relax_integrality and has_solution and result.has_dual_feasible_solution():
            duals = list(result.dual_values(self._rows(model)))  # row prices of the LP (a lower-bound certificate)
        return SolveOutcome(status, values, objective, bound, elapsed, self.name, result.termination.detail, duals)


def _watch_cancel(cancel: threading.Event | None, interrupter) -> threading.Event:
    """Poll the caller's cancel event and interrupt the solver when it is set."""
    done = threading.Event()
    if cancel is None:
        return done

    def run():
        while not done.wait(0.05):
            if cancel.is_set():
                interrupter.interrupt()
                return

    threading.Thread(target=run, daemon=True, name="solve-cancel").start()
    return done
