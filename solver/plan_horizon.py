"""Multi-period plans: periods, pricing tiers and re-planning from the running fleet.

`plan()` hands over here when the workload has periods, tiers beyond one price list, a
running fleet or change costs. Stages: distinct periods (equal demand merged) -> either
today's single-hour MIP per period (when nothing links the periods: on-demand only, no
running fleet) or the multi-period MIP (solver/optimize/multiperiod.py) -> each period
checked by the independent evaluator -> reservations, savings against an all-on-demand
fleet sized for the peak, and, with a running fleet, the changes and a make-before-break
rollout of the first period.

The first period is "now": its fleet is the plan's top-level fleet, services and
placements, so readers of single-hour plans see what to run now.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

from solver.catalog.types import Catalog
from solver.compile.problem import Config, Period, Problem
from solver.errors import Cancelled, InfeasibilityReason, InfeasibleError, PlannerError, SolverTimeout
from solver.evaluate import evaluate
from solver.explain.diagnose import diagnose_infeasible
from solver.interrupt import Stop
from solver.optimize.backends import get_backend
from solver.optimize.greedy import greedy_solution
from solver.optimize.multiperiod import HOURS_PER_MONTH, HorizonSolver, PeriodPlan, merge_periods
from solver.optimize.period_model import offer_prices
from solver.optimize.replan import solve_replan
from solver.optimize.rollout import Target, change_counts, changes, plan_rollout
from solver.optimize.solution import Assignment, Solution
from solver.output.result import (Change, FleetLine, HorizonResult, HorizonSolverInfo, PeriodAssignment,
                                  PeriodResult, PeriodService, PlanResult, RedundancyCost, RedundancyView, Replan,
                                  Reservation, Rollout, RolloutStep, Savings, SolverInfo, TierFleetLine,
                                  UnusedReservation)
from solver.output.services import service_results
from solver.solve_stage import (EXPLAIN_BUDGET_S, MAX_VERIFY_ROUNDS, final_checks, problem_wants_checks,
                                solve_single)
from solver.workload.schema import Workload

PEAK_SHARE = 0.15  # of the time left after candidates, at most, for the peak fleet (baseline and fallback)
SEARCH_SHARE = 0.9  # of the time left then, for the multi-period search
BASELINE_SHARE = 0.5  # of the time left then, at most, for the all-on-demand-at-peak baseline
NOW = Period("now", 1.0)  # the one period of a workload without periods


def plan_horizon(workload: Workload, catalog: Catalog, problem: Problem, backend_name: str, options, t0: float,
                 deadline: float, stop: Stop, timings: dict[str, float]) -> PlanResult:
    from solver.compile.verified_caps import verify_round

    stage = options.on_stage or (lambda name: None)
    # The period MIPs are covering-and-packing models with few continuous variables: SCIP.
    backend = get_backend("scip" if backend_name == "auto" else backend_name)
    stage("model")
    periods = problem.periods or (NOW,)
    specs, merged = merge_periods(problem)
    t1 = time.monotonic()
    verifying = options.verify and problem_wants_checks(problem)
    checks: dict = {}
    verify_rounds, verify_s = 0, 0.0
    fallback = None  # the last refuted horizon's plan: the answer if the time ends in the next solve
    while True:
        try:
            solutions, reserved, info, peak = _solve_periods(workload, catalog, problem, specs, periods, merged,
                                                             backend, backend_name, options, t0, deadline, stop,
                                                             timings, t1)
        except SolverTimeout:
            if fallback is None:
                raise
            problem, solutions, reserved, info, peak = fallback
            break
        if not verifying:
            break
        # Simulation in the loop, as for a single hour (solver/solve_stage.py): every configuration
        # checked at the highest rate any period routes to one of its replicas.
        tv = time.monotonic()
        stage("verify")
        kept, lowered = verify_round(problem, _busiest(solutions), catalog, deadline, stop, checks)
        verify_s += time.monotonic() - tv
        if lowered is None or verify_rounds >= MAX_VERIFY_ROUNDS or deadline - time.monotonic() < 0.05:
            problem = kept
            break
        fallback = (kept, solutions, reserved, info, peak)
        problem = lowered
        verify_rounds += 1
    if verifying:
        timings["verify_rounds"] = float(verify_rounds)
        timings["verify_s"] = verify_s
        problem = replace(problem, checks=final_checks(problem, _merged_markets(solutions[merged[0]]), checks))
    timings["solve_s"] = time.monotonic() - t1
    if stop.cancelled:
        raise Cancelled("the multi-period solve was cancelled")
    result = _result(workload, catalog, problem, periods, specs, merged, solutions, reserved, info, backend, t0,
                     deadline, options, timings, peak)
    if options.explain and problem.spot_pools():
        stage("explain")
        result.spot_cover_cost = _spot_cover_cost(workload, catalog, problem, result.horizon.average_price_usd_per_hour,
                                                  backend, backend_name, options, deadline)
    return result


def _spot_cover_cost(workload, catalog, problem: Problem, price_usd_per_hour: float, backend, backend_name: str,
                     options, deadline: float) -> RedundancyCost:
    """What constraints.spot_interruptions costs (--explain): the horizon re-solved without the
    cover (its configurations keep every spot pool: a superset of what it would prune to, so
    its optimum is the true one), against this plan, per hour of the horizon. Within the
    explanation's budget; a re-solve not proven optimal reports no figure."""
    t0 = time.monotonic()
    until = min(deadline, t0 + EXPLAIN_BUDGET_S)
    variant = replace(problem, services=tuple(replace(s, spot_cover_demand=(), spot_cover_fraction=0.0)
                                              for s in problem.services))
    specs, merged = merge_periods(variant)
    periods = variant.periods or (NOW,)
    quiet = replace(options, on_progress=None, on_stage=None, explain=False)
    try:
        _solutions, _reserved, info, _peak = _solve_periods(
            workload, catalog, variant, specs, periods, merged, backend, backend_name, quiet, t0, until,
            Stop(options.cancel, until, until - t0), {}, t0)
    except (SolverTimeout, InfeasibleError):
        return RedundancyCost(None, None, "not computed: the re-solve without spot cover ran out of the "
                                          "explanation's time budget")
    if info["status"] != "optimal":
        return RedundancyCost(None, None, "not computed: the re-solve without spot cover was not proven optimal "
                                          "within the explanation's time budget")
    without = info["horizon_cost_usd"] / sum(p.hours for p in periods)
    return RedundancyCost(round(without, 6), round(price_usd_per_hour - without, 6),
                          "spot cover: the workload re-solved without constraints.spot_interruptions")


