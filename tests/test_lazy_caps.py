"""Percentile caps computed lazily (only for configurations a plan uses) give the same
optimum as caps computed for every configuration up front, and no plan ever uses a
configuration whose cap is only a bound (solver/compile/lazy_caps.py)."""

from __future__ import annotations

import math
import random

import pytest

from solver.compile import load_caps
from solver.errors import InfeasibleError
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

MODELS = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "llama-3.2-3b"]


def _workload(seed: int) -> dict:
    rng = random.Random(seed)
    services = []
    for i in range(rng.randint(1, 3)):
        demand = {"requests_per_s": round(rng.uniform(0.5, 25), 2)}
        if rng.random() < 0.4:
            demand["classes"] = [{"name": "short", "share": 0.7, "prompt_tokens": 256, "output_tokens": 128},
                                 {"name": "long", "share": 0.3, "prompt_tokens": 2048, "output_tokens": 256}]
        else:
            demand.update(prompt_tokens=rng.choice([256, 1024]), output_tokens=rng.choice([128, 256]))
        slo = {"percentile": rng.choice([50, 90, 99])}
        slo.update(rng.choice([{"ttft_ms": rng.choice([400, 1500])}, {"tpot_ms": rng.choice([30, 60])},
                               {"ttft_ms": 1000, "tpot_ms": 50}]))
        services.append({"name": f"s{i}", "model": rng.choice(MODELS), "precisions": ["fp16", "fp8"],
                         "demand": demand, "slo": slo, "min_replicas": rng.choice([0, 1])})
    return {"name": f"lazy-{seed}", "services": services,
            "constraints": {"providers": rng.sample(["lambda", "nebius", "gcp", "aws"], 2)},
            "solver": {"time_limit_s": 60}}


def _solve(data: dict, lazy: bool, monkeypatch) -> tuple[str, float | None, dict]:
    monkeypatch.setattr(load_caps, "LAZY", lazy)
    try:
        r = plan(parse_workload(data), PlanOptions(cache=None)).to_dict()
    except InfeasibleError:
        return "infeasible", None, {}
    return r["status"], r["total_price_usd_per_hour"], r


@pytest.mark.parametrize("seed", range(6))
def test_lazy_caps_give_the_eager_optimum(seed, monkeypatch):
    data = _workload(seed)
    eager_status, eager_cost, _ = _solve(data, False, monkeypatch)
    lazy_status, lazy_cost, lazy = _solve(data, True, monkeypatch)
    assert lazy_status == eager_status
    if eager_cost is None:
        return
    assert lazy_cost == pytest.approx(eager_cost, rel=1e-9, abs=1e-9)
    assert lazy["evaluation"]["ok"]
    for svc in lazy["services"]:
        for a in svc["assignments"]:
            # every replica is sized by its exact cap, and holds its percentile there
            assert a["at_load"]["meets_slo"], (svc["name"], a)


def test_a_service_that_misses_its_percentile_at_any_load_is_infeasible_in_both_modes(monkeypatch):
    data = {"name": "tight", "services": [{
        "name": "chat", "model": "llama-3.1-8b", "demand": {"requests_per_s": 2, "prompt_tokens": 4000,
                                                             "output_tokens": 64},
        "slo": {"ttft_ms": 5, "percentile": 99}}], "constraints": {"providers": ["lambda"]}}
    assert _solve(data, False, monkeypatch)[0] == "infeasible"
    assert _solve(data, True, monkeypatch)[0] == "infeasible"


def test_a_budget_below_the_optimum_names_the_same_exact_cheapest_fleet_in_both_modes(monkeypatch):
    data = _workload(3)
    cost = _solve(data, True, monkeypatch)[1]
    data["constraints"]["budget_usd_per_hour"] = round(cost * 0.9, 4)
    messages = []
    for lazy in (False, True):
        monkeypatch.setattr(load_caps, "LAZY", lazy)
        with pytest.raises(InfeasibleError) as err:
            plan(parse_workload(data), PlanOptions(cache=None))
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    assert f"${cost:.4f}/hour" in messages[1]


