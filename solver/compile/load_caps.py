"""Percentile SLOs under load: each configuration's usable rate per replica, capped.

A service with `slo.percentile` P needs its latency bounds to hold at P over all its
requests, queueing included. Per configuration the queueing model gives the largest rate
one replica can take with every bound still met at P (`max_rate_for_slo`, at most 90 % of
saturation); that rate is the configuration's throughput in the MIP, so the MIP stays
linear. If every replica meets its bounds at P, the service does: its distribution at a
bound is the rate-weighted mean of the replicas' (docs/formulation.md, "Latency under load").

* LLM services with several request classes: every replica serves the service's mix (the
  classes at their shares), and its cap is for that mixture: exact for the traffic it gets.
  All classes carry the same cap, the total rate of the mix (the MIP routes the mix).
* Measured profiles: c parallel servers per replica (solver/perf/queueing/servers.py); the
  bounds leave the measured time plus a wait, capped per class.

Robust caps (solver/confidence.py): at `slo.confidence` c (0.9 unless stated) a cap is
the largest rate r at which a replica slowed by the c-quantile s of the calibrated
slowdown still meets every bound at P with r x (1 + RATE_MARGIN) routed to it:
`max_rate_for_slo(replica.slowed(s), ...) / (1 + RATE_MARGIN)`. Measured profiles are
measurements of the real replica, not the model: they keep s = 1 and take the rate margin.
"nominal" is today's cap exactly (s = 1, no margin).
"""

from __future__ import annotations

import math
import os
import weakref
from dataclasses import replace

from solver.compile.problem import Config
from solver.confidence import band_confidence, band_levels, quantile, rate_margin, slowdown
from solver.lru import LockedLru
from solver.output.result import AtLoad, LoadBand
from solver.perf.queueing import TrafficClass, max_rate_for_slo, replica_for
from solver.perf.queueing.search import DEFAULT_MAX_UTILIZATION, load_model
from solver.perf.queueing.servers import measured_max_rate

_LABEL = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}
PER_SECOND = {"requests/s": 1.0, "items/min": 1.0 / 60.0}


class _CapMemo(LockedLru):
    """`max_rate_for_slo` by its exact arguments (replica, mix, percentile, bounds, CV), least
    recently used out. Caps computed by a helper process are put in (`put`): the evaluator and
    later rounds then find them here. Thread-safe."""

    def __call__(self, replica, classes: tuple[TrafficClass, ...], percentile: int, bounds: tuple,
                 arrival_cv: float) -> float:
        key = (replica, classes, percentile, bounds, arrival_cv)
        with self._lock:
            found = self._lookup(key)
        if found is not None:
            return found[0]
        value = max_rate_for_slo(replica, classes, percentile, arrival_cv=arrival_cv, **dict(bounds))
        self.put(key, value)
        return value

    def known(self, key: tuple) -> float | None:
        """The cap under `key` (replica, mix, percentile, bounds, CV) if computed, else None (not counted)."""
        with self._lock:
            found = self._data.get(key)
        return None if found is None else found[0]

    def put(self, key: tuple, value: float) -> None:
        with self._lock:
            self._store(key, (value,))

    def cache_clear(self) -> None:
        self.clear()


_llm_cap = _CapMemo(50_000)


def cap_under_load(oc, configs: list[Config]) -> list[Config]:
    """`configs` of one service on one offer with their throughput capped for the service's
    percentile SLO (configurations that cannot meet it at any load become rejections)."""
    svc = oc.svc
    if svc.slo.percentile is None or not svc.slo.bounds():
        return configs
    out = []
    for c in configs:
        capped = _measured(svc, c) if c.source == "measured" else _estimated(oc, svc, c)
        if capped is None:
            continue
        if all(k.throughput <= 0 for k in capped.classes):
            reason = next((k.reason for k in capped.classes if k.reason), "misses its SLO under any load")
            oc._reject(c.gpus_per_replica, c.precision, _kind(reason), reason)
            continue
        out.append(capped)
    return out