def _busiest(solutions: list[Solution]) -> Solution:
    """Every period's assignments, the highest rate per replica first: what the simulator
    checks (a configuration met at its busiest period's rate is met at the others')."""
    every = [a for sol in solutions for a in _merged_markets(sol).assignments if a.replicas > 0]
    every.sort(key=lambda a: -sum(a.routed) / a.replicas)
    return Solution((), tuple(every))


# Each relaxed re-solve of the infeasibility diagnosis gets at most this long (it only
# needs to show that a plan exists, not find the best).
RELAXED_HORIZON_CAP_S = 10.0


def _solve_periods(workload, catalog, problem, specs, periods, merged, backend, backend_name, options, t0, deadline,
                   stop, timings, t1):
    """One solve of the horizon with the problem's caps: (a solution per distinct period,
    reservations, the solver's figures, the peak fleet where it was computed)."""
    stage = options.on_stage or (lambda name: None)
    reserved: dict[str, tuple[int, str]] = {}
    peak = None
    if _independent(problem):
        solutions, info = _solve_independent(problem, specs, backend_name, deadline, stop, options, workload, timings, t0)
    elif _single_replan(problem, specs):
        stage("solve")
        single = replace(problem, services=specs[0].services, periods=(), horizon=problem.horizon)
        solution, outcome, form, ties, change, lower = solve_replan(single, specs[0].hours, backend_name, deadline, stop,
                                                                    options, workload.solver.tie_break, timings)
        if problem.pricing == "spot":
            solution = Solution((), tuple(replace(a, spot=True) for a in solution.assignments), solution.fleet)
        solutions = [solution]
        hours = specs[0].hours
        cost = hours * sum(problem.offer(o).price_usd_per_hour * n for o, n in (*solution.fleet, *solution.spot_fleet))
        total = cost + change
        # Proven optimal: the bound is the plan's cost; proven within solver.relative_gap, or
        # stopped by the time limit: the solver's bound (with the forced removals).
        bound = total if outcome.status == "optimal" and not problem.relative_gap else min(total, lower)
        info = {"status": outcome.status, "horizon_cost_usd": total, "bound_usd": bound,
                "gap": round(max(0.0, (total - bound) / max(total, 1e-9)), 6),
                "method": "single-period MIP with change costs (the running fleet is the only difference)",
                "nodes": 0, "period_solves": 1, "detail": outcome.detail if outcome.status != "optimal" else "",
                "change_cost_usd": change, "model_sizes": [form.model.size], "ties": ties}
    else:
        stage("solve")
        # First the peak fleet (the savings baseline, and a plan to fall back on), then the
        # search, keeping a tenth of the time for the evaluator and the answer.
        peak = _peak_plan(problem, specs, backend_name, deadline, options, PEAK_SHARE)
        hs = HorizonSolver(problem, list(problem.configs), backend, stop,
                           max(SEARCH_SHARE * (deadline - time.monotonic()), 0.05))
        timings["formulation_s"] = time.monotonic() - t1
        sol = hs.solve()
        if sol.status == "infeasible":
            stage("diagnose")
            raise InfeasibleError(_why_infeasible(problem, specs, periods, merged, backend, stop))
        if stop.cancelled:
            raise Cancelled("the multi-period solve was cancelled")
        stats = {"method": sol.method, "nodes": sol.nodes, "period_solves": sol.period_solves, "detail": sol.detail,
                 "model_sizes": [lm.size for lm, _pv in hs.models]}
        bound = sol.bound_usd if math.isfinite(sol.bound_usd) else 0.0
        held = peak or _greedy_peak(problem, specs)
        fallback = _constant_fleet(problem, specs, held, bound)
        if fallback is not None and not _fits(workload, catalog, problem, periods, specs, merged, fallback):
            fallback = None
        if sol.status != "no_solution" and (fallback is None or sol.horizon_cost_usd <= fallback[2]["horizon_cost_usd"]):
            plans = [sol.plans[merged.index(m)] for m in range(len(specs))]
            solutions = [_to_solution(problem, specs[m], plan) for m, plan in enumerate(plans)]
            reserved = {o: (n, sol.reserved_term[o]) for o, n in sol.reserved.items()}
            info = {"status": sol.status, "horizon_cost_usd": sol.horizon_cost_usd, "bound_usd": sol.bound_usd,
                    "gap": sol.gap, "change_cost_usd": sol.change_cost_usd, **stats}
        elif fallback is not None:
            solutions, reserved, info = fallback
            info.update(stats)
            whose = "the greedy plan's" if held[2] == "greedy" else "the"
            info["method"] += f"; {whose} peak fleet held all horizon (the search had no cheaper plan in time)"
        else:
            stop.check("the multi-period solve")
            raise SolverTimeout(f"no feasible fleet found within {stop.time_limit_s:g} s for {len(periods)} period(s). "
                                "To fix: raise the time limit")
    return solutions, reserved, info, peak


