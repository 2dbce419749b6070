"""Bursty arrivals fill the batch more often: the queue beyond the last slot is GI/M/N's
geometric law with the gamma-renewal arrivals' root sigma (model._queue_ratio), not M/M/N's
rho. Checked against its defining equation and against the simulator's time with every slot
busy on a 20-slot A10G, where M/M/N's ratio gave the full batch half the time it has."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from solver.perf import queueing as Q
from solver.perf.queueing.model import _queue_ratio
from solver.sim.replica import simulate_replica

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from queueing_vs_sim import CONFIGS, replica_of  # noqa: E402  (the grid's replicas, as the benchmark builds them)

SHORT = (Q.TrafficClass(1.0, 256, 128),)


@pytest.mark.parametrize("cv", [0.5, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.8, 0.95])
def test_the_ratio_solves_the_gi_m_n_equation(rho, cv):
    k = 1.0 / cv ** 2
    sigma = _queue_ratio(rho, cv)
    assert 0.0 < sigma < 1.0
    assert sigma == pytest.approx((1.0 + (1.0 - sigma) / (k * rho)) ** -k, abs=1e-9)
    # Burstier arrivals queue longer; smoother ones shorter; Poisson is M/M/N's rho.
    assert (sigma > rho) if cv > 1 else (sigma < rho)


def test_poisson_keeps_rho_and_the_ratio_grows_with_the_load():
    assert _queue_ratio(0.7, 1.0) == 0.7
    for cv in (0.5, 2.0):
        ratios = [_queue_ratio(r, cv) for r in np.linspace(0.05, 0.98, 40)]
        assert np.all(np.diff(ratios) > 0)


def test_a_few_slot_replica_is_full_as_often_as_in_the_simulator():
    """Llama-2-7B on an A10G (SGLang), 20 slots. At arrival CV 2 the simulator has every slot
    busy 41 % of the time at 80 % load; M/M/N's geometric queue gave the model's arrivals a
    22 % chance to find them so (40 % now). Poisson arrivals are unchanged (20 % either)."""
    rep = replica_of(next(c for c in CONFIGS if c[0] == "a10g-7b-sglang"))
    for cv, u in ((2.0, 0.8), (1.0, 0.8)):
        model = Q.load_model(rep, SHORT, cv)
        assert model.slots == 20
        rate = u * model.saturation_rate()
        wait = model._state(rate).wait
        sim = simulate_replica(rep, SHORT, rate, max_seqs=model.slots, kv_cache_tokens=rep.kv_cache_tokens,
                               token_budget=rep.token_budget, request_overhead_s=rep.request_overhead_s,
                               duration_s=30000 / rate, seed=5, arrival_cv=cv, scheduler=rep.scheduler)
        busy = sim.batch_time_s[model.slots:].sum() / sim.batch_time_s.sum()
        assert wait == pytest.approx(busy, rel=0.15), (cv, wait, busy)
