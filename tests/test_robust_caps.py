"""Robust percentile caps (slo.confidence): caps sized for a replica slower than the
model, with a rate margin; bands on the values under load; the evaluator's robust check;
what the margin costs; every door (JSON, table, gRPC, estimate)."""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import replace

import pytest

from conftest import EXAMPLES
from solver.catalog import default_catalog
from solver.compile.candidates import build_problem
from solver.compile.lazy_caps import resolve_caps
from solver.compile.load_caps import at_load, exact_cap
from solver.confidence import RATE_MARGIN, slowdown
from solver.evaluate import evaluate
from solver.optimize.solution import Assignment, Solution
from solver.perf.queueing import max_rate_for_slo, percentiles_at_rate
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

CONSTRAINTS = {"providers": ["lambda"], "gpu_types": ["H100-SXM", "A100-80GB"]}
MIX = [{"name": "short", "share": 0.75, "prompt_tokens": 256, "output_tokens": 128},
       {"name": "long", "share": 0.25, "prompt_tokens": 4096, "output_tokens": 512}]


def _workload(confidence="unset", rate=30.0, classes=None, percentile=99, ttft=800.0, tpot=40.0) -> dict:
    slo = {"ttft_ms": ttft, "tpot_ms": tpot}
    if percentile is not None:
        slo["percentile"] = percentile
    if confidence != "unset":
        slo["confidence"] = confidence
    demand = {"requests_per_s": rate}
    if classes:
        demand["classes"] = classes
    else:
        demand.update(prompt_tokens=1024, output_tokens=256)
    return {"name": "robust", "services": [{"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
                                            "demand": demand, "slo": slo}], "constraints": CONSTRAINTS}


def _pending(doc: dict) -> list:
    """The estimated configurations of the workload, each with its pending cap's inputs."""
    problem = build_problem(parse_workload(doc), default_catalog(), cache=None)
    configs = [c for c in problem.configs if c.pending_cap is not None]
    assert configs
    return configs


def _plan(doc: dict, **options):
    return plan(parse_workload(doc), PlanOptions(**options))


# ---------------------------------------------------------------- caps
@pytest.mark.parametrize("classes", [None, MIX])
def test_nominal_reproduces_todays_caps_exactly(classes):
    """At "nominal" a cap is the queueing model's largest rate for the SLO, bit for bit
    (what every cap was before confidence existed)."""
    for c in _pending(_workload("nominal", classes=classes)):
        replica, mix, p, bounds, cv, band, slow, margin = c.pending_cap
        assert (slow, margin) == (1.0, 0.0)
        today = max_rate_for_slo(replica, mix, p, arrival_cv=cv, **dict(bounds)) / (1 + band)
        assert exact_cap(c).classes[0].throughput == today


def test_llm_platform_at_nominal_plans_at_the_models_edge():
    """examples/llm-platform.json with both percentile services at "nominal": every cap is the
    nominal model's, nothing is taken off, and the plan costs no more than at 0.9."""
    workload = json.loads((EXAMPLES / "llm-platform.json").read_text())
    robust = plan(parse_workload(workload), PlanOptions(base_dir=str(EXAMPLES), verify=False))
    for s in workload["services"]:
        if "percentile" in s.get("slo", {}):
            s["slo"]["confidence"] = "nominal"
    r = plan(parse_workload(workload), PlanOptions(base_dir=str(EXAMPLES), verify=False))
    assert r.total_price_usd_per_hour < robust.total_price_usd_per_hour
    for s in r.services:
        if s.confidence is not None:
            assert s.confidence.level == "nominal" and s.confidence.slowdown == 1.0 and s.confidence.rate_margin == 0
            assert s.capacity_margin == 0.0
            for a in s.assignments:
                assert a.cap_per_replica == pytest.approx(a.cap_per_replica_nominal, rel=1e-9)