# ---------------------------------------------------------------------- solving
def _independent(problem: Problem) -> bool:
    """Nothing links the periods: one price list (the offers' own), no running fleet, no
    budget over the horizon. Each distinct period is then today's single-hour problem."""
    h = problem.horizon
    # Spot cover has rows only in the multi-period model (spot replicas apart from firm ones).
    return (h.tiers == (problem.pricing,) and h.current_fleet is None and h.max_spot_share is None
            and not problem.spot_pools()
            and h.spot_min_regions is None and h.budget_usd_per_day is None and h.budget_usd_per_month is None
            and h.reserved_gpus_min is None and h.reserved_gpus_max is None and h.max_changed_instances is None)


def _single_replan(problem: Problem, specs) -> bool:
    """One distinct period and one price list: a running fleet (with change costs) is all
    that sets the problem apart from today's, whose pooled MIP then takes change rows."""
    h = problem.horizon
    return (len(specs) == 1 and h.tiers == (problem.pricing,) and h.current_fleet is not None
            and not problem.spot_pools()
            and h.max_spot_share is None and h.spot_min_regions is None and h.budget_usd_per_day is None
            and h.budget_usd_per_month is None and h.reserved_gpus_min is None and h.reserved_gpus_max is None)


def _solve_independent(problem, specs, backend_name, deadline, stop, options, workload, timings, t0):
    solutions, sizes, total, bound, optimal = [], [], 0.0, 0.0, True
    notes: set[str] = set()
    quiet = replace(options, on_progress=None, on_stage=None)
    spot = problem.pricing == "spot"
    for spec in specs:
        single = replace(problem, services=spec.services, periods=(), horizon=None)
        local: dict[str, float] = {"candidates_s": 0.0}
        form, outcome, solution, ties = solve_single(single, backend_name, deadline, stop, quiet,
                                                     workload.solver.tie_break, local, time.monotonic())
        notes.add(ties)
        cost = sum(problem.offer(o).price_usd_per_hour * n for o, n in solution.fleet)
        total += spec.hours * cost
        # No bound from a solve cut short proves nothing above zero (costs are not negative).
        bound += spec.hours * (outcome.bound if outcome.bound is not None else (cost if outcome.status == "optimal"
                                                                                else 0.0))
        optimal = optimal and outcome.status == "optimal"
        if spot:
            # Every offer priced at spot (`pricing: spot`): these are spot instances.
            solution = Solution((), tuple(replace(a, spot=True) for a in solution.assignments), solution.fleet)
        solutions.append(solution)
        sizes.append(form.model.size)
    status = "optimal" if optimal else "feasible"
    bound = total if optimal else min(bound, total)
    gap = 0.0 if optimal or total <= 0 else max(0.0, (total - bound) / total)
    return solutions, {"status": status, "horizon_cost_usd": total, "bound_usd": bound, "gap": gap,
                       "method": "single-period MIP per distinct period (nothing links the periods)",
                       "nodes": 0, "period_solves": len(specs), "detail": "", "change_cost_usd": 0.0,
                       "model_sizes": sizes, "ties": "; ".join(sorted(notes))}


