"""The simulator's compiled core: the engine step's time and the replica's event loop.

Everything here is written for numba's nopython mode (`numba.njit(cache=True)`) and runs
unchanged as plain Python when numba is not installed or `FLEET_SIM_JIT=0`: one
implementation, not a fast path beside a slow one. The functions take only numbers and
arrays (or, in plain Python, lists: indexing a list is ~3x faster than a numpy array from
Python), use no numpy calls, and allocate nothing: the caller (solver/sim/replica.py)
owns every array. The step formula and the loop share this file because numba's cache
is invalidated by its own source file only; a formula in another file could leave a
stale compiled loop behind.

Step time. `step_params(StepCost)` reads the analytic model's step physics
(`solver.perf.queueing.physics.StepCost`: the roofline of one engine step as linear
pieces) by field name into a float64 array; `step_seconds(params, decodes, context,
prefill, pairs)` evaluates `StepCost.seconds`'s formula on it, operation for operation
(tests/test_sim_kernel.py checks equality on random inputs, and that every StepCost field
is read here).

The loop (`simulate_core`). Requests come as arrays in arrival order: arrival times,
prompt and output tokens. Two schedulers (docs in solver/sim/replica.py):
`CHUNKED_MIXED` (every step decodes one token of every running sequence and fills the
rest of the token budget with prompt chunks) and `PREFILL_FIRST` (a step either
prefills only or decodes only; with `multi_step` K > 1 a decision to decode runs K decode
steps before waiting prompts are looked at again, as vLLM V0's multi-step scheduling).
Admission is FCFS with head-of-line blocking, so the waiting queue is always the index
range [admitted, arrived) and the sequences with an unfinished prompt are [prefilling,
admitted): no queues are needed, only three counters.
Decoding sequences leave at the end of a known decode step (the one that makes their
last token), kept in a timing wheel: bucket `step % len(wheel_head)`, a linked list
through `wheel_next`.
"""

from __future__ import annotations

import dataclasses
import os
import sys

# StepCost's fields in the order of the params array. A field the formula does not read is
# an error in step_params (unless it holds its neutral default): the simulator must never
# silently drop physics the analytic model has.
FIELDS = ("weights_s", "expert_weights_s", "expert_fraction", "gemm_s_per_token", "lm_head_s_per_decode",
          "s_per_token", "s_per_context_token", "s_per_pair", "fixed_s", "decode_fixed_s", "s_per_sampled",
          "graph_max_decodes", "eager_gap_s")
(_WEIGHTS, _EXPERT_WEIGHTS, _EXPERT_FRACTION, _GEMM, _LM_HEAD, _PER_TOKEN, _PER_CONTEXT, _PER_PAIR, _FIXED,
 _DECODE_FIXED, _PER_SAMPLED, _GRAPH_MAX, _EAGER_GAP) = range(len(FIELDS))

CHUNKED_MIXED, PREFILL_FIRST = 0, 1
SCHEDULERS = {"chunked_mixed": CHUNKED_MIXED, "prefill_first": PREFILL_FIRST}

# simulate_core's return codes.
DONE, EXHAUSTED, STALLED = 0, 1, 2
# Slots of simulate_core's `stats` output array.
(ST_END_S, ST_STEPS, ST_BUSY_S, ST_BATCH_AREA, ST_BATCH_SQ_AREA, ST_FINISHED_IN_WINDOW, ST_MEASURED_LEFT,
 ST_ARRIVED, ST_WAITING_AT_FIRST, ST_WAITING_AT_LAST) = range(10)
N_STATS = 10


def jit_enabled() -> bool:
    """Whether the core runs compiled: numba installed and FLEET_SIM_JIT not "0"."""
    return _JIT


def _want_jit() -> bool:
    if os.environ.get("FLEET_SIM_JIT", "1").strip() == "0":
        return False
    import importlib.util

    return importlib.util.find_spec("numba") is not None  # without importing it (~1 s)


_JIT = _want_jit()
_READY = False


