"""Re-planning one static hour from the running fleet: today's MIP plus change costs.

When nothing but the running fleet sets a re-plan apart from today's single-hour problem
(one period, one price list, no spot policy or horizon budget), the pooled single-hour
formulation (solver/optimize/formulation.py) is extended rather than the multi-period
one used: it is the same model with, per offer o (instances n_o, running C_o),

  add_o >= n_o - C_o,   remove_o >= C_o - n_o,   sum_o (add_o + remove_o) <= max_changed
  cost += add_usd * sum add_o + remove_usd * sum remove_o          (one-time, this hour)

Running instances may stay even where no replica needs them (changing them may cost
more than keeping them idle), so their offers get instance variables, in the quota, limit
and budget rows, up to the running count. Two warm starts - the running fleet kept with
each service's shortfall added (solver/optimize/keep_start.py) and the greedy plan (each
service alone, from scratch) - with their change costs bound the optimum and prune
configurations exactly as today; the tie-break (fewest GPUs at the optimal cost) keeps
the change costs in the cost it holds fixed.
"""

from __future__ import annotations

import time

from solver.compile.problem import Problem
from solver.errors import Cancelled, InfeasibleError, SolverTimeout
from solver.explain.diagnose import diagnose_infeasible, unexplained_reason
from solver.interrupt import Stop
from solver.optimize.backends import SolveOptions
from solver.optimize.backends.base import backend_for
from solver.optimize.formulation import Formulation, build
from solver.optimize.greedy import greedy_solution, solution_cost
from solver.optimize.headroom import fill_idle_gpus
from solver.optimize import stable_replicas
from solver.optimize.keep_start import keep_start
from solver.optimize.linear import INF, SolveOutcome
from solver.optimize.period_model import running_counts
from solver.optimize.quick_check import evaluate_quick
from solver.optimize.restricted_start import RELATIVE_GAP, restricted_start
from solver.optimize.rollout import change_counts
from solver.optimize.solution import Solution
from solver.optimize.tiebreak import tie_break