@pytest.mark.parametrize("classes", [None, MIX])
def test_robust_caps_hold_on_the_slowed_replica_with_3_percent_more_traffic(classes):
    """Below the nominal cap; the slowed replica meets every bound at cap x 1.03; and the
    cap is the largest such rate within the search's resolution (not needlessly low)."""
    configs = _pending(_workload(classes=classes))
    for c in configs:
        replica, mix, p, bounds, cv, band, slow, margin = c.pending_cap
        assert slow == slowdown(0.9) > 1 and margin == RATE_MARGIN
        robust = exact_cap(c).classes[0].throughput
        nominal = max_rate_for_slo(replica, mix, p, arrival_cv=cv, **dict(bounds))
        if nominal <= 0:
            continue
        assert robust < nominal, c.key
        if robust <= 0:
            continue
        slowed = replica.slowed(slow)
        at = percentiles_at_rate(slowed, mix, robust * (1 + RATE_MARGIN), cv, percentiles=(p,))
        for name, bound in bounds:
            assert getattr(at, name)[p] <= bound * (1 + 1e-6), (c.key, name)
        # Beyond the cap by more than the search's resolution (0.5 % of saturation), +3 %
        # of traffic breaks a bound on the slowed replica, or the replica is at 90 % of
        # its saturation (the planner's ceiling).
        sat = percentiles_at_rate(slowed, mix, robust * (1 + RATE_MARGIN), cv, percentiles=(p,)).saturation_rate_per_s
        beyond = robust * (1 + RATE_MARGIN) + 0.01 * sat
        if beyond < 0.9 * sat:
            over = percentiles_at_rate(slowed, mix, beyond, cv, percentiles=(p,))
            assert any(getattr(over, name)[p] > bound for name, bound in bounds), c.key


def test_more_confidence_never_raises_a_cap_or_lowers_the_cost():
    levels = ["nominal", 0.5, 0.7, 0.9, 0.95, 0.99]
    caps = {level: {c.key: exact_cap(c).classes[0].throughput for c in _pending(_workload(level))}
            for level in levels}
    for key in caps["nominal"]:
        row = [caps[level][key] for level in levels]
        assert row == sorted(row, reverse=True), (key, row)
    costs = [_plan(_workload(level, rate=20)).total_price_usd_per_hour for level in ("nominal", 0.5, 0.9, 0.99)]
    assert costs == sorted(costs)


def test_the_lazy_bound_stays_above_the_robust_cap():
    from solver.compile.load_caps import cap_upper_bound

    for c in _pending(_workload(0.99, classes=MIX)):
        replica, mix, p, bounds, cv, band, slow, margin = c.pending_cap
        assert c.classes[0].throughput >= exact_cap(c).classes[0].throughput
        assert c.classes[0].throughput == cap_upper_bound(replica.slowed(slow), mix, p, cv) / (1 + band) / (1 + margin)


def test_measured_profiles_take_the_rate_margin_but_no_model_slowdown():
    def doc(confidence):
        slo = {"latency_ms": 600, "percentile": 99}
        if confidence is not None:
            slo["confidence"] = confidence
        return {"name": "m", "services": [{"name": "img", "demand": {"items_per_min": 600}, "slo": slo,
                                           "profiles": [{"gpu": "L4", "items_per_min": 120, "latency_ms": 500}]}],
                "catalog": {"offers": [{"provider": "p", "name": "l4", "gpu": "L4", "gpus_per_instance": 1,
                                        "price_usd_per_hour": 1.0}]}}
    nominal = _plan(doc("nominal")).services[0].assignments[0]
    robust = _plan(doc(0.99)).services[0].assignments[0]
    assert robust.throughput_per_replica[0] == pytest.approx(nominal.throughput_per_replica[0] / (1 + RATE_MARGIN))
    assert robust.cap_per_replica_nominal == pytest.approx(nominal.throughput_per_replica[0])
    assert robust.at_load.slowdown == 1.0 and robust.at_load.meets_slo_robust


