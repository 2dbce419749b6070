"""Review files without solving: schema, expansion, changes, sensitivity scenarios, store."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from solver.catalog import default_catalog
from solver.errors import InputError
from solver.review import parse_review
from solver.review.changes import apply_changes
from solver.review.result import ScenarioResult
from solver.review.spec import Change
from solver.review.store import ResultStore

BASE = {
    "name": "demo",
    "services": [
        {"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
         "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256},
         "slo": {"ttft_ms": 2000, "tpot_ms": 60}},
        {"name": "embed", "demand": {"items_per_min": 300},
         "profiles": [{"gpu": "L4", "items_per_min": 120, "latency_ms": 500}]},
    ],
    "constraints": {"gpu_quotas": {"H100-SXM": 8}, "budget_usd_per_hour": 50, "headroom": 0.2,
                    "providers": ["aws", "gcp", "lambda", "nebius", "cudo"]},
}


def review(**extra) -> dict:
    return {"name": "t", "base": {"workload": copy.deepcopy(BASE)}, **extra}


def violations(data: dict) -> list[str]:
    with pytest.raises(InputError) as exc:
        parse_review(data)
    return [str(v) for v in exc.value.violations]


def apply(*changes: dict):
    r = parse_review(review(sensitivity={"enabled": False}))
    return apply_changes(r.workload, r.catalog, [Change.model_validate(c) for c in changes])


# ---------------------------------------------------------------- expansion
def test_scenarios_come_in_report_order_with_stable_ids():
    r = parse_review(review(
        scenarios=[{"name": "Demand doubles!", "changes": [{"demand": {"factor": 2}}]}],
        sweeps=[{"name": "growth", "change": "demand", "values": {"from": 1, "to": 2, "step": 0.5}},
                {"name": "tpot", "change": "slo", "parameter": "tpot_ms", "fixed": {"service": "chat"},
                 "values": [20, 200]}],
        sensitivity={"enabled": False}))
    assert [s.id for s in r.scenarios] == ["base", "demand-doubles", "growth-1", "growth-1.5", "growth-2",
                                           "tpot-20", "tpot-200"]
    point = r.scenario("tpot-200")
    assert (point.group, point.sweep, point.parameter, point.value, point.service) == \
        ("sweep", "tpot", "slo.tpot_ms", 200.0, "chat")
    assert point.changes_json() == [{"slo": {"service": "chat", "tpot_ms": 200.0}}]


def test_range_includes_its_end_despite_rounding():
    r = parse_review(review(sweeps=[{"name": "g", "change": "demand", "values": {"from": 1, "to": 5, "step": 0.5}}],
                            sensitivity={"enabled": False}))
    assert [s.value for s in r.scenarios if s.group == "sweep"] == [1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5]


def test_sensitivity_relaxes_every_constraint_one_step():
    r = parse_review(review())
    relaxed = {s.relaxes: s.changes_json()[0] for s in r.scenarios if s.group == "sensitivity"}
    # The largest H100-SXM instance in the default catalog has 8 GPUs: one more of it.
    assert relaxed["quota[H100-SXM]"] == {"gpu_quota": {"gpu": "H100-SXM", "gpus": 16}}
    assert relaxed["slo[chat].tpot_ms"] == {"slo": {"service": "chat", "tpot_ms": 75.0}}
    assert relaxed["slo[chat].ttft_ms"] == {"slo": {"service": "chat", "ttft_ms": 2500.0}}
    assert relaxed["budget"] == {"budget": {"usd_per_hour": 62.5}}
    assert relaxed["headroom"] == {"headroom": {"fraction": 0.1}}
    assert relaxed["filter.providers"] == {"constraints": {"providers": None}}
    assert len(relaxed) == 6


def test_fingerprint_follows_the_scenario_and_the_base():
    a = parse_review(review(scenarios=[{"name": "x", "changes": [{"demand": {"factor": 2}}]}]))
    b = parse_review(review(scenarios=[{"name": "x", "changes": [{"demand": {"factor": 3}}]}]))
    data = review(scenarios=[{"name": "x", "changes": [{"demand": {"factor": 2}}]}])
    data["base"]["workload"]["services"][0]["demand"]["requests_per_s"] = 6
    c = parse_review(data)
    fa, fb, fc = (r.fingerprint(r.scenario("x")) for r in (a, b, c))
    assert len({fa, fb, fc}) == 3
    assert a.fingerprint(a.scenario("x")) == parse_review(review(
        scenarios=[{"name": "x", "changes": [{"demand": {"factor": 2}}]}])).fingerprint(a.scenario("x"))


# ---------------------------------------------------------------- bad review files
def test_a_change_has_exactly_one_kind():
    msgs = violations(review(scenarios=[{"name": "x", "changes": [{"demand": {"factor": 2}, "budget": {"usd_per_hour": 1}}]}]))
    assert any("review.scenarios[0].changes[0]" in m and "exactly one kind" in m for m in msgs)


def test_unknown_names_are_reported_with_their_path_before_any_solve():
    msgs = violations(review(scenarios=[{"name": "x", "changes": [
        {"demand": {"service": "chta", "factor": 2}},
        {"price": {"gpu": "H100", "factor": 0.5}},
        {"offer_quota": {"offer": "aws/p5.48xlarg", "instances": 1}},
    ]}]))
    text = "\n".join(msgs)
    assert "review.scenarios[0].changes[0].demand.service: unknown service 'chta'; did you mean 'chat'?" in text
    assert "review.scenarios[0].changes[1].price.gpu: unknown GPU type 'H100'" in text
    assert "changes[2].offer_quota.offer: unknown offer 'aws/p5.48xlarg'; did you mean 'aws/p5.48xlarge'" in text


def test_a_price_change_that_matches_no_offer_is_refused():
    msgs = violations(review(scenarios=[{"name": "x", "changes": [{"price": {"provider": "lambda", "gpu": "T4", "factor": 2}}]}]))
    assert any("no offer matches every selector" in m for m in msgs)


def test_sweeps_are_checked():
    assert any("needs `parameter`" in m for m in violations(review(sweeps=[{"name": "s", "change": "slo",
                                                                         "fixed": {"service": "chat"}, "values": [1]}])))
    assert any("down to" in m for m in violations(review(sweeps=[{"name": "s", "change": "demand",
                                                                 "values": {"from": 5, "to": 1, "step": 1}}])))
    msgs = violations(review(sweeps=[{"name": "s", "change": "demand", "values": [1, -2]}]))
    assert any("review.sweeps[0].values[1].demand.factor" in m and "sweep 's' at -2" in m for m in msgs)


def test_duplicate_scenario_file_names_are_refused():
    msgs = violations(review(scenarios=[{"name": "A b"}, {"name": "a-b"}]))
    assert any("same file name 'a-b'" in m for m in msgs)


def test_base_workload_errors_carry_the_review_path(tmp_path):
    data = review()
    data["base"]["workload"]["services"][0]["demand"]["requests_per_s"] = -1
    assert any(m.startswith("review.base.workload.services[0].demand.requests_per_s") for m in violations(data))
    data = {"base": {"workload": "missing.json"}}
    with pytest.raises(InputError, match="file not found"):
        parse_review(data, base_dir=str(tmp_path))


def test_base_workload_from_a_file_relative_to_the_review(tmp_path):
    (tmp_path / "w.json").write_text(json.dumps(BASE))
    r = parse_review({"base": {"workload": "w.json"}, "sensitivity": {"enabled": False}}, base_dir=str(tmp_path))
    assert [s.name for s in r.workload.services] == ["chat", "embed"]


# ---------------------------------------------------------------- applying changes
def test_demand_scales_one_service_or_all():
    w, _ = apply({"demand": {"factor": 2}}, {"demand": {"service": "embed", "factor": 1.5}})
    assert w.services[0].demand.requests_per_s == 10
    assert w.services[1].demand.items_per_min == 300 * 2 * 1.5


def test_prices_scale_by_gpu_and_provider_including_spot():
    base = default_catalog()
    _, cat = apply({"price": {"gpu": "H100-SXM", "factor": 0.5}}, {"price": {"provider": "aws", "factor": 2}})
    for old, new in zip(base.offers, cat.offers):
        factor = (0.5 if old.gpu == "H100-SXM" else 1) * (2 if old.provider == "aws" else 1)
        assert new.price_usd_per_hour == pytest.approx(old.price_usd_per_hour * factor)
        if old.spot_price_usd_per_hour is not None:
            assert new.spot_price_usd_per_hour == pytest.approx(old.spot_price_usd_per_hour * factor)


def test_quotas_budget_headroom_and_slo_are_set_or_removed():
    w, _ = apply({"gpu_quota": {"gpu": "H100-SXM", "gpus": None}}, {"gpu_quota": {"gpu": "L4", "gpus": 4}},
                 {"offer_quota": {"offer": "aws/g6.xlarge", "instances": 2}}, {"budget": {"usd_per_hour": None}},
                 {"headroom": {"fraction": 0.5}}, {"slo": {"service": "chat", "tpot_ms": None, "ttft_ms": 900}})
    c = w.constraints
    assert c.gpu_quotas == {"L4": 4} and c.offer_quotas == {"aws/g6.xlarge": 2}
    assert c.budget_usd_per_hour is None and c.headroom == 0.5
    assert (w.services[0].slo.tpot_ms, w.services[0].slo.ttft_ms) == (None, 900)


def test_offers_and_gpus_are_added_and_removed():
    gpu = {"name": "X1", "memory_gib": 96, "memory_bandwidth_gbs": 4000, "fp16_tflops": 900}
    offer = {"provider": "acme", "name": "x1-1", "gpu": "X1", "gpus_per_instance": 1, "price_usd_per_hour": 1.5}
    _, cat = apply({"remove_gpus": ["L4"]}, {"remove_offers": ["aws/g5.xlarge"]}, {"add_gpus": [gpu]},
                   {"add_offers": [offer]})
    ids = {o.id for o in cat.offers}
    assert not any(o.gpu == "L4" for o in cat.offers) and "aws/g5.xlarge" not in ids
    assert cat.offer("acme/x1-1").price_usd_per_hour == 1.5 and cat.gpus["X1"].memory_gib == 96
    assert len(cat.offers) == len(default_catalog().offers) - 1 - sum(o.gpu == "L4" for o in default_catalog().offers) + 1


def test_an_added_offer_must_not_clash_with_an_existing_one():
    offer = {"provider": "aws", "name": "g6.xlarge", "gpu": "L4", "gpus_per_instance": 1, "price_usd_per_hour": 1}
    with pytest.raises(InputError, match="already in the catalog"):
        apply({"add_offers": [offer]})


def test_the_base_is_never_modified():
    r = parse_review(review(sensitivity={"enabled": False}))
    before = r.workload.model_dump_json(), r.catalog.offers
    apply_changes(r.workload, r.catalog, [Change.model_validate({"demand": {"factor": 3}}),
                                          Change.model_validate({"price": {"factor": 3}})])
    assert (r.workload.model_dump_json(), r.catalog.offers) == before


def test_a_change_that_breaks_the_workload_is_an_input_error_with_a_path():
    with pytest.raises(InputError) as exc:
        apply({"demand": {"service": "chat", "factor": 1e6}}, {"demand": {"service": "chat", "factor": 1e6}})
    assert exc.value.violations[0].field == "scenario workload.services[0].demand.requests_per_s"


# ---------------------------------------------------------------- store
def _result(**kw) -> ScenarioResult:
    return ScenarioResult(**{"id": "s1", "name": "s1", "group": "scenario", "status": "optimal", "fingerprint": "f1",
                             "usd_per_hour": 1.25, "plan": {"status": "optimal"}, **kw})


def test_store_round_trips_and_checks_the_fingerprint(tmp_path):
    store = ResultStore(tmp_path)
    store.save(_result())
    back = store.load("s1", "f1")
    assert back.resumed and back.usd_per_hour == 1.25 and back.usd_per_month == pytest.approx(1.25 * 730)
    assert back.to_dict() == _result().to_dict()
    assert store.load("s1", "other") is None
    assert store.load("s2", "f1") is None
    assert not list(store.dir.glob("*.tmp"))


def test_store_retries_errors_and_ignores_truncated_files(tmp_path):
    store = ResultStore(tmp_path)
    store.save(_result(status="error", error="boom"))
    assert store.load("s1", "f1") is None
    store.path("s1").write_text('{"id": "s1", "stat')
    assert store.load("s1", "f1") is None
    store.save(replace(_result(), status="infeasible", usd_per_hour=None))
    assert store.load("s1", "f1").status == "infeasible"


def test_the_documented_review_file_is_valid_and_its_changes_apply():
    """docs/review-example/README.md shows every change kind; keep it true."""
    import re
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent
    text = (root / "docs" / "review-example" / "README.md").read_text()
    data = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))
    del data["base"]["catalog"]  # an illustrative file name
    data["base"]["workload"] = copy.deepcopy(BASE)
    r = parse_review(data)
    scenario = r.scenario("demand-doubles")
    assert len(scenario.changes) == 13
    workload, catalog = apply_changes(r.workload, r.catalog, scenario.changes)
    assert catalog.offer("acme/x1-1").gpu == "X1" and workload.constraints.providers is None
    assert [s.id for s in r.scenarios if s.group == "sweep"][-1] == "chat-tpot-160"


def test_reviews_from_the_network_cannot_name_server_files(tmp_path):
    (tmp_path / "w.json").write_text(json.dumps(BASE))
    with pytest.raises(InputError, match="workload files cannot be read here"):
        parse_review({"base": {"workload": "w.json"}}, base_dir=str(tmp_path), allow_files=False)
    with pytest.raises(InputError, match="catalog files cannot be read here"):
        parse_review(review(base={"workload": copy.deepcopy(BASE), "catalog": "c.yaml"}), allow_files=False)
    data = review()
    data["base"]["workload"]["catalog"] = {"file": "/etc/passwd"}
    with pytest.raises(InputError) as exc:
        parse_review(data, allow_files=False)
    assert exc.value.violations[0].field == "review.base.workload.catalog.file"
    assert parse_review(review(), allow_files=False).workload.name == "demo"


def test_a_review_that_expands_too_far_is_refused():
    sweep = {"name": "s", "change": "demand", "values": {"from": 0.0001, "to": 1, "step": 0.0001}}
    msgs = violations(review(sweeps=[{**sweep, "name": f"s{i}"} for i in range(11)]))
    assert any("expands to 110000 scenarios" in m for m in msgs)