def _estimated(oc, svc, c: Config) -> Config | None:
    classes, mix, (p, bounds, cv) = _service_terms(svc)
    missing = [k for k in classes if c.classes[k].throughput <= 0]
    if missing:
        # Every replica serves the whole mix. A class that misses a bound even without
        # queueing (the estimate's only zero-throughput reason: memory and support rule the
        # whole configuration out) may still sit in the percentile's tail: the bound is over
        # all the service's requests, and the mixture percentile below counts the class's
        # requests as late. Only a class too large for the tail rules the configuration out.
        shares = {k: svc.class_shares[k] for k in classes}
        late = sum(shares[k] for k in missing) / sum(shares.values())
        if late >= 1.0 - p / 100.0:
            first = c.classes[missing[0]]
            oc._reject(c.gpus_per_replica, c.precision, _kind(first.reason) or "latency",
                       f"{first.reason or 'cannot serve a request class'} (every replica serves all classes under "
                       f"a percentile SLO, and the classes that miss, {late:.3%} of requests, do not fit in the "
                       f"{100 - p:g} % the p{p} bound lets miss)")
            return None
    first = svc.class_tokens[0]
    query = oc._query(svc.model, c.gpus_per_replica, c.instances_per_replica, c.precision, first.prompt_tokens,
                      first.output_tokens)
    # Everything the exact cap needs, kept on the configuration while it is pending; the
    # last two: the slowdown and rate margin of the service's confidence (1 and 0: nominal).
    slow, margin = slowdown(svc.slo.confidence, oc.b.calibration), rate_margin(svc.slo.confidence)
    pending = (replica_for(query), mix, p, bounds, cv, c.error_band if svc.size_with_error_band else 0.0, slow, margin)
    if not LAZY:
        return exact_cap(c, pending)
    # The exact cap costs a queueing-model search; an upper bound costs one step evaluation.
    # The planner computes the exact cap only for configurations a plan uses
    # (solver/compile/lazy_caps.py), which keeps the optimum exact. The bound is the slowed
    # replica's, with the same divisors as the exact cap: still an upper bound of it.
    upper = per_config(pending, _first_bound(pending[0], slow, mix, cv))
    if upper <= 0:
        return exact_cap(c, pending)
    return replace(c, pending_cap=pending,
                   classes=tuple(replace(k, throughput=upper, binding_limit="slo_under_load") for k in c.classes))


_TERMS: dict[int, tuple] = {}  # id(service) -> (service, its terms): see _service_terms


def _service_terms(svc) -> tuple:
    """(classes a replica serves, their mix (`_service_mix`), (percentile, bounds, CV)) of a
    service, made once per service object (asked once per configuration)."""
    hit = _TERMS.get(id(svc))
    if hit is not None and hit[0] is svc:
        return hit[1]
    classes = [k for k, d in enumerate(svc.class_demand) if d > 0] or [0]
    value = (classes, _service_mix(svc),
             (svc.slo.percentile, svc.slo.bounds(), float(svc.arrival_cv)))
    if len(_TERMS) >= 4096:
        _TERMS.clear()
    _TERMS[id(svc)] = (svc, value)
    return value


def _first_bound(replica, slow: float, mix: tuple[TrafficClass, ...], cv: float) -> float:
    """`cap_upper_bound` of the replica slowed by `slow`, by (replica, slowdown, mix, CV),
    remembered: the configurations of one replica shape on several offers share it."""
    key = (replica, slow, mix, cv)
    found = _first_bounds.known(key)
    if found is None:
        found = cap_upper_bound(_slowed(replica, slow), mix, 0, cv)
        _first_bounds.put(key, found)
    return found


_SLOWED: dict[tuple[int, float], tuple] = {}  # (id(replica), factor) -> (replica, replica.slowed(factor))


