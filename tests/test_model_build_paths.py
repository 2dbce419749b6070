"""Model building's shortcuts against the straightforward path, model for model.

* When every configuration has a positive replica bound (every service has something to
  serve, no offer limit below one replica), `build` groups the list as it is and bounds
  each group from its first member's need: the same model, variable for variable and row
  for row (the ModelProto's bytes), and the same indices as filtering configuration by
  configuration first. Offer limits, zero demand, repeated keys and same_region take or
  leave the shortcut as they must.
* The grouping and the indices derived from it are remembered by the identity of the
  configurations; a model never shares its indices with the memo or another model.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from solver.caches import clear_all
from solver.compile.candidates import build_problem
from solver.compile.resolve import resolve_catalog
from solver.optimize import formulation
from solver.optimize.backends.mathopt_backend import MathOptBackend
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from solve_scaling import generate  # noqa: E402


def _problem(n: int, seed: int, constraints: dict | None = None):
    doc = generate(n, seed)
    doc.setdefault("constraints", {}).update(constraints or {})
    workload = parse_workload(doc)
    return build_problem(workload, resolve_catalog(workload), cache=None)


def _signature(f: formulation.Formulation):
    return (MathOptBackend._translate(f.model).SerializeToString(deterministic=True),
            [c.key for c in f.configs], [g.key for g in f.groups], [p.key for p in f.pools], f.n, f.r, f.y, f.x, f.z,
            f.cost_terms, f.gpu_terms, {k: [g.key for g in v] for k, v in f.by_service.items()},
            {k: g.key for k, g in f.group_of.items()}, {k: q.key for k, q in f.pool_of.items()}, f.lower_bound,
            {k: (b.terms, b.bound, b.replicas, b.routed) for k, b in f.service_bounds.items()})


def _both(problem, configs, monkeypatch, **kw):
    """(the model as built, the model built on the straightforward path), caches emptied before each."""
    clear_all()
    taken = []
    real = formulation._group_need_bound

    def spy(*a):
        taken.append(True)
        return real(*a)

    with monkeypatch.context() as m:
        m.setattr(formulation, "_group_need_bound", spy)
        fast = formulation.build(problem, configs, **kw)
    clear_all()
    with monkeypatch.context() as m:
        m.setattr(formulation, "_room_for_one_replica", lambda configs, p: False)
        slow = formulation.build(problem, configs, **kw)
    clear_all()
    return fast, slow, bool(taken)


@pytest.mark.parametrize("pooled", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_shortcut_builds_the_straightforward_model(seed, pooled, monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0 if pooled else 10**9)
    problem = _problem(12, seed)
    fast, slow, shortcut = _both(problem, None, monkeypatch)
    assert shortcut
    assert _signature(fast) == _signature(slow)
    # A sub-list (the planner's price filter), in another order.
    configs = list(reversed(problem.configs))[::2]
    fast, slow, shortcut = _both(problem, configs, monkeypatch)
    assert shortcut
    assert _signature(fast) == _signature(slow)


@pytest.mark.parametrize("same_region", ["service", "fleet"])
def test_same_region_models_are_the_same(same_region, monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    problem = _problem(8, 2, {"same_region": same_region})
    fast, slow, shortcut = _both(problem, None, monkeypatch)
    assert shortcut
    assert _signature(fast) == _signature(slow)


def test_offer_limits_bound_groups_and_a_zero_limit_drops_configurations(monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    problem = _problem(10, 3)
    offers = sorted({c.offer_id for c in problem.configs})
    # Limits that allow replicas: the shortcut, with group bounds capped by availability.
    limited = replace(problem, offer_limits={o: 1 + i % 3 for i, o in enumerate(offers)})
    fast, slow, shortcut = _both(limited, None, monkeypatch)
    assert shortcut
    assert _signature(fast) == _signature(slow)
    # One offer with none available: its configurations are dropped (the straightforward path).
    zero = replace(problem, offer_limits={offers[0]: 0, offers[1]: 2})
    fast, slow, shortcut = _both(zero, None, monkeypatch)
    assert not shortcut
    assert _signature(fast) == _signature(slow)
    assert not any(c.offer_id == offers[0] for c in fast.configs)
    assert any(c.offer_id == offers[0] for c in problem.configs)


def test_a_service_with_nothing_to_serve_takes_the_straightforward_path(monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    problem = _problem(10, 4)
    idle = problem.services[0]
    idle = replace(idle, class_demand=tuple(0.0 for _ in idle.class_demand), min_replicas=0)
    zero = replace(problem, services=(idle,) + tuple(problem.services[1:]))
    assert not formulation._NeedBounds(zero).all_positive
    fast, slow, shortcut = _both(zero, None, monkeypatch)
    assert not shortcut
    assert _signature(fast) == _signature(slow)
    assert not any(c.service == idle.name for c in fast.configs)


def test_repeated_keys_take_the_straightforward_path(monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    problem = _problem(8, 5)
    configs = list(problem.configs) + [problem.configs[3], replace(problem.configs[7])]
    fast, slow, shortcut = _both(problem, configs, monkeypatch)
    assert not shortcut
    assert _signature(fast) == _signature(slow)
    assert len(fast.configs) == len(problem.configs)


def test_models_never_share_indices_with_the_memo(monkeypatch):
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    problem = _problem(8, 6)
    clear_all()
    first = formulation.build(problem)
    reference = _signature(first)
    name = next(iter(first.by_service))
    first.by_service[name].append(first.groups[0])
    first.group_of.clear()
    first.pool_of.clear()
    first.groups.clear()
    first.pools.clear()
    second = formulation.build(problem)  # the remembered grouping
    assert _signature(second) == reference
    assert second.pool_of == {g.key: pool for pool in second.pools for g in pool.groups}
    clear_all()


@pytest.mark.parametrize("pool, with_region", [(True, False), (False, False), (True, True)])
def test_groups_are_taken_from_the_last_grouping_only_for_the_same_objects(pool, with_region):
    problem = _problem(10, 7)
    region = {o.id: formulation.region_of(o) for o in problem.offers} if with_region else None
    configs = list(problem.configs)

    def fresh(cs):
        formulation._LAST_GROUPS = {}
        return formulation._group_configs(cs, pool, region)

    first = formulation._group_configs(configs, pool, region)
    # An equal configuration that is another object: its group is made anew, with it.
    k = next(i for i, c in enumerate(configs) if sum(c2.replica_kind == c.replica_kind for c2 in configs) > 1)
    copy = replace(configs[k])
    other = configs[:k] + [copy] + configs[k + 1:]
    second = formulation._group_configs(other, pool, region)
    assert second == fresh(other)
    mine = next(g for g in second[0] if any(c is copy for c in g.configs))
    assert not any(c is configs[k] for g in second[0] for c in g.configs)
    assert all(mine is not g for g in first[0])
    # Every other group is the same object as before.
    before = {id(g) for g in first[0]}
    assert sum(id(g) in before for g in second[0]) == len(second[0]) - 1
    # A list in another order groups as a fresh grouping does.
    assert formulation._group_configs(list(reversed(other)), pool, region) == fresh(list(reversed(other)))
    clear_all()
    assert formulation._LAST_GROUPS == {}