# ---------------------------------------------------------------- bands
def test_bands_contain_the_nominal_value_and_widen_with_confidence():
    workload = parse_workload(_workload(classes=MIX))
    problem = resolve_caps(build_problem(workload, default_catalog(), cache=None))
    svc = problem.services[0]
    config = max(problem.configs, key=lambda c: c.classes[0].throughput)
    rate = 0.5 * config.classes[0].throughput  # far enough below the cap that every end keeps up
    routed = tuple(rate * share for share in svc.class_shares)
    widths = []
    for level in (None, 0.5, 0.9, 0.99):  # None: nominal, whose band is at 0.8
        s = replace(svc, slo=replace(svc.slo, confidence=level))
        at = at_load(default_catalog(), problem.calibration, s, config, 1, routed)
        assert at.confidence == (0.8 if level is None else level)
        for name in ("ttft_ms", "tpot_ms", "latency_ms"):
            low, high = getattr(at.band, name)
            assert low <= getattr(at, name) <= high, (level, name)
        widths.append({name: getattr(at.band, name) for name in ("ttft_ms", "tpot_ms", "latency_ms")})
    order = [widths[1], widths[0], widths[2], widths[3]]  # confidence 0.5, 0.8, 0.9, 0.99
    for narrow, wide in zip(order, order[1:]):
        for name in narrow:
            assert wide[name][0] <= narrow[name][0] and wide[name][1] >= narrow[name][1], name


def test_every_assignment_reports_its_band_robust_check_and_caps():
    r = _plan(_workload(rate=40))
    assert r.evaluation["ok"]
    (s,) = r.services
    assert (s.confidence.level, s.confidence.slowdown, s.confidence.rate_margin) == (0.9, slowdown(0.9), RATE_MARGIN)
    assert 0 < s.capacity_margin < 1
    for a in s.assignments:
        assert a.at_load.meets_slo and a.at_load.meets_slo_robust
        assert a.at_load.confidence == 0.9 and a.at_load.slowdown == pytest.approx(slowdown(0.9))
        assert a.cap_per_replica == pytest.approx(a.throughput_per_replica[0])
        assert a.cap_per_replica < a.cap_per_replica_nominal
    nominal_capacity = sum(a.cap_per_replica_nominal * a.replicas for a in s.assignments)
    robust_capacity = sum(a.cap_per_replica * a.replicas for a in s.assignments)
    assert s.capacity_margin == pytest.approx(1 - robust_capacity / nominal_capacity, abs=1e-4)


def test_the_evaluators_check_without_a_band_is_the_reported_check():
    """The evaluator reads only the checks of `at_load_checked`, so it skips the band's two
    model evaluations (band=False): the values, both verdicts and the robust values are the
    same as the plan's report computes, at rates that pass and rates that miss."""
    from solver.compile.load_caps import at_load_checked

    problem = build_problem(parse_workload(_workload(0.9, rate=40)), default_catalog(), cache=None)
    (svc,) = problem.services
    configs = [c for c in problem.configs if c.source != "measured"][:6]
    assert configs
    verdicts = set()
    for c in configs:
        top = c.classes[0].throughput
        for rate in (0.3 * top, 0.95 * top, 1.3 * top):
            full, robust_full = at_load_checked(default_catalog(), problem.calibration, svc, c, 2, (2 * rate,))
            bare, robust_bare = at_load_checked(default_catalog(), problem.calibration, svc, c, 2, (2 * rate,),
                                                band=False)
            assert (bare.ttft_ms, bare.tpot_ms, bare.latency_ms, bare.utilization) == \
                (full.ttft_ms, full.tpot_ms, full.latency_ms, full.utilization)
            assert (bare.meets_slo, bare.meets_slo_robust) == (full.meets_slo, full.meets_slo_robust)
            assert robust_bare == robust_full
            verdicts.add((full.meets_slo, full.meets_slo_robust))
    assert (True, True) in verdicts and any(not v[1] for v in verdicts)


def test_services_without_a_percentile_keep_their_plan_and_get_a_band():
    r = _plan(_workload(percentile=None, rate=40))
    (s,) = r.services
    assert s.confidence is None and s.capacity_margin is None
    for a in s.assignments:
        assert a.cap_per_replica is None and a.cap_per_replica_nominal is None
        assert a.at_load.confidence == 0.8 and a.at_load.band.ttft_ms is not None
        # Sized nominally: the robust check is the nominal one.
        assert a.at_load.slowdown == 1.0 and a.at_load.meets_slo_robust == a.at_load.meets_slo


