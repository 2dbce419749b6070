"""`plan()`: workload -> cheapest proven-optimal fleet, checked by the evaluator.

Stages: consistency checks -> candidates (pruned) -> greedy warm start -> MIP (cost)
-> MIP (tie-break) -> solution -> independent evaluation -> result/explanation. The solve
stage is solver/solve_stage.py, the per-service results solver/output/services.py; a
workload with periods, pricing tiers or a running fleet goes to solver/plan_horizon.py
after the candidates, which reads the same stages.
"""

from __future__ import annotations

import time
from dataclasses import replace

from solver.catalog.types import Catalog
from solver.collector import paused as collector_paused
from solver.compile.candidates import add_candidates, build_problem
from solver.compile.compiled import compile_problem
from solver.compile.fleet_size import check_fleet_size
from solver.compile.lazy_caps import has_pending, resolve_caps
from solver.compile.load_caps import at_load, real_routed
from solver.compile.problem import Problem
from solver.compile.resolve import check_references, resolve_catalog
from solver.errors import InfeasibleError, InputError, PlannerError, SolverTimeout
from solver.evaluate import evaluate
from solver.explain.diagnose import diagnose_unservable
from solver.interrupt import Stop
from solver.optimize.greedy import solution_cost
from solver.optimize.solution import Solution
from solver.output.power import add_power
from solver.output.prefetch import AtLoadPrefetch
from solver.output.result import ConfidenceCost, FleetLine, PlanResult, RedundancyCost, ServingChoice, SolverInfo
from solver.output.services import service_results
from solver.solve_stage import EXPLAIN_BUDGET_S, PlanOptions, problem_wants_checks, solve_with_exact_caps
from solver.workload.schema import Workload


def plan(workload: Workload, options: PlanOptions | None = None) -> PlanResult:
    options = options or PlanOptions()
    prefetch = AtLoadPrefetch(options.prefetch_at_load)
    try:
        with collector_paused():  # a plan makes ~10^5 long-lived objects and next to no cycles
            return _plan(workload, options, prefetch)
    finally:
        prefetch.close()  # done, failed or cancelled: the child stops now


RESULT_S_PER_PERCENTILE_SERVICE = 0.025
# Seconds per service of the work after the solve that every plan has: evaluation, service
# views, PlanResult.to_dict() and the JSON answer. Measured with bench/deadlines.py (the
# CLI, 2 cores): 0.4 ms per service for 2,500 generated services, 0.9 ms for 5,000 (4.4 s,
# which put a 30 s solve 5 s past its limit).
RESULT_S_PER_SERVICE = 0.001
RESULT_WRITE_S_PER_SERVICE = 0.0002  # of it, PlanResult.to_dict() and the JSON answer


def _plan(workload: Workload, options: PlanOptions, prefetch: AtLoadPrefetch) -> PlanResult:
    t0 = time.monotonic()  # the planner's own clock (its timings and total)
    # the limit's: from the caller's start where it gives one (the CLI: reading the workload)
    started = t0 if options.started_at is None else min(options.started_at, t0)
    if options.verify is None:
        options = replace(options, verify=workload.solver.verify)
    catalog = options.catalog or resolve_catalog(workload, options.base_dir)
    if options.catalog is not None:  # a caller's catalog (reviews, the server): the owned GPUs join it
        from solver.catalog.owned import with_owned

        catalog = with_owned(workload, catalog)
    if not (options.references_checked and options.catalog is not None):
        workload = check_references(workload, catalog)
    time_limit = options.time_limit_s if options.time_limit_s is not None else workload.solver.time_limit_s
    deadline = started + time_limit
    stop = Stop(options.cancel, deadline, time_limit)
    caller_answers_by = options.answer_by is not None
    if options.answer_by is None:
        # The time limit bounds the answer too: past it, the informational values under
        # load of services without a percentile SLO are left out (with a warning), as past
        # a gRPC call's deadline - hundreds of services cost seconds of queueing runs. The
        # answer's writing (to_dict and JSON: 0.12 ms per service measured for 5,000) comes
        # after them.
        options = replace(options, answer_by=deadline - RESULT_WRITE_S_PER_SERVICE * len(workload.services))
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
    # The answer comes by the limit: the solve stops early enough for the work after it
    # (at most a quarter of the limit). Every plan is evaluated and written, ~1 ms per
    # service; a percentile plan's values under load and their check cost ~22 ms per
    # percentile service more (100 services: 2.25 s past an 8 s limit).
    # A caller that answers by a point of its own (the server, under a deadline: solve_budget
    # keeps a margin for the evaluation and the answer, by services, where the deadline binds)
    # has kept the per-service part already, not the percentile part: the generated
    # 100-service p99 workload under a 12 s gRPC deadline got no answer at all
    # (bench/deadlines.py --door grpc). Where its own time limit binds it loses that part
    # of the limit as the CLI does.
    percentile_services = sum(s.model is not None and s.slo.percentile is not None for s in problem.services)
    reserve = min(RESULT_S_PER_PERCENTILE_SERVICE * percentile_services
                  + (0.0 if caller_answers_by else RESULT_S_PER_SERVICE * len(problem.services)), 0.25 * time_limit)
    solve_stop = Stop(options.cancel, deadline - reserve, time_limit) if reserve > 0 else stop
    if workload.horizon_mode:
        # Periods, pricing tiers or a running fleet: the multi-period planner (its own module;
        # everything below is today's single static hour, unchanged).
        from solver.plan_horizon import plan_horizon
        return plan_horizon(workload, catalog, problem, backend_name, options, t0, solve_stop.deadline, solve_stop,
                            timings)
    problem, form, outcome, solution, ties = solve_with_exact_caps(problem, catalog, backend_name, solve_stop.deadline,
                                                                    solve_stop, options, workload.solver.tie_break,
                                                                    timings, t0, prefetch)
    return _result(workload, catalog, problem, form, outcome, solution, ties, t0, deadline, options, timings, prefetch)


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
        # Its re-solves use the backend the caller chose, not the one that happened to answer
        # first in a race (solver/optimize/backends/race.py).
        chosen = options.backend or workload.solver.backend
        result.confidence_cost = confidence_cost(workload, catalog, problem, result.total_price_usd_per_hour,
                                                 chosen, options, explain)
        result.serving_choice = serving_choice(workload, catalog, chosen, options, explain)
        result.redundancy_cost = redundancy_cost(workload, catalog, problem, result.total_price_usd_per_hour,
                                                 chosen, options, explain)
        for sr in services:
            sr.alternatives = alternatives_for(sr.name, problem, form, solution, backend_name=chosen,
                                               stop=explain, proven=_proven(outcome))
    return result


def _proven(outcome) -> bool:
    """Proven optimal, not only within solver.relative_gap: the bound meets the plan's cost
    within the tolerance of a tie (--explain's alternatives compare against it)."""
    from solver.explain.alternatives import tie_tolerance

    return (outcome.status == "optimal" and outcome.bound is not None and outcome.objective is not None
            and outcome.objective - outcome.bound <= tie_tolerance(outcome.objective))


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
            outcome, solution = solve_with_exact_caps(problem, catalog, backend_name, stop.deadline, stop, quiet,
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
        outcome, solution = solve_with_exact_caps(variant, catalog, backend_name, stop.deadline, stop, quiet, False,
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
