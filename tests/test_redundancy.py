"""Failure domains (constraints.redundancy): exact in the MIP, checked against enumeration.

The enumerator below shares no code with the planner or with solver/survival.py: it reads
the workload dict, tries every instance count and every replica count per (service,
offer), and checks each single-domain loss itself (one configuration per service and
offer, so one instance of offer o holds at most G_o / g replicas of a service).
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


def _offer(name, region, gpus, price, provider="synth"):
    return {"provider": provider, "name": name, "region": region, "gpu": "GA", "gpus_per_instance": gpus,
            "price_usd_per_hour": price}


def _workload(services, offers, redundancy, **extra):
    return {"name": "red", "services": services,
            "constraints": {"redundancy": redundancy, **extra},
            "catalog": {"source": "inline", "gpus": [{"name": "GA", "memory_gib": 80}], "offers": offers}}


def _service(name, demand, rate, gpus=1, **extra):
    return {"name": name, "demand": {"items_per_min": demand},
            "profiles": [{"gpu": "GA", "items_per_min": rate, "gpus_per_replica": gpus}], **extra}


def _place(offer, domain):
    if domain == "provider":
        return offer["provider"]
    return (offer["provider"], offer["region"])


def _service_vectors(s, offers, domain, fraction):
    """Every replica vector (per offer) of one service that serves its demand and survives
    each single-domain loss, reduced to its Pareto-minimal GPU usage per offer.

    Bounds: a service never needs more than ceil(D/t) + G_o/g replicas on offer o: with
    more, dropping one keeps at least D + (G_o/g) t there, so demand and every loss (one
    instance of o takes at most G_o/g of them; another domain takes none) still hold."""
    rate = s["profiles"][0]["items_per_min"]
    g = s["profiles"][0]["gpus_per_replica"]
    demand = s["demand"]["items_per_min"]
    need = fraction * demand
    per = [o["gpus_per_instance"] // g if o["gpus_per_instance"] >= g else 0 for o in offers]
    ranges = [range(math.ceil(demand / rate - 1e-9) + m + 1) if m else range(1) for m in per]
    usages = set()
    for vec in itertools.product(*ranges):
        total = sum(vec) * rate
        if total < demand - TOL:
            continue
        if domain == "instance":
            ok = all(total - min(r, m) * rate >= need - TOL for r, m in zip(vec, per) if r)
        else:
            ok = all(sum(r for r, o in zip(vec, offers) if _place(o, domain) != place) * rate >= need - TOL
                     for place in {_place(o, domain) for o in offers})
        if ok:
            usages.add(tuple(r * g for r in vec))
    return pareto(usages)


def enumerate_optimum(w) -> float | None:
    """Services share instances: the Minkowski sum of their usage sets, and for each
    combined usage u the cheapest fleet ceil(u_o / G_o) instances per offer (replica sizes
    are powers of two dividing the instance size, so they pack exactly)."""
    services, offers = w["services"], w["catalog"]["offers"]
    red = w["constraints"]["redundancy"]
    domain, fraction = red["domain"], red.get("serve_fraction", 1.0)
    combined = {tuple(0 for _ in offers)}
    for s in services:
        vectors = _service_vectors(s, offers, domain, fraction)
        if not vectors:
            return None
        combined = set(pareto({tuple(a + b for a, b in zip(u, v)) for u in combined for v in vectors}))
    return min(sum(math.ceil(u / o["gpus_per_instance"]) * o["price_usd_per_hour"] for u, o in zip(use, offers))
               for use in combined)


def _random_case(seed: int):
    rng = random.Random(seed)
    domain = rng.choice(["instance", "region", "provider"])
    offers = []
    for i in range(rng.randint(2, 3)):
        gpus = rng.choice([1, 2, 4])
        offers.append(_offer(f"o{i}", rng.choice(["r1", "r2", "r3"]), gpus,
                             round(gpus * rng.uniform(0.8, 1.6), 2), provider=rng.choice(["p", "q"])))
    services = []
    for j in range(rng.randint(1, 2)):
        rate = rng.choice([10, 15, 20])
        # 2-GPU replicas only where every offer can hold one (the planner refuses measured
        # profiles that cannot be packed on an offer)
        g = rng.choice([1, 1, 2]) if all(o["gpus_per_instance"] >= 2 for o in offers) else 1
        services.append(_service(f"s{j}", rng.choice([8, 20, 30, 35]), rate, gpus=g))
    red = {"domain": domain, "serve_fraction": rng.choice([1.0, 0.5, 0.75])}
    return _workload(services, offers, red)


@pytest.mark.parametrize("seed", range(40))
def test_random_redundancy_matches_enumeration(seed: int) -> None:
    w = _random_case(seed)
    # Infeasible must mean no plan within the enumerator's range either (its bounds are
    # generous for these demands).
    result = assert_plan_is_the_optimum(w, enumerate_optimum(w))
    for s in result.services if result is not None else ():
        assert s.redundancy is not None and s.redundancy.surviving_fraction >= \
            w["constraints"]["redundancy"]["serve_fraction"] - 1e-6


def test_region_loss_needs_a_second_region() -> None:
    w = _workload([_service("s", 25, 10)],
                  [_offer("a1", "r1", 1, 1.0), _offer("a2", "r2", 1, 1.2), _offer("a4", "r3", 4, 3.0)],
                  {"domain": "region"})
    result = plan(parse_workload(w))
    # Without redundancy: 3 x a1 ($3). Surviving a region: 3 replicas in each of two regions.
    assert result.total_price_usd_per_hour == pytest.approx(6.0)
    assert result.services[0].redundancy.surviving_fraction == pytest.approx(1.2)
    w["constraints"]["redundancy"] = {"domain": "none"}
    assert plan(parse_workload(w)).total_price_usd_per_hour == pytest.approx(3.0)


def test_instance_loss_spreads_replicas_over_small_instances() -> None:
    # One 8-GPU instance holds all 8 replicas: losing it loses everything. Five 1-GPU
    # instances survive one loss (4 x 10 = 40).
    w = _workload([_service("s", 40, 10)], [_offer("a1", "r1", 1, 1.1), _offer("a8", "r1", 8, 8.0)],
                  {"domain": "instance"})
    result = plan(parse_workload(w))
    assert result.total_price_usd_per_hour == pytest.approx(5.5)
    assert result.services[0].redundancy.worst_domain == "one instance of synth/a1"
    # Two 8-GPU instances also survive (8 on the other), at $16: dearer. With only the
    # big offer the plan is two of them, four replicas each at least.
    w["catalog"]["offers"] = [_offer("a8", "r1", 8, 8.0)]
    result = plan(parse_workload(w))
    assert result.total_price_usd_per_hour == pytest.approx(16.0)
    assert sum(a.replicas for a in result.services[0].assignments) >= 8


def test_serve_fraction_and_per_service_override() -> None:
    offers = [_offer("a1", "r1", 1, 1.0), _offer("b1", "r2", 1, 1.0)]
    half = _workload([_service("s", 20, 10), _service("t", 20, 10, redundancy={"domain": "none"})], offers,
                     {"domain": "region", "serve_fraction": 0.5})
    result = plan(parse_workload(half))
    # s: one replica in each region survives half; t: two anywhere.
    assert result.total_price_usd_per_hour == pytest.approx(4.0)
    by = {s.name: s for s in result.services}
    assert by["t"].redundancy is None
    assert by["s"].redundancy.surviving_fraction == pytest.approx(0.5)


def test_several_classes_reroute_after_the_loss() -> None:
    # Two classes: the cheap GPU type serves only "short"; after losing region r1 the rest
    # must still serve both classes, with their own routing.
    w = {"name": "classes",
         "services": [{"name": "s", "demand": {"items_per_min": 20, "classes": [
             {"name": "short", "share": 0.5}, {"name": "long", "share": 0.5}]},
             "profiles": [{"gpu": "GA", "items_per_min": 10, "request_class": "short"},
                          {"gpu": "GA", "items_per_min": 5, "request_class": "long"}]}],
         "constraints": {"redundancy": {"domain": "region"}},
         "catalog": {"source": "inline", "gpus": [{"name": "GA", "memory_gib": 80}],
                     "offers": [_offer("a", "r1", 1, 1.0), _offer("b", "r2", 1, 1.5)]}}
    result = plan(parse_workload(w))
    assert result.evaluation["ok"]
    # Each region alone must serve 10 short + 10 long: 10/10 + 10/5 = 3 replicas of time.
    assert result.total_price_usd_per_hour == pytest.approx(3 * 1.0 + 3 * 1.5)
    assert result.services[0].redundancy.surviving_fraction == pytest.approx(1.0)


def test_evaluator_catches_a_plan_that_does_not_survive() -> None:
    w = parse_workload(_workload([_service("s", 20, 10)], [_offer("a1", "r1", 1, 1.0), _offer("b1", "r2", 1, 1.0)],
                                 {"domain": "region"}))
    catalog = resolve_catalog(w)
    result = plan(w)
    views = result.services[0].assignments
    assert {a.offer_id for a in views} == {"synth/a1", "synth/b1"}
    a = next(a for a in views if a.offer_id == "synth/a1")
    # The planner's own plan passes; the same replicas all in r1 do not.
    bad = Solution((("synth/a1", 2),), (Assignment(a.config, "s", "synth/a1", 1, a.precision, 2, (20.0,), 1),))
    report = evaluate(w, catalog, bad)
    assert any("after losing synth/r1" in v for v in report.violations), report.violations


def test_min_replicas_without_redundancy_warns_when_one_replica_carries_it() -> None:
    w = {"name": "uneven",
         "services": [{"name": "s", "min_replicas": 2, "demand": {"items_per_min": 28},
                       "profiles": [{"gpu": "GA", "items_per_min": 30}, {"gpu": "GB", "items_per_min": 1}]}],
         "catalog": {"source": "inline", "gpus": [{"name": "GA", "memory_gib": 80}, {"name": "GB", "memory_gib": 24}],
                     "offers": [_offer("a", "r1", 1, 2.0), {**_offer("b", "r1", 1, 0.2), "gpu": "GB"}]}}
    result = plan(parse_workload(w))
    assert result.total_price_usd_per_hour == pytest.approx(2.2)
    warning = [x for x in result.services[0].warnings if "is not N+1" in x]
    # losing the fast replica leaves the slow one: 1 of 28 items/min
    assert warning and "one instance of synth/a " in warning[0] and "3.5 %" in warning[0], result.services[0].warnings
    # N+1 by instance instead: two of the fast replicas ($4), and no warning.
    w["constraints"] = {"redundancy": {"domain": "instance"}}
    result = plan(parse_workload(w))
    assert result.total_price_usd_per_hour == pytest.approx(4.0)
    assert not [x for x in result.services[0].warnings if "is not N+1" in x]


@pytest.mark.parametrize("redundancy, extra, field", [
    ({"domain": "rack"}, {}, "constraints.redundancy.domain"),
    ({"domain": "region", "serve_fraction": 0}, {}, "constraints.redundancy.serve_fraction"),
    ({"domain": "region", "serve_fraction": 1.5}, {}, "constraints.redundancy.serve_fraction"),
    ({"domain": "region", "serve_fraction": "1"}, {}, "constraints.redundancy.serve_fraction"),
    ({"domain": "region", "spare": 1}, {}, "constraints.redundancy.spare"),
    ({"domain": "region"}, {"same_region": "service"}, "same_region"),
])
def test_bad_redundancy_names_the_field(redundancy, extra, field) -> None:
    w = _workload([_service("s", 20, 10)], [_offer("a1", "r1", 1, 1.0)], redundancy, **extra)
    with pytest.raises(InputError) as err:
        parse_workload(w)
    assert field in str(err.value) and "To fix" in str(err.value), str(err.value)


def test_bad_redundancy_exits_2_through_the_cli(tmp_path, solver_cli) -> None:
    w = _workload([_service("s", 20, 10, max_replicas=1)], [_offer("a1", "r1", 1, 1.0)], {"domain": "instance"})
    path = tmp_path / "w.json"
    path.write_text(json.dumps(w))
    run = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "max_replicas 1" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_nan_serve_fraction_is_refused(tmp_path, solver_cli) -> None:
    path = tmp_path / "w.json"
    text = json.dumps(_workload([_service("s", 20, 10)], [_offer("a1", "r1", 1, 1.0)], {"domain": "region"}))
    path.write_text(text.replace('"domain": "region"', '"domain": "region", "serve_fraction": NaN'))
    run = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "serve_fraction" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_one_region_only_is_infeasible_and_says_why(tmp_path, solver_cli) -> None:
    w = _workload([_service("s", 20, 10)], [_offer("a1", "r1", 1, 1.0)], {"domain": "region"})
    path = tmp_path / "w.json"
    path.write_text(json.dumps(w))
    run = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 3, run.stdout + run.stderr
    assert "redundancy" in (run.stdout + run.stderr)


def test_review_sweeps_redundancy_levels(tmp_path) -> None:
    from solver.review import parse_review, run_review

    base = _workload([_service("s", 20, 10)], [_offer("a1", "r1", 1, 1.0), _offer("b1", "r2", 1, 1.5)],
                     {"domain": "none"})
    review = parse_review({
        "name": "n-plus-one", "base": {"workload": base}, "time_limit_per_scenario_s": 20,
        "scenarios": [{"name": "by region", "changes": [{"redundancy": {"domain": "region"}}]},
                      {"name": "s by instance", "changes": [{"redundancy": {"service": "s", "domain": "instance"}}]}],
        "sweeps": [{"name": "fraction", "change": "redundancy", "fixed": {"domain": "region"},
                    "values": [0.5, 1.0]}]})
    got = {r.id: r.usd_per_hour for r in run_review(review, tmp_path, workers=1)}
    # none: 2 x a1; region: 2 + 2 in each region; half: 1 + 1; instance: 3 x a1
    assert got["base"] == pytest.approx(2.0)
    assert got["by-region"] == pytest.approx(2 * 1.0 + 2 * 1.5)
    assert got["fraction-0.5"] == pytest.approx(1.0 + 1.5)
    assert got["fraction-1"] == pytest.approx(5.0)
    assert got["s-by-instance"] == pytest.approx(3.0)


def test_redundancy_and_its_cost_cross_grpc_unchanged() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from grpc_support import running_server, without_timings
    from planner_client import PlannerClient

    w = _workload([_service("s", 25, 10)],
                  [_offer("a1", "r1", 1, 1.0), _offer("a2", "r2", 1, 1.2), _offer("a4", "r3", 4, 3.0)],
                  {"domain": "region"})
    local = plan(parse_workload(w)).to_dict()
    with running_server() as (_, target), PlannerClient(target) as client:
        remote = client.solve(w, explain=True)
    assert without_timings(remote)["services"] == without_timings(local)["services"]
    assert remote["services"][0]["redundancy"] == {"domain": "region", "serve_fraction": 1.0,
                                                   "worst_domain": "synth/r1", "surviving_fraction": 1.2,
                                                   "exact": True}
    assert remote["redundancy_cost"]["extra_usd_per_hour"] == pytest.approx(3.0)


def test_kubernetes_export_spreads_services_with_an_instance_domain() -> None:
    import yaml

    from conftest import EXAMPLES
    from solver.export import render_plan
    from solver.documents.parse import load_document

    result = plan(parse_workload(load_document(EXAMPLES / "n-plus-one.json")))
    files = render_plan(result.to_dict(), "kubernetes")
    spread = {}
    for name, text in files.items():
        for doc in yaml.safe_load_all(text):
            if isinstance(doc, dict) and doc.get("kind") == "Deployment":
                pod = doc["spec"]["template"]["spec"]
                spread[doc["metadata"]["annotations"]["fleet-planner/service"]] = pod.get("topologySpreadConstraints")
    assert spread["chat-api"] == [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                   "whenUnsatisfiable": "ScheduleAnyway",
                                   "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "chat-api"}}}]
    # a region is a cluster of its own (nothing to spread within one); none: nothing asked
    assert spread["search"] is None and spread["batch-embed"] is None


@pytest.mark.parametrize("seed", range(8))
def test_periods_cost_the_sum_of_their_single_hour_optima(seed: int) -> None:
    """On-demand prices only: periods are independent, so a horizon's optimum is each
    period's single-hour optimum (enumeration-tested above) times its hours."""
    assert_horizon_is_the_sum_of_single_hours(_random_case(100 + seed), enumerate_optimum)


