"""A short fuzzing run in the test suite (issue 11): a few hundred generated inputs
through every way in, including the real server and the real CLI; no input may end in
INTERNAL, a traceback or a hang. Longer runs are bench/fuzz.py (docs/benchmarks.md,
`fuzz`). FUZZ_SEED picks other inputs than the default ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fuzz_harness

SHORT = {"document": 200, "review": 60, "proto": 120, "solve": 4, "server": 40, "cli": 1}


def test_a_short_fuzzing_run_has_no_internal_error_traceback_or_hang(solver_cli) -> None:
    report = fuzz_harness.run(SHORT, seed=int(os.environ.get("FUZZ_SEED", "11")), cli=solver_cli)
    print(report.table())
    assert {t: sum(c.values()) for t, c in report.counts.items()} == SHORT
    assert report.failures() == 0, "\n".join(f"{k}: {v}" for k, v in report.examples.items())
    # The inputs reach past the parser: some plan, some are refused for bad names or values.
    totals = sum((c for c in report.counts.values()), start=fuzz_harness.Counter())
    assert totals["ok"] > 0 and totals["invalid"] > 0


def test_the_coverage_guided_fuzzer_runs_clean_for_a_few_thousand_inputs() -> None:
    pytest.importorskip("atheris", reason="atheris is not installed (pip install -e '.[fuzz]')")
    script = Path(__file__).resolve().parents[1] / "bench" / "fuzz_atheris.py"
    proc = subprocess.run([sys.executable, str(script), "-runs=2000", "-timeout=10", "-seed=11"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Done 2000 runs" in proc.stderr
