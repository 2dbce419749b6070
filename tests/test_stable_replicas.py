"""A re-plan keeps running replicas where they run when the cost allows
(solver/optimize/stable_replicas.py, Formulation.solution_from's `running`): the same fleet
and cost, the fewest replicas stopped."""

from __future__ import annotations

import time

import pytest

from solver.compile.candidates import build_problem
from solver.compile.resolve import resolve_catalog
from solver.optimize.backends import get_backend
from solver.optimize import formulation
from solver.optimize.formulation import build
from solver.optimize.period_model import running_counts
from solver.optimize.replan import _add_changes
from solver.optimize.solution import Assignment, Solution
from solver.optimize.stable_replicas import fewest_stops, running_replicas
from solver.plan import plan
from solver.workload.documents import parse_workload


def _offer(provider: str, name: str, gpus: int = 1, price: float = 1.0) -> dict:
    return {"provider": provider, "name": name, "gpu": "L4", "gpus_per_instance": gpus, "price_usd_per_hour": price}


def _swapped() -> dict:
    """a and b alike on two offers of one price: a runs on y's instance, b on x's."""
    prof = [{"gpu": "L4", "items_per_min": 50.0}]
    return {"services": [{"name": "a", "demand": {"items_per_min": 50.0}, "profiles": prof},
                         {"name": "b", "demand": {"items_per_min": 50.0}, "profiles": prof}],
            "catalog": {"offers": [_offer("x", "l4"), _offer("y", "l4")]},
            "current_fleet": [{"offer_id": "y/l4", "instances": 1, "replicas": [{"service": "a", "count": 1}]},
                              {"offer_id": "x/l4", "instances": 1, "replicas": [{"service": "b", "count": 1}]}],
            "change_costs": {"add_instance_usd": 1.0, "remove_instance_usd": 1.0}}


@pytest.mark.parametrize("pooled", [True, False])
def test_a_pool_decodes_each_service_onto_the_offer_it_runs_on(pooled: bool, monkeypatch):
    """Pooled (large models: one replica count per service over both offers), the decoding
    put a (first by name) on x and b on y: two replicas moved for nothing. Unpooled (small
    models: a count per offer), the cost MIP may return either; the placement step keeps
    the running one. Either way nothing moves."""
    if pooled:
        monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    d = plan(parse_workload(_swapped())).to_dict()
    placed = {a["config"]: a["offer_id"] for s in d["services"] for a in s["assignments"]}
    assert placed == {"a@y/l4:1gpu:measured": "y/l4", "b@x/l4:1gpu:measured": "x/l4"}, placed
    assert d["rollout"]["steps"] == [] and d["horizon_cost_usd"] == pytest.approx(2.0)


def _shapes(running_gpus: int) -> tuple:
    """One 2-GPU instance runs a: two 1-GPU replicas (50/min each) or one 2-GPU (110/min) serve
    its 100/min at the same cost."""
    w = {"services": [{"name": "a", "demand": {"items_per_min": 100.0},
                       "profiles": [{"gpu": "L4", "items_per_min": 50.0},
                                    {"gpu": "L4", "gpus_per_replica": 2, "items_per_min": 110.0}]}],
         "catalog": {"offers": [_offer("x", "l4x2", gpus=2, price=2.0)]},
         "current_fleet": [{"offer_id": "x/l4x2", "instances": 1,
                            "replicas": [{"service": "a", "count": 2 // running_gpus,
                                          "gpus_per_replica": running_gpus}]}],
         "change_costs": {"add_instance_usd": 1.0, "remove_instance_usd": 1.0}}
    workload = parse_workload(w)
    problem = build_problem(workload, resolve_catalog(workload))
    form = build(problem, list(problem.configs))
    running = {o: n for (o, spot), n in running_counts(problem).items() if not spot}
    _add_changes(form, problem, running, 1.0)
    return problem, form


