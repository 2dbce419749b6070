"""Confidence under load, its parts: the slowdown table and its overrides
(solver/confidence.py, Calibration.under_load_slowdown) and a slowed replica
(Replica.slowed). The planner's use of them is in tests/test_robust_caps.py."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from solver.catalog import default_catalog
from solver.confidence import (BAND_CONFIDENCE, DEFAULT_CONFIDENCE, RATE_MARGIN, band_levels, checked_confidence,
                               quantile, rate_margin, slowdown)
from solver.models import get_model
from solver.perf import Calibration, PerfQuery
from solver.perf import queueing as Q
from solver.perf.calibration import UNDER_LOAD_SLOWDOWN
from solver.perf.queueing.physics import StepCost


def _replica(model="llama-3.1-8b", gpu="H100-SXM", precision="fp16"):
    g = default_catalog().gpus[gpu]
    return Q.replica_for(PerfQuery(model=get_model(model), gpu=g, gpus_per_replica=1, interconnect="none",
                                   usable_memory_gib=g.memory_gib, precision=precision))


# ---------------------------------------------------------------- the slowdown table
def test_nominal_is_no_slowdown_and_a_level_reads_the_table():
    assert slowdown("nominal") == slowdown(None) == 1.0
    assert rate_margin("nominal") == rate_margin(None) == 0.0 and rate_margin(0.9) == RATE_MARGIN
    for level, factor in UNDER_LOAD_SLOWDOWN:
        assert slowdown(level) == pytest.approx(factor)
        assert slowdown(level, Calibration()) == pytest.approx(factor)


def test_slowdown_interpolates_linearly_and_never_falls_with_confidence():
    table = ((0.1, 1.0), (0.5, 1.2), (0.9, 1.6))
    assert quantile(0.3, table) == pytest.approx(1.1)
    assert quantile(0.7, table) == pytest.approx(1.4)
    # Beyond the last level the last segment continues (more slowdown, the safe side);
    # below the first level the first factor holds.
    assert quantile(0.95, table) == pytest.approx(1.65)
    assert quantile(0.01, table) == pytest.approx(1.0)
    levels = [0.5 + 0.01 * i for i in range(50)]
    factors = [slowdown(c) for c in levels]
    assert factors == sorted(factors)
    assert slowdown(0.99) > slowdown(0.95)


def test_band_levels_are_two_sided_and_widen_with_confidence():
    assert band_levels(0.8) == pytest.approx((0.1, 0.9))
    low, high = zip(*(band_levels(c) for c in (0.5, 0.8, 0.9, 0.99)))
    assert list(low) == sorted(low, reverse=True) and list(high) == sorted(high)
    assert BAND_CONFIDENCE == 0.8 and DEFAULT_CONFIDENCE == 0.9


@pytest.mark.parametrize("value", [-1, 0.3, 1.5, 1, "high", float("nan"), float("inf"), True, None])
def test_a_confidence_is_nominal_or_a_level_from_half_to_0_99(value):
    with pytest.raises(ValueError, match="confidence must be .nominal. or a number from 0.5 to 0.99"):
        checked_confidence(value)


def test_checked_confidence_keeps_good_values():
    assert checked_confidence("nominal") == "nominal"
    assert checked_confidence(0.5) == 0.5 and checked_confidence(0.99) == 0.99


# ---------------------------------------------------------------- overrides
def test_the_table_is_overridable_per_level():
    cal = Calibration.from_overrides({"under_load_slowdown.0.9": 1.2})
    assert slowdown(0.9, cal) == 1.2
    assert dict(cal.under_load_slowdown)[0.95] == dict(UNDER_LOAD_SLOWDOWN)[0.95]
    added = Calibration.from_overrides({"under_load_slowdown.0.99": 1.9})
    assert slowdown(0.99, added) == 1.9 and len(added.under_load_slowdown) == len(UNDER_LOAD_SLOWDOWN) + 1
    assert Calibration.from_overrides({"under_load_slowdown.0.9": dict(UNDER_LOAD_SLOWDOWN)[0.9]}) == Calibration()


@pytest.mark.parametrize("overrides,words", [
    ({"under_load_slowdown.1.5": 2.0}, "under_load_slowdown.1.5"),
    ({"under_load_slowdown.high": 2.0}, "under_load_slowdown.high"),
    ({"under_load_slowdown.0.9": 0.0}, "under_load_slowdown.0.9"),
    ({"under_load_slowdown.0.9": -1.0}, "under_load_slowdown.0.9"),
    ({"under_load_slowdown.0.9": float("nan")}, "under_load_slowdown.0.9"),
    ({"under_load_slowdown.0.9": 1.0}, "falls from"),  # below the 0.8 level's factor: not a quantile function
    ({"under_load_slowdonw.0.9": 1.3}, "did you mean"),
])
def test_bad_table_overrides_name_the_key(overrides, words):
    with pytest.raises(ValueError, match=words.replace(".", r"\.")):
        Calibration.from_overrides(overrides)


def test_a_workload_with_a_bad_override_exits_2_naming_it(solver_cli, tmp_path):
    import json
    import subprocess

    doc = {"name": "w", "services": [{"name": "s", "model": "llama-3.1-8b",
                                      "demand": {"requests_per_s": 1, "prompt_tokens": 100, "output_tokens": 50}}],
           "solver": {"calibration": {"under_load_slowdown.0.9": 0.5}}}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(doc))
    proc = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "solver.calibration" in proc.stderr and "under_load_slowdown" in proc.stderr
    assert "Traceback" not in proc.stderr


# ---------------------------------------------------------------- a slowed replica
def test_slowed_scales_every_time_and_nothing_else():
    rep = _replica()
    assert rep.slowed(1.0) is rep
    slow = rep.slowed(1.25)
    for f in fields(StepCost):
        before, after = getattr(rep.step, f.name), getattr(slow.step, f.name)
        # counts (the experts' fraction, the CUDA-graph limit) stay; times scale
        assert after == (before if f.name in ("expert_fraction", "graph_max_decodes") else before * 1.25), f.name
    assert slow.request_overhead_s == rep.request_overhead_s * 1.25
    assert (slow.max_seqs, slow.kv_cache_tokens, slow.token_budget, slow.scheduler) == \
        (rep.max_seqs, rep.kv_cache_tokens, rep.token_budget, rep.scheduler)
    for args in ((1, 0, 0, 0), (64, 64 * 1000, 0, 0), (8, 8000, 2048, 2048 ** 2 / 2)):
        assert slow.step.seconds(*args) == pytest.approx(1.25 * rep.step.seconds(*args), rel=1e-12)
        assert slow.step_seconds(*args) == pytest.approx(1.25 * rep.step_seconds(*args), rel=1e-12)
    assert slow == rep.slowed(1.25) and hash(slow) == hash(rep.slowed(1.25))  # caches keyed on it hit
    prefill_first = Q.Replica(rep.step, rep.max_seqs, rep.kv_cache_tokens, rep.token_budget, scheduler="prefill_first")
    assert prefill_first.slowed(2.0).scheduler == "prefill_first"


def test_a_moe_replica_keeps_its_expert_fraction():
    rep = _replica("mixtral-8x7b", "H100-SXM", "fp8")
    slow = rep.slowed(1.5)
    assert rep.step.expert_fraction > 0 and slow.step.expert_fraction == rep.step.expert_fraction
    assert slow.step.seconds(16, 16000, 512, 512 ** 2 / 2) == pytest.approx(1.5 * rep.step.seconds(16, 16000, 512, 512 ** 2 / 2))


@pytest.mark.parametrize("factor", [0.0, -1.0, math.inf, math.nan])
def test_a_bad_factor_is_refused(factor):
    with pytest.raises(ValueError, match="slowdown factor"):
        _replica().slowed(factor)


@pytest.mark.parametrize("model,gpu,precision,mix", [
    ("llama-3.1-8b", "H100-SXM", "fp16", ((1.0, 1024, 256),)),
    ("llama-3.1-8b", "L4", "fp8", ((0.75, 256, 128), (0.25, 4096, 512))),
    ("mixtral-8x7b", "H100-SXM", "fp8", ((1.0, 512, 256),)),
])
def test_a_slower_replica_is_the_same_queue_in_slower_time(model, gpu, precision, mix):
    """Every time x s and the rate x s give the same dimensionless system: the slowed
    replica at rate r sees s x the model's percentiles at rate r x s. That checks the
    slowdown reaches every time the model uses, and it is how bands are read off the
    model (`percentiles_slowed`, cheaper than a model of the slowed replica)."""
    rep = _replica(model, gpu, precision)
    classes = tuple(Q.TrafficClass(*c) for c in mix)
    sat = Q.saturation_rate(rep, classes)
    for s in (0.9, 1.3):
        assert Q.saturation_rate(rep.slowed(s), classes) == pytest.approx(sat / s, rel=1e-3)
        for load in (0.3, 0.6):
            rate = load * sat / s
            slowed = Q.percentiles_at_rate(rep.slowed(s), classes, rate, percentiles=(50, 99))
            scaled = Q.percentiles_slowed(rep, classes, rate, s, percentiles=(50, 99))
            assert slowed.utilization == pytest.approx(scaled.utilization, rel=1e-3)
            for metric in ("ttft_ms", "tpot_ms", "latency_ms"):
                for p in (50, 99):
                    assert getattr(slowed, metric)[p] == pytest.approx(getattr(scaled, metric)[p], rel=5e-3), \
                        (s, load, metric, p)
    assert Q.percentiles_slowed(rep, classes, 0.5 * sat, 1.0) == Q.percentiles_at_rate(rep, classes, 0.5 * sat)
