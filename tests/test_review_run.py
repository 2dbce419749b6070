"""A small review run for real: results equal single solves, reruns resume, the report renders.

One module-scoped run (local process pool, 2 workers) feeds most tests; reruns and the
CLI use the same output directory or a copy of it.
"""

from __future__ import annotations

import base64
import copy
import csv
import json
import os
import re
import shutil
import subprocess
import threading
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from cli.main import main as cli_main
from solver.catalog import default_catalog
from solver.plan import PlanOptions, plan
from solver.review import load_review, parse_review, run_review, write_report
from solver.review.changes import apply_changes
from solver.workload.documents import parse_workload

BASE = {
    "name": "demo",
    "services": [
        {"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16", "fp8"],
         "demand": {"requests_per_s": 3, "prompt_tokens": 512, "output_tokens": 256},
         "slo": {"ttft_ms": 2000, "tpot_ms": 60}},
    ],
    # One L4 (3.5 requests/s at fp8 within TPOT 60 ms) is the cheapest fit; a zero quota keeps
    # it out so the sensitivity has a binding quota.
    "constraints": {"gpu_quotas": {"L4": 0}},
}
REVIEW = {
    "name": "small",
    "base": {"workload": BASE},
    "time_limit_per_scenario_s": 20,
    "scenarios": [
        {"name": "double", "changes": [{"demand": {"factor": 2}}]},
        {"name": "cheap h100", "changes": [{"price": {"gpu": "H100-SXM", "factor": 0.3}}]},
        {"name": "broke", "changes": [{"budget": {"usd_per_hour": 0.1}}]},
        {"name": "quota on a removed offer", "changes": [
            {"remove_offers": ["aws/g6e.xlarge"]}, {"offer_quota": {"offer": "aws/g6e.xlarge", "instances": 1}}]},
    ],
    "sweeps": [
        {"name": "growth", "change": "demand", "values": [1, 3]},
        {"name": "tpot", "change": "slo", "parameter": "tpot_ms", "fixed": {"service": "chat"}, "values": [30, 90]},
    ],
}
EXPECTED_IDS = ["base", "double", "cheap-h100", "broke", "quota-on-a-removed-offer", "growth-1", "growth-3",
                "tpot-30", "tpot-90", "sensitivity-quota-l4", "sensitivity-slo-chat-ttft_ms",
                "sensitivity-slo-chat-tpot_ms"]


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    out = tmp_path_factory.mktemp("review")
    review = parse_review(copy.deepcopy(REVIEW))
    results = list(run_review(review, out, workers=2))
    files = write_report(review, results, out)
    return review, results, files, out


def by_id(results):
    return {r.id: r for r in results}


# ---------------------------------------------------------------- results
def test_every_scenario_has_a_result_file_and_the_report_files_exist(ran):
    review, results, files, out = ran
    assert sorted(r.id for r in results) == sorted(EXPECTED_IDS) == sorted(s.id for s in review.scenarios)
    for sid in EXPECTED_IDS:
        stored = json.loads((out / "scenarios" / f"{sid}.json").read_text())
        assert stored["id"] == sid and stored["fingerprint"] == review.fingerprint(review.scenario(sid))
    for name in ("results.json", "results.csv", "report.md", "report.html"):
        assert (out / name).stat().st_size > 500, name
    assert {"plots/fleet-mix.png", "plots/sweep-growth.png", "plots/frontier-tpot.png", "plots/sensitivity.png"} \
        <= set(files)


def test_each_scenario_equals_a_single_plan_of_that_scenario(ran):
    review, results, _, _ = ran
    planned = [r for r in results if r.planned]
    assert len(planned) == 10
    for r in planned:
        workload, catalog = apply_changes(review.workload, review.catalog, review.scenario(r.id).changes)
        single = plan(workload, PlanOptions(catalog=catalog)).to_dict()
        assert r.usd_per_hour == pytest.approx(single["total_price_usd_per_hour"], abs=1e-6), r.id
        assert r.gpus == single["gpus"], r.id
        assert r.fleet == [{k: f[k] for k in r.fleet[0]} for f in single["fleet"]], r.id
        assert r.plan["fleet"] == single["fleet"], r.id