def _to_solution(problem: Problem, spec, plan: PeriodPlan) -> Solution:
    by_key = {c.key: c for c in problem.configs}
    demand = {s.name: s for s in spec.services}
    items = []
    for (key, spot), n in sorted(plan.replicas.items()):
        c = by_key[key]
        routed = plan.routed.get((key, spot))
        items.append((c, spot, n, routed))
    # Each service's capacity over all of its replicas, summed in the items' order (once
    # per service: summed per item it was quadratic, minutes for a plan of 500 services).
    capacity: dict[str, float] = {}
    for x, _sp, m, _r in items:
        capacity[x.service] = capacity.get(x.service, 0) + x.throughput * m
    out = []
    for c, spot, n, routed in items:
        s = demand[c.service]
        if routed is None:
            # One class, or the service's mix on every replica: route in proportion to
            # capacity over all of the service's replicas, each class by its share.
            total = capacity[c.service]
            here = s.total_demand * c.throughput * n / total if total > 0 else 0.0
            routed = tuple(here * d / s.total_demand if s.total_demand > 0 else 0.0 for d in s.class_demand)
        out.append(Assignment(c.key, c.service, c.offer_id, c.gpus_per_replica, c.precision, n, routed,
                              c.instances_per_replica, spot))
    out.sort(key=lambda a: (a.service, a.config_key, a.spot))
    return Solution(tuple(sorted(plan.firm.items())), tuple(out), tuple(sorted(plan.spot.items())))


def _why_infeasible(problem, specs, periods, merged, backend, stop) -> list[InfeasibilityReason]:
    """Why no plan exists, each reason proven by a re-solve: the first period that has no
    fleet as a single-hour problem; else the horizon's terms, one family relaxed at a
    time (a family is to blame when the horizon without it has a plan)."""
    for m, spec in enumerate(specs):
        name = periods[merged.index(m)].name
        single = replace(problem, services=spec.services, periods=(), horizon=None)
        found = diagnose_infeasible(single, backend, stop, known_infeasible=False)
        if found:
            return [replace(r, message=f"period {name}: {r.message}") for r in found]
    h = problem.horizon
    if h is None:
        return [_unexplained()]
    families = [
        ("max_changed_instances", h.max_changed_instances is not None, {"max_changed_instances": None}, {},
         f"no plan changes the running fleet by at most {h.max_changed_instances} instance(s) (removals that no "
         "plan can avoid count too).", "raise change_costs.max_changed_instances"),
        ("spot_policy", h.max_spot_share is not None or h.spot_min_regions is not None,
         {"max_spot_share": None, "spot_min_regions": None}, {},
         "the spot policy (" + ", ".join(f"{k} {v:g}" for k, v in (("max_spot_share", h.max_spot_share),
                                                                   ("spot_min_regions", h.spot_min_regions))
                                         if v is not None) + ") leaves too little capacity in the allowed tiers.", "raise constraints.max_spot_share, lower spot_min_regions, or allow "
         "an on-demand or reserved tier"),
        ("spot_interruptions", any(sum(s.spot_cover_demand) > 0 for s in problem.services), {},
         {"services": tuple(replace(s, spot_cover_demand=(), spot_cover_fraction=0.0) for s in problem.services)},
         "no plan still serves spot_interruptions.serve_fraction of each covered service's demand after the spot "
         "instances of any one offer (a spot capacity pool) are reclaimed.",
         "allow an on-demand or reserved tier, allow spot on more offers (instance types or regions), or lower "
         "constraints.spot_interruptions.serve_fraction"),
        ("budget", any(b is not None for b in (problem.budget_usd_per_hour, h.budget_usd_per_day,
                                                h.budget_usd_per_month)),
         {"budget_usd_per_day": None, "budget_usd_per_month": None}, {"budget_usd_per_hour": None},
         "no plan fits the budgets (per hour, day or month) over the horizon.", "raise the budgets"),
        ("reserved_gpus", h.reserved_gpus_min is not None or h.reserved_gpus_max is not None,
         {"reserved_gpus_min": None, "reserved_gpus_max": None}, {},
         f"no plan keeps reserved GPUs within [{h.reserved_gpus_min}, {h.reserved_gpus_max}].",
         "change constraints.reserved_gpus_min / reserved_gpus_max"),
    ]
    undecided = []
    for name, present, terms, top, message, fix in families:
        if not present:
            continue
        relaxed = replace(problem, horizon=replace(h, **terms), **top)
        seconds = stop.seconds_left(RELAXED_HORIZON_CAP_S)
        status = "no_solution"
        if seconds > 0.05:
            status = HorizonSolver(relaxed, list(relaxed.configs), backend, stop, seconds).solve().status
        if status not in ("infeasible", "no_solution"):
            return [InfeasibilityReason(name, message + " Without it a plan exists.", fix)]
        if status == "no_solution":
            undecided.append(name)
    stop.check("the infeasibility diagnosis")
    if undecided:
        return [InfeasibilityReason("time_limit", "no plan meets the multi-period terms; the time limit ended before "
                                    f"it was shown which binds (not decided: {', '.join(undecided)}).",
                                    "raise the time limit to get the diagnosis")]
    return [_unexplained()]


