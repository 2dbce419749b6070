"""Replay a plan's fleet and judge each service's latency SLO with confidence intervals.

The interface is the plan's JSON (`PlanResult.to_dict()`): for every service, its
assignments with `replicas` and the `routed` rate per request class (all replicas of the
assignment together, headroom included).

Synthetic traffic (the default): each replica receives routed / replicas - the rate the
plan routes to it, headroom included (`load="planned"`, the rate the planner's caps
promise the SLO at), or scaled down to the demand (`load="demand"`). The replicas of one
assignment are identical and receive the same rate, so one simulated replica stands for
all of them; each is run as `seeds` independent replications (solver/sim/verify.py) of
enough requests that every reported percentile (p50, p90, p99 and the service's) rests
on at least `min_tail_requests` requests beyond it (20,000 requests per assignment with
200), or for `duration_s` simulated seconds per seed when that is given. A service's
percentiles pool its assignments' requests, each weighing the traffic it stands for
(replicas x rate / requests simulated); replication r of the service is replication r of
every assignment, so the sectioning interval applies to the service as to an assignment.
While a verdict of the service or of one of its assignments is unsettled
(`verify.next_step`: an estimate spread by more than +-25 % gets longer seeds, an
inconclusive bound twice the seeds), every assignment of the service gets the same, up
to `max_requests` per assignment (not with `duration_s`: a fixed run length).

A trace (solver/sim/trace.py): each service's requests are split over its assignments by
their routed rates (interleaved: `trace.split_by_weight`), an assignment's requests
round-robin over its replicas, and every replica is simulated with exactly its requests;
the percentiles are those of the replayed requests (no interval: a replay of a fixed
trace is not a sample of runs), and the verdict compares them with the bounds.

LLM assignments estimated by the performance model run in the replica simulator (step
physics: the analytic model's `StepCost`); measured profiles run as c servers
(solver/sim/servers.py, latency only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from solver.perf.queueing import PERCENTILES, TrafficClass, replica_for
from solver.sim.replica import simulate_requests
from solver.sim.stats import (Estimate, overall, sectioned_percentile, verdict, weighted_percentile,
                              weighted_percentiles)
from solver.sim.verify import (CONFIDENCE, DEFAULT_MAX_REQUESTS, METRICS, MIN_REQUESTS_PER_SEED, SeedRun,
                               keep_up_problem, next_step, requests_for, run_replica_seed, run_servers_seed, seed_rng,
                               warmup_for)

LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}
REPORTED = (50, 90, 99)
LOADS = ("planned", "demand")


@dataclass
class _Replay:
    """One assignment being replayed."""

    view: dict
    weight: float  # traffic it stands for: replicas x rate per replica (requests/s)
    run_seed: object  # index -> SeedRun (synthetic)
    runs: list[SeedRun] = field(default_factory=list)
    replica: object = None  # solver.perf.queueing.Replica (kind "replica")
    servers: tuple[float, float | None] | None = None  # (throughput_per_s, latency_s) (kind "servers")


def simulate_plan(workload, plan: dict, catalog, *, duration_s: float | None = None, seed: int = 0, seeds: int = 4,
                  percentile: int | None = None, arrival_cv: float | None = None, load: str = "planned",
                  scheduler: str | None = None, min_tail_requests: int = 200,
                  max_requests: int = DEFAULT_MAX_REQUESTS, confidence: float = CONFIDENCE, trace=None) -> dict:
    """Per service and per assignment: achieved p50/p90/p99 TTFT/TPOT/latency, the interval
    at the service's percentile and a verdict ("met", "missed", "inconclusive") per bound
    and overall.

    `percentile` / `arrival_cv` apply to services that state none (`slo.percentile`,
    `demand.arrival_cv` left unset); defaults 99 and 1. `trace`: a solver.sim.trace.Trace
    to replay instead of synthetic traffic (raises TraceError for a request that does not
    fit the KV cache of the replica it is routed to, before simulating anything).
    """
    if duration_s is not None and not (duration_s > 0 and math.isfinite(duration_s)):
        raise ValueError(f"duration_s must be a positive number of seconds, got {duration_s}")
    if load not in LOADS:
        raise ValueError(f"load must be one of {', '.join(LOADS)}, got {load!r}")
    if not (isinstance(seeds, int) and seeds >= 2):
        raise ValueError(f"seeds must be a whole number >= 2 (an interval needs a spread), got {seeds}")
    services = {s.name: s for s in workload.services}
    setups = []
    for n_svc, sv in enumerate(plan.get("services", [])):
        svc = services[sv["name"]]
        setups.append(_service_setup(workload, catalog, svc, sv, n_svc, percentile=percentile, arrival_cv=arrival_cv,
                                     load=load, scheduler=scheduler, duration_s=duration_s, seed=seed,
                                     min_tail_requests=min_tail_requests, seeds=seeds, trace=trace))
    if trace is not None:
        _check_trace_fits(setups, trace)
    out_services, missed, undecided, not_replayed = [], [], [], []
    for setup in setups:
        if trace is not None:
            report = _replay_trace(setup, trace)
        else:
            report = _replay_synthetic(setup, seeds=seeds, max_requests=max_requests, confidence=confidence,
                                       fixed=duration_s is not None)
        if report is None:
            not_replayed.append(setup["sv"]["name"])
            continue
        if report["verdict"] == "missed":
            missed.append(report["name"])
        elif report["verdict"] == "inconclusive":
            undecided.append(report["name"])
        out_services.append(report)
    if trace is not None:
        load_text = f"trace {trace.path}: {len(trace):,} requests split as the plan routes traffic"
    elif load == "planned":
        load_text = "planned: the rate the plan routes to each replica (demand with headroom)"
    else:
        load_text = "demand: the plan's routing scaled down to the demand (without headroom)"
    return {"workload": plan.get("workload"), "duration_s": duration_s, "seed": seed,
            "seeds": None if trace is not None else seeds, "load": load_text,
            "scheduler": scheduler,  # None: each replica's engine's own (in its assignment)
            "confidence": None if trace is not None else confidence,
            "method": ("replay of the trace's requests; no interval" if trace is not None else
                       "independent replications (sectioning): pooled percentile +- t(seeds-1) x sd(per-seed "
                       "percentiles) / sqrt(seeds)"),
            "trace": None if trace is None else trace.path,
            "services": out_services, "missed": missed, "inconclusive": undecided, "not_replayed": not_replayed}


def _service_setup(workload, catalog, svc, sv, n_svc, *, percentile, arrival_cv, load, scheduler, duration_s, seed,
                   min_tail_requests, seeds, trace) -> dict:
    from solver.compile.resolve import model_arch
    from solver.perf import Calibration, PerfQuery

    p_svc = svc.slo.percentile or percentile or 99
    cv = svc.demand.arrival_cv if "arrival_cv" in svc.demand.model_fields_set else (
        arrival_cv if arrival_cv is not None else svc.demand.arrival_cv)
    cv = float(cv)
    planned = float(sv.get("demand_with_headroom") or 0.0)
    scale = float(sv["demand"]) / planned if (load == "demand" and planned > 0) else 1.0
    per_minute = sv["unit"] == "items/min"
    tokens = _class_tokens(svc)
    reported = sorted(set(REPORTED) | {p_svc})
    per_seed = max(math.ceil(max(requests_for(p, min_tail_requests) for p in reported) / seeds),
                   MIN_REQUESTS_PER_SEED)
    calibration = Calibration.from_overrides(workload.solver.calibration)
    offers = {o.id: o for o in catalog.offers}
    replays = []
    for n_a, a in enumerate(sv.get("assignments", [])):
        replicas = int(a["replicas"])
        routed = [float(x) * scale / replicas for x in a["routed"]] if replicas else []
        total = sum(routed)
        if replicas < 1 or total <= 0:
            continue
        rate_per_s = total / 60.0 if per_minute else total
        view = {"config": a["config"], "replicas": replicas, "rate_per_replica": round(total, 6)}
        key = (n_svc, n_a)
        if a["source"] == "estimate" and svc.model is not None:
            offer = offers[a["offer_id"]]
            # The replica as the planner built it: the engine's version and the service's engine options.
            opts = svc.engine_options
            q = PerfQuery(model=model_arch(svc.model), gpu=catalog.gpus[a["gpu"]],
                          gpus_per_replica=a["gpus_per_replica"], interconnect=offer.interconnect,
                          usable_memory_gib=catalog.usable_memory_gib(offer), precision=a["precision"],
                          engine=svc.engine, prompt_tokens=tokens[0][0], output_tokens=tokens[0][1],
                          instances_per_replica=a.get("instances_per_replica", 1),
                          inter_node_gbs=offer.inter_node_gbs, calibration=calibration,
                          kv_precision=None if opts.kv_cache_dtype == "auto" else opts.kv_cache_dtype,
                          max_batch=opts.max_batch, kv_cache_memory_fraction=opts.kv_cache_memory_fraction,
                          max_num_batched_tokens=opts.max_num_batched_tokens, scheduler=opts.scheduler,
                          kv_admission=opts.kv_admission, multi_step=opts.multi_step)
            rep = replica_for(q)
            classes = [TrafficClass(r / total, p, o) for r, (p, o) in zip(routed, tokens) if r > 0]
            view["kind"] = "replica"
            view["kv_cache_tokens"] = int(rep.kv_cache_tokens)
            view["scheduler"] = scheduler or rep.scheduler
            view["kv_admission"] = rep.kv_admission

            def run_seed(i, length, rep=rep, classes=classes, rate=rate_per_s, key=key):
                rng = seed_rng(seed, *key, i)
                if duration_s is not None:
                    return run_replica_seed(rep, classes, rate, arrival_cv=cv, scheduler=scheduler, rng=rng,
                                            duration_s=duration_s)
                return run_replica_seed(rep, classes, rate, arrival_cv=cv, scheduler=scheduler, rng=rng,
                                        measured=length, warmup=warmup_for(length, rep))
            replay = _Replay(view, replicas * rate_per_s, run_seed, replica=rep)
        else:
            # Measured: the replica's throughput for this class mix (time-shared classes).
            busy = sum(r / t for r, t in zip(routed, a["throughput_per_replica"]) if r > 0 and t > 0)
            mu = total / busy if busy > 0 else 0.0
            mu_per_s = mu / 60.0 if per_minute else mu
            latency_s = (a.get("latency_ms") or 0.0) / 1e3 or None
            view["kind"] = "servers"

            def run_seed(i, length, mu=mu_per_s, lat=latency_s, rate=rate_per_s, key=key):
                rng = seed_rng(seed, *key, i)
                if duration_s is not None:
                    return run_servers_seed(mu, lat, rate, arrival_cv=cv, rng=rng, duration_s=duration_s)
                return run_servers_seed(mu, lat, rate, arrival_cv=cv, rng=rng, measured=length,
                                        warmup=max(length // 10, 100))
            replay = _Replay(view, replicas * rate_per_s, run_seed, servers=(mu_per_s, latency_s))
        replays.append(replay)
    slo = {m: getattr(svc.slo, m) for m in METRICS if getattr(svc.slo, m, None) is not None}
    return {"sv": sv, "svc": svc, "percentile": p_svc, "cv": cv, "slo": slo, "replays": replays,
            "reported": reported, "per_seed": per_seed, "scheduler": scheduler}


def _replay_synthetic(setup: dict, *, seeds: int, max_requests: int, confidence: float, fixed: bool) -> dict:
    """Run every assignment's seeds; while a verdict of the service or of an assignment is
    unsettled (verify.next_step), all assignments get longer seeds or twice the seeds, alike
    (replication r of the service stays replication r of each assignment)."""
    replays = setup["replays"]
    p, slo = setup["percentile"], setup["slo"]
    length = setup["per_seed"]
    for r in replays:
        r.runs = [r.run_seed(i, length) for i in range(seeds)]
    while replays and not fixed:
        estimates, verdicts, problem = _service_judgement(replays, p, slo, confidence)
        if problem or "missed" in verdicts.values():
            break  # the service misses: settled
        steps = [next_step(estimates, verdicts, slo)]
        steps += [next_step(*_assignment_judgement(r, p, slo, confidence)[:2], slo) for r in replays]
        n_runs = len(replays[0].runs)
        if 2 * length * n_runs > max_requests:
            break
        if "longer" in steps:
            length *= 2
            for r in replays:
                r.runs = [r.run_seed(i, length) for i in range(n_runs)]
        elif "more" in steps:
            for r in replays:
                r.runs += [r.run_seed(i, length) for i in range(n_runs, 2 * n_runs)]
        else:
            break
    return _report(setup, confidence)


def _sections(replays, metric: str) -> list:
    """Replication r of the service: replication r of every assignment, each request
    weighing the traffic it stands for."""
    n = min((len(r.runs) for r in replays), default=0)
    out = []
    for i in range(n):
        out.append([(r.runs[i].metrics[metric], r.weight / max(r.runs[i].requests, 1)) for r in replays])
    return out


def _service_judgement(replays, p, slo, confidence):
    estimates = {m: sectioned_percentile(_sections(replays, m), p, confidence) for m in METRICS}
    problems = [f"{r.view['config']}: {keep_up_problem(r.runs)}" for r in replays if keep_up_problem(r.runs)]
    problem = "; ".join(problems) or None
    verdicts = {m: ("missed" if problem else verdict(estimates[m], b)) for m, b in slo.items()}
    return estimates, verdicts, problem


def _assignment_judgement(replay, p, slo, confidence):
    estimates = {m: sectioned_percentile([[(run.metrics[m], 1.0)] for run in replay.runs], p, confidence)
                 for m in METRICS}
    problem = keep_up_problem(replay.runs)
    verdicts = {m: ("missed" if problem else verdict(estimates[m], b)) for m, b in slo.items()}
    return estimates, verdicts, problem


def _report(setup: dict, confidence: float) -> dict:
    sv, p, slo = setup["sv"], setup["percentile"], setup["slo"]
    replays = setup["replays"]
    views = []
    for r in replays:
        estimates, verdicts, problem = _assignment_judgement(r, p, slo, confidence)
        requests = sum(run.requests for run in r.runs)
        values = {m: [(run.metrics[m], 1.0) for run in r.runs] for m in METRICS}
        view = dict(r.view)
        view.update(requests_simulated=requests, requests=requests, seeds=len(r.runs),
                    achieved=_achieved(values, setup["reported"]),
                    mean_batch=_round(float(np.mean([run.mean_batch for run in r.runs])))
                    if r.view["kind"] == "replica" else None,
                    unfinished=sum(run.unfinished for run in r.runs))
        view.update(_judged(estimates, verdicts, problem, p, slo))
        views.append(view)
    estimates, verdicts, problem = _service_judgement(replays, p, slo, confidence)
    pooled = {m: [pair for section in _sections(replays, m) for pair in section] for m in METRICS}
    out = {"name": sv["name"], "unit": sv["unit"], "demand": sv["demand"], "percentile": p,
           "arrival_cv": setup["cv"], "requests_simulated": sum(v["requests"] for v in views),
           "requests": sum(v["requests"] for v in views), "seeds": min((v["seeds"] for v in views), default=0),
           "slo": slo, "achieved": _achieved(pooled, setup["reported"])}
    out.update(_judged(estimates, verdicts, problem, p, slo))
    out["assignments"] = views
    return out


def _judged(estimates: dict, verdicts: dict, problem: str | None, p: int, slo: dict) -> dict:
    """verdict, verdicts per bound, ci per metric at p, keeps_up, reason, misses and
    undecided lines, meets_slo - for a service or an assignment."""
    ci = {m: (None if e is None or e.ci_ms is None else [_round(e.ci_ms[0]), _round(e.ci_ms[1])])
          for m, e in estimates.items()}
    misses, undecided = [], []
    for m, b in slo.items():
        e = estimates[m]
        shown = _shown(e)
        if verdicts[m] == "missed":
            misses.append(f"p{p} {LABELS[m]} {shown} > {b:g} ms" if e is not None and not problem
                          else f"p{p} {LABELS[m]}: {problem}")
        elif verdicts[m] == "inconclusive":
            undecided.append(f"p{p} {LABELS[m]} {shown} straddles {b:g} ms")
    result = overall(list(verdicts.values())) if verdicts else ("missed" if problem else "met")
    if problem and not misses:
        misses.append(problem)
    return {"verdict": result, "verdicts": verdicts, "ci": ci, "keeps_up": problem is None,
            "reason": problem, "meets_slo": result == "met", "misses": misses, "undecided": undecided}


def _shown(e: Estimate | None) -> str:
    if e is None:
        return "-"
    if not math.isfinite(e.value_ms):
        return "never (unfinished)"
    text = f"{e.value_ms:.0f} ms" if e.value_ms >= 100 else f"{e.value_ms:.1f} ms"
    if e.ci_ms is not None:
        hi = "inf" if not math.isfinite(e.ci_ms[1]) else f"{e.ci_ms[1]:.4g}"
        text += f" [{e.ci_ms[0]:.4g}, {hi}]"
    return text


def _achieved(values: dict, reported) -> dict:
    """Pooled percentiles per metric: {metric: {"p50": ms, ...}} (None: no such metric)."""
    out = {}
    for m in METRICS:
        pairs = values[m]
        v = np.concatenate([np.asarray(a, dtype=float) for a, _ in pairs]) if pairs else np.empty(0)
        # Equal weights (one assignment, or a trace) take the cheaper unweighted sort.
        same = len({float(wt) for _, wt in pairs}) <= 1
        w = None if same else np.concatenate([np.full(len(a), float(wt)) for a, wt in pairs])
        out[m] = {f"p{q}": _round(x) for q, x in zip(reported, weighted_percentiles(v, w, reported))}
    return out


# ---------------------------------------------------------------- trace replay
def _trace_routes(setup: dict, trace) -> list[tuple[object, np.ndarray]]:
    """(replay, trace indices) per simulated replica of the service's assignments."""
    idx = trace.for_service(setup["sv"]["name"])
    replays = setup["replays"]
    if len(idx) == 0 or not replays:
        return []
    from solver.sim.trace import split_by_weight

    which = split_by_weight([r.weight for r in replays], len(idx))
    routes = []
    for k, r in enumerate(replays):
        mine = idx[which == k]
        n = r.view["replicas"]
        for j in range(n):  # round-robin over the assignment's replicas
            routes.append((r, mine[j::n]))
    return routes