def test_scenarios_built_by_hand_give_the_same_numbers(ran):
    """Independent of solver.review.changes: edit the workload dict and the catalog directly."""
    _, results, _, _ = ran
    r = by_id(results)
    doubled = copy.deepcopy(BASE)
    doubled["services"][0]["demand"]["requests_per_s"] = 8
    assert r["double"].usd_per_hour == pytest.approx(plan(parse_workload(doubled)).total_price_usd_per_hour, abs=1e-6)
    cat = default_catalog()
    cheap = replace(cat, offers=tuple(o.with_price(o.price_usd_per_hour * 0.3) if o.gpu == "H100-SXM" else o
                                      for o in cat.offers))
    single = plan(parse_workload(copy.deepcopy(BASE)), PlanOptions(catalog=cheap))
    assert r["cheap-h100"].usd_per_hour == pytest.approx(single.total_price_usd_per_hour, abs=1e-6)
    assert r["cheap-h100"].gpus_by_type == {"H100-SXM": 1}


def test_failing_scenarios_are_recorded_and_the_rest_go_on(ran):
    _, results, _, out = ran
    r = by_id(results)
    assert r["broke"].status == "infeasible" and r["broke"].usd_per_hour is None
    assert r["broke"].reasons[0]["constraint"] == "budget" and "raise constraints.budget_usd_per_hour" in r["broke"].reasons[0]["fix"]
    bad = r["quota-on-a-removed-offer"]
    assert bad.status == "invalid"
    assert bad.reasons[0]["constraint"] == "constraints.offer_quotas.aws/g6e.xlarge"
    assert sum(x.status == "optimal" for x in results) == 10
    rows = list(csv.DictReader((out / "results.csv").open()))
    broke = next(row for row in rows if row["id"] == "broke")
    assert broke["status"] == "infeasible" and broke["usd_per_hour"] == "" and "budget" in broke["reason"]


def test_csv_has_one_row_per_scenario_with_gpus_by_type(ran):
    _, results, _, out = ran
    rows = {row["id"]: row for row in csv.DictReader((out / "results.csv").open())}
    assert list(rows) == EXPECTED_IDS
    for r in results:
        row = rows[r.id]
        assert row["status"] == r.status
        if r.planned:
            assert float(row["usd_per_hour"]) == pytest.approx(r.usd_per_hour)
            assert float(row["usd_per_month"]) == pytest.approx(r.usd_per_hour * 730, rel=1e-6)
            assert sum(int(row[k]) for k in row if k.startswith("gpus[")) == r.gpus == int(row["gpus"])
            assert row["optimality_gap"] == "0.0"


def test_diff_against_the_base_lists_instances_added_and_removed(ran):
    _, results, _, out = ran
    data = json.loads((out / "results.json").read_text())
    r = by_id(results)
    diff = next(d for d in data["diffs"] if d["id"] == "cheap-h100")
    before = {f["offer_id"]: f["instances"] for f in r["base"].fleet}
    after = {f["offer_id"]: f["instances"] for f in r["cheap-h100"].fleet}
    assert {o: n for o, n in diff["added"]} == {o: n - before.get(o, 0) for o, n in after.items() if n > before.get(o, 0)}
    assert {o: n for o, n in diff["removed"]} == {o: n - after.get(o, 0) for o, n in before.items() if n > after.get(o, 0)}
    assert diff["delta_usd_per_hour"] == pytest.approx(r["cheap-h100"].usd_per_hour - r["base"].usd_per_hour, abs=1e-6)
    assert diff["added"] and diff["removed"]


def test_sensitivity_finds_the_binding_quota_and_what_relaxing_it_saves(ran):
    review, results, _, out = ran
    rows = {s["constraint"]: s for s in json.loads((out / "results.json").read_text())["sensitivity"]}
    quota = rows["quota[L4]"]
    # Independently: the base with 8 L4 GPUs of quota (the largest L4 instance has 8).
    relaxed = copy.deepcopy(BASE)
    relaxed["constraints"]["gpu_quotas"]["L4"] = 8
    saving = by_id(results)["base"].usd_per_hour - plan(parse_workload(relaxed)).total_price_usd_per_hour
    assert saving > 0.01
    assert quota["binds"] and quota["delta_usd_per_hour"] == pytest.approx(-saving, abs=1e-6)
    assert quota["summary"].startswith(f"8 more L4 GPUs of quota (0 -> 8) saves ${saving:,.4f}/hour")
    assert not rows["slo[chat].ttft_ms"]["binds"] and rows["slo[chat].ttft_ms"]["delta_usd_per_hour"] == 0


# ---------------------------------------------------------------- resuming
def test_a_rerun_skips_finished_scenarios(ran, tmp_path):
    review, results, _, out = ran
    copy_dir = tmp_path / "again"
    shutil.copytree(out, copy_dir)
    mtimes = {p.name: p.stat().st_mtime_ns for p in (copy_dir / "scenarios").iterdir()}
    again = list(run_review(review, copy_dir, workers=2))
    assert all(r.resumed for r in again) and len(again) == len(results)
    assert {p.name: p.stat().st_mtime_ns for p in (copy_dir / "scenarios").iterdir()} == mtimes
    assert sorted(json.dumps(r.to_dict(), sort_keys=True) for r in again) == \
        sorted(json.dumps(r.to_dict(), sort_keys=True) for r in results)


