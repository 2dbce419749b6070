#!/usr/bin/env python
"""Fit the performance model's constants to the calibration measurements.

    python scripts/fit_calibration.py                    # print the fit
    python scripts/fit_calibration.py --cv               # and the cross-validated errors, bands, coverage
    python scripts/fit_calibration.py --cv --write       # and store constants and bands in solver/perf/calibration.py
                                                         # and the per-row record in solver/perf/data/cv_residuals.csv

Method (also in docs/performance-model.md):
  * the cases are every usable row of the calibration CSVs (`calibration.all_cases()`: the
    verbatim calibration set, the product's rows on today's hardware, the vLLM engine
    reference and the no-queue rows of the latency-under-load set); AMD GPUs have their own
    bandwidth/compute/per-layer constants, which only AMD rows move;
  * memory constants come straight from the memory rows: q4_k_m bits per weight from the
    GGUF file sizes, the runtime overhead from the one vLLM memory split;
  * the free performance constants minimise the sum over metrics (throughput, TPOT, TTFT)
    of the mean robust (soft-L1, scale 0.15) loss of that metric's log errors - so each
    metric weighs the same however many rows it has, and a few rows the physics cannot
    explain do not bend the rest - by Levenberg-Marquardt (forward-difference Jacobian,
    projected onto physical bounds: efficiencies in (0, 1]) from the stored constants and
    from the middle of the box, keeping the better;
  * `--cv`: K-fold cross-validation (folds stratified by metric, fixed assignment): each
    fold's rows are predicted by constants refitted without them. The error bands are the
    split-conformal 80 % quantiles of those out-of-fold |relative errors|, per metric and,
    where a regime has at least 8 rows, per regime (memory- or compute-bound). The
    coverage reported is held out twice over: each row's error is compared with a band
    computed from the other rows' out-of-fold errors only.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver.perf import calibration as fit  # noqa: E402
from solver.perf.api import Calibration  # noqa: E402
from solver.perf.llm import memory_budget  # noqa: E402

GIB = 1024**3
# name: (lower bound, upper bound, decimals kept)
FREE = {
    "bandwidth_efficiency": (0.3, 1.0, 3),
    "kv_bandwidth_efficiency": (0.2, 1.0, 3),
    "compute_efficiency": (0.2, 1.0, 3),
    "fp8_compute_efficiency": (0.2, 1.0, 3),
    "layer_overhead_us": (0.0, 300.0, 1),
    "graph_layer_overhead_us": (0.0, 300.0, 1),
    "link_efficiency": (0.05, 1.0, 3),
    "nvlink_efficiency": (0.05, 1.0, 3),
    "request_overhead_ms": (0.0, 100.0, 2),
    "llama_cpp_layer_overhead_us": (0.0, 500.0, 1),
    "llama_cpp_bandwidth_gbs": (200.0, 5000.0, 0),
    "lmdeploy_layer_overhead_us": (0.0, 500.0, 1),
    "activation_passes": (0.0, 50.0, 2),
    # Issue 12: FP4 GEMMs, routed-expert GEMMs, and AMD Instinct's own fractions (only AMD rows move them).
    "fp4_compute_efficiency": (0.1, 1.0, 3),
    "moe_compute_efficiency": (0.02, 1.0, 3),
    "amd_bandwidth_efficiency": (0.3, 1.0, 3),
    "amd_compute_efficiency": (0.1, 1.0, 3),
    "amd_layer_overhead_us": (0.0, 300.0, 1),
    "token_overhead_us": (0.0, 200.0, 2),
}
DEFAULT_FOLDS = 10


def memory_constants(cases) -> dict[str, float]:
    bits = []
    overhead = None
    for c in cases:
        if c.metric == "weights_gib" and c.query.precision == "q4_k_m":
            params = c.query.model.params_b * 1e9
            bits.append(c.measured * GIB * 8 / params)
        if c.metric == "kv_cache_gib":
            mb = memory_budget(c.query)
            budget = mb.policy.memory_fraction * mb.memory_gib
            overhead = budget - mb.weights_gib - mb.activation_gib(1) - c.measured
    return {"Q4_K_M_BITS_PER_WEIGHT": round(math.exp(sum(map(math.log, bits)) / len(bits)), 2),
            "RUNTIME_OVERHEAD_GIB": round(max(overhead, 0.0), 2)}


def performance(cases) -> list:
    return [c for c in cases if c.metric in fit.PERFORMANCE_METRICS]


# Scale of the robust loss, in log error: rows further off than about this weigh less than
# under least squares (soft-L1), so that a few rows the physics cannot explain (a serving
# stack's own delays) do not bend the constants every other row depends on.
ROBUST_SCALE = 0.15


class Objective:
    """Weighted, robustified log residuals: their sum of squares is the sum over metrics of
    the mean soft-L1 loss of that metric's log errors (least squares below ROBUST_SCALE)."""

    def __init__(self, cases):
        self.cases = performance(cases)
        counts = {m: sum(1 for c in self.cases if c.metric == m) for m in fit.PERFORMANCE_METRICS}
        self.weights = np.array([1.0 / math.sqrt(counts[c.metric]) for c in self.cases])
        self.measured = np.array([c.measured for c in self.cases])
        self.evaluations = 0

    def residuals(self, values: dict[str, float]) -> np.ndarray:
        self.evaluations += 1
        cal = replace(Calibration(), **values)
        predicted = np.array([max(fit.predict(c, cal)[0], 1e-12) for c in self.cases])
        z = np.log(predicted / self.measured) / ROBUST_SCALE
        soft_l1 = 2 * (np.sqrt(1 + z * z) - 1)  # ~ z^2 for small z, ~ 2|z| for large
        return self.weights * ROBUST_SCALE * np.sign(z) * np.sqrt(soft_l1)

    def __call__(self, values: dict[str, float]) -> float:
        r = self.residuals(values)
        return float(r @ r)


