"""Disaggregated serving: one prefill worker, one decode worker, and the KV transfer between them.

Prefill workers take a request's prompt, make its KV cache and first token, and ship the
cache to a decode worker, which generates the rest. The two phases want different
hardware (prefill is compute-bound, decode bandwidth-bound), so each pool is sized on its
own. Everything here reuses the aggregated model's calibrated passes (solver/perf/llm.py):
a prefill is the same eager pass of the prompt, a decode step the same step of B sequences,
without the other phase riding along.

Per worker, independent of how many workers a pool has, so the planner's capacity rows
stay linear (solver/compile/disagg.py):

* **Prefill**: a prompt takes D seconds (its chunks one after another, batch 1). Under a
  percentile SLO the worker is an M/D/1 queue whose waiting time has an exact distribution
  (Erlang's formula, `md1_wait_cdf`); the rate is the highest whose percentile TTFT (wait +
  D + transfer) meets the SLO. Without a percentile the worker runs saturated (1 / D), as
  the aggregated no-load model does.
* **Decode**: the largest batch B* whose step meets the TPOT SLO and whose KV cache (whole
  context, prompt + output) fits. A request holds a slot for O steps, so the worker's mean
  batch is lambda O tau; under a percentile SLO the batch in flight is Poisson (M/G/inf,
  the slots are rarely all full at the rates allowed), and the rate is the highest whose
  p-quantile batch is at most B*. Without a percentile: B* / (O tau(B*)).
* **Hand-off**: the decode worker takes the request at its next step, at most one step
  later, which the TPOT SLO bounds: TTFT counts it.
* **Transfer**: the prompt's whole KV cache (all layers, the KV dtype) over the link that
  joins the two workers, at the calibration's link efficiency; it adds to TTFT, and the
  bytes per second bound each worker's rate by its share of the instance's network.

What this leaves out, on purpose and stated in docs/disaggregation.md: prompts batched
together on a prefill worker (batch 1 is pessimistic for short prompts, where
disaggregation rarely pays anyway), prefill and decode on one instance over NVLink, and
a pool-level queue (per-worker queues are pessimistic for pools of several workers).
"""

from __future__ import annotations

import decimal
import math
from dataclasses import replace

from solver.dataclass_repr import dataclass
from solver.perf.api import BYTES_PER_ELEMENT, PerfQuery
from solver.perf.llm import _pipelined, _setup, _unsupported, engine_policy, kv_precision, memory_budget

ROLES = ("prefill", "decode")


@dataclass(frozen=True)
class Worker:
    """One prefill or decode worker of a configuration: its rate and what limits it."""

    role: str  # "prefill" | "decode"
    feasible: bool
    reason: str = ""  # why not, in words a user reads
    reason_kind: str = ""  # "vram" | "ttft" | "tpot" | "unsupported" | ""
    rate_rps: float = 0.0  # requests per second one worker sustains within its SLO
    ttft_ms: float = 0.0  # prefill: at rate_rps, the percentile (or the service time without one)
    tpot_ms: float = 0.0  # decode: one step at the batch B*
    batch: int = 0  # decode: B*; prefill: 1
    prompt_ms: float = 0.0  # prefill: one prompt alone on the worker
    transfer_ms: float = 0.0  # prefill: the KV transfer counted in its TTFT
    memory_gib_per_gpu: float = 0.0
    binding_limit: str = ""  # "ttft" | "tpot" | "vram" | "network" | "saturation"


def kv_transfer_bytes(q: PerfQuery) -> float:
    """Bytes of one prompt's KV cache, all layers, at the KV dtype (what a prefill worker sends)."""
    m = q.model
    return m.kv_tokens(q.prompt_tokens) * m.kv_elements_per_token_layer() * BYTES_PER_ELEMENT[kv_precision(q)]


def transfer_s(q: PerfQuery, link_gbit_s: float) -> float:
    """Seconds to ship one prompt's KV cache over a link of `link_gbit_s` gigabits per second."""
    bytes_per_s = link_gbit_s * 1e9 / 8 * q.calibration.link_efficiency
    return kv_transfer_bytes(q) / bytes_per_s


