"""Planner behaviour on hand-made workloads with known answers."""

import pytest

from solver.errors import InfeasibleError, InputError
from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload


def offers(*rows):
    return {"offers": [dict(zip(("provider", "name", "gpu", "gpus_per_instance", "price_usd_per_hour"), r)) for r in rows]}


def profile_service(name, demand, profiles, **extra):
    return {"name": name, "demand": {"items_per_min": demand}, "profiles": profiles, **extra}


def solve(data, **opts):
    return plan(parse_workload(data), PlanOptions(**opts))


def test_two_services_share_one_8gpu_instance():
    # Each service needs one 4-GPU replica; one 8-GPU instance ($10) beats two 4-GPU ones ($6 each).
    cat = offers(("p", "8x", "A100-80GB", 8, 10.0), ("p", "4x", "A100-80GB", 4, 6.0))
    prof = [{"gpu": "A100-80GB", "gpus_per_replica": 4, "items_per_min": 100}]
    r = solve({"services": [profile_service("a", 90, prof), profile_service("b", 80, prof)], "catalog": cat})
    assert r.status == "optimal"
    assert [(f.offer_id, f.instances) for f in r.fleet] == [("p/8x", 1)]
    assert r.total_price_usd_per_hour == pytest.approx(10.0)
    placed = r.placements[0]["replicas"]
    assert sorted(k.split("@")[0] for k, _ in placed) == ["a", "b"]


def test_mixing_gpu_types_beats_one_type():
    # Demand 130: one big (100/min, $3) + one small (40/min, $1) = $4 beats 2 big ($6) and 4 small ($4 tie -> fewer GPUs).
    cat = offers(("p", "big", "A100-80GB", 1, 3.0), ("p", "small", "L4", 1, 1.0))
    prof = [{"gpu": "A100-80GB", "items_per_min": 100}, {"gpu": "L4", "items_per_min": 40}]
    r = solve({"services": [profile_service("s", 130, prof)], "catalog": cat})
    assert r.total_price_usd_per_hour == pytest.approx(4.0)
    assert r.gpus == 2  # tie with 4 x small at $4, broken towards fewer GPUs
    assert sorted((f.gpu, f.instances) for f in r.fleet) == [("A100-80GB", 1), ("L4", 1)]


def test_request_classes_split_across_gpu_types():
    # Short requests are cheap on L4, long ones only fit the SLO on A100: fractional routing.
    cat = offers(("p", "a100", "A100-80GB", 1, 4.0), ("p", "l4", "L4", 1, 1.0))
    svc = {"name": "chat", "demand": {"requests_per_s": 10, "classes": [
        {"name": "short", "share": 0.5, "prompt_tokens": 100, "output_tokens": 50},
        {"name": "long", "share": 0.5, "prompt_tokens": 4000, "output_tokens": 500}]},
        "slo": {"latency_ms": 5000},
        "profiles": [
            {"gpu": "L4", "request_class": "short", "requests_per_s": 5, "latency_ms": 1000},
            {"gpu": "L4", "request_class": "long", "requests_per_s": 1, "latency_ms": 9000},
            {"gpu": "A100-80GB", "request_class": "short", "requests_per_s": 20, "latency_ms": 300},
            {"gpu": "A100-80GB", "request_class": "long", "requests_per_s": 5, "latency_ms": 3000}]}
    r = solve({"services": [svc], "catalog": cat})
    # long: 5 req/s needs one A100 fully (5/5); short: 5 req/s -> one L4 ($1) instead of a 2nd A100.
    assert r.total_price_usd_per_hour == pytest.approx(5.0)
    views = {a.gpu: a for a in r.services[0].assignments}
    assert views["L4"].routed == [pytest.approx(5.0), 0.0]
    assert views["A100-80GB"].routed[1] == pytest.approx(5.0)


def test_min_replicas_and_headroom():
    cat = offers(("p", "one", "L4", 1, 1.0))
    prof = [{"gpu": "L4", "items_per_min": 100}]
    r = solve({"services": [profile_service("s", 150, prof, min_replicas=3)], "catalog": cat,
               "constraints": {"headroom": 0.5}})
    assert r.fleet[0].instances == 3  # 150 x 1.5 = 225 -> 3 replicas, also the minimum
    r = solve({"services": [profile_service("s", 250, prof, min_replicas=1)], "catalog": cat,
               "constraints": {"headroom": 0.5}})
    assert r.fleet[0].instances == 4  # 375 -> 4