@pytest.mark.parametrize("running_gpus", [1, 2])
def test_at_the_plans_fleet_the_running_shape_is_kept(running_gpus: int):
    """Handed the other shape (the same fleet and cost), the step returns the running one."""
    problem, form = _shapes(running_gpus)
    other = 2 if running_gpus == 1 else 1
    config = next(c for c in form.configs if c.gpus_per_replica == other)
    moved = Solution((("x/l4x2", 1),), (Assignment(config.key, "a", "x/l4x2", other, None, 2 // other, (100.0,)),))
    values = form.values_from(moved)
    for row in form.model.rows:  # the change rows of the hint: nothing added or removed
        if row.name.startswith(("added[", "removed[")):
            values[row.terms[0][0]] = 0.0
    running = running_replicas(problem, form)
    kept, note = fewest_stops(form, get_backend("scip"), values, running, deadline=time.monotonic() + 30, cancel=None)
    assert note == f"running replicas moved {2 // running_gpus} -> 0", note
    sol = form.solution_from(kept, running=running)
    assert [(a.gpus_per_replica, a.replicas) for a in sol.assignments] == [(running_gpus, 2 // running_gpus)]
    assert sol.fleet == (("x/l4x2", 1),)
    assert sum(c * kept[i] for i, c in form.cost_terms) == pytest.approx(sum(c * values[i] for i, c in form.cost_terms))
    # The model is as it was: no row or variable of the step is left behind.
    assert not any(r.name.startswith(("stopped", "stable_cost")) for r in form.model.rows)
    assert len(kept) == len(form.model.variables)


def test_nothing_running_in_place_means_nothing_to_do():
    problem, form = _shapes(1)
    config = next(c for c in form.configs if c.gpus_per_replica == 1)
    same = Solution((("x/l4x2", 1),), (Assignment(config.key, "a", "x/l4x2", 1, None, 2, (100.0,)),))
    values = form.values_from(same)
    kept, note = fewest_stops(form, get_backend("scip"), values, running_replicas(problem, form),
                              deadline=time.monotonic() + 30, cancel=None)
    assert kept is values and note is None


def test_a_pool_whose_groups_swap_offers_counts_as_moved(monkeypatch):
    """Pooled: a runs 2 x 1-GPU on x's 2-GPU box, b 1 x 2-GPU on y's. Handed the plan that
    swaps them (the same counts, so no group stops), the step still sees 3 moved replicas
    and returns the placement that keeps both."""
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    box = lambda p: _offer(p, "l4x2", gpus=2, price=2.0)  # noqa: E731
    w = {"services": [{"name": "a", "demand": {"items_per_min": 100.0},
                       "profiles": [{"gpu": "L4", "items_per_min": 50.0}]},
                      {"name": "b", "demand": {"items_per_min": 100.0},
                       "profiles": [{"gpu": "L4", "gpus_per_replica": 2, "items_per_min": 100.0}]}],
         "catalog": {"offers": [box("x"), box("y")]},
         "current_fleet": [{"offer_id": "x/l4x2", "instances": 1, "replicas": [{"service": "a", "count": 2}]},
                           {"offer_id": "y/l4x2", "instances": 1,
                            "replicas": [{"service": "b", "count": 1, "gpus_per_replica": 2}]}],
         "change_costs": {"add_instance_usd": 1.0, "remove_instance_usd": 1.0}}
    workload = parse_workload(w)
    problem = build_problem(workload, resolve_catalog(workload))
    form = build(problem, list(problem.configs))
    _add_changes(form, problem, {"x/l4x2": 1, "y/l4x2": 1}, 1.0)
    values = [0.0] * len(form.model.variables)
    for i in form.n.values():
        values[i] = 1.0
    for g in form.groups:
        values[form.r[g.key]] = 2.0 if g.service == "a" else 1.0
    for (pool_key, offer_id), i in form.y.items():  # a's 1-GPU pool on y, b's 2-GPU pool on x
        values[i] = 2.0 if (pool_key[0], offer_id) == (1, "y/l4x2") else \
            1.0 if (pool_key[0], offer_id) == (2, "x/l4x2") else 0.0
    assert all(r.lb - 1e-9 <= sum(c * values[i] for i, c in r.terms) <= r.ub + 1e-9 for r in form.model.rows)
    running = running_replicas(problem, form)
    kept, note = fewest_stops(form, get_backend("scip"), values, running, deadline=time.monotonic() + 30, cancel=None)
    assert note == "running replicas moved 3 -> 0", note
    assert sorted((a.service, a.offer_id, a.replicas) for a in form.solution_from(kept, running=running).assignments) \
        == [("a", "x/l4x2", 2), ("b", "y/l4x2", 1)]