def _check_trace_fits(setups: list, trace) -> None:
    from solver.sim.trace import MAX_REPORTED, TraceError

    problems = []
    for setup in setups:
        for r, rows in _trace_routes(setup, trace):
            if r.view["kind"] != "replica" or len(rows) == 0:
                continue
            kv = r.replica.kv_cache_tokens
            need = trace.prompt_tokens[rows] + trace.output_tokens[rows]
            for i in np.nonzero(need > kv)[0][:MAX_REPORTED]:
                row = int(rows[i])
                problems.append(f"{trace.path} line {int(trace.line[row])}: a request of {int(need[i]):,} tokens "
                                f"(prompt + output) does not fit the {kv:,.0f}-token KV cache of "
                                f"{r.view['config']}, the replica the plan routes it to. To fix: shorten or drop "
                                "the request, or plan for requests this long (a demand class with these lengths)")
    if problems:
        raise TraceError(problems[:MAX_REPORTED])


def _replay_trace(setup: dict, trace) -> dict | None:
    routes = _trace_routes(setup, trace)
    if not routes:
        return None
    scheduler = setup["scheduler"]
    for r in setup["replays"]:
        r.runs = []
    for r, rows in routes:
        if len(rows) == 0:
            continue
        if r.view["kind"] == "replica":
            rep = r.replica
            sim = simulate_requests(rep, trace.arrival_s[rows], trace.prompt_tokens[rows], trace.output_tokens[rows],
                                    max_seqs=rep.max_seqs, kv_cache_tokens=rep.kv_cache_tokens,
                                    token_budget=rep.token_budget, request_overhead_s=rep.request_overhead_s,
                                    scheduler=scheduler or rep.scheduler, kv_admission=rep.kv_admission)
            metrics = {"ttft_ms": sim.ttft_s * 1e3, "tpot_ms": sim.tpot_s * 1e3, "latency_ms": sim.latency_s * 1e3}
            r.runs.append(SeedRun(metrics, sim.requests, sim.unfinished, 0, sim.simulated_s, sim.mean_batch))
        else:
            from solver.sim.servers import serve, servers_for

            mu, lat = r.servers
            c, service = servers_for(mu, lat)
            times = trace.arrival_s[rows]
            latency = (serve(times, c, service) + service - times) * 1e3
            nan = np.full(len(times), np.nan)
            r.runs.append(SeedRun({"ttft_ms": nan, "tpot_ms": nan, "latency_ms": latency}, len(times), 0, 0,
                                  float(times[-1])))
    p, slo = setup["percentile"], setup["slo"]
    replays = [r for r in setup["replays"] if r.runs]
    views = []
    for r in replays:
        values = {m: [(run.metrics[m], 1.0) for run in r.runs] for m in METRICS}
        views.append(_trace_view(r, values, p, slo, setup["reported"]))
    values = {m: [(run.metrics[m], 1.0) for r in replays for run in r.runs] for m in METRICS}
    sv = setup["sv"]
    out = {"name": sv["name"], "unit": sv["unit"], "demand": sv["demand"], "percentile": p,
           "arrival_cv": None, "requests_simulated": sum(v["requests"] for v in views),
           "requests": sum(v["requests"] for v in views), "seeds": None, "slo": slo,
           "achieved": _achieved(values, setup["reported"])}
    out.update(_trace_judged(values, p, slo))
    out["tail_requests"] = _tail(out["requests"], p)
    out["assignments"] = views
    return out


