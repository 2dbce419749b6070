#!/usr/bin/env python
"""Fit the performance model's constants under load, and the uncertainty the planner sizes for.

    python scripts/fit_under_load.py                   # fit on every source, print the errors
    python scripts/fit_under_load.py --loso            # and leave-one-source-out errors, slowdowns, coverage
    python scripts/fit_under_load.py --loso --write    # and store the constants and the slowdown table in
                                                       # solver/perf/calibration.py ("BEGIN UNDER LOAD"), the
                                                       # held-out record in solver/perf/data/under_load_residuals.csv

Data: every case of `solver.perf.under_load` (MLPerf Server / Interactive / Offline results,
AccelMark and SGLang's open-loop rows), plus the no-load performance rows of the calibration
set whose engines have a generation (they keep the factors honest where no queue forms).
The no-load constants (bandwidth and compute efficiencies, per-layer times, ...) stay as
scripts/fit_calibration.py fitted them.

Free here (solver/perf/engine_profile.py GENERATIONS):
  * a speed factor per engine generation (vLLM V0, vLLM V1, SGLang, TensorRT-LLM's C++
    runtime, its PyTorch backend): the ratio of measured to predicted saturation throughput
    (Offline rows) and no-load throughput or speed, as a robust geometric median, iterated;
  * vLLM V0's host time per step and per further tensor-parallel worker, by a grid search on
    V0's rows under load (TPOT and TTFT medians, where queues are short).

Uncertainty (`--loso`): each source is predicted by constants fitted without it. For every
held-out point the slowdown s* is the factor by which the modelled replica's step times
would have to grow to match the measurement: predicted / measured saturation for Offline
rows; for Server and Interactive rows the s* at which the model's largest rate within the
row's own p99 limits equals the rate the system sustained. The quantiles of s* are the
slowdown table (UNDER_LOAD_SLOWDOWN) that `slo.confidence` reads: at confidence c the planner
sizes every replica as if it were slower by the c-quantile.
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver.perf import calibration as fit  # noqa: E402
from solver.perf.api import Calibration  # noqa: E402
from solver.perf.under_load import LoadCase, all_cases, predict, query_for  # noqa: E402

RESIDUALS_CSV = fit.DATA_DIR / "under_load_residuals.csv"
FACTOR_BOUNDS = (0.3, 3.0)
LEVELS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
V0_STEP_GRID = (0.0, 1000.0, 2000.0, 4000.0, 8000.0)
V0_TP_GRID = (0.0, 1500.0, 3000.0, 6000.0, 9000.0)


# ---------------------------------------------------------------- the cases' generations
def generation_of(engine: str, calibration: Calibration) -> str | None:
    from solver.perf.engine_profile import engine_profile

    try:
        p = engine_profile(engine, 80.0, "", 1, None, calibration.activation_tokens)
    except ValueError:
        return None
    return None if p.generation == "calibration" else p.generation


def no_load_rows(calibration: Calibration):
    """The calibration set's performance rows of engines that have a generation."""
    cases, _ = fit.all_cases(calibration)
    return [c for c in cases if c.metric in fit.PERFORMANCE_METRICS and generation_of(c.query.engine, calibration)]


def with_values(values: dict) -> Calibration:
    factors = dict(fit.ENGINE_FACTORS)
    factors.update(values["factors"])
    return replace(Calibration(), engine_factors=tuple(factors.items()),
                   v0_prefill_overhead_us=values["v0_prefill_overhead_us"],
                   v0_prefill_tp_overhead_us=values["v0_prefill_tp_overhead_us"])


# ---------------------------------------------------------------- the fit
def speed_ratios(cases: list[LoadCase], rows, cal: Calibration) -> dict[str, list[float]]:
    """Per generation, measured speed / predicted speed of every saturation and no-load row."""
    out: dict[str, list[float]] = {}
    for c in cases:
        sat = c.value("saturation_per_s")
        if sat is None:
            continue
        g = generation_of(c.engine, cal)
        if g is None:
            continue
        got = predict(c, cal, admissible=False).saturation_per_s
        if got > 0:
            out.setdefault(g, []).append(sat / got)
    for r in rows:
        g = generation_of(r.query.engine, cal)
        got = fit.predict(r, cal)[0]
        if got <= 0:
            continue
        # Throughput rises with speed; times fall.
        ratio = r.measured / got if r.metric == "throughput" else got / r.measured
        out.setdefault(g, []).append(ratio)
    return out


def v0_error(cases: list[LoadCase], rows, cal: Calibration) -> float:
    """Median |log error| of vLLM V0's TTFT and TPOT medians, under load (finite predictions)
    and one request at a time."""
    errs = [abs(math.log(fit.predict(r, cal)[0] / r.measured)) for r in rows
            if generation_of(r.query.engine, cal) == "vllm-v0" and r.metric in ("ttft", "tpot")]
    for c in cases:
        if generation_of(c.engine, cal) != "vllm-v0" or c.rate_per_s is None:
            continue
        pred = predict(c, cal, admissible=False)
        for metric in ("ttft_ms_p50", "tpot_ms_p50"):
            m, v = c.value(metric), pred.values.get(metric)
            if m is not None and v is not None:
                errs.append(abs(math.log(v / m)) if math.isfinite(v) and v > 0 else math.log(4.0))
    return statistics.median(errs) if errs else 0.0


