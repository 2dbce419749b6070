"""Reclaimed spot capacity (constraints.spot_interruptions): exact in the MIP, checked
against enumeration.

The enumerator below shares no code with the planner or with solver/survival.py: it reads
the workload dict, tries every firm and spot replica count per (service, offer), keeps the
vectors that serve the demand and still serve serve_fraction of it after every spot
replica of any one offer is lost, and prices the cheapest instances that hold them.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess

import pytest

from enumeration_support import assert_horizon_is_the_sum_of_single_hours, assert_plan_is_the_optimum, pareto
from solver.errors import InputError
from solver.evaluate import evaluate
from solver.optimize.solution import Assignment, Solution
from solver.plan import plan
from solver.workload.documents import parse_workload
from solver.compile.resolve import resolve_catalog

TOL = 1e-6


def _offer(name, region, gpus, price, spot, provider="synth"):
    offer = {"provider": provider, "name": name, "region": region, "gpu": "GA", "gpus_per_instance": gpus,
             "price_usd_per_hour": price}
    if spot is not None:
        offer["spot_price_usd_per_hour"] = spot
    return offer


def _workload(services, offers, cover, tiers=("on_demand", "spot")):
    constraints = {"pricing_tiers": list(tiers)}
    if cover is not None:
        constraints["spot_interruptions"] = cover
    return {"name": "spot-cover", "services": services, "constraints": constraints,
            "catalog": {"source": "inline", "gpus": [{"name": "GA", "memory_gib": 80}], "offers": offers}}


def _service(name, demand, rate, gpus=1, **extra):
    return {"name": name, "demand": {"items_per_min": demand},
            "profiles": [{"gpu": "GA", "items_per_min": rate, "gpus_per_replica": gpus}], **extra}


def _service_vectors(s, offers, tiers, fraction):
    """Every (firm per offer, spot per offer) replica vector of one service that serves its
    demand and survives each offer's spot loss, as Pareto-minimal GPU usage.

    Bounds: ceil(D/t) replicas of one offer and tier serve everything; more firm ones add
    nothing, and more spot ones on one offer are lost with the rest of that pool."""
    rate = s["profiles"][0]["items_per_min"]
    g = s["profiles"][0]["gpus_per_replica"]
    demand = s["demand"]["items_per_min"]
    need = fraction * demand
    top = math.ceil(demand / rate - 1e-9)
    fits = [o["gpus_per_instance"] >= g for o in offers]
    firm_ranges = [range(top + 1) if ok and "on_demand" in tiers else range(1) for ok in fits]
    spot_ranges = [range(top + 1) if ok and "spot" in tiers and o.get("spot_price_usd_per_hour") is not None
                   else range(1) for ok, o in zip(fits, offers)]
    usages = set()
    for firm in itertools.product(*firm_ranges):
        for spot in itertools.product(*spot_ranges):
            total = (sum(firm) + sum(spot)) * rate
            if total < demand - TOL:
                continue
            if fraction > 0 and not all((sum(firm) + sum(spot) - q) * rate >= need - TOL for q in spot if q):
                continue
            usages.add(tuple(r * g for r in firm) + tuple(q * g for q in spot))
    return pareto(usages)


def enumerate_optimum(w) -> float | None:
    """Services share instances of one tier: the Minkowski sum of their usage sets, each
    priced as ceil(GPUs / G_o) instances per offer and tier."""
    services, offers = w["services"], w["catalog"]["offers"]
    c = w["constraints"]
    tiers = c.get("pricing_tiers") or [c.get("pricing", "on_demand")]
    default = c.get("spot_interruptions", {}).get("serve_fraction", 0.0) if c.get("spot_interruptions") else 0.0
    combined = {tuple(0 for _ in range(2 * len(offers)))}
    for s in services:
        fraction = s["spot_interruptions"]["serve_fraction"] if "spot_interruptions" in s else default
        vectors = _service_vectors(s, offers, tiers, fraction)
        if not vectors:
            return None
        combined = set(pareto({tuple(a + b for a, b in zip(u, v)) for u in combined for v in vectors}))
    n = len(offers)
    return min(sum(math.ceil(use[i] / o["gpus_per_instance"]) * o["price_usd_per_hour"]
                   + math.ceil(use[n + i] / o["gpus_per_instance"]) * (o.get("spot_price_usd_per_hour") or 0.0)
                   for i, o in enumerate(offers))
               for use in combined)


def _random_case(seed: int):
    rng = random.Random(seed)
    offers = []
    for i in range(rng.randint(2, 3)):
        gpus = rng.choice([1, 2, 4])
        price = round(gpus * rng.uniform(0.8, 1.6), 2)
        # Some offers sell no spot (firm only: pruned like any offer); same-hardware offers
        # in one region are common, so pruning must keep distinct spot pools apart.
        spot = round(price * rng.uniform(0.25, 0.7), 2) if i == 0 or rng.random() < 0.7 else None
        offers.append(_offer(f"o{i}", rng.choice(["r1", "r2"]), gpus, price, spot))
    services = []
    for j in range(rng.randint(1, 2)):
        g = rng.choice([1, 1, 2]) if all(o["gpus_per_instance"] >= 2 for o in offers) else 1
        s = _service(f"s{j}", rng.choice([8, 20, 30, 35]), rng.choice([10, 15, 20]), gpus=g)
        if j == 1 and rng.random() < 0.3:
            s["spot_interruptions"] = {"serve_fraction": rng.choice([0.0, 0.5])}
        services.append(s)
    tiers = rng.choice([("on_demand", "spot"), ("on_demand", "spot"), ("spot",)])
    w = _workload(services, offers, {"serve_fraction": rng.choice([1.0, 0.5, 0.75])}, tiers)
    if tiers == ("spot",) and rng.random() < 0.5:
        # every offer at spot the older way: one price list, which the planner once solved
        # as a plain single hour (without the cover rows)
        del w["constraints"]["pricing_tiers"]
        w["constraints"]["pricing"] = "spot"
    return w


@pytest.mark.parametrize("seed", range(40))
def test_random_spot_cover_matches_enumeration(seed: int) -> None:
    w = _random_case(seed)
    result = assert_plan_is_the_optimum(w, enumerate_optimum(w))
    for s in result.services if result is not None else ():
        cover = s.spot_interruptions
        fraction = next((x.get("spot_interruptions") or w["constraints"]["spot_interruptions"])["serve_fraction"]
                        for x in w["services"] if x["name"] == s.name)
        if fraction == 0:
            assert cover is None
        else:
            assert cover is not None and cover.domain == "spot_pool"
            assert cover.surviving_fraction >= fraction - 1e-6


def test_cover_spreads_spot_over_two_pools_or_buys_firm() -> None:
    offers = [_offer("a", "r1", 1, 1.0, 0.3), _offer("b", "r2", 1, 1.1, 0.35)]
    # Without cover: 2 spot replicas of the cheapest pool.
    assert plan(parse_workload(_workload([_service("s", 20, 10)], offers, None))).total_price_usd_per_hour == \
        pytest.approx(0.6)
    # With full cover: 2 spot in each pool ($1.30) beats 2 on-demand ($2.00) and 1 + 1 + 1 ($1.65).
    result = plan(parse_workload(_workload([_service("s", 20, 10)], offers, {"serve_fraction": 1.0})))
    assert result.total_price_usd_per_hour == pytest.approx(1.3)
    cover = result.services[0].spot_interruptions
    assert cover.worst_domain == "the spot instances of synth/a" and cover.surviving_fraction == pytest.approx(1.0)
    # One pool only: on-demand must carry the demand the pool's loss would take.
    result = plan(parse_workload(_workload([_service("s", 20, 10)], offers[:1], {"serve_fraction": 0.5})))
    assert result.total_price_usd_per_hour == pytest.approx(1.0 + 0.3)  # 1 firm + 1 spot


@pytest.mark.parametrize("seed", range(6))
def test_periods_cost_the_sum_of_their_single_hour_optima(seed: int) -> None:
    """On-demand and spot only: nothing links the periods, so a horizon's optimum is each
    period's single-hour optimum (enumerated) times its hours."""
    result = assert_horizon_is_the_sum_of_single_hours(_random_case(200 + seed), enumerate_optimum)
    for period in result.horizon.periods if result is not None else ():
        for s in period.services:
            if s.spot_interruptions is not None:
                assert s.spot_interruptions.surviving_fraction >= s.spot_interruptions.serve_fraction - 1e-6


