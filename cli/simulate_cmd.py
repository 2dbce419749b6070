"""`solver-cli simulate WORKLOAD`: plan the fleet, then replay it in a simulator and judge each SLO.

Each replica receives the rate the plan routes to it, headroom included (`--load demand`:
scaled down to the demand), for enough requests that every reported percentile rests on
at least 200 requests beyond it (`--duration-s` instead: that many simulated seconds per
seed), over `--seeds` independent replications, giving a 95 % interval per percentile.
Every service and every assignment gets a verdict: met (the interval lies at or below
the bound), missed (above it, or the replica cannot keep up) or inconclusive (it
straddles the bound even after more seeds). `--trace FILE` replays recorded requests
instead (CSV with a header, or JSON Lines: arrival_s, prompt_tokens, output_tokens,
service), split over the replicas as the plan routes traffic.

Exit codes as `solve`: 0 replayed (whatever the verdicts, unless --fail-on-miss: 1 when
something missed); 2 bad input (flags, workload, trace); 3 no feasible fleet; 4 no plan
within the time limit; 5 cancelled or internal error.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from cli.argtypes import backend
from solver.output.safe_text import escape_controls

EXIT_OK, EXIT_MISSED, EXIT_INPUT, EXIT_INFEASIBLE, EXIT_TIMEOUT, EXIT_OTHER = 0, 1, 2, 3, 4, 5
METRIC_LABELS = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "latency_ms": "latency"}
SCHEDULERS = ("chunked_mixed", "prefill_first")
DEFAULT_SEEDS = 4


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("simulate", help="plan the fleet, then replay it in a discrete-event simulator and "
                              "judge each service's latency SLO with confidence intervals (met, missed, "
                              "inconclusive)", description=__doc__.split("\n\n")[1])
    p.add_argument("workload")
    p.add_argument("--trace", default=None, metavar="FILE",
                   help="replay these requests instead of synthetic traffic: CSV with a header or JSON Lines, "
                        "fields arrival_s, prompt_tokens, output_tokens[, service]")
    p.add_argument("--load", choices=("planned", "demand"), default=None,
                   help="planned (default): the rate the plan routes to each replica, headroom included; "
                        "demand: scaled down to the demand")
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help=f"independent replications per replica configuration (default {DEFAULT_SEEDS}, at least 2)")
    p.add_argument("--duration-s", type=float, default=None, metavar="SECONDS",
                   help="simulated seconds of arrivals per seed, instead of sizing the run by requests "
                        "(default: enough for 200 requests beyond every reported percentile)")
    p.add_argument("--max-requests", type=int, default=None, metavar="N",
                   help="requests per replica configuration that more seeds may reach while a verdict is "
                        "inconclusive (default 200000)")
    p.add_argument("--seed", type=int, default=0, help="random seed: the same seed gives the same replay")
    p.add_argument("--percentile", type=float, default=None, metavar="P",
                   help="50, 90, 95 or 99: the percentile SLOs are checked at (default 99, or the service's own)")
    p.add_argument("--arrival-cv", type=float, default=None, metavar="CV",
                   help="coefficient of variation of inter-arrival times for services that state none "
                        "(1 = Poisson, the default; >1 bursty)")
    p.add_argument("--scheduler", choices=SCHEDULERS, default=None,
                   help="the replicas' batch scheduler, for every replica: chunked_mixed (vLLM V1, TensorRT-LLM) or "
                        "prefill_first (vLLM V0 without chunked prefill, SGLang); default: each replica's engine's "
                        "own (the service's engine version and engine_options.scheduler)")
    p.add_argument("--fail-on-miss", action="store_true", help="exit 1 when a service or assignment misses")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument("--time-limit", type=float, default=None, metavar="SECONDS", help="for the planning solve")
    p.add_argument("--backend", type=backend, default=None, metavar="{auto,scip,highs}")
    p.set_defaults(func=run)


def _fail(message: str, args=None, status: str = "invalid", code: int = EXIT_INPUT, lines: tuple = (), **detail) -> int:
    """A failure: under --format json, JSON on stdout (as `solve` answers: a program reads
    one format whatever happens); else `error: message` and its lines on stderr."""
    if args is not None and getattr(args, "format", "table") == "json":
        print(json.dumps({"status": status, "error": message, **detail}, indent=2))
        return code
    print(escape_controls(f"error: {message}"), file=sys.stderr)
    for line in lines:
        print(escape_controls(f"  - {line}"), file=sys.stderr)
    return code


def _check_flags(args) -> str | None:
    from solver.perf.queueing import PERCENTILES
    from solver.sim.verify import MAX_REQUESTS

    if args.duration_s is not None and not (math.isfinite(args.duration_s) and 0 < args.duration_s <= 1e6):
        return (f"--duration-s must be a positive number of seconds (at most 1e6), got {args.duration_s:g}. "
                "To fix: e.g. --duration-s 600, or leave it out to size the run by requests")
    if args.percentile is not None and args.percentile not in PERCENTILES:
        return (f"--percentile must be one of {', '.join(map(str, PERCENTILES))}, got {args.percentile:g}. "
                "To fix: e.g. --percentile 99")
    if args.arrival_cv is not None and not (math.isfinite(args.arrival_cv) and 0 <= args.arrival_cv <= 20):
        return (f"--arrival-cv must be a number from 0 to 20 (1 = Poisson arrivals), got {args.arrival_cv:g}. "
                "To fix: e.g. --arrival-cv 1")
    if args.time_limit is not None and not (math.isfinite(args.time_limit) and args.time_limit > 0):
        return f"--time-limit must be a positive number of seconds, got {args.time_limit:g}"
    if args.seed < 0:
        return f"--seed must be a non-negative whole number, got {args.seed}"
    if args.seeds is not None and not (2 <= args.seeds <= 1000):
        return (f"--seeds must be a whole number from 2 to 1000 (an interval needs at least two replications), "
                f"got {args.seeds}. To fix: e.g. --seeds 4")
    if args.max_requests is not None and not (1000 <= args.max_requests <= MAX_REQUESTS):
        return (f"--max-requests must be a whole number from 1000 to {MAX_REQUESTS:,}, got {args.max_requests}. "
                "To fix: e.g. --max-requests 200000")
    if args.trace is not None:
        for flag, value in (("--duration-s", args.duration_s), ("--seeds", args.seeds), ("--load", args.load),
                            ("--arrival-cv", args.arrival_cv), ("--max-requests", args.max_requests)):
            if value is not None:
                return (f"{flag} does not apply to a trace replay (the trace gives the requests and their times). "
                        f"To fix: drop {flag}, or drop --trace to simulate synthetic traffic")
    return None


def run(args) -> int:
    problem = _check_flags(args)  # cheap checks before any planning
    if problem:
        return _fail(problem, args)

    from solver.compile.resolve import resolve_catalog
    from solver.errors import Cancelled, InfeasibleError, InputError, PlannerError, SolverTimeout
    from solver.output.render import render_infeasible
    from solver.plan import PlanOptions, plan
    from solver.sim.fleet import simulate_plan
    from solver.sim.trace import TraceError, read_trace
    from solver.sim.verify import DEFAULT_MAX_REQUESTS
    from solver.documents.parse import load_document
    from solver.workload.documents import parse_workload

    try:
        data = load_document(Path(args.workload))
        workload = parse_workload(data)
        trace = None
        if args.trace is not None:
            llm = [s.name for s in workload.services if s.model is not None]
            other = [s.name for s in workload.services if s.model is None]
            trace = read_trace(args.trace, llm, other)
        base_dir = str(Path(args.workload).parent)
        catalog = resolve_catalog(workload, base_dir)
        # It plans as `solve` does: SCIP's two spurious ERROR lines per verified or
        # cancellable solve stay off the terminal.
        from solver.optimize.backends import stderr_filter

        stderr_filter.install(take_stdout=True)
        result = plan(workload, PlanOptions(time_limit_s=args.time_limit, backend=args.backend, base_dir=base_dir,
                                            catalog=catalog))
    except TraceError as exc:
        return _trace_error(exc, args)
    except InputError as exc:
        return _fail("invalid input", args, lines=tuple(str(v) for v in exc.violations),
                     errors=[{"field": v.field, "message": v.message, "fix": v.fix} for v in exc.violations])
    except InfeasibleError as exc:
        from dataclasses import asdict

        reasons = [asdict(r) for r in exc.reasons]
        if args.format == "json":
            print(json.dumps({"status": "infeasible", "infeasibility": reasons}, indent=2))
        else:
            print(render_infeasible(reasons))
        return EXIT_INFEASIBLE
    except SolverTimeout as exc:
        return _fail(str(exc), args, "timeout", EXIT_TIMEOUT)
    except Cancelled as exc:
        return _fail(str(exc), args, "cancelled", EXIT_OTHER)
    except PlannerError as exc:
        return _fail(str(exc), args, "error", EXIT_OTHER)
    plan_dict = result.to_dict()
    try:
        replay = simulate_plan(workload, plan_dict, catalog, duration_s=args.duration_s, seed=args.seed,
                               seeds=args.seeds or DEFAULT_SEEDS,
                               percentile=int(args.percentile) if args.percentile is not None else None,
                               arrival_cv=args.arrival_cv, load=args.load or "planned", scheduler=args.scheduler,
                               max_requests=args.max_requests or DEFAULT_MAX_REQUESTS, trace=trace)
    except TraceError as exc:  # a request longer than the KV cache of the replica it is routed to
        return _trace_error(exc, args)
    except ValueError as exc:  # a run too large for one simulation (solver/sim/replica.py's limits)
        return _fail(f"{exc}", args)
    except RuntimeError as exc:  # the simulator's own guard (a run that stopped making progress)
        return _fail(f"internal error: {exc}", args, "error", EXIT_OTHER)
    replay["total_price_usd_per_hour"] = plan_dict.get("total_price_usd_per_hour")
    if args.format == "json":
        print(json.dumps(replay, indent=2))
    else:
        print(escape_controls(render(replay)))
    if args.fail_on_miss and (replay["missed"] or any(a["verdict"] == "missed" for s in replay["services"]
                                                      for a in s["assignments"])):
        return EXIT_MISSED
    return EXIT_OK


def _trace_error(exc, args) -> int:
    return _fail("the trace cannot be replayed", args, lines=tuple(exc.problems), problems=list(exc.problems))


def render(replay: dict) -> str:
    from solver.output.render import _table

    def trio(values: dict, scale: float = 1.0, fmt: str = ".0f") -> str:
        out = []
        for p in (50, 90, 99):
            v = values.get(f"p{p}")
            out.append("-" if v is None else format(v / scale, fmt))
        return "/".join(out)

    def checked(row: dict, slo: dict, p: int) -> str:
        parts = []
        for m, bound in slo.items():
            value = row["achieved"][m].get(f"p{p}")
            ci = row["ci"].get(m)
            shown = "never" if value is None else (f"{value:.0f}" if value >= 100 else f"{value:.1f}")
            if ci is not None:
                hi = "inf" if ci[1] is None else (f"{ci[1]:.0f}" if ci[1] >= 100 else f"{ci[1]:.1f}")
                lo = "-" if ci[0] is None else (f"{ci[0]:.0f}" if ci[0] >= 100 else f"{ci[0]:.1f}")
                shown += f" [{lo}, {hi}]"
            parts.append(f"{METRIC_LABELS[m]} {shown}/{bound:g}")
        return ", ".join(parts) or "no SLO"

    rows = []
    for s in replay["services"]:
        p = s["percentile"]
        a = s["achieved"]
        rows.append([s["name"], f"{s['requests']:,}", "-" if s["seeds"] is None else str(s["seeds"]),
                     trio(a["ttft_ms"]), trio(a["tpot_ms"], fmt=".1f"), trio(a["latency_ms"], 1e3, ".2f"),
                     f"p{p} " + checked(s, s["slo"], p), s["verdict"]])
        for v in s["assignments"]:
            av = v["achieved"]
            rate = f"{v['rate_per_replica']:.3g}/replica"
            rows.append([f"  {v['config']} x{v['replicas']} @ {rate}", f"{v['requests']:,}",
                         "-" if v["seeds"] is None else str(v["seeds"]), trio(av["ttft_ms"]),
                         trio(av["tpot_ms"], fmt=".1f"), trio(av["latency_ms"], 1e3, ".2f"),
                         f"p{p} " + checked(v, s["slo"], p), v["verdict"]])
    if replay.get("trace"):
        head = f"Replay of the plan for {replay.get('workload')}: {replay['load']}"
    else:
        length = (f"{replay['duration_s']:g} s of arrivals per seed" if replay["duration_s"] is not None else
                  "enough requests for 200 beyond every reported percentile")
        head = (f"Replay of the plan for {replay.get('workload')}: load {replay['load']}; {length}, "
                f"{replay['seeds']} seeds or more, or longer ones, while a verdict is unsettled "
                f"(seed {replay['seed']}), scheduler {replay['scheduler'] or 'of each replica engine'}; "
                f"[{100 * replay['confidence']:g} % intervals: independent replications]")
    table = _table(["service / assignment", "requests", "seeds", "TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms",
                    "latency p50/p90/p99 s", "SLO: value [interval]/bound ms", "verdict"], rows)
    lines = [head, table]
    for s in replay["services"]:
        for line in s["misses"]:
            lines.append(f"MISSED: {s['name']}: {line}")
        for v in s["assignments"]:
            for line in v["misses"]:
                lines.append(f"MISSED: {s['name']} on {v['config']}: {line}")
        for line in s["undecided"]:
            lines.append(f"INCONCLUSIVE: {s['name']}: {line}")
    if replay.get("trace"):
        for s in replay["services"]:
            for row in [s, *s["assignments"]]:
                if row["tail_requests"] < 200:
                    where = s["name"] if row is s else f"{s['name']} on {row['config']}"
                    lines.append(f"NOTE: {where}: p{s['percentile']} of {row['requests']:,} replayed requests rests on "
                                 f"{row['tail_requests']:g} beyond it (fewer than 200): indicative only")
    if replay.get("not_replayed"):
        lines.append("Not in the trace (not replayed): " + ", ".join(replay["not_replayed"]))
    assignments_missed = sum(v["verdict"] == "missed" for s in replay["services"] for v in s["assignments"])
    if not replay["missed"] and not replay["inconclusive"]:
        if assignments_missed:
            lines.append(f"Every replayed service meets its SLO over all its replicas, but {assignments_missed} "
                         "assignment(s) miss on their own (above).")
        else:
            lines.append("Every replayed service and assignment meets its SLO in this replay.")
    lines.append("One simulated replica stands for each assignment's identical replicas (a trace replays every "
                 "replica); '-' = no such metric (measured profiles give latency only).")
    return "\n".join(lines)
