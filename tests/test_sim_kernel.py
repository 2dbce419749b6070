"""The simulator's step formula is the analytic model's StepCost, field for field, and the
compiled core computes what the same function computes as plain Python."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from solver.perf.queueing.physics import StepCost
from solver.sim import kernel


def _random_step(rng: np.random.Generator, moe: bool, sampled: bool) -> StepCost:
    return StepCost(weights_s=float(rng.uniform(1e-3, 3e-2)),
                    expert_weights_s=float(rng.uniform(0, 2e-2)) if moe else 0.0,
                    expert_fraction=float(rng.choice([0.0625, 0.25, 0.125])) if moe else 0.0,
                    gemm_s_per_token=float(rng.uniform(1e-6, 5e-5)), lm_head_s_per_decode=float(rng.uniform(0, 3e-6)),
                    s_per_token=float(rng.uniform(0, 1e-5)), s_per_context_token=float(rng.uniform(0, 1e-7)),
                    s_per_pair=float(rng.uniform(0, 1e-9)), fixed_s=float(rng.uniform(0, 5e-3)),
                    decode_fixed_s=float(rng.uniform(0, 5e-3)),
                    s_per_sampled=float(rng.uniform(0, 1e-5)) if sampled else 0.0)


def test_every_stepcost_field_is_read_by_the_kernel():
    # The analytic model's physics may gain fields: the simulator must read each one (or this fails).
    names = [f.name for f in dataclasses.fields(StepCost)]
    assert sorted(names) == sorted(kernel.FIELDS), (
        f"StepCost fields {sorted(set(names) - set(kernel.FIELDS))} are not read by solver/sim/kernel.py "
        f"(and {sorted(set(kernel.FIELDS) - set(names))} are gone). To fix: add them to kernel.FIELDS and "
        "kernel._step_seconds, the same formula as StepCost.seconds")


@pytest.mark.parametrize("moe", [False, True])
@pytest.mark.parametrize("sampled", [False, True])
def test_kernel_step_time_equals_stepcost_seconds(moe, sampled):
    rng = np.random.default_rng(17 + 2 * moe + sampled)
    fn = kernel.compiled().step_seconds
    for _ in range(40):
        step = _random_step(rng, moe, sampled)
        p = kernel.step_params(step)
        for _ in range(50):
            decodes = float(rng.choice([0, 1, 2, 3, 17, 256, 2048]))
            context = decodes * float(rng.integers(1, 8000))
            prefill = float(rng.choice([0, 1, 5, 512, 8192]))
            pairs = prefill * float(rng.integers(0, 8000)) / 2.0 if prefill else 0.0
            if decodes == 0 and prefill == 0:
                continue
            want = step.seconds(decodes, context, prefill, pairs)
            got = fn(p, decodes, context, prefill, pairs)
            assert got == float(want)  # compiled: the same operations in the same order, bit for bit
            assert kernel._step_seconds(p, decodes, context, prefill, pairs) == float(want)  # plain Python: bit for bit


def test_step_params_reads_fields_by_name_and_refuses_unknown_physics():
    step = StepCost(1.0, 2.0, 0.25, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0)
    p = kernel.step_params(step)
    assert [p[kernel.FIELDS.index(f.name)] for f in dataclasses.fields(StepCost)] == \
        [getattr(step, f.name) for f in dataclasses.fields(StepCost)]

    @dataclasses.dataclass(frozen=True)
    class Grown(StepCost):
        s_per_new_thing: float = 0.0

    assert np.array_equal(kernel.step_params(Grown(*dataclasses.astuple(step))), p)  # neutral default: harmless
    with pytest.raises(ValueError, match="s_per_new_thing"):
        kernel.step_params(Grown(*dataclasses.astuple(step), s_per_new_thing=1e-3))


_PLAIN_RUN = """
import json, sys
import numpy as np
from solver.perf.queueing import TrafficClass
from solver.perf.queueing.physics import StepCost
from solver.sim import kernel
from solver.sim.replica import simulate_replica
step = StepCost(0.0053, 0.0, 0.0, 1.84e-05, 1.39e-06, 3.78e-06, 4.8e-08, 6.9e-10, 0.0041, 0.00246, 6.7e-06)
out = {"jit": kernel.jit_enabled()}
for scheduler in ("chunked_mixed", "prefill_first"):
    sim = simulate_replica(step, [TrafficClass(0.7, 700, 120), TrafficClass(0.3, 3000, 300)], 9.0, max_seqs=64,
                           kv_cache_tokens=120000, token_budget=2048, duration_s=60, seed=4, arrival_cv=1.5,
                           scheduler=scheduler)
    out[scheduler] = [sim.ttft_s.tolist(), sim.latency_s.tolist(), sim.waited.tolist(), sim.steps, sim.mean_batch]
print(json.dumps(out))
"""


def _run_mode(jit: str) -> dict:
    env = dict(os.environ, FLEET_SIM_JIT=jit, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    proc = subprocess.run([sys.executable, "-c", _PLAIN_RUN], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_plain_python_and_compiled_core_give_the_same_requests():
    # One implementation: FLEET_SIM_JIT=0 runs the same function as Python (on lists).
    plain, compiled = _run_mode("0"), _run_mode("1")
    assert plain.pop("jit") is False
    try:
        import numba  # noqa: F401
        assert compiled.pop("jit") is True
    except ImportError:
        compiled.pop("jit")
    assert plain == compiled