def compiled():
    """This module, its loops compiled on first use (numba is imported here, not at import
    time: a process that never simulates never loads it). With cache=True the compiled
    code is written next to this file (or to numba's user cache directory when that is
    read-only) and later processes load it instead of compiling again; nogil: the loops
    touch no Python objects. Without numba (or FLEET_SIM_JIT=0) the same functions run as
    plain Python."""
    global _READY, step_seconds, simulate_core, servers_core
    if not _READY:
        if _JIT:
            import numba

            jit = numba.njit(cache=True, nogil=True)
            # step_seconds first: simulate_core calls it by this module-level name.
            step_seconds = jit(_step_seconds)
            simulate_core = jit(_simulate_core)
            servers_core = jit(_servers_core)
        _READY = True
    return sys.modules[__name__]


def step_params(step) -> "np.ndarray":
    """StepCost -> float64 array in FIELDS order, read by name."""
    import numpy as np

    known = set(FIELDS)
    for f in dataclasses.fields(step):
        if f.name in known:
            continue
        value = getattr(step, f.name)
        if f.default is dataclasses.MISSING or value != f.default:
            raise ValueError(f"StepCost.{f.name} = {value!r} is not read by the simulator's step formula "
                             "(solver/sim/kernel.py): it would simulate different physics from the analytic "
                             "model. To fix: add the field to kernel.FIELDS and to step_seconds")
    return np.array([float(getattr(step, name)) for name in FIELDS], dtype=np.float64)


def _step_seconds(p, decodes, context, prefill, pairs):
    """StepCost.seconds for scalars, on step_params' array (the same operations in the same
    order as StepCost._scalar_seconds, so the same float result)."""
    t = decodes + prefill
    w = p[_WEIGHTS]
    if p[_EXPERT_FRACTION] > 0:
        w = w + p[_EXPERT_WEIGHTS] * (1.0 - (1.0 - p[_EXPERT_FRACTION]) ** t)
    if prefill > 0:
        fixed = p[_FIXED]
    elif decodes > p[_GRAPH_MAX]:  # beyond the engine's CUDA graphs: launched eagerly
        fixed = p[_DECODE_FIXED] + p[_EAGER_GAP]
    else:
        fixed = p[_DECODE_FIXED]
    out = (max(w, p[_GEMM] * t + p[_LM_HEAD] * decodes)
           + p[_PER_TOKEN] * t + p[_PER_CONTEXT] * context + p[_PER_PAIR] * pairs + fixed)
    if p[_PER_SAMPLED] != 0.0:
        prompts = prefill * prefill / (2.0 * max(pairs, 1e-300)) if pairs > 0 else 0.0
        out = out + p[_PER_SAMPLED] * (decodes + prompts)
    return out