def _unexplained() -> InfeasibilityReason:
    return InfeasibilityReason(
        "horizon", "no plan meets the multi-period terms, and no single family of them (change limit, spot policy, "
        "spot interruptions, budgets, reservation bounds) relaxed alone gives one: they conflict together.",
        "relax constraints.max_spot_share, spot_min_regions, spot_interruptions, "
        "change_costs.max_changed_instances, reserved_gpus_min/max or the budgets")


# ---------------------------------------------------------------------- the answer
def _result(workload, catalog, problem, periods, specs, merged, solutions, reserved, info, backend, t0, deadline,
            options, timings, peak=None) -> PlanResult:
    (options.on_stage or (lambda name: None))("evaluate")
    t1 = time.monotonic()
    prices = offer_prices(problem)
    period_results, reports = [], []
    violations: list[str] = []
    hours = sum(p.hours for p in periods)
    # Periods whose raw demand multipliers are all equal and that run the same plan get the
    # same report: each is checked once (10,000 hourly periods of a 24-hour cycle took 17 s).
    # The key is read from the raw workload, not from the planner's merge of periods.
    checked: dict[tuple, object] = {}
    for j, period in enumerate(periods):
        m = merged[j]
        sol = solutions[m]
        name = period.name if problem.periods else None
        key = (m, None if name is None else tuple(s.demand.profile.get(name, 1.0) for s in workload.services))
        report = checked.get(key)
        if report is None:
            report = checked[key] = evaluate(workload, catalog, sol, period=name, reserved=reserved)
        reports.append(report)
        violations += [f"period {period.name}: {v}" for v in report.violations]
        period_results.append(_period(problem, period, specs[m], sol, reserved, prices, report))
    timings["evaluate_s"] = time.monotonic() - t1
    change_cost = _change_cost(problem, solutions[merged[0]])
    horizon_cost = sum(p.hours * r.total_price_usd_per_hour for p, r in zip(periods, period_results)) + change_cost
    if abs(horizon_cost - info["horizon_cost_usd"]) > 1e-6 * max(1.0, abs(horizon_cost)):
        violations.append(f"the solver's horizon cost ${info['horizon_cost_usd']:.6f} differs from the "
                          f"recomputed ${horizon_cost:.6f}")
    violations += _horizon_checks(problem, reserved, horizon_cost, hours)
    if options.check and violations:
        raise PlannerError("internal error: the plan failed independent evaluation: " + "; ".join(violations))
    first = solutions[merged[0]]
    first_spec = specs[merged[0]]
    scaled = replace(problem, services=first_spec.services)
    fleet = [FleetLine(f.offer_id, f.provider, f.name, f.region, f.gpu, f.gpus_per_instance, f.instances,
                       f.price_usd_per_hour, f.subtotal_usd_per_hour, problem.offer(f.offer_id).vcpus,
                       problem.offer(f.offer_id).host_memory_gib) for f in period_results[0].fleet]
    services = service_results(scaled, _merged_markets(first), catalog, options.answer_by, options.cancel)
    # The first period's worst spot pools, as its period result has them (the merged plan
    # above has no spot apart from firm replicas).
    covered = {ps.name: ps.spot_interruptions for ps in period_results[0].services}
    for r in services:
        r.spot_interruptions = covered.get(r.name)
    if peak is None:
        peak = _peak_plan(problem, specs, backend.name, deadline, options, BASELINE_SHARE)
    savings = _savings(problem, peak, horizon_cost, hours)
    h = problem.horizon
    replan = None
    if h.current_fleet is not None:
        done = _rollout(problem, first, catalog)
        replan = Replan([Change(**c) for c in changes(h.current_fleet, dict(first.fleet), dict(first.spot_fleet))],
                        Rollout([RolloutStep(**st) for st in done["steps"]], done["surge_instances"], done["note"]))
    # No cost is negative, so $0 bounds every plan: a search without a bound (-inf: its period
    # MIPs stopped at plans without one) says gap 1, not an infinite gap and bound (which JSON
    # cannot carry: they were written as Infinity).
    bound = min(max(info["bound_usd"], 0.0), horizon_cost)
    # "optimal" with solver.relative_gap: proven within it, and the gap says how far
    gap = 0.0 if info["status"] == "optimal" and not problem.relative_gap else \
        round(max(0.0, (horizon_cost - bound) / max(horizon_cost, 1e-9)), 6)
    horizon = HorizonResult(
        period_results,
        [Reservation(o, n, term, round(problem.offer(o).tier_price(term), 6), n * problem.offer(o).gpus_per_instance)
         for o, (n, term) in sorted(reserved.items())],
        hours, round(horizon_cost, 6), round(horizon_cost / hours, 6) if hours else 0.0, list(h.tiers), savings, replan,
        HorizonSolverInfo(info["status"], round(horizon_cost, 6), round(bound, 6), gap, info["method"], len(specs),
                          info["nodes"], info["period_solves"], round(change_cost, 6), info["detail"]))
    solver_info = SolverInfo(backend.name, timings.get("solve_s", 0.0), time.monotonic() - t0, gap,
                             round(bound / hours, 6) if hours else None, _size(info.get("model_sizes", [])), len(problem.configs),
                             len(problem.rejections), len(problem.filtered_out),
                             info.get("ties") or "none: several periods are priced together",
                             info["detail"], {k: round(v, 4) for k, v in timings.items()})
    p0 = period_results[0]
    result = PlanResult(info["status"], problem.name, p0.total_price_usd_per_hour, p0.gpus, fleet, services,
                        [{"offer_id": p.offer_id, "instance": p.instance, "replicas": [list(r) for r in p.replicas],
                          "spot": p.spot} for p in reports[0].placements],
                        solver_info, catalog=catalog.description, pricing=problem.pricing, horizon=horizon)
    result.evaluation = {"ok": not violations, "violations": violations,
                         "cost_usd_per_hour": round(reports[0].cost_usd_per_hour, 6)}
    from solver.output.power import add_power

    add_power(result, problem, _running(first), first.assignments,
              [(p.hours, _running(solutions[merged[j]])) for j, p in enumerate(periods)])
    return result


