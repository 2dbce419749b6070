"""`solver-cli`: the product's command line (solve, schema, catalog, estimate, serve, review, export, simulate).

Exit codes: 0 a plan was found; 2 bad input; 3 no feasible fleet; 4 no plan within the
time limit; 5 cancelled or internal error. Errors never print a traceback.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from cli.argtypes import backend, number_in, positive_int, seconds
from cli.json_out import write_json

EXIT_OK, EXIT_INPUT, EXIT_INFEASIBLE, EXIT_TIMEOUT, EXIT_OTHER = 0, 2, 3, 4, 5


def _err(text: str) -> None:
    from solver.output.safe_text import escape_controls

    print(escape_controls(text), file=sys.stderr)  # messages quote user input: no raw escape sequences


def _input_error(exc, fmt: str = "table") -> int:
    if fmt == "json":
        return _json_failure("invalid", EXIT_INPUT, errors=[
            {"field": v.field, "message": v.message, "fix": v.fix} for v in exc.violations])
    _err("error: invalid input")
    for v in exc.violations:
        _err(f"  - {v}")
    return EXIT_INPUT


def _json_failure(status: str, code: int, **detail) -> int:
    """Under --format json every outcome is JSON on stdout, failures included."""
    print(json.dumps({"status": status, **detail}, indent=2))
    return code


def _failure(args, status: str, code: int, message: str) -> int:
    if getattr(args, "format", "table") == "json":
        return _json_failure(status, code, error=message)
    _err(f"error: {message}")
    return code


def _exit_on_ctrl_c() -> None:
    """Ctrl-C ends the command at once, whatever it is doing (a solve keeps nothing worth
    saving): exit 5 with one line, no traceback."""
    import signal

    def handler(signum, frame):
        _err("\ninterrupted")
        try:
            from solver.optimize.backends import stderr_filter

            stderr_filter.restore()  # os._exit skips atexit: let the filtered stderr drain first
        except Exception:  # noqa: BLE001 - exiting anyway
            pass
        os._exit(EXIT_OTHER)

    signal.signal(signal.SIGINT, handler)


def _run_interruptibly(work):
    """Run `work()` in a thread, so that the main thread keeps running Python and the Ctrl-C
    handler answers at once even while the MIP solver (C code) is busy."""
    import threading

    box: dict = {}

    def target():
        try:
            box["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="solve")
    thread.start()
    while thread.is_alive():
        thread.join(0.1)
    if "error" in box:
        raise box["error"]
    return box["value"]


def cmd_solve(args) -> int:
    from solver.errors import Cancelled, InfeasibleError, InputError, PlannerError, SolverTimeout
    from solver.output.render import render_infeasible, render_plan
    from solver.documents.parse import load_document

    if args.export_out and Path(args.export_out).exists() and not Path(args.export_out).is_dir():
        return _failure(args, "invalid", EXIT_INPUT,
                        f"--export-out {args.export_out} exists and is not a directory. To fix: give a directory")
    try:
        data = load_document(Path(args.workload))
        if args.current:
            from solver.workload.documents import load_current_fleet
            data = dict(data, current_fleet=load_current_fleet(Path(args.current)))
    except InputError as exc:
        return _input_error(exc, args.format)
    if args.server:
        return _solve_remote(args, data)
    from solver.plan import PlanOptions, plan
    from solver.workload.documents import parse_workload

    progress = _progress_printer() if sys.stderr.isatty() and not args.quiet else None
    # Solver callbacks (progress, an early stop at the requested gap) make SCIP print two
    # spurious ERROR lines on the process's stderr: filter them out.
    from solver.optimize.backends import stderr_filter

    stderr_filter.install(take_stdout=True)  # stdout is the answer: C code prints to stderr
    try:
        workload = parse_workload(data)
        options = PlanOptions(time_limit_s=args.time_limit, backend=args.backend, explain=args.explain,
                              on_progress=progress, base_dir=str(Path(args.workload).parent),
                              verify=False if args.no_verify else None,
                              # reading the workload counts (0.6 s for 5,000 services): the
                              # process ends by the limit, which is what its caller waits for
                              started_at=_started_at)
        _resume_collector()
        result = _run_interruptibly(lambda: plan(workload, options))
    except InputError as exc:
        return _input_error(exc, args.format)
    except InfeasibleError as exc:
        reasons = [asdict(r) for r in exc.reasons]
        if args.format == "json":
            print(json.dumps({"status": "infeasible", "infeasibility": reasons}, indent=2))
        else:
            print(render_infeasible(reasons))
        return EXIT_INFEASIBLE
    except SolverTimeout as exc:
        return _failure(args, "timeout", EXIT_TIMEOUT, str(exc))
    except Cancelled as exc:
        return _failure(args, "cancelled", EXIT_OTHER, str(exc))
    except PlannerError as exc:
        return _failure(args, "error", EXIT_OTHER, str(exc))
    finally:
        if progress is not None:
            print(file=sys.stderr)  # end the progress line
    d = result.to_dict()
    if args.format == "json":
        write_json(d)
    else:
        print(render_plan(d, explain=args.explain))
    return _export_after_solve(args, d)


def _export_after_solve(args, d: dict) -> int:
    """`solve --export TARGET`: write the plan's deployment files; messages on stderr keep stdout the plan."""
    if not args.export:
        return EXIT_OK
    from cli.export_cmd import default_out, write

    code, lines = write(d, args.export, args.export_out or default_out(args.export), args.export_period)
    for line in lines:
        _err(line)
    return code


