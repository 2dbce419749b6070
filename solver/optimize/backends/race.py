"""Two MIP backends on one model, on two cores: the first proof ends both (backend "auto").

SCIP and HiGHS each prove some of this product's models in seconds where the other takes
minutes (measured on one machine, one run each, 2026-12-08):
* 100 LLM services with `serving: auto` (bench/disagg.py --speed 100; 32,227 variables,
  27,077 integer): SCIP 140 s, HiGHS 18.1 s, the same optimum ($343.79);
* issue 26's random single-period problem: SCIP at a 3 % gap after 120 s, HiGHS 9.4 s;
* and SCIP ahead on most others (bench/backends.py; optimality proofs of the 100-service
  re-plan: SCIP 3.4 s, HiGHS 5.5 s).
Which one wins is not predictable from the model's size or shape we know of, so "auto"
runs the backend its features choose (base.resolve_auto) and, once that has run
RACE_AFTER_S without an answer and a core was idle meanwhile (solver/cores.py: the
machine's idle time over that second, not the load average, which lags by a minute; else
it looks again each RACE_AFTER_S: the planner's own helper process may hold the other core
for a few seconds), the other one beside it. Most solves end before then and run alone, as before.

Both run in threads of this process (the solvers release the GIL). The race ends when the
first backend returns (a proof, or its own limit: time, objective limit, a cancel) or the
second proves its answer; the other is then cancelled (and, where the first ended without
a proof, its answer waited for up to LOSER_JOIN_S, never past the time limit).
SCIP looks at a cancel only between nodes, and on some models spends minutes in its root
node (the `serving: auto` model above: 247 nodes in 43 s): a SCIP that has not stopped by
then is left to end at its own time limit, its answer unread, and the caller goes on with
the proof it has. It keeps its core until then: the CLI ends with os._exit, which it does
not hold up; a server worker goes on to its next job beside it (whose own race then finds
no idle core and does not start).  Any other end of the wait (an exception in the caller's
thread) stops both. The answer is the proof, else the cheaper plan of the two with the higher of their
dual bounds (both bound the same model, so the higher one is valid) - and "optimal" when
that pair closes the gap, as a proof split over two solvers still is one. The outcome
names the backend whose plan it is (`backend`), and `detail` says what the other did.

Not raced: LP relaxations (milliseconds), node-limited solves (their effort limit is
there to make them answer alike on any machine), models above RACE_MAX_NONZEROS (a second
copy of a large model in the second solver costs memory the request may not have), and
callers that fill every core already (`PlanOptions.race_backends`: reviews).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from solver.cores import cpu_sample, spare_core_since
from solver.optimize.backends.base import SolveOptions
from solver.optimize.linear import LinearModel, SolveOutcome

# The second backend starts after the first has run this long: the 100-service benchmarks'
# MIPs take 0.2-0.6 s, and a second solver for them would cost a core for nothing.
RACE_AFTER_S = 1.0
# A second solver holds its own copy of the model and its search: not above this size.
RACE_MAX_NONZEROS = 200_000
# Models this small end in milliseconds: no threads for them.
RACE_MIN_INTEGERS = 64
# After the first returns without a proof, the second is interrupted (within the cancel
# watcher's poll) and its plan and bound read if they come within this long (and
# within the solve's time limit); one inside a long presolve is left to end at its own
# limit, its answer unread.
LOSER_JOIN_S = 2.0
_PROOFS = ("optimal", "infeasible")


class _Either:
    """Set when any of its events is: the caller's cancel or the race's own stop (the
    backends only ever call `is_set`)."""

    def __init__(self, *events):
        self._events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self._events)


class Race:
    """`first` alone, then `second` beside it from RACE_AFTER_S on (see the module notes)."""

    name = "auto"

    def __init__(self, first, second, spare_core=None, race_after_s: float = RACE_AFTER_S):
        self.first, self.second = first, second
        # (a cpu_sample() taken as the first started) -> whether a core was idle since
        self._spare_core = spare_core or spare_core_since
        self.race_after_s = race_after_s

    def solve(self, lm: LinearModel, options: SolveOptions) -> SolveOutcome:
        size = lm.size
        if options.relax_integrality or options.node_limit is not None or size["integer_variables"] < RACE_MIN_INTEGERS \
                or size["nonzeros"] > RACE_MAX_NONZEROS:
            return self.first.solve(lm, options)
        start = time.monotonic()
        deadline = start + options.time_limit_s
        sample = cpu_sample()
        lock = threading.Condition()
        answers: dict[str, SolveOutcome | BaseException] = {}
        stops = {"first": threading.Event(), "second": threading.Event()}
        open_ = [True]  # progress reports stop when the race has answered
        started = [False]  # the second solver began

        def progress(*args) -> None:
            with lock:
                if open_[0]:
                    options.on_progress(*args)

        def run(key: str, backend, opts: SolveOptions) -> None:
            try:
                out: SolveOutcome | BaseException = backend.solve(lm, opts)
            except BaseException as exc:  # handed to the caller, as a solve in its own thread raises
                out = exc
            with lock:
                answers[key] = out
                lock.notify_all()

        def run_second() -> None:
            since = sample
            while True:  # until a second in which a core was idle (a helper process may hold it a while)
                with lock:
                    if lock.wait_for(lambda: "first" in answers, self.race_after_s):
                        return
                if deadline - time.monotonic() <= 0.05:
                    return
                if self._spare_core(since):
                    break
                since = cpu_sample()
            with lock:
                if stops["second"].is_set():
                    return  # the first answered meanwhile
                started[0] = True
            run("second", self.second, replace(options, time_limit_s=deadline - time.monotonic(), on_progress=None,
                                               cancel=_Either(stops["second"], options.cancel)))

        first = threading.Thread(target=run, daemon=True, name="solve-race-first", args=(
            "first", self.first, replace(options, cancel=_Either(stops["first"], options.cancel),
                                         on_progress=progress if options.on_progress is not None else None)))
        second = threading.Thread(target=run_second, daemon=True, name="solve-race-second")
        first.start()
        second.start()
        try:
            with lock:
                # Until the first answers, or the second proves (then the first is stopped).
                lock.wait_for(lambda: "first" in answers or _proved(answers.get("second")))
                won = "first" if "first" in answers else "second"
                other = "second" if won == "first" else "first"
                stops[other].set()
                # The other stops within the cancel watcher's poll, except a solver deep in
                # work that looks at no cancel (SCIP's root node), which is left to end by
                # its own limit. Its answer is waited for only where it may add something -
                # the first ended without a proof, not by the caller's cancel or at the
                # objective limit - and not past the solve's own time limit.
                if won == "first" and started[0] and not _proved(answers["first"]) \
                        and not (options.cancel is not None and options.cancel.is_set()) \
                        and not _at_limit(answers["first"], options.objective_limit):
                    lock.wait_for(lambda: other in answers, min(LOSER_JOIN_S, max(deadline - time.monotonic(), 0.0)))
                open_[0] = False
                got = dict(answers)
        finally:
            # Whatever ends the wait (an answer, or an exception in this thread such as a
            # KeyboardInterrupt), neither solver runs on for nothing.
            for stop in stops.values():
                stop.set()
        if isinstance(got[won], BaseException):
            raise got[won]
        if isinstance(got.get(other), BaseException):
            del got[other]  # the loser's failure changes nothing the winner found
        return combine(got.get("first"), got.get("second"), options, stopped_first=won == "second",
                       elapsed_s=time.monotonic() - start, first_name=self.first.name,
                       second_name=self.second.name if started[0] else "")


def _proved(out) -> bool:
    return isinstance(out, SolveOutcome) and out.status in _PROOFS


def _at_limit(out, objective_limit: float | None) -> bool:
    """The answer reached the caller's objective limit (a plan that good ends the solve)."""
    return (isinstance(out, SolveOutcome) and objective_limit is not None and out.objective is not None
            and out.objective <= objective_limit)


