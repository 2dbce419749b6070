"""The derived workload: the workload file's fields (solver/workload/schema.py) and the
account of how each was derived, as YAML comments or a sidecar JSON file (the schema has
no free-text field, and keeping it that way keeps the file a plain workload)."""

from __future__ import annotations

import json

from solver.traffic.from_trace import Derivation


def workload_dict(d: Derivation, name: str, models: dict[str, str], slo: dict, engine: str | None) -> dict:
    services = []
    for s in d.services:
        demand: dict = {"requests_per_s": s.rate_per_s, "arrival_cv": s.arrival_cv,
                        "classes": [{"name": c.name, "share": c.share, "prompt_tokens": c.prompt_tokens,
                                     "output_tokens": c.output_tokens} for c in s.classes]}
        if s.profile:
            demand["profile"] = dict(s.profile)
        svc: dict = {"name": s.name, "model": models[s.name]}
        if engine:
            svc["engine"] = engine
        svc["demand"] = demand
        if slo:
            svc["slo"] = dict(slo)
        services.append(svc)
    out: dict = {"name": name}
    if d.periods:
        out["periods"] = [{"name": p.name, "hours": p.hours} for p in d.periods]
    out["services"] = services
    return out


def derivation_dict(d: Derivation, command: str) -> dict:
    """Everything measured, for the sidecar file (and tests)."""
    o = d.options
    return {
        "derived_by": command, "source": d.source, "kind": d.kind, "requests": d.requests,
        "span_s": round(d.span_s, 3), "engine": d.engine,
        "rules": {"classes": f"{o.body_classes} body classes of equal counts by prompt+output tokens and a tail "
                             f"class beyond the {o.tail_quantile:g} quantile; each class its mean prompt and "
                             "output, rounded up",
                  "peak_window_s": o.peak_window_s, "cv_window_s": o.cv_window_s, "period_bin_s": o.bin_s,
                  "max_periods": o.max_periods, "period_waste": o.period_waste, "docs": "docs/traces.md"},
        "periods": None if not d.periods else [{"name": p.name, "hours": p.hours, "start_hour": p.start_hour}
                                               for p in d.periods],
        "folded_onto_a_day": d.folded, "period_waste": d.period_waste, "notes": d.notes,
        "services": [{
            "name": s.name, "requests": s.requests, "mean_rate_per_s": s.mean_rate_per_s,
            "peak_rate_per_s": None if s.peak is None else s.peak.rate_per_s,
            "peak_window_s": None if s.peak is None else s.peak.window_s,
            "peak_window_start_s": None if s.peak is None else s.peak.start_s,
            "requests_per_s": s.rate_per_s, "arrival_cv_measured": None if s.cv is None else s.cv.value,
            "arrival_cv_gaps": None if s.cv is None else s.cv.gaps, "arrival_cv": s.arrival_cv,
            "prompt_tokens": s.prompt, "output_tokens": s.output, "longest_total_tokens": s.longest_total,
            "model_column": {m: v[0] for m, v in s.models.items()},
            "hourly_peak_rate_per_s": None if s.levels is None else [round(float(x), 4) for x in s.levels.rate_per_s],
            "classes": [{"name": c.name, "share": c.share, "requests": c.requests, "prompt_tokens": c.prompt_tokens,
                         "output_tokens": c.output_tokens, "total_tokens_min": c.total_min,
                         "total_tokens_max": c.total_max, "tail": c.tail} for c in s.classes],
            "profile": s.profile, "notes": s.notes} for s in d.services]}


def description(d: Derivation, command: str, slo_given: bool) -> list[str]:
    """How the workload was derived, in lines for a reader (YAML comments, stderr)."""
    o = d.options
    lines = [f"Derived by: {command}",
             f"From {d.kind} {d.source}: {d.requests:,} requests over {d.span_s:,.1f} s ({d.span_s / 3600:.2f} h)."]
    if d.kind == "trace":
        lines.append(f"Rules (docs/traces.md): requests_per_s = the peak rate over a sliding {o.peak_window_s} s window "
                     f"(the whole trace when shorter); arrival_cv within {o.cv_window_s:g} s windows; classes = "
                     f"{o.body_classes} equal-count classes by prompt+output tokens and a tail class beyond the "
                     f"{o.tail_quantile:g} quantile, each its mean prompt and output (rounded up).")
    for s in d.services:
        head = f"{s.name}: {s.requests:,} requests, mean {s.mean_rate_per_s:.4g}/s"
        if s.peak is not None:
            head += (f", peak {s.peak.rate_per_s:.4g}/s over {s.peak.window_s:g} s from {s.peak.start_s:g} s "
                     f"-> requests_per_s {s.rate_per_s:g}")
        else:
            head += f" -> requests_per_s {s.rate_per_s:g} (the mean: metrics have no peak)"
        lines.append(head)
        if s.cv is not None and s.cv.value is not None:
            lines.append(f"  arrival_cv {s.cv.value:.3f} from {s.cv.gaps:,} gaps in {s.cv.windows:,} windows "
                         f"of {o.cv_window_s:g} s")
        if s.prompt:
            lines.append(f"  prompt tokens p50/p99/max {s.prompt['p50']}/{s.prompt['p99']}/{s.prompt['max']}, output "
                         f"{s.output['p50']}/{s.output['p99']}/{s.output['max']}")
        for c in s.classes:
            where = f"{c.total_min}-{c.total_max} tokens" if c.total_min is not None else c.name
            lines.append(f"  class {c.name}: share {c.share:g} ({c.requests:,.0f} requests, {where}), mean prompt "
                         f"{c.prompt_tokens}, output {c.output_tokens}" + (" [tail]" if c.tail else ""))
        lines += [f"  note: {n}" for n in s.notes]
    if d.periods:
        lines.append(f"Periods: {len(d.periods)} from hourly peak rates"
                     + (" folded onto the hours of a day (the highest of each hour over the days)" if d.folded else "")
                     + f", cut so that sizing each for its peak over-provisions {100 * (d.period_waste or 0):.1f} % "
                     f"(target {100 * o.period_waste:g} % or less, with at most {o.max_periods} periods); hours count from the "
                     "trace's start. demand.profile = each period's peak / requests_per_s, rounded up.")
    lines += [f"Note: {n}" for n in d.notes]
    if not slo_given:
        lines.append("SLO: none derived (a trace does not say what latency users need): add slo.ttft_ms, "
                     "slo.tpot_ms and slo.percentile per service, or derive with --ttft-ms/--tpot-ms/--percentile.")
    return lines


def render(workload: dict, lines: list[str], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(workload, indent=2) + "\n"
    import yaml

    head = "".join(f"# {line}\n" for line in lines)
    return head + yaml.safe_dump(workload, sort_keys=False, width=110, default_flow_style=None)