# ---------------------------------------------------------------- larger random workloads
GPUS = ["H100-SXM", "L4", "A100-80GB", "L40S", "H200", "A10G"]


def _constrained(seed: int) -> dict:
    """Several services (pooled models from ~300 configurations on) with what the loop's
    shortcuts must respect: several classes, min/max replicas, GPU and offer quotas, a
    budget, same-region rules, bursty arrivals, an error band."""
    rng = random.Random(1000 + seed)
    services = []
    for i in range(rng.randint(3, 6)):
        demand = {"requests_per_s": round(rng.uniform(0.3, 30), 2), "arrival_cv": rng.choice([1.0, 1.0, 1.5])}
        if rng.random() < 0.35:
            demand["classes"] = [{"name": "short", "share": 0.7, "prompt_tokens": 256, "output_tokens": 128},
                                 {"name": "long", "share": 0.3, "prompt_tokens": 2048, "output_tokens": 256}]
        else:
            demand.update(prompt_tokens=rng.choice([128, 512, 1024, 2048]), output_tokens=rng.choice([64, 128, 256]))
        slo = {"percentile": rng.choice([90, 99, 99])}
        slo.update(rng.choice([{"ttft_ms": rng.choice([500, 1500, 3000])}, {"tpot_ms": rng.choice([30, 50, 80])},
                               {"ttft_ms": rng.choice([1000, 2000]), "tpot_ms": rng.choice([40, 60])}]))
        svc = {"name": f"s{i}", "model": rng.choice(MODELS + ["llama-2-13b"]), "precisions": ["fp16", "fp8"],
               "demand": demand, "slo": slo, "min_replicas": rng.choice([0, 1, 1, 2, 3])}
        if rng.random() < 0.2:
            svc["max_replicas"] = svc["min_replicas"] + rng.randint(4, 12)
        if rng.random() < 0.2:
            svc["size_with_error_band"] = True
        if rng.random() < 0.15:
            del svc["slo"]["percentile"]  # a service without a percentile beside the others
        services.append(svc)
    constraints = {"providers": rng.sample(["lambda", "nebius", "gcp", "aws", "runpod", "cudo"], rng.randint(2, 4))}
    if rng.random() < 0.5:
        constraints["gpu_quotas"] = {g: rng.choice([1, 2, 4, 8]) for g in rng.sample(GPUS, 2)}
    if rng.random() < 0.3:
        constraints["same_region"] = "service"
    if rng.random() < 0.3:
        constraints["headroom"] = 0.2
    # Simulation in the loop is left out: it checks whichever of several equally cheap plans
    # each mode picks, so it could move the two apart (the cap-lowering tests below stand in
    # for it).
    return {"name": f"lazy-c{seed}", "services": services, "constraints": constraints,
            "solver": {"time_limit_s": 120, "verify": False}}


@pytest.mark.parametrize("seed", range(3))
def test_lazy_caps_give_the_eager_optimum_with_constraints(seed, monkeypatch):
    """The same optimum (or the same infeasibility) as every cap computed up front, on
    workloads with several classes, min/max replicas, quotas, regions and error bands; then
    again with a budget just above that optimum (a row the loop's shortcuts must respect)."""
    data = _constrained(seed)
    eager_status, eager_cost, _ = _solve(data, False, monkeypatch)
    lazy_status, lazy_cost, lazy = _solve(data, True, monkeypatch)
    assert lazy_status == eager_status
    if eager_cost is None:
        return
    assert lazy_cost == pytest.approx(eager_cost, rel=1e-9, abs=1e-6)
    assert lazy["evaluation"]["ok"]
    for svc in lazy["services"]:
        for a in svc["assignments"]:
            if a["at_load"] is not None and svc["name"] in {s["name"] for s in data["services"]
                                                           if "percentile" in s["slo"]}:
                assert a["at_load"]["meets_slo"], (svc["name"], a)
    data["constraints"]["budget_usd_per_hour"] = round(eager_cost * 1.0001 + 1e-3, 4)
    assert _solve(data, True, monkeypatch)[1] == pytest.approx(eager_cost, rel=1e-9, abs=1e-6)