def test_spot_and_reserved_tiers_keep_the_domains(tmp_path) -> None:
    offers = [{**_offer("a1", "r1", 1, 1.0), "spot_price_usd_per_hour": 0.3, "reserved_1y_price_usd_per_hour": 0.6},
              {**_offer("b1", "r2", 1, 1.2), "spot_price_usd_per_hour": 0.4}]
    w = _workload([_service("s", 20, 10)], offers, {"domain": "region"},
                  pricing_tiers=["on_demand", "spot", "reserved_1y"])
    w["periods"] = [{"name": "day", "hours": 12}, {"name": "night", "hours": 12}]
    w["services"][0]["demand"]["profile"] = {"night": 0.5}
    result = plan(parse_workload(w))
    assert result.evaluation["ok"]
    for period in result.horizon.periods:
        regions = {a.offer_id for s in period.services for a in s.assignments if a.replicas}
        assert regions == {"synth/a1", "synth/b1"}, period  # both regions in every period


def test_a_running_fleet_is_replanned_to_survive(tmp_path) -> None:
    w = _workload([_service("s", 20, 10)], [_offer("a1", "r1", 1, 1.0), _offer("b1", "r2", 1, 1.2)],
                  {"domain": "region"})
    w["current_fleet"] = [{"offer_id": "synth/a1", "instances": 2}]
    w["change_costs"] = {"add_instance_usd": 1, "remove_instance_usd": 1}
    result = plan(parse_workload(w))
    assert result.evaluation["ok"]
    assert dict((f.offer_id, f.instances) for f in result.fleet) == {"synth/a1": 2, "synth/b1": 2}