def test_evaluator_catches_a_plan_that_loses_too_much() -> None:
    w = parse_workload(_workload([_service("s", 20, 10)],
                                 [_offer("a", "r1", 1, 1.0, 0.3), _offer("b", "r2", 1, 1.1, 0.35)],
                                 {"serve_fraction": 1.0}))
    catalog = resolve_catalog(w)
    result = plan(w)
    config = result.services[0].assignments[0].config
    assert result.evaluation["ok"]
    # Both spot replicas in one pool: its loss leaves nothing.
    key = config.replace("synth/b", "synth/a")
    bad = Solution((), (Assignment(key, "s", "synth/a", 1, None, 2, (20.0,), 1, spot=True),),
                   spot_fleet=(("synth/a", 2),))
    report = evaluate(w, catalog, bad)
    assert any("after losing the spot instances of synth/a" in v and "0.00%" in v for v in report.violations), \
        report.violations
    assert report.spot_survival["s"].surviving_fraction == 0.0


@pytest.mark.parametrize("cover, tiers, field", [
    ({"serve_fraction": -0.1}, ("on_demand", "spot"), "constraints.spot_interruptions.serve_fraction"),
    ({"serve_fraction": 1.5}, ("on_demand", "spot"), "constraints.spot_interruptions.serve_fraction"),
    ({"serve_fraction": "1"}, ("on_demand", "spot"), "constraints.spot_interruptions.serve_fraction"),
    ({"replacement_minutes": 5}, ("on_demand", "spot"), "constraints.spot_interruptions.replacement_minutes"),
    ({"serve_fraction": 1.0}, ("on_demand",), "spot_interruptions"),
])
def test_bad_cover_names_the_field(cover, tiers, field) -> None:
    w = _workload([_service("s", 20, 10)], [_offer("a", "r1", 1, 1.0, 0.3)], cover, tiers)
    with pytest.raises(InputError) as err:
        parse_workload(w)
    assert field in str(err.value) and "To fix" in str(err.value), str(err.value)


