"""Batch capacity reviews: many what-if scenarios of one base workload, solved in parallel.

    review = load_review("review.yaml")            # or parse_review(dict, base_dir)
    results = list(run_review(review, "out/", workers=4, backend="local"))
    write_report(review, results, "out/")          # results.json/.csv, report.md/.html, plots/

Pipeline: spec (the file's schema) -> expand (scenarios, sweeps and sensitivity
relaxations) -> changes (a modified Workload and Catalog per scenario) -> execute
(`plan()` in a worker) -> store (one JSON per scenario, resumable) -> report.
Nothing here imports grpc; a `Review` RPC wraps `run_review`'s iterator.
"""

from solver.review.expand import Review, Scenario, load_review, parse_review
from solver.review.result import ScenarioResult
from solver.review.runner import run_review

__all__ = ["Review", "Scenario", "ScenarioResult", "load_review", "parse_review", "run_review", "write_report"]


def write_report(review, results, out_dir):
    """Write results.json, results.csv, report.md, report.html and plots/ into out_dir."""
    from solver.review.report import write_report as _write

    return _write(review, results, out_dir)
