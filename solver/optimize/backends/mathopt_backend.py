"""OR-Tools MathOpt backend: SCIP (GSCIP), HiGHS or CP-SAT behind one translation.

The model goes to MathOpt's core solver as one ModelProto built in bulk, and the answer
is read straight from the SolveResultProto. Skipping MathOpt's Python `Model` layer
(building it, then parsing every solution into dictionaries keyed by variable objects)
saves tens of milliseconds per solve and about half a second of imports, which matters
to a scheduler calling in a loop and to a CLI run.

A cancel reaches every solver through MathOpt's interrupter (imported only when a cancel
is given; SCIP looks at it at each node and presolve round, and prints two spurious error
lines that stderr_filter.py keeps out of sight). Not through a callback: SCIP with any
callback registered solved the 100-service `serving: auto` model (bench/disagg.py --speed
100; 27,077 integers) in 138-153 s against 42-44 s without one, on 2026-12-08, whether the
callback was called at every node (247 calls) or at each new plan only (19).

Solves that end in a proof (optimal or infeasible) are remembered by their exact input
(`SOLVES`): a single-threaded solver answers the same model, parameters and hints the same
way every time, so a repeated call (a scheduler asking again, the same one-service request
from many clients) gets the solver's own answer without paying again for SCIP's start
(~5 ms: creating a SCIP instance and its ~2,000 parameters, even for a 2-variable model).
"""

from __future__ import annotations

import os
import threading
import time
from operator import attrgetter, itemgetter

from google.protobuf import duration_pb2
from ortools.math_opt import (callback_pb2, model_parameters_pb2, model_pb2, parameters_pb2, result_pb2,
                              solution_pb2, sparse_containers_pb2)
from ortools.math_opt.core.python import solver as core_solver

from solver.lru import LockedLru
from solver.optimize.backends.base import SolveOptions
from solver.optimize.linear import LinearModel, Progress, SolveOutcome

_SOLVERS = {"scip": parameters_pb2.SOLVER_TYPE_GSCIP, "highs": parameters_pb2.SOLVER_TYPE_HIGHS}
# Only SCIP reports improving solutions through callbacks (progress reports and the
# objective limit need them; a cancel does not: see above).
_CALLBACKS = {"scip"}
_INF_BOUND = 1e30
_R = result_pb2
# SCIP looks at its time limit between LP solves, cuts and heuristics, and on a large model
# one of them runs well past it: the 100-service instance-domain model of bench/redundancy.py
# (1.7 million nonzeros) ended 0.2-2.7 s after limits of 0.5-4 s by SCIP's own clock, and
# building the model and reading the answer took 0.5 s more. So SCIP gets the caller's
# limit less an allowance that grows with the model (1.2 microseconds per nonzero: ~2 s
# there, nothing that matters below ~100,000 nonzeros), at most a quarter of the limit.
SCIP_OVERRUN_S_PER_NONZERO = 1.2e-6
SCIP_OVERRUN_MAX_SHARE = 0.25
# Watching for a cancel costs the interrupter and its watcher thread: ~0.7 ms a solve, more than a model this small takes to
# solve. Such a solve ends within milliseconds (well inside the pool's COOPERATIVE_STOP_S),
# and plan() looks at the cancel as soon as it returns.
TINY_VARIABLES = 64
TINY_INTEGER_VARIABLES = 8
TINY_ROWS = 64


def _tiny(lm: LinearModel) -> bool:
    return (len(lm.variables) <= TINY_VARIABLES and len(lm.rows) <= TINY_ROWS
            and sum(v.integer for v in lm.variables) <= TINY_INTEGER_VARIABLES)


class SolveMemo(LockedLru):
    """The results of solves that ended in a proof (optimal or infeasible), by their exact
    input: solver, model, parameters other than the time limit (a proof did not depend on
    it), hints and callback registration. The least recently used go first when it holds
    `max_entries` results or `max_bytes` of models and results. Thread-safe."""

    # Small and medium models only (a ModelProto of 64 KiB is ~1,500 variables): for larger
    # ones SCIP's start is a small part of the solve, and a few MiB keep a worker well below
    # the growth that makes it give memory back after every job (server/worker.py).
    def __init__(self, max_entries: int = 1024, max_bytes: int = 4 * 2**20, max_model_bytes: int = 64 * 2**10):
        super().__init__(max_entries)  # key bytes -> (result, its size in bytes)
        self.max_bytes, self.max_model_bytes = max_bytes, max_model_bytes
        self._bytes = 0

    def get(self, key: bytes) -> result_pb2.SolveResultProto | None:
        with self._lock:
            found = self._lookup(key)
            return None if found is None else found[0]

    def put(self, key: bytes, result: result_pb2.SolveResultProto) -> None:
        size = len(key) + result.ByteSize()
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._data:
                return
            self._data[key] = (result, size)
            self._bytes += size
            while len(self._data) > self.max_entries or self._bytes > self.max_bytes:
                self._bytes -= self._data.popitem(last=False)[1][1]

    def _cleared(self) -> None:
        self._bytes = 0


