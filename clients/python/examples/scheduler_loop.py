#!/usr/bin/env python3
"""A scheduler loop: every N minutes, re-plan from the running fleet with a demand
forecast, and apply the difference with a make-before-break rollout.

Each iteration:
1. reads the forecast's next `--lookahead` steps as the plan's periods (the first is now;
   later ones keep the plan from, say, stopping instances that the next hour needs again);
2. asks the planner service for a plan from the fleet that runs now
   (`PlannerClient.solve(..., current_fleet=...)`), with change costs from the workload;
3. applies the rollout step by step (here: prints it; a real scheduler calls its cloud
   and serving APIs at each step) and records the first period's fleet, with its
   replicas, as the fleet that runs now;
4. sleeps until the next re-plan.

The forecast is JSON: {"step_minutes": 60, "multipliers": {"<service>": [1.0, 1.3, ...]}}
(one multiplier of the service's base demand per step; a service left out stays at 1.0).
The running fleet is kept in --state (JSON) so the loop can stop and resume.

Usage:
  solver-cli serve --port 50051 &
  python clients/python/examples/scheduler_loop.py --server 127.0.0.1:50051 \\
      --workload examples/scheduler/workload.yaml --forecast examples/scheduler/forecast.json \\
      --every-minutes 15 --iterations 4 --state /tmp/fleet-state.json
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import yaml

from planner_client import PlannerClient, PlannerClientError


def load(path: Path):
    text = path.read_text()
    return yaml.safe_load(text) if path.suffix.lower() in (".yaml", ".yml") else json.loads(text)


def workload_for(base: dict, forecast: dict, step: int, lookahead: int) -> dict:
    """The base workload with the forecast's steps [step, step + lookahead) as periods."""
    w = copy.deepcopy(base)
    minutes = float(forecast.get("step_minutes", 60))
    series = forecast.get("multipliers", {})
    length = max((len(v) for v in series.values()), default=1)
    names = [f"t{i}" for i in range(lookahead)]  # t0 = now, t1 = the next step, ...
    w["periods"] = [{"name": n, "hours": minutes / 60.0} for n in names]
    for svc in w["services"]:
        values = series.get(svc["name"], [])
        svc["demand"]["profile"] = {n: float(values[(step + i) % length]) if values else 1.0
                                    for i, n in enumerate(names)}
    return w


def running_fleet(plan: dict) -> list[dict]:
    """The plan's first period as the fleet that runs now, with the replicas it runs."""
    first = plan["periods"][0]
    lines: dict[tuple[str, bool], dict] = {}
    for f in first["fleet"]:
        key = (f["offer_id"], f["tier"] == "spot")
        line = lines.setdefault(key, {"offer_id": key[0], "instances": 0, "spot": key[1], "replicas": []})
        line["instances"] += f["instances"]
    gpus = {a["config"]: (a["gpus_per_replica"], a["precision"]) for s in plan["services"] for a in s["assignments"]}
    for s in first["services"]:
        for a in s["assignments"]:
            g, precision = gpus.get(a["config"], (int(a["config"].split(":")[1].split("gpu")[0]), None))
            rep = {"service": s["name"], "count": a["replicas"], "gpus_per_replica": g}
            if precision:
                rep["precision"] = precision
            lines[(a["offer_id"], a["spot"])]["replicas"].append(rep)
    return [line for line in lines.values() if line["instances"] > 0]


def apply(plan: dict, out) -> None:
    """Carry out the rollout. Here it is printed; each step is one call to the cloud (launch,
    terminate) or the serving layer (start, stop) in a real scheduler."""
    changes = [c for c in plan.get("changes", []) if c["action"] != "keep"]
    if not changes:
        print("  no change to the running fleet", file=out)
    for c in changes:
        print(f"  {c['action']:<6} {c['instances']} x {c['offer_id']}{' (spot)' if c['spot'] else ''}", file=out)
    for step in plan.get("rollout", {}).get("steps", []):
        what = f" {step['service']} ({step['config']})" if step.get("service") else ""
        print(f"    {step['step']:>3}. {step['action']:<9} {step['instance']}{what}"
              f"{' [temporary]' if step['temporary'] else ''}", file=out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", required=True, metavar="HOST:PORT")
    ap.add_argument("--token", default=None)
    ap.add_argument("--workload", required=True, type=Path, help="the base workload (JSON or YAML)")
    ap.add_argument("--forecast", required=True, type=Path, help="demand multipliers per step (JSON)")
    ap.add_argument("--every-minutes", type=float, default=15.0, help="re-plan this often")
    ap.add_argument("--iterations", type=int, default=0, help="stop after this many re-plans (0: run forever)")
    ap.add_argument("--lookahead", type=int, default=3, help="forecast steps planned at once (the first is now)")
    ap.add_argument("--state", type=Path, default=None, help="keep the running fleet here between runs")
    ap.add_argument("--time-limit", type=float, default=20.0, metavar="SECONDS")
    args = ap.parse_args(argv)

    base = load(args.workload)
    forecast = json.loads(args.forecast.read_text())
    state = json.loads(args.state.read_text()) if args.state and args.state.exists() else {"step": 0, "fleet": []}
    done = 0
    with PlannerClient(args.server, token=args.token, timeout_s=args.time_limit + 30) as client:
        while True:
            w = workload_for(base, forecast, state["step"], args.lookahead)
            try:
                plan = client.solve(w, time_limit_s=args.time_limit, base_dir=args.workload.parent,
                                    current_fleet=state["fleet"])
            except PlannerClientError as exc:
                print(f"step {state['step']}: no plan ({exc.code}): {exc}", file=sys.stderr)
                return exc.exit_code
            first = plan["periods"][0]
            print(f"step {state['step']}: {plan['status']}, now ${first['total_price_usd_per_hour']:.2f}/h on "
                  f"{first['gpus']} GPUs; {len(plan['periods'])}-step horizon ${plan['horizon_cost_usd']:.2f}")
            apply(plan, sys.stdout)
            state = {"step": state["step"] + 1, "fleet": running_fleet(plan)}
            if args.state:
                args.state.write_text(json.dumps(state, indent=2))
            done += 1
            if args.iterations and done >= args.iterations:
                return 0
            time.sleep(max(args.every_minutes, 0.0) * 60.0)


if __name__ == "__main__":
    sys.exit(main())