def _progress_printer():
    from solver.optimize.linear import Progress

    def show(p: Progress) -> None:
        best = f"${p.best_usd_per_hour:.4f}/h" if p.best_usd_per_hour is not None else "-"
        bound = f"${p.bound_usd_per_hour:.4f}/h" if p.bound_usd_per_hour is not None else "-"
        print(f"\r  {p.elapsed_s:6.2f} s  best {best}  bound {bound}  plans found {p.solutions_found}   ",
              end="", file=sys.stderr, flush=True)

    return show


def _solve_remote(args, data: dict) -> int:
    try:
        from planner_client import PlannerClient, PlannerClientError
        from planner_client.client import referenced_catalog_file
    except ImportError:
        return _failure(args, "error", EXIT_OTHER, "the gRPC client (planner_client) is not installed")
    from solver.output.render import render_infeasible, render_plan

    base_dir = str(Path(args.workload).parent)
    catalog_file = referenced_catalog_file(data, base_dir)
    if catalog_file is not None:
        # The server reads no caller paths, so the file's content would travel with the
        # request: only when asked, since a workload could name any file of this machine.
        if not args.send_catalog_file:
            message = f"the workload names the local file {catalog_file}, which the server cannot read."
            fix = "add --send-catalog-file to send its content to the server, or put the offers inline (catalog.offers)"
            if args.format == "json":
                return _json_failure("invalid", EXIT_INPUT, errors=[{"field": "catalog.file", "message": message,
                                                                     "fix": fix}])
            _err("error: invalid input")
            _err(f"  - catalog.file: {message} To fix: {fix}")
            return EXIT_INPUT
        if not args.quiet:
            size = catalog_file.stat().st_size if catalog_file.is_file() else 0
            _err(f"sending the catalog file {catalog_file} ({size} bytes) to {args.server}")
    try:
        with PlannerClient(args.server, token=args.token, timeout_s=args.time_limit) as client:
            fleet = data.pop("current_fleet", None) if args.current else None
            if args.no_verify and isinstance(data, dict) and isinstance(data.get("solver", {}), dict):
                data["solver"] = {**data.get("solver", {}), "verify": False}
            d = client.solve(data, time_limit_s=args.time_limit, explain=args.explain, backend=args.backend,
                             base_dir=base_dir, current_fleet=fleet)
    except PlannerClientError as exc:
        if exc.infeasibility:
            if args.format == "json":
                print(json.dumps({"status": "infeasible", "infeasibility": exc.infeasibility}, indent=2))
            else:
                print(render_infeasible(exc.infeasibility))
            if exc.omitted:
                _err(f"note: {exc.omitted} more reasons were left out by the server (gRPC's size limit on error "
                     "details); solve locally (without --server) to see every one")
            return EXIT_INFEASIBLE
        if exc.code == "UNAUTHENTICATED":
            return _failure(args, "error", exc.exit_code,
                            f"{args.server} refused the call: missing or wrong bearer token. "
                            "To fix: pass --token TOKEN or set $PLANNER_TOKEN to the server's token")
        if exc.violations:
            if exc.omitted:  # stderr: the JSON keeps the local shape
                _err(f"note: {exc.omitted} more problems were left out by the server (gRPC's size limit on error "
                     "details); solve locally (without --server) to see every one")
            if args.format == "json":
                return _json_failure("invalid", exc.exit_code, errors=exc.violations)
            _err("error: invalid input")
            for v in exc.violations:
                _err(f"  - {v['field']}: {v['message']}" + (f" To fix: {v['fix']}" if v["fix"] else ""))
            return exc.exit_code
        status = {EXIT_INPUT: "invalid", EXIT_TIMEOUT: "timeout"}.get(exc.exit_code, "error")
        return _failure(args, status, exc.exit_code, str(exc))
    if args.format == "json":
        write_json(d)
    else:
        print(render_plan(d, explain=args.explain))
    return _export_after_solve(args, d)


