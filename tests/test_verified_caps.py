"""Simulation in the loop (solver/compile/verified_caps.py, solver.verify): where the
queueing model is too generous the simulator refutes the plan's caps, the planner lowers
them and solves again, and an independent replay confirms what the plan then claims.

The case the simulator refutes: Llama-2-7B fp16 on A10Gs with SGLang, short prompts at
4 requests/s with bursty arrivals (CV 2), p99 TTFT 1 s, planned at the model's edge
("nominal"). An A10G's cache holds ~20 such sequences; when a burst fills them, arrivals
queue for slots longer than the analytic model gives (docs/queueing.md, "Known gaps":
small-N replicas), so the plan at its caps (1.47/s per A10G; three of them at 1.33/s) has
p99 TTFT ~1 s in the model where the simulator measures 1.2-2.1 s (95 % interval, a replay
with other seeds). (The MoE these
tests used before - Qwen3-30B-A3B on SGLang at 60/s - is confirmed since the simulator
stopped charging prefill-only steps for the paused sequences' context and the model
prices a prefill-first window's prompts at their own steps; the bursty L4 case serves
the tests that need no refutation.)"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import solver.solve_stage as solve_stage
from solver.compile.candidates import build_problem
from solver.compile.resolve import resolve_catalog
from solver.compile.verified_caps import Check, same_replicas, tightened
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload

CLI = Path(sys.executable).with_name("solver-cli")
if not CLI.exists():
    CLI = Path(shutil.which("solver-cli") or CLI)


def bursty(verify: bool = True) -> dict:
    return {"name": "bursty", "services": [{
        "name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16"],
        "demand": {"requests_per_s": 4, "prompt_tokens": 512, "output_tokens": 256, "arrival_cv": 3},
        "slo": {"ttft_ms": 1000, "tpot_ms": 45, "percentile": 99, "confidence": "nominal"}}],
        "constraints": {"gpu_types": ["L4"]}, "solver": {"verify": verify}}


BOUNDS = {"ttft_ms": 1000, "tpot_ms": 60}


def optimistic(verify: bool = True) -> dict:
    return {"name": "few-slots", "services": [{
        "name": "chat", "model": "llama-2-7b", "precisions": ["fp16"], "engine": "sglang",
        "demand": {"requests_per_s": 4, "prompt_tokens": 256, "output_tokens": 128, "arrival_cv": 2},
        "slo": {**BOUNDS, "percentile": 99, "confidence": "nominal"}}],
        "constraints": {"gpu_types": ["A10G"]}, "solver": {"verify": verify}}


@pytest.fixture(scope="module")
def plans():
    return plan(parse_workload(optimistic(False))), plan(parse_workload(optimistic(True)))


def test_the_loop_lowers_the_caps_the_simulator_refutes_and_ends_confirmed(plans):
    unverified, verified = plans
    assert unverified.evaluation["ok"] and verified.evaluation["ok"]
    assert all(a.verified is None for a in unverified.services[0].assignments)
    assert "verify_rounds" not in unverified.solver.timings
    # The model's caps alone buy three single-A10G instances; the simulator refutes them, and
    # the fleet that it confirms costs more.
    assert verified.solver.timings["verify_rounds"] >= 1
    assert verified.total_price_usd_per_hour > unverified.total_price_usd_per_hour + 1
    # The model's cap per replica shape ("1gpu:fp16": the same A10G replica on any instance).
    model_caps = {a.config.split(":", 1)[1]: a.throughput_per_replica[0] for a in unverified.services[0].assignments}
    # Every configuration is confirmed; those the simulator refuted are bound by it now, with
    # caps below the model's.
    refuted = [a for a in verified.services[0].assignments if a.binding_limit == "slo_simulated"]
    assert refuted
    for a in refuted:
        assert a.throughput_per_replica[0] < model_caps[a.config.split(":", 1)[1]], a.config
    for a in verified.services[0].assignments:
        assert a.verified.verdict == "met" and a.binding_limit in ("slo_simulated", "slo_under_load")
        assert a.verified.percentile == 99 and a.verified.seeds >= 4
        # Simulated at the rate the plan routes to one replica (nominal: no rate margin).
        assert a.verified.rate_per_s == pytest.approx(sum(a.routed) / a.replicas, rel=1e-6, abs=1e-6)  # 6 decimals
        for metric, bound in BOUNDS.items():
            assert getattr(a.verified, metric + "_p") <= bound and getattr(a.verified.ci, metric)[1] <= bound
    s = verified.services[0]
    assert s.capacity >= s.demand_with_headroom - 1e-6 and not s.warnings


def _replay(tmp_path: Path, workload: dict) -> dict:
    path = tmp_path / f"w{workload['solver']['verify']}.json"
    path.write_text(json.dumps(workload))
    # Other seeds than the loop's: the replay is a check the plan did not tune itself to.
    out = subprocess.run([str(CLI), "simulate", str(path), "--seed", "7", "--format", "json"], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "SCIPcatchEvent" not in out.stderr  # the verified solve's spurious SCIP lines are filtered, as in `solve`
    return json.loads(out.stdout)["services"][0]


def test_an_independent_replay_confirms_the_verified_plan_and_refutes_the_unverified(tmp_path):
    assert _replay(tmp_path, optimistic(True))["verdict"] == "met"
    refuted = _replay(tmp_path, optimistic(False))
    # Missed beyond doubt: the whole 95 % interval of some metric lies over its bound.
    assert refuted["verdict"] == "missed"
    assert refuted["ci"]["ttft_ms"][0] > BOUNDS["ttft_ms"] or refuted["ci"]["tpot_ms"][0] > BOUNDS["tpot_ms"], \
        refuted["ci"]


def test_out_of_rounds_the_plan_keeps_its_caps_and_says_what_the_simulator_refuted(monkeypatch):
    monkeypatch.setattr(solve_stage, "MAX_VERIFY_ROUNDS", 0)
    result = plan(parse_workload(optimistic(True)))
    s = result.services[0]
    # The plan stands as solved (capacity for its demand at the caps it was solved with),
    # the check that refuted it is reported, and a warning says what to do.
    assert s.capacity >= s.demand_with_headroom - 1e-6 and result.evaluation["ok"]
    verdicts = {a.verified.verdict for a in s.assignments}
    assert verdicts & {"missed", "inconclusive"}
    assert any("simulator did not confirm p99" in w and "To fix" in w for w in s.warnings)
    # The headline says so too: the proof is over the caps in force.
    from solver.output.render import render_plan

    unconfirmed = {a.config for a in s.assignments if a.verified.verdict != "met"}
    headline = render_plan(result.to_dict()).splitlines()[0]
    assert f"not confirmed by the simulator: {len(unconfirmed)} configuration" in headline, headline


def test_when_time_ends_in_the_round_after_a_refutation_the_refuted_plan_is_returned(monkeypatch):
    """The time limit ends while the planner solves again after the simulator refuted a
    cap: the answer is the plan it had, with the refuted configurations named - not a
    timeout that throws a complete plan away. (The deadline itself depends on the machine's
    speed; here the round after the first verification is made to hit it.)"""
    from solver.errors import SolverTimeout

    checked = []
    import solver.compile.verified_caps as verified_caps

    real_check, real_lazy, real_cost = verified_caps.check_plan, solve_stage._lazy_solve, solve_stage._cost_solve

    def check(*args, **kwargs):
        checked.append(1)
        return real_check(*args, **kwargs)

    def out_of_time(real):
        def solve(*args, **kwargs):
            if checked:
                raise SolverTimeout("the time limit of 1 s ended during the cost MIP, before any fleet was found")
            return real(*args, **kwargs)
        return solve

    monkeypatch.setattr(verified_caps, "check_plan", check)
    monkeypatch.setattr(solve_stage, "_lazy_solve", out_of_time(real_lazy))
    monkeypatch.setattr(solve_stage, "_cost_solve", out_of_time(real_cost))
    result = plan(parse_workload(optimistic(True)))
    s = result.services[0]
    assert checked and result.evaluation["ok"] and s.capacity >= s.demand_with_headroom - 1e-6
    assert {a.verified.verdict for a in s.assignments} & {"missed", "inconclusive"}
    assert any("simulator did not confirm p99" in w and "To fix" in w for w in s.warnings)


def test_a_check_past_its_deadline_judges_its_first_round_and_says_so():
    """verify_replica extends a straddling check with more requests only while time is
    left: past the deadline it judges the first round's 20,000 requests."""
    import time

    from solver.sim.verify import verify_replica

    from solver.compile.load_caps import _replica_of, _routed_mix

    problem, catalog = _problem()
    svc = problem.services[0]
    c = next(c for c in problem.configs if c.service == "chat" and c.pending_cap is None or c.service == "chat")
    replica, mix = _replica_of(catalog, problem.calibration, svc, c), _routed_mix(svc, [1.0])
    first = verify_replica(replica, mix, 1.0, arrival_cv=3.0, percentile=99, bounds={"tpot_ms": 1e9})
    # A bound on the simulated value itself straddles its interval: the check wants more requests.
    on_the_edge = {"tpot_ms": first.estimates["tpot_ms"].value_ms}
    full = verify_replica(replica, mix, 1.0, arrival_cv=3.0, percentile=99, bounds=on_the_edge)
    late = verify_replica(replica, mix, 1.0, arrival_cv=3.0, percentile=99, bounds=on_the_edge,
                          deadline=time.monotonic() - 1)
    assert first.requests == late.requests == 20000 < full.requests
    assert late.verdict == "inconclusive" and "time for checks ran out" in late.reason


