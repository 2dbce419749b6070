"""The solve stage of one static hour: the cost MIP (greedy warm start and bound), the
percentile-cap rounds (caps computed lazily, solver/compile/lazy_caps.py), simulation in the
loop (solver/compile/verified_caps.py) and the tie-break. `solver/plan.py` (one hour) and
`solver/plan_horizon.py` (periods: the hours it solves alone) both run it; it knows nothing
of either, so neither leans on the other.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from solver.catalog.types import Catalog
from solver.compile.candidates import SHARED_CACHE, CandidateCache
from solver.compile.lazy_caps import (has_pending, pending_keys, probe_survivors, refine, resolve_caps,
                                      service_floors, settle, solve_configs, tighten, without_dearer)
from solver.compile.problem import Problem
from solver.compile.verified_caps import verify_round
from solver.confidence import rate_margin
from solver.dataclass_repr import dataclass
from solver.errors import Cancelled, InfeasibleError, SolverTimeout
from solver.explain.diagnose import diagnose_infeasible, diagnose_unservable, unexplained_reason
from solver.interrupt import Stop
from solver.optimize.backends import SolveOptions
from solver.optimize.backends.base import backend_for
from solver.optimize.formulation import Formulation, bound_reached, build
from solver.optimize.greedy import greedy_solution, solution_cost
from solver.optimize.quick_check import evaluate_quick
from solver.optimize.headroom import fill_idle_gpus
from solver.optimize.linear import Progress, SolveOutcome
from solver.optimize.solution import Solution
from solver.optimize.tiebreak import tie_break
from solver.survival import LOCATION_DOMAINS
from solver.output.prefetch import AtLoadPrefetch

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
    # Backend "auto": a solve that runs long gets the other MIP backend beside it on a spare
    # core (solver/optimize/backends/race.py); off where solves already fill every core (reviews).
    race_backends: bool = True
    # Simulation in the loop (solver/compile/verified_caps.py); None: the workload's solver.verify.
    verify: bool | None = None
    # time.monotonic() from which the time limit counts; None: when plan() starts. The CLI
    # gives its own start, so that reading a large workload (0.6 s for 5,000 services) is
    # inside the limit the caller waits for.
    started_at: float | None = None


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
    problem, _, outcome, solution, _ = solve_with_exact_caps(problem, catalog, options.backend or "auto", t0 + time_limit,
                                                              stop, options, ties, timings, t0)
    return problem, solution, outcome


def solve_with_exact_caps(problem: Problem, catalog: Catalog, backend_name: str, deadline: float, stop: Stop,
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
    # Plans of exact configurations the rounds found since caps were last lowered by a
    # verification round (cap rounds leave exact caps as they are; a lowering may leave an
    # older plan short, so it empties the list): the answer, not proven optimal, if the time
    # ends before a round proves one - before a plan the simulator refuted.
    exact_plans: list = []
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
                    problem, backend_name, deadline, stop, options, timings, t0, stats, helper, start, stop_early,
                    exact_plans)
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
                exact_plans.append((problem, (form, outcome, solution, backend)))
                rounds += 1
                continue
            if ties_wanted and not used:
                outcome, solution, ties = _break_ties(form, backend, outcome, solution, deadline, stop, options,
                                                      timings)
                # Another cheapest plan may use a configuration whose cap is still a bound.
                used = pending_keys(problem, {a.config_key for a in solution.assignments})
        except SolverTimeout:
            fallback = _best_exact(exact_plans) or fallback
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
                    loose = solve_with_exact_caps(replace(problem, budget_usd_per_hour=None), catalog, backend_name,
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
            exact_plans.clear()
            fallback = (kept, form, outcome, solution, ties)
            problem = lowered
            verify_rounds += 1
            continue
        rounds += 1
        try:
            problem = refine(problem, used, helper=helper, stop=stop, stats=stats)
        except SolverTimeout:
            fallback = _best_exact(exact_plans) or fallback
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
                fallback = _best_exact(exact_plans) or fallback
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
        problem = replace(problem, checks=final_checks(problem, solution, checks))
    return problem, form, outcome, solution, ties


def problem_wants_checks(problem: Problem) -> bool:
    """Whether any service's caps come from the queueing model (an LLM service with a
    percentile SLO and latency bounds): what simulation in the loop checks."""
    return any(s.model is not None and s.slo.percentile is not None and s.slo.bounds() for s in problem.services)


def final_checks(problem: Problem, solution: Solution, checks: dict) -> dict:
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


def _best_exact(exact_plans: list) -> tuple | None:
    """The cheapest plan of exact configurations the rounds found, as a fallback
    (problem, form, outcome, solution, ties): "feasible" with no bound - it was optimal only
    among the configurations whose caps were known, and the others may give a cheaper one."""
    if not exact_plans:
        return None
    problem, (form, outcome, solution, _backend) = min(exact_plans, key=lambda x: x[1][1].objective)
    detail = ("the time limit ended inside the percentile-cap loop: the cheapest plan of the configurations whose "
              "caps were computed, not proven optimal")
    return (problem, form, replace(outcome, status="feasible", bound=None, detail=detail), solution,
            "skipped (time limit)")


def _cheaper_by(cost: float) -> float:
    """How much cheaper than `cost` a plan must be to count as a cheaper one: more than a
    MIP's integrality tolerance moves an objective (a plan with 0.9999999 instances)."""
    return max(1e-4, 1e-7 * abs(cost)) if math.isfinite(cost) else 0.0


