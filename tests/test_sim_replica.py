"""The replica simulator: the compiled core reproduces the old simulator request for request,
the two schedulers do what their definitions say on cases small enough to work out by
hand, and more load never lowers a percentile."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from solver.perf.queueing import TrafficClass
from solver.perf.queueing.physics import StepCost
from solver.sim.replica import simulate_replica, simulate_requests, step_cost_of

DATA = Path(__file__).resolve().parent / "data" / "sim_reference.json"
T = TrafficClass
STEP_10MS = StepCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.01, 0.01, 0.0)  # every step takes 10 ms


def _reference_cases():
    return json.loads(DATA.read_text())["cases"]


@pytest.mark.parametrize("case", _reference_cases(), ids=lambda c: c["name"])
def test_core_reproduces_the_old_simulator_request_for_request(case):
    # tests/data/sim_reference.json: the old pure-Python simulator (c2f5a0c, scripts/sim_reference.py)
    # on StepCost.seconds. Same seed, same arrivals, same steps: the same floats, bit for bit.
    classes = [T(s, p, o) for s, p, o in case["classes"]]
    sim = simulate_replica(StepCost(**case["step"]), classes, case["rate_per_s"], max_seqs=case["max_seqs"],
                           kv_cache_tokens=case["kv_cache_tokens"], token_budget=case["token_budget"],
                           request_overhead_s=case["request_overhead_s"], duration_s=case["duration_s"],
                           seed=case["seed"], arrival_cv=case["arrival_cv"], drain_limit_s=case["drain_limit_s"])
    assert sim.ttft_s.tolist() == case["ttft_s"]
    assert sim.latency_s.tolist() == case["latency_s"]
    assert sim.class_index.tolist() == case["class_index"]
    assert sim.waited.astype(int).tolist() == case["waited"]
    for name in ("mean_batch", "batch_sd", "completed_per_s", "busy_fraction", "steps", "simulated_s", "unfinished"):
        assert getattr(sim, name) == case[name], name


def _replay(requests, scheduler, budget=100, max_seqs=8):
    arrival, prompt, output = zip(*requests)
    return simulate_requests(STEP_10MS, arrival, prompt, output, max_seqs=max_seqs, kv_cache_tokens=1e6,
                             token_budget=budget, scheduler=scheduler)


def _ms(x):
    return pytest.approx(np.asarray(x, dtype=float), abs=1e-9)


def test_prefill_first_stops_decodes_for_a_prefill_step():
    # R0 (50-token prompt, 4 tokens out) at 0; R1 (30, 3) at 15 ms. Steps of 10 ms.
    # prefill_first: [0,10] prefill R0 | [10,20] decode R0 | [20,30] prefill R1 (R0 waits) |
    # [30,40] decode both | [40,50] decode both: both done.
    sim = _replay([(0.0, 50, 4), (0.015, 30, 3)], "prefill_first")
    assert sim.ttft_s * 1e3 == _ms([10, 15])
    assert sim.latency_s * 1e3 == _ms([50, 35])
    assert sim.tpot_s * 1e3 == _ms([40 / 3, 10])
    # chunked_mixed: R1's prompt rides along with R0's decode at [20,30]; R0 never stalls.
    sim = _replay([(0.0, 50, 4), (0.015, 30, 3)], "chunked_mixed")
    assert sim.ttft_s * 1e3 == _ms([10, 15])
    assert sim.latency_s * 1e3 == _ms([40, 35])
    assert sim.tpot_s * 1e3 == _ms([10, 10])


def test_a_prefill_only_step_does_not_read_the_paused_sequences_context():
    # 10 ms steps plus 0.1 ms per context token of the sequences a step decodes.
    step = StepCost(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1e-4, 0.0, 0.01, 0.01, 0.0)
    # R0 (50-token prompt, 4 out) at 0; R1 (30, 3) at 15 ms. prefill_first:
    # [0,10] prefill R0 | [10,25.1] decode R0 (51 context tokens: 5.1 ms) |
    # [25.1,35.1] prefill R1 alone: R0 is paused and its 52 tokens are not read |
    # [35.1,53.4] decode both (52 + 31 context: 8.3 ms) | [53.4,71.9] decode both (53 + 32): both done.
    sim = simulate_requests(step, (0.0, 0.015), (50, 30), (4, 3), max_seqs=8, kv_cache_tokens=1e6,
                            token_budget=100, scheduler="prefill_first")
    assert sim.ttft_s * 1e3 == _ms([10, 20.1])
    assert sim.latency_s * 1e3 == _ms([71.9, 56.9])


def test_a_prompt_longer_than_the_budget_is_prefilled_in_consecutive_prefill_only_steps():
    # All at t = 0, budget 100 tokens: R0 (10, 3 out), R1 (250, 2), R2 (20, 2).
    # prefill_first: [0,10] R0 alone (R1's 250 tokens do not fit the 90 left; FCFS, so R2 waits too) |
    # [10,20] R1 100 | [20,30] R1 100 (R0 does not decode) | [30,40] R1's last 50 + R2's 20 |
    # [40,50] decode R0, R1, R2 (R1, R2 done) | [50,60] decode R0 (done).
    sim = _replay([(0.0, 10, 3), (0.0, 250, 2), (0.0, 20, 2)], "prefill_first")
    assert sim.ttft_s * 1e3 == _ms([10, 40, 40])
    assert sim.latency_s * 1e3 == _ms([60, 50, 50])
    assert sim.tpot_s * 1e3 == _ms([25, 10, 10])
    assert sim.waited.tolist() == [False, True, True]
    # chunked_mixed: [0,10] R0 10 + R1 90 | [10,20] decode R0 + R1 99 | [20,30] decode R0 (done) + R1 61 +
    # R2 20 | [30,40] decode R1, R2 (done).
    sim = _replay([(0.0, 10, 3), (0.0, 250, 2), (0.0, 20, 2)], "chunked_mixed")
    assert sim.ttft_s * 1e3 == _ms([10, 30, 30])
    assert sim.latency_s * 1e3 == _ms([30, 40, 40])
    assert sim.waited.tolist() == [False, False, True]


def test_admission_is_fcfs_with_kv_reserved_for_the_whole_length():
    # KV room 300 tokens: R0 (100 + 100) runs; R1 (150 + 50) must wait for R0 to leave; R2 (10 + 10) would fit
    # but the head blocks it.
    arrival, prompt, output = (0.0, 0.001, 0.002), (100, 150, 10), (100, 50, 10)
    for scheduler in ("chunked_mixed", "prefill_first"):
        sim = simulate_requests(STEP_10MS, arrival, prompt, output, max_seqs=8, kv_cache_tokens=300,
                                token_budget=1000, scheduler=scheduler)
        r0_done = sim.latency_s[0]
        assert r0_done == pytest.approx(1.0, abs=1e-9)  # 1 prefill + 99 decode steps of 10 ms
        assert sim.ttft_s[1] + arrival[1] > r0_done and sim.ttft_s[2] + arrival[2] > r0_done
        assert sim.waited.tolist() == [False, True, True]


def test_one_token_outputs_finish_with_their_prompt_and_have_no_tpot():
    sim = _replay([(0.0, 30, 1), (0.0, 30, 2)], "chunked_mixed")
    assert sim.latency_s * 1e3 == _ms([10, 20])
    assert math.isnan(sim.tpot_s[0]) and sim.tpot_s[1] * 1e3 == pytest.approx(10)


def _percentiles(step, rate, seed, scheduler):
    sim = simulate_replica(step, [T(0.8, 512, 128), T(0.2, 3000, 300)], rate, max_seqs=128, kv_cache_tokens=300_000,
                           token_budget=4096, duration_s=400, seed=seed, scheduler=scheduler)
    out = {}
    for name, values in (("ttft", sim.ttft_s), ("tpot", sim.tpot_s), ("latency", sim.latency_s)):
        for p in (50, 90, 99):
            out[f"{name} p{p}"] = float(np.nanpercentile(values, p))
    return out


@pytest.mark.parametrize("scheduler", ["chunked_mixed", "prefill_first"])
def test_more_load_never_lowers_a_percentile(scheduler):
    # Paired by seed (the same seed at a higher rate gives the same arrival pattern, compressed in time):
    # each percentile's increase from one load to the next is positive by a one-sided 95 % t bound over 8 seeds.
    from solver.sim.stats import t_quantile

    step = StepCost(0.0053, 0.0, 0.0, 1.84e-05, 1.39e-06, 3.78e-06, 4.8e-08, 6.9e-10, 0.0041, 0.00246, 6.7e-06)
    rates = (4.0, 7.0, 10.0)
    runs = {r: [_percentiles(step, r, seed, scheduler) for seed in range(8)] for r in rates}
    for low, high in zip(rates, rates[1:]):
        for key in runs[low][0]:
            d = np.array([b[key] - a[key] for a, b in zip(runs[low], runs[high])])
            bound = d.mean() - t_quantile(0.95, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
            assert bound > 0, f"{key}: {rates} -> mean change {d.mean():.4g} s, one-sided bound {bound:.4g}"


def test_a_step_time_function_is_read_into_the_same_step_cost():
    # The old signature took the performance model's step function: it is fitted as replica_for does,
    # the MoE expert fraction read off the curvature of small steps.
    from solver.catalog import default_catalog
    from solver.models import get_model
    from solver.perf import PerfQuery
    from solver.perf.queueing import replica_for

    catalog = default_catalog()
    for model, gpus in (("llama-3.1-8b", 1), ("mixtral-8x7b", 2)):
        # A bare step function cannot say where the engine's CUDA graphs end: replicas whose
        # graphs cover every batch (the limit a StepCost carries otherwise) read back the same.
        q = PerfQuery(model=get_model(model), gpu=catalog.gpus["H100-SXM"], gpus_per_replica=gpus,
                      interconnect="nvlink", usable_memory_gib=80.0 * gpus, precision="fp16",
                      cuda_graph_max_batch=10**9)
        rep = replica_for(q)
        fitted = step_cost_of(rep.step_seconds)
        assert step_cost_of(rep) is rep.step and step_cost_of(rep.step.seconds) is rep.step
        for name, want in rep.step.__dict__.items():
            if name in ("graph_max_decodes", "eager_gap_s"):
                continue  # graphs for every batch: a limit of 1e9 here, none (inf) read off the function
            assert getattr(fitted, name) == pytest.approx(want, rel=1e-9, abs=1e-15), (model, name)


@pytest.mark.parametrize("kwargs,match", [
    (dict(rate_per_s=0), "rate_per_s"), (dict(rate_per_s=math.inf), "rate_per_s"),
    (dict(arrival_cv=-1), "arrival_cv"), (dict(duration_s=0), "duration_s"),
    (dict(kv_cache_tokens=100), "does not fit"), (dict(scheduler="fifo"), "scheduler")])
def test_bad_arguments_raise_naming_them(kwargs, match):
    args = dict(rate_per_s=1.0, max_seqs=8, kv_cache_tokens=1e5, token_budget=512, duration_s=10.0)
    args.update(kwargs)
    rate = args.pop("rate_per_s")
    with pytest.raises(ValueError, match=match):
        simulate_replica(STEP_10MS, [T(1.0, 100, 10)], rate, **args)


def test_a_replayed_request_list_is_checked():
    with pytest.raises(ValueError, match="non-decreasing"):
        simulate_requests(STEP_10MS, [1.0, 0.5], [10, 10], [5, 5], max_seqs=8, kv_cache_tokens=1e5, token_budget=64)
    with pytest.raises(ValueError, match="positive"):
        simulate_requests(STEP_10MS, [0.0], [0], [5], max_seqs=8, kv_cache_tokens=1e5, token_budget=64)
    with pytest.raises(ValueError, match="does not fit"):
        simulate_requests(STEP_10MS, [0.0], [900], [200], max_seqs=8, kv_cache_tokens=1000, token_budget=64)