def _slowed(replica, factor: float):
    """replica.slowed(factor), made once per replica object and factor (a cap key names
    the slowed replica; making one copies its step, ~30 us)."""
    if factor == 1:
        return replica
    hit = _SLOWED.get((id(replica), factor))
    if hit is not None and hit[0] is replica:
        return hit[1]
    if len(_SLOWED) >= 8192:
        _SLOWED.clear()
    slowed = replica.slowed(factor)
    _SLOWED[(id(replica), factor)] = (replica, slowed)
    return slowed


# Off (FLEET_EAGER_CAPS=1): every cap exact while candidates are built (for comparisons).
LAZY = os.environ.get("FLEET_EAGER_CAPS", "") not in ("1", "true")


def cap_upper_bound(replica, mix: tuple[TrafficClass, ...], percentile: int, arrival_cv: float) -> float:
    """An upper bound on `max_rate_for_slo`: it never exceeds DEFAULT_MAX_UTILIZATION x the
    saturation rate, which is below the model's throughput ceiling (`throughput_ceiling`:
    no batch the engine could settle at does better without arriving prompts, nor beyond
    its prefill limit)."""
    model = load_model(replica, mix, float(arrival_cv))
    return DEFAULT_MAX_UTILIZATION * model.throughput_ceiling() * (1 + 1e-9)


def cap_key(pending: tuple) -> tuple:
    """What a pending configuration's cap is a function of, the `_llm_cap` memo's key:
    (the replica slowed for the service's confidence, mix, percentile, bounds, CV).
    Configurations of one replica shape on several offers share it."""
    replica, mix, p, bounds, cv, _, slow, _ = pending
    return (_slowed(replica, slow), mix, p, bounds, cv)


def per_key(pending: tuple, rate: float) -> float:
    """A configuration's rate as a rate under its cap key (`per_config`'s inverse)."""
    return rate * (1 + pending[5]) * (1 + pending[7])


def per_config(pending: tuple, value: float) -> float:
    """A value under a cap key (a cap, or a bound on one) as the configuration's rate: with
    the error band and the rate margin divided out as `exact_cap` does."""
    return value / (1 + pending[5]) / (1 + pending[7])


def saturation_cap_bound(key: tuple) -> float:
    """An upper bound on the cap under `key` (`cap_key`: before the error band and rate margin), tighter than
    `cap_upper_bound`, for ~1 ms (~4 ms where a class the KV cache holds one or two of sets the
    saturation, `_held_capacity`): `max_rate_for_slo` never returns more than
    DEFAULT_MAX_UTILIZATION x the saturation rate (its contract; tests/test_lazy_caps.py
    checks it). The cap's own search starts from the same saturation rate, which the cached
    model keeps, so it is not paid twice. Remembered (`_sat_bounds`)."""
    found = _sat_bounds.known(key)
    if found is not None:
        return found  # this bound, or a tighter one (probe_cap_bound)
    replica, mix, _, _, cv = key
    model = load_model(replica, mix, float(cv))
    value = 0.0 if model.slots < 1 else DEFAULT_MAX_UTILIZATION * model.saturation_rate() * (1 + 1e-9)
    _sat_bounds.put(key, value)
    return value


# A failing rate bounds the cap with this share of the saturation rate to spare: the
# search's own resolution (max_rate_for_slo's rel_tol), so that no rounding in the model's
# inner loops can put the cap above a bound.
PROBE_SLACK = 0.005