# ---------------------------------------------------------------- the evaluator
def test_the_evaluator_rejects_a_plan_sized_with_nominal_caps_for_confidence_0_9():
    # Demand that fills the nominal plan's replicas to 99.5 % of their nominal caps.
    rate = 0.995 * _plan(_workload("nominal", rate=40)).services[0].capacity
    nominal = _plan(_workload("nominal", rate=rate))
    assert nominal.evaluation["ok"]
    # The same fleet and routing, checked against the workload that asks for 0.9.
    sol = Solution(tuple((f.offer_id, f.instances) for f in nominal.fleet),
                   tuple(Assignment(a.config, "chat", a.offer_id, a.gpus_per_replica, a.precision, a.replicas,
                                    tuple(a.routed), a.instances_per_replica) for a in nominal.services[0].assignments))
    report = evaluate(parse_workload(_workload(0.9, rate=rate)), default_catalog(), sol)
    assert not report.ok
    robust = [v for v in report.violations if "slower than modelled" in v]
    assert robust, report.violations
    configs = {a.config for a in nominal.services[0].assignments}
    for v in robust:  # names the assignment, the condition and the values
        assert any(v.startswith(key + ": ") for key in configs) and "slo.confidence 0.9" in v and "% more traffic" in v
        assert "ttft_ms" in v or "tpot_ms" in v or "cannot keep up" in v
    # ... and the plan at 0.9 passes the same evaluator.
    assert _plan(_workload(0.9, rate=rate)).evaluation["ok"]


# ---------------------------------------------------------------- what the margin costs (--explain)
def test_explain_prices_the_margin_against_a_nominal_re_solve():
    doc = _workload(rate=20)
    r = _plan(doc, explain=True)
    nominal = _plan(_workload("nominal", rate=20)).total_price_usd_per_hour
    cost = r.confidence_cost
    assert cost.nominal_price_usd_per_hour == pytest.approx(nominal, abs=1e-6)
    assert cost.margin_usd_per_hour == pytest.approx(r.total_price_usd_per_hour - nominal, abs=1e-6)
    assert cost.margin_usd_per_hour >= 0
    assert _plan(_workload("nominal", rate=20), explain=True).confidence_cost is None
    assert _plan(doc).confidence_cost is None  # only with --explain


# ---------------------------------------------------------------- the CLI
@pytest.mark.parametrize("slo,field", [
    ({"ttft_ms": 500, "percentile": 99, "confidence": -1}, "services[0].slo.confidence"),
    ({"ttft_ms": 500, "percentile": 99, "confidence": 0.3}, "services[0].slo.confidence"),
    ({"ttft_ms": 500, "percentile": 99, "confidence": 1.5}, "services[0].slo.confidence"),
    ({"ttft_ms": 500, "percentile": 99, "confidence": "high"}, "services[0].slo.confidence"),
    ({"ttft_ms": 500, "percentile": 99, "confidence": math.nan}, "services[0].slo.confidence"),
    ({"ttft_ms": 500, "confidence": 0.9}, "services[0].slo.confidence"),
])
def test_bad_confidence_exits_2_naming_the_field(solver_cli, tmp_path, slo, field):
    doc = _workload()
    doc["services"][0]["slo"] = slo
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))  # NaN is written as the literal NaN, which JSON readers accept
    proc = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert field in proc.stderr and "To fix:" in proc.stderr and "Traceback" not in proc.stderr
    if "percentile" not in slo:
        assert "add slo.percentile" in proc.stderr and "size_with_error_band" in proc.stderr