def _near(grid: tuple, value: float) -> tuple:
    """The grid points next to `value` (a fold refines around the full fit)."""
    i = min(range(len(grid)), key=lambda j: abs(grid[j] - value))
    return grid[max(i - 1, 0):i + 2]


def fit_constants(cases: list[LoadCase], rows, rounds: int = 2, log=None, start: dict | None = None) -> dict:
    values = start and {"factors": dict(start["factors"]), "v0_prefill_overhead_us": start["v0_prefill_overhead_us"],
                        "v0_prefill_tp_overhead_us": start["v0_prefill_tp_overhead_us"]} or {
        "factors": {g: 1.0 for g, _ in fit.GENERATION_FACTORS}, "v0_prefill_overhead_us": 0.0,
        "v0_prefill_tp_overhead_us": 0.0}
    for k in range(rounds):
        # V0's host times first (they move V0's speed), then every generation's factor.
        best = None
        steps = _near(V0_STEP_GRID, values["v0_prefill_overhead_us"]) if start else V0_STEP_GRID
        tps = _near(V0_TP_GRID, values["v0_prefill_tp_overhead_us"]) if start else V0_TP_GRID
        for step in steps:
            for tp in tps:
                trial = {**values, "v0_prefill_overhead_us": step, "v0_prefill_tp_overhead_us": tp}
                e = v0_error(cases, rows, with_values(trial))
                if best is None or e < best[0] - 1e-9:
                    best = (e, step, tp)
        values["v0_prefill_overhead_us"], values["v0_prefill_tp_overhead_us"] = best[1], best[2]
        cal = with_values(values)
        for g, ratios in speed_ratios(cases, rows, cal).items():
            step = math.exp(statistics.median(math.log(r) for r in ratios))
            values["factors"][g] = float(np.clip(values["factors"][g] * step, *FACTOR_BOUNDS))
        if log:
            print(f"  round {k + 1}: v0 prefill step {values['v0_prefill_overhead_us']:.0f} us, + "
                  f"{values['v0_prefill_tp_overhead_us']:.0f} us per TP worker; factors " + ", ".join(f"{g} {f:.3f}" for g, f in values["factors"].items()),
                  file=log, flush=True)
    return values


# ---------------------------------------------------------------- held-out errors and slowdowns
def slowed(replica, factor: float):
    """The replica with every step time and its request overhead `factor` times longer."""
    step = replica.step
    times = {name: getattr(step, name) * factor for name in
             ("weights_s", "expert_weights_s", "gemm_s_per_token", "lm_head_s_per_decode", "s_per_token",
              "s_per_context_token", "s_per_pair", "fixed_s", "decode_fixed_s", "s_per_sampled", "eager_gap_s")}
    return replace(replica, step=replace(step, **times), request_overhead_s=replica.request_overhead_s * factor,
                   step_seconds=None)


def admissible(replica, case: LoadCase) -> float:
    from solver.perf.queueing import max_rate_for_slo

    return max_rate_for_slo(replica, case.classes, 99, ttft_ms=case.ttft_limit_ms, tpot_ms=case.tpot_limit_ms,
                            max_utilization=1.0)


def slowdown_for_rate(replica, case: LoadCase, measured_rate: float) -> float:
    """s* with admissible(replica slowed by s*) = measured rate (bisection in log s)."""
    lo, hi = 0.25, 4.0
    if admissible(slowed(replica, hi), case) > measured_rate:
        return hi
    if admissible(slowed(replica, lo), case) < measured_rate:
        return lo
    for _ in range(14):
        mid = math.sqrt(lo * hi)
        if admissible(slowed(replica, mid), case) >= measured_rate:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def held_out(case: LoadCase, cal: Calibration) -> list[dict]:
    """Every metric of a case, predicted with `cal`, with its slowdown s*."""
    from solver.perf.queueing import replica_for

    replica = replica_for(query_for(case, cal))
    pred = predict(case, cal, admissible=case.rate_per_s is not None and bool(case.ttft_limit_ms or case.tpot_limit_ms))
    out = []
    for metric, measured in case.measured:
        got = pred.values.get(metric)
        if got is None:
            continue
        row = {"source": case.source, "label": case.label, "engine": case.engine, "metric": metric,
               "measured": measured, "predicted": got, "rate_per_s": case.rate_per_s,
               "utilization": case.rate_per_s / pred.saturation_per_s if case.rate_per_s and pred.saturation_per_s
               else None, "slowdown": None}
        if metric == "saturation_per_s" and measured > 0:
            row["slowdown"] = got / measured
        elif metric == "sustained_per_s" and measured > 0:
            row["slowdown"] = slowdown_for_rate(replica, case, measured)
        out.append(row)
    return out