SOLVES = SolveMemo()
_PROVEN = (_R.TERMINATION_REASON_OPTIMAL, _R.TERMINATION_REASON_INFEASIBLE)


_LB, _UB, _INTEGER, _NAME, _FIRST = (attrgetter("lb"), attrgetter("ub"), attrgetter("integer"), attrgetter("name"),
                                     itemgetter(0))


class MathOptBackend:
    def __init__(self, solver: str):
        self.name = solver
        self._type = _SOLVERS[solver]

    @staticmethod
    def _translate(lm: LinearModel, relax: bool = False) -> model_pb2.ModelProto:
        """Build the ModelProto in bulk: ~15x faster than adding terms one by one."""
        p = model_pb2.ModelProto(name="fleet")
        variables = lm.variables
        nv = len(variables)
        v = p.variables
        v.ids.extend(range(nv))
        # Bounds as floats first: the same doubles, but upb converts a Python int ~30x slower
        # than a float (the formulation's bounds are mostly ints).
        v.lower_bounds.extend(list(map(float, map(_LB, variables))))
        v.upper_bounds.extend(list(map(float, map(_UB, variables))))
        v.integers.extend([False] * nv if relax else list(map(_INTEGER, variables)))
        v.names.extend(list(map(_NAME, variables)))
        p.objective.maximize = False
        obj = sorted(lm.objective.items())
        p.objective.linear_coefficients.ids.extend([i for i, _ in obj])
        p.objective.linear_coefficients.values.extend([float(c) for _, c in obj])
        c = p.linear_constraints
        c.ids.extend(range(len(lm.rows)))
        c.lower_bounds.extend(list(map(float, map(_LB, lm.rows))))
        c.upper_bounds.extend(list(map(float, map(_UB, lm.rows))))
        c.names.extend(list(map(_NAME, lm.rows)))
        rows, cols, vals = [], [], []
        for j, r in enumerate(lm.rows):
            terms = r.terms
            if len({i for i, _ in terms}) == len(terms):
                # Each variable once (as the formulation writes rows): its coefficient as it
                # is (0.0 + coef is coef, but for -0.0, which is dropped either way), in
                # column order - the same entries as merging, in fewer steps.
                for i, coef in sorted(terms, key=_FIRST):
                    if coef != 0.0:
                        rows.append(j)
                        cols.append(i)
                        vals.append(coef)
                continue
            merged: dict[int, float] = {}
            for i, coef in terms:
                merged[i] = merged.get(i, 0.0) + coef
            for i in sorted(merged):
                if merged[i] != 0.0:
                    rows.append(j)
                    cols.append(i)
                    vals.append(merged[i])
        mat = p.linear_constraint_matrix
        mat.row_ids.extend(rows)
        mat.column_ids.extend(cols)
        mat.coefficients.extend(list(map(float, vals)))
        return p

    def _parameters(self, options: SolveOptions, nonzeros: int = 0) -> parameters_pb2.SolveParametersProto:
        relax = options.relax_integrality
        seconds = max(options.time_limit_s, 0.01)
        if self.name == "scip" and not relax:
            seconds -= min(SCIP_OVERRUN_S_PER_NONZERO * nonzeros, SCIP_OVERRUN_MAX_SHARE * seconds)
        params = parameters_pb2.SolveParametersProto(
            time_limit=duration_pb2.Duration(seconds=int(seconds), nanos=int((seconds % 1) * 1e9)))
        if not relax:
            params.relative_gap_tolerance = options.relative_gap
            params.absolute_gap_tolerance = options.absolute_gap
            if self.name != "highs":
                params.threads = options.threads
            if options.node_limit is not None:
                params.node_limit = options.node_limit
        return params

    def solve(self, lm: LinearModel, options: SolveOptions) -> SolveOutcome:
        start = time.monotonic()
        if options.cancel is not None and options.cancel.is_set() and not _tiny(lm):
            # SCIP cannot act on an interrupter until its solve has begun (a cancel set before
            # it would run a small model to the end): a cancel is a cancel.
            return SolveOutcome("cancelled", None, None, None, 0.0, self.name, "cancelled before the solve began")
        relax = options.relax_integrality
        proto = self._translate(lm, relax)
        solver_type = parameters_pb2.SOLVER_TYPE_GLOP if relax else self._type
        model_params = model_parameters_pb2.ModelSolveParametersProto()
        if not relax:
            for values in ([options.hint] if options.hint is not None else []) + list(options.extra_hints):
                hint = model_params.solution_hints.add()
                hint.variable_values.ids.extend(range(len(values)))
                hint.variable_values.values.extend(list(map(float, values)))  # floats: see _translate
        registration = callback_pb2.CallbackRegistrationProto()
        proto_cb = None
        interrupter = None
        stop_watch = threading.Event()
        watch_callbacks = not relax and self.name in _CALLBACKS
        report = _Reporter(lm, options, start) if options.on_progress is not None and watch_callbacks else None
        cancel = options.cancel
        if cancel is not None and _tiny(lm):
            cancel = None  # not watched (see TINY_VARIABLES); options.cancel still decides a "cancelled" status
        # gSCIP takes no objective limit (its SCIP's own `limits/primal` ends in a status gSCIP
        # does not know, and it aborts the process): a plan at least that cheap ends the
        # solve from the callback.
        limit = options.objective_limit if watch_callbacks else None
        reached = [False]
        if watch_callbacks and (report is not None or limit is not None):
            registration.request_registration.append(callback_pb2.CALLBACK_EVENT_MIP_SOLUTION)

            def proto_cb(data: callback_pb2.CallbackDataProto) -> callback_pb2.CallbackResultProto:
                if data.event == callback_pb2.CALLBACK_EVENT_MIP_SOLUTION:
                    if report is not None:
                        report(data)
                    if limit is not None and data.HasField("primal_solution_vector"):
                        values = _dense(data.primal_solution_vector, len(lm.variables))
                        reached[0] = reached[0] or sum(c * values[i] for i, c in lm.objective.items()) <= limit
                return callback_pb2.CallbackResultProto(terminate=reached[0] or (cancel is not None and cancel.is_set()))
        params = self._parameters(options, len(proto.linear_constraint_matrix.coefficients))
        # Progress reports come from the solve itself: a caller that wants them gets a solve.
        memo_key = None
        if options.on_progress is None and proto.ByteSize() <= SOLVES.max_model_bytes:
            memo_key = _memo_key(solver_type, proto, params, model_params, registration)
            remembered = SOLVES.get(memo_key)
            if remembered is not None:
                return self._outcome(remembered, lm, options, time.monotonic() - start)
        if cancel is not None:
            from ortools.util.python import pybind_solve_interrupter

            interrupter = pybind_solve_interrupter.PySolveInterrupter()
            stop_watch = _watch_cancel(cancel, interrupter)
        try:
            result = core_solver.solve(proto, solver_type, parameters_pb2.SolverInitializerProto(),
                                       params, model_params, None, registration, proto_cb, interrupter)
        finally:
            stop_watch.set()
        # A solve that a cancel or the objective limit ended is not a proof (its termination
        # reason says so); one that ended in a proof would end the same way again.
        if memo_key is not None and result.termination.reason in _PROVEN and not reached[0]:
            SOLVES.put(memo_key, result)
        return self._outcome(result, lm, options, time.monotonic() - start)

    def _outcome(self, result: result_pb2.SolveResultProto, lm: LinearModel, options: SolveOptions,
                 elapsed: float) -> SolveOutcome:
        reason = result.termination.reason
        primal = None
        if result.solutions and result.solutions[0].HasField("primal_solution"):
            candidate = result.solutions[0].primal_solution
            if candidate.feasibility_status == solution_pb2.SOLUTION_STATUS_FEASIBLE:
                primal = candidate
        values = _dense(primal.variable_values, len(lm.variables)) if primal is not None else None
        objective = primal.objective_value if primal is not None else None
        bound = result.termination.objective_bounds.dual_bound
        bound = bound if abs(bound) < _INF_BOUND else None
        if reason == _R.TERMINATION_REASON_OPTIMAL:
            status = "optimal"
        elif reason == _R.TERMINATION_REASON_INFEASIBLE:
            status = "infeasible"
        elif options.cancel is not None and options.cancel.is_set():
            status = "cancelled" if primal is None else "feasible"
        elif primal is not None:
            status = "feasible"
        else:
            status = "no_solution"
        duals = None
        if options.relax_integrality and result.solutions and result.solutions[0].HasField("dual_solution"):
            dual = result.solutions[0].dual_solution
            if dual.feasibility_status == solution_pb2.SOLUTION_STATUS_FEASIBLE:
                duals = _dense(dual.dual_values, len(lm.rows))  # row prices of the LP (a lower-bound certificate)
        return SolveOutcome(status, values, objective, bound, elapsed, self.name, result.termination.detail, duals)