def test_a_service_override_needs_spot_too() -> None:
    w = _workload([_service("s", 20, 10, spot_interruptions={"serve_fraction": 1.0})],
                  [_offer("a", "r1", 1, 1.0, 0.3)], None, ("on_demand",))
    with pytest.raises(InputError) as err:
        parse_workload(w)
    assert "services[0].spot_interruptions" in str(err.value) and "To fix" in str(err.value)


def test_bad_and_impossible_cover_through_the_cli(tmp_path, solver_cli) -> None:
    path = tmp_path / "w.json"
    text = json.dumps(_workload([_service("s", 20, 10)], [_offer("a", "r1", 1, 1.0, 0.3)], {"serve_fraction": 1.0}))
    path.write_text(text.replace('"serve_fraction": 1.0', '"serve_fraction": NaN'))
    run = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "spot_interruptions.serve_fraction" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    # Spot alone on one offer: no plan survives the pool's loss, and the reason says so.
    path.write_text(json.dumps(_workload([_service("s", 20, 10)], [_offer("a", "r1", 1, 1.0, 0.3)],
                                         {"serve_fraction": 1.0}, ("spot",))))
    run = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "[spot_interruptions]" in run.stdout + run.stderr and "Traceback" not in run.stderr


def test_cover_crosses_grpc_unchanged() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from grpc_support import running_server, without_timings
    from planner_client import PlannerClient

    w = _workload([_service("s", 20, 10)], [_offer("a", "r1", 1, 1.0, 0.3), _offer("b", "r2", 1, 1.1, 0.35)],
                  {"serve_fraction": 1.0})
    w["periods"] = [{"name": "day", "hours": 12}, {"name": "night", "hours": 12}]
    w["services"][0]["demand"]["profile"] = {"night": 0.5}
    local = plan(parse_workload(w)).to_dict()
    with running_server() as (_, target), PlannerClient(target) as client:
        remote = client.solve(w, explain=True)
    assert without_timings(remote)["services"] == without_timings(local)["services"]
    # --explain prices the cover: day 2 + 2 spot ($1.30) against 2 in one pool ($0.60), night
    # 1 + 1 ($0.65) against 1 ($0.30): $0.975 against $0.45 per hour of the horizon
    assert remote["spot_cover_cost"]["without_usd_per_hour"] == pytest.approx(0.45)
    assert remote["spot_cover_cost"]["extra_usd_per_hour"] == pytest.approx(0.525)
    want = {"domain": "spot_pool", "serve_fraction": 1.0, "worst_domain": "the spot instances of synth/a",
            "surviving_fraction": 1.0, "exact": True}
    assert remote["services"][0]["spot_interruptions"] == want
    assert [p["services"][0]["spot_interruptions"]["surviving_fraction"] for p in remote["periods"]] == [1.0, 1.0]