def _running(sol: Solution) -> dict[str, int]:
    """Instances running per offer in a period, firm and spot together (what draws power)."""
    out = dict(sol.fleet)
    for offer_id, n in sol.spot_fleet:
        out[offer_id] = out.get(offer_id, 0) + n
    return out


def _period(problem, period, spec, sol: Solution, reserved, prices, report) -> PeriodResult:
    lines: list[TierFleetLine] = []
    unused = []

    def line(offer_id: str, n: int, tier: str, price: float) -> None:
        o = problem.offer(offer_id)
        lines.append(TierFleetLine(o.id, o.provider, o.name, o.region, o.gpu, o.gpus_per_instance, n, tier,
                                   price, round(price * n, 6)))

    firm = dict(sol.fleet)
    for offer_id in sorted(set(firm) | set(reserved)):
        n = firm.get(offer_id, 0)
        r, term = reserved.get(offer_id, (0, None))
        if r:
            used = min(n, r)
            if used:
                line(offer_id, used, term, problem.offer(offer_id).tier_price(term))
            if r > used:
                unused.append(UnusedReservation(offer_id, r - used))
        if n > r:
            line(offer_id, n - r, "on_demand", problem.offer(offer_id).price_usd_per_hour)
    for offer_id, n in sol.spot_fleet:
        line(offer_id, n, "spot", problem.offer(offer_id).spot_price_usd_per_hour)
    total = sum(x.subtotal_usd_per_hour for x in lines)
    total += sum(u.instances * problem.offer(u.offer_id).tier_price(reserved[u.offer_id][1]) for u in unused)
    rates = [problem.offer(o).spot_interruption_rate_per_hour for o, _ in sol.spot_fleet]
    interruptions = (sum(problem.offer(o).spot_interruption_rate_per_hour * n for o, n in sol.spot_fleet)
                     if sol.spot_fleet and all(r is not None for r in rates) else None)
    gpus = sum(x.gpus_per_instance * x.instances for x in lines)
    return PeriodResult(period.name, period.hours, lines, round(total, 6), gpus, _services(problem, spec, sol),
                        {"ok": report.ok, "violations": report.violations,
                         "cost_usd_per_hour": round(report.cost_usd_per_hour, 6)},
                        unused, None if interruptions is None else round(interruptions, 6))