def test_a_rerun_solves_only_missing_and_changed_scenarios(ran, tmp_path):
    _, results, _, out = ran
    copy_dir = tmp_path / "edited"
    shutil.copytree(out, copy_dir)
    (copy_dir / "scenarios" / "growth-1.json").unlink()
    edited = copy.deepcopy(REVIEW)
    edited["scenarios"][0]["changes"] = [{"demand": {"factor": 2.5}}]  # "double" now means x2.5
    review = parse_review(edited)
    again = by_id(run_review(review, copy_dir, workers=1))
    assert sorted(sid for sid, r in again.items() if not r.resumed) == ["double", "growth-1"]
    assert again["growth-1"].usd_per_hour == by_id(results)["growth-1"].usd_per_hour
    assert again["double"].value is None and again["double"].changes == [{"demand": {"factor": 2.5}}]


def test_cancelling_keeps_what_finished_and_a_rerun_resumes(tmp_path):
    review = parse_review({**copy.deepcopy(REVIEW), "scenarios": REVIEW["scenarios"][:2], "sweeps": [],
                           "sensitivity": {"enabled": False}})
    cancel = threading.Event()
    got = []
    for r in run_review(review, tmp_path, workers=1, cancel=cancel):
        got.append(r)
        cancel.set()
    assert len(got) == 1 and got[0].planned
    assert [p.stem for p in (tmp_path / "scenarios").glob("*.json")] == [got[0].id]
    rest = list(run_review(review, tmp_path, workers=1))
    assert [r.resumed for r in rest] == [True, False, False] and rest[0].id == got[0].id


def test_scenarios_that_solve_the_same_thing_are_solved_once(tmp_path, monkeypatch):
    from solver.review import runner

    quota = lambda gpus: {"gpu_quota": {"gpu": "H100-SXM", "gpus": gpus}}  # noqa: E731
    review = parse_review({"name": "twice", "base": {"workload": copy.deepcopy(BASE)}, "sensitivity": {"enabled": False},
                           "scenarios": [{"name": "quota 1", "changes": [quota(1)]},
                                         {"name": "quota 0 then 1", "changes": [quota(0), quota(1)]},
                                         {"name": "quota 0", "changes": [quota(0)]},
                                         {"name": "cheap", "changes": [{"price": {"gpu": "L40S", "factor": 0.5}}]},
                                         {"name": "cheap again", "changes": [{"price": {"gpu": "L40S", "factor": 0.5}}]},
                                         {"name": "cheap twice", "changes": [{"price": {"gpu": "L40S", "factor": 0.5}},
                                                                             {"price": {"gpu": "L40S", "factor": 0.5}}]}]})
    solved = []
    real = runner.make_backend

    class Recording:
        def __init__(self, inner):
            self.inner = inner

        def run(self, base, tasks, cancel=None):
            solved.extend(t.scenario.id for t in tasks)
            yield from self.inner.run(base, tasks, cancel)

    monkeypatch.setattr(runner, "make_backend", lambda name, workers: Recording(real(name, workers)))
    results = by_id(run_review(review, tmp_path, workers=2))
    assert sorted(solved) == ["base", "cheap", "cheap-twice", "quota-0", "quota-1"]
    assert sorted(results) == sorted(s.id for s in review.scenarios)
    for copied, solved_as in (("quota-0-then-1", "quota-1"), ("cheap-again", "cheap")):
        a, b = results[solved_as], results[copied]
        s = review.scenario(copied)
        assert (b.name, b.changes, b.fingerprint) == (s.name, s.changes_json(), review.fingerprint(s))
        assert b.plan == a.plan and b.usd_per_hour == a.usd_per_hour and b.status == a.status == "optimal"
        workload, catalog = apply_changes(review.workload, review.catalog, s.changes)
        single = plan(workload, PlanOptions(catalog=catalog)).to_dict()
        assert b.usd_per_hour == pytest.approx(single["total_price_usd_per_hour"], abs=1e-6)
        assert b.plan["fleet"] == single["fleet"]
    assert results["cheap-twice"].usd_per_hour != results["cheap"].usd_per_hour
    solved.clear()
    again = by_id(run_review(review, tmp_path, workers=1))  # each copy was stored under its own name
    assert solved == [] and all(r.resumed for r in again.values())
    assert again["quota-0-then-1"].plan == results["quota-0-then-1"].plan


