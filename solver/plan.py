"""`plan()`: workload -> cheapest proven-optimal fleet, checked by the evaluator.

Stages: consistency checks -> candidates (pruned) -> greedy warm start -> MIP (cost)
-> MIP (tie-break) -> solution -> independent evaluation -> result/explanation.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from solver.optimize.backends import SolveOptions, get_backend
from solver.optimize.backends.base import resolve_auto
from solver.compile.candidates import SHARED_CACHE, CandidateCache, add_candidates, build_problem
from solver.compile.compiled import compile_problem
from solver.compile.fleet_size import check_fleet_size
from solver.compile.load_caps import at_load, caps_per_replica, engine_options_of, real_routed, real_share
from solver.catalog.types import Catalog
from solver.collector import paused as collector_paused
from solver.confidence import NOMINAL, rate_margin, slowdown
from solver.dataclass_repr import dataclass
from solver.errors import Cancelled, InfeasibleError, InputError, PlannerError, SolverTimeout
from solver.interrupt import Stop
from solver.evaluate import evaluate
from solver.explain.diagnose import diagnose_infeasible, diagnose_unservable, unexplained_reason
from solver.compile.power import power_violations
from solver.output.power import add_power
from solver.optimize.formulation import Formulation, build, region_violations
from solver.optimize.headroom import fill_idle_gpus
from solver.optimize.tiebreak import tie_break
from solver.optimize import redundancy
from solver.optimize.greedy import greedy_solution, solution_cost
from solver.optimize.linear import Progress, SolveOutcome
from solver.compile.problem import Problem
from solver.compile.lazy_caps import (has_pending, pending_keys, probe_survivors, refine, resolve_caps,
                                      service_floors, settle, solve_configs, tighten, without_dearer)
from solver.compile.verified_caps import verify_round
from solver.confidence import rate_margin
from solver.compile.resolve import check_references, resolve_catalog
from solver.output.prefetch import AtLoadPrefetch
from solver.output.sanity import low_utilization_warnings, tail_class_warnings, verification_warnings
from solver.output.result import (AssignmentView, EngineSettings, ConfidenceCost, ConfidenceView, FleetLine, PlanResult, PoolSimulation, RedundancyCost, RedundancyView,
                                  ServingChoice,
                                  ServiceResult, SloCheck, SolverInfo)
from solver.workload.schema import Workload
from solver.optimize.solution import Solution


EXPLAIN_BUDGET_S = 10.0  # --explain's exact re-solves, all services together
MAX_VERIFY_ROUNDS = 6  # plans solved again after the simulator lowered a cap


@dataclass
class PlanOptions:
    """How to run plan(): the caller's overrides and hooks (CLI, server, reviews)."""

    time_limit_s: float | None = None  # overrides workload.solver.time_limit_s (e.g. a gRPC deadline)
    backend: str | None = None
    explain: bool = False
    on_progress: Callable[[Progress], None] | None = None
    cancel: threading.Event | None = None
    base_dir: str | None = None  # where relative catalog files are resolved
    catalog: Catalog | None = None  # pre-resolved catalog (reviews reuse one)
    # The caller has already run check_references(workload, catalog) on this catalog (the
    # server reads every request with it): not run again.
    references_checked: bool = False
    check: bool = True  # run the independent evaluator on the answer
    # Candidate configurations by (service performance, offer hardware): shared across
    # calls in this process; None recomputes everything.
    cache: CandidateCache | None = SHARED_CACHE
    # Called with each stage's name as it starts: "candidates", "model", "solve",
    # "tie_break", "evaluate", "explain" (logs, progress, tests).
    on_stage: Callable[[str], None] | None = None
    # time.monotonic() by which the answer must be ready (a gRPC call's deadline): after it,
    # the informational p99-under-load values of services without a percentile SLO are
    # left out (with a warning) rather than making the caller miss the plan.
    answer_by: float | None = None
    # Compute the start plan's values under load in a forked child while the MIP runs
    # (solver/output/prefetch.py): off where solves already fill every core (reviews).
    prefetch_at_load: bool = True
    # Simulation in the loop (solver/compile/verified_caps.py); None: the workload's solver.verify.
    verify: bool | None = None


def plan(workload: Workload, options: PlanOptions | None = None) -> PlanResult:
    options = options or PlanOptions()
    prefetch = AtLoadPrefetch(options.prefetch_at_load)
    try:
        with collector_paused():  # a plan makes ~10^5 long-lived objects and next to no cycles
            return _plan(workload, options, prefetch)
    finally:
        prefetch.close()  # done, failed or cancelled: the child stops now


def _plan(workload: Workload, options: PlanOptions, prefetch: AtLoadPrefetch) -> PlanResult:
    t0 = time.monotonic()
    if options.verify is None:
        options = replace(options, verify=workload.solver.verify)
    catalog = options.catalog or resolve_catalog(workload, options.base_dir)
    if options.catalog is not None:  # a caller's catalog (reviews, the server): the owned GPUs join it
        from solver.catalog.owned import with_owned

        catalog = with_owned(workload, catalog)
    if not (options.references_checked and options.catalog is not None):
        workload = check_references(workload, catalog)
    time_limit = options.time_limit_s if options.time_limit_s is not None else workload.solver.time_limit_s
    deadline = t0 + time_limit
    stop = Stop(options.cancel, deadline, time_limit)
    if options.answer_by is None:
        # The time limit bounds the answer too: past it, the informational values under
        # load of services without a percentile SLO are left out (with a warning), as past
        # a gRPC call's deadline - hundreds of services cost seconds of queueing runs.
        options = replace(options, answer_by=deadline)
    stage = options.on_stage or (lambda name: None)
    timings: dict[str, float] = {}
    stage("candidates")
    problem = build_problem(workload, catalog, options.cache, stop)
    check_fleet_size(problem)  # before any work that grows with the fleet
    if has_pending(problem) and (options.explain or workload.horizon_mode):
        # Explanations quote any configuration, and the multi-period search prices every
        # period with them: every percentile cap exact first.
        problem = resolve_caps(problem, helper=options.prefetch_at_load, stop=stop)
    timings["candidates_s"] = time.monotonic() - t0
    unservable = diagnose_unservable(problem, catalog)
    if unservable:
        raise InfeasibleError(unservable)
    backend_name = options.backend or workload.solver.backend
    if workload.horizon_mode:
        # Periods, pricing tiers or a running fleet: the multi-period planner (its own module;
        # everything below is today's single static hour, unchanged).
        from solver.plan_horizon import plan_horizon
        return plan_horizon(workload, catalog, problem, backend_name, options, t0, deadline, stop, timings)
    problem, form, outcome, solution, ties = _solve_with_exact_caps(problem, catalog, backend_name, deadline, stop,
                                                                    options, workload.solver.tie_break, timings, t0,
                                                                    prefetch)
    return _result(workload, catalog, problem, form, outcome, solution, ties, t0, deadline, options, timings, prefetch)


