"""A trace's traffic per service, in one streaming pass (the rules: rates.py, classes.py,
periods.py; the reader: solver/sim/trace.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from solver.sim.trace import SERVICE_NAME, ServicePolicy, TraceError, TraceReader
from solver.traffic.accumulate import ServiceCounts
from solver.traffic.classes import LengthClass, classes_from_lengths, quantile_of
from solver.traffic.periods import Period, cut_into_periods, fold_to_day, profile
from solver.traffic.rates import ArrivalCV, Peak, arrival_cv, hourly_levels, peak_rate

# A derivation keeps no request, only counts: it may read far more than a replay.
MAX_DERIVE_REQUESTS = 50_000_000
MAX_DERIVE_BYTES = 512 * MAX_DERIVE_REQUESTS
MAX_ARRIVAL_CV = 20.0  # the workload schema's bound on demand.arrival_cv


@dataclass(frozen=True)
class DeriveOptions:
    body_classes: int = 3
    tail_quantile: float = 0.95
    peak_window_s: int = 300
    cv_window_s: float = 60.0
    bin_s: int = 3600  # periods are cut from hours
    periods: str = "auto"  # auto: when the trace spans min_period_span_s or more; none: never
    min_period_span_s: float = 7200.0
    max_periods: int = 6
    period_waste: float = 0.10


@dataclass
class ServiceTraffic:
    name: str
    requests: int
    mean_rate_per_s: float
    peak: Peak | None  # None from metrics (no peak in a counter)
    cv: ArrivalCV | None
    classes: list[LengthClass]
    rate_per_s: float  # the demand written: the peak (or the mean from metrics), rounded up
    arrival_cv: float  # written: measured, rounded up, or 1.0 when not measurable
    prompt: dict = field(default_factory=dict)  # p50, p99, max (tokens)
    output: dict = field(default_factory=dict)
    longest_total: int | None = None
    model: str | None = None  # from the trace's model column (or the metrics' label)
    models: dict = field(default_factory=dict)  # model column value -> [requests, first line]
    first_line: int | None = None
    levels: np.ndarray | None = None
    profile: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class Derivation:
    source: str
    kind: str  # "trace" or "prometheus"
    requests: int
    span_s: float
    services: list[ServiceTraffic]
    options: DeriveOptions
    periods: list[Period] | None = None
    folded: bool = False
    period_waste: float | None = None
    notes: list[str] = field(default_factory=list)
    engine: str | None = None


def ceil_sig(x: float, digits: int = 4) -> float:
    """x rounded up to `digits` significant digits (a rate is never written lower than measured)."""
    if x <= 0 or not math.isfinite(x):
        return x
    scale = 10 ** (digits - 1 - math.floor(math.log10(x)))
    return math.ceil(x * scale - 1e-9) / scale


def ceil_to(x: float, decimals: int) -> float:
    scale = 10 ** decimals
    return math.ceil(x * scale - 1e-9) / scale


def default_service_name(path: str | Path) -> str:
    stem = Path(path).stem
    return stem if SERVICE_NAME.match(stem) and len(stem) <= 100 else "traffic"


def derive_from_trace(path: str | Path, options: DeriveOptions = DeriveOptions(),
                      service_name: str | None = None) -> Derivation:
    """Read the trace once and derive each service's traffic. Raises TraceError."""
    policy = ServicePolicy(free=True, default=service_name or default_service_name(path))
    reader = TraceReader(path, policy, MAX_DERIVE_REQUESTS, MAX_DERIVE_BYTES, read_model=True)
    counts: list[ServiceCounts] = []
    for batch in reader.chunks():
        while len(counts) < len(reader.names):
            counts.append(ServiceCounts(options.cv_window_s))
        order = np.argsort(batch.service, kind="stable")  # each service's rows, in arrival order
        split = np.flatnonzero(np.diff(batch.service[order])) + 1
        models = batch.model if batch.model is not None and batch.model.any() else None
        for idx in np.split(order, split):
            acc = counts[int(batch.service[idx[0]])]
            if acc.first_line is None:
                acc.first_line = int(batch.line[idx[0]])
            acc.add(batch.arrival_s[idx], batch.prompt_tokens[idx], batch.output_tokens[idx])
            if models is not None:
                _count_models(acc, models[idx], batch.line[idx], reader.model_names)
    reader.finish()
    span_s = max(c.last_arrival_s for c in counts)
    if span_s <= 0:
        raise TraceError([f"{path}: every request arrives at 0 s: no rate can be measured. To fix: give each "
                          "request its arrival time (seconds from the start of the trace)"])
    seconds = int(span_s) + 1
    services = [_service(name, acc, span_s, seconds, options) for name, acc in zip(reader.names, counts)]
    d = Derivation(str(path), "trace", reader.requests, span_s, services, options)
    _periods(d, seconds)
    return d