def _services(problem, spec, sol: Solution) -> list[PeriodService]:
    by_key = {c.key: c for c in problem.configs}
    covered = _spot_cover_views(problem, spec.services, sol)
    by_service = sol.by_service()
    out = []
    for s in spec.services:
        mine = by_service.get(s.name, [])
        cap = [0.0] * len(s.class_demand)
        firm = [0.0] * len(s.class_demand)
        for a in mine:
            for k, perf in enumerate(by_key[a.config_key].classes):
                cap[k] += perf.throughput * a.replicas
                if not a.spot:
                    firm[k] += perf.throughput * a.replicas
        out.append(PeriodService(s.name, s.unit, round(s.raw_demand, 6), round(s.total_demand, 6),
                                 [round(x, 6) for x in cap], [round(x, 6) for x in firm], sum(a.replicas for a in mine),
                                 [PeriodAssignment(a.config_key, a.offer_id, a.spot, a.replicas) for a in mine],
                                 covered.get(s.name)))
    return out


def _spot_cover_views(problem, services, sol: Solution) -> dict[str, RedundancyView]:
    """Each covered service's worst reclaimed spot pool in one period (constraints.spot_interruptions)."""
    from solver.optimize import spot_cover

    return {name: RedundancyView(sv.domain, sv.serve_fraction, sv.worst_domain, round(sv.surviving_fraction, 6))
            for name, sv in spot_cover.survivals(problem, services, sol).items()}


def _merged_markets(sol: Solution) -> Solution:
    """The first period with spot and other replicas of one configuration added up (the
    top-level services view; periods[0] keeps them apart)."""
    merged: dict[str, Assignment] = {}
    for a in sol.assignments:
        b = merged.get(a.config_key)
        if b is None:
            merged[a.config_key] = replace(a, spot=False)
        else:
            merged[a.config_key] = replace(b, replicas=b.replicas + a.replicas,
                                           routed=tuple(x + y for x, y in zip(b.routed, a.routed)))
    return Solution(sol.fleet, tuple(sorted(merged.values(), key=lambda a: (a.service, a.config_key))))


def _fits(workload, catalog, problem, periods, specs, merged, fallback) -> bool:
    """The fallback passes the evaluator in the first period and the horizon's own checks
    (a change limit, reservation bounds or budgets can rule it out)."""
    solutions, reserved, info = fallback
    report = evaluate(workload, catalog, solutions[0], period=periods[0].name if problem.periods else None,
                      reserved=reserved)
    hours = sum(p.hours for p in periods)
    h = problem.horizon
    if h.max_changed_instances is not None and h.current_fleet is not None:
        if sum(change_counts(h.current_fleet, dict(solutions[0].fleet), {})) > h.max_changed_instances:
            return False
    return report.ok and not _horizon_checks(problem, reserved, info["horizon_cost_usd"], hours)


def _change_cost(problem: Problem, first: Solution) -> float:
    h = problem.horizon
    if h.current_fleet is None:
        return 0.0
    added, removed = change_counts(h.current_fleet, dict(first.fleet), dict(first.spot_fleet))
    return h.add_instance_usd * added + h.remove_instance_usd * removed


def _horizon_checks(problem: Problem, reserved, horizon_cost: float, hours: float) -> list[str]:
    """What no single period can see: reservation bounds and limits, changes, budgets over the horizon."""
    h = problem.horizon
    out = []
    gpus = sum(n * problem.offer(o).gpus_per_instance for o, (n, _t) in reserved.items())
    if h.reserved_gpus_min is not None and gpus < h.reserved_gpus_min:
        out.append(f"{gpus} reserved GPUs, below reserved_gpus_min {h.reserved_gpus_min}")
    if h.reserved_gpus_max is not None and gpus > h.reserved_gpus_max:
        out.append(f"{gpus} reserved GPUs, above reserved_gpus_max {h.reserved_gpus_max}")
    for o, (n, _t) in reserved.items():
        if o in problem.offer_limits and n > problem.offer_limits[o]:
            out.append(f"{n} reserved instances of {o} exceed its limit of {problem.offer_limits[o]}")
    if h.budget_usd_per_day is not None and horizon_cost / hours * 24.0 > h.budget_usd_per_day * (1 + 1e-9):
        out.append(f"${horizon_cost / hours * 24:.2f}/day exceeds budget_usd_per_day ${h.budget_usd_per_day:g}")
    if h.budget_usd_per_month is not None and horizon_cost / hours * HOURS_PER_MONTH > h.budget_usd_per_month * (1 + 1e-9):
        out.append(f"${horizon_cost / hours * HOURS_PER_MONTH:.2f}/month exceeds budget_usd_per_month "
                   f"${h.budget_usd_per_month:g}")
    return out