def solve_static(problem: Problem, catalog: Catalog, options: PlanOptions | None = None, *,
                 ties: bool = True) -> tuple[Problem, Solution, SolveOutcome]:
    """The single-hour planner on a compiled problem (no explanation, no evaluation):
    (the problem with the percentile caps it needed, the plan, the solver's outcome).
    Exact for the problem's caps, whichever are still upper bounds. With
    lazy_caps.lower_caps, what a check after the solve (a simulator that finds a
    configuration missing its SLO at its cap) uses to solve again: lower the caps that
    missed, solve the returned problem again."""
    options = options or PlanOptions()
    t0 = time.monotonic()
    time_limit = options.time_limit_s if options.time_limit_s is not None else 60.0
    stop = Stop(options.cancel, t0 + time_limit, time_limit)
    timings = {"candidates_s": 0.0}
    problem, _, outcome, solution, _ = _solve_with_exact_caps(problem, catalog, options.backend or "auto", t0 + time_limit,
                                                              stop, options, ties, timings, t0)
    return problem, solution, outcome


def _solve_with_exact_caps(problem: Problem, catalog: Catalog, backend_name: str, deadline: float, stop: Stop,
                           options: PlanOptions, ties_wanted: bool, timings: dict[str, float], t0: float,
                           prefetch: AtLoadPrefetch | None = None):
    """`solve_single`, again after computing the exact percentile caps of the pending
    configurations each plan uses, until a plan uses none (solver/compile/lazy_caps.py:
    the optimum of the problem with upper bounds is then the true optimum). Before the
    first solve every service is settled alone (its own cheapest cover uses exact caps
    only), which is what makes one or two solves enough."""
    rounds = 0
    verify_rounds = 0
    verify_s = 0.0
    checks: dict = {}
    verifying = options.verify and problem_wants_checks(problem)
    stats: dict = {}
    lazy = has_pending(problem)
    helper = options.prefetch_at_load  # a forked child may compute caps on the spare core
    if lazy:
        t1 = time.monotonic()
        problem = settle(problem, helper=helper, stop=stop, stats=stats)
        timings["percentile_settle_s"] = time.monotonic() - t1
        unservable = diagnose_unservable(problem, catalog)
        if unservable:
            raise InfeasibleError(unservable)
    mip_s = 0.0
    start: list[Solution] = []  # plans of the exact problem found so far: each round's MIPs start from them
    # The plan a verification round refuted, kept until the next round has a plan: if the time
    # ends first, it is the answer (with the refuted configurations named), not a timeout.
    fallback: tuple | None = None
    # Rounds may stop their MIP at the first plan cheaper than the exact configurations' own
    # while that makes progress; a round that stops at no cheaper plan than the one before
    # (a MIP's rounding can put the same plan a hair below the limit) ends early stopping:
    # from then on every round proves.
    stop_early, last_early = True, math.inf
    while True:
        try:
            # The tie-break waits for the round whose plan needs no further cap: an earlier
            # round's plan is only a list of configurations to compute caps for.
            t1 = time.monotonic()
            if lazy:
                problem, (form, outcome, solution, backend), limited = _lazy_solve(
                    problem, backend_name, deadline, stop, options, timings, t0, stats, helper, start, stop_early)
            else:
                limited = False
                form, outcome, solution, backend = _cost_solve(problem, backend_name, deadline, stop, options, timings,
                                                               t0, prefetch, catalog)
            mip_s += time.monotonic() - t1
            ties = "not needed"
            used = pending_keys(problem, {a.config_key for a in solution.assignments})
            if limited and not used and deadline - time.monotonic() > 0.05 and not stop.cancelled:
                # The MIP with pending configurations stopped at a plan of exact ones cheaper
                # than the round's: a better start, not a proof. Another round from it.
                cost = solution_cost(problem, solution)
                if cost >= last_early - _cheaper_by(last_early):
                    stop_early = False
                last_early = min(last_early, cost)
                start.append(solution)
                rounds += 1
                continue
            if ties_wanted and not used:
                outcome, solution, ties = _break_ties(form, backend, outcome, solution, deadline, stop, options,
                                                      timings)
                # Another cheapest plan may use a configuration whose cap is still a bound.
                used = pending_keys(problem, {a.config_key for a in solution.assignments})
        except SolverTimeout:
            if fallback is None:
                raise
            problem, form, outcome, solution, ties = fallback
            break
        except InfeasibleError:
            if not has_pending(problem):
                raise
            # Infeasible with upper bounds is infeasible; say why with exact figures.
            if problem.budget_usd_per_hour is not None:
                # The diagnosis quotes the cheapest fleet without the budget: the same loop
                # finds it exactly, and leaves the problem with the caps it needed.
                try:
                    loose = _solve_with_exact_caps(replace(problem, budget_usd_per_hour=None), catalog, backend_name,
                                                   deadline, stop, options, False, timings, t0)[0]
                except InfeasibleError:
                    loose = resolve_caps(problem, helper=helper, stop=stop)
                problem = replace(loose, budget_usd_per_hour=problem.budget_usd_per_hour)
                solve_single(problem, backend_name, deadline, stop, options, ties_wanted, timings, t0)
                raise  # not reached: the problem is infeasible with its budget
            problem = resolve_caps(problem, helper=helper, stop=stop, stats=stats)
            unservable = diagnose_unservable(problem, catalog)
            if unservable:
                raise InfeasibleError(unservable) from None
            continue
        if not used:
            if not verifying:
                break
            # Every cap the plan uses is exact: check them in the simulator, and solve again
            # where one was too generous (solver/compile/verified_caps.py).
            t1 = time.monotonic()
            (options.on_stage or (lambda name: None))("verify")
            kept, lowered = verify_round(problem, solution, catalog, deadline, stop, checks)
            verify_s += time.monotonic() - t1
            if lowered is None or verify_rounds >= MAX_VERIFY_ROUNDS or deadline - time.monotonic() < 0.05:
                # Confirmed, or out of rounds or time with caps still moving: the plan stands
                # with the caps it was solved with, and reports what the simulator refuted.
                problem = kept
                break
            start.clear()  # plans of the problem before: a lowered cap may leave one short
            fallback = (kept, form, outcome, solution, ties)
            problem = lowered
            verify_rounds += 1
            continue
        rounds += 1
        try:
            problem = refine(problem, used, helper=helper, stop=stop, stats=stats)
        except SolverTimeout:
            if fallback is None:
                raise
            problem, form, outcome, solution, ties = fallback
            break
        unservable = diagnose_unservable(problem, catalog)
        if unservable:
            raise InfeasibleError(unservable)
        if (outcome.status != "optimal" and not limited) or deadline - time.monotonic() < 0.05:
            # No time to solve again: the plan stands only if it serves its routed traffic
            # at the exact caps (the evaluator checks it again).
            if not _serves_at_caps(problem, solution):
                if fallback is not None:
                    problem, form, outcome, solution, ties = fallback
                    break
                raise SolverTimeout(f"no plan that meets the percentile SLOs under load was found within "
                                    f"{stop.time_limit_s:g} s. To fix: raise the time limit")
            break
    timings["percentile_cap_rounds"] = float(rounds)
    timings["percentile_caps_s"] = stats.get("caps_s", 0.0)
    if lazy:
        # Every second spent on caps and bounds: the settle step, the rounds' caps, the
        # saturation bounds and the probes (with a helper, this process's waits included).
        timings["percentile_caps_total_s"] = (stats.get("settle_s", 0.0) + stats.get("caps_s", 0.0)
                                              + stats.get("bounds_s", 0.0) + stats.get("probes_s", 0.0))
    if lazy:
        timings["percentile_caps"] = float(stats.get("caps", 0))
        timings["percentile_helper_items"] = float(stats.get("helper_items", 0))
        timings["percentile_bounds"] = float(stats.get("bounds", 0))
        timings["percentile_mip_s"] = mip_s
        timings["percentile_excluded"] = float(stats.get("excluded", 0))
        timings["percentile_mips"] = float(stats.get("mips", 0))
        timings["percentile_probes"] = float(stats.get("probes", 0))
    if verifying:
        timings["verify_rounds"] = float(verify_rounds)
        timings["verify_s"] = verify_s
    # What the plan reports per assignment: its configuration's check at the rate it routes.
    if verifying:
        problem = replace(problem, checks=_final_checks(problem, solution, checks))
    return problem, form, outcome, solution, ties