def probe_cap_bound(key: tuple, bound: float) -> float | None:
    """Whether the cap under `key` lies below `bound`, from one evaluation of the model (~3
    ms; the cap's search takes ~8): `bound` when a bound of the SLO is missed at `bound` -
    PROBE_SLACK x saturation (then it is missed at every higher rate: every percentile
    rises with the rate, the premise of max_rate_for_slo's search), else None (also where
    `bound` is not below the saturation bound). A bound found is remembered with the
    saturation bounds (`_sat_bounds` keeps the tightest known)."""
    replica, mix, p, bounds, cv = key
    model = load_model(replica, mix, float(cv))
    if model.slots < 1:
        return None
    sat = model.saturation_rate()
    rate = bound - PROBE_SLACK * sat
    if not (0 < rate and bound < DEFAULT_MAX_UTILIZATION * sat):
        return None
    if model.meets(rate, p, dict(bounds)):
        return None
    known = _sat_bounds.known(key)
    _sat_bounds.put(key, bound if known is None else min(known, bound))
    return bound


class _Memo(LockedLru):
    """Values by key, least recently used out; `known` does not count. Thread-safe."""

    def known(self, key):
        with self._lock:
            found = self._data.get(key)
        return None if found is None else found[0]

    def put(self, key, value) -> None:
        with self._lock:
            self._store(key, (value,))

    def cache_clear(self) -> None:
        self.clear()


_sat_bounds = _Memo(50_000)  # cap key -> the tightest bound known: saturation_cap_bound, probe_cap_bound
_first_bounds = _Memo(50_000)  # (replica, mix, CV) -> cap_upper_bound


def with_bound(c: Config, bound: float) -> Config:
    """Pending `c` with a tighter upper bound on its cap (still pending; never raised)."""
    if c.pending_cap is None or not bound < c.classes[0].throughput:
        return c
    return replace(c, classes=tuple(replace(k, throughput=bound) for k in c.classes))


def exact_cap(c: Config, pending: tuple | None = None) -> Config:
    """`c` with its throughput the queueing model's cap (0 with the reason when none), from
    `pending` or the configuration's own `pending_cap`; `c` itself when it has no cap to compute."""
    pending = pending or c.pending_cap
    if pending is None:
        return c
    replica, mix, p, bounds, cv, band, slow, margin = pending
    cap = _llm_cap(_slowed(replica, slow), mix, p, bounds, cv)
    cap /= 1 + band
    cap /= 1 + margin  # exact at "nominal": a division by 1.0
    reason = "" if cap > 0 else trickle_reason(_slowed(replica, slow), mix, p, bounds, cv, slow)
    return replace(c, pending_cap=None,
                   classes=tuple(replace(k, throughput=cap if cap > 0 else 0.0, reason=reason or k.reason,
                                         binding_limit="slo_under_load" if cap > 0 else k.binding_limit)
                                 for k in c.classes))


def trickle_reason(replica, mix: tuple[TrafficClass, ...], p: int, bounds: tuple, cv: float, slow: float) -> str:
    """Why a replica has no rate at which the percentile SLO holds: each bound its p-th
    percentile misses at a trickle of requests (`max_rate_for_slo`'s lowest rate), the
    furthest over first. That value is the exact threshold for this replica: with the bound
    at or above it the cap is positive (percentiles only rise with the rate), so the
    diagnosis can advise it ("relax slo.ttft_ms to at least ...")."""
    slower = f" on a replica {slow:.2f}x slower than modelled (slo.confidence)" if slow != 1 else ""
    model = load_model(replica, mix, float(cv))
    sat = model.saturation_rate()
    misses = []
    if sat > 0:
        at = model.at_rate(1e-6 * sat, (p,))
        misses = sorted(((at.value(m, p) / b, m, at.value(m, p), b) for m, b in bounds if at.value(m, p) > b),
                        reverse=True)
    if not misses:  # no capacity at all, or a CDF that misses at p without a value above the bound
        return f"misses the p{p} SLO ({_bounds_text(bounds)}) under load, even at a trickle of requests{slower}"
    _, m, v, b = misses[0]
    # Rounded up to 0.1 ms: the diagnosis advises the bound from this text (math.ceil of it),
    # and a percentile at a trickle can sit just above a whole ms (an idle arrival's TTFT:
    # 180.0004 shown as 180.0 advised 180, where the SLO still misses).
    more = "".join(f"; p{p} {_LABEL[m2]} {_up(v2):.1f} ms > {b2:g} ms" for _, m2, v2, b2 in misses[1:])
    return (f"misses the p{p} {_LABEL[m]} SLO under load: {_up(v):.1f} ms > {b:g} ms even at a trickle of "
            f"requests{slower}{more}")


