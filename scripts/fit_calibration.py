#!/usr/bin/env python
"""Fit the performance model's constants to the calibration measurements.

    python scripts/fit_calibration.py                 # print the fit
    python scripts/fit_calibration.py --cv --write    # cross-validate, store constants and bands

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
  * the data are the verbatim calibration set (llm_benchmarks.csv) and the product's own
    rows (llm_benchmarks_product.csv: Blackwell fp4, current TensorRT-LLM on Hopper, vLLM
    on MI300X); AMD GPUs get their own bandwidth/compute/per-layer constants, fitted on
    the AMD rows only (the NVIDIA constants do not move them and vice versa);
  * the error bands are the 80th percentile of |relative error| per metric, rounded up to
    the next 5 %, of cross-validated residuals: the rows are split into k folds (`--folds`,
    default 10; fold = position % k in a fixed order) and each fold is predicted by
    constants fitted without it (`--cv`, ~10 minutes on two cores) - an out-of-sample
    figure, since the model is judged on measurements it was not fitted to. `--cv` also
    prints the cross-validated median |error| by GPU family and precision (the table in
    docs/performance-model.md). Without `--cv` the in-sample residuals are shown and the
    stored bands are left alone.
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
    "fp4_compute_efficiency": (0.1, 1.0, 3),
    "moe_compute_efficiency": (0.02, 1.0, 3),
    "amd_bandwidth_efficiency": (0.3, 1.0, 3),
    "amd_compute_efficiency": (0.1, 1.0, 3),
    "amd_layer_overhead_us": (0.0, 300.0, 1),
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
    third = [0.8, 0.6, 0.6, 0.2, 0.5, 0.2, 0.2] + [0.6] * (len(FREE) - 7)
    starts = [to_unit(current)] if quick else [to_unit(current), [0.5] * len(FREE), third]
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


def cross_validate(cases, values: dict[str, float], folds: int) -> list:
    """Each performance row predicted by a fit that did not see its fold (started from the full fit)."""
    out = []
    perf = [c for c in cases if c.metric in fit.PERFORMANCE_METRICS]
    for k in range(folds):
        held_out = perf[k::folds]
        keep = [c for c in cases if c not in held_out]
        held = fit_performance(keep, quick=True)
        res = fit.residuals(replace(Calibration(), **{**values, **held}), held_out)
        out.extend(res)
        worst = max(res, key=lambda r: abs(r.relative_error))
        print(f"  fold {k + 1}/{folds}: {len(held_out)} rows, worst {worst.case.key} {100 * worst.relative_error:+.1f} %",
              file=sys.stderr)
    return out


def family_table(rows) -> list[str]:
    """Median |error| per (family, precision, metric), and per family for throughput."""
    from statistics import median

    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        q = r.case.query
        fam = fit.gpu_family(q.gpu)
        groups.setdefault((fam, q.precision, r.case.metric), []).append(abs(r.relative_error))
        groups.setdefault((fam, "all", r.case.metric), []).append(abs(r.relative_error))
    lines = ["  family     precision  metric      rows  median |error|"]
    for (fam, prec, metric), errs in sorted(groups.items()):
        lines.append(f"  {fam:10s} {prec:10s} {metric:10s} {len(errs):5d}  {100 * median(errs):6.1f} %")
    return lines


def band(value: float) -> float:
    return math.ceil(value * 20 - 1e-9) / 20  # up to the next 5 %


def write_block(text: str, name: str, assignments: dict[str, float]) -> str:
    body = "".join(f"{k} = {v!r}\n" for k, v in assignments.items())
    pattern = re.compile(rf"(# BEGIN {name}[^\n]*\n).*?(# END {name})", re.S)
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store the fit in solver/perf/calibration.py")
    parser.add_argument("--cv", action="store_true", help="cross-validated residuals for the error bands (slow)")
    parser.add_argument("--folds", type=int, default=10, help="folds of the cross-validation (default 10)")
    args = parser.parse_args()
    cases, skipped = fit.calibration_cases()
    memory = memory_constants(cases)
    values = fit_performance(cases)
    reference, _ = fit.benchmark_cases(path=fit.ENGINE_REFERENCE_CSV)
    values["graph_layer_overhead_us"] = fit_graph_overhead(values, reference)
    cal = replace(Calibration(), **values)
    rows = fit.residuals(cal, cases)
    if args.cv:
        cv = cross_validate(cases, dict(values), args.folds)
        bands = {f"ERROR_BAND_{m.upper()}": band(v) for m, v in fit.error_bands(cv).items()}
        for metric, err in fit.median_abs_errors(cv).items():
            print(f"  cross-validated median |error| {metric:12s} {100 * err:5.1f} %")
        print(f"  cross-validated ({args.folds} folds) by family and precision:")
        print("\n".join(family_table(cv)))
    else:
        bands = {f"ERROR_BAND_{m.upper()}": band(v) for m, v in fit.error_bands(rows).items()}
    print(f"{len(cases)} usable rows, {len(skipped)} skipped; objective {objective(values, cases):.4f}")
    for k, v in values.items():
        print(f"  {k:30s} {v}")
    for k, v in {**memory, **bands}.items():
        print(f"  {k:30s} {v}")
    for metric, err in fit.median_abs_errors(rows).items():
        print(f"  median |error| {metric:12s} {100 * err:5.1f} %")
    print("  in-sample by family and precision:")
    print("\n".join(family_table([r for r in rows if r.case.metric in fit.PERFORMANCE_METRICS])))
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