def _simulate_core(arrival_s, prompt_tokens, output_tokens, claim_tokens, open_ended, params, max_seqs, kv_cache_tokens,
                  token_budget, scheduler, multi_step, measure_lo, measure_hi, stop_after_s, time_limit_s,
                  window_lo_s, window_hi_s, first_s, done_s, waited, got, wheel_next, wheel_head, batch_time_s, stats):
    """Run one replica over the given requests; returns DONE, EXHAUSTED or STALLED.

    Inputs: `arrival_s` (non-decreasing), `prompt_tokens`, `output_tokens` (>= 1) per
    request, and `claim_tokens`: the KV-cache tokens a request is admitted against
    (solver.perf.queueing.physics.kv_claim_tokens: its whole length, or its mean holding
    where the engine allocates pages on demand); `open_ended`: more requests would follow the last one (synthetic traffic), so
    the run must stop (EXHAUSTED) when it needs to know the next arrival after the last;
    `params` = step_params(StepCost); `max_seqs` <= `token_budget`; `multi_step` >= 1 (decode
    steps per decision to decode, PREFILL_FIRST only: a block ends early when no sequence is
    left to decode).
    Stops at the top of a step once t > stop_after_s and either every request with index in
    [measure_lo, measure_hi) has finished or t > time_limit_s; without open_ended it also
    stops when every request has finished.
    Outputs (filled in place; first_s/done_s must come as +inf, waited False, got 0,
    wheel_head -1): first_s (end of the step that finished the prompt), done_s (end of the
    step that made the last token), waited (a step started between its arrival and its
    admission), batch_time_s[n] (seconds with n sequences admitted), stats (ST_* slots;
    ST_FINISHED_IN_WINDOW counts finishes at times in [window_lo_s, window_hi_s]).
    """
    n = len(arrival_s)
    wheel_size = len(wheel_head)
    arrived = 0  # requests with arrival <= t: [admitted, arrived) is the waiting queue
    admitted = 0  # requests admitted so far (FCFS: always a prefix)
    prefilling = 0  # [prefilling, admitted): admitted sequences whose prompt is unfinished
    n_dec = 0  # decoding sequences
    ctx_sum = 0  # context tokens of the decoding sequences
    running = 0  # admitted and unfinished: prefilling or decoding
    kv_used = 0  # KV tokens claimed by the running sequences (claim_tokens)
    t = 0.0
    step = 0
    decode_clock = 0  # decode steps done (every step under CHUNKED_MIXED)
    block_left = 0  # decode steps left in the current multi-step block (PREFILL_FIRST)
    prev_start = -1e300  # start of the previous step
    measured_left = measure_hi - measure_lo
    finished_in_window = 0
    busy = 0.0
    batch_area = 0.0
    batch_sq_area = 0.0
    status = DONE
    while True:
        # Arrivals up to now join the queue.
        while arrived < n and arrival_s[arrived] <= t:
            if arrived == measure_lo:
                stats[ST_WAITING_AT_FIRST] = arrived - admitted
            if arrived == measure_hi - 1:
                stats[ST_WAITING_AT_LAST] = arrived - admitted
            arrived += 1
        if t > stop_after_s and (measured_left <= 0 or t > time_limit_s):
            break
        if arrived == n and open_ended:
            status = EXHAUSTED  # the caller extends the arrivals and runs again
            break
        if running == 0 and admitted == arrived:
            if arrived == n:
                break  # a closed request list, all served
            batch_time_s[0] += arrival_s[arrived] - t  # idle until the next arrival
            t = arrival_s[arrived]
            continue

        # Schedule one step.
        pre_tokens = 0
        pairs = 0.0
        decodes = n_dec
        if scheduler == CHUNKED_MIXED:
            # Every decoding sequence makes one token; the rest of the budget goes to prompt
            # chunks: unfinished prompts oldest first, then newly admitted requests (FCFS).
            budget = token_budget - n_dec
            j = prefilling
            while j < admitted and budget > 0:
                take = min(budget, prompt_tokens[j] - got[j])
                pre_tokens += take
                pairs += take * (2.0 * got[j] + take) / 2.0
                got[j] += take
                budget -= take
                j += 1
            while arrived > admitted and budget > 0 and running < max_seqs:
                need = claim_tokens[admitted]
                if kv_used + need > kv_cache_tokens:
                    break  # FCFS: the head of the queue waits for KV room
                if prev_start >= arrival_s[admitted]:
                    waited[admitted] = True
                running += 1
                kv_used += need
                take = min(budget, prompt_tokens[admitted])
                got[admitted] = take
                pre_tokens += take
                pairs += take * take / 2.0
                budget -= take
                admitted += 1
            decoding = True
        else:
            # PREFILL_FIRST: a prompt cut by the budget goes on in the next step, alone or with
            # whole prompts that fit after it; else a step prefills if the queue's head can be
            # admitted, and decodes otherwise.
            decoding = True
            if block_left > 0 and n_dec > 0:
                block_left -= 1  # inside a multi-step block: waiting prompts are not looked at
            elif prefilling < admitted:
                decoding = False
            elif arrived > admitted and running < max_seqs \
                    and kv_used + claim_tokens[admitted] <= kv_cache_tokens:
                decoding = False
            else:
                block_left = multi_step - 1  # a decision to decode: this step and multi_step - 1 more
            if not decoding:
                block_left = 0  # a block that ended early (nothing left to decode) is not resumed
                decodes = 0
                budget = token_budget
                fresh = prefilling == admitted  # no prompt carried over: the head goes in even if longer
                j = prefilling
                while j < admitted and budget > 0:
                    take = min(budget, prompt_tokens[j] - got[j])
                    pre_tokens += take
                    pairs += take * (2.0 * got[j] + take) / 2.0
                    got[j] += take
                    budget -= take
                    j += 1
                while arrived > admitted and budget > 0 and running < max_seqs:
                    need = claim_tokens[admitted]
                    if kv_used + need > kv_cache_tokens:
                        break
                    if not fresh and prompt_tokens[admitted] > budget:
                        break  # only whole prompts join a step that is already prefilling
                    fresh = False
                    if prev_start >= arrival_s[admitted]:
                        waited[admitted] = True
                    running += 1
                    kv_used += need
                    take = min(budget, prompt_tokens[admitted])
                    got[admitted] = take
                    pre_tokens += take
                    pairs += take * take / 2.0
                    budget -= take
                    admitted += 1
        if decodes == 0 and pre_tokens == 0:
            # Only possible when the waiting head fits neither the batch nor the KV cache of an empty engine.
            status = STALLED
            break

        # A prefill-only step (prefill-first) runs the new prompts alone: the paused decoding
        # sequences' KV is not read, so their context costs nothing there.
        tau = step_seconds(params, float(decodes), float(ctx_sum) if decodes > 0 else 0.0, float(pre_tokens), pairs)
        prev_start = t
        batch_area += running * tau
        batch_sq_area += running * running * tau
        batch_time_s[running] += tau
        busy += tau
        t += tau

        if decoding:
            ctx_sum += n_dec  # every decoding sequence grew by one token
            # Sequences whose last token this step made leave.
            b = decode_clock % wheel_size
            r = wheel_head[b]
            wheel_head[b] = -1
            while r >= 0:
                done_s[r] = t
                if window_lo_s <= t <= window_hi_s:
                    finished_in_window += 1
                n_dec -= 1
                ctx_sum -= prompt_tokens[r] + output_tokens[r]
                running -= 1
                kv_used -= claim_tokens[r]
                if measure_lo <= r < measure_hi:
                    measured_left -= 1
                r = wheel_next[r]
            decode_clock += 1
        # Prompts finished this step give their first token (in admission order: a later
        # prompt gets budget only after every earlier one got all it needed).
        while prefilling < admitted and got[prefilling] >= prompt_tokens[prefilling]:
            r = prefilling
            prefilling += 1
            first_s[r] = t
            if output_tokens[r] <= 1:
                done_s[r] = t
                if window_lo_s <= t <= window_hi_s:
                    finished_in_window += 1
                running -= 1
                kv_used -= claim_tokens[r]
                if measure_lo <= r < measure_hi:
                    measured_left -= 1
            else:
                n_dec += 1
                ctx_sum += prompt_tokens[r] + 1
                # It decodes in the next output - 1 decode steps: leaves after decode step
                # number decode_clock + output - 2 (counting from 0).
                b = (decode_clock + output_tokens[r] - 2) % wheel_size
                wheel_next[r] = wheel_head[b]
                wheel_head[b] = r
        step += 1

    stats[ST_END_S] = t
    stats[ST_STEPS] = step
    stats[ST_BUSY_S] = busy
    stats[ST_BATCH_AREA] = batch_area
    stats[ST_BATCH_SQ_AREA] = batch_sq_area
    stats[ST_FINISHED_IN_WINDOW] = finished_in_window
    stats[ST_MEASURED_LEFT] = measured_left
    stats[ST_ARRIVED] = arrived
    return status


def _servers_core(arrival_s, servers, service_s, start_s):
    """FCFS over `servers` identical servers taking `service_s` each: fills start_s (when
    each item starts). Servers free up in the order their items started, so item k starts
    at max(its arrival, the end of item k - servers): no heap needed."""
    n = len(arrival_s)
    for k in range(n):
        free = start_s[k - servers] + service_s if k >= servers else 0.0
        start_s[k] = arrival_s[k] if arrival_s[k] > free else free
    return n


# The names the loops and callers use (plain until compiled() swaps in numba's versions).
step_seconds, simulate_core, servers_core = _step_seconds, _simulate_core, _servers_core