def _up(ms: float) -> float:
    """`ms` rounded up to a tenth (what `:.1f` then prints exactly)."""
    return math.ceil(round(ms * 10.0, 6)) / 10.0


def _measured(svc, c: Config) -> Config:
    p = svc.slo.percentile
    margin = rate_margin(svc.slo.confidence)
    classes = []
    for k in c.classes:
        cap = _measured_cap(svc, k, k.throughput, margin)
        if cap is None:
            classes.append(k)
            continue
        reason = "" if cap > 0 else f"misses the p{p} SLO ({_bounds_text(svc.slo.bounds())}) under load"
        classes.append(replace(k, throughput=cap, reason=reason or k.reason,
                               binding_limit="slo_under_load" if cap > 0 else k.binding_limit))
    return replace(c, classes=tuple(classes))


def _measured_cap(svc, k, measured_rate: float, margin: float) -> float | None:
    """Class k's cap under load on a measured replica of `measured_rate` (service units),
    with `margin` more traffic than the cap allows; None where no wait matters (no rate,
    or only a TPOT bound: a wait does not change the time per token)."""
    if measured_rate <= 0:
        return None
    budgets = [b - v for b, v in ((svc.slo.latency_ms, k.latency_ms), (svc.slo.ttft_ms, k.ttft_ms))
               if b is not None and v is not None]
    if not budgets:
        return None
    unit = PER_SECOND[svc.unit]
    latency_s = (k.latency_ms or k.ttft_ms or 0.0) / 1e3 or None
    cap = measured_max_rate(measured_rate * unit, latency_s, svc.slo.percentile, min(budgets) / 1e3,
                            svc.arrival_cv) / unit
    return cap / (1 + margin)


def _service_mix(svc) -> tuple[TrafficClass, ...]:
    """The request mix every replica of an LLM service serves under a percentile SLO: the
    classes with demand, at their shares (normalised)."""
    classes = [k for k, d in enumerate(svc.class_demand) if d > 0] or [0]
    mix = tuple(TrafficClass(svc.class_shares[k], svc.class_tokens[k].prompt_tokens, svc.class_tokens[k].output_tokens,
                             svc.class_names[k]) for k in classes)
    total = sum(m.share for m in mix)
    return tuple(replace(m, share=m.share / total) for m in mix)


# ---------------------------------------------------------------- what the margin costs, per assignment
def caps_per_replica(catalog, calibration, svc, config: Config, routed: tuple[float, ...]) -> tuple[float, float] | None:
    """(the plan's cap, the nominal model's cap) of one replica of `config`, in the
    service's unit at the mix the plan routes to it (the service's shares where it routes
    none): what `slo.confidence` takes off the configuration. None where the service has
    no cap under load (no percentile SLO, or no bound). The nominal cap is computed here,
    for a configuration of the plan only (a queueing-model search where it is not cached)."""
    if svc.slo.percentile is None or not svc.slo.bounds():
        return None
    total = sum(routed)
    weights = [r / total for r in routed] if total > 0 else list(svc.class_shares)
    robust = [k.throughput for k in config.classes]
    if config.source == "measured":
        gpu = _offer_of(catalog, config.offer_id).gpu
        margin = rate_margin(svc.slo.confidence)
        nominal = []
        for k, perf in enumerate(config.classes):
            cap = _measured_cap(svc, perf, _profile_rate(svc, config, gpu, k) or perf.throughput, 0.0)
            # Without a cap under load (a TPOT-only bound) the class keeps its measured rate.
            nominal.append(perf.throughput if cap is None or margin == 0 else cap)
    else:
        replica = _replica_of(catalog, calibration, svc, config)
        band = config.error_band if svc.size_with_error_band else 0.0
        cap = _llm_cap(replica, _service_mix(svc), svc.slo.percentile, svc.slo.bounds(), float(svc.arrival_cv))
        nominal = [cap / (1 + band)] * len(config.classes)
    return _at_mix(robust, weights), _at_mix(nominal, weights)