def _trace_view(r, values, p, slo, reported) -> dict:
    view = dict(r.view)
    requests = sum(run.requests for run in r.runs)
    view.update(requests_simulated=requests, requests=requests, seeds=None, achieved=_achieved(values, reported),
                mean_batch=_round(float(np.mean([run.mean_batch for run in r.runs])))
                if r.view["kind"] == "replica" else None,
                unfinished=sum(run.unfinished for run in r.runs), replicas_replayed=len(r.runs))
    view.update(_trace_judged(values, p, slo))
    view["tail_requests"] = _tail(requests, p)
    return view


def _tail(requests: int, p: int) -> float:
    """Requests beyond percentile p among `requests`: what the percentile rests on."""
    return round(requests * (1.0 - p / 100.0), 1)


def _trace_judged(values: dict, p: int, slo: dict) -> dict:
    verdicts, misses = {}, []
    for m, b in slo.items():
        pairs = values[m]
        v = np.concatenate([a for a, _ in pairs]) if pairs else np.empty(0)
        x = weighted_percentile(v, None, p)
        if math.isnan(x):
            verdicts[m] = "inconclusive"
            continue
        verdicts[m] = "met" if x <= b else "missed"
        if verdicts[m] == "missed":
            shown = "never (unfinished)" if not math.isfinite(x) else f"{x:.0f} ms"
            misses.append(f"p{p} {LABELS[m]} {shown} > {b:g} ms")
    result = overall(list(verdicts.values())) if verdicts else "met"
    return {"verdict": result, "verdicts": verdicts, "ci": {m: None for m in METRICS}, "keeps_up": None,
            "reason": None, "meets_slo": result == "met", "misses": misses, "undecided": []}


def _class_tokens(svc) -> list[tuple[int, int]]:
    if svc.demand.classes:
        return [(c.prompt_tokens or 0, c.output_tokens or 1) for c in svc.demand.classes]
    return [(svc.demand.prompt_tokens or 0, svc.demand.output_tokens or 1)]


def _round(x: float | None, digits: int = 2) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(x, digits)


__all__ = ["simulate_plan", "PERCENTILES", "LOADS"]