def combine(first: SolveOutcome | None, second: SolveOutcome | None, options: SolveOptions,
            stopped_first: bool = False, elapsed_s: float | None = None, first_name: str = "",
            second_name: str = "") -> SolveOutcome:
    """One answer from the two solvers' (see the module notes); either may be None (the
    second never started - or was stopped unread - or the first was left running after the
    second's proof). `stopped_first`: the race stopped the first solver because the second
    proved its answer; `second_name`: the second ran (its answer may be None)."""
    if first is None or second is None:
        only = first if second is None else second
        if first is None:
            detail = _detail(only, None, "left to end by its own limit", first_name)
        else:
            detail = _detail(only, None, "stopped", second_name) if second_name else only.detail
        return replace(only, solve_time_s=only.solve_time_s if elapsed_s is None else elapsed_s, detail=detail)
    elapsed = first.solve_time_s if elapsed_s is None else elapsed_s
    outs = [first, second]
    bounds = [o.bound for o in outs if o.bound is not None]
    bound = max(bounds) if bounds else None
    proofs = [o for o in outs if o.status in _PROOFS]
    if any(o.status == "infeasible" for o in proofs) and any(o.values is not None for o in outs):
        # The solvers disagree (numerics): a plan in hand is checked by the evaluator, a claim
        # of infeasibility would send the caller away with nothing. The plan, unproven.
        has = min((o for o in outs if o.values is not None), key=lambda o: o.objective)
        other = second if has is first else first
        return replace(has, status="feasible", bound=None, solve_time_s=elapsed,
                       detail=_detail(has, other, "infeasible, which this plan contradicts"))
    if proofs:
        won = next((o for o in proofs if o.status == "optimal"), proofs[0])
        lost = second if won is first else first
        how = "stopped: the other proved it first" if (won is second and stopped_first) else lost.status
        return replace(won, solve_time_s=elapsed, detail=_detail(won, lost, how))  # its own bound: the proof's
    planned = [o for o in outs if o.values is not None and o.objective is not None]
    if not planned:
        return replace(first, bound=bound, solve_time_s=elapsed, detail=_detail(first, second, second.status))
    best = min(planned, key=lambda o: o.objective)
    other = second if best is first else first
    status = best.status
    if bound is not None and best.objective - bound <= max(options.absolute_gap,
                                                           options.relative_gap * abs(best.objective)):
        status = "optimal"  # one solver's plan, the other's bound: a proof all the same
        bound = min(bound, best.objective)  # a bound past the plan's cost is the other's tolerance
    return replace(best, status=status, bound=bound, solve_time_s=elapsed,
                   detail=_detail(best, other, other.status))


def _detail(won: SolveOutcome, other: SolveOutcome | None, how: str, other_name: str | None = None) -> str:
    own = f": {won.detail}" if won.detail else ""
    name = other.backend if other is not None else other_name or "the other backend"
    return f"{won.backend}{own} (raced with {name}: {how})"
