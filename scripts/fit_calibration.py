#!/usr/bin/env python
"""Fit the performance model's constants to the calibration measurements.

    python scripts/fit_calibration.py            # print the fit
    python scripts/fit_calibration.py --write    # and store it in solver/perf/calibration.py

Method (also in docs/performance-model.md):
  * memory constants come straight from the memory rows: q4_k_m bits per weight from the
    GGUF file sizes, the runtime overhead from the one vLLM memory split;
  * the free performance constants minimise the sum over metrics (throughput, TPOT, TTFT)
    of the mean squared log error of that metric's rows - so each metric weighs the same
    however many rows it has - by Nelder-Mead from several starting points, within
    physical bounds (efficiencies in (0, 1]);
  * GRAPH_LAYER_OVERHEAD_US (per-layer time of engines that replay CUDA graphs: vLLM,
    SGLang, current TensorRT-LLM) is then fitted alone, the physics held fixed, to the
    published vLLM measurements in solver/perf/data/engine_reference.csv;
  * the error bands are the 80th percentile of |relative error| per metric, rounded up to
    the next 5 %, of leave-one-out residuals: each performance row predicted by constants
    fitted without it (`--cv`, ~3 minutes) - an out-of-sample figure, since the model is
    judged on measurements it was not fitted to. Without `--cv` the in-sample residuals
    are shown and the stored bands are left alone.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver.perf.api import Calibration  # noqa: E402
from solver.perf import calibration as fit  # noqa: E402
from solver.perf.llm import memory_budget  # noqa: E402

GIB = 1024**3
# name: (lower bound, upper bound, decimals kept)
FREE = {
    "bandwidth_efficiency": (0.3, 1.0, 3),
    "compute_efficiency": (0.2, 1.0, 3),
    "fp8_compute_efficiency": (0.2, 1.0, 3),
    "layer_overhead_us": (0.0, 300.0, 1),
    "link_efficiency": (0.1, 1.0, 3),
    "llama_cpp_layer_overhead_us": (0.0, 500.0, 1),
    "llama_cpp_bandwidth_gbs": (200.0, 5000.0, 0),
}


def memory_constants(cases) -> dict[str, float]:
    bits = []
    overhead = None
    for c in cases:
        if c.metric == "weights_gib" and c.query.precision == "q4_k_m":
            params = c.query.model.params_b * 1e9
            bits.append(c.measured * GIB * 8 / params)
        if c.metric == "kv_cache_gib":
            mb = memory_budget(c.query)
            overhead = mb.budget_gib - mb.weights_gib - mb.activation_gib - c.measured
    return {"Q4_K_M_BITS_PER_WEIGHT": round(math.exp(sum(map(math.log, bits)) / len(bits)), 2),
            "RUNTIME_OVERHEAD_GIB": round(max(overhead, 0.0), 2)}


def objective(values: dict[str, float], cases) -> float:
    cal = replace(Calibration(), **values)
    by_metric: dict[str, list[float]] = {}
    for r in fit.residuals(cal, cases):
        if r.case.metric in fit.PERFORMANCE_METRICS:
            by_metric.setdefault(r.case.metric, []).append(math.log(max(r.predicted, 1e-12) / r.case.measured) ** 2)
    return sum(sum(v) / len(v) for v in by_metric.values())


def nelder_mead(f, x0: list[float], step: float = 0.15, iters: int = 1500, tol: float = 1e-9) -> list[float]:
    """Minimise f over the unit box, from x0 (coordinates scaled to [0, 1])."""
    clip = lambda x: [min(max(v, 0.0), 1.0) for v in x]  # noqa: E731
    n = len(x0)
    simplex = [clip(x0)] + [clip([v + (step if i == j else 0.0) for j, v in enumerate(x0)]) for i in range(n)]
    scores = [f(x) for x in simplex]
    for _ in range(iters):
        order = sorted(range(n + 1), key=scores.__getitem__)
        simplex, scores = [simplex[i] for i in order], [scores[i] for i in order]
        if scores[-1] - scores[0] < tol:
            break
        centroid = [sum(x[j] for x in simplex[:-1]) / n for j in range(n)]
        worst = simplex[-1]
        reflect = clip([c + (c - w) for c, w in zip(centroid, worst)])
        fr = f(reflect)
        if fr < scores[0]:
            expand = clip([c + 2 * (c - w) for c, w in zip(centroid, worst)])
            fe = f(expand)
            simplex[-1], scores[-1] = (expand, fe) if fe < fr else (reflect, fr)
        elif fr < scores[-2]:
            simplex[-1], scores[-1] = reflect, fr
        else:
            contract = clip([c + 0.5 * (w - c) for c, w in zip(centroid, worst)])
            fc = f(contract)
            if fc < scores[-1]:
                simplex[-1], scores[-1] = contract, fc
            else:
                best = simplex[0]
                simplex = [best] + [clip([b + 0.5 * (v - b) for b, v in zip(best, x)]) for x in simplex[1:]]
                scores = [scores[0]] + [f(x) for x in simplex[1:]]
    return simplex[min(range(n + 1), key=scores.__getitem__)]


def to_values(unit: list[float]) -> dict[str, float]:
    return {k: lo + u * (hi - lo) for (k, (lo, hi, _)), u in zip(FREE.items(), unit)}


def to_unit(values: dict[str, float]) -> list[float]:
    return [(values[k] - lo) / (hi - lo) for k, (lo, hi, _) in FREE.items()]


def fit_performance(cases, quick: bool = False) -> dict[str, float]:
    f = lambda u: objective(to_values(u), cases)  # noqa: E731
    current = {k: getattr(Calibration(), k) for k in FREE}
    starts = [to_unit(current)] if quick else [to_unit(current), [0.5] * len(FREE), [0.8, 0.6, 0.6, 0.2, 0.5, 0.2, 0.2]]
    best, best_score = None, math.inf
    for x0 in starts:
        x = nelder_mead(f, x0)
        x = nelder_mead(f, x, step=0.05)  # restart: Nelder-Mead stalls on flat ridges
        if f(x) < best_score:
            best, best_score = x, f(x)
    return {k: round(v, FREE[k][2]) for k, v in to_values(best).items()}


def fit_graph_overhead(values: dict[str, float], reference) -> float:
    """Golden-section search of the one constant the engine-reference rows inform."""
    def f(us: float) -> float:
        cal = replace(Calibration(), **values, graph_layer_overhead_us=us)
        return sum(math.log(r.predicted / r.case.measured) ** 2 for r in fit.residuals(cal, reference))

    lo, hi = 0.0, 300.0
    g = (math.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, b) if f(a) < f(b) else (a, hi)
    return round((lo + hi) / 2, 1)


def leave_one_out(cases, values: dict[str, float]) -> list:
    """Each performance row predicted by a fit that did not see it (started from the full fit)."""
    out = []
    perf = [c for c in cases if c.metric in fit.PERFORMANCE_METRICS]
    for c in perf:
        others = [o for o in cases if o is not c]
        held = fit_performance(others, quick=True)
        out.extend(fit.residuals(replace(Calibration(), **{**values, **held}), [c]))
        print(f"  leave-one-out row {c.row:2d}: {100 * out[-1].relative_error:+6.1f} %", file=sys.stderr)
    return out


def band(value: float) -> float:
    return math.ceil(value * 20 - 1e-9) / 20  # up to the next 5 %


def write_block(text: str, name: str, assignments: dict[str, float]) -> str:
    body = "".join(f"{k} = {v!r}\n" for k, v in assignments.items())
    pattern = re.compile(rf"(# BEGIN {name}[^\n]*\n).*?(# END {name})", re.S)
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store the fit in solver/perf/calibration.py")
    parser.add_argument("--cv", action="store_true", help="leave-one-out residuals for the error bands (slow)")
    args = parser.parse_args()
    cases, skipped = fit.benchmark_cases()
    memory = memory_constants(cases)
    values = fit_performance(cases)
    reference, _ = fit.benchmark_cases(path=fit.ENGINE_REFERENCE_CSV)
    values["graph_layer_overhead_us"] = fit_graph_overhead(values, reference)
    cal = replace(Calibration(), **values)
    rows = fit.residuals(cal, cases)
    if args.cv:
        with_values = dict(values)
        loo = leave_one_out(cases, with_values)
        bands = {f"ERROR_BAND_{m.upper()}": band(v) for m, v in fit.error_bands(loo).items()}
        for metric, err in fit.median_abs_errors(loo).items():
            print(f"  leave-one-out median |error| {metric:12s} {100 * err:5.1f} %")
    else:
        bands = {f"ERROR_BAND_{m.upper()}": band(v) for m, v in fit.error_bands(rows).items()}
    print(f"{len(cases)} usable rows, {len(skipped)} skipped; objective {objective(values, cases):.4f}")
    for k, v in values.items():
        print(f"  {k:30s} {v}")
    for k, v in {**memory, **bands}.items():
        print(f"  {k:30s} {v}")
    for metric, err in fit.median_abs_errors(rows).items():
        print(f"  median |error| {metric:12s} {100 * err:5.1f} %")
    for r in fit.residuals(cal, reference):
        print(f"  engine reference row {r.case.row}: {r.case.label}: {100 * r.relative_error:+.1f} %")
    if memory["Q4_K_M_BITS_PER_WEIGHT"] != fit.Q4_K_M_BITS_PER_WEIGHT or memory["RUNTIME_OVERHEAD_GIB"] != fit.RUNTIME_OVERHEAD_GIB:
        print("  note: memory constants differ from calibration.py; update them there by hand")
    if args.write:
        path = Path(fit.__file__)
        text = path.read_text()
        text = write_block(text, "FITTED", {k.upper(): v for k, v in values.items()})
        if args.cv:
            text = write_block(text, "BANDS", bands)
        path.write_text(text)
        print(f"written to {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