def to_values(unit) -> dict[str, float]:
    return {k: lo + float(u) * (hi - lo) for (k, (lo, hi, _)), u in zip(FREE.items(), unit)}


def to_unit(values: dict[str, float]) -> np.ndarray:
    return np.array([(values[k] - lo) / (hi - lo) for k, (lo, hi, _) in FREE.items()])


def levenberg_marquardt(f: Objective, x0: np.ndarray, iters: int = 60, tol: float = 1e-10) -> np.ndarray:
    """Minimise |f(x)|^2 over the unit box (projected steps, forward-difference Jacobian)."""
    x = np.clip(x0, 0.0, 1.0)
    r = f.residuals(to_values(x))
    cost = float(r @ r)
    damping = 1e-3
    h = 1e-4
    for _ in range(iters):
        jac = np.empty((len(r), len(x)))
        for j in range(len(x)):
            step = h if x[j] + h <= 1.0 else -h
            xj = x.copy()
            xj[j] += step
            jac[:, j] = (f.residuals(to_values(xj)) - r) / step
        g = jac.T @ r
        a = jac.T @ jac
        improved = False
        for _ in range(8):
            try:
                delta = -np.linalg.solve(a + damping * np.diag(np.diag(a) + 1e-9), g)
            except np.linalg.LinAlgError:
                damping *= 10
                continue
            x_new = np.clip(x + delta, 0.0, 1.0)
            r_new = f.residuals(to_values(x_new))
            cost_new = float(r_new @ r_new)
            if cost_new < cost:
                converged = cost - cost_new < tol * max(cost, 1e-12)
                x, r, cost = x_new, r_new, cost_new
                damping = max(damping / 3, 1e-9)
                improved = True
                break
            damping *= 4
        if not improved or converged:
            break
    return x


def fit_performance(cases, start: dict[str, float] | None = None, quick: bool = False) -> dict[str, float]:
    """The free constants that minimise the objective (from `start`, or the stored constants and the box's middle)."""
    f = Objective(cases)
    stored = {k: getattr(Calibration(), k) for k in FREE}
    starts = [to_unit(start or stored)] + ([] if quick else [np.full(len(FREE), 0.5)])
    best, best_cost = None, math.inf
    for x0 in starts:
        x = levenberg_marquardt(f, x0)
        cost = f(to_values(x))
        if cost < best_cost:
            best, best_cost = x, cost
    return {k: round(v, FREE[k][2]) for k, v in to_values(best).items()}


def folds_of(cases, k: int) -> list[int]:
    """Fold of each performance case: stratified by metric, in file order (deterministic)."""
    out, seen = [], {}
    for c in performance(cases):
        n = seen.get(c.metric, 0)
        seen[c.metric] = n + 1
        out.append(n % k)
    return out


def cross_validated(cases, values: dict[str, float], k: int = DEFAULT_FOLDS, log=sys.stderr) -> list:
    """Out-of-fold residuals: each performance row predicted by constants fitted without its fold."""
    perf = performance(cases)
    memory = [c for c in cases if c.metric not in fit.PERFORMANCE_METRICS]
    fold = folds_of(cases, k)
    out = []
    for i in range(k):
        train = [c for c, f in zip(perf, fold) if f != i] + memory
        held = [c for c, f in zip(perf, fold) if f == i]
        if not held:
            continue
        refit = fit_performance(train, start=values, quick=True)
        out.extend(fit.residuals(replace(Calibration(), **refit), held))
        print(f"  fold {i + 1}/{k}: {len(held)} rows held out", file=log)
    order = {c.key: j for j, c in enumerate(perf)}
    return sorted(out, key=lambda r: order[r.case.key])