def loso(cases: list[LoadCase], rows, full: dict, log=sys.stderr) -> list[dict]:
    """Each source held out: the constants refitted without it (one round, from the full fit,
    the V0 grid searched next to it), its cases predicted."""
    sources = sorted({c.source for c in cases})
    out = []
    for i, source in enumerate(sources):
        train = [c for c in cases if c.source != source]
        values = fit_constants(train, rows, rounds=1, start=full)
        cal = with_values(values)
        for c in (c for c in cases if c.source == source):
            out.extend(held_out(c, cal))
        print(f"  [{i + 1}/{len(sources)}] {source}: held out", file=log, flush=True)
    return out


def quantile(xs: list[float], q: float) -> float:
    return float(np.quantile(np.array(xs), q, method="inverted_cdf"))


def summary(records: list[dict], title: str) -> None:
    print(f"\n{title}")
    for metric in ("saturation_per_s", "sustained_per_s", "ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99"):
        errs = [r["predicted"] / r["measured"] - 1 if math.isfinite(r["predicted"]) else math.inf
                for r in records if r["metric"] == metric and r["measured"] > 0]
        if not errs:
            continue
        absolute = sorted(abs(e) for e in errs)
        finite = [e for e in errs if math.isfinite(e)]
        print(f"  {metric:18s} n={len(errs):3d}  median |err| {100 * statistics.median(absolute):6.1f} %  signed "
              f"{100 * statistics.median(finite) if finite else float('nan'):+6.1f} %  within 25 %: "
              f"{sum(a <= 0.25 for a in absolute)}/{len(errs)}  cannot keep up: {len(errs) - len(finite)}")


def write(values: dict, table: tuple[tuple[float, float], ...], records: list[dict]) -> None:
    path = ROOT / "solver" / "perf" / "calibration.py"
    text = path.read_text()
    factors = ", ".join(f'("{g}", {values["factors"][g]:.3f})' for g, _ in fit.GENERATION_FACTORS)
    levels = ", ".join(f"({q}, {f:.3f})" for q, f in table)
    block = ("# BEGIN UNDER LOAD (written by scripts/fit_under_load.py; edit there, not here)\n"
             f"V0_PREFILL_OVERHEAD_US = {values['v0_prefill_overhead_us']:.1f}\n"
             f"V0_PREFILL_TP_OVERHEAD_US = {values['v0_prefill_tp_overhead_us']:.1f}\n"
             f"GENERATION_FACTORS = ({factors})\n"
             "# Held-out slowdown quantiles: (level, factor) - at confidence c the planner sizes a\n"
             "# replica as if its steps were slower by the c-quantile (solver/confidence.py).\n"
             f"UNDER_LOAD_SLOWDOWN = ({levels})\n"
             "# END UNDER LOAD")
    text = re.sub(r"# BEGIN UNDER LOAD.*?# END UNDER LOAD", lambda _: block, text, flags=re.S)
    path.write_text(text)
    with open(RESIDUALS_CSV, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(records[0]))
        w.writeheader()
        for r in records:
            w.writerow({k: (round(v, 6) if isinstance(v, float) and math.isfinite(v) else v) for k, v in r.items()})
    print(f"wrote {path.relative_to(ROOT)} and {RESIDUALS_CSV.relative_to(ROOT)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loso", action="store_true", help="leave-one-source-out errors and the slowdown table")
    ap.add_argument("--write", action="store_true", help="with --loso: store constants, table and residuals")
    a = ap.parse_args()
    cases = list(all_cases())
    rows = no_load_rows(Calibration())
    print(f"{len(cases)} cases under load from {len({c.source for c in cases})} sources; {len(rows)} no-load rows")
    values = fit_constants(cases, rows, log=sys.stdout)
    cal = with_values(values)
    in_sample = [r for c in cases for r in held_out(c, cal)]
    summary(in_sample, "in sample (fitted on every source)")
    if not a.loso:
        return 0
    records = loso(cases, rows, values)
    summary(records, "leave one source out")
    slowdowns = [r["slowdown"] for r in records if r["slowdown"] is not None]
    table = tuple((q, quantile(slowdowns, q)) for q in LEVELS)
    print(f"\nslowdown s* over {len(slowdowns)} held-out points: " + ", ".join(f"q{int(q * 100)} {f:.3f}" for q, f in table))
    over = [r for r in records if r["metric"] == "sustained_per_s"]
    for c_level in (0.5, 0.8, 0.9):
        s = dict(table).get(c_level) or quantile(slowdowns, c_level)
        covered = sum(1 for r in over if r["slowdown"] is not None and r["slowdown"] <= s)
        print(f"  at confidence {c_level}: slowdown {s:.3f}; the slowed model's admissible rate is at or below the "
              f"measured sustained rate for {covered}/{len(over)} held-out Server/Interactive rows")
    if a.write:
        write(values, table, records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