def cmd_schema(args) -> int:
    if args.review:
        from solver.review.spec import ReviewFile as model
    else:
        from solver.catalog.schema import CatalogFile
        from solver.workload.schema import Workload

        model = CatalogFile if args.catalog else Workload
    print(json.dumps(model.model_json_schema(), indent=2))
    return EXIT_OK


def cmd_catalog(args) -> int:
    from solver.catalog import default_catalog, load_catalog_file
    from solver.errors import InputError
    from solver.suggest import did_you_mean

    try:
        catalog = load_catalog_file(args.file) if args.file else default_catalog()
    except InputError as exc:
        return _input_error(exc)
    if args.gpus:
        rows = [asdict(g) for g in catalog.gpus.values()]
        if args.format == "json":
            print(json.dumps(rows, indent=2))
        else:
            from solver.output.render import _table
            print(_table(["gpu", "vendor", "memory GiB", "bandwidth GB/s", "fp16 TFLOPS", "fp8 TFLOPS", "fp4 TFLOPS",
                          "nvlink GB/s", "nvlink domain", "int4", "consumer"],
                         [[g["name"], g["vendor"], f"{g['memory_gib']:g}", str(g["memory_bandwidth_gbs"] or "-"),
                           str(g["fp16_tflops"] or "-"), str(g["fp8_tflops"] or "-"), str(g["fp4_tflops"] or "-"),
                           str(g["nvlink_gbs"] or "-"), str(g["nvlink_domain_gpus"] or "-"),
                           "yes" if g["supports_int4"] else "", "yes" if g["consumer"] else ""] for g in rows]))
        return EXIT_OK
    offers = list(catalog.offers)
    if args.gpu:
        # GPU names as people write them ("h100 pcie", "NVIDIA L4"): solver/catalog/gpu_names.py.
        from solver.catalog.gpu_names import ambiguity, resolve_gpu_name

        found = resolve_gpu_name(args.gpu, catalog.gpus)
        if found.candidates:
            _err(f"error: {ambiguity(args.gpu, found.candidates)}. To fix: write one of {', '.join(found.candidates)}")
            return EXIT_INPUT
        args.gpu = found.name or args.gpu
    for field, value in (("gpu", args.gpu), ("provider", args.provider), ("region", args.region)):
        if value:
            known = {getattr(o, field) for o in offers}
            if value not in known:
                _err(f"error: no offers with {field} {value!r}{did_you_mean(value, known)}")
                return EXIT_INPUT
            offers = [o for o in offers if getattr(o, field) == value]
    if args.min_gpus is not None:
        offers = [o for o in offers if o.gpus_per_instance >= args.min_gpus]
    if args.max_price is not None:  # 0 lists the free offers (none), not every offer
        offers = [o for o in offers if o.price_usd_per_hour <= args.max_price]
    offers.sort(key=lambda o: (o.gpu, o.gpus_per_instance, o.price_usd_per_hour, o.id))
    if args.format == "json":
        print(json.dumps([{**asdict(o), "id": o.id} for o in offers], indent=2))
        return EXIT_OK
    from solver.output.render import _table
    print(_table(["offer", "region", "gpu", "gpus", "interconnect", "fabric", "$/h", "spot $/h", "$/GPU-h", "as of"],
                 [[o.id, o.region, o.gpu, str(o.gpus_per_instance), o.interconnect, o.inter_node_fabric or "-",
                   f"{o.price_usd_per_hour:.4f}", f"{o.spot_price_usd_per_hour:.4f}" if o.spot_price_usd_per_hour else "-",
                   f"{o.price_usd_per_gpu_hour:.4f}", o.as_of or "-"] for o in offers]))
    print(f"\n{len(offers)} offers; source: {catalog.description}")
    return EXIT_OK


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line. With `command="solve"` the commands that live in their own
    modules (estimate, serve, review, export, simulate) get empty stand-ins: a command line
    that starts with `solve` is parsed by the solve subparser (argparse hands it every later
    argument, -h included), and the top level shows only their names (in the usage line of
    an "unrecognized arguments" error), while importing and building them costs ~15 ms of a
    one-service solve."""
    p = argparse.ArgumentParser(prog="solver-cli", description="Cheapest proven-optimal GPU fleet for an inference workload.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("solve", help="plan the cheapest fleet for a workload file (JSON or YAML)")
    s.add_argument("workload")
    s.add_argument("--format", choices=["table", "json"], default="table")
    s.add_argument("--explain", action="store_true", help="per service: the nearest alternatives not taken, and why")
    s.add_argument("--time-limit", type=seconds, default=None, metavar="SECONDS",
                   help="wall-clock limit of the whole command, from its start to its answer (default: the "
                   "workload's solver.time_limit_s)")
    s.add_argument("--backend", type=backend, default=None, metavar="{auto,scip,highs}")
    s.add_argument("--current", metavar="FLEET", help="re-plan from the fleet that runs now: a JSON/YAML file with "
                   "[{offer_id, instances}] or {current_fleet: [...]} (replaces the workload's current_fleet)")
    s.add_argument("--server", metavar="HOST:PORT", help="solve on a planner service instead of locally")
    s.add_argument("--token", default=os.environ.get("PLANNER_TOKEN"),
                   help="bearer token for --server (default: $PLANNER_TOKEN)")
    s.add_argument("--send-catalog-file", action="store_true",
                   help="with --server: send the content of the local catalog file the workload names "
                        "(never sent without this flag)")
    s.add_argument("--quiet", action="store_true", help="no progress line on the terminal")
    s.add_argument("--no-verify", action="store_true",
                   help="skip simulation in the loop (the workload's solver.verify: false): faster, with percentile "
                        "caps from the queueing model alone")
    s.add_argument("--export", choices=["skypilot", "kubernetes"], default=None,
                   help="also write the plan's deployment files (see `solver-cli export`)")
    s.add_argument("--export-out", metavar="DIR", default=None, help="directory for --export (default: deploy/TARGET)")
    s.add_argument("--export-period", metavar="NAME", default=None,
                   help="with --export and a multi-period workload: the period whose fleet to export, or `all` "
                        "(a directory per period under --export-out)")
    s.set_defaults(func=cmd_solve)

    s = sub.add_parser("schema", help="print the workload file's JSON Schema")
    which = s.add_mutually_exclusive_group()
    which.add_argument("--catalog", action="store_true", help="the catalog file's schema instead")
    which.add_argument("--review", action="store_true", help="the capacity-review file's schema instead")
    s.set_defaults(func=cmd_schema)

    s = sub.add_parser("catalog", help="list and filter the catalog's offers (or GPU types)")
    s.add_argument("--file", help="a catalog file instead of the built-in default")
    s.add_argument("--gpus", action="store_true", help="list GPU types instead of offers")
    s.add_argument("--gpu")
    s.add_argument("--provider")
    s.add_argument("--region")
    s.add_argument("--min-gpus", type=positive_int, metavar="N", help="only instances with at least N GPUs")
    s.add_argument("--max-price", type=number_in(0, 1e9, "USD/hour", low_allowed=True), metavar="USD_PER_HOUR",
                   help="only offers at most this price per hour")
    s.add_argument("--format", choices=["table", "json"], default="table")
    s.set_defaults(func=cmd_catalog)

    for module, name in (("cli.estimate_cmd", "estimate"), ("cli.serve_cmd", "serve"), ("cli.review_cmd", "review"),
                         ("cli.export_cmd", "export"), ("cli.simulate_cmd", "simulate"), ("cli.workload_cmd", "workload")):
        if command == "solve":
            sub.add_parser(name, add_help=False)
            continue
        try:
            mod = __import__(module, fromlist=["add_parser"])
        except ImportError:
            continue
        mod.add_parser(sub)
    return p


def _single_threaded_blas() -> None:
    """NumPy's OpenBLAS starts a thread per core when it loads, and they spin before they
    sleep: 70-80 ms of a cold `solve`'s wall time (2 cores) for the few small matrix-vector
    products the queueing model makes. Only for this process's own command line (not for
    in-process callers of main()), and never over a thread count the caller chose."""
    if not any(name in os.environ for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def _lazy_symbol_binding() -> None:
    """Extension modules loaded later bind their libraries' function symbols on first call
    (RTLD_LAZY, what most programs do) instead of all at load (Python's default, RTLD_NOW):
    OR-Tools', NumPy's and pydantic-core's libraries hold many thousands of functions that
    a command never calls, and resolving them all took ~50 M instructions (~4 %) of a cold
    one-service solve (valgrind). Only when a symbol is resolved changes; in a broken
    install (a symbol missing from a library) the process would end when the function is
    first called rather than at its import. Only for this process's own command line."""
    if hasattr(sys, "getdlopenflags"):
        flags = sys.getdlopenflags()
        if flags & os.RTLD_NOW:
            sys.setdlopenflags((flags & ~os.RTLD_NOW) | os.RTLD_LAZY)


_collector_paused = False


def _pause_collector() -> None:
    """No garbage collection while the planner's modules load: each collection would walk
    the objects the imports leave behind, none of them garbage. Resumed by
    _resume_collector before planning."""
    global _collector_paused
    gc.disable()
    _collector_paused = True


def _resume_collector() -> None:
    """What exists before planning (modules, the validated workload) lives until exit: it is
    frozen out of the collector's reach (as the server's forkserver does, server/preload.py),
    which spares the collections at exit from walking it. The collector stays off: the
    plan makes no reference cycles (tests/test_collector.py) and the process ends once the
    answer is written, while a collection when the plan returns walks every object it made
    to find nothing (1.7 s for 5,000 services, past the time limit). A no-op unless
    _pause_collector ran."""
    global _collector_paused
    if _collector_paused:
        _collector_paused = False
        gc.freeze()


_started_at: float | None = None  # time.monotonic() when main() began: a solve's limit counts from it


def main(argv: list[str] | None = None) -> int:
    global _started_at
    _started_at = time.monotonic()
    words = sys.argv[1:] if argv is None else argv
    if argv is None and not (words and words[0] in ("serve", "review")):  # a short-lived process of its own
        from cli.code_cache import install

        install()  # before any module that makes dataclasses is imported
        _lazy_symbol_binding()
    parser = build_parser(words[0] if words and words[0] == "solve" else None)
    args = parser.parse_args(argv)
    if argv is None and args.command == "solve" and not args.server:  # a process of its own, before NumPy loads
        _single_threaded_blas()
        _pause_collector()
    if args.command not in ("serve", "review"):  # those two shut down their workers themselves
        _exit_on_ctrl_c()
    try:
        code = args.func(args)
        if sys.stdout is not None:
            sys.stdout.flush()  # here, where a full disk or a closed pipe is a clear error, not at exit
    except BrokenPipeError:
        _discard_stdout()
        code = EXIT_OK
    except OSError as exc:  # writing the answer failed: a full disk or a closed terminal under stdout
        _discard_stdout()
        where = f" {exc.filename}" if exc.filename else " the output"
        _err(f"error: cannot write{where}: {exc.strerror or exc}.")
        code = EXIT_OTHER
    if argv is None and args.command == "solve" and not args.server:
        _exit_without_teardown(code)
    return code


def _exit_without_teardown(code: int) -> None:
    """End a local solve's own process at once: the interpreter's teardown (freeing every
    module, pydantic's, NumPy's and OR-Tools' included) takes ~20 ms of a one-service solve
    and shows nothing. What the user could see is kept: the standard streams are flushed and
    the atexit handlers run (the stderr filter drains there). Where that is not plainly safe
    (a flush fails, a non-daemon thread still runs) it returns, and the ordinary exit does
    what it always did."""
    import atexit
    import threading

    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    # The interpreter's own order: atexit handlers, then the streams' last flush.
    atexit._run_exitfuncs()  # this clears them: the ordinary exit would not run them twice
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: the process was started with that descriptor closed
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _discard_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush of what could not
    be written does not fail a second time (with a message) on the way out."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