def test_budget_infeasible_names_budget_and_fix():
    cat = offers(("p", "one", "L4", 1, 1.0))
    with pytest.raises(InfeasibleError) as exc:
        solve({"services": [profile_service("s", 1000, [{"gpu": "L4", "items_per_min": 100}])], "catalog": cat,
               "constraints": {"budget_usd_per_hour": 5}})
    r = exc.value.reasons[0]
    assert r.constraint == "budget" and "$10.0000/hour" in r.message and "10" in r.fix


def test_quota_infeasible_names_quota():
    cat = offers(("p", "one", "L4", 1, 1.0))
    with pytest.raises(InfeasibleError) as exc:
        solve({"services": [profile_service("s", 1000, [{"gpu": "L4", "items_per_min": 100}])], "catalog": cat,
               "constraints": {"gpu_quotas": {"L4": 4}}})
    assert exc.value.reasons[0].constraint == "quota[L4]"
    assert "raise constraints.gpu_quotas.L4 to 10" in exc.value.reasons[0].fix


def test_quota_moves_work_to_another_gpu():
    cat = offers(("p", "l4", "L4", 1, 1.0), ("p", "a10", "A10", 1, 1.5))
    prof = [{"gpu": "L4", "items_per_min": 100}, {"gpu": "A10", "items_per_min": 100}]
    r = solve({"services": [profile_service("s", 500, prof)], "catalog": cat, "constraints": {"gpu_quotas": {"L4": 3}}})
    assert sorted((f.gpu, f.instances) for f in r.fleet) == [("A10", 2), ("L4", 3)]


def test_vram_infeasible_llama70b_on_a10_suggests_fp8_or_bigger():
    w = {"services": [{"name": "big", "model": "llama-2-70b", "precisions": ["fp16"],
                       "demand": {"requests_per_s": 1, "prompt_tokens": 512, "output_tokens": 128}}],
         "constraints": {"gpu_types": ["A10"]}}
    with pytest.raises(InfeasibleError) as exc:
        solve(w)
    r = exc.value.reasons[0]
    assert r.service == "big" and r.constraint == "vram[big]"
    assert "llama-2-70b at fp16 needs" in r.message and "GB" in r.message
    assert "fp8" in r.fix


def test_slo_infeasible_says_what_is_achievable():
    cat = offers(("p", "one", "L4", 1, 1.0))
    w = {"services": [profile_service("s", 10, [{"gpu": "L4", "items_per_min": 100, "latency_ms": 800}],
                                      slo={"latency_ms": 500})], "catalog": cat}
    with pytest.raises(InfeasibleError) as exc:
        solve(w)
    assert "latency" in exc.value.reasons[0].message and "800" in exc.value.reasons[0].fix


def test_spot_pricing_uses_spot_prices_and_drops_offers_without_spot():
    w = {"services": [{"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16"],
                       "demand": {"requests_per_s": 2, "prompt_tokens": 512, "output_tokens": 128}}],
         "constraints": {"pricing": "spot", "providers": ["aws"]}}
    r = solve(w)
    from solver.catalog import default_catalog
    cat = default_catalog()
    for f in r.fleet:
        assert f.price_usd_per_hour == pytest.approx(cat.offer(f.offer_id).spot_price_usd_per_hour)


def test_llm_plan_uses_estimates_and_meets_slos():
    w = {"services": [{"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
                       "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256},
                       "slo": {"ttft_ms": 2000, "tpot_ms": 60}}]}
    r = solve(w)
    assert r.status == "optimal" and r.evaluation["ok"]
    for a in r.services[0].assignments:
        assert a.source == "estimate"
        assert a.tpot_ms <= 60 and a.ttft_ms <= 2000
    assert r.services[0].capacity >= 5


def test_fp8_never_on_gpus_without_fp8():
    w = {"services": [{"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp8"],
                       "demand": {"requests_per_s": 5, "prompt_tokens": 512, "output_tokens": 256}}],
         "constraints": {"gpu_types": ["A100-80GB", "L4"]}}
    r = solve(w)
    assert {a.gpu for a in r.services[0].assignments} == {"L4"}


