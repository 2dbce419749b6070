"""A class the KV cache holds only one or two of saturates the replica with it.

`ReplicaLoadModel._held_capacity`: such a class is c servers of its own, each held for its
slot time L(r), so it takes at most c / (share x L(r)) requests/s of the stream; beyond
that its queue grows and, admission being FCFS, its waiting head blocks everyone behind
it. The saturation rate is the lower of that and the slots' own (docs/queueing.md, "A
held-back class saturates the replica"). Checked against the simulator (solver/sim, the
reference for queueing) under overload, on the case that showed it: Llama-2-7B on an A10G
(SGLang), a chat mix with 20 % of 3,500-token prompts the cache holds one of.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

from solver.perf import queueing as Q
from solver.perf.queueing.model import ReplicaLoadModel
from solver.sim import kernel
from solver.sim.replica import run_core, step_cost_of

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from queueing_vs_sim import CONFIGS, replica_of  # noqa: E402  (bench/queueing_vs_sim.py's grid replicas)

T = Q.TrafficClass
CHAT = (T(0.8, 256, 128), T(0.2, 3500, 500))  # the grid's mix-chat


@pytest.fixture(scope="module")
def a10g():
    """The grid's a10g-7b-sglang replica as the planner checks it at the default confidence
    (1.19x slower): a 6,513-token cache that holds one 3,500-token prompt (+ 250 of output)."""
    from solver.confidence import slowdown

    return replica_of(next(c for c in CONFIGS if c[0] == "a10g-7b-sglang")).slowed(slowdown(0.9))


def _overload_throughput(replica, classes, requests: int = 4000, seed: int = 0) -> float:
    """Requests/s the simulator serves with requests arriving at 3x the model's saturation:
    the middle half of the departures (the batch full and the queue long throughout)."""
    rng = np.random.default_rng(seed)
    shares = np.array([c.share for c in classes])
    cls = rng.choice(len(classes), requests, p=shares / shares.sum())
    prompts = np.array([c.prompt_tokens for c in classes])[cls]
    outputs = np.array([c.output_tokens for c in classes])[cls]
    sat = Q.load_model(replica, classes, 1.0).saturation_rate()
    arrivals = np.sort(rng.uniform(0.0, requests / (3.0 * sat), requests))
    run = run_core(kernel.step_params(step_cost_of(replica)), arrivals, prompts, outputs, open_ended=False,
                   max_seqs=replica.max_seqs, kv_cache_tokens=replica.kv_cache_tokens,
                   token_budget=replica.token_budget, scheduler=replica.scheduler, measure=(0, requests),
                   stop_after_s=1e12, time_limit_s=1e12, window_s=(0.0, 1e12), kv_admission=replica.kv_admission)
    done = np.sort(run.done_s)
    assert np.isfinite(done).all()
    lo, hi = done[requests // 4], done[3 * requests // 4]
    return (requests // 2) / (hi - lo)


def test_the_held_back_class_sets_the_saturation_the_simulator_finds(a10g):
    """The slots alone said 0.35 requests/s, 31 % above the simulator's 0.265; the held-back
    class's own capacity puts it within 10 % (below: the conservative side)."""
    model = Q.load_model(a10g, CHAT, 1.0)
    assert model._class_fit[1] == 1 and model.slots > 1
    slots_only = model._saturation_rate()
    sat = model.saturation_rate()
    measured = _overload_throughput(a10g, CHAT)
    assert slots_only > 1.2 * measured  # what the slots alone claimed
    assert 0.9 * measured <= sat <= 1.02 * measured


def test_the_capacity_is_the_held_back_class_at_its_limit(a10g):
    """At the saturation rate the class's own servers are just full: c = share x rate x L."""
    model = ReplicaLoadModel(a10g, CHAT, 1.0)
    sat = model.saturation_rate()
    st = model._state(sat * (1 - 1e-9))
    m = max(min(st.fluid, st.slots), 1.0)
    stay = model._class_stays(m, float(st.tau(m)), sat)
    assert model.share[1] * sat * stay[1] == pytest.approx(model._class_fit[1], rel=1e-4)
    # just below it the class's wait is finite, and the replica has no rate beyond it
    below = model.at_rate(0.98 * sat)
    assert math.isfinite(below.ttft_ms[99])
    assert math.isinf(model.at_rate(sat).ttft_ms[99])


@pytest.mark.parametrize("classes", [(T(1.0, 512, 256),), (T(0.5, 1500, 100), T(0.5, 200, 600)),
                                     (T(0.9, 256, 128), T(0.1, 2600, 200))])
def test_without_a_binding_held_back_class_the_slots_decide(a10g, classes):
    """One class, or classes the cache holds three or more of (the RAG mix), or a held-back
    class whose own capacity lies above the slots' rate: the saturation rate is the slots'."""
    model = ReplicaLoadModel(a10g, classes, 1.0)
    sat = model.saturation_rate()
    assert sat == model._saturation_rate()
    assert model._held_capacity(sat) == math.inf or model._held_capacity(sat) >= sat


def test_the_capacity_never_raises_the_saturation(a10g):
    """Over shares of the long class from 1 % to 60 %: never above the slots' rate, below it
    from 5 % on (the class's own servers bind: 14 % below at 5 %, 35 % at 60 %), and falling
    as the long class grows."""
    sats = []
    for share in (0.01, 0.05, 0.2, 0.4, 0.6):
        model = ReplicaLoadModel(a10g, (T(1 - share, 256, 128), T(share, 3500, 500)), 1.0)
        sat, slots_only = model.saturation_rate(), model._saturation_rate()
        assert 0 < sat <= slots_only
        if share >= 0.05:
            assert sat < 0.9 * slots_only, share
        sats.append(sat)
    assert all(b <= a for a, b in zip(sats, sats[1:]))