def held_out_coverage(rows: list, coverage: float = fit.BAND_COVERAGE) -> dict[str, tuple[int, int]]:
    """Per band group: (rows inside, rows) where each row meets a band computed without it."""
    out = {}
    for key, group in fit.band_keys(rows).items():
        inside = 0
        for j, r in enumerate(group):
            others = [abs(o.relative_error) for i, o in enumerate(group) if i != j]
            inside += abs(r.relative_error) <= fit.conformal_quantile(others, coverage)
        out[key] = (inside, len(group))
    return out


def family_table(rows) -> list[str]:
    """Median |error| per (GPU family, precision, metric), and per family over precisions."""
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


def write_cv_residuals(path: Path, in_sample: list, out_of_fold: list, folds: list[int]) -> None:
    """The record tests/test_calibration.py checks: in-sample and out-of-fold prediction per row."""
    import csv

    by_key = {r.case.key: r for r in in_sample}
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["case", "metric", "regime", "measured", "predicted_in_sample", "predicted_out_of_fold", "fold"])
        for r, fold in zip(out_of_fold, folds):
            w.writerow([r.case.key, r.case.metric, r.regime, f"{r.case.measured:.6g}",
                        f"{by_key[r.case.key].predicted:.6g}", f"{r.predicted:.6g}", fold])


def band(value: float) -> float:
    return math.ceil(value * 100 - 1e-9) / 100  # up to the next whole percent


def write_block(text: str, name: str, assignments: dict[str, object]) -> str:
    body = "".join(f"{k} = {v!r}\n" for k, v in assignments.items())
    pattern = re.compile(rf"(# BEGIN {name}[^\n]*\n).*?(# END {name})", re.S)
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


def band_constants(bands: dict[str, float]) -> dict[str, object]:
    pooled = {f"ERROR_BAND_{m.upper()}": band(bands[m]) for m in fit.PERFORMANCE_METRICS}
    regimes = tuple((k, band(v)) for k, v in sorted(bands.items()) if "." in k)
    return {**pooled, "ERROR_BANDS_BY_REGIME": regimes}


def report(title: str, rows: list) -> None:
    print(title)
    for metric, err in fit.median_abs_errors(rows).items():
        n = sum(1 for r in rows if r.case.metric == metric)
        print(f"  median |error| {metric:12s} {100 * err:5.1f} %  ({n} rows)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="store the fit in solver/perf/calibration.py")
    parser.add_argument("--cv", action="store_true", help="cross-validated errors, bands and coverage")
    parser.add_argument("--folds", type=int, default=DEFAULT_FOLDS, help=f"folds for --cv (default {DEFAULT_FOLDS})")
    parser.add_argument("--families", action="store_true", help="in-sample errors by GPU family and precision")
    args = parser.parse_args()
    started = time.perf_counter()
    cases, skipped = fit.all_cases()
    memory = memory_constants(cases)
    values = fit_performance(cases)
    cal = replace(Calibration(), **values)
    rows = fit.residuals(cal, cases)
    print(f"{len(cases)} usable rows ({len(performance(cases))} performance), {len(skipped)} skipped; "
          f"objective {Objective(cases)(values):.4f}")
    for k, v in values.items():
        print(f"  {k:30s} {v}")
    for k, v in memory.items():
        print(f"  {k:30s} {v}")
    report("In-sample (fitted to every row):", rows)
    if args.families:
        print("In-sample by GPU family and precision:")
        print("\n".join(family_table([r for r in rows if r.case.metric in fit.PERFORMANCE_METRICS])))
    bands = None
    if args.cv:
        oof = cross_validated(cases, values, args.folds)
        report(f"{args.folds}-fold cross-validated (each row predicted by a fit without its fold):", oof)
        print(f"Cross-validated ({args.folds} folds) by GPU family and precision:")
        print("\n".join(family_table(oof)))
        bands = fit.error_bands(oof)
        print("Error bands (80 % conformal quantile of out-of-fold |error|) and held-out coverage:")
        for key, (inside, n) in held_out_coverage(oof).items():
            print(f"  {key:20s} band {100 * band(bands[key]):5.1f} %   coverage {inside}/{n} = {100 * inside / n:5.1f} %")
    if memory["Q4_K_M_BITS_PER_WEIGHT"] != fit.Q4_K_M_BITS_PER_WEIGHT or memory["RUNTIME_OVERHEAD_GIB"] != fit.RUNTIME_OVERHEAD_GIB:
        print("  note: memory constants differ from calibration.py; update them there by hand")
    if args.write:
        path = Path(fit.__file__)
        text = write_block(path.read_text(), "FITTED", {k.upper(): v for k, v in values.items()})
        if bands is not None:
            text = write_block(text, "BANDS", band_constants(bands))
        path.write_text(text)
        if args.cv:
            write_cv_residuals(fit.CV_RESIDUALS_CSV, rows, oof, folds_of(cases, args.folds))
        print(f"written to {path.relative_to(ROOT)}" + ("" if bands else " (bands unchanged: run with --cv)"))
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