def _memo_key(solver_type: int, proto: model_pb2.ModelProto, params: parameters_pb2.SolveParametersProto,
              model_params: model_parameters_pb2.ModelSolveParametersProto,
              registration: callback_pb2.CallbackRegistrationProto) -> bytes:
    """The exact input of a solve, as bytes (deterministic serialization), time limit left out."""
    params = parameters_pb2.SolveParametersProto.FromString(params.SerializeToString())
    params.ClearField("time_limit")
    parts = [proto.SerializeToString(deterministic=True), params.SerializeToString(deterministic=True),
             model_params.SerializeToString(deterministic=True), registration.SerializeToString(deterministic=True)]
    return b"".join([solver_type.to_bytes(2, "little")] + [len(p).to_bytes(8, "little") + p for p in parts])


def _dense(vector: sparse_containers_pb2.SparseDoubleVectorProto, size: int) -> list[float]:
    values = [0.0] * size
    for i, v in zip(vector.ids, vector.values):
        values[i] = v
    return values


class _Reporter:
    """Turns the solver's MIP_SOLUTION callbacks into Progress for improving plans only."""

    def __init__(self, lm: LinearModel, options: SolveOptions, start: float):
        self.lm, self.options, self.start = lm, options, start
        self.found = 0
        self.reported = float("inf")

    def __call__(self, data: callback_pb2.CallbackDataProto) -> None:
        stats = data.mip_stats
        # SCIP also calls back before its first solution (primal bound 0 or inf): not a plan.
        if stats.number_of_solutions_found <= 0 or abs(stats.primal_bound) >= _INF_BOUND \
                or not data.HasField("primal_solution_vector"):
            return
        values = _dense(data.primal_solution_vector, len(self.lm.variables))
        cost = sum(c * values[i] for i, c in self.lm.objective.items())
        # A new solution is not always an improving one: report only those that are.
        if cost >= self.reported - 1e-9:
            return
        self.reported = cost
        self.found += 1
        scale = self.options.objective_scale
        bound = stats.dual_bound / scale if abs(stats.dual_bound) < _INF_BOUND else None
        self.options.on_progress(Progress(time.monotonic() - self.start, cost / scale, bound, self.found), values)