def problem_wants_checks(problem: Problem) -> bool:
    """Whether any service's caps come from the queueing model (an LLM service with a
    percentile SLO and latency bounds): what simulation in the loop checks."""
    return any(s.model is not None and s.slo.percentile is not None and s.slo.bounds() for s in problem.services)


def _final_checks(problem: Problem, solution: Solution, checks: dict) -> dict:
    """Per configuration of the final plan, its check at the rate the plan routes to it:
    the simulation's answer, a confirmation at a higher rate, or "not checked"."""
    from solver.compile.verified_caps import Check, needs_check

    out = {}
    for a, s, c in needs_check(problem, solution):
        margin = rate_margin(s.slo.confidence)
        rate = sum(a.routed) / a.replicas * (1 + margin)
        ch = checks.get(c.key)
        met, _ = problem.verified.get(c.key, (0.0, math.inf))
        if ch is not None and abs(ch.rate_per_s - rate) <= 1e-9 * max(rate, 1.0):
            out[c.key] = ch
        elif rate <= met * (1 + 1e-9):
            out[c.key] = replace(ch, rate_per_s=rate) if ch is not None and ch.verdict == "met" else \
                Check(c.key, rate, "met", reason="confirmed at a higher rate")
        else:
            out[c.key] = Check(c.key, rate, "not checked", reason="the plan changed after the last check, or the "
                               "verification's time or rounds ran out")
    return out


def _cheaper_by(cost: float) -> float:
    """How much cheaper than `cost` a plan must be to count as a cheaper one: more than a
    MIP's integrality tolerance moves an objective (a plan with 0.9999999 instances)."""
    return max(1e-4, 1e-7 * abs(cost)) if math.isfinite(cost) else 0.0


def _lazy_solve(problem: Problem, backend_name: str, deadline: float, stop: Stop, options: PlanOptions,
                timings: dict[str, float], t0: float, stats: dict, helper: bool, start: list,
                stop_early: bool = True):
    """One round of the percentile-cap loop: (problem, (form, outcome, solution, backend),
    whether the MIP stopped at a plan cheaper than the round's plan of exact configurations
    rather than at a proof).

    The MIP over the exact configurations alone gives a plan of the exact problem (cost U;
    started from `start`, the plans of earlier rounds, which it extends with its own). The
    pending configurations that no plan cheaper than U can use are left out
    (lazy_caps.without_dearer: exact); those left get their saturation bound (cheap) and are
    looked at again. When none is left, the plan of exact configurations is optimal; else
    the MIP over all that is left, started from it, is the round's answer (its plan may use
    pending configurations: the next round computes their caps)."""
    configs = solve_configs(problem)
    exact = [c for c in configs if c.pending_cap is None]
    first = None
    upper = math.inf
    if exact:
        try:
            first = _cost_solve(problem, backend_name, deadline, stop, options, timings, t0, configs=exact,
                                hints=start, diagnose=False)
            stats["mips"] = stats.get("mips", 0) + 1
            if first[1].objective is not None:
                upper = first[1].objective
                start.append(first[2])
        except (InfeasibleError, SolverTimeout):
            first = None
    rest = configs
    if upper < math.inf:
        rest = without_dearer(configs, service_floors(problem, configs), upper)
        left = {c.key for c in rest if c.pending_cap is not None}
        if left:
            # Those left: the saturation bound (~1 ms), then one model evaluation at the rate
            # below which each would be left out (~3 ms); the MIP takes the rest.
            tightened = tighten(problem, left, helper=helper, stop=stop, stats=stats)
            if tightened is not problem:
                problem = tightened
                configs = solve_configs(problem)
                floors = service_floors(problem, configs)
                rest = without_dearer(configs, floors, upper)
            else:
                floors = service_floors(problem, configs)
            if any(c.pending_cap is not None for c in rest):
                probed = probe_survivors(problem, rest, floors, upper, helper=helper, stop=stop, stats=stats)
                if probed is not problem:
                    problem = probed
                    configs = solve_configs(problem)
                    rest = without_dearer(configs, service_floors(problem, configs), upper)
    stats["excluded"] = len(configs) - len(rest)  # this round
    if first is not None and first[1].status == "optimal" and not any(c.pending_cap is not None for c in rest):
        return problem, first, False
    stats["mips"] = stats.get("mips", 0) + 1
    # Until the plan of exact configurations is proven optimal, the MIP with the pending ones
    # only has to find a plan cheaper than it (its pending configurations get their caps, or
    # it is a better plan of the exact problem): it stops at the first. Proving that none
    # exists is the last round's work.
    below = upper - _cheaper_by(upper) if stop_early and first is not None and math.isfinite(upper) else None
    found = _cost_solve(problem, backend_name, deadline, stop, options, timings, t0, configs=rest, hints=start[-1:],
                        stop_below=below)
    # Stopped at a plan below the limit (not by the time limit): the round is not the last.
    limited = below is not None and found[1].status == "feasible" and found[1].objective is not None \
        and found[1].objective <= below
    return problem, found, limited