def md1_wait_cdf(rate_rps: float, service_s: float, wait_s: float) -> float:
    """P(wait <= wait_s) in an M/D/1 queue (Erlang's formula, exact):
    (1 - rho) sum_{k=0}^{floor(t/D)} (lambda (kD - t))^k / k! e^{-lambda (kD - t)}.
    The terms alternate in sign, so it is summed only while t/D is small enough for doubles
    (MD1_EXACT_UP_TO services); beyond, Kingman's bound exp(-theta t) (proven, looser)."""
    lam, d, t = rate_rps, service_s, wait_s
    rho = lam * d
    if rho >= 1:
        return 0.0
    if t < 0:
        return 0.0
    n = int(t / d)
    if n > MD1_EXACT_UP_TO:
        return 1.0 - math.exp(-_kingman_theta(lam, d) * t)
    if n <= MD1_FLOAT_UP_TO:
        total = 0.0
        for k in range(n + 1):
            x = lam * (k * d - t)  # <= 0
            total += x ** k / math.factorial(k) * math.exp(-x)
        return min(max((1 - rho) * total, 0.0), 1.0)
    # Terms reach e^{2n} before they cancel: carry the digits they need. e^{-x_k} =
    # e^{lambda t} (e^{-lambda D})^k: two exponentials per call, not one per term.
    with decimal.localcontext() as ctx:
        ctx.prec = 30 + n
        lam_d, d_d, t_d = decimal.Decimal(lam), decimal.Decimal(d), decimal.Decimal(t)
        grow, shrink = (lam_d * t_d).exp(), (-lam_d * d_d).exp()
        total_d, fact, factor = decimal.Decimal(0), decimal.Decimal(1), grow
        for k in range(n + 1):
            if k:
                fact *= k
                factor *= shrink
            total_d += (lam_d * (k * d_d - t_d)) ** k / fact * factor
        return min(max((1 - rho) * float(total_d), 0.0), 1.0)


MD1_FLOAT_UP_TO = 8  # services within the wait summed in doubles (terms below e^16: 9 digits left)
MD1_EXACT_UP_TO = 60  # beyond, Kingman's bound (the exact sum would need too many digits to be quick)


def _kingman_theta(lam: float, d: float) -> float:
    """theta > 0 with lambda (e^{theta D} - 1) = theta (bisection; exists when lambda D < 1)."""
    lo, hi = 0.0, 1.0
    while lam * math.expm1(hi * d) < hi:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if lam * math.expm1(mid * d) < mid:
            lo = mid
        else:
            hi = mid
    return lo


def md1_rate_within(service_s: float, wait_budget_s: float, percentile: float) -> float:
    """The highest arrival rate whose percentile wait in an M/D/1 queue is at most the budget
    (bisection on the rate: the wait's CDF falls as the rate rises)."""
    if wait_budget_s < 0:
        return 0.0
    target = percentile / 100.0
    lo, hi = 0.0, 1.0 / service_s
    for _ in range(40):  # 2^-40 of the saturation rate: far below any figure shown or used
        mid = (lo + hi) / 2
        if md1_wait_cdf(mid, service_s, wait_budget_s) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def prefill_worker(q: PerfQuery, *, link_gbit_s: float, percentile: float | None = None) -> Worker:
    """A prefill worker of `q`'s configuration whose KV cache leaves over `link_gbit_s`.

    `q.ttft_slo_ms` bounds wait + prompt + transfer at `percentile` (None: no queueing)."""
    return prefill_over(prefill_alone(q), q, link_gbit_s, percentile)


def prefill_alone(q: PerfQuery) -> Worker:
    """The link-free part of a prefill worker: whether a prompt fits, and its time alone
    (`prefill_over` adds a link; a planner asks for many links of one worker)."""
    why = _unsupported(q)
    if why:
        return Worker("prefill", False, why, "unsupported")
    one = replace(q, output_tokens=1)
    mem = memory_budget(one)
    if not mem.fits(1):
        return Worker("prefill", False, f"one {q.prompt_tokens}-token prompt does not fit beside the weights", "vram")
    s = _setup(one)
    p = float(q.prompt_tokens)
    chunks = max(math.ceil(p / s.chunk_tokens), 1)
    prompt_s = chunks * _pipelined(s, 1, 0, 0, p / chunks, p, eager=True).seconds + s.request_overhead_s
    return Worker("prefill", True, rate_rps=1.0 / prompt_s, batch=1, prompt_ms=prompt_s * 1e3,
                  memory_gib_per_gpu=float(mem.used_gib(1)), binding_limit="saturation")


def prefill_over(alone: Worker, q: PerfQuery, link_gbit_s: float, percentile: float | None) -> Worker:
    """`alone` (prefill_alone of q) with its KV cache leaving over `link_gbit_s`."""
    if not alone.feasible:
        return alone
    prompt_s = alone.prompt_ms / 1e3
    move_s = transfer_s(q, link_gbit_s)
    link_rate = link_gbit_s * 1e9 / 8 * q.calibration.link_efficiency / max(kv_transfer_bytes(q), 1.0)
    # The decode worker takes the request at its next step boundary: at most one step, which
    # the TPOT SLO bounds (without one, decode steps are not bounded here: nothing is added).
    handoff_s = (q.tpot_slo_ms or 0.0) / 1e3
    base_ms = (prompt_s + move_s + handoff_s) * 1e3
    slo = q.ttft_slo_ms
    if slo is not None and base_ms > slo:
        return Worker("prefill", False, f"misses the TTFT SLO: {base_ms:.1f} ms > {slo:g} ms "
                      f"(prompt {prompt_s * 1e3:.4g} ms + KV transfer {move_s * 1e3:.4g} ms + the decode "
                      f"step it joins {handoff_s * 1e3:.4g} ms)", "ttft",
                      prompt_ms=prompt_s * 1e3, transfer_ms=move_s * 1e3)
    if percentile is None or slo is None:
        rate, limit, ttft_ms = 1.0 / prompt_s, "saturation", base_ms
    else:
        rate, limit, ttft_ms = md1_rate_within(prompt_s, (slo - base_ms) / 1e3, percentile), "ttft", slo
    if link_rate < rate:
        rate, limit = link_rate, "network"
    if rate <= 0:
        return Worker("prefill", False, f"no rate meets the TTFT SLO at p{percentile:g}", "ttft")
    return replace(alone, rate_rps=rate, ttft_ms=ttft_ms, transfer_ms=move_s * 1e3, binding_limit=limit)