def _problem():
    w = parse_workload(bursty(True))
    catalog = resolve_catalog(w)
    return build_problem(w, catalog), catalog


def test_one_check_holds_for_the_same_replica_on_every_offer():
    problem, catalog = _problem()
    by_size: dict[int, list] = {}
    for c in problem.configs:
        by_size.setdefault(c.gpus_per_replica, []).append(c)
    two = by_size[2]
    assert len({c.offer_id for c in two}) >= 2, "the catalog should sell 2-GPU L4 replicas on several offers"
    twins = same_replicas(problem, catalog, [two[0].key])[two[0].key]
    assert twins[0] == two[0].key and len(twins) >= 2
    keys = {c.key: c for c in problem.configs}
    assert all(keys[k].gpus_per_replica == 2 and keys[k].precision == "fp16" for k in twins)
    assert not set(twins) & {c.key for c in by_size.get(1, []) + by_size.get(4, [])}

    # A miss lowers the cap of every twin below the rate that missed; the rest keep theirs.
    rate = 2.0
    miss = Check(two[0].key, rate, "missed", 40_000, 8, 99, (("ttft_ms", 1150.0), ("tpot_ms", 55.0)),
                 (("ttft_ms", 1050.0, 1250.0), ("tpot_ms", 53.0, 57.0)), (("ttft_ms", 1000.0), ("tpot_ms", 60.0)),
                 "p99 ttft missed")
    after, moved = tightened(problem, {two[0].key: miss}, catalog)
    assert moved == set(twins)
    caps = {c.key: min(k.throughput for k in c.classes) for c in after.configs}
    before = {c.key: min(k.throughput for k in c.classes) for c in problem.configs}
    for k in twins:
        # The overshoot (1150 / 1000) at least: 2.0 / 1.15, less 1e-9.
        assert caps[k] <= rate / 1.15 + 1e-9 and after.verified[k] == (0.0, rate)
    for k in set(before) - set(twins):
        assert caps[k] == before[k] and k not in after.verified