def _serves_at_caps(problem: Problem, solution: Solution) -> bool:
    by_key = {c.key: c for c in problem.configs}
    for a in solution.assignments:
        c = by_key.get(a.config_key)
        if c is None:
            return False
        need = sum(r / k.throughput if k.throughput > 0 else (float("inf") if r > 1e-9 else 0.0)
                   for r, k in zip(a.routed, c.classes))
        if need > a.replicas * (1 + 1e-6) + 1e-9:
            return False
    return True


def solve_single(problem: Problem, backend_name: str, deadline: float, stop: Stop, options: PlanOptions,
                 ties_wanted: bool, timings: dict[str, float], t0: float) -> tuple[Formulation, SolveOutcome, Solution, str]:
    """One static hour: greedy warm start and bound, the cost MIP, the tie-break."""
    form, outcome, solution, backend = _cost_solve(problem, backend_name, deadline, stop, options, timings, t0)
    ties = "not needed"
    if ties_wanted:
        outcome, solution, ties = _break_ties(form, backend, outcome, solution, deadline, stop, options, timings)
    return form, outcome, solution, ties


def _cost_solve(problem: Problem, backend_name: str, deadline: float, stop: Stop, options: PlanOptions,
                timings: dict[str, float], t0: float, prefetch: AtLoadPrefetch | None = None, catalog: Catalog | None = None,
                configs: list | None = None, hints: list | None = None, diagnose: bool = True,
                stop_below: float | None = None):
    """Greedy warm start and bound, the cost MIP: (form, outcome, solution, backend), over
    `configs` (the problem's when None). `stop_below`: the solve ends at the first plan at
    least that cheap (then not proven optimal: its status says "feasible")."""
    stage = options.on_stage or (lambda name: None)
    stage("model")
    configs = list(problem.configs if configs is None else configs)
    replicas = [c for c in configs if "#" not in c.service]
    if len(replicas) < len(configs) and not any(s.serving == "disaggregated" for s in problem.services):
        # With disaggregated pools the model is many times larger (a pool per link tier), and
        # its solver can take long to find what the replicas alone give: their optimum, found
        # first in their much smaller model, starts it - so `serving: auto` is never dearer
        # than aggregated serving, even when the time limit stops it.
        try:
            seed = _cost_solve(problem, backend_name, deadline, stop, options, timings, t0, configs=replicas,
                               hints=hints, diagnose=False)[2]
            hints = [*(hints or ()), seed]
        except (InfeasibleError, SolverTimeout):
            pass
    greedy = greedy_solution(problem, configs)
    # Hints that are plans of this problem bound its optimum (a hint short of a cap is only a start).
    upper = min((solution_cost(problem, h) for h in hints or () if _serves_at_caps(problem, h)
                 and evaluate_quick(problem, h)), default=math.inf)
    if greedy is not None and evaluate_quick(problem, greedy):
        upper = min(upper, solution_cost(problem, greedy))
    if upper < math.inf:
        # A configuration whose single instance costs more than a known feasible plan can
        # never be in an optimal one (strictly dearer, so ties are unaffected).
        price = {o.id: o.price_usd_per_hour for o in problem.offers}
        configs = [c for c in configs if price[c.offer_id] * c.instances_per_replica <= upper + 1e-9]
    form = build(problem, configs, stop=stop)
    if form.split and upper < math.inf:
        kept = _pools_that_may_pay(form, configs, upper)
        if len(kept) < len(configs):
            # The bounds stay those of the whole model: still lower bounds on every plan.
            bounds, lower = form.service_bounds, form.lower_bound
            form = build(problem, kept, stop=stop, bounds=False)
            form.service_bounds, form.lower_bound = bounds, lower
            configs = kept
    backend = get_backend(resolve_auto(backend_name, form.model))
    hint = form.values_from(greedy) if greedy is not None else None
    # Pooled models: the services' own best plans, combined, are usually within a few
    # instances of the optimum: a far better start than the greedy plan.
    extra = [v for v in (form.values_from(h) for h in hints or ()) if v is not None]
    if form.service_bounds:
        # Imported here: a formulation without service bounds (one service, say) never needs it.
        from solver.optimize.service_bounds import bound_plan_values

        extra += [v for v in [bound_plan_values(form, form.service_bounds)] if v is not None]
        if extra and prefetch is not None and prefetch.enabled and not has_pending(problem):
            # That plan's assignments are nearly all the final plan's: their values under
            # load are computed on the other core while the solver runs.
            prefetch.start(problem, catalog, form.solution_from(extra[0]))
    timings["formulation_s"] = time.monotonic() - t0 - timings["candidates_s"]
    stage("solve")
    relative_gap = problem.relative_gap
    if extra and relative_gap > 0:
        # To a gap, finding a plan that close is the work: start the MIP from better plans.
        from solver.optimize.warm_start import warm_starts

        t1 = time.monotonic()
        extra = warm_starts(form, backend, extra[0], relative_gap, stop) + extra
        timings["warm_start_s"] = time.monotonic() - t1
    limit = form.lower_bound * (1 + relative_gap) if form.lower_bound is not None and relative_gap > 0 else None
    if form.split and form.lower_bound is not None and limit is None:
        # Disaggregated pools make the model many times larger than its answer is hard: the
        # services' own bounds (each with its pools, solver/optimize/service_bounds.py) are
        # usually the optimum itself, and a plan that reaches them is proven (below).
        limit = form.lower_bound + _bound_reached(form.lower_bound)
    if stop_below is not None:
        limit = stop_below if limit is None else max(limit, stop_below)
    opts = SolveOptions(time_limit_s=max(deadline - time.monotonic(), 0.05), hint=hint, extra_hints=extra,
                        relative_gap=relative_gap, objective_limit=limit,
                        on_progress=_relay(form, options.on_progress), cancel=options.cancel)
    outcome = _with_lower_bound(backend.solve(form.model, opts), form.lower_bound, relative_gap)
    timings["solve_s"] = outcome.solve_time_s
    if outcome.status == "infeasible":
        if not diagnose:
            raise InfeasibleError([])
        stage("diagnose")
        reasons = diagnose_infeasible(problem, backend, stop)
        raise InfeasibleError(reasons or [unexplained_reason()])
    if outcome.status == "cancelled":
        raise Cancelled("the solve was cancelled before any fleet was found")
    if outcome.values is None:
        raise SolverTimeout(f"no feasible fleet found within {stop.time_limit_s:g} s; the model has "
                            f"{form.model.size['integer_variables']} integer variables. To fix: raise the time limit")
    if stop.cancelled:  # a cancel that came as the solver finished: the caller wants no plan now
        stop.check("the cost MIP")
    return form, outcome, form.solution_from(outcome.values), backend