def link_capped(w: Worker, q: PerfQuery, link_gbit_s: float) -> Worker:
    """A decode worker computed without a link (link_gbit_s=inf), capped by one's bytes per second."""
    if not w.feasible:
        return w
    link_rate = link_gbit_s * 1e9 / 8 * q.calibration.link_efficiency / max(kv_transfer_bytes(q), 1.0)
    return replace(w, rate_rps=link_rate, binding_limit="network") if link_rate < w.rate_rps else w


def _step_s(s, batch: int, p: float, o: float) -> float:
    return float(_pipelined(s, batch, batch, p + o / 2, 0, p).seconds)


def poisson_mean_within(slots: int, percentile: float) -> float:
    """The largest mean m whose Poisson p-quantile is at most `slots` (bisection on m)."""
    target = percentile / 100.0

    def cdf(m: float) -> float:
        term = total = math.exp(-m)
        for n in range(1, slots + 1):
            term *= m / n
            total += term
        return total

    if slots <= 0:
        return 0.0
    if slots > 600:  # exp(-m) underflows: the normal approximation with continuity correction
        z = _z(target)
        # m + z sqrt(m) = slots + 0.5  ->  sqrt(m) = (-z + sqrt(z^2 + 4 (slots + 0.5))) / 2
        r = (-z + math.sqrt(z * z + 4 * (slots + 0.5))) / 2
        return r * r
    lo, hi = 0.0, float(slots)
    for _ in range(60):
        mid = (lo + hi) / 2
        if cdf(mid) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def _z(p: float) -> float:
    """The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9)."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    if p < 0.02425:
        t = math.sqrt(-2 * math.log(p))
        return (((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]) / \
            ((((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1)
    if p > 1 - 0.02425:
        return -_z(1 - p)
    t = p - 0.5
    r = t * t
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * t / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


def decode_worker(q: PerfQuery, *, link_gbit_s: float, percentile: float | None = None) -> Worker:
    """A decode worker of `q`'s configuration that receives KV caches over `link_gbit_s`.

    `q.tpot_slo_ms` bounds the step at the batch the worker holds at `percentile`."""
    why = _unsupported(q)
    if why:
        return Worker("decode", False, why, "unsupported")
    mem = memory_budget(q)  # KV for the whole context (prompt + output) of each sequence
    cap = min(int(mem.max_batch), int(engine_policy(q).max_batch))
    if cap < 1:
        return Worker("decode", False, f"one sequence of {q.prompt_tokens + q.output_tokens} tokens "
                      "does not fit beside the weights", "vram")
    s = _setup(q)
    p, o = float(q.prompt_tokens), float(max(q.output_tokens, 1))
    slo = q.tpot_slo_ms
    best, limit = cap, ("vram" if mem.max_batch <= engine_policy(q).max_batch else "batch cap")
    if slo is not None and _step_s(s, cap, p, o) * 1e3 > slo:
        if _step_s(s, 1, p, o) * 1e3 > slo:
            ms = _step_s(s, 1, p, o) * 1e3
            return Worker("decode", False, f"misses the TPOT SLO: {ms:.1f} ms > {slo:g} ms at batch 1", "tpot",
                          tpot_ms=ms)
        lo, hi = 1, cap  # lo meets the SLO, hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if _step_s(s, mid, p, o) * 1e3 <= slo:
                lo = mid
            else:
                hi = mid
        best, limit = lo, "tpot"
    tau = _step_s(s, best, p, o)
    mean_batch = float(best) if percentile is None else poisson_mean_within(best, percentile)
    rate = mean_batch / (o * tau)
    link_rate = link_gbit_s * 1e9 / 8 * q.calibration.link_efficiency / max(kv_transfer_bytes(q), 1.0)
    if link_rate < rate:
        rate, limit = link_rate, "network"
    return Worker("decode", True, rate_rps=rate, tpot_ms=tau * 1e3, batch=best,
                  memory_gib_per_gpu=float(mem.used_gib(best)), binding_limit=limit)