def _at_mix(caps: list[float], weights: list[float]) -> float:
    """The total rate one replica takes at a class mix, given its per-class caps (the
    capacity row sum_k x_k / cap_k <= 1 at x = rate x weights)."""
    load = 0.0
    for cap, w in zip(caps, weights):
        if w > 0:
            if cap <= 0:
                return 0.0
            load += w / cap
    return 1.0 / load if load > 0 else 0.0


def _bounds_text(bounds) -> str:
    return ", ".join(f"{_LABEL[name]} {value:g} ms" for name, value in bounds)


def _kind(reason: str) -> str:
    """The metric a reason names first (a percentile reason puts the bound missed most first)."""
    found = [(reason.find(word), kind) for word, kind in (("TTFT", "ttft"), ("TPOT", "tpot"), ("latency", "latency"))
             if word in reason]
    return min(found)[1] if found else "latency"


# ---------------------------------------------------------------- percentiles at the planned load
def real_share(problem, svc) -> float:
    """The share of the traffic a plan routes to `svc` that is real demand: the rest is
    constraints.headroom, capacity planned but not loaded. A service's rows carry demand x
    (1 + headroom); a disaggregated pool's carry what its parent routes to it, headroom
    included. Reports (utilization, at_load) are at the real demand's rate."""
    if svc.role:
        return 1.0 / (1.0 + (getattr(problem, "headroom", 0.0) or 0.0))
    total = svc.total_demand
    return min(1.0, svc.raw_demand / total) if total > 0 else 1.0


def real_routed(problem, svc, routed) -> tuple[float, ...]:
    """`routed` (per class, headroom included) scaled down to the real demand."""
    share = real_share(problem, svc)
    return tuple(r * share for r in routed) if share != 1.0 else tuple(routed)


def at_load(catalog, calibration, svc, config: Config, replicas: int, routed: tuple[float, ...]) -> AtLoad:
    """What a plan promises for one assignment: at the service's SLO percentile (99 where
    none is stated), with the rate the plan routes to each replica, the queueing model's
    TTFT, TPOT and latency, the utilization (rate / the most a replica sustains), and
    whether every stated bound holds; with their band (the replica slowed by the
    (1 - c) / 2 and (1 + c) / 2 quantiles of the calibrated slowdown) and whether the
    bounds hold robustly (slowed by the c-quantile, at the rate x (1 + RATE_MARGIN)).
    The JSON names are a contract: `at_load` with percentile, utilization, ttft_ms,
    tpot_ms, latency_ms, meets_slo, meets_slo_robust, confidence, slowdown, band. The plan
    reports it at the real demand's rate (`real_routed`: headroom apart); the evaluator
    checks the SLO at the planned rate, headroom included (at_load_checked)."""
    return at_load_checked(catalog, calibration, svc, config, replicas, routed)[0]


