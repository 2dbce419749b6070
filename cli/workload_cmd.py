"""`solver-cli workload from-trace`: a workload file from traffic.

From a request trace (CSV or JSON Lines: arrival_s, prompt_tokens, output_tokens[,
service][, model], the format `simulate --trace` replays) or from Prometheus snapshots of a
vLLM or SGLang server (--prometheus), derive per service the request classes by length,
the peak rate, the arrival CV and, over a long enough trace, periods with a demand profile
(the rules: docs/traces.md). The workload goes to --out (YAML or JSON by its suffix) or to
stdout, with how it was derived: as comments at the top of YAML, and in a sidecar JSON file
(--derivation; for a JSON --out, NAME.derivation.json by default).

Exit codes: 0 written; 2 bad input (flags, a bad trace row, named by its line; an unknown
model); 5 the output could not be written.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from cli.argtypes import number_in, positive_int
from solver.output.safe_text import escape_controls

EXIT_OK, EXIT_INPUT, EXIT_OTHER = 0, 2, 5


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("workload", help="derive a workload file from traffic (a request trace or serving "
                              "metrics)")
    sub = p.add_subparsers(dest="workload_command", required=True)
    s = sub.add_parser("from-trace", help="a workload from a request trace (CSV/JSON Lines) or Prometheus snapshots "
                       "of vLLM or SGLang", description=__doc__.split("\n\n")[1])
    s.add_argument("trace", nargs="?", default=None, metavar="TRACE",
                   help="CSV with a header or JSON Lines: arrival_s, prompt_tokens, output_tokens[, service][, model]")
    s.add_argument("--prometheus", action="append", default=None, metavar="SNAPSHOT",
                   help="instead of a trace: a saved /metrics page of vLLM or SGLang; twice for an earlier and a "
                        "later snapshot (the rate is the counters' increase between them)")
    s.add_argument("--window-s", type=number_in(0, 1e9, "s"), default=None, metavar="SECONDS",
                   help="with --prometheus: the time between the two snapshots (when they carry no timestamps), or "
                        "with one snapshot how long its counters have been counting")
    s.add_argument("--out", default=None, metavar="FILE", help="write here: .yaml/.yml or .json (default: YAML on "
                   "stdout)")
    s.add_argument("--format", choices=["yaml", "json"], default=None, help="the format on stdout (default yaml)")
    s.add_argument("--derivation", default=None, metavar="FILE",
                   help="also write what was measured and how, as JSON (default with a .json --out: "
                        "NAME.derivation.json beside it)")
    s.add_argument("--model", action="append", default=[], metavar="[SERVICE=]NAME",
                   help="the model a service runs (a library model: solver-cli estimate --list-models); NAME alone "
                        "for every service; default: the trace's model column or the metrics' model_name label")
    s.add_argument("--name", default=None, help="the workload's name (default: the trace file's name)")
    s.add_argument("--service", default=None, metavar="NAME",
                   help="the service of rows without a service column (default: the trace file's name)")
    s.add_argument("--engine", default=None, help="the serving engine to write (vllm, sglang, tensorrt-llm[-VERSION]; "
                   "default: the metrics' engine, or none: the planner's default)")
    s.add_argument("--ttft-ms", type=number_in(0, 3.6e6, "ms"), default=None, help="SLO: time to first token")
    s.add_argument("--tpot-ms", type=number_in(0, 3.6e6, "ms"), default=None, help="SLO: time per output token")
    s.add_argument("--latency-ms", type=number_in(0, 3.6e6, "ms"), default=None, help="SLO: end-to-end latency")
    s.add_argument("--percentile", type=int, choices=[50, 90, 95, 99], default=None,
                   help="the percentile the SLO bounds hold at, under load")
    s.add_argument("--classes", type=positive_int, default=3, metavar="N",
                   help="request classes besides the tail class (default 3)")
    s.add_argument("--tail-quantile", type=number_in(0, 1, "quantile"), default=0.95, metavar="Q",
                   help="requests longer than this quantile of prompt+output tokens form the tail class (default "
                        "0.95; 1: no tail class)")
    s.add_argument("--peak-window-s", type=positive_int, default=300, metavar="SECONDS",
                   help="the sliding window the peak rate is measured over (default 300)")
    s.add_argument("--cv-window-s", type=number_in(0, 86400, "s"), default=60.0, metavar="SECONDS",
                   help="the windows the arrival CV is measured within (default 60)")
    s.add_argument("--periods", choices=["auto", "none"], default="auto",
                   help="auto (default): periods of the day from a trace of 2 hours or more; none: one demand")
    s.add_argument("--max-periods", type=positive_int, default=6, metavar="N", help="at most N periods (default 6)")
    s.add_argument("--period-waste", type=number_in(0, 1, "fraction", low_allowed=True), default=0.10,
                   metavar="FRACTION", help="the over-provisioning the periods may leave (default 0.10)")
    s.set_defaults(func=run)


def _fail(lines: list[str], head: str = "error: invalid input") -> int:
    print(head, file=sys.stderr)
    for line in lines:
        print(escape_controls(f"  - {line}"), file=sys.stderr)
    return EXIT_INPUT


def run(args) -> int:
    if (args.trace is None) == (args.prometheus is None):
        return _fail(["give a TRACE file or --prometheus SNAPSHOT (not both). To fix: e.g. "
                      "solver-cli workload from-trace requests.csv --model llama-3.1-8b"])
    if args.prometheus is not None and len(args.prometheus) > 2:
        return _fail(["--prometheus at most twice (an earlier and a later snapshot)"])
    if args.window_s is not None and args.prometheus is None:
        return _fail(["--window-s is for --prometheus (a trace's arrival times give its window)"])
    if args.out and Path(args.out).suffix.lower() not in (".yaml", ".yml", ".json"):
        return _fail([f"--out {args.out}: the suffix says the format: .yaml, .yml or .json"])
    if args.name is not None and not args.name.strip():
        return _fail(["--name must not be empty"])
    models_flag, problem = _model_flags(args.model)
    if problem:
        return _fail([problem])

    from solver.sim.trace import SERVICE_NAME, TraceError
    from solver.traffic.from_trace import DeriveOptions, derive_from_trace

    if args.service is not None and not SERVICE_NAME.match(args.service):
        return _fail([f"--service {args.service!r} is not a service name. To fix: letters, digits and . _ : / -"])
    options = DeriveOptions(body_classes=args.classes, tail_quantile=args.tail_quantile,
                            peak_window_s=args.peak_window_s, cv_window_s=args.cv_window_s, periods=args.periods,
                            max_periods=args.max_periods, period_waste=args.period_waste)
    try:
        if args.trace is not None:
            d = derive_from_trace(args.trace, options, args.service)
        else:
            from solver.traffic.prometheus import derive_from_prometheus

            d = derive_from_prometheus(args.prometheus, args.window_s, options, args.service)
    except TraceError as exc:
        return _fail(exc.problems, "error: cannot derive a workload from it")

    models, problems = _models(d, models_flag)
    if problems:
        return _fail(problems)
    slo = {k: v for k, v in (("ttft_ms", args.ttft_ms), ("tpot_ms", args.tpot_ms), ("latency_ms", args.latency_ms),
                             ("percentile", args.percentile)) if v is not None}
    from solver.traffic.workload import derivation_dict, description, render, workload_dict

    source = args.trace or args.prometheus[-1]
    name = args.name or Path(source).stem or "workload"
    engine = args.engine or d.engine
    workload = workload_dict(d, name, models, slo, engine)
    command = "solver-cli " + " ".join(shlex.quote(a) for a in sys.argv[1:]) \
        if len(sys.argv) > 2 and sys.argv[1] == "workload" else "solver-cli workload from-trace"
    lines = description(d, command, bool(slo))
    for s in d.services:  # the longest request must fit the model: the planner checks classes, not requests
        limit = _context(models[s.name])
        if s.longest_total and limit and s.longest_total > limit:
            lines.append(f"Warning: {s.name}'s longest request ({s.longest_total:,} tokens) exceeds "
                         f"{models[s.name]}'s context ({limit:,}); its class's mean fits, the request itself would not")

    from solver.errors import InputError
    from solver.workload.documents import parse_workload

    try:
        parse_workload(workload)  # what is written must be a workload the planner reads
    except InputError as exc:
        return _fail([str(v) for v in exc.violations], "error: the derived workload is not valid")

    fmt = "json" if (args.out and Path(args.out).suffix.lower() == ".json") else \
        ("yaml" if args.out else (args.format or "yaml"))
    text = render(workload, lines, fmt)
    sidecar = args.derivation or (str(Path(args.out).with_suffix(".derivation.json")) if fmt == "json" and args.out
                                  else None)
    try:
        if args.out:
            _write(Path(args.out), text)
        else:
            sys.stdout.write(text)
        if sidecar:
            import json

            _write(Path(sidecar), json.dumps(derivation_dict(d, command), indent=2) + "\n")
    except OSError as exc:
        print(escape_controls(f"error: cannot write {exc.filename or 'the output'}: {exc.strerror or exc}"),
              file=sys.stderr)
        return EXIT_OTHER
    if args.out:
        services = ", ".join(f"{s.name} ({s.rate_per_s:g} requests/s, {len(s.classes)} classes)" for s in d.services)
        periods = f", {len(d.periods)} periods" if d.periods else ""
        print(escape_controls(f"wrote {args.out}: {services}{periods}" + (f"; how: {sidecar}" if sidecar else "")),
              file=sys.stderr)
    return EXIT_OK


def _model_flags(values: list[str]) -> tuple[dict, str | None]:
    out: dict = {}
    for v in values:
        service, _, model = v.rpartition("=") if "=" in v else ("", "", v)
        if not model.strip():
            return {}, f"--model {v!r}: give NAME or SERVICE=NAME"
        if service in out:
            return {}, f"--model for {service or 'every service'} given twice"
        out[service] = model.strip()
    return out, None


def _models(d, flags: dict) -> tuple[dict, list[str]]:
    """Each service's library model: --model SERVICE=NAME, else --model NAME, else what the
    trace or metrics name; unknown names are problems with a suggestion."""
    from solver.models.library import get_model, model_names
    from solver.suggest import did_you_mean

    known = {s.name for s in d.services}
    problems = [f"--model {svc}=...: no service {svc!r} in the traffic{did_you_mean(svc, known) or '.'} To fix: one of "
                f"{', '.join(sorted(known))}" for svc in flags if svc and svc not in known]
    models = {}
    for s in d.services:
        given = flags.get(s.name) or flags.get("")
        name = given or s.model
        if name is None:
            problems.append(f"service {s.name!r}: no model (no model column in the trace). To fix: --model NAME or "
                            f"--model {s.name}=NAME, a library model (solver-cli estimate --list-models)")
            continue
        arch = get_model(name)
        if arch is None:
            where = "" if given else (f" (the model column, line {s.models[name][1]})" if name in s.models else
                                      " (the metrics' model_name label)")
            problems.append(f"service {s.name!r}: unknown model {name!r}{where}{did_you_mean(name, model_names()) or '.'}"
                            f" To fix: --model {s.name}=NAME with a library model (solver-cli estimate --list-models)")
            continue
        models[s.name] = arch.name
    return models, problems


def _context(model: str) -> int | None:
    from solver.models.library import get_model

    arch = get_model(model)
    return arch.max_context_tokens if arch else None


def _write(path: Path, text: str) -> None:
    """Whole or not at all: a temporary file beside it, then renamed over it."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
