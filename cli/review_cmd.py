"""`solver-cli review REVIEW --out DIR`: run a capacity review and write its report.

Exit codes: 0 the review ran and its report is written (scenarios without a plan are
part of the answer, not a failure); 2 bad review file or options; 5 interrupted, or
some scenario failed unexpectedly (status "error"; a rerun retries those).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

from cli.argtypes import positive_int, seconds

EXIT_OK, EXIT_INPUT, EXIT_OTHER = 0, 2, 5


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("review", help="run a capacity review (scenarios and sweeps of a base workload) "
                              "and write a report",
                              description="Solve every scenario, sweep point and sensitivity relaxation of a review "
                              "file in parallel, store each result in DIR/scenarios as it finishes, and write "
                              "results.json, results.csv, report.md, report.html and plots/ into DIR.")
    p.add_argument("review", help="review file (YAML or JSON), see examples/review-*.yaml")
    p.add_argument("--out", required=True, metavar="DIR", help="where results and the report go; rerunning with the "
                   "same DIR skips scenarios already solved")
    p.add_argument("--workers", type=positive_int, default=None, metavar="N", help="parallel solves (default: all cores)")
    p.add_argument("--backend", choices=["local", "ray"], default="local",
                   help="local: a process pool (default); ray: Ray tasks (RAY_ADDRESS joins a cluster)")
    p.add_argument("--time-limit-per-scenario", type=seconds, default=None, metavar="SECONDS",
                   help="overrides the review file's time_limit_per_scenario_s")
    p.add_argument("--fresh", action="store_true", help="ignore stored results and solve every scenario again")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args) -> int:
    from solver.errors import InputError
    from solver.review import load_review, run_review, write_report

    try:
        review = load_review(args.review)
    except InputError as exc:
        return _input_error(exc)
    total = len(review.scenarios)
    # The scenarios' cancellable SCIP solves print two spurious ERROR lines each (as in
    # `solve`); the workers inherit this process's filtered stderr.
    from solver.optimize.backends import stderr_filter

    on_terminal = sys.stderr.isatty()  # before the filter: its pipe is no terminal
    stderr_filter.install(take_stdout=True)
    bar = ProgressBar(total, sys.stderr) if on_terminal and not args.quiet else None
    results = []
    t0 = time.monotonic()
    try:
        for result in run_review(review, args.out, workers=args.workers, backend=args.backend,
                                 time_limit_per_scenario_s=args.time_limit_per_scenario, fresh=args.fresh):
            results.append(result)
            if bar:
                bar.update(result)
    except InputError as exc:
        return _input_error(exc)
    except KeyboardInterrupt:
        if bar:
            bar.finish()
        print(f"interrupted: {len(results)} of {total} scenarios are stored in {args.out}/scenarios; "
              "run the same command again to resume", file=sys.stderr)
        return EXIT_OTHER
    except OSError as exc:  # e.g. a full disk: the results stored so far are whole (written atomically)
        if bar:
            bar.finish()
        return _write_error(exc, args.out, f"{len(results)} of {total} scenario results are stored in "
                            f"{args.out}/scenarios; free some space and run the same command again to resume")
    if bar:
        bar.finish()
        print("writing the report...", file=sys.stderr, flush=True)
    try:
        files = write_report(review, results, args.out)
    except OSError as exc:
        return _write_error(exc, args.out, f"All {total} scenario results are stored in {args.out}/scenarios; free "
                            "some space and run the same command again to write the report without solving")
    counts = Counter(r.status for r in results)
    resumed = sum(r.resumed for r in results)
    print(f"review {review.name!r}: {total} scenarios ({', '.join(f'{n} {s}' for s, n in sorted(counts.items()))}) "
          f"in {time.monotonic() - t0:.1f} s" + (f"; {resumed} reused from an earlier run" if resumed else ""))
    print(f"report: {files['html']}  (also {files['markdown'].name}, {files['csv'].name}, {files['json'].name})")
    if counts.get("error"):
        print(f"warning: {counts['error']} scenarios failed unexpectedly (status error, see results.csv); "
              "a rerun retries them", file=sys.stderr)
        return EXIT_OTHER
    return EXIT_OK


def _write_error(exc: OSError, out_dir: str, what_is_kept: str) -> int:
    where = exc.filename or out_dir  # a failed write() names no file
    print(f"error: cannot write to {where}: {exc.strerror or exc}. {what_is_kept}.", file=sys.stderr)
    return EXIT_OTHER


def _input_error(exc) -> int:
    print("error: invalid input", file=sys.stderr)
    for v in exc.violations:
        print(f"  - {v}", file=sys.stderr)
    return EXIT_INPUT


class ProgressBar:
    """One self-rewriting line on a terminal: done/total, failures so far, and time left."""

    WIDTH = 30

    def __init__(self, total: int, stream: TextIO):
        self.total, self.stream = max(total, 1), stream
        self.done = self.no_plan = self.resumed = 0
        self.t0 = time.monotonic()

    def update(self, result) -> None:
        self.done += 1
        self.no_plan += not result.planned
        self.resumed += result.resumed
        filled = int(self.WIDTH * self.done / self.total)
        elapsed = time.monotonic() - self.t0
        solved = self.done - self.resumed
        eta = elapsed / solved * (self.total - self.done) if solved else 0.0
        line = (f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} scenarios"
                f"  {self.no_plan} without a plan  {elapsed:5.1f} s elapsed  ~{eta:4.0f} s left ")
        self.stream.write(line)
        self.stream.flush()

    def finish(self) -> None:
        self.stream.write("\n")
        self.stream.flush()