def at_load_checked(catalog, calibration, svc, config: Config, replicas: int,
                    routed: tuple[float, ...], band: bool = True) -> tuple[AtLoad, dict]:
    """`at_load`, and the values of its robust check (for the evaluator's messages).
    `band=False` (the evaluator, which reads only the checks): the band is not computed
    and is reported as the value itself - two of the four model evaluations."""
    p = svc.slo.percentile or 99
    rate_total = sum(routed)
    per_replica = rate_total / replicas if replicas else 0.0
    level = svc.slo.confidence  # None: sized nominally ("nominal", or no percentile SLO)
    c = band_confidence(level)
    # The robust check is the condition the caps were sized for: the service's confidence.
    # A service that sizes nominally has none beyond the model's (meets_slo_robust is
    # meets_slo), but its values still get a band.
    margin = rate_margin(level)
    table = calibration.under_load_slowdown
    if config.source == "measured":
        # Measured profiles are the real replica's speed: no model slowdown, the rate margin only.
        gpu = _offer_of(catalog, config.offer_id).gpu
        values = _measured_at(svc, config, gpu, routed, per_replica, p)
        low = high = values
        robust = values if margin == 0 else _measured_at(svc, config, gpu, routed, per_replica * (1 + margin), p)
        slow = 1.0
    else:
        replica, mix = _replica_of(catalog, calibration, svc, config), _routed_mix(svc, routed)
        cv = float(svc.arrival_cv)
        values = _llm_at(replica, mix, per_replica, cv, p)
        # The factors are clamped to include 1: the band always contains the model's own
        # value, even where the fitted quantiles lie on one side of it.
        q_low, q_high = band_levels(c)
        low = _llm_at(replica, mix, per_replica, cv, p, min(quantile(q_low, table), 1.0)) if band else values
        high = _llm_at(replica, mix, per_replica, cv, p, max(quantile(q_high, table), 1.0)) if band else values
        slow = slowdown(level, calibration)
        robust = values if slow == 1 and margin == 0 else \
            _llm_at(replica.slowed(slow), mix, per_replica * (1 + margin), cv, p)
    # A bound the configuration gives no value for (a measured profile without a TTFT) was
    # checked when the configuration was built; here only the predicted values count.
    meets = _meets(svc, values)
    band = LoadBand(*(None if values.get(name) is None else [_r(low[name]), _r(high[name])]
                      for name in ("ttft_ms", "tpot_ms", "latency_ms")))
    at = AtLoad(p, _r(values["utilization"]) or 0.0, _r(values.get("ttft_ms")), _r(values.get("tpot_ms")),
                _r(values.get("latency_ms")), meets, _meets(svc, robust), c, round(slow, 6), band)
    return at, {"utilization": robust["utilization"], "rate_per_replica": per_replica * (1 + margin),
                "slowdown": slow, "rate_margin": margin,
                **{name: _r(v) for name, v in robust.items() if name != "utilization"}}


def _meets(svc, values: dict) -> bool:
    return all(values[name] <= bound * (1 + 1e-9) for name, bound in svc.slo.bounds() if name in values)


_OFFER_INDEX: tuple = (None, {})  # (weak reference to a catalog, its offers by id), replaced whole


def _offer_of(catalog, offer_id: str):
    """The catalog's (first) offer with this id, from an index of the last catalog asked
    about (a plan asks once per assignment; a scan is ~150 offers). Thread-safe: the
    entry is read and replaced as one tuple."""
    global _OFFER_INDEX
    ref, index = _OFFER_INDEX
    if ref is None or ref() is not catalog:
        index = {}
        for o in catalog.offers:
            index.setdefault(o.id, o)
        _OFFER_INDEX = (weakref.ref(catalog), index)
    return index[offer_id]


def _r(x):
    """Rounded; None where the replica cannot keep up (an infinite percentile is not JSON)."""
    return None if x is None or x == float("inf") else round(x, 4)


def _replica_of(catalog, calibration, svc, config: Config):
    """The queueing view of one of the service's estimated configurations."""
    return replica_for(_query_of(catalog, calibration, svc, config))


def _query_of(catalog, calibration, svc, config: Config):
    """The PerfQuery the planner built for one of the service's estimated configurations (a
    disaggregated pool's worker: its worker query)."""
    offer = _offer_of(catalog, config.offer_id)
    if svc.role:
        from solver.compile.disagg import worker_query

        return worker_query(svc, catalog, offer, config.gpus_per_replica, config.precision, calibration)
    from solver.compile.candidates import CandidateBuilder, _OfferCandidates

    oc = _OfferCandidates(CandidateBuilder(catalog, [offer], calibration), svc, offer, catalog.gpus[offer.gpu])
    first = svc.class_tokens[0]
    return oc._query(svc.model, config.gpus_per_replica, config.instances_per_replica, config.precision,
                     first.prompt_tokens, first.output_tokens)