def _break_ties(form: Formulation, backend, outcome: SolveOutcome, solution: Solution, deadline: float, stop: Stop,
                options: PlanOptions, timings: dict[str, float]) -> tuple[SolveOutcome, Solution, str]:
    """The tie-break among the cost-optimal plans, then idle GPU slots filled for headroom.
    `solution` is `form.solution_from(outcome.values)`."""
    ties = "not needed"
    if outcome.status == "optimal" and deadline - time.monotonic() > 0.05:
        t1 = time.monotonic()
        (options.on_stage or (lambda name: None))("tie_break")
        cost_values = outcome.values
        outcome, notes = tie_break(form, backend, outcome, deadline, options.cancel)
        timings["tie_break_s"] = time.monotonic() - t1
        if stop.cancelled:  # the tie-break keeps its best plan when cancelled, but the caller wants none now
            stop.check("the tie-break")
        # The cost MIP's own values (no second MIP ran, or it found nothing): decoded already.
        decoded = solution if outcome.values is cost_values else form.solution_from(outcome.values)
        solution, added = fill_idle_gpus(form, decoded)
        if added:
            notes.append(f"then {added} idle GPU slot(s) given extra replicas for headroom")
        ties = ", ".join(notes) or "skipped (time limit)"
    return outcome, solution, ties


def _pools_that_may_pay(form: Formulation, configs: list, upper: float) -> list:
    """`configs` without the disaggregated pools of each service whose pools cannot be in a
    plan cheaper than `upper` (a plan in hand): the other services' bounds plus this one's
    bound when its pools are used exceed it. Exact: every plan that uses them costs more."""
    if form.lower_bound is None:
        return configs
    total = sum(b.bound for b in form.service_bounds.values())
    hopeless = set()
    for name, b in form.service_bounds.items():
        if b.with_pools is not None and total - b.bound + b.with_pools > upper + _bound_reached(upper):
            hopeless.add(name)
    if not hopeless:
        return configs
    return [c for c in configs if "#" not in c.service or c.service.split("#", 1)[0] not in hopeless]


def _with_lower_bound(outcome: SolveOutcome, lower_bound: float | None, relative_gap: float) -> SolveOutcome:
    """Count the services' own proven bound: the better bound, and a proof when the plan is
    within the requested gap of it (the solver stops there on its objective limit), or
    reaches it (up to the bound's own rounding margin: formulation.LB_MARGIN_*)."""
    if lower_bound is None or outcome.objective is None:
        return outcome
    bound = max(outcome.bound if outcome.bound is not None else -math.inf, lower_bound)
    status = outcome.status
    if status == "feasible" and (outcome.objective - bound <= relative_gap * abs(outcome.objective)
                                 or outcome.objective - lower_bound <= _bound_reached(lower_bound)):
        status = "optimal"
    return replace(outcome, status=status, bound=bound)


def _bound_reached(lower_bound: float) -> float:
    """How far above the services' summed bound a plan may cost and still reach it: twice
    the margin the bound was lowered by (formulation.LB_MARGIN_REL/ABS), far below any
    price difference (prices have at most 6 decimals)."""
    from solver.optimize.formulation import LB_MARGIN_ABS, LB_MARGIN_REL

    return 2 * (LB_MARGIN_ABS + LB_MARGIN_REL * abs(lower_bound))


def load_warnings(s, views: list[AssignmentView]) -> list[str]:
    """Services without a percentile SLO: where p99 at the real demand's rate (the plan's
    routing without constraints.headroom, as at_load) would miss a bound."""
    if s.slo.percentile is not None:
        return []
    out = []
    for v in views:
        at = v.at_load
        if at is None or at.meets_slo:
            continue
        misses = [f"{label} {'cannot keep up' if getattr(at, name) is None else f'{getattr(at, name):.0f} ms'} "
                  f"> {bound:g} ms"
                  for name, label, bound in (("ttft_ms", "TTFT", s.slo.ttft_ms), ("tpot_ms", "TPOT", s.slo.tpot_ms),
                                             ("latency_ms", "latency", s.slo.latency_ms))
                  if bound is not None and (getattr(at, name) is None or getattr(at, name) > bound)]
        out.append(f"{v.config}: at the demand's load (utilization {v.utilization:.0%}, "
                   f"{at.utilization:.0%} of what a replica sustains), "
                   f"p99 {', '.join(misses)}. To fix: state slo.percentile so the plan is sized for it")
    return out


def _relay(form: Formulation, on_progress):
    """Backend progress (with raw values) -> the caller's Progress with the improving fleet."""
    if on_progress is None:
        return None

    def relay(progress: Progress, values: list[float]) -> None:
        fleet = tuple({"offer_id": o, "instances": int(round(values[i]))}
                      for o, i in sorted(form.n.items()) if round(values[i]) > 0)
        on_progress(replace(progress, fleet=fleet))

    return relay


def evaluate_quick(problem: Problem, sol: Solution) -> bool:
    """Budget, quotas and max_replicas of the greedy plan (it already covers demand and packs alone)."""
    cost = solution_cost(problem, sol)
    replicas: dict[str, int] = {}
    for a in sol.assignments:
        replicas[a.service] = replicas.get(a.service, 0) + a.replicas
    for s in problem.services:
        if s.max_replicas is not None and replicas.get(s.name, 0) > s.max_replicas:
            return False
    if problem.budget_usd_per_hour is not None and cost > problem.budget_usd_per_hour + 1e-9:
        return False
    for offer_id, n in sol.fleet:
        if offer_id in problem.offer_limits and n > problem.offer_limits[offer_id]:
            return False
    for gpu, quota in problem.gpu_quotas.items():
        used = sum(problem.offer(o).gpus_per_instance * n for o, n in sol.fleet if problem.offer(o).gpu == gpu)
        if used > quota:
            return False
    if power_violations(problem, dict(sol.fleet)):
        return False
    if region_violations(problem, sol):
        return False
    return not (redundancy.active(problem) and redundancy.violations(problem, sol))