def solve_replan(problem: Problem, hours: float, backend_name: str, deadline: float, stop: Stop, options,
                 ties_wanted: bool, timings: dict[str, float]) -> tuple[Solution, SolveOutcome, Formulation, str, float,
                                                                      float]:
    """(plan, outcome, formulation, tie-break notes, change cost $, lower bound on the total $)
    of a re-plan of one period of `hours` hours: the total is hours x $/hour + the changes."""
    h = problem.horizon
    market_spot = problem.pricing == "spot"
    running = {o: n for (o, spot), n in running_counts(problem).items() if spot == market_spot}
    t0 = time.monotonic()
    configs = list(problem.configs)
    # Two starts: the running fleet kept with each service's shortfall added (a few changes
    # away, where a re-plan's optimum usually is) and the greedy plan (each service alone).
    starts = []
    for start in (keep_start(problem, configs, market_spot), greedy_solution(problem)):
        if start is None or not evaluate_quick(problem, start):
            continue
        added, removed = _change_counts(problem, start, market_spot)
        if h.max_changed_instances is not None and added + removed > h.max_changed_instances:
            continue  # not a plan of this problem: its cost bounds nothing (and would prune wrongly)
        starts.append((hours * solution_cost(problem, start) + h.add_instance_usd * added
                       + h.remove_instance_usd * removed, start))
    starts.sort(key=lambda x: x[0])
    if starts:
        upper = starts[0][0]
        configs = [c for c in configs
                   if hours * problem.offer(c.offer_id).price_usd_per_hour * c.instances_per_replica <= upper + 1e-9]
    form = build(problem, configs, stop=stop)
    _add_changes(form, problem, running, hours)
    backend = backend_for(backend_name, form.model, race=options.race_backends)
    hints = [v for v in (_hint(form, start, running) for _, start in starts) if v is not None]
    timings["formulation_s"] = time.monotonic() - t0
    t1 = time.monotonic()
    restricted = restricted_start(form, backend, hints, deadline, options.cancel)
    if restricted is not None:
        hints.insert(0, restricted)
        timings["restricted_start_s"] = time.monotonic() - t1
    opts = SolveOptions(time_limit_s=max(deadline - time.monotonic(), 0.05), hint=hints[0] if hints else None,
                        extra_hints=hints[1:], cancel=options.cancel,
                        # as well as the absolute 1e-6: either ends the search; solver.relative_gap
                        # when the workload asks for a plan proven within a gap rather than the optimum
                        relative_gap=max(RELATIVE_GAP, problem.relative_gap))
    outcome = backend.solve(form.model, opts)
    timings["solve_s"] = outcome.solve_time_s
    if outcome.status == "infeasible":
        # Diagnosed without the change rows: a reason found there binds the fleet itself; if
        # none (that problem has a fleet), the change limit is what rules every plan out.
        reasons = diagnose_infeasible(problem, backend, stop)
        if not reasons and h.max_changed_instances is not None:
            reasons = _change_limit_reason(h)
        raise InfeasibleError(reasons or [unexplained_reason()])
    if outcome.status == "cancelled":
        raise Cancelled("the re-plan was cancelled before any fleet was found")
    if outcome.values is None:
        raise SolverTimeout(f"no feasible fleet found within {stop.time_limit_s:g} s. To fix: raise the time limit")
    ties = "not needed"
    tie_breaking = outcome.status == "optimal" and ties_wanted and deadline - time.monotonic() > 0.05
    if tie_breaking:
        t1 = time.monotonic()
        outcome, notes = tie_break(form, backend, outcome, deadline, options.cancel)
        timings["tie_break_s"] = time.monotonic() - t1
    if stop.cancelled:  # the tie-break keeps its best plan when cancelled, but the caller wants none now
        stop.check("the re-plan")
    running_replicas = stable_replicas.running_replicas(problem, form, market_spot)
    values = outcome.values
    if tie_breaking and running_replicas:
        # At the optimal fleet, the placement that stops fewest running replicas (the cost is
        # the fleet's: unchanged).
        t1 = time.monotonic()
        values, moved = stable_replicas.fewest_stops(form, backend, values, running_replicas, deadline, options.cancel)
        timings["stable_replicas_s"] = time.monotonic() - t1
        if moved:
            notes.append(moved)
        if stop.cancelled:
            stop.check("the re-plan")
    solution = form.solution_from(values, running=running_replicas)
    if tie_breaking:
        solution, added = fill_idle_gpus(form, solution)
        if added:
            notes.append(f"then {added} idle GPU slot(s) given extra replicas for headroom")
        ties = ", ".join(notes) or "skipped (time limit)"
    # The changes of the plan's own fleet: the MIP's add/remove variables are continuous and,
    # at a plan accepted within solver.relative_gap, may carry slack above them.
    added, removed = _change_counts(problem, solution, market_spot)
    cost = h.add_instance_usd * added + h.remove_instance_usd * removed
    bound = (outcome.bound if outcome.bound is not None else -INF) + h.remove_instance_usd * _forced(problem, running)
    return solution, outcome, form, ties, cost, bound


def _forced(problem: Problem, running: dict[str, int]) -> int:
    """Running instances whose offer the plan may no longer use (filtered out, or another market)."""
    allowed = {o.id for o in problem.offers}
    market_spot = problem.pricing == "spot"
    other = sum(n for (o, spot), n in running_counts(problem).items() if spot != market_spot)
    return other + sum(n for o, n in running.items() if o not in allowed)


def _change_counts(problem: Problem, sol: Solution, market_spot: bool) -> tuple[int, int]:
    """(instances added, removed) by the plan `sol` of one market (the other market's running
    instances all go), as the horizon's own check counts them (plan_horizon._change_cost)."""
    fleet = dict(sol.fleet)
    return change_counts(problem.horizon.current_fleet, {} if market_spot else fleet, fleet if market_spot else {})


