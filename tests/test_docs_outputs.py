"""Docs that cannot go stale (issue 25): every output block annotated in README.md and
docs/*.md is what its command prints now (scripts/docs_outputs.py: wall times masked,
`(trimmed)` blocks line by line in order). A change that moves a figure fails here until
`python scripts/docs_outputs.py --write` (or a hand edit of a trimmed block) moves the docs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docs_outputs", ROOT / "scripts" / "docs_outputs.py")
docs_outputs = importlib.util.module_from_spec(_spec)
sys.modules["docs_outputs"] = docs_outputs  # its dataclasses look their module up
_spec.loader.exec_module(docs_outputs)

BLOCKS = [b for path in docs_outputs.documents() for b in docs_outputs.blocks(path)]


def test_the_readme_shows_command_outputs_that_are_checked() -> None:
    assert any(b.path.name == "README.md" and not b.trimmed for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_shown_output_is_what_the_command_prints(block) -> None:
    why = docs_outputs.check(block)
    assert not why, f"{block.name} is stale: {why}\nTo fix: python scripts/docs_outputs.py --write"


def test_a_moved_figure_is_caught() -> None:
    block = next(b for b in BLOCKS if not b.trimmed)
    _, lines = docs_outputs.shown(block)
    changed = [line.replace("$", "$1", 1) if "$" in line else line for line in lines]
    assert changed != lines
    assert docs_outputs.difference(block, changed)
    assert not docs_outputs.difference(block, lines)


def test_the_review_example_is_what_the_review_gives_now() -> None:
    """docs/review-example is a rendered review (38 scenarios, ~20 s): its base plan is
    re-solved here (~3 s) and must cost what the shipped results say, and the README's
    sensitivity sentence must be the report's. (The shipped example once showed $13.43/hour
    for a base that costs $18.32 since the percentile defaults changed.)"""
    import csv
    import re

    import yaml

    from solver.plan import plan
    from solver.workload.documents import parse_workload

    review = yaml.safe_load((ROOT / "examples" / "review-quarterly.yaml").read_text())
    shipped = {r["id"]: r for r in csv.DictReader((ROOT / "docs" / "review-example" / "results.csv").open())}
    result = plan(parse_workload(review["base"]["workload"]))
    fix = "regenerate: solver-cli review examples/review-quarterly.yaml --out docs/review-example"
    assert f"{result.total_price_usd_per_hour:.5f}" == f"{float(shipped['base']['usd_per_hour']):.5f}", fix
    saved = re.search(r"1 more GH200 GPU of quota saves \$(\d+\.\d+)/hour", (ROOT / "README.md").read_text())
    report = (ROOT / "docs" / "review-example" / "report.md").read_text()
    assert saved and f"1 more GH200 GPU of quota (2 -> 3) saves ${float(saved.group(1)):.4f}/hour" in report, fix


FILE_BLOCKS = [b for b in BLOCKS if b.file is not None]


def test_exported_files_shown_in_the_docs_are_checked() -> None:
    """docs/export.md shows files the export writes; each is a checked block (a stale one
    showed `max batch 320` and no engine-release lines long after the export changed)."""
    shown = {(b.path.name, b.file) for b in FILE_BLOCKS}
    assert ("export.md", "$OUT/chat-lambda-gh200-x1-fp8.yaml") in shown
    assert ("export.md", "$OUT/llama-405b-aws-h100-sxm-x16-fp16.yaml") in shown
    assert ("export.md", "$OUT/sites/dc-east.yaml") in shown


def test_a_changed_line_of_a_shown_file_is_caught() -> None:
    for block in (next(b for b in FILE_BLOCKS if not b.trimmed), next(b for b in FILE_BLOCKS if b.trimmed)):
        written = docs_outputs.produced(block)
        assert not docs_outputs.difference(block, written)
        line = next(i for i, x in enumerate(written) if x.strip() and not docs_outputs._left_out(x)
                    and x in docs_outputs.shown(block)[1])
        moved = written[:line] + [written[line] + " # moved"] + written[line + 1:]
        assert docs_outputs.difference(block, moved), block.name


def test_a_file_the_command_did_not_write_is_reported(tmp_path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- file: $OUT/none.yaml from: true -->\n```yaml\na: 1\n```\n", encoding="utf-8")
    (block,) = docs_outputs.blocks(doc)
    assert docs_outputs.produced(block) == ["(no file $OUT/none.yaml: the command printed )"]
    assert docs_outputs.difference(block, docs_outputs.produced(block))


def test_each_command_has_its_own_out_directory() -> None:
    a = docs_outputs._run_once("echo $OUT")
    b = docs_outputs._run_once("echo $OUT; true")
    assert a[0] == (a[1],) and b[0] == (b[1],) and a[1] != b[1]
    assert docs_outputs._run_once("echo $OUT") == a  # one run per command


@pytest.mark.parametrize("line, gap", [("...", True), ("    ...", True), ("  # ... chat on GPUs 5-7 ...", True),
                                       ("  # ... chat on GPUs 5-7", False), ("# a comment", False)])
def test_marks_for_left_out_lines(line, gap) -> None:
    assert docs_outputs._left_out(line) is gap


@pytest.mark.parametrize("annotation", ["<!-- file: /etc/passwd from: true -->", "<!-- output true -->"])
def test_an_unreadable_annotation_is_an_error(tmp_path, annotation) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"{annotation}\n```\nx\n```\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        docs_outputs.blocks(doc)


def test_a_transcript_of_several_commands_is_checked_line_by_line(tmp_path) -> None:
    """`$ ` lines between outputs are the commands as typed (never compared); every other line is."""
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- output: echo one; echo two -->\n```\n$ first\none\n$ second\ntwo\n```\n", encoding="utf-8")
    (block,) = docs_outputs.blocks(doc)
    assert docs_outputs._interleaved(block)
    assert not docs_outputs.difference(block, docs_outputs.produced(block))
    assert docs_outputs.difference(block, ["one", "three"])


@pytest.mark.parametrize("name, code", [("too-big.json", 3), ("names.json", 2), ("twice.yaml", 2), ("quoted.yaml", 2)])
def test_the_shown_refusals_exit_as_the_docs_say(name, code) -> None:
    """README and docs/input-limits.md show these refusals; the README promises exit 3 for no
    feasible fleet and 2 for bad input."""
    import subprocess

    cli = Path(sys.executable).with_name("solver-cli")
    done = subprocess.run([str(cli), "solve", str(ROOT / "examples" / "errors" / name)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("annotation, ok", [("output", False), ("output (exit 3)", True), ("output (trimmed)", False),
                                            ("output (trimmed) (exit 3)", True), ("output (exit 2)", False)])
def test_the_exit_status_is_part_of_what_is_shown(tmp_path, annotation, ok) -> None:
    """A command that fails does not pass on the lines it printed first: it must exit 0, or
    as the annotation says (a shown refusal)."""
    doc = tmp_path / "doc.md"
    doc.write_text(f"<!-- {annotation}: echo shown; exit 3 -->\n```\nshown\n```\n", encoding="utf-8")
    (block,) = docs_outputs.blocks(doc)
    assert not docs_outputs.difference(block, docs_outputs.produced(block))  # the lines alone agree
    assert (docs_outputs.check(block) == "") is ok


def test_a_command_past_its_time_is_killed_with_what_it_started(tmp_path, monkeypatch) -> None:
    import subprocess

    monkeypatch.setattr(docs_outputs, "TIMEOUT_S", 1)
    marker = "7.3129"  # a sleep of its own, to find it afterwards
    lines, _, status = docs_outputs._run_once(f"sleep {marker} & wait; echo never")
    assert status != 0 and "never" not in lines and lines[-1].startswith("(killed after")
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert left.stdout.strip() == "", "the command's children outlived the timeout"


@pytest.mark.parametrize("body", ["...", "", "# ... all of it ..."])
def test_a_trimmed_block_must_show_something(tmp_path, body) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"<!-- output (trimmed): echo anything -->\n```\n{body}\n```\n", encoding="utf-8")
    (block,) = docs_outputs.blocks(doc)
    assert docs_outputs.check(block)


def test_a_shown_file_stays_inside_the_commands_directory(tmp_path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- file: $OUT/../../etc/hostname from: true -->\n```\nx\n```\n", encoding="utf-8")
    (block,) = docs_outputs.blocks(doc)
    assert "outside" in docs_outputs.produced(block)[0]