def test_a_met_check_confirms_lower_rates_and_moves_nothing():
    problem, catalog = _problem()
    key = problem.configs[0].key
    met = Check(key, 1.5, "met", 20_000, 4, 99, (("ttft_ms", 500.0),), (("ttft_ms", 450.0, 550.0),),
                (("ttft_ms", 1000.0),))
    after, moved = tightened(problem, {key: met}, catalog)
    assert not moved and after.configs == problem.configs
    assert after.verified[key] == (1.5, math.inf)


def test_verify_is_a_plan_option_and_off_checks_nothing():
    result = plan(parse_workload(bursty(True)), PlanOptions(verify=False))
    assert all(a.verified is None for a in result.services[0].assignments)
    assert result.services[0].assignments[0].binding_limit == "slo_under_load"


def test_a_horizon_verifies_at_its_busiest_period_and_confirms_what_it_buys(plans):
    """Periods go through the same loop (solver/plan_horizon.py): each configuration is
    simulated at the highest rate any period routes to one replica; the refuted caps are
    lowered there too, and the fleet of its busiest period (demand x 1) costs what the
    static verified plan costs."""
    _, static = plans
    doc = optimistic(True)
    doc["periods"] = [{"name": "night", "hours": 12}, {"name": "day", "hours": 12}]
    doc["services"][0]["demand"]["profile"] = {"night": 0.5}
    result = plan(parse_workload(doc))
    assert result.evaluation["ok"]
    assert result.solver.timings["verify_rounds"] >= 1
    busiest = result.to_dict()["periods"][1]
    assert busiest["name"] == "day"
    assert busiest["total_price_usd_per_hour"] == pytest.approx(static.total_price_usd_per_hour, rel=1e-6)
    verdicts = [a["verified"]["verdict"] for s in result.to_dict()["services"] for a in s["assignments"]]
    assert verdicts and set(verdicts) == {"met"}


def test_a_round_that_finds_no_cheaper_plan_ends_early_stopping_and_the_plan_is_confirmed():
    """bench/verify_plans.py's gen-5-0 (generate(5, 0), p99 on every LLM service): after the
    first verification the MIP with pending configurations kept stopping at the same plan
    rounded a hair below the limit (68.3031986 against 68.3032), 200 rounds until the time
    limit, and the refuted plan came back. Now such a round ends early stopping, and the
    plan converges with every used configuration confirmed, in a few rounds."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from solve_scaling import generate

    doc = generate(5, 0)
    for s in doc["services"]:
        if s.get("model") and ("ttft_ms" in s.get("slo", {}) or "tpot_ms" in s.get("slo", {})):
            s["slo"]["percentile"] = 99
    result = plan(parse_workload(doc))
    assert result.evaluation["ok"] and result.solver.timings["percentile_cap_rounds"] < 20
    verdicts = [a.verified.verdict for s in result.services for a in s.assignments if a.verified is not None]
    assert len(verdicts) >= 5 and set(verdicts) == {"met"}
    assert not any("simulator did not confirm" in w for s in result.services for w in s.warnings)