def service_results(problem: Problem, solution: Solution, catalog: Catalog,
                    answer_by: float | None = None, cancel: threading.Event | None = None,
                    prefetch: AtLoadPrefetch | None = None) -> list[ServiceResult]:
    """Per service: its demand, the capacity the plan gives it, and each configuration used.
    Past `answer_by`, services without a percentile SLO get no at_load values (each costs
    a queueing-model run); a service with one always gets them (its plan was sized by them).
    A cancel ends the work (checked before each queueing-model run, ~10 ms apart). Values
    a `prefetch` child has finished are taken from it (the same function of the same inputs)."""
    stop = Stop(cancel)
    used = {a.config_key for a in solution.assignments}
    by_key = {c.key: c for c in problem.configs if c.key in used}
    services = []
    active = {a.service for a in solution.assignments}
    for s in problem.services:
        if s.role and s.name not in active:
            continue  # a disaggregated pool the plan does not use
        # Utilization and the values under load are at the real demand's rate; the rows
        # carry demand x (1 + headroom), whose extra is reported apart (headroom_utilization).
        share = real_share(problem, s)
        views = []
        tail_notes: list[str] = []
        skipped = False
        capacity = [0.0] * len(s.class_demand)
        for a in solution.assignments:
            if a.service != s.name:
                continue
            c = by_key[a.config_key]
            thr = [k.throughput for k in c.classes]
            used = sum(r / t for r, t in zip(a.routed, thr) if t > 0)
            for k, t in enumerate(thr):
                capacity[k] += t * a.replicas
            worst = lambda attr: max((getattr(k, attr) for k in c.classes if getattr(k, attr) is not None), default=None)
            view = AssignmentView(
                a.config_key, c.offer_id, problem.offer(c.offer_id).gpu, c.gpus_per_replica, c.instances_per_replica,
                c.precision, c.source, a.replicas, [round(t, 6) for t in thr], [round(r, 6) for r in a.routed],
                round(used * share / a.replicas, 4), worst("ttft_ms"), worst("tpot_ms"), worst("latency_ms"),
                c.classes[0].batch, c.memory_gib_per_gpu, c.classes[0].binding_limit, c.error_band,
                headroom_utilization=_reserve(used * (1.0 - share) / a.replicas))
            for name, bound in s.slo.bounds():
                view.slo_checks.append(SloCheck(name, getattr(view, name), bound))
            settings = engine_options_of(catalog, problem.calibration, s, c)
            view.engine_options = EngineSettings(**settings) if settings is not None else None
            check = problem.checks.get(c.key)
            if check is not None:
                view.verified = check.view()
            if s.role:  # a prefill or decode worker: its rate already holds its percentile (solver/perf/disagg.py)
                views.append(view)
                continue
            tail_notes.extend(tail_class_warnings(s, c))
            if s.slo.percentile is None and answer_by is not None and time.monotonic() > answer_by:
                skipped = True
            else:
                stop.check("the values under load")
                real = real_routed(problem, s, a.routed)
                done = prefetch.values(problem, s.name, c, a.replicas, real) if prefetch is not None else None
                view.at_load = done if done is not None else at_load(catalog, problem.calibration, s, c, a.replicas,
                                                                      real)
            caps = caps_per_replica(catalog, problem.calibration, s, c, a.routed)
            if caps is not None:
                view.cap_per_replica, view.cap_per_replica_nominal = round(caps[0], 6), round(caps[1], 6)
            views.append(view)
        # Utilization = busy replica-time / replicas at the real demand (the headroom's extra
        # apart); capacity at this class mix = the planned rate / the planned busy share.
        replicas = sum(v.replicas for v in views)
        busy = sum(v.utilization * v.replicas for v in views)
        extra = sum((v.headroom_utilization or 0.0) * v.replicas for v in views)
        utilization = busy / replicas if replicas else 0.0
        headroom_utilization = extra / replicas if replicas else 0.0
        if len(s.class_demand) == 1:
            total_cap = capacity[0]
        else:
            planned = utilization + headroom_utilization
            total_cap = s.total_demand / planned if planned > 0 else 0.0
        llm = s.model is not None
        if s.role:
            rate = sum(sum(v.routed) for v in views)
            services.append(ServiceResult(s.name, s.unit, round(rate * share, 6), round(rate, 6), round(total_cap, 6),
                                          round(utilization, 4), list(s.class_names), views,
                                          model=s.model_label if llm else None, engine=s.engine if llm else None,
                                          role=s.role, serves=s.feeds, link=s.link,
                                          headroom_utilization=_reserve(headroom_utilization)))
            continue
        warnings = (load_warnings(s, views) + low_utilization_warnings(s, views) + tail_notes
                    + verification_warnings(s, views))
        if skipped:
            warnings.append("values under load (at_load) not computed for every configuration: the call's deadline "
                            "came first. To fix: give the call a longer deadline")
        services.append(ServiceResult(s.name, s.unit, s.raw_demand, s.total_demand, round(total_cap, 6),
                                      round(utilization, 4), list(s.class_names), views, warnings=warnings,
                                      model=s.model_label if llm else None, engine=s.engine if llm else None,
                                      confidence=_confidence_view(s, problem.calibration),
                                      capacity_margin=_capacity_margin(views),
                                      headroom_utilization=_reserve(headroom_utilization)))
    return _with_redundancy(problem, solution,
                            _with_pool_checks(problem, solution, catalog, _with_pool_capacity(services)))


def _with_redundancy(problem: Problem, solution: Solution, services: list[ServiceResult]) -> list[ServiceResult]:
    """Each service's worst single-domain loss (services with a failure domain), and a
    warning where min_replicas alone looks like redundancy but one instance's loss leaves
    the service short (the replicas are not alike: one carries almost everything)."""
    by_name = {r.name: r for r in services}
    for name, sv in redundancy.survivals(problem, solution).items():
        r = by_name.get(name)
        if r is None or not sv.worst_domain:
            continue
        r.redundancy = RedundancyView(sv.domain, sv.serve_fraction, sv.worst_domain,
                                      round(sv.surviving_fraction, 6), sv.exact)
        if sv.domain == "zone":
            r.warnings.append("redundancy by zone is planned as by region: the catalog lists offers by region, not "
                              "zone, so the plan survives a region's loss (its cost is an upper bound on zone N+1)")
    bare = [s for s in problem.services if not s.redundancy_domain and not s.role and s.min_replicas >= 2
            and s.raw_demand > 0 and s.name in by_name]
    if bare:
        import dataclasses

        shadow = dataclasses.replace(problem, services=tuple(
            dataclasses.replace(s, redundancy_domain="instance", redundancy_fraction=1.0,
                                redundancy_demand=tuple(d / (1 + problem.headroom) for d in s.class_demand))
            if s in bare else s for s in problem.services))
        for name, sv in redundancy.survivals(shadow, solution).items():
            if sv.worst_domain and sv.surviving_fraction < 1 - 1e-6:
                by_name[name].warnings.append(
                    f"min_replicas {shadow.service(name).min_replicas} is not N+1 here: losing "
                    f"{sv.worst_domain} leaves {_floor_percent(sv.surviving_fraction)} of the demand served. To "
                    f"fix: set constraints.redundancy (e.g. {{domain: instance}}) to plan N+1 exactly")
    return services


def _with_pool_checks(problem: Problem, solution: Solution, catalog: Catalog,
                      services: list[ServiceResult]) -> list[ServiceResult]:
    """Each disaggregated deployment the plan uses, replayed by the simulator at the rate
    the plan routes to it (solver/sim/disagg.py): its percentiles, and a warning where they
    miss the SLO."""
    from solver.compile.disagg import deployment_check

    by_name = {r.name: r for r in services}
    for r in services:
        if r.role != "prefill":
            continue
        partner = next((x for x in services if x.role == "decode" and x.serves == r.serves and x.link == r.link), None)
        if partner is None:
            continue
        check = deployment_check(problem, solution, catalog, r.serves, r.link)
        r.simulated = partner.simulated = PoolSimulation(**check["view"])
        parent = by_name.get(r.serves)
        if parent is not None:
            parent.warnings.extend(check["warnings"])
    return services


