"""Where a bursty arrival lands (solver/perf/queueing/model.py `_bursty_landing`,
`_bursty_elapsed`): in a step with content as its cluster-mates do, and early in it.

At low and middle load with long prompts and arrival CV 2, the model weighted the steps an
arrival can land in by their length (Poisson arrivals see time averages) and put the arrival
anywhere in the step in progress, with a share of the previous window's Palm count added to
its content. The simulator's arrivals came in clusters: about half found the replica empty
or only decoding (TTFT within a few % of the solo prefill), and those that met a prompt's
prefill had mostly come just after it (they waited nearly all of it). The model's p50 TTFT
sat up to 2x above the simulator's (bench/queueing_vs_sim.py: 83 of 400 points at CV 2 off
by more than 15 % at p50 before this change, 40 after).

The references are the simulator (solver/sim, the same physics) and the renewal function of
gamma-renewal arrivals (Poisson: no excess, so the model is unchanged there)."""

from __future__ import annotations

import numpy as np
import pytest

from solver.catalog import default_catalog
from solver.catalog.hosting import cheapest_host
from solver.models import get_model
from solver.perf import PerfQuery
from solver.perf.queueing import TrafficClass, replica_for
from solver.perf.queueing.model import _ELAPSED_Z, ReplicaLoadModel
from solver.sim import kernel
from solver.sim.replica import step_cost_of
from solver.sim.verify import run_replica_seed, seed_rng, warmup_for

LONG = (TrafficClass(1.0, 3000, 200),)
CHAT = (TrafficClass(0.8, 256, 128), TrafficClass(0.2, 3500, 500))


def _simulated_ttft_ms(replica, classes, rate, cv, per_seed=15_000, seeds=4):
    params = kernel.step_params(step_cost_of(replica))
    runs = [run_replica_seed(replica, classes, rate, arrival_cv=cv, scheduler=None, rng=seed_rng(5, i),
                             measured=per_seed, warmup=warmup_for(per_seed, replica), params=params)
            for i in range(seeds)]
    x = np.concatenate([r.metrics["ttft_ms"] for r in runs])
    return x[np.isfinite(x)]


@pytest.mark.parametrize("classes, utilization, percentiles", [(LONG, 0.05, (50, 99)), (CHAT, 0.1, (50, 90, 99)),
                                                               (CHAT, 0.3, (50, 90, 99))],
                         ids=["long-prompt-5%", "chat-10%", "chat-30%"])
def test_bursty_ttft_percentiles_track_the_simulator(a100_vllm07, classes, utilization, percentiles):
    """TTFT percentiles at CV 2 within 15 % of the simulator's (60,000 requests). Before the
    change the chat mix at 10 % was p50 +18 % (p90 / p99 +23 / +26 % on 80,000 requests) and at
    30 % p50 +79 %; long prompts at 5 % held at p50 and p99 before too (a check that they still
    do; their p90, +29 % before, is +16-18 % now and not checked)."""
    model = ReplicaLoadModel(a100_vllm07, classes, 2.0)
    rate = utilization * model.saturation_rate()
    got = model.at_rate(rate).ttft_ms
    sim = _simulated_ttft_ms(a100_vllm07, classes, rate, 2.0)
    for p in percentiles:
        want = float(np.percentile(sim, p))
        assert got[p] == pytest.approx(want, rel=0.15), (p, got[p], want)


def test_a_bursty_arrival_finds_the_replica_quiet_as_often_as_in_the_simulator(a100_vllm07):
    """The chance that TTFT is within 10 % of the prompt's solo prefill (the replica empty or
    only decoding when it came): the simulator's share within 0.07. Before: 0.40 against 0.58
    (now 0.52)."""
    model = ReplicaLoadModel(a100_vllm07, LONG, 2.0)
    rate = 0.1 * model.saturation_rate()
    st = model._state(rate)
    solo_s = float(model._idle_arrival(st)[1][0]) + a100_vllm07.request_overhead_s
    cdf, _ = model._cdfs(st, ("ttft_ms",))["ttft_ms"]
    got = float(cdf(np.array([1.1 * solo_s]))[0] @ model.share)
    sim = _simulated_ttft_ms(a100_vllm07, LONG, rate, 2.0)
    want = float(np.mean(sim <= 1.1 * solo_s * 1e3))
    assert got == pytest.approx(want, abs=0.07), (got, want)


