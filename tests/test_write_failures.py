"""Issue 11, item 5: a stored scenario file of the wrong shape, and a full disk.

The real CLI as a subprocess. A full disk is real: stdout to /dev/full, and a review
whose --out is a 64 KiB tmpfs mounted in a private mount namespace (`unshare`; the
test skips where the kernel or the container does not allow one).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from solver.review.result import ScenarioResult
from solver.review.store import ResultStore
from test_bad_input import run_cli

EXIT_OTHER = 5
TINY_REVIEW = {"name": "tiny", "sensitivity": {"enabled": False}, "time_limit_per_scenario_s": 20,
               "base": {"workload": {"services": [{"name": "img", "demand": {"items_per_min": 10.0},
                                                   "profiles": [{"gpu": "A10", "items_per_min": 5.0}]}]}},
               "scenarios": [{"name": "double", "changes": [{"demand": {"factor": 2}}]}]}


# ---------------------------------------------------------------- stored results of the wrong shape
BAD_CONTENTS = ["null", "[]", "7", '"\\u0000"', '{"id": "x", "status": 5}',
                '{"id": "x", "name": "x", "group": "scenario", "status": "optimal", "fleet": "not a list"}']


def test_stored_results_of_the_wrong_shape_are_solved_again_with_a_warning(tmp_path: Path) -> None:
    out = tmp_path / "out"
    review = {**TINY_REVIEW, "scenarios": [{"name": f"growth {i}", "changes": [{"demand": {"factor": 1 + i}}]}
                                           for i in range(len(BAD_CONTENTS))]}
    path = tmp_path / "review.json"
    path.write_text(json.dumps(review))
    first = run_cli("review", str(path), "--out", str(out), "--workers", "1")
    assert first.returncode == 0, first.stderr
    for i, content in enumerate(BAD_CONTENTS):
        (out / "scenarios" / f"growth-{i}.json").write_text(content)
    again = run_cli("review", str(path), "--out", str(out), "--workers", "1")
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert again.stderr.count("is not a usable stored result") == len(BAD_CONTENTS), again.stderr
    assert "1 reused from an earlier run" in again.stdout  # the base; the others were solved again
    for i in range(len(BAD_CONTENTS)):
        assert json.loads((out / "scenarios" / f"growth-{i}.json").read_text())["status"] == "optimal"


def test_the_store_never_hands_out_a_result_with_wrong_types(tmp_path: Path, caplog) -> None:
    store = ResultStore(tmp_path)
    store.dir.mkdir(parents=True)
    good = ScenarioResult("s1", "s1", "scenario", "optimal", "f1", usd_per_hour=2.0)
    for bad in (None, [], {**good.to_dict(), "usd_per_hour": "cheap"}, {**good.to_dict(), "status": "great"},
                {**good.to_dict(), "gpus": True}, {**good.to_dict(), "id": "s2"}):
        store.path("s1").write_text(json.dumps(bad))
        assert store.load("s1", "f1") is None
    assert caplog.text.count("is not a usable stored result") == 6
    store.save(good)
    assert store.load("s1", "f1").usd_per_hour == 2.0


# ---------------------------------------------------------------- full disk
@pytest.mark.parametrize("args", [["catalog"], ["schema"], ["solve", "examples/s1-throughput.json"],
                                  ["catalog", "--format", "json"]])
def test_stdout_on_a_full_disk_is_a_clear_error(args: list[str]) -> None:
    root = Path(__file__).resolve().parents[1]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([*_cli_argv(), *args], stdout=full, stderr=subprocess.PIPE, text=True, cwd=root,
                              timeout=120)
    assert proc.returncode == EXIT_OTHER, proc.stderr
    assert "No space left on device" in proc.stderr and "Traceback" not in proc.stderr
    assert "Exception ignored" not in proc.stderr


def _cli_argv() -> list[str]:
    from test_bad_input import _cli

    return [_cli()]


def _tmpfs_works(folder: Path) -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run([unshare, "-r", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs '{folder}'"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def test_a_review_on_a_full_disk_stops_with_a_clear_error_saying_what_is_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    if not _tmpfs_works(out):
        pytest.skip("cannot mount a tmpfs in a private namespace here (unshare -r -m)")
    review = tmp_path / "review.json"
    review.write_text(json.dumps({**TINY_REVIEW, "scenarios": [
        {"name": f"growth {i}", "changes": [{"demand": {"factor": 1 + i / 10}}]} for i in range(1, 12)]}))
    # A 64 KiB disk: the scenario results or the report's plots fill it.
    script = (f"mount -t tmpfs -o size=64k tmpfs '{out}' && exec {_cli_argv()[0]} review '{review}' "
              f"--out '{out}' --workers 1")
    proc = subprocess.run(["unshare", "-r", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_OTHER, proc.stdout + proc.stderr
    assert "No space left on device" in proc.stderr, proc.stderr
    assert "run the same command again" in proc.stderr
    assert "Traceback" not in proc.stderr