def engine_options_of(catalog, calibration, svc, config: Config) -> dict | None:
    """The engine's settings in effect for one of the service's estimated configurations
    (solver.perf.llm.engine_settings: the version's defaults and the service's options), as
    the plan reports them for the export to start the engine with; None for measured profiles."""
    if svc.model is None or config.source != "estimate" or config.precision is None:
        return None
    from solver.perf.llm import engine_settings

    return engine_settings(_query_of(catalog, calibration, svc, config))


def _routed_mix(svc, routed) -> tuple[TrafficClass, ...]:
    """The mix the plan routes to a replica (the first class where it routes nothing)."""
    total = sum(routed)
    if total <= 0:
        first = svc.class_tokens[0]
        return (TrafficClass(1.0, first.prompt_tokens, first.output_tokens, svc.class_names[0]),)
    return tuple(TrafficClass(r / total, svc.class_tokens[k].prompt_tokens, svc.class_tokens[k].output_tokens,
                              svc.class_names[k]) for k, r in enumerate(routed) if r > 0)


def _llm_at(replica, mix, per_replica: float, arrival_cv: float, p: int, band_factor: float = 1.0) -> dict:
    """The values at p; with `band_factor`, of the replica that many times slower (read
    off the model itself: `percentiles_slowed`, for a band)."""
    from solver.perf.queueing import percentiles_slowed

    at = percentiles_slowed(replica, mix, max(per_replica, 1e-9), band_factor, arrival_cv, percentiles=(p,))
    return {"utilization": at.utilization, "ttft_ms": at.ttft_ms[p], "tpot_ms": at.tpot_ms[p],
            "latency_ms": at.latency_ms[p]}


def _measured_at(svc, config: Config, gpu: str, routed, per_replica: float, p: int) -> dict:
    from solver.perf.queueing.servers import wait_quantile_s

    unit = PER_SECOND[svc.unit]
    total = sum(routed)
    worst = {"utilization": 0.0}
    for k, perf in enumerate(config.classes):  # each class's share of the replica's traffic
        if perf.throughput <= 0 or (total > 0 and routed[k] <= 0):
            continue
        # The profile's own rate (before any cap) sets the servers; the cap only limits the load.
        measured_rate = _profile_rate(svc, config, gpu, k) or perf.throughput
        latency_s = (perf.latency_ms or perf.ttft_ms or 0.0) / 1e3 or None
        load = per_replica * (routed[k] / total if total > 0 else 1.0)
        wait_ms = wait_quantile_s(measured_rate * unit, latency_s, load * unit, p / 100, svc.arrival_cv) * 1e3
        worst["utilization"] = max(worst["utilization"], load / measured_rate if measured_rate else 0.0)
        for name, base in (("latency_ms", perf.latency_ms), ("ttft_ms", perf.ttft_ms)):
            if base is not None:
                worst[name] = max(worst.get(name, 0.0), base + wait_ms)
        if perf.tpot_ms is not None:
            worst["tpot_ms"] = max(worst.get("tpot_ms", 0.0), perf.tpot_ms)
    return worst


def _profile_rate(svc, config: Config, gpu: str, k: int) -> float | None:
    """The measured rate of the profile behind class k of a measured configuration."""
    cname = svc.class_names[k]
    match = [p for p in svc.profiles if p.gpu == gpu and p.gpus_per_replica == config.gpus_per_replica
             and p.precision == config.precision and p.request_class in (cname, None)
             and p.offer in (None, config.offer_id)]
    match.sort(key=lambda p: p.request_class is None)
    return match[0].rate if match else None