def _count_models(acc: ServiceCounts, models: np.ndarray, lines: np.ndarray, names: list[str]) -> None:
    codes, first, counts = np.unique(models, return_index=True, return_counts=True)
    for code, i, n in zip(codes.tolist(), first.tolist(), counts.tolist()):
        if code:  # 0: no model given
            seen = acc.models.setdefault(names[code], [0, int(lines[i])])
            seen[0] += n


def _service(name: str, acc: ServiceCounts, span_s: float, seconds: int, o: DeriveOptions) -> ServiceTraffic:
    total_keys, (count, psum, osum) = acc.totals.table()
    classes = classes_from_lengths(total_keys, count, psum, osum, o.body_classes, o.tail_quantile)
    per_second = acc.counts_per_second(seconds)
    peak = peak_rate(per_second, span_s, o.peak_window_s)
    cv = arrival_cv(acc.gap_n, acc.gap_sum, acc.gap_sq)
    notes = []
    if cv.value is None:
        written_cv = 1.0
        notes.append(f"arrival_cv: no {o.cv_window_s:g} s window holds two gaps between arrivals; 1.0 (Poisson) "
                     "assumed")
    else:
        written_cv = min(ceil_to(cv.value, 2), MAX_ARRIVAL_CV)
        if cv.value > MAX_ARRIVAL_CV:
            notes.append(f"arrival_cv {cv.value:.3g} measured, written as the schema's most, {MAX_ARRIVAL_CV:g}")
    model = None
    if acc.models:
        model = max(acc.models, key=lambda m: (acc.models[m][0], -acc.models[m][1]))
        if len(acc.models) > 1:
            notes.append("model column names " + ", ".join(f"{m!r} ({v[0]:,} requests)" for m, v in acc.models.items())
                         + f": {model!r}, the most frequent, is used")
    prompt_keys, (pc,) = acc.prompts.table()
    output_keys, (oc,) = acc.outputs.table()
    return ServiceTraffic(
        name=name, requests=acc.requests, mean_rate_per_s=acc.requests / span_s, peak=peak, cv=cv, classes=classes,
        rate_per_s=ceil_sig(peak.rate_per_s), arrival_cv=written_cv,
        prompt={"p50": quantile_of(prompt_keys, pc, 0.5), "p99": quantile_of(prompt_keys, pc, 0.99),
                "max": int(prompt_keys[-1])},
        output={"p50": quantile_of(output_keys, oc, 0.5), "p99": quantile_of(output_keys, oc, 0.99),
                "max": int(output_keys[-1])},
        longest_total=int(total_keys[-1]), model=model, models=acc.models, first_line=acc.first_line,
        levels=hourly_levels(per_second, o.peak_window_s, o.bin_s) if seconds >= o.peak_window_s else None,
        notes=notes)


def _periods(d: Derivation, seconds: int) -> None:
    o = d.options
    if o.periods == "none":
        d.notes.append("periods: not asked for (--periods none)")
        return
    if d.span_s < o.min_period_span_s or seconds < o.peak_window_s:
        d.notes.append(f"periods: none, the trace spans {d.span_s / 3600:.2f} h (periods from "
                       f"{o.min_period_span_s / 3600:g} h)")
        return
    first = d.services[0].levels
    levels = np.vstack([s.levels.rate_per_s for s in d.services])
    levels, hours, start_hour, folded = fold_to_day(levels, first.bin_start_s, first.bin_hours)
    periods, waste = cut_into_periods(levels, hours, start_hour, o.max_periods, o.period_waste)
    if len(periods) < 2:
        d.notes.append(f"periods: none, the demand is within {100 * o.period_waste:g} % of one level over the "
                       f"{d.span_s / 3600:.2f} h")
        return
    d.periods, d.folded, d.period_waste = periods, folded, waste
    for s, row in zip(d.services, levels):
        s.profile = profile(row, periods, s.rate_per_s)
