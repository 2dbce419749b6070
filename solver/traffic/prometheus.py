"""Traffic from Prometheus text-format snapshots of a vLLM or SGLang server's /metrics.

Metric names and bucket layouts as the engines define them:

* vLLM, vllm/v1/metrics/loggers.py (vllm-project/vllm at a6f0308cfe806b7731ad4979c9bea6e470c35efd):
  counter `vllm:request_success_total` (labels model_name, engine, finished_reason),
  histograms `vllm:request_prompt_tokens` and `vllm:request_generation_tokens` (labels
  model_name, engine) with buckets build_1_2_5_buckets(max_model_len): 1, 2, 5, 10, 20, 50,
  ... up to the model's context; counters `vllm:prompt_tokens_total`,
  `vllm:generation_tokens_total`.
* SGLang, python/sglang/srt/metrics/collector.py (sgl-project/sglang at
  93d04878cfb9b08645fae7b11bd340ee33b34acf): counter `sglang:num_requests_total`, counters
  `sglang:prompt_tokens_total` and `sglang:generation_tokens_total`, and, only when the
  server runs with --collect-tokens-histogram, histograms `sglang:prompt_tokens_histogram`
  and `sglang:generation_tokens_histogram` (default buckets 100, 300, 500, 700, 1000, 1500,
  2000, 3000, ... 1100000); labels model_name (and the server's own).

Rate: the request counter's increase between two snapshots over the time between them
(the samples' timestamps, or --window-s), or one snapshot's count over --window-s (how long
the server has been counting). Lengths: the two histograms' increase (classes.py's rule
for histograms); without histograms, one class of the mean lengths (the token counters
over the requests). Counters say nothing of peaks or burstiness: the rate written is the
mean over the window and arrival_cv is 1.0 (Poisson), both said in the output.
Samples are grouped by their model_name label, one service each; other labels (engine
index, finish reason) are summed over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from solver.sim.trace import SERVICE_NAME, TraceError
from solver.traffic.classes import LengthClass, classes_from_histograms, rounded_shares
from solver.traffic.from_trace import Derivation, DeriveOptions, ServiceTraffic, ceil_sig

MAX_SNAPSHOT_BYTES = 64 << 20  # a /metrics page is kilobytes; this refuses a wrong file from its size

ENGINES = {
    "vllm": {"requests": "vllm:request_success_total", "prompt": "vllm:request_prompt_tokens",
             "output": "vllm:request_generation_tokens", "prompt_total": "vllm:prompt_tokens_total",
             "output_total": "vllm:generation_tokens_total"},
    "sglang": {"requests": "sglang:num_requests_total", "prompt": "sglang:prompt_tokens_histogram",
               "output": "sglang:generation_tokens_histogram", "prompt_total": "sglang:prompt_tokens_total",
               "output_total": "sglang:generation_tokens_total"},
}


@dataclass
class ModelSeries:
    """One model's sums over a snapshot: counters by sample name, histogram buckets by
    metric name (upper bound -> cumulative count), and the latest timestamp seen (s)."""

    values: dict = field(default_factory=dict)
    buckets: dict = field(default_factory=dict)
    timestamp_s: float | None = None


@dataclass
class Snapshot:
    path: str
    engine: str
    models: dict  # model_name label ('' when none) -> ModelSeries


def read_snapshot(path: str | Path) -> Snapshot:
    from prometheus_client.parser import text_string_to_metric_families

    where = str(path)
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_SNAPSHOT_BYTES:
            raise TraceError([f"{where}: {size:,} bytes, more than the {MAX_SNAPSHOT_BYTES:,} a metrics snapshot may "
                              "have. To fix: save one scrape of the server's /metrics"])
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError([f"{where}: no such file. To fix: save the server's /metrics page to a file "
                          "(curl -s http://HOST:PORT/metrics > snapshot.prom)"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError([f"{where}: cannot be read ({exc}). To fix: a Prometheus text-format file"]) from None
    models: dict[str, ModelSeries] = {}
    engine = None
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                name = s.name
                prefix = name.split(":", 1)[0] if ":" in name else None
                if prefix not in ENGINES:
                    continue
                engine = engine or prefix
                series = models.setdefault(s.labels.get("model_name", ""), ModelSeries())
                if not math.isfinite(s.value) and not name.endswith("_bucket"):
                    raise ValueError(f"{name} is {s.value}")
                if name.endswith("_bucket"):
                    le = float(s.labels.get("le", "nan"))
                    hist = series.buckets.setdefault(name[: -len("_bucket")], {})
                    hist[le] = hist.get(le, 0.0) + s.value
                else:
                    series.values[name] = series.values.get(name, 0.0) + s.value
                if s.timestamp is not None:
                    series.timestamp_s = max(series.timestamp_s or 0.0, float(s.timestamp))
    except (ValueError, TypeError, IndexError) as exc:
        raise TraceError([f"{where}: not Prometheus text format ({exc}). To fix: save the server's /metrics page "
                          "as it is"]) from None
    if engine is None:
        raise TraceError([f"{where}: no vllm: or sglang: metrics. To fix: a scrape of a vLLM or SGLang server's "
                          "/metrics"])
    return Snapshot(where, engine, models)


def derive_from_prometheus(paths: list[str], window_s: float | None, options: DeriveOptions = DeriveOptions(),
                           service_name: str | None = None) -> Derivation:
    snaps = [read_snapshot(p) for p in paths]
    engine = snaps[0].engine
    if any(s.engine != engine for s in snaps):
        raise TraceError([f"{snaps[1].path}: {snaps[1].engine} metrics, but {snaps[0].path} has {engine}'s. To fix: "
                          "two snapshots of the same server"])
    names = ENGINES[engine]
    first, last = (None, snaps[0]) if len(snaps) == 1 else snaps
    interval = window_s
    if interval is None and first is not None:
        t0 = [m.timestamp_s for m in first.models.values() if m.timestamp_s is not None]
        t1 = [m.timestamp_s for m in last.models.values() if m.timestamp_s is not None]
        if t0 and t1 and max(t1) > max(t0):
            interval = max(t1) - max(t0)
    if interval is None:
        what = ("the snapshots carry no sample timestamps" if first is not None
                else "one snapshot's counters count since the server started")
        raise TraceError([f"{last.path}: {what}. To fix: --window-s SECONDS, the time "
                          + ("between the two snapshots" if first is not None else "the server has been counting "
                             "(its uptime), or give two snapshots")])
    services, notes = [], []
    for model, cur in last.models.items():
        before = first.models.get(model, ModelSeries()) if first is not None else ModelSeries()

        def delta(name: str) -> float | None:
            if name not in cur.values:
                return None
            d = cur.values[name] - before.values.get(name, 0.0)
            if d < 0:
                raise TraceError([f"{last.path}: {name} for {model or 'the server'} went down between the "
                                  "snapshots (the server restarted). To fix: two snapshots of one run"])
            return d

        requests = delta(names["requests"])
        if requests is None:
            requests = delta(names["prompt"] + "_count")
        if not requests:
            notes.append(f"{model or 'the server'}: no requests in the window; left out")
            continue
        classes, cnotes = _classes(cur, before, names, requests, options)
        service = _service_name(model, service_name or engine)
        rate = requests / interval
        services.append(ServiceTraffic(
            name=service, requests=int(round(requests)), mean_rate_per_s=rate, peak=None, cv=None, classes=classes,
            rate_per_s=ceil_sig(rate), arrival_cv=1.0, model=model or None,
            notes=cnotes + ["arrival_cv: counters do not show burstiness; 1.0 (Poisson) assumed",
                            f"requests_per_s is the mean over the {interval:g} s window: size for the busiest "
                            "hour with snapshots around it, or add headroom"]))
    if not services:
        raise TraceError([f"{last.path}: no requests counted in the window. To fix: snapshots of a server that "
                          "served traffic between them"])
    d = Derivation(" and ".join(s.path for s in snaps), "prometheus", sum(s.requests for s in services), interval,
                   services, options, notes=notes, engine=engine)
    return d


def _service_name(model: str, fallback: str) -> str:
    name = model.split("/")[-1] if model else fallback
    name = "".join(ch if ch.isalnum() or ch in "._:-" else "-" for ch in name).lstrip("._:-")[:100]
    return name if SERVICE_NAME.match(name or "") else fallback


def _hist(cur: ModelSeries, before: ModelSeries, metric: str):
    """(finite bounds, cumulative counts, count, sum) of a histogram's increase, or None."""
    now = cur.buckets.get(metric)
    if not now or metric + "_count" not in cur.values:
        return None
    then = before.buckets.get(metric, {})
    bounds = sorted(b for b in now if math.isfinite(b))
    cum = np.array([now[b] - then.get(b, 0.0) for b in bounds])
    count = cur.values[metric + "_count"] - before.values.get(metric + "_count", 0.0)
    total = cur.values.get(metric + "_sum", 0.0) - before.values.get(metric + "_sum", 0.0)
    if count <= 0 or not bounds:
        return None
    return np.array(bounds), np.maximum.accumulate(np.maximum(cum, 0.0)), count, total


