"""A prefill-first engine saturates with a queue: its freed slots' prompts are prefilled together.

Below saturation the prompts of a prefill-first engine (SGLang; vLLM V0 without chunked
prefill) trickle in and are prefilled in a chain of small steps between decodes
(`ReplicaLoadModel._prefill_chain`). At saturation requests always wait, so each decode block
is followed by prefill steps that admit the prompts of the slots it freed at once
(`_queued_prefill_step`). The saturation rate uses the latter (docs/queueing.md, "A
prefill-first engine saturates with a queue"). Checked against the simulator (solver/sim,
the reference for queueing) under overload on the grid's replicas (bench/queueing_vs_sim.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from solver.perf import queueing as Q
from solver.perf.queueing.model import ReplicaLoadModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from queueing_vs_sim import CONFIGS, MIXES, replica_of  # noqa: E402  (the grid's replicas and mixes)
from test_held_capacity import _overload_throughput  # noqa: E402  (the simulator under overload)

T = Q.TrafficClass


def _replica(label: str):
    from solver.confidence import slowdown

    return replica_of(next(c for c in CONFIGS if c[0] == label)).slowed(slowdown(0.9))


@pytest.mark.parametrize("label, mix, before", [
    # Qwen3-30B-A3B fp8 on an H100 (SGLang): each small prefill step pays an MoE's expert reads
    ("h100-qwen3moe-fp8-sglang", "short", 0.52),
    ("h100-qwen3moe-fp8-sglang", "mix-rag", 0.82),
    ("2xa100-32b-vllm07-4k", "short", 0.85),  # vLLM 0.7, chunked prefill off
])
def test_the_saturation_is_what_the_simulator_serves_under_overload(label, mix, before):
    """The trickle chain's saturation was `before` x the simulator's; now within 12 %."""
    replica = _replica(label)
    assert replica.scheduler == "prefill_first"
    classes = tuple(T(*c) for c in MIXES[mix][0])
    measured = _overload_throughput(replica, classes, requests=20_000)
    sat = ReplicaLoadModel(replica, classes, 1.0).saturation_rate()
    assert 0.88 * measured <= sat <= 1.08 * measured, (sat, measured)


def test_the_queued_step_prefills_the_freed_slots_prompts_in_one_go():
    """The queued step is a decode step plus the prefill of K ~ Poisson(N / (O - 1)) prompts
    in budget-sized steps: above the bare decode step, below it plus K one-prompt steps."""
    model = ReplicaLoadModel(_replica("h100-qwen3moe-fp8-sglang"), (T(1.0, 256, 128),), 1.0)
    N = float(model.slots)
    dec, ctx, base, _ = model._batch_step_parts(np.array([N]))
    queued = float(model._queued_prefill_step(N)[0])
    freed = N / model.decode_steps_per_request
    one = float(model._prefill_only_parts(np.array([256.0]), np.array([256.0 ** 2 / 2]))[3][0])
    assert base[0] < queued < base[0] + freed * one
    # and it is what the trickle chain costs at a low rate's step, not at the saturation rate
    trickle = float(model.mean_step(np.array([N]), 76.6)[0])
    assert queued < 0.6 * trickle