def test_place_domains_start_from_the_restricted_mip_and_keep_the_optimum(monkeypatch) -> None:
    """With a zone (region, provider) domain the cost MIP starts from the MIP restricted to
    the groups the LP and the services' own plans use (solver/optimize/restricted_start.py):
    its values are a plan of the whole model, and the proven optimum is the same without it."""
    import sys
    from pathlib import Path

    import solver.optimize.restricted_start as rs

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from solve_scaling import generate

    doc = generate(8, 0)
    doc.setdefault("constraints", {})["redundancy"] = {"domain": "zone"}
    doc["solver"] = {"time_limit_s": 120, "verify": False}
    seen = []
    inner = rs.restricted_start

    def watched(form, backend, hints, deadline, cancel):
        bounds = [(v.lb, v.ub) for v in form.model.variables]
        out = inner(form, backend, hints, deadline, cancel)
        seen.append((form.model, out, [(v.lb, v.ub) for v in form.model.variables] == bounds))
        return out

    monkeypatch.setattr(rs, "restricted_start", watched)
    with_start = plan(parse_workload(doc))
    assert seen, "the restricted start did not run"
    lm, values, restored = seen[0]
    assert restored and values is not None
    for v, x in zip(lm.variables, values):
        assert v.lb - TOL <= x <= v.ub + TOL and (not v.integer or abs(x - round(x)) <= TOL), v.name
    for r in lm.rows:
        activity = sum(c * values[i] for i, c in r.terms)
        assert r.lb - 1e-6 * max(1.0, abs(r.lb)) <= activity <= r.ub + 1e-6 * max(1.0, abs(r.ub)), r.name
    assert "restricted_start_s" in with_start.solver.timings
    monkeypatch.setattr(rs, "restricted_start", lambda *a: None)
    without = plan(parse_workload(doc))
    assert with_start.status == without.status == "optimal"
    assert with_start.total_price_usd_per_hour == pytest.approx(without.total_price_usd_per_hour, abs=1e-6)
