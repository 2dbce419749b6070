#!/usr/bin/env python3
"""Benchmark: what the queueing model would add to a planner solve.

Plans the generated N-service workload of bench/solve_scaling.py (timed), then times
`max_rate_for_slo` at p99 (the service's TTFT/TPOT SLO, its class mix) for the LLM
configurations the planner estimates - all of them, or a random sample (--sample) whose
cost is scaled up - and for just the configurations the optimal plan uses (what a lazy
integration that caps only chosen configurations and re-solves would pay per round).
Also checks that the saturation rate never exceeds the no-queue estimate's requests/s
(so 0.9 x that estimate bounds every cap from above, the bound a lazy scheme needs).
Not a test: run it and record the figures in docs/queueing.md.

Usage: python bench/queueing_cost.py [--services 100] [--seed 0] [--sample 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from solve_scaling import generate  # noqa: E402

from solver.compile.candidates import build_problem  # noqa: E402
from solver.compile.resolve import model_arch, resolve_catalog  # noqa: E402
from solver.perf import Calibration, PerfQuery, estimate  # noqa: E402
from solver.perf import queueing as Q  # noqa: E402
from solver.plan import PlanOptions, plan  # noqa: E402
from solver.workload.documents import parse_workload  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--services", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sample", type=int, default=200, help="configurations timed (0 = all)")
    a = ap.parse_args()

    workload = parse_workload(generate(a.services, a.seed))
    catalog = resolve_catalog(workload)
    t0 = time.perf_counter()
    result = plan(workload, PlanOptions(catalog=catalog, check=False))
    t_plan = time.perf_counter() - t0
    problem = build_problem(workload, catalog)
    services = {s.name: s for s in workload.services}
    offers = {o.id: o for o in problem.offers}
    cal = Calibration.from_overrides(workload.solver.calibration)
    configs = [c for c in problem.configs if c.source == "estimate"]
    used = {a_["config"] for s in result.to_dict()["services"] for a_ in s["assignments"]}

    def job(c):
        svc = services[c.service]
        offer = offers[c.offer_id]
        q = PerfQuery(model=model_arch(svc.model), gpu=catalog.gpus[offer.gpu], gpus_per_replica=c.gpus_per_replica,
                      interconnect=offer.interconnect, usable_memory_gib=catalog.usable_memory_gib(offer),
                      precision=c.precision, engine=svc.engine, prompt_tokens=svc.demand.prompt_tokens,
                      output_tokens=svc.demand.output_tokens, instances_per_replica=c.instances_per_replica,
                      inter_node_gbs=offer.inter_node_gbs, calibration=cal)
        classes = (Q.TrafficClass(1.0, svc.demand.prompt_tokens, svc.demand.output_tokens),)
        return q, classes, svc.slo

    rng = random.Random(a.seed)
    sample = configs if not a.sample or a.sample >= len(configs) else rng.sample(configs, a.sample)
    per_call, ratios = [], []
    Q.load_model.cache_clear()
    for c in sample:
        q, classes, slo = job(c)
        t = time.perf_counter()
        rep = Q.replica_for(q)
        Q.max_rate_for_slo(rep, classes, 99, ttft_ms=slo.ttft_ms, tpot_ms=slo.tpot_ms)
        per_call.append(time.perf_counter() - t)
        sat = Q.saturation_rate(rep, classes)
        rps = estimate(q).requests_per_s
        if rps > 0:
            ratios.append(sat / rps)
    chosen = [c for c in configs if c.key in used]
    Q.load_model.cache_clear()
    t = time.perf_counter()
    for c in chosen:
        q, classes, slo = job(c)
        Q.max_rate_for_slo(Q.replica_for(q), classes, 99, ttft_ms=slo.ttft_ms, tpot_ms=slo.tpot_ms)
    t_chosen = time.perf_counter() - t
    mean = statistics.mean(per_call)
    total = mean * len(configs)
    print(f"{a.services} services (seed {a.seed}): plan() {t_plan:.2f} s; {len(configs)} estimated LLM configurations")
    print(f"max_rate_for_slo (p99, service SLOs): mean {1e3 * mean:.1f} ms, median {1e3 * statistics.median(per_call):.1f} ms "
          f"per call over {len(sample)} configurations")
    print(f"  all configurations: {total:.1f} s{' (extrapolated from the sample)' if len(sample) < len(configs) else ''}"
          f" = {100 * total / t_plan:.0f} % of the plan() time")
    print(f"  only the {len(chosen)} configurations the optimal plan uses: {t_chosen:.2f} s "
          f"= {100 * t_chosen / t_plan:.0f} % of the plan() time (one round of a lazy scheme)")
    print(f"saturation rate / no-queue requests_per_s: max {max(ratios):.3f}, median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f} over {len(ratios)} configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