class _CancelWatcher:
    """Polls the cancel events of the solves running now and interrupts the solver of each
    one that is set, from one long-lived thread: starting a thread per solve cost more
    than a small LP itself (~0.2 ms CPU, ~0.5 ms wall). Restarted after a fork."""

    # 10 ms: the server's pool gives a cancelled job 50 ms to stop before it kills its worker
    # (server/pool.py COOPERATIVE_STOP_S); at 50 ms SCIP's cancel took 19-62 ms (10-22 ms
    # through the node callback it replaced).
    POLL_S = 0.01

    def __init__(self) -> None:
        self._pid = -1

    def watch(self, cancel: threading.Event, interrupter) -> threading.Event:
        """Watch until the returned event is set (the solve ended)."""
        done = threading.Event()
        if os.getpid() != self._pid:  # first use, or a forked child: no thread here yet
            self._pid = os.getpid()
            self._cond = threading.Condition()
            self._watched: dict[threading.Event, tuple] = {}
            threading.Thread(target=self._run, args=(self._cond, self._watched), daemon=True,
                             name="solve-cancel").start()
        with self._cond:
            if not self._watched:
                self._cond.notify()  # the thread sleeps until there is something to watch
            self._watched[done] = (cancel, interrupter)
        return done

    def _run(self, cond: threading.Condition, watched: dict) -> None:
        while True:
            with cond:
                while not watched:
                    cond.wait()
                cond.wait(self.POLL_S)
                for done, (cancel, interrupter) in list(watched.items()):
                    if done.is_set():
                        del watched[done]
                    elif cancel.is_set():
                        del watched[done]
                        interrupter.interrupt()


_WATCHER = _CancelWatcher()


def _watch_cancel(cancel: threading.Event, interrupter) -> threading.Event:
    """Interrupt the solver when the caller's cancel event is set (polled every POLL_S);
    set the returned event when the solve has ended."""
    return _WATCHER.watch(cancel, interrupter)