def test_the_loop_never_keeps_a_bound_below_the_cap():
    """Every bound the loop uses is at least the cap it stands for: the first bound, then
    the saturation bound (load_caps.saturation_cap_bound relies on max_rate_for_slo never
    returning more than DEFAULT_MAX_UTILIZATION x saturation), and a probe's (a rate where
    the model misses a bound: no higher rate passes, the premise of the cap's search)."""
    from solver.compile.candidates import build_problem
    from solver.compile.load_caps import _first_bound, _llm_cap, cap_key, probe_cap_bound, saturation_cap_bound
    from solver.compile.resolve import resolve_catalog

    workload = parse_workload(_constrained(3))
    problem = build_problem(workload, resolve_catalog(workload), None)
    pending = list({cap_key(c.pending_cap): c.pending_cap for c in problem.configs
                    if c.pending_cap is not None}.items())
    assert pending
    rng = random.Random(0)
    for key, p in rng.sample(pending, min(len(pending), 40)):
        replica, mix, _, _, cv, _, slow, _ = p
        cap = _llm_cap(*key)
        assert saturation_cap_bound(key) >= cap
        assert _first_bound(replica, slow, mix, cv) >= saturation_cap_bound(key)
        # A probe's bound (one evaluation of the model) is never below the cap either.
        for f in (0.25, 0.5, 0.8, 0.95, 1.0, 1.02, 1.1):
            b = probe_cap_bound(key, cap * f)
            assert b is None or b >= cap, (f, b, cap)


# ---------------------------------------------------------------- the event: caps fall after a solve
def _static(data: dict, lazy: bool, monkeypatch):
    from solver.caches import clear_all
    from solver.compile.candidates import build_problem
    from solver.compile.resolve import resolve_catalog

    monkeypatch.setattr(load_caps, "LAZY", lazy)
    clear_all()
    workload = parse_workload(data)
    catalog = resolve_catalog(workload)
    return build_problem(workload, catalog, None), catalog


@pytest.mark.parametrize("seed", [0, 2, 5])
def test_a_cap_lowered_after_a_solve_gives_the_eager_optimum_of_the_lowered_problem(seed, monkeypatch):
    """What a simulator check will do: solve, lower the caps of configurations the plan
    uses (lazy_caps.lower_caps), solve the returned problem again. The answer is the optimum
    with those caps lowered - the same as lowering them in the eagerly capped problem - and
    never routes a lowered configuration more than its new cap."""
    from solver.compile.lazy_caps import lower_caps, resolve_caps
    from solver.solve_stage import solve_static

    data = _workload(seed)
    problem, catalog = _static(data, True, monkeypatch)
    problem, solution, outcome = solve_static(problem, catalog, PlanOptions(cache=None))
    assert outcome.status == "optimal"
    by_key = {c.key: c for c in problem.configs}
    first = solution.assignments[0]
    lowered = {first.config_key: by_key[first.config_key].throughput * 0.6}
    problem2 = lower_caps(problem, lowered, reason="misses its SLO in the simulator")
    assert problem2.pending_config_keys <= problem.pending_config_keys
    problem2, solution2, outcome2 = solve_static(problem2, catalog, PlanOptions(cache=None))
    cost = sum(problem2.offer(o).price_usd_per_hour * n for o, n in solution2.fleet)
    assert cost >= sum(problem.offer(o).price_usd_per_hour * n for o, n in solution.fleet) - 1e-6
    caps = {c.key: c for c in problem2.configs}
    for a in solution2.assignments:
        c = caps[a.config_key]
        assert c.pending_cap is None
        assert sum(r / k.throughput for r, k in zip(a.routed, c.classes) if r > 0) <= a.replicas * (1 + 1e-6)
        if a.config_key in lowered:
            assert c.throughput <= lowered[a.config_key] + 1e-12
    # The reference: every cap computed up front, nothing pruned on the strength of a cap that
    # is lowered afterwards (FLEET_EAGER_CAPS=1 prunes while building candidates, so a
    # configuration dominated by the lowered one would be missing there).
    eager, catalog = _static(data, True, monkeypatch)
    eager = lower_caps(resolve_caps(eager), lowered, reason="misses its SLO in the simulator")
    assert not eager.pending_config_keys
    eager, solution3, _ = solve_static(eager, catalog, PlanOptions(cache=None))
    assert cost == pytest.approx(sum(eager.offer(o).price_usd_per_hour * n for o, n in solution3.fleet),
                                 rel=1e-9, abs=1e-6)


