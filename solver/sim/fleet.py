"""Replay a plan's fleet at the demand and measure each service's latency percentiles.

The interface is the plan's JSON (`PlanResult.to_dict()`): for every service, its
assignments with `replicas` and the `routed` rate per request class (all replicas of the
assignment together, headroom included). Each replica receives routed / replicas, scaled
from the planned load (demand with headroom) down to the demand itself. The replicas of
one assignment are identical and receive the same rate, so one simulated replica stands
for all of them; every simulated request then weighs (replicas x rate) / requests simulated.

LLM assignments estimated by the performance model run in `replica.simulate_replica`
(step times from the same physics); measured profiles run in `servers.simulate_servers`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from solver.perf.queueing import PERCENTILES, TrafficClass, replica_for
from solver.sim.replica import simulate_replica
from solver.sim.servers import simulate_servers

METRICS = ("ttft_ms", "tpot_ms", "latency_ms")


@dataclass
class _Samples:
    values: dict[str, list[np.ndarray]] = field(default_factory=lambda: {m: [] for m in METRICS})
    weights: dict[str, list[np.ndarray]] = field(default_factory=lambda: {m: [] for m in METRICS})
    requests: int = 0

    def add(self, metric: str, values_ms: np.ndarray, weight_total: float) -> None:
        values_ms = np.asarray(values_ms, dtype=float)
        values_ms = values_ms[~np.isnan(values_ms)]
        if len(values_ms) == 0:
            return
        self.values[metric].append(values_ms)
        self.weights[metric].append(np.full(len(values_ms), weight_total / len(values_ms)))

    def percentile(self, metric: str, p: float) -> float | None:
        if not self.values[metric]:
            return None
        v = np.concatenate(self.values[metric])
        w = np.concatenate(self.weights[metric])
        order = np.argsort(v, kind="stable")
        v, w = v[order], w[order]
        cum = np.cumsum(w)
        i = int(np.searchsorted(cum, p / 100.0 * cum[-1] - 1e-12))
        return float(v[min(i, len(v) - 1)])


def simulate_plan(workload, plan: dict, catalog, *, duration_s: float = 600.0, seed: int = 0,
                  percentile: int | None = None, arrival_cv: float | None = None) -> dict:
    """Per service: achieved p50/p90/p99 TTFT/TPOT/latency against the SLO, and who misses.

    `percentile` / `arrival_cv` apply to services that state none (`slo.percentile`,
    `demand.arrival_cv`, where the workload schema has them); defaults 99 and 1.
    """
    from solver.compile.resolve import model_arch
    from solver.perf import Calibration, PerfQuery

    if not (duration_s > 0 and math.isfinite(duration_s)):
        raise ValueError(f"duration_s must be a positive number of seconds, got {duration_s}")
    calibration = Calibration.from_overrides(workload.solver.calibration)
    offers = {o.id: o for o in catalog.offers}
    services = {s.name: s for s in workload.services}
    out_services, missed = [], []
    for n_svc, sv in enumerate(plan.get("services", [])):
        svc = services[sv["name"]]
        p_svc = getattr(svc.slo, "percentile", None) or percentile or 99
        cv = getattr(svc.demand, "arrival_cv", None)
        cv = float(cv if cv is not None else (arrival_cv if arrival_cv is not None else 1.0))
        planned = float(sv.get("demand_with_headroom") or 0.0)
        scale = float(sv["demand"]) / planned if planned > 0 else 1.0
        per_minute = sv["unit"] == "items/min"
        tokens = _class_tokens(svc)
        samples = _Samples()
        views = []
        for n_a, a in enumerate(sv.get("assignments", [])):
            replicas = int(a["replicas"])
            routed = [float(x) * scale / replicas for x in a["routed"]] if replicas else []
            total = sum(routed)
            if replicas < 1 or total <= 0:
                continue
            rate_per_s = total / 60.0 if per_minute else total
            run_seed = seed + 1000 * n_svc + n_a
            view = {"config": a["config"], "replicas": replicas, "rate_per_replica": total}
            if a["source"] == "estimate" and svc.model is not None:
                offer = offers[a["offer_id"]]
                q = PerfQuery(model=model_arch(svc.model), gpu=catalog.gpus[a["gpu"]],
                              gpus_per_replica=a["gpus_per_replica"], interconnect=offer.interconnect,
                              usable_memory_gib=catalog.usable_memory_gib(offer), precision=a["precision"],
                              engine=svc.engine, prompt_tokens=tokens[0][0], output_tokens=tokens[0][1],
                              instances_per_replica=a.get("instances_per_replica", 1),
                              inter_node_gbs=offer.inter_node_gbs, calibration=calibration)
                rep = replica_for(q)
                classes = [TrafficClass(r / total, p, o) for r, (p, o) in zip(routed, tokens) if r > 0]
                sim = simulate_replica(rep.step_seconds, classes, rate_per_s, max_seqs=rep.max_seqs,
                                       kv_cache_tokens=rep.kv_cache_tokens, token_budget=rep.token_budget,
                                       request_overhead_s=rep.request_overhead_s, duration_s=duration_s,
                                       seed=run_seed, arrival_cv=cv)
                weight = replicas * rate_per_s
                samples.add("ttft_ms", sim.ttft_s * 1e3, weight)
                samples.add("tpot_ms", sim.tpot_s * 1e3, weight)
                samples.add("latency_ms", sim.latency_s * 1e3, weight)
                samples.requests += sim.requests
                view.update(requests_simulated=sim.requests, mean_batch=round(sim.mean_batch, 2),
                            unfinished=sim.unfinished)
            else:
                # Measured: the replica's throughput for this class mix (time-shared classes).
                busy = sum(r / t for r, t in zip(routed, a["throughput_per_replica"]) if r > 0 and t > 0)
                mu = total / busy if busy > 0 else 0.0
                mu_per_s = mu / 60.0 if per_minute else mu
                latency_s = (a.get("latency_ms") or 0.0) / 1e3 or None
                lat = simulate_servers(mu_per_s, latency_s, rate_per_s, duration_s=duration_s, seed=run_seed,
                                       arrival_cv=cv)
                samples.add("latency_ms", lat * 1e3, replicas * rate_per_s)
                samples.requests += len(lat)
                view.update(requests_simulated=int(len(lat)))
            views.append(view)
        achieved = {m: {f"p{p}": _round(samples.percentile(m, p)) for p in (50, 90, 99)} for m in METRICS}
        if p_svc not in (50, 90, 99):
            for m in METRICS:
                achieved[m][f"p{p_svc}"] = _round(samples.percentile(m, p_svc))
        slo = {m: getattr(svc.slo, m) for m in METRICS if getattr(svc.slo, m, None) is not None}
        misses = []
        for m, bound in slo.items():
            value = samples.percentile(m, p_svc)
            if value is None:
                continue
            if not value <= bound:
                label = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}[m]
                shown = "never (unfinished)" if not math.isfinite(value) else f"{value:.0f} ms"
                misses.append(f"p{p_svc} {label} {shown} > {bound:g} ms")
        if misses:
            missed.append(sv["name"])
        out_services.append({"name": sv["name"], "unit": sv["unit"], "demand": sv["demand"], "percentile": p_svc,
                             "arrival_cv": cv, "requests_simulated": samples.requests, "slo": slo,
                             "achieved": achieved, "meets_slo": not misses, "misses": misses,
                             "assignments": views})
    return {"workload": plan.get("workload"), "duration_s": duration_s, "seed": seed,
            "load": "demand (without headroom), split as the plan routes it",
            "services": out_services, "missed": missed}


def _class_tokens(svc) -> list[tuple[int, int]]:
    if svc.demand.classes:
        return [(c.prompt_tokens or 0, c.output_tokens or 1) for c in svc.demand.classes]
    return [(svc.demand.prompt_tokens or 0, svc.demand.output_tokens or 1)]


def _round(x: float | None, digits: int = 2) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(x, digits)


__all__ = ["simulate_plan", "PERCENTILES"]
