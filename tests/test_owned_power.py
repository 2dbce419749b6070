"""Owned hardware, site power caps, and power and energy in plans (docs/owned-and-power.md).

Optimality is checked against brute force over every instance count of the one owned
and one or two cloud offers of small workloads (measured profiles: no performance model,
so each case solves in milliseconds); the enumerator shares no code with the planner.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import subprocess

import pytest

from conftest import EXAMPLES
from solver.catalog.owned import with_owned
from solver.compile.resolve import resolve_catalog
from solver.errors import InfeasibleError
from solver.evaluate import evaluate
from solver.optimize.solution import Assignment, Solution
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

FAST = PlanOptions(prefetch_at_load=False, verify=False)


def workload(demand: float, owned: list[dict], sites: list[dict], offers: list[dict], rate_per_gpu: float = 10.0,
             **extra) -> dict:
    """One service served at `rate_per_gpu` requests/s per H100 (a measured profile,
    1 GPU per replica), inline cloud offers, owned H100s."""
    return {"name": "owned-case",
            "services": [{"name": "svc", "demand": {"requests_per_s": demand},
                          "profiles": [{"gpu": "H100-SXM", "gpus_per_replica": 1, "requests_per_s": rate_per_gpu}]}],
            "catalog": {"offers": offers}, "owned": owned, "sites": sites, "solver": {"time_limit_s": 60}, **extra}


def cloud(name: str, gpus: int, price: float) -> dict:
    return {"provider": "cloud", "name": name, "region": "r1", "gpu": "H100-SXM", "gpus_per_instance": gpus,
            "price_usd_per_hour": price}


def brute_force(demand: float, rate: float, owned: dict, site: dict, offers: list[dict]) -> float | None:
    """The cheapest fleet by enumeration: every count of owned servers and cloud
    instances; feasible when the GPUs serve the demand (1-GPU replicas fill any instance)
    and the owned servers' power fits the site's cap. Owned servers cost their energy."""
    per_gpu_kw = owned.get("power_kw_per_gpu", 0.7)  # H100-SXM board power: 700 W
    server_kw = owned["gpus_per_instance"] * per_gpu_kw + owned.get("host_power_kw_per_instance", 0.0)
    servers = owned["count"] // owned["gpus_per_instance"]
    need_gpus = math.ceil(demand / rate - 1e-9)
    best = None
    ranges = [range(servers + 1)] + [range(need_gpus // o["gpus_per_instance"] + 2) for o in offers]
    for counts in itertools.product(*ranges):
        n_owned, rest = counts[0], counts[1:]
        if site.get("power_cap_kw") is not None and n_owned * server_kw > site["power_cap_kw"] + 1e-9:
            continue
        gpus = n_owned * owned["gpus_per_instance"] + sum(n * o["gpus_per_instance"] for n, o in zip(rest, offers))
        if gpus * rate < demand - 1e-9:
            continue
        cost = n_owned * server_kw * site["electricity_usd_per_kwh"] + sum(
            n * o["price_usd_per_hour"] for n, o in zip(rest, offers))
        best = cost if best is None or cost < best else best
    return best


def random_case(rng: random.Random) -> tuple[dict, tuple]:
    per_server = rng.choice([2, 4, 8])
    owned = {"gpu": "H100-SXM", "count": per_server * rng.randint(1, 3), "site": "dc1", "gpus_per_instance": per_server,
             "amortised_cost_usd_per_gpu_hour": round(rng.uniform(0, 5), 2)}
    if rng.random() < 0.5:
        owned["power_kw_per_gpu"] = round(rng.uniform(0.3, 1.2), 3)
    if rng.random() < 0.3:
        owned["host_power_kw_per_instance"] = round(rng.uniform(0.2, 3.0), 2)
    server_kw = per_server * owned.get("power_kw_per_gpu", 0.7) + owned.get("host_power_kw_per_instance", 0.0)
    # Caps from below one server to above all of them, so that they bind or not.
    site = {"name": "dc1", "electricity_usd_per_kwh": round(rng.uniform(0.05, 1.5), 3),
            "power_cap_kw": round(server_kw * rng.uniform(0.5, owned["count"] / per_server + 0.5), 3)}
    offers = [cloud("h100x1", 1, round(rng.uniform(1.5, 4.0), 3))]
    if rng.random() < 0.5:
        offers.append(cloud("h100x2", 2, round(rng.uniform(2.5, 7.0), 3)))
    demand = round(rng.uniform(5, 120), 2)
    return workload(demand, [owned], [site], offers), (demand, 10.0, owned, site, offers)


@pytest.mark.parametrize("seed", range(24))
def test_the_plan_is_as_cheap_as_brute_force_over_owned_and_cloud_with_a_power_cap(seed):
    w, args = random_case(random.Random(seed))
    best = brute_force(*args)
    assert best is not None  # the cloud can always take the rest
    result = plan(parse_workload(w), FAST)
    assert result.status == "optimal" and result.evaluation["ok"], result.evaluation
    assert result.total_price_usd_per_hour == pytest.approx(best, abs=1e-6), (seed, w)
    owned, site = args[2], args[3]
    # The plan's site row is the owned servers it runs, at the kW the input states.
    servers = dict((f.offer_id, f.instances) for f in result.fleet).get(
        f"owned/dc1-H100-SXM-{owned['gpus_per_instance']}gpu", 0)
    server_kw = owned["gpus_per_instance"] * owned.get("power_kw_per_gpu", 0.7) + owned.get(
        "host_power_kw_per_instance", 0.0)
    assert result.sites[0].power_kw == pytest.approx(servers * server_kw)
    assert result.sites[0].power_kw <= site["power_cap_kw"] + 1e-9
    assert result.owned_amortised_usd_per_hour == pytest.approx(owned["count"] * owned["amortised_cost_usd_per_gpu_hour"])


def test_a_binding_cap_moves_demand_to_the_cloud_and_amortised_cost_never_changes_the_plan():
    owned = {"gpu": "H100-SXM", "count": 16, "site": "dc1"}
    site = {"name": "dc1", "electricity_usd_per_kwh": 0.1, "power_cap_kw": 6.0}  # one 8 x 700 W server (5.6 kW)
    offers = [cloud("h100x1", 1, 2.5)]
    loose = plan(parse_workload(workload(150, [owned], [dict(site, power_cap_kw=20.0)], offers)), FAST)
    capped = plan(parse_workload(workload(150, [owned], [site], offers)), FAST)
    assert {f.offer_id: f.instances for f in loose.fleet} == {"owned/dc1-H100-SXM-8gpu": 2}
    assert {f.offer_id: f.instances for f in capped.fleet} == {"owned/dc1-H100-SXM-8gpu": 1, "cloud/h100x1": 7}
    assert capped.total_price_usd_per_hour == pytest.approx(5.6 * 0.1 + 7 * 2.5)
    # A sunk cost: any amortised rate gives the same fleet and the same marginal cost,
    # even one far above the cloud's price.
    for rate in (0.0, 50.0):
        again = plan(parse_workload(workload(150, [dict(owned, amortised_cost_usd_per_gpu_hour=rate)], [site], offers)),
                     FAST)
        assert [(f.offer_id, f.instances) for f in again.fleet] == [(f.offer_id, f.instances) for f in capped.fleet]
        assert again.total_price_usd_per_hour == capped.total_price_usd_per_hour
        assert again.owned_amortised_usd_per_hour == pytest.approx(16 * rate)


def test_power_and_energy_are_reported_per_fleet_line_service_and_period():
    owned = {"gpu": "H100-SXM", "count": 8, "site": "dc1"}
    site = {"name": "dc1", "electricity_usd_per_kwh": 0.2, "power_cap_kw": 6.0}
    w = workload(100, [owned], [site], [cloud("h100x1", 1, 2.5)],
                 periods=[{"name": "night", "hours": 10}, {"name": "day", "hours": 14}])
    w["services"][0]["demand"]["profile"] = {"night": 0.5}
    result = plan(parse_workload(w), FAST)
    periods = result.horizon.periods
    # night: 50 req/s = 5 GPUs -> the owned server (5.6 kW); day: 100 = 10 GPUs -> it + 2 cloud GPUs.
    assert [p.power_kw for p in periods] == pytest.approx([5.6, 5.6 + 2 * 0.7])
    assert [p.energy_kwh for p in periods] == pytest.approx([56.0, 7.0 * 14])
    assert result.energy_kwh == pytest.approx(56.0 + 98.0)
    assert result.power_kw == pytest.approx(5.6)  # the first period's fleet
    assert result.fleet[0].power_kw_per_instance == pytest.approx(5.6)
    # An LLM service: kWh per million output tokens at demand = its GPUs' kW / tokens per hour.
    llm = {"name": "llm", "services": [{"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp8"],
                                        "demand": {"requests_per_s": 4, "prompt_tokens": 256, "output_tokens": 100},
                                        "slo": {"tpot_ms": 60}}],
           "constraints": {"gpu_types": ["L4"]}}
    r = plan(parse_workload(llm), FAST).services[0]
    gpus = sum(a.replicas * a.gpus_per_replica for a in r.assignments)
    assert r.power_kw == pytest.approx(gpus * 0.072)  # L4 board power: 72 W
    assert r.energy_kwh_per_million_tokens == pytest.approx(r.power_kw / (4 * 100 * 3600) * 1e6, rel=1e-5)


def _solution(result) -> Solution:
    return Solution(tuple((f.offer_id, f.instances) for f in result.fleet),
                    tuple(Assignment(a.config, s.name, a.offer_id, a.gpus_per_replica, a.precision, a.replicas,
                                     tuple(a.routed), a.instances_per_replica)
                          for s in result.services for a in s.assignments))


def test_the_evaluator_catches_a_violated_cap_and_a_mispriced_owned_server_from_the_raw_input():
    owned = {"gpu": "H100-SXM", "count": 16, "site": "dc1"}
    site = {"name": "dc1", "electricity_usd_per_kwh": 0.1, "power_cap_kw": 12.0}
    w = parse_workload(workload(150, [owned], [site], [cloud("h100x1", 1, 2.5)]))
    result = plan(w, FAST)
    assert dict((f.offer_id, f.instances) for f in result.fleet)["owned/dc1-H100-SXM-8gpu"] == 2
    sol = _solution(result)
    catalog = resolve_catalog(w)
    assert evaluate(w, catalog, sol).ok
    # The same plan against the raw input with a tighter cap: 2 x 5.6 kW > 6 kW.
    tight = parse_workload(workload(150, [owned], [dict(site, power_cap_kw=6.0)], [cloud("h100x1", 1, 2.5)]))
    report = evaluate(tight, resolve_catalog(tight), sol)
    assert any("site dc1" in v and "11.2" in v and "power_cap_kw 6" in v for v in report.violations), report.violations
    # A planner that priced the owned servers wrongly (here: for free) is caught too.
    free = type(catalog)(catalog.gpus, tuple(o.with_price(0.0) if o.provider == "owned" else o for o in catalog.offers),
                         catalog.description)
    assert any("priced $0.000000/hour" in v for v in evaluate(w, free, sol).violations)
    # And a plan running more servers than are owned.
    more = Solution(tuple((o, n + 1 if o.startswith("owned/") else n) for o, n in sol.fleet), sol.assignments)
    assert any("owns 16 GPUs = 2 servers" in v for v in evaluate(w, catalog, more).violations)


def test_infeasible_because_of_a_power_cap_names_the_site():
    owned = [{"gpu": "H100-SXM", "count": 16, "site": "dc1"}, {"gpu": "H100-SXM", "count": 8, "site": "dc2"}]
    sites = [{"name": "dc1", "electricity_usd_per_kwh": 0.1, "power_cap_kw": 6.0},
             {"name": "dc2", "electricity_usd_per_kwh": 0.3, "power_cap_kw": 10.0}]
    # 240 req/s = 24 GPUs: all three servers, but dc1's cap allows one of its two.
    w = workload(240, owned, sites, [cloud("h100x1", 1, 2.5)], constraints={"providers": ["owned"]})
    with pytest.raises(InfeasibleError) as err:
        plan(parse_workload(w), FAST)
    reasons = err.value.reasons
    assert [r.constraint for r in reasons] == ["power[dc1]"], reasons
    assert "6 kW" in reasons[0].message and "11.2 kW" in reasons[0].message
    # Without the provider filter, the cloud takes the rest: a plan, not an error.
    w.pop("constraints")
    assert plan(parse_workload(w), FAST).evaluation["ok"]


def test_multi_period_plans_keep_the_cap_in_every_period():
    owned = {"gpu": "H100-SXM", "count": 16, "site": "dc1"}
    site = {"name": "dc1", "electricity_usd_per_kwh": 0.1, "power_cap_kw": 6.0}
    w = workload(150, [owned], [site], [cloud("h100x1", 1, 2.5)],
                 periods=[{"name": "a", "hours": 8}, {"name": "b", "hours": 16}])
    w["services"][0]["demand"]["profile"] = {"a": 0.4}
    result = plan(parse_workload(w), FAST)
    for p in result.horizon.periods:
        owned_running = sum(f.instances for f in p.fleet if f.offer_id.startswith("owned/"))
        assert owned_running <= 1
    # a: 60 req/s = 6 GPUs on the owned server; b: 150 = 15 GPUs, 8 owned + 7 cloud.
    costs = [p.total_price_usd_per_hour for p in result.horizon.periods]
    assert costs == pytest.approx([0.56, 0.56 + 7 * 2.5])
    assert result.horizon.horizon_cost_usd == pytest.approx(8 * 0.56 + 16 * (0.56 + 17.5))


@pytest.mark.parametrize("change, field", [
    (lambda w: w["owned"][0].update(count=-8), "owned[0].count"),
    (lambda w: w["owned"][0].update(power_kw_per_gpu=float("nan")), "owned[0].power_kw_per_gpu"),
    (lambda w: w["owned"][0].update(site="dc9"), "owned[0].site"),
    (lambda w: w["owned"][0].update(gpu="H900"), "owned[0].gpu"),
    (lambda w: w["owned"][0].update(count=12), "owned[0]"),
    (lambda w: w["sites"][0].update(power_cap_kw=-1), "sites[0].power_cap_kw"),
])
def test_bad_owned_input_exits_2_naming_the_field(tmp_path, solver_cli, change, field):
    w = workload(10, [{"gpu": "H100-SXM", "count": 8, "site": "dc1"}],
                 [{"name": "dc1", "electricity_usd_per_kwh": 0.1}], [cloud("h100x1", 1, 2.5)])
    change(w)
    path = tmp_path / "w.json"
    path.write_text(json.dumps(w))  # NaN is written as the bare token NaN, as some JSON writers do
    proc = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    # The document check names NaN from the document's root ("workload."), the schema from the workload's.
    assert re.search(rf"  - (workload\.)?{re.escape(field)}[:. ]", out), out
    assert "Traceback" not in out


def test_owned_offers_join_a_callers_catalog_once():
    w = parse_workload(workload(10, [{"gpu": "NVIDIA H100 80GB HBM3", "count": 8, "site": "dc1"}],
                                [{"name": "dc1", "electricity_usd_per_kwh": 0.1}], [cloud("h100x1", 1, 2.5)]))
    once = resolve_catalog(w)
    assert with_owned(w, once) is once  # idempotent: plan() adds them to a caller's catalog again
    owned = [o for o in once.offers if o.provider == "owned"]
    assert [(o.id, o.gpu, o.region, o.available_instances) for o in owned] == \
        [("owned/dc1-H100-SXM-8gpu", "H100-SXM", "dc1", 1)]
    assert owned[0].price_usd_per_hour == pytest.approx(8 * 0.7 * 0.1)


def test_the_example_bursts_to_the_cloud_at_its_site_cap():
    w = parse_workload(json.loads((EXAMPLES / "owned-and-cloud.json").read_text()))
    result = plan(w, FAST)
    assert result.evaluation["ok"]
    site = result.sites[0]
    assert site.power_cap_kw is not None and site.power_kw <= site.power_cap_kw
    assert site.gpus_running < site.gpus_owned  # the cap, not the count, stops the owned servers
    assert any(f.provider != "owned" for f in result.fleet)


def test_a_round_trip_over_grpc_carries_power_and_sites():
    from grpc_support import running_server, without_timings
    from planner_client import PlannerClient

    w = workload(150, [{"gpu": "H100-SXM", "count": 16, "site": "dc1", "amortised_cost_usd_per_gpu_hour": 2.0}],
                 [{"name": "dc1", "electricity_usd_per_kwh": 0.1, "power_cap_kw": 6.0}], [cloud("h100x1", 1, 2.5)])
    local = plan(parse_workload(w)).to_dict()
    with running_server() as (_, target), PlannerClient(target) as client:
        remote = client.solve(w)
    assert without_timings(remote) == without_timings(local)
    assert remote["power_kw"] == pytest.approx(5.6 + 7 * 0.7)
    assert remote["owned_amortised_usd_per_hour"] == pytest.approx(32.0)
    assert remote["sites"] == [{"site": "dc1", "power_kw": 5.6, "power_cap_kw": 6.0, "gpus_running": 8,
                                "gpus_owned": 16}]
    assert {f["offer_id"]: f["power_kw"] for f in remote["fleet"]} == pytest.approx(
        {"owned/dc1-H100-SXM-8gpu": 5.6, "cloud/h100x1": 4.9})


def test_a_gpu_without_board_power_reports_no_power_and_owning_it_needs_a_figure():
    from solver.errors import InputError

    gpu = {"name": "X1", "memory_gib": 80}
    w = {"name": "custom", "services": [{"name": "svc", "demand": {"requests_per_s": 10},
                                         "profiles": [{"gpu": "X1", "requests_per_s": 5}]}],
         "catalog": {"gpus": [gpu], "offers": [{"provider": "c", "name": "x1", "gpu": "X1", "gpus_per_instance": 1,
                                                "price_usd_per_hour": 1.0}]}}
    result = plan(parse_workload(w), FAST)
    assert result.power_kw is None and result.fleet[0].power_kw is None  # never a partial sum
    w["owned"] = [{"gpu": "X1", "count": 8, "site": "dc1"}]
    w["sites"] = [{"name": "dc1", "electricity_usd_per_kwh": 0.1}]
    with pytest.raises(InputError) as err:
        plan(parse_workload(w), FAST)
    assert err.value.violations[0].field == "owned[0].power_kw_per_gpu"
    gpu["board_power_w"] = 500  # a described GPU's board power is used like the catalog's
    result = plan(parse_workload(w), FAST)
    assert result.power_kw == pytest.approx(8 * 0.5) and result.total_price_usd_per_hour == pytest.approx(0.4)


def test_the_catalog_build_refuses_a_board_power_without_its_source():
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("build_catalog", ROOT / "scripts" / "build_catalog.py")
    bc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bc)
    import csv

    with open(ROOT / "solver" / "catalog" / "data" / "gpus_supplement.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["name"] == "GB200")
    # A blank reference row stands in for the reference data (not beside every clone).
    blank = {k: "" for k in ("architecture", "form_factor", "memory_gib", "memory_bandwidth_gbs", "fp16_dense_tflops",
                             "bf16_dense_tflops", "fp8_dense_tflops", "int8_dense_tops", "nvlink_gbs", "pcie_gen",
                             "tdp_w")}
    specs = {"ref": dict(blank, gpu="ref")}
    assert bc.apply_gpu_supplement([], specs, [row])[0]["board_power_w"] == 1200.0
    with pytest.raises(bc.SupplementError, match="board_power_source"):
        bc.apply_gpu_supplement([], specs, [dict(row, board_power_source=" ")])


def test_review_sweeps_a_site_power_cap(tmp_path):
    from solver.review import parse_review, run_review

    base = json.loads((EXAMPLES / "owned-and-cloud.json").read_text())
    base.setdefault("solver", {})["verify"] = False
    review = parse_review({"name": "power", "base": {"workload": base}, "time_limit_per_scenario_s": 60,
                           "sweeps": [{"name": "cap", "change": "site_power", "fixed": {"site": "dc-east"},
                                       "values": [25, 40]}]})
    got = {r.id: r.usd_per_hour for r in run_review(review, tmp_path, workers=1)}
    # A higher cap lets a third owned server run instead of cloud capacity (docs/owned-and-power.md).
    assert got["cap-40"] < got["cap-25"]
    assert got["cap-25"] == pytest.approx(got["base"])
    bad = {"name": "x", "base": {"workload": base},
           "scenarios": [{"name": "s", "changes": [{"site_power": {"site": "nowhere", "power_cap_kw": 1}}]}]}
    try:
        outcome = list(run_review(parse_review(bad), tmp_path / "x", workers=1))
    except InputError as exc:  # refused up front, naming the site
        assert "nowhere" in str(exc)
    else:  # or recorded as the scenario's reason, the rest going on
        by_id = {r.id: r for r in outcome}
        assert by_id["s"].status == "invalid" and by_id["base"].status == "optimal"
        assert by_id["s"].reasons[0]["constraint"] == "changes[0].site_power.site"
        # the base plan's sensitivity never asks for one more owned server from the market
        assert all(r.status != "invalid" for key, r in by_id.items() if key != "s"), \
            {key: r.reasons for key, r in by_id.items() if r.status == "invalid"}


def test_a_running_owned_server_kept_idle_counts_against_its_site_cap():
    # Two owned 8-GPU A100 servers run today, but the service runs on H100s only: they can
    # only idle. Removing one costs $1,000, so keeping both would be cheapest - but an idle
    # server still draws its power, and the cap (1.5 servers' worth) allows one.
    server_kw = 8 * 0.4  # A100-80GB board power 400 W (catalog)
    w = workload(5, [{"gpu": "A100-80GB", "count": 16, "site": "dc1", "power_kw_per_gpu": 0.4}],
                 [{"name": "dc1", "electricity_usd_per_kwh": 0.1, "power_cap_kw": 1.5 * server_kw}],
                 [cloud("h100x1", 1, 2.5)],
                 current_fleet=[{"offer_id": "owned/dc1-A100-80GB-8gpu", "instances": 2}],
                 change_costs={"remove_instance_usd": 1000})
    result = plan(parse_workload(w), FAST)
    assert result.evaluation["ok"], result.evaluation
    assert [(f.offer_id, f.instances) for f in result.fleet if f.offer_id.startswith("owned/")] == \
        [("owned/dc1-A100-80GB-8gpu", 1)]