# ---------------------------------------------------------------- the report
class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs, self.references = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.srcs.append(a["src"])
        for key in ("src", "href", "srcset", "data", "poster"):
            if a.get(key) and not a[key].startswith("data:"):
                self.references.append(a[key])  # anything a browser would load: a file or a URL


def test_html_is_self_contained_with_its_plots_embedded(ran, tmp_path):
    """The page alone, moved away from plots/, still shows every plot: no file or remote references."""
    _, _, _, out = ran
    alone = tmp_path / "report.html"
    shutil.copy(out / "report.html", alone)
    html = alone.read_text()
    parser = _Images()
    parser.feed(html)
    assert len(parser.srcs) == 4 and parser.references == []
    assert "plots/" not in html and "url(" not in html
    md = (out / "report.md").read_text()
    linked = sorted(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md))
    assert len(linked) == 4
    embedded = []
    for src in parser.srcs:
        head, payload = src.split(",", 1)
        assert head == "data:image/png;base64"
        data = base64.b64decode(payload, validate=True)
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
        embedded.append(data)
    # The same PNGs report.md links as files.
    assert sorted(embedded) == sorted((out / f).read_bytes() for f in linked)


def test_report_states_the_findings(ran):
    _, results, _, out = ran
    md = (out / "report.md").read_text()
    base = by_id(results)["base"]
    assert f"Base plan: ${base.usd_per_hour:,.4f}/hour" in md
    assert "8 more L4 GPUs of quota (0 -> 8) saves $" in md
    assert "| broke | infeasible |" in md and "above the budget" in md


def _chromium() -> str | None:
    for path in ("/usr/bin/chromium", "/usr/bin/chromium-browser", shutil.which("chromium") or ""):
        if path and os.access(path, os.X_OK):
            return path
    return None


def test_report_renders_in_headless_chromium(ran, tmp_path):
    binary = _chromium()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is required in CI (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium); CI runs this test")
    _, _, _, out = ran
    shot = tmp_path / "shot.png"
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,2000",
           (out / "report.html").resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1200)
    rgb = pixels[..., :3]
    non_white = (rgb.min(axis=2) < 0.9).mean()
    assert rgb.std() > 0.05 and 0.02 < non_white < 0.9  # text, tables and plots; neither blank nor solid


# ---------------------------------------------------------------- command line
def test_cli_resumes_a_review_and_writes_the_report(ran, tmp_path, capsys):
    """The CLI on the fixture's output: one scenario's result is removed, so it solves just that one."""
    _, _, _, out = ran
    path = tmp_path / "review.yaml"
    path.write_text(yaml.safe_dump(REVIEW))
    copy_dir = tmp_path / "out"
    shutil.copytree(out, copy_dir, ignore=shutil.ignore_patterns("report.*", "results.*", "plots"))
    (copy_dir / "scenarios" / "double.json").unlink()
    code = cli_main(["review", str(path), "--out", str(copy_dir), "--workers", "1", "--time-limit-per-scenario", "10"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "12 scenarios (1 infeasible, 1 invalid, 10 optimal)" in printed and "11 reused" in printed
    assert (copy_dir / "scenarios" / "double.json").exists()
    assert (copy_dir / "report.html").read_text().count("<img") == 4


def test_cli_bad_input_exits_2_without_traceback(tmp_path, capsys):
    path = tmp_path / "review.yaml"
    path.write_text("base:\n  workload:\n    services: []\n")
    assert cli_main(["review", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "review.base.workload.services" in err and "Traceback" not in err
    assert cli_main(["review", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "file not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli_main(["review", str(path), "--out", str(tmp_path / "o"), "--workers", "0"])
    assert exc.value.code == 2


def test_example_review_file_is_valid():
    review = load_review(Path(__file__).resolve().parent.parent / "examples" / "review-quarterly.yaml")
    groups = [s.group for s in review.scenarios]
    assert groups.count("scenario") == 10 and groups.count("sweep") == 19 and "sensitivity" in groups


def test_progress_bar_counts_scenarios_and_failures():
    import io

    from cli.review_cmd import ProgressBar
    from solver.review import ScenarioResult

    stream = io.StringIO()
    bar = ProgressBar(4, stream)
    bar.update(ScenarioResult("a", "a", "base", "optimal"))
    bar.update(ScenarioResult("b", "b", "scenario", "infeasible"))
    bar.finish()
    last = stream.getvalue().split("\r")[-1]
    assert "[" + "#" * 15 + "." * 15 + "] 2/4 scenarios  1 without a plan" in last and last.endswith("\n")
