"""`plan()`: workload -> cheapest proven-optimal fleet, checked by the evaluator.

Stages: consistency checks -> candidates (pruned) -> greedy warm start -> MIP (cost)
-> MIP (tie-break) -> solution -> independent evaluation -> result/explanation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from solver.optimize.backends import SolveOptions, get_backend
from solver.compile.candidates import build_problem
from solver.catalog.types import Catalog
from solver.errors import InfeasibleError, PlannerError, SolverTimeout, Cancelled
from solver.evaluate import evaluate
from solver.explain.alternatives import alternatives_for
from solver.explain.diagnose import diagnose_infeasible, diagnose_unservable
from solver.optimize.formulation import Formulation, build, gpu_objective
from solver.optimize.headroom import fill_idle_gpus
from solver.optimize.greedy import greedy_solution, solution_cost
from solver.optimize.linear import Progress, SolveOutcome
from solver.compile.problem import Problem
from solver.compile.resolve import check_references, resolve_catalog
from solver.output.result import (AssignmentView, FleetLine, PlanResult, ServiceResult, SloCheck, SolverInfo)
from solver.workload.schema import Workload
from solver.optimize.solution import Assignment, Solution


# Tie-breaking never changes the cost, so it gets a bounded effort; a node limit (not
# a time limit) keeps the outcome deterministic on a busy machine.
TIE_BREAK_NODES = 200


@dataclass
class PlanOptions:
    time_limit_s: float | None = None  # overrides workload.solver.time_limit_s (e.g. a gRPC deadline)
    backend: str | None = None
    explain: bool = False
    on_progress: Callable[[Progress], None] | None = None
    cancel: threading.Event | None = None
    base_dir: str | None = None  # where relative catalog files are resolved
    catalog: Catalog | None = None  # pre-resolved catalog (reviews reuse one)
    check: bool = True  # run the independent evaluator on the answer
    # Called with each stage's name as it starts ("candidates", "diagnose", "model", "mip",
    # "tie_break", "evaluate", "explain"): the gRPC server reports stages and stops a
    # cancelled call at the next one (an exception raised here leaves plan()).
    on_stage: Callable[[str], None] | None = None
    explain_deadline: float | None = None  # time.monotonic() by which explanations stop (a call's deadline)


def plan(workload: Workload, options: PlanOptions | None = None) -> PlanResult:
    options = options or PlanOptions()
    stage = options.on_stage or _no_stage
    t0 = time.monotonic()
    stage("candidates")
    catalog = options.catalog or resolve_catalog(workload, options.base_dir)
    check_references(workload, catalog)
    timings: dict[str, float] = {}
    problem = build_problem(workload, catalog)
    timings["candidates_s"] = time.monotonic() - t0
    stage("diagnose")
    unservable = diagnose_unservable(workload, catalog, problem)
    if unservable:
        raise InfeasibleError(unservable)

    time_limit = options.time_limit_s if options.time_limit_s is not None else workload.solver.time_limit_s
    deadline = t0 + time_limit
    backend = get_backend(options.backend or workload.solver.backend)

    stage("model")
    greedy = greedy_solution(problem)
    configs = list(problem.configs)
    if greedy is not None and evaluate_quick(problem, greedy):
        # A configuration whose single instance costs more than a known feasible plan can
        # never be in an optimal one (strictly dearer, so ties are unaffected).
        upper = solution_cost(problem, greedy)
        configs = [c for c in configs
                   if problem.offer(c.offer_id).price_usd_per_hour * c.instances_per_replica <= upper + 1e-9]
    form = build(problem, configs)
    hint = _hint(form, greedy) if greedy is not None else None
    timings["formulation_s"] = time.monotonic() - t0 - timings["candidates_s"]
    opts = SolveOptions(time_limit_s=max(deadline - time.monotonic(), 0.05), hint=hint,
                        on_progress=_relay(form, options.on_progress), cancel=options.cancel)
    stage("mip")
    outcome = backend.solve(form.model, opts)
    timings["solve_s"] = outcome.solve_time_s
    if outcome.status == "infeasible":
        stage("diagnose")
        reasons = diagnose_infeasible(workload, problem, backend, deadline)
        raise InfeasibleError(reasons)
    if outcome.status == "cancelled":
        raise Cancelled("the solve was cancelled before any fleet was found")
    if outcome.values is None:
        raise SolverTimeout(f"no feasible fleet found within {time_limit:g} s; the model has "
                            f"{form.model.size['integer_variables']} integer variables. To fix: raise the time limit")
    tie_break = "not needed"
    if outcome.status == "optimal" and workload.solver.tie_break and deadline - time.monotonic() > 0.05:
        t1 = time.monotonic()
        stage("tie_break")
        outcome, tie_break = _tie_break(form, backend, outcome, deadline, options.cancel)
        timings["tie_break_s"] = time.monotonic() - t1
    solution = extract(form, outcome.values)
    return _result(workload, catalog, problem, form, outcome, solution, tie_break, t0, options, timings)


def _no_stage(name: str) -> None:
    pass


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
    return True


def _hint(form: Formulation, sol: Solution) -> list[float] | None:
    values = [0.0] * len(form.model.variables)
    for offer_id, n in sol.fleet:
        if offer_id not in form.n:
            return None
        values[form.n[offer_id]] = float(n)
    for a in sol.assignments:
        if a.config_key not in form.r:
            return None
        values[form.r[a.config_key]] = float(a.replicas)
        for k, routed in enumerate(a.routed):
            if (a.config_key, k) in form.x:
                values[form.x[(a.config_key, k)]] = routed
    for i, v in enumerate(form.model.variables):
        if values[i] > v.ub:
            return None
    return values


def _tie_break(form: Formulation, backend, first: SolveOutcome, deadline: float, cancel) -> tuple[SolveOutcome, str]:
    """Among fleets of the optimal cost: fewest GPUs; then, on that fleet, most spare capacity."""
    lm = form.model
    saved_objective, saved_rows = lm.objective, len(lm.rows)
    notes = []
    values = first.values
    try:
        lm.row("tie_break_cost", form.cost_terms, ub=first.objective + 1e-6)
        lm.objective = gpu_objective(form)
        gpus = sum(c * values[i] for i, c in form.gpu_terms)
        # The LP relaxation bounds the GPUs of any cheapest fleet in milliseconds; when it
        # leaves no room below the plan's GPU count, the plan already has the fewest.
        lp = backend.solve(lm, SolveOptions(time_limit_s=max(min(deadline - time.monotonic(), 5.0), 0.05),
                                            relax_integrality=True))
        if lp.status == "optimal" and lp.objective is not None and lp.objective > gpus - 1 + 1e-6:
            notes.append("fewest GPUs")
        else:
            budget_s = min(deadline - time.monotonic(), max(first.solve_time_s, 0.5))
            second = backend.solve(lm, SolveOptions(time_limit_s=max(budget_s, 0.05), hint=values,
                                                    absolute_gap=0.5, node_limit=TIE_BREAK_NODES, cancel=cancel))
            if second.values is not None:
                values = second.values
                notes.append("fewest GPUs" + ("" if second.status == "optimal" else " (best within the effort limit)"))
        values, added = fill_idle_gpus(form, values)
        if added:
            notes.append(f"then {added} idle GPU slot(s) given extra replicas for headroom")
    finally:
        lm.objective = saved_objective
        del lm.rows[saved_rows:]
    if not notes:
        return first, "skipped (time limit)"
    merged = SolveOutcome(first.status, values, sum(c * values[i] for i, c in form.cost_terms),
                          first.bound, first.solve_time_s, first.backend, first.detail)
    return merged, ", ".join(notes)


def extract(form: Formulation, values: list[float]) -> Solution:
    fleet = tuple(sorted((o, int(round(values[i]))) for o, i in form.n.items() if round(values[i]) > 0))
    by_key = {c.key: c for c in form.configs}
    demand = {s.name: s for s in form.problem.services}
    assignments = []
    for key, i in form.r.items():
        r = int(round(values[i]))
        if r <= 0:
            continue
        c = by_key[key]
        s = demand[c.service]
        if len(s.class_demand) == 1:
            routed = (0.0,)  # filled below, proportionally to capacity
        else:
            routed = tuple(max(values[form.x[(key, k)]], 0.0) if (key, k) in form.x else 0.0
                           for k in range(len(s.class_demand)))
        assignments.append(Assignment(key, c.service, c.offer_id, c.gpus_per_replica, c.precision, r, routed,
                                      c.instances_per_replica))
    # Single-class services: route demand in proportion to each configuration's capacity.
    out = []
    for a in assignments:
        s = demand[a.service]
        if len(s.class_demand) == 1:
            cap = by_key[a.config_key].throughput * a.replicas
            total = sum(by_key[b.config_key].throughput * b.replicas for b in assignments if b.service == a.service)
            a = Assignment(a.config_key, a.service, a.offer_id, a.gpus_per_replica, a.precision, a.replicas,
                           (s.class_demand[0] * cap / total if total > 0 else 0.0,), a.instances_per_replica)
        out.append(a)
    out.sort(key=lambda a: (a.service, a.config_key))
    return Solution(fleet, tuple(out))


def _result(workload, catalog, problem, form, outcome, solution, tie_break, t0, options, timings) -> PlanResult:
    t1 = time.monotonic()
    stage = options.on_stage or _no_stage
    stage("evaluate")
    report = evaluate(workload, catalog, solution) if options.check else None
    timings["evaluate_s"] = time.monotonic() - t1
    by_key = {c.key: c for c in problem.configs}
    slo = {s.name: s.slo for s in workload.services}
    fleet = []
    for offer_id, n in solution.fleet:
        o = problem.offer(offer_id)
        fleet.append(FleetLine(o.id, o.provider, o.name, o.region, o.gpu, o.gpus_per_instance, n,
                               o.price_usd_per_hour, round(o.price_usd_per_hour * n, 6)))
    services = []
    for s in problem.services:
        views = []
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
                round(used / a.replicas, 4), worst("ttft_ms"), worst("tpot_ms"), worst("latency_ms"),
                c.classes[0].batch, c.memory_gib_per_gpu, c.classes[0].binding_limit, c.error_band)
            for name in ("ttft_ms", "tpot_ms", "latency_ms"):
                bound = getattr(slo[s.name], name)
                if bound is not None:
                    view.slo_checks.append(SloCheck(name, getattr(view, name), bound))
            views.append(view)
        # Utilization = busy replica-time / replicas; capacity at this class mix = demand / utilization.
        replicas = sum(v.replicas for v in views)
        busy = sum(v.utilization * v.replicas for v in views)
        utilization = busy / replicas if replicas else 0.0
        if len(s.class_demand) == 1:
            total_cap = capacity[0]
        else:
            total_cap = s.total_demand / utilization if utilization > 0 else 0.0
        services.append(ServiceResult(s.name, s.unit, s.raw_demand, s.total_demand, round(total_cap, 6),
                                      round(utilization, 4), list(s.class_names), views))
    cost = sum(f.subtotal_usd_per_hour for f in fleet)
    gap = None
    if outcome.bound is not None and outcome.objective:
        gap = max(0.0, (outcome.objective - outcome.bound) / max(abs(outcome.objective), 1e-9))
        gap = 0.0 if outcome.status == "optimal" else round(gap, 6)
    info = SolverInfo(outcome.backend, outcome.solve_time_s, time.monotonic() - t0, gap, outcome.bound,
                      form.model.size, len(problem.configs), len(problem.rejections), len(problem.filtered_out),
                      tie_break, outcome.detail, {k: round(v, 4) for k, v in timings.items()})
    result = PlanResult(outcome.status, workload.name, round(cost, 6), sum(f.gpus_per_instance * f.instances for f in fleet),
                        fleet, services,
                        [{"offer_id": p.offer_id, "instance": p.instance, "replicas": [list(r) for r in p.replicas]}
                         for p in (report.placements if report else [])],
                        info, catalog=catalog.description, pricing=workload.constraints.pricing)
    if report is not None:
        result.evaluation = {"ok": report.ok, "violations": report.violations,
                             "cost_usd_per_hour": round(report.cost_usd_per_hour, 6)}
        if not report.ok:
            raise PlannerError("internal error: the plan failed independent evaluation: " + "; ".join(report.violations))
    if options.explain:
        stage("explain")
        for sr in services:
            deadline = time.monotonic() + 10.0
            if options.explain_deadline is not None:
                deadline = min(deadline, options.explain_deadline)
            sr.alternatives = alternatives_for(sr.name, problem, form, solution, backend_name=outcome.backend,
                                               deadline=deadline)
    return result