def test_the_step_left_is_a_law_early_in_the_step_and_uniform_without_bursts(a100_vllm07):
    """Every tabled law runs from exactly 0 to exactly 1, never falls, and sits at or below
    the uniform (an arrival more likely early: more of the step left); for Poisson arrivals
    no table is built (the uniform, the model as it was); steps without content stay uniform."""
    bursty = ReplicaLoadModel(a100_vllm07, CHAT, 2.0)
    for u in (0.05, 0.3, 0.7):
        tp = bursty._ttft_parts(bursty._state(u * bursty.saturation_rate()))
        table = tp.elapsed
        assert table is not None and table.shape == (len(tp.cur_d), len(_ELAPSED_Z))
        assert (table[:, 0] == 0.0).all() and (table[:, -1] == 1.0).all()
        assert (np.diff(table, axis=1) >= -1e-12).all()
        assert (table <= _ELAPSED_Z[None, :] + 1e-12).all()
        assert (table[:, 1:-1] < _ELAPSED_Z[None, 1:-1] - 1e-3).any()  # some entry has content
    poisson = ReplicaLoadModel(a100_vllm07, CHAT, 1.0)
    assert poisson._ttft_parts(poisson._state(0.3 * poisson.saturation_rate())).elapsed is None
    d = np.array([0.01, 0.3])
    no_content = bursty._bursty_elapsed(d, np.zeros(2), np.zeros(2), 0.02, 5.0)
    assert no_content.tobytes() == np.broadcast_to(_ELAPSED_Z, (2, len(_ELAPSED_Z))).tobytes()


def test_landing_weights_favour_content_and_keep_the_total(a100_vllm07):
    """Steps with content are weighted up by their cluster's arrivals (more for short steps
    close to the prompt); the weights still sum to one; the idle chance is left room for;
    with no step without content only the ratios count; with no content nothing moves."""
    model = ReplicaLoadModel(a100_vllm07, CHAT, 2.0)
    d = np.array([0.02, 0.3, 0.3, 0.05])
    w = np.array([0.5, 0.2, 0.2, 0.1])
    content = np.array([False, True, True, True])
    after = np.array([0.0, 0.0, 0.3, 0.0])
    out = model._bursty_landing(d, w, content, after, 0.02, 2.0, idle=0.1)
    assert out.sum() == pytest.approx(1.0, abs=1e-12)
    assert out[1] > w[1] and out[3] / w[3] > out[1] / w[1]  # a short step near its prompt: more
    assert out[2] / w[2] < out[1] / w[1]  # a later chunk of the same content: fewer
    assert out[0] >= 0.1 * (1.0 - 1e-9) - 1e-12  # the idle arrivals' chance still fits
    all_content = model._bursty_landing(d[1:], w[1:] / w[1:].sum(), content[1:], after[1:], 0.02, 2.0, idle=0.0)
    assert all_content.sum() == pytest.approx(1.0, abs=1e-12)
    none = model._bursty_landing(d, w, np.zeros(4, dtype=bool), after, 0.02, 2.0, idle=0.1)
    assert none.tobytes() == w.tobytes()


def test_more_load_never_lowers_a_bursty_percentile(a100_vllm07):
    """Monotone in the rate over the whole range (the landing weights and the step's law
    both move with it)."""
    for classes in (LONG, CHAT):
        model = ReplicaLoadModel(a100_vllm07, classes, 2.0)
        sat = model.saturation_rate()
        prev = None
        for u in np.linspace(0.01, 0.95, 40):
            at = model.at_rate(float(u) * sat)
            now = [at.ttft_ms[p] for p in (50, 90, 99)]
            if prev is not None:
                assert all(b >= a * (1.0 - 2e-3) for a, b in zip(prev, now)), (u, prev, now)
            prev = now