def test_a_cap_lowered_to_zero_rules_the_configuration_out(monkeypatch):
    from solver.compile.lazy_caps import lower_caps
    from solver.solve_stage import solve_static

    problem, catalog = _static(_workload(1), True, monkeypatch)
    problem, solution, _ = solve_static(problem, catalog, PlanOptions(cache=None))
    key = solution.assignments[0].config_key
    after = lower_caps(problem, {key: 0.0}, reason="misses its SLO in the simulator")
    assert key not in {c.key for c in after.configs}
    assert any(r.reason == "misses its SLO in the simulator" for r in after.rejections)
    _, solution2, _ = solve_static(after, catalog, PlanOptions(cache=None))
    assert key not in {a.config_key for a in solution2.assignments}


def test_lowering_nothing_or_raising_changes_nothing(monkeypatch):
    from solver.compile.lazy_caps import apply_caps, lower_caps

    problem, _ = _static(_workload(1), True, monkeypatch)
    assert apply_caps(problem, {}) is problem
    exact = next(c for c in problem.configs if c.pending_cap is None) if any(
        c.pending_cap is None for c in problem.configs) else None
    if exact is not None:
        assert lower_caps(problem, {exact.key: exact.throughput * 2}).configs == problem.configs
    assert lower_caps(problem, {"no such configuration": 1.0}).configs == problem.configs


@pytest.mark.parametrize("seed", [1, 5, 6])
def test_a_configuration_left_out_is_in_no_plan_cheaper_than_the_known_one(seed, monkeypatch):
    """The argument behind lazy_caps.without_dearer, checked directly: with every cap exact,
    each configuration whose floor (ServiceFloor.extra) is above the slack left by the
    optimum is forced into the MIP (one replica at least); that MIP costs more than the
    optimum, or has no plan."""
    from solver.compile.lazy_caps import service_floors
    from solver.optimize.backends import SolveOptions, get_backend
    from solver.optimize.formulation import build
    from solver.solve_stage import solve_static

    data = _constrained(seed)
    problem, catalog = _static(data, False, monkeypatch)
    problem, solution, outcome = solve_static(problem, catalog, PlanOptions(cache=None))
    assert outcome.status == "optimal"
    upper = sum(problem.offer(o).price_usd_per_hour * n for o, n in solution.fleet)
    floors = service_floors(problem)
    slack = upper - sum(f.bound for f in floors.values())
    assert slack >= -1e-6
    extra = {c.key: floors[c.service].extra(c, math.inf) for c in problem.configs}
    # The ones nearest the edge: where an error in the floors would show.
    out = sorted((c for c in problem.configs if extra[c.key] > slack + 1e-7), key=lambda c: extra[c.key])[:6]
    assert out, "nothing to check"
    from solver.optimize import formulation

    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 10**9)  # a variable per configuration
    form = build(problem, bounds=False)
    backend = get_backend("scip")
    for c in out:
        model = form.model
        forced = [(form.r[form.group_of[c.key].key], 1.0)]  # at least one replica of c
        rows = list(model.rows)
        model.row("forced", forced, lb=1.0)
        try:
            got = backend.solve(model, SolveOptions(time_limit_s=60))
        finally:
            model.rows[:] = rows
        assert got.status in ("optimal", "infeasible"), got.status
        if got.status == "optimal":
            assert got.objective > upper + 1e-7, (c.key, got.objective, upper)