def _lazy_solve(problem: Problem, backend_name: str, deadline: float, stop: Stop, options: PlanOptions,
                timings: dict[str, float], t0: float, stats: dict, helper: bool, start: list,
                stop_early: bool = True, exact_plans: list | None = None):
    """One round of the percentile-cap loop: (problem, (form, outcome, solution, backend),
    whether the MIP stopped at a plan cheaper than the round's plan of exact configurations
    rather than at a proof).

    The MIP over the exact configurations alone gives a plan of the exact problem (cost U;
    started from `start`, the plans of earlier rounds, which it extends with its own). The
    pending configurations that no plan cheaper than U can use are left out
    (lazy_caps.without_dearer: exact); those left get their saturation bound (cheap) and are
    looked at again. When none is left, the plan of exact configurations is optimal; else
    the MIP over all that is left, started from it, is the round's answer (its plan may use
    pending configurations: the next round computes their caps). Each plan of exact
    configurations found is added to `exact_plans` as (problem, (form, outcome, solution,
    backend)): a plan to answer with if the time ends before a proof."""
    configs = solve_configs(problem)
    exact = [c for c in configs if c.pending_cap is None]
    first = None
    upper = math.inf
    if exact:
        try:
            first = _cost_solve(problem, backend_name, deadline, stop, options, timings, t0, configs=exact,
                                hints=start, diagnose=False)
            if exact_plans is not None and first[1].values is not None:
                exact_plans.append((problem, first))
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
    backend = backend_for(backend_name, form.model, race=options.race_backends)
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
    if extra and stop_below is None and any(s.redundancy_domain in LOCATION_DOMAINS for s in problem.services):
        # Services spread over two places each pack badly together from their own plans,
        # and SCIP's heuristics close that slowly: start from the MIP restricted to the
        # groups the LP or the starts use (solver/optimize/restricted_start.py). Not for a
        # solve that ends at its first plan below `stop_below` (a percentile round's search).
        from solver.optimize.restricted_start import restricted_start

        t1 = time.monotonic()
        start = restricted_start(form, backend, extra + ([hint] if hint is not None else []), deadline,
                                 options.cancel)
        if start is not None:
            extra.insert(0, start)
        timings["restricted_start_s"] = time.monotonic() - t1
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
        limit = form.lower_bound + bound_reached(form.lower_bound)
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
        if b.with_pools is not None and total - b.bound + b.with_pools > upper + bound_reached(upper):
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
                                 or outcome.objective - lower_bound <= bound_reached(lower_bound)):
        status = "optimal"
    return replace(outcome, status=status, bound=bound)


def _relay(form: Formulation, on_progress):
    """Backend progress (with raw values) -> the caller's Progress with the improving fleet."""
    if on_progress is None:
        return None

    def relay(progress: Progress, values: list[float]) -> None:
        fleet = tuple({"offer_id": o, "instances": int(round(values[i]))}
                      for o, i in sorted(form.n.items()) if round(values[i]) > 0)
        on_progress(replace(progress, fleet=fleet))

    return relay