def _classes(cur, before, names, requests, options) -> tuple[list[LengthClass], list[str]]:
    prompt, output = _hist(cur, before, names["prompt"]), _hist(cur, before, names["output"])
    if prompt is not None and output is not None:
        return (classes_from_histograms(prompt, output, options.body_classes, options.tail_quantile),
                [f"classes from the histograms {names['prompt']} and {names['output']} ({prompt[2]:,.0f} requests; "
                 f"mean prompt {prompt[3] / prompt[2]:.1f}, output {output[3] / output[2]:.1f} tokens)"])
    totals = [cur.values.get(names[k], 0.0) - before.values.get(names[k], 0.0) for k in ("prompt_total", "output_total")]
    if names["prompt_total"] not in cur.values or names["output_total"] not in cur.values or min(totals) <= 0:
        raise TraceError([f"no token-length histograms ({names['prompt']}, {names['output']}) nor token counters "
                          f"({names['prompt_total']}, {names['output_total']}) in the snapshot. To fix: a full "
                          "/metrics scrape" + (" (SGLang: start the server with --collect-tokens-histogram)"
                                               if names["prompt"].startswith("sglang") else "")])
    p, o = (max(1, math.ceil(t / requests - 1e-9)) for t in totals)
    return (rounded_shares([LengthClass("mean", 1.0, p, o, requests)]),
            [f"one class of the mean lengths ({names['prompt_total']}, {names['output_total']} over the requests): "
             "no token-length histograms, so no tail class"
             + (" (SGLang exports them with --collect-tokens-histogram)" if names["prompt"].startswith("sglang")
                else "")])