def test_a_percentile_mix_keeps_its_mix_on_every_replica_with_tiers() -> None:
    """Under a percentile SLO every replica serves the service's mix (the caps are for the
    mix). The multi-period model once routed classes apart, so the README example with
    spot allowed failed its own evaluation (exit 5)."""
    from conftest import EXAMPLES
    from solver.plan import PlanOptions
    from solver.documents.parse import load_document

    doc = load_document(EXAMPLES / "llm-platform.json")
    doc["services"] = [s for s in doc["services"] if s["name"] == "chat"]  # the one with a mix
    doc["constraints"]["pricing_tiers"] = ["on_demand", "spot"]
    doc["constraints"]["spot_interruptions"] = {"serve_fraction": 1.0}
    result = plan(parse_workload(doc), PlanOptions(verify=False))
    assert result.evaluation["ok"], result.evaluation["violations"]
    chat = next(s for s in result.services if s.name == "chat")
    for a in chat.assignments:
        short, long_ = a.routed
        assert short == pytest.approx(4 * long_, rel=1e-6)  # shares 0.8 / 0.2 on every replica
    assert chat.spot_interruptions.surviving_fraction >= 1 - 1e-6


def test_review_sweeps_spot_cover(tmp_path) -> None:
    from solver.review import parse_review, run_review

    offers = [_offer("a", "r1", 1, 1.0, 0.3), _offer("b", "r2", 1, 1.1, 0.35)]
    review = parse_review({
        "name": "spot-cover", "base": {"workload": _workload([_service("s", 20, 10)], offers, None)},
        "time_limit_per_scenario_s": 20,
        "scenarios": [{"name": "s covered", "changes": [{"spot_interruptions": {"service": "s"}}]}],
        "sweeps": [{"name": "cover", "change": "spot_interruptions", "values": [0, 0.5, 1.0]}]})
    got = {r.id: r.usd_per_hour for r in run_review(review, tmp_path, workers=1)}
    # none: 2 spot in pool a; half: 1 spot in each pool; full: 2 in each (hand-checked above)
    assert got["base"] == pytest.approx(0.6) and got["cover-0"] == pytest.approx(0.6)
    assert got["cover-0.5"] == pytest.approx(0.3 + 0.35)
    assert got["cover-1"] == pytest.approx(1.3) and got["s-covered"] == pytest.approx(1.3)


def test_a_period_mip_cut_short_is_not_called_optimal() -> None:
    """20 generated services with spot cover: SCIP needs minutes to prove this period's MIP.
    With 8 s the answer is a plan with its gap, never "optimal" (the multi-period search
    once read a leaf's unproven period plan as exact: "optimal" at $103.23 with 120 s, where
    200 s found $100.08)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from solve_scaling import generate
    from solver.plan import PlanOptions

    doc = generate(20, 0)
    doc.setdefault("constraints", {}).update({"pricing_tiers": ["on_demand", "spot"],
                                              "spot_interruptions": {"serve_fraction": 1.0}})
    doc.setdefault("solver", {})["time_limit_s"] = 8
    result = plan(parse_workload(doc), PlanOptions(verify=False))
    assert result.evaluation["ok"]
    assert result.status == "feasible", (result.status, result.total_price_usd_per_hour)
    assert result.solver.gap > 0.01 and result.solver.bound_usd_per_hour < result.total_price_usd_per_hour


def test_explain_prices_the_cover_in_the_text(tmp_path, solver_cli) -> None:
    offers = [_offer("a", "r1", 1, 1.0, 0.3), _offer("b", "r2", 1, 1.1, 0.35)]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(_workload([_service("s", 20, 10)], offers, {"serve_fraction": 1.0})))
    run = subprocess.run([solver_cli, "solve", str(path), "--no-verify", "--explain"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert "Spot cover cost: $0.7000/hour more" in run.stdout and "($0.6000/hour)" in run.stdout
    # the multi-period planner ranks no alternatives: it must not claim there were none
    assert "not computed for multi-period plans" in run.stdout
    assert "this was the only configuration" not in run.stdout