def test_the_table_shows_bands_and_the_margin(solver_cli, tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps(_workload(rate=20)))
    table = subprocess.run([solver_cli, "solve", str(path), "--explain"], capture_output=True, text=True, timeout=300)
    assert table.returncode == 0, table.stderr
    assert "p99 TTFT" in table.stdout and " (" in table.stdout.split("p99 TTFT", 1)[1].split("\n")[0]
    assert f"confidence 0.9 (replica {slowdown(0.9):.2f}x slower, +3 % traffic): capacity margin" in table.stdout
    assert "Confidence margin: $" in table.stdout
    out = subprocess.run([solver_cli, "solve", str(path), "--format", "json"], capture_output=True, text=True,
                         timeout=300)
    d = json.loads(out.stdout)
    a = d["services"][0]["assignments"][0]
    assert set(a["at_load"]["band"]) == {"ttft_ms", "tpot_ms", "latency_ms"}
    assert len(a["at_load"]["band"]["ttft_ms"]) == 2
    assert d["services"][0]["confidence"] == {"level": 0.9, "slowdown": slowdown(0.9), "rate_margin": RATE_MARGIN}
    assert a["cap_per_replica"] < a["cap_per_replica_nominal"]


def _estimate(cli: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli, "estimate", "llama-3.1-8b", "--gpu", "H100-SXM", "--gpus-per-replica", "1",
                           "--precision", "fp8", *extra], capture_output=True, text=True, timeout=120)


def test_estimate_gives_the_robust_cap_and_the_nominal_one(solver_cli):
    flags = ["--percentile", "99", "--ttft-ms", "200", "--tpot-ms", "40", "--format", "json"]
    (row,) = json.loads(_estimate(solver_cli, *flags).stdout)
    assert row["confidence"] == {"level": 0.9, "slowdown": slowdown(0.9), "rate_margin": RATE_MARGIN}
    assert 0 < row["max_rate_for_slo"] < row["max_rate_for_slo_nominal"]
    (nominal,) = json.loads(_estimate(solver_cli, *flags, "--confidence", "nominal").stdout)
    assert nominal["max_rate_for_slo"] == nominal["max_rate_for_slo_nominal"] == row["max_rate_for_slo_nominal"]
    (sure,) = json.loads(_estimate(solver_cli, *flags, "--confidence", "0.99").stdout)
    assert sure["max_rate_for_slo"] < row["max_rate_for_slo"]
    (rated,) = json.loads(_estimate(solver_cli, *flags, "--rate", "20").stdout)
    band = rated["at_rate"]["band"]
    assert band["confidence"] == 0.9
    low, high = band["ttft_ms_p99"]
    assert low <= rated["at_rate"]["ttft_ms_p99"] <= high
    table = _estimate(solver_cli, *flags[:-2], "--rate", "20")
    assert table.returncode == 0 and "TTFT p99 band" in table.stdout and "nominal" in table.stdout


@pytest.mark.parametrize("extra,words", [
    (["--percentile", "99", "--ttft-ms", "200", "--confidence", "1.5"], "--confidence"),
    (["--percentile", "99", "--ttft-ms", "200", "--confidence", "high"], "--confidence"),
    (["--percentile", "99", "--ttft-ms", "200", "--confidence", "nan"], "--confidence"),
    (["--rate", "5", "--confidence", "0.9"], "--confidence"),
])
def test_estimate_bad_confidence_exits_2_naming_the_flag(solver_cli, extra, words):
    proc = _estimate(solver_cli, *extra)
    assert proc.returncode == 2 and words in proc.stderr and "To fix:" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- gRPC
def test_grpc_carries_confidence_bands_and_caps():
    from grpc_support import running_server, without_timings
    from planner_client import PlannerClient

    doc = _workload(rate=20)
    local = plan(parse_workload(doc), PlanOptions(explain=True)).to_dict()
    with running_server() as (_planner, target), PlannerClient(target, timeout_s=300) as client:
        remote = client.solve(doc, explain=True)
    assert without_timings(remote)["services"] == without_timings(local)["services"]
    assert remote["confidence_cost"] == local["confidence_cost"]
    (s,) = remote["services"]
    assert s["confidence"]["level"] == 0.9 and 0 < s["capacity_margin"] < 1
    band = s["assignments"][0]["at_load"]["band"]
    assert isinstance(band["ttft_ms"], list) and len(band["ttft_ms"]) == 2