def _add_changes(form: Formulation, problem: Problem, running: dict[str, int], hours: float):
    lm, h = form.model, problem.horizon
    allowed = {o.id: o for o in problem.offers}
    for offer_id, now in sorted(running.items()):
        o = allowed.get(offer_id)
        if o is None:
            continue
        keep = min(now, problem.offer_limits.get(offer_id, now))
        if offer_id in form.n:
            var = lm.variables[form.n[offer_id]]
            var.ub = max(var.ub, keep)
            continue
        if problem.same_region == "fleet":
            continue  # an idle instance would need its region chosen: it goes
        i = form.n[offer_id] = lm.var(f"n[{offer_id}]", 0, keep, integer=True)
        form.cost_terms.append((i, o.price_usd_per_hour))
        form.gpu_terms.append((i, float(o.gpus_per_instance)))
        for row in lm.rows:
            if row.name == f"quota[{o.gpu}]":
                row.terms.append((i, float(o.gpus_per_instance)))
            elif row.name == "budget":
                row.terms.append((i, o.price_usd_per_hour))
        if o.gpu in problem.gpu_quotas and not any(r.name == f"quota[{o.gpu}]" for r in lm.rows):
            lm.row(f"quota[{o.gpu}]", [(i, float(o.gpus_per_instance))], ub=problem.gpu_quotas[o.gpu])
        _add_to_power_rows(form, offer_id, i)
    terms, changed = [], []
    forced = _forced(problem, running)
    for offer_id, i in sorted(form.n.items()):
        now = running.get(offer_id, 0)
        add = lm.var(f"add[{offer_id}]", 0, INF)
        rem = lm.var(f"remove[{offer_id}]", 0, float(now))
        lm.row(f"added[{offer_id}]", [(add, 1.0), (i, -1.0)], lb=-now)
        lm.row(f"removed[{offer_id}]", [(rem, 1.0), (i, 1.0)], lb=now)
        terms += [(add, h.add_instance_usd), (rem, h.remove_instance_usd)]
        changed += [add, rem]
    if h.max_changed_instances is not None:
        lm.row("max_changed", [(v, 1.0) for v in changed], ub=h.max_changed_instances - forced)
    # The period's hours weigh the running cost against the one-time changes; the
    # tie-break holds this whole cost fixed. (The budget row, per hour, is built already.)
    form.cost_terms = [(i, c * hours) for i, c in form.cost_terms] + [t for t in terms if t[1]]
    lm.objective = {}
    for i, c in form.cost_terms:
        lm.objective[i] = lm.objective.get(i, 0.0) + c
    return terms, changed


def _add_to_power_rows(form: Formulation, offer_id: str, i: int) -> None:
    """A running owned instance kept idle still draws its site's power: its variable joins
    the site's power row (made here if the site had no other instance in the model)."""
    power = form.problem.power
    if power is None:
        return
    lm = form.model
    for site in power.sites:
        kw = dict(site.offer_kw).get(offer_id)
        if kw is None or site.cap_kw is None:
            continue
        row = next((r for r in lm.rows if r.name == f"power[{site.name}]"), None)
        if row is None:
            lm.row(f"power[{site.name}]", [(i, kw)], ub=site.cap_kw)
        else:
            row.terms.append((i, kw))


def _hint(form: Formulation, greedy: Solution, running: dict[str, int]) -> list[float] | None:
    values = form.values_from(greedy)
    if values is None:
        return None
    fleet = dict(greedy.fleet)
    for offer_id in form.n:
        now, n = running.get(offer_id, 0), fleet.get(offer_id, 0)
        for row in form.model.rows:
            if row.name == f"added[{offer_id}]":
                values[row.terms[0][0]] = float(max(n - now, 0))
            elif row.name == f"removed[{offer_id}]":
                values[row.terms[0][0]] = float(max(now - n, 0))
    return values


def _change_limit_reason(h):
    from solver.errors import InfeasibilityReason
    return [InfeasibilityReason("max_changed_instances", f"no fleet that serves the demand differs from the running "
                                f"one by at most {h.max_changed_instances} instance(s) (removals that no plan can avoid "
                                "count too); without the limit a fleet exists.",
                                "raise change_costs.max_changed_instances")]
