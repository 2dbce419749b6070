"""`solver-cli export PLAN.json --to skypilot|kubernetes [--out DIR]`: the files that run a plan.

PLAN.json is what `solver-cli solve WORKLOAD --format json` prints. `solve --export
TARGET [--export-out DIR]` does both in one step. A multi-period plan over a day exports as
one directory switched at the period boundaries with `--period all --schedule keda
--day-starts HH:MM [--timezone Area/City]` (solver/export/schedule.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

from solver.output.safe_text import escape_controls

EXIT_OK, EXIT_INPUT = 0, 2
TARGETS = ("skypilot", "kubernetes")


def default_out(target: str) -> str:
    return str(Path("deploy") / target)


def add_parser(subparsers):
    p = subparsers.add_parser("export", help="write SkyPilot or Kubernetes files that run a plan (PLAN.json)",
                              description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    p.add_argument("plan", metavar="PLAN.json", help="a plan from `solver-cli solve WORKLOAD --format json`")
    p.add_argument("--to", required=True, choices=TARGETS, help="deployment target")
    p.add_argument("--out", metavar="DIR", help="directory for the files (default: deploy/TARGET)")
    p.add_argument("--period", metavar="NAME", default=None,
                   help="for a multi-period plan (required there): the period to export, or `all` for every "
                        "period, each into DIR/PERIOD")
    p.add_argument("--schedule", metavar="SCALER", default=None,
                   help="with --period all and --to kubernetes: one directory with every period's units, and a "
                        "KEDA ScaledObject per unit that switches its replicas at the period boundaries (`keda`)")
    p.add_argument("--day-starts", metavar="HH:MM", default=None,
                   help="with --schedule: the clock time the plan's first period starts each day")
    p.add_argument("--timezone", metavar="AREA/CITY", default=None,
                   help="with --schedule: the time zone of --day-starts (IANA name; default Etc/UTC)")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    from solver.errors import InputError
    from solver.export import load_plan_file

    from solver.export import schedule_options

    try:
        schedule = schedule_options(args.schedule, args.day_starts, args.timezone)  # flags before the plan file
        plan = load_plan_file(args.plan)
    except InputError as exc:
        return _fail(exc)
    code, lines = write(plan, args.to, args.out or default_out(args.to), args.period, schedule)
    for line in lines:
        print(line)
    return code


def write(plan: dict, target: str, out_dir: str, period: str | None = None,
          schedule=None) -> tuple[int, list[str]]:
    """Export; (exit code, lines to show). Errors go to stderr here, lines are for the caller's stream.
    `schedule`: solver.export.ScheduleOptions for `--period all --schedule` (one directory)."""
    from solver.errors import InputError
    from solver.export import ALL_PERIODS, export_periods, export_plan, export_scheduled, period_names
    from solver.export.dynamo import DIR as DYNAMO, config_map
    from solver.export.llm_d import DIR as LLM_D

    try:
        if schedule is not None:
            if period not in (None, ALL_PERIODS):
                raise InputError.single("--period", f"is {period!r}, but --schedule exports every period.",
                                        "give --period all with --schedule, or leave --schedule out")
            results = [(None, export_scheduled(plan, target, out_dir, schedule))]
        elif period == ALL_PERIODS and ALL_PERIODS not in period_names(plan):
            results = export_periods(plan, target, out_dir)
        else:
            results = [(None, export_plan(plan, target, out_dir, period))]
    except InputError as exc:
        return _fail(exc), []
    except OSError as exc:
        print(f"error: cannot write {out_dir}: {exc.strerror or exc}. To fix: give a writable --out directory",
              file=sys.stderr)
        return EXIT_INPUT, []
    lines = []
    for name, result in results:
        where = str(Path(out_dir) / name) if name is not None else out_dir
        for warning in result.warnings:  # stderr in both commands: the export's stdout lines may be the plan's
            print(escape_controls(f"warning: {warning}"), file=sys.stderr)
        deployable = [p for p in result.written if p.parent == Path(where)]
        workers = [p for p in result.written if p.parent == Path(where) / LLM_D]  # disaggregated services
        graphs = [p for p in result.written if p.parent == Path(where) / DYNAMO]  # the same on SGLang / TensorRT-LLM
        placements = [p for p in result.written if p.parent == Path(where) / "sites"]
        if deployable or not (workers or graphs):
            lines += [f"wrote {len(deployable)} {target} file(s) to {where}" + (f" (period {name}):" if name else ":")]
            lines += [f"  {_shown(p, where)}" for p in deployable]
        if workers:
            lines.append(f"wrote {len(workers)} file(s) to {where} for the llm-d prefill and decode workers of "
                         "disaggregated services (Helm values for llm-d's ModelService chart, and install.sh): "
                         + ", ".join(_shown(p, where) for p in workers))
        if graphs:
            lines.append(f"wrote {len(graphs)} file(s) to {where} for the Dynamo prefill and decode workers of "
                         "disaggregated services (a DynamoGraphDeployment per service and link tier): "
                         + ", ".join(_shown(p, where) for p in graphs))
        if placements:
            lines.append(f"wrote {len(placements)} owned-site placement(s) (which replicas run on which owned server; "
                         "not applied): "
                         + ", ".join(_shown(p, where) for p in placements))
        if result.removed:
            lines.append(f"removed {len(result.removed)} file(s) an earlier export wrote for units no longer in the "
                         "plan: " + ", ".join(_shown(p, where) for p in result.removed))
            releases = sorted(p.name.removesuffix(".values.yaml") for p in result.removed
                              if p.parent == Path(where) / LLM_D and p.name.endswith(".values.yaml"))
            if releases:
                # Removing a values file stops nothing: its Helm release runs until uninstalled.
                lines.append(f"the llm-d workers of those files keep running until uninstalled: helm uninstall "
                             f"{' '.join(releases)}")
            deployments = sorted(p.name.removesuffix(".yaml") for p in result.removed
                                 if p.parent == Path(where) / DYNAMO and p.name.endswith(".yaml"))
            if deployments:
                # Nor does removing a DGD's file: the operator runs its workers until the object is deleted.
                lines.append(f"the Dynamo workers of those files keep running until deleted: kubectl delete "
                             f"dynamographdeployment {' '.join(deployments)} (and TensorRT-LLM's engine settings: "
                             f"kubectl delete configmap --ignore-not-found "
                             f"{' '.join(config_map(d) for d in deployments)})")
    if schedule is not None:
        hint = (f"install KEDA, then kubectl apply -f {out_dir}: the ScaledObjects in keda-schedule.yaml switch the "
                "fleet at each period's start")
    elif results[0][0] is not None:
        hint = (f"at each period's start, apply its directory (e.g. kubectl apply -f {Path(out_dir) / results[0][0]}) "
                "and delete what the previous period ran that this one does not")
    else:
        hint = "sky serve up -n NAME FILE" if target == "skypilot" else f"kubectl apply -f {out_dir}"
        written = results[0][1].written
        stacks = []
        if any(p.parent == Path(out_dir) / LLM_D for p in written):
            stacks.append(f"sh {Path(out_dir) / LLM_D / 'install.sh'}")
        if any(p.parent == Path(out_dir) / DYNAMO for p in written):
            stacks.append(f"kubectl apply -f {Path(out_dir) / DYNAMO} (Dynamo's platform installed)")
        if stacks:
            hint = "; ".join(([hint] if any(p.parent == Path(out_dir) for p in written) else []) + stacks)
    lines.append(f"next: {hint} (see the comments at the top of each file)")
    return EXIT_OK, [escape_controls(line) for line in lines]


def _shown(path: Path, out_dir: str) -> str:
    """A written file as the user finds it under the export directory (sites/dc-east.yaml, not dc-east.yaml)."""
    try:
        return path.relative_to(out_dir).as_posix()
    except ValueError:
        return path.name


def _fail(exc) -> int:
    print("error: cannot export the plan", file=sys.stderr)
    for v in exc.violations:
        print(escape_controls(f"  - {v}"), file=sys.stderr)
    return EXIT_INPUT