def _replica(gpu_name: str, model: str, precision: str, engine: str):
    """One GPU of `gpu_name` on its cheapest host, serving `model` as the planner models it."""
    catalog = default_catalog()
    gpu = catalog.gpus[gpu_name]
    host = cheapest_host(catalog, gpu, 1)
    return replica_for(PerfQuery(model=get_model(model), gpu=gpu, gpus_per_replica=1, interconnect=host.interconnect,
                                 usable_memory_gib=host.usable_memory_gib, precision=precision, engine=engine,
                                 instances_per_replica=host.instances_per_replica,
                                 inter_node_gbs=host.inter_node_gbs))


def test_a_held_back_class_is_evaluated_in_chunks_without_changing_a_bit(monkeypatch):
    """A class the KV cache holds one or two of (`_held_back`: its later TTFT over 24 wait
    atoms on the latency's 500-point grid) is evaluated class by class in chunks of points
    (an independent review measured 3.5 GB for one `at_rate` at CV 2 before): any chunk size
    gives the same bits. (That its own class alone gives its column of the full evaluation
    is held by the frozen rows of tests/test_queueing_speed_equivalence.py: a review's
    mutation of the class slice failed cases 15 and 24 there, not this test.)"""
    from solver.perf.queueing import model as model_mod

    replica = _replica("A10G", "llama-2-7b", "fp16", "sglang")
    classes = (TrafficClass(0.8, 256, 128), TrafficClass(0.2, 3500, 500))
    results = []
    for chunk in (10 ** 12, model_mod._HELD_CHUNK_ELEMENTS, 5_000):
        monkeypatch.setattr(model_mod, "_HELD_CHUNK_ELEMENTS", chunk)
        model = ReplicaLoadModel(replica, classes, 2.0)
        rate = 0.4 * model.saturation_rate()
        assert model._held_back(model._state(rate))  # the case at hand
        at = model.at_rate(rate)
        results.append(repr((at.ttft_ms, at.latency_ms)))
    assert results[0] == results[1] == results[2]


def test_many_classes_are_evaluated_in_chunks_in_bounded_memory(monkeypatch):
    """256 request classes (the schema's most): the TTFT's part without a wait on the
    latency's 500-point grid was one [500, K, C, A] array, 3 GB for one `at_rate` (a 21 KB
    workload took a 3.2 GB process). It is evaluated in chunks of points now: peak traced
    memory stays far below that, and a smaller chunk gives the same bits."""
    import tracemalloc

    from solver.perf.queueing import model as model_mod

    replica = _replica("H100-SXM", "llama-3.1-8b", "fp8", "vllm")
    n = 256
    classes = tuple(TrafficClass(1.0 / n, int(64 * 2 ** (7 * i / (n - 1))), int(16 * 2 ** (6 * ((i * 7) % n) / (n - 1))))
                    for i in range(n))
    results = []
    for chunk in (model_mod._HELD_CHUNK_ELEMENTS, 300_000):
        monkeypatch.setattr(model_mod, "_HELD_CHUNK_ELEMENTS", chunk)
        model = ReplicaLoadModel(replica, classes, 1.0)
        rate = 0.5 * model.saturation_rate()
        tracemalloc.start()
        try:
            at = model.at_rate(rate)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 600 * 2 ** 20, peak  # 3 GB before
        results.append(repr((at.ttft_ms, at.latency_ms)))
    assert results[0] == results[1]


def test_a_table_read_keeps_nan_as_nan():
    """(A NaN place in the step reads as NaN, as the uniform did, not an index error.)"""
    from solver.perf.queueing.model import _table_read

    table = np.broadcast_to(_ELAPSED_Z, (2, len(_ELAPSED_Z))).copy()
    out = _table_read(table, np.array([[[0.5, np.nan], [1.0, 0.0]]]))
    assert out[0, 0, 0] == pytest.approx(0.5) and np.isnan(out[0, 0, 1])
    assert out[0, 1, 0] == 1.0 and out[0, 1, 1] == 0.0
