"""verify_replica: intervals that cover, shrink with more requests, and verdicts that say
met / missed / inconclusive where they should."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solver.perf.queueing import TrafficClass
from solver.perf.queueing.physics import Replica, StepCost
from solver.sim.stats import sectioned_percentile, t_quantile, weighted_percentile
from solver.sim.verify import requests_for, verify_replica

T = TrafficClass
# llama-3.1-8b fp16 on one H100-SXM as replica_for reads it (frozen here: the tests need a replica, not the
# performance model's latest numbers).
H100 = Replica(StepCost(0.0053090031569726255, 0.0, 0.0, 1.8442092317124093e-05, 1.388143275583886e-06,
                        3.782610403133338e-06, 4.806630239466059e-08, 6.929276087380862e-10, 0.004105599999999987,
                        0.0024576000000000042, 6.710000000000049e-06), 256, 459596.963828125, 8192, 0.01254)
ONE = [T(1.0, 1024, 256)]
SATURATION = 20.57  # requests/s of ONE on H100 (ReplicaLoadModel.saturation_rate)


def test_t_quantiles_match_the_tables():
    for prob, df, want in ((0.975, 1, 12.706204736), (0.975, 3, 3.182446305), (0.975, 10, 2.228138852),
                           (0.95, 30, 1.697260887), (0.975, 1e6, 1.959966)):
        assert t_quantile(prob, df) == pytest.approx(want, rel=1e-6)


def test_weighted_percentile_is_the_inverted_cdf():
    v = np.array([5.0, 1.0, 3.0, np.nan, 2.0, 4.0])
    assert [weighted_percentile(v, None, p) for p in (20, 21, 50, 99, 100)] == [1.0, 2.0, 3.0, 5.0, 5.0]
    assert weighted_percentile(np.array([1.0, 2.0]), np.array([3.0, 1.0]), 75) == 1.0
    assert weighted_percentile(np.array([1.0, 2.0]), np.array([3.0, 1.0]), 76) == 2.0
    assert weighted_percentile(np.array([1.0, math.inf]), None, 99) == math.inf


def test_requests_put_200_beyond_the_percentile():
    assert requests_for(99) == 20_000 and requests_for(90) == 2_000 and requests_for(50) == 400


def test_clearly_met_and_clearly_missed():
    v = verify_replica(H100, ONE, 0.5 * SATURATION, percentile=99, bounds={"ttft_ms": 2000, "tpot_ms": 100})
    assert v.verdict == "met" and v.keeps_up and v.seeds == 4 and v.requests == 20_000
    assert set(v.verdicts.values()) == {"met"}
    est = v.estimates["ttft_ms"]
    assert est.ci_ms[0] <= est.value_ms <= est.ci_ms[1] <= 2000
    v = verify_replica(H100, ONE, 0.5 * SATURATION, percentile=99, bounds={"ttft_ms": 2000, "tpot_ms": 5})
    assert v.verdict == "missed" and v.verdicts == {"ttft_ms": "met", "tpot_ms": "missed"}
    assert v.estimates["tpot_ms"].ci_ms[0] > 5 and "tpot" in v.reason


def test_a_bound_at_the_estimate_is_inconclusive_and_more_seeds_are_tried():
    first = verify_replica(H100, ONE, 0.8 * SATURATION, percentile=90, bounds={}, seeds=4)
    edge = first.estimates["ttft_ms"].value_ms
    v = verify_replica(H100, ONE, 0.8 * SATURATION, percentile=90, bounds={"ttft_ms": edge}, seeds=4,
                       max_requests=first.requests)
    assert v.verdict == "inconclusive" and v.seeds == 4 and "straddling" in v.reason
    lo, hi = v.estimates["ttft_ms"].ci_ms
    assert lo <= edge <= hi
    more = verify_replica(H100, ONE, 0.8 * SATURATION, percentile=90, bounds={"ttft_ms": edge}, seeds=4,
                          max_requests=8 * first.requests)
    assert more.seeds in (8, 16, 32) and more.requests == more.seeds * first.requests_per_seed
    if more.verdict == "inconclusive":  # still straddling: it used all it was allowed
        assert more.seeds == 32


def test_a_replica_that_cannot_keep_up_misses_with_the_reason():
    v = verify_replica(H100, ONE, 1.5 * SATURATION, percentile=99, bounds={"ttft_ms": 1e6, "tpot_ms": 1e4})
    assert v.verdict == "missed" and not v.keeps_up
    assert "cannot keep up" in v.reason and set(v.verdicts.values()) == {"missed"}


def test_intervals_shrink_as_requests_grow():
    # 8 seeds of 1,000 / 4,000 / 16,000 / 64,000 requests at p99: the interval's width should fall by about
    # 2x per step (1 / sqrt(requests)), 8x over the range.
    widths = []
    for tail in (80, 320, 1280, 5120):
        v = verify_replica(H100, ONE, 0.7 * SATURATION, percentile=99, bounds={}, seeds=8, min_tail_requests=tail,
                           max_requests=1_000_000)
        lo, hi = v.estimates["ttft_ms"].ci_ms
        widths.append(hi - lo)
    assert widths == sorted(widths, reverse=True), widths
    assert 4 < widths[0] / widths[-1] < 16, widths


def test_sectioning_intervals_cover_the_long_run_percentile():
    # 40 independent verifications of 4 seeds x 1,000 requests at 85 % load against a 400,000-request run:
    # a 95 % interval should cover the long-run p90 TTFT in about 38 of them (binomial: >= 33 with
    # probability > 99.5 %). The i.i.d. order-statistic interval on the pooled requests covers far less
    # (the queue's waits are autocorrelated); docs/queueing.md has the full comparison (bench/sim_ci_coverage.py).
    rate = 0.85 * SATURATION
    long = verify_replica(H100, ONE, rate, percentile=90, bounds={}, seeds=8, min_tail_requests=40_000,
                          max_requests=400_000, seed=999)
    truth = long.estimates["ttft_ms"].value_ms
    covered = 0
    for s in range(40):
        v = verify_replica(H100, ONE, rate, percentile=90, bounds={}, seeds=4, min_tail_requests=400, seed=s)
        lo, hi = v.estimates["ttft_ms"].ci_ms
        covered += lo <= truth <= hi
    assert covered >= 33, covered


def test_sectioned_percentile_weighs_sources():
    # Two sources per section, the second standing for 3x the traffic per request.
    a, b = np.full(100, 1.0), np.full(100, 2.0)
    est = sectioned_percentile([[(a, 1.0), (b, 3.0)], [(a, 1.0), (b, 3.0)]], 30)
    assert est.value_ms == 2.0 and est.ci_ms == (2.0, 2.0)
    est = sectioned_percentile([[(a, 1.0), (b, 3.0)]], 20)
    assert est.value_ms == 1.0 and est.ci_ms is None


@pytest.mark.parametrize("kwargs,match", [
    (dict(percentile=97), "percentile"), (dict(seeds=1), "seeds"), (dict(bounds={"ttft": 5}), "unknown metric"),
    (dict(bounds={"ttft_ms": -1}), "positive"), (dict(max_requests=100), "max_requests"),
    (dict(rate_per_s=-1), "rate_per_s")])
def test_bad_arguments_raise_naming_them(kwargs, match):
    args = dict(rate_per_s=5.0, percentile=99, bounds={"ttft_ms": 100})
    args.update(kwargs)
    rate = args.pop("rate_per_s")
    with pytest.raises(ValueError, match=match):
        verify_replica(H100, ONE, rate, **args)


def test_what_settles_a_verdict():
    from solver.sim.stats import Estimate
    from solver.sim.verify import next_step

    def est(value, half):
        return Estimate(value, (value - half, value + half), (value,) * 4, 0.95)

    narrow, wide = est(100.0, 10.0), est(100.0, 40.0)
    assert next_step({"ttft_ms": narrow}, {"ttft_ms": "met"}, {"ttft_ms": 200}) is None
    assert next_step({"ttft_ms": narrow}, {"ttft_ms": "inconclusive"}, {"ttft_ms": 105}) == "more"
    # A wide spread is a heavy tail: longer seeds, unless the bound is far above the interval.
    assert next_step({"ttft_ms": wide}, {"ttft_ms": "met"}, {"ttft_ms": 150}) == "longer"
    assert next_step({"ttft_ms": wide}, {"ttft_ms": "met"}, {"ttft_ms": 180}) is None
    assert next_step({"ttft_ms": wide}, {"ttft_ms": "inconclusive"}, {"ttft_ms": 120}) == "longer"
    # A miss settles it, whatever else is open.
    assert next_step({"ttft_ms": wide, "tpot_ms": narrow}, {"ttft_ms": "inconclusive", "tpot_ms": "missed"},
                     {"ttft_ms": 120, "tpot_ms": 50}) is None


def test_a_heavy_tail_gets_longer_seeds():
    # Bursty arrivals (CV 3) at 80 %: the seeds' p99 TTFTs spread by more than +-25 %, so the seeds are run
    # again longer (not more of them), up to max_requests.
    v = verify_replica(H100, ONE, 0.8 * SATURATION, arrival_cv=3.0, percentile=99, bounds={"ttft_ms": 3000})
    assert v.seeds == 4 and v.requests_per_seed > 5000 and v.requests <= 200_000
    assert len(v.runs) == 4 and all(r.requests == v.requests_per_seed for r in v.runs)