def _floor_percent(share: float) -> str:
    """A share below 1 as a percentage that never rounds up to 100 %."""
    return f"{math.floor(share * 1000) / 10:g} %"


def _reserve(share: float) -> float | None:
    """headroom_utilization as reported: rounded, and None without a headroom (absent in
    the proto, as clients that drop default values show it)."""
    share = round(share, 4)
    return share if share > 0 else None


def _with_pool_capacity(services: list[ServiceResult]) -> list[ServiceResult]:
    """A service's capacity counts each disaggregated deployment it uses: per link tier, the
    smaller of its prefill and decode pools' capacity (every request takes both)."""
    pools: dict[str, dict[str, dict[str, float]]] = {}
    for r in services:
        if r.role:
            pools.setdefault(r.serves, {}).setdefault(r.link, {})[r.role] = r.capacity
    for r in services:
        tiers = pools.get(r.name)
        if tiers and not r.role:
            r.capacity = round(r.capacity + sum(min(t.get("prefill", 0.0), t.get("decode", 0.0))
                                                for t in tiers.values()), 6)
            r.utilization = round(r.demand / r.capacity, 4) if r.capacity > 0 else 0.0
            r.headroom_utilization = _reserve((r.demand_with_headroom - r.demand) / r.capacity
                                              if r.capacity > 0 else 0.0)
    return services


def _confidence_view(s, calibration) -> ConfidenceView | None:
    """What a percentile service's caps were sized for; None without a percentile SLO."""
    if s.slo.percentile is None:
        return None
    level = s.slo.confidence
    return ConfidenceView(NOMINAL if level is None else level, round(slowdown(level, calibration), 6),
                          rate_margin(level))


def _capacity_margin(views: list[AssignmentView]) -> float | None:
    """1 - capacity at the plan's caps / capacity at the nominal caps, replicas weighing."""
    capped = [v for v in views if v.cap_per_replica_nominal is not None]
    nominal = sum(v.cap_per_replica_nominal * v.replicas for v in capped)
    if not capped or nominal <= 0:
        return None
    return round(1.0 - sum(v.cap_per_replica * v.replicas for v in capped) / nominal, 4)


def _result(workload, catalog, problem, form, outcome, solution, ties, t0, deadline, options, timings,
            prefetch: AtLoadPrefetch | None = None) -> PlanResult:
    t1 = time.monotonic()
    if options.check:
        (options.on_stage or (lambda name: None))("evaluate")
    computed = None
    if options.prefetch_at_load and problem_wants_checks(problem):
        # Percentile plans: the evaluation, the values under load and the nominal caps of
        # the plan's assignments, shared with a helper on the spare core (the same values).
        report, computed = _evaluate_and_values(workload, catalog, problem, solution, options.check)
    else:
        report = evaluate(workload, catalog, solution) if options.check else None
    timings["evaluate_s"] = time.monotonic() - t1
    fleet = []
    for offer_id, n in solution.fleet:
        o = problem.offer(offer_id)
        fleet.append(FleetLine(o.id, o.provider, o.name, o.region, o.gpu, o.gpus_per_instance, n,
                               o.price_usd_per_hour, round(o.price_usd_per_hour * n, 6), o.vcpus, o.host_memory_gib))
    services = service_results(problem, solution, catalog, options.answer_by, options.cancel, computed or prefetch)
    if prefetch is not None:
        prefetch.close()  # what it has not finished is not needed now
    cost = sum(f.subtotal_usd_per_hour for f in fleet)
    gap = None
    if outcome.bound is not None and outcome.objective:
        gap = max(0.0, (outcome.objective - outcome.bound) / max(abs(outcome.objective), 1e-9))
        # An exact proof is within $1e-6/hour, so it rounds to 0; with solver.relative_gap
        # the proven gap is reported as it is.
        gap = round(gap, 6)
    info = SolverInfo(outcome.backend, outcome.solve_time_s, time.monotonic() - t0, gap, outcome.bound,
                      form.model.size, len(problem.configs), len(problem.rejections), len(problem.filtered_out),
                      ties, outcome.detail, {k: round(v, 4) for k, v in timings.items()})
    result = PlanResult(outcome.status, problem.name, round(cost, 6), sum(f.gpus_per_instance * f.instances for f in fleet),
                        fleet, services,
                        [{"offer_id": p.offer_id, "instance": p.instance, "replicas": [list(r) for r in p.replicas]}
                         for p in (report.placements if report else [])],
                        info, catalog=catalog.description, pricing=problem.pricing)
    add_power(result, problem, dict(solution.fleet), solution.assignments)
    if report is not None:
        result.evaluation = {"ok": report.ok, "violations": report.violations,
                             "cost_usd_per_hour": round(report.cost_usd_per_hour, 6)}
        if not report.ok:
            raise PlannerError("internal error: the plan failed independent evaluation: " + "; ".join(report.violations))
    if options.explain:
        from solver.explain.alternatives import alternatives_for  # only for --explain: a cold CLI run skips it

        (options.on_stage or (lambda name: None))("explain")
        # One budget for the whole explanation, never past the call's own deadline.
        explain = Stop(options.cancel, min(deadline, time.monotonic() + EXPLAIN_BUDGET_S))
        result.confidence_cost = confidence_cost(workload, catalog, problem, result.total_price_usd_per_hour,
                                                 outcome.backend, options, explain)
        result.serving_choice = serving_choice(workload, catalog, outcome.backend, options, explain)
        result.redundancy_cost = redundancy_cost(workload, catalog, problem, result.total_price_usd_per_hour,
                                                 outcome.backend, options, explain)
        for sr in services:
            sr.alternatives = alternatives_for(sr.name, problem, form, solution, backend_name=outcome.backend,
                                               stop=explain)
    return result


class _Computed:
    """Values under load computed before `service_results` (its `prefetch` argument)."""

    def __init__(self, problem: Problem, values: dict):
        self.problem = problem
        self._values = values

    def values(self, problem, svc_name: str, config, replicas: int, routed) -> object | None:
        if problem is not self.problem:
            return None
        return self._values.get((svc_name, config.key, replicas, tuple(routed)))

    def close(self) -> None:
        pass


