"""An arrival's place among the prompts that arrive with it (solver/perf/queueing/model.py
`_split_ahead`): where their content does not fit one step, being ahead of them or behind
decides the step the arrival's own prompt finishes in.

The model put half of them ahead (their mean), so one co-arrival's 3,000-token prompt
beside the arrival's own (a 4,096-token budget) always cost the arrival both prompts'
prefill; in the simulator (and an engine, FCFS) half the time the arrival goes first. Each
such atom now becomes two, a quarter and three quarters of it ahead (the midpoint rule over
the uniform place), each with half the weight. The reference is the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from solver.perf.queueing import TrafficClass
from solver.perf.queueing.model import ReplicaLoadModel
from solver.sim import kernel
from solver.sim.replica import step_cost_of
from solver.sim.verify import run_replica_seed, seed_rng, warmup_for

LONG = (TrafficClass(1.0, 3000, 200),)
SHORT = (TrafficClass(1.0, 256, 128),)


@pytest.mark.parametrize("utilization", [0.21, 0.3])
def test_long_prompt_p99_ttft_tracks_the_simulator(a100_vllm07, utilization):
    """Poisson arrivals of 3,000-token prompts: p99 TTFT within 15 % of the simulator's
    (60,000 requests). Before: 663 against 542 ms at 21 % of saturation (+22 %); at 30 % +15.0 %,
    on the edge (an independent review's run; now +11 %)."""
    model = ReplicaLoadModel(a100_vllm07, LONG, 1.0)
    rate = utilization * model.saturation_rate()
    got = model.at_rate(rate).ttft_ms[99]
    params = kernel.step_params(step_cost_of(a100_vllm07))
    runs = [run_replica_seed(a100_vllm07, LONG, rate, arrival_cv=1.0, scheduler=None, rng=seed_rng(7, i),
                             measured=15_000, warmup=warmup_for(15_000, a100_vllm07), params=params)
            for i in range(4)]
    x = np.concatenate([r.metrics["ttft_ms"] for r in runs])
    want = float(np.percentile(x[np.isfinite(x)], 99))
    assert got == pytest.approx(want, rel=0.15), (got, want)


def test_atoms_split_only_where_the_place_decides_a_step(a100_vllm07):
    """Short prompts on a large budget: nothing split (the model as before). Long ones: each
    split atom has prompts of its own and leaves the step's room, its weight halved over two
    copies (a quarter and three quarters ahead); every row keeps its total weight."""
    short = ReplicaLoadModel(a100_vllm07, SHORT, 1.0)
    at = short.atoms(2.0)
    rows = np.ones((3, len(at.tokens))) / len(at.tokens)
    same_at, same_rows, ahead = short._split_ahead(at, rows, np.zeros(3), 0.0)
    assert ahead is None and same_at is at and same_rows is rows

    long = ReplicaLoadModel(a100_vllm07, LONG, 1.0)
    at = long.atoms(2.0)
    left = np.array([0.0, 1000.0])
    rows = np.random.default_rng(3).uniform(0.0, 1.0, (2, len(at.tokens)))
    out_at, out_rows, ahead = long._split_ahead(at, rows, left, 0.0)
    n = len(at.tokens)
    split = np.nonzero(ahead[:n] == 0.25)[0]
    assert len(split) and len(out_at.tokens) == n + len(split)
    assert (ahead[n:] == 0.75).all() and set(np.unique(ahead[:n])) <= {0.25, 0.5}
    assert (out_at.tokens[n:] == at.tokens[split]).all() and (at.tokens[split] > 0).all()
    total = left[None, :, None] + long.prompt[:, None, None] + at.tokens[None, None, :]
    beyond = (total > long.budget).any(axis=(0, 1))
    assert set(split) == set(np.nonzero(beyond & (at.tokens > 0))[0])
    assert out_rows.sum(axis=1) == pytest.approx(rows.sum(axis=1), rel=1e-12)


def test_going_first_finishes_a_step_earlier(a100_vllm07):
    """One co-arrival's 3,000-token prompt beside the own 3,000 (a 4,096-token budget): with a
    quarter of it ahead the own prompt finishes in the first step, with three quarters in the
    second; half ahead (the old mean) is the second as well."""
    model = ReplicaLoadModel(a100_vllm07, LONG, 1.0)
    at = model.atoms(0.5)
    one = np.nonzero(np.isclose(at.tokens, 3000.0))[0]
    assert len(one)
    k = one[:1]
    sub = type(at)(at.count[k], at.tokens[k], at.pairs[k], at.comp[k], at.j_max)
    first, second = (float(model._own_done(0.0, 0.0, sub, np.zeros(1), np.array([s]))[0, 0, 0]) for s in (0.25, 0.75))
    half = float(model._own_done(0.0, 0.0, sub, np.zeros(1))[0, 0, 0])
    assert first < second and half == second