def _chat(**extra):
    return {"services": [{"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16"],
                          "demand": {"requests_per_s": 20, "prompt_tokens": 512, "output_tokens": 256},
                          "slo": {"tpot_ms": 50}, **extra}],
            "constraints": {"gpu_types": ["L4"]}}


def test_sizing_with_error_band_buys_more_capacity():
    plain = solve(_chat())
    careful = solve(_chat(size_with_error_band=True))
    # Per GPU, since the careful plan may move to a wider replica (4 L4s at a larger batch
    # rather than 2) when the narrow one's pessimistic TPOT no longer meets the SLO.
    def per_gpu(r):
        a = r.services[0].assignments[0]
        return a.throughput_per_replica[0] / (a.gpus_per_replica * a.instances_per_replica)
    assert per_gpu(careful) < per_gpu(plain)
    assert careful.total_price_usd_per_hour > plain.total_price_usd_per_hour


def test_calibration_override_changes_estimates_and_rejects_unknown_keys():
    from solver.errors import InputError

    base = solve(_chat())
    w = _chat()
    w["solver"] = {"calibration": {"bandwidth_efficiency": 0.45}}
    slower = solve(w)
    assert slower.total_price_usd_per_hour > base.total_price_usd_per_hour
    w["solver"] = {"calibration": {"bandwith_efficiency": 0.5}}
    with pytest.raises(InputError) as exc:
        solve(w)
    assert exc.value.violations[0].field == "solver.calibration" and "did you mean" in str(exc.value)


def test_backends_agree_and_cp_sat_is_refused_saying_why():
    cat = offers(("p", "big", "A100-80GB", 1, 3.0), ("p", "small", "L4", 1, 1.0))
    w = {"services": [profile_service("s", 130, [{"gpu": "A100-80GB", "items_per_min": 100},
                                                 {"gpu": "L4", "items_per_min": 40}])], "catalog": cat}
    scip, highs = solve(w, backend="scip"), solve(w, backend="highs")
    assert scip.status == highs.status == "optimal"
    assert scip.total_price_usd_per_hour == pytest.approx(highs.total_price_usd_per_hour)
    # Issue 25: CP-SAT scales real coefficients to integers and never proved a plan here.
    with pytest.raises(InputError, match="CP-SAT is not offered.*use scip, highs or auto"):
        solve(w, backend="cp-sat")
    with pytest.raises(InputError, match="solver.backend: CP-SAT is not offered"):
        solve({**w, "solver": {"backend": "cp-sat"}})


def test_explain_names_an_offer_removed_by_a_zero_quota():
    cat = offers(("p", "l4", "L4", 1, 1.0), ("p", "a10", "A10", 1, 2.0))
    w = {"services": [profile_service("s", 100, [{"gpu": "L4", "items_per_min": 60}, {"gpu": "A10", "items_per_min": 60}])],
         "catalog": cat, "constraints": {"offer_quotas": {"p/l4": 0}}}
    r = solve(w, explain=True)
    assert [(f.offer_id, f.instances) for f in r.fleet] == [("p/a10", 2)]
    quota = [a for a in r.services[0].alternatives if a.verdict == "quota"]
    assert quota and quota[0].reason.startswith("p/l4: quota")


def test_unservable_class_quotes_the_closest_configuration():
    # The long class misses TTFT everywhere; pruning keeps the 2-GPU replica (it serves the
    # short class as well per GPU), but the 8-GPU one comes closest to the TTFT bound: the
    # message must quote that one, so the fix it gives is the smallest that works.
    w = {"name": "x", "services": [{
        "name": "chat", "model": "llama-3.1-70b", "precisions": ["fp16"],
        "demand": {"requests_per_s": 2, "classes": [
            {"name": "short", "share": 0.9, "prompt_tokens": 256, "output_tokens": 128},
            {"name": "huge", "share": 0.1, "prompt_tokens": 30000, "output_tokens": 256}]},
        "slo": {"ttft_ms": 600, "tpot_ms": 80}}], "constraints": {"gpu_types": ["H100-SXM"]}}
    with pytest.raises(InfeasibleError) as info:
        plan(parse_workload(w))
    (reason,) = info.value.reasons
    assert reason.constraint == "class[chat,huge]"
    assert "with 8 GPUs per replica" in reason.message
    quoted = float(reason.fix.split("at least ")[1].split(" ms")[0])
    assert 600 < quoted < 2000, reason.fix