def _evaluate_and_values(workload, catalog: Catalog, problem: Problem, solution: Solution, check: bool):
    """(the evaluator's report or None, `_Computed`): the evaluation, each percentile
    assignment's values under load and its configuration's nominal cap (what
    `service_results` reads; the caps go to load_caps' memo), computed by this process and
    a helper on the spare core (solver/compile/split_work.py): the same functions of the
    same inputs, so the same values."""
    from solver.compile import load_caps
    from solver.compile.split_work import map_split

    by_key = {c.key: c for c in problem.configs}
    services = {s.name: s for s in problem.services}
    items: list[tuple] = [("evaluate",)] if check else []
    caps: dict[tuple, None] = {}
    for a in solution.assignments:
        s, c = services[a.service], by_key.get(a.config_key)
        if c is None or s.slo.percentile is None:
            continue
        items.append(("at_load", s, c, a.replicas, real_routed(problem, s, a.routed)))  # as service_results asks
        if c.source != "measured" and s.slo.bounds():
            replica = load_caps._replica_of(catalog, problem.calibration, s, c)
            key = (replica, load_caps._service_mix(s), s.slo.percentile, s.slo.bounds(), float(s.arrival_cv))
            if load_caps._llm_cap.known(key) is None:
                caps[key] = None
    items.extend(("cap", k) for k in caps)

    def run(item):
        if item[0] == "evaluate":
            return evaluate(workload, catalog, solution)
        if item[0] == "cap":
            return load_caps._llm_cap(*item[1])
        _, s, c, replicas, routed = item
        return at_load(catalog, problem.calibration, s, c, replicas, routed)

    results = map_split(run, items, min_items=8)
    report, values = None, {}
    for item, value in zip(items, results):
        if item[0] == "evaluate":
            report = value
        elif item[0] == "cap":
            load_caps._llm_cap.put(item[1], value)
        else:
            values[(item[1].name, item[2].key, item[3], item[4])] = value
    return report, _Computed(problem, values)


def serving_choice(workload: Workload, catalog: Catalog, backend_name: str, options: PlanOptions,
                   stop: Stop) -> ServingChoice | None:
    """The workload re-solved with every `serving: auto` service forced aggregated, then
    forced disaggregated (exactly, as the plan itself): what each choice would cost. None
    where no service has serving auto. Within the explanation's budget (`stop`)."""
    auto = [i for i, s in enumerate(workload.services) if s.serving == "auto"]
    if not auto:
        return None
    prices: dict[str, float | None] = {}
    notes = []
    for forced in ("aggregated", "disaggregated"):
        services = [s.model_copy(update={"serving": forced}) if i in auto else s
                    for i, s in enumerate(workload.services)]
        variant = workload.model_copy(update={"services": services})
        t0 = time.monotonic()
        try:
            stop.check("the serving choice's re-solve")
            problem = add_candidates(compile_problem(variant, catalog), catalog, options.cache, stop)
            if diagnose_unservable(problem, catalog):
                prices[forced] = None
                notes.append(f"no {forced}-only plan serves every service")
                continue
            quiet = replace(options, on_progress=None, on_stage=None, explain=False)
            outcome, solution = _solve_with_exact_caps(problem, catalog, backend_name, stop.deadline, stop, quiet,
                                                       False, {"candidates_s": time.monotonic() - t0}, t0)[2:4]
        except InfeasibleError:
            prices[forced] = None
            notes.append(f"no {forced}-only plan fits the constraints")
            continue
        except SolverTimeout:
            if stop.cancelled:
                stop.check("the explanation")
            prices[forced] = None
            notes.append(f"{forced}-only not computed: the explanation's time budget ended first")
            continue
        except InputError as exc:  # e.g. limits a forced choice cannot meet
            prices[forced] = None
            notes.append(f"no {forced}-only plan: {exc}")
            continue
        if outcome.status != "optimal":
            prices[forced] = None
            notes.append(f"{forced}-only not proven optimal within the explanation's time budget")
            continue
        prices[forced] = round(solution_cost(problem, solution), 6)
    names = ", ".join(workload.services[i].name for i in auto)
    notes.insert(0, f"serving: auto services ({names}) forced each way")
    return ServingChoice(prices.get("aggregated"), prices.get("disaggregated"), "; ".join(notes))


def redundancy_cost(workload: Workload, catalog: Catalog, problem: Problem, price_usd_per_hour: float,
                    backend_name: str, options: PlanOptions, stop: Stop) -> RedundancyCost | None:
    """What the failure domains cost: the workload re-solved without them (exactly), against
    this plan's price. None where no service has one. Within the explanation's budget."""
    domains = sorted({s.redundancy_domain for s in problem.services if s.redundancy_domain})
    if not domains:
        return None
    price, why = _variant_price(workload, catalog, backend_name, options, stop, "without failure domains",
                                lambda s: replace(s, redundancy_domain="", redundancy_demand=(),
                                                  redundancy_fraction=0.0))
    if price is None:
        return RedundancyCost(None, None, f"not computed: {why}")
    return RedundancyCost(price, round(price_usd_per_hour - price, 6),
                          f"N+1 by {', '.join(domains)}: the workload re-solved without constraints.redundancy")


def _variant_price(workload: Workload, catalog: Catalog, backend_name: str, options: PlanOptions, stop: Stop,
                   what: str, change) -> tuple[float | None, str]:
    """The proven optimum of the workload with `change` applied to every compiled service,
    or (None, why not): no plan, not proven, or the explanation's budget ended first."""
    t0 = time.monotonic()
    try:
        stop.check(f"the re-solve {what}")
        variant = compile_problem(workload, catalog)
        variant = add_candidates(replace(variant, services=tuple(change(s) for s in variant.services)), catalog,
                                 options.cache, stop)
        quiet = replace(options, on_progress=None, on_stage=None, explain=False)
        outcome, solution = _solve_with_exact_caps(variant, catalog, backend_name, stop.deadline, stop, quiet, False,
                                                   {"candidates_s": time.monotonic() - t0}, t0)[2:4]
    except (SolverTimeout, InfeasibleError) as exc:
        if stop.cancelled:
            stop.check("the explanation")
        return None, ("the explanation's time budget ended first" if isinstance(exc, SolverTimeout)
                      else f"the workload has no plan {what}")
    if outcome.status != "optimal":
        return None, f"the re-solve {what} was not proven optimal within the explanation's time budget"
    return round(solution_cost(variant, solution), 6), ""


def confidence_cost(workload: Workload, catalog: Catalog, problem: Problem, price_usd_per_hour: float,
                    backend_name: str, options: PlanOptions, stop: Stop) -> ConfidenceCost | None:
    """What the services' slo.confidence costs: the same workload re-solved with every
    service at "nominal" (exactly, caps computed lazily), against this plan's price. None
    where every service sizes nominally already. Within the explanation's budget (`stop`):
    a re-solve it cuts short reports no figure, with the reason."""
    if all(s.slo.confidence is None for s in problem.services):
        return None
    price, why = _variant_price(workload, catalog, backend_name, options, stop, "at nominal confidence",
                                lambda s: replace(s, slo=replace(s.slo, confidence=None)))
    if price is None:
        return ConfidenceCost(None, None, f"not computed: {why}")
    return ConfidenceCost(price, round(price_usd_per_hour - price, 6),
                          "every service re-solved at slo.confidence \"nominal\"")