def _peak_services(specs) -> tuple:
    """Each service at its busiest period's demand."""
    return tuple(max((spec.services[i] for spec in specs), key=lambda s: s.total_demand)
                 for i in range(len(specs[0].services)))


def _peak_plan(problem: Problem, specs, backend_name: str, deadline: float, options, share: float):
    """The cheapest single-hour fleet sized for each service's peak period, at the offers'
    own prices (on-demand): (plan, $/hour, status), or None without time or a plan."""
    single = replace(problem, services=_peak_services(specs), periods=(), horizon=None)
    left = deadline - time.monotonic()
    if left <= 0.1:
        return None
    quiet = replace(options, on_progress=None, on_stage=None)
    until = time.monotonic() + share * left
    try:
        _f, outcome, solution, _t = solve_single(single, backend_name, until, Stop(options.cancel, until, share * left),
                                                 quiet, False, {"candidates_s": 0.0}, time.monotonic())
    except (InfeasibleError, SolverTimeout, Cancelled):
        return None
    return solution, sum(problem.offer(o).price_usd_per_hour * n for o, n in solution.fleet), outcome.status


def _greedy_peak(problem: Problem, specs):
    """A fleet for each service's peak period from the greedy plan (each service alone on
    its cheapest configurations; milliseconds): (plan, $/hour, "greedy"), or None. Only a
    plan to fall back on where the peak MIP had no time: without one, the search's plan
    stood whatever it cost - its period MIPs' first plans under a 4.5 s limit, $18.2 million
    for 500 services whose peak fleet costs $54,905 (and 18 s past the limit to evaluate
    its 435,858 replicas). `_fits` checks it against the workload like the peak fleet."""
    single = replace(problem, services=_peak_services(specs), periods=(), horizon=None)
    solution = greedy_solution(single)
    if solution is None:
        return None
    return solution, sum(problem.offer(o).price_usd_per_hour * n for o, n in solution.fleet), "greedy"


def _savings(problem: Problem, peak, horizon_cost: float, hours: float) -> Savings | None:
    """Against the peak fleet, all on-demand, every hour of the horizon."""
    if peak is None:
        return None
    _solution, per_hour, status = peak
    base = per_hour * hours
    return Savings(f"the cheapest {'spot' if problem.pricing == 'spot' else 'on-demand'} fleet sized for each "
                   "service's peak period, every hour", round(per_hour, 6), round(base, 6), status,
                   round(base - horizon_cost, 6), round((base - horizon_cost) / base, 6) if base > 0 else 0.0)


def _constant_fleet(problem: Problem, specs, peak, bound: float):
    """The peak fleet in every period, each instance reserved where that is cheaper (it
    runs every hour): a plan the search falls back on when it has none (or a dearer one)
    when time runs out. (solutions, reserved, info), or None where tiers forbid it."""
    if peak is None:
        return None
    solution, _per_hour, _status = peak
    prices = offer_prices(problem)
    reserved, hourly = {}, 0.0
    for offer_id, n in solution.fleet:
        pr = prices[offer_id]
        if pr.reserved is not None and (pr.on_demand is None or pr.reserved < pr.on_demand):
            reserved[offer_id] = (n, pr.reserved_term)
            hourly += pr.reserved * n
        elif pr.on_demand is not None:
            hourly += pr.on_demand * n
        else:
            return None
    hours = sum(spec.hours for spec in specs)
    h = problem.horizon
    change = 0.0
    if h.current_fleet is not None:
        change = _change_cost(problem, solution)
    info = {"status": "feasible", "horizon_cost_usd": hours * hourly + change, "bound_usd": bound,
            "change_cost_usd": change}
    return [solution] * len(specs), reserved, info


def _rollout(problem: Problem, first: Solution, catalog: Catalog) -> dict:
    targets = [Target(a.service, a.config_key, a.offer_id, a.spot, a.gpus_per_replica)
               for a in first.assignments for _ in range(a.replicas)]
    sizes = {o.id: o.gpus_per_instance for o in catalog.offers}

    def key(service: str, offer_id: str, gpus: int, precision: str | None) -> str:
        size = sizes.get(offer_id, gpus)
        span = gpus // size if gpus > size else 1
        return Config(service, offer_id, gpus, precision, "", (), instances_per_replica=span).key

    return plan_rollout(problem.horizon.current_fleet, targets, dict(first.fleet), dict(first.spot_fleet), sizes, key)


def _size(sizes: list[dict[str, int]]) -> dict[str, int]:
    """The period models together (the MIP the search works on, one period at a time)."""
    keys = ("variables", "integer_variables", "constraints", "nonzeros")
    return {k: sum(s.get(k, 0) for s in sizes) for k in keys}
