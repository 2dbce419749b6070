"""The benchmark commands the docs show are the benchmarks as they are (issue 25: docs that cannot go stale).

docs/benchmarks.md shows current figures, each with the command that measured it, and
`bench/run_all.sh` re-measures every one of them by name. Here: each command in
benchmarks.md is one of run_all.sh's runs, character for character, and each run is in
benchmarks.md; and every `bench/...` command anywhere in the README or docs/ names a script
that exists and only flags that script's parser defines. The flags are read from the
scripts' `add_argument` calls rather than from `--help`, because a script without a parser
would run the whole benchmark when handed `--help`.

The figures themselves are not re-measured here (the runs take ~90 minutes and their timings
move with the machine); `bash bench/run_all.sh NAME` does that."""

from __future__ import annotations

import ast
import re
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A code span that runs a benchmark script; `PYTHONPATH=. ` in front is how the docs run them
# from a checkout, and run_all.sh exports it once.
SPAN = re.compile(r"`([^`\n]*\bbench/[\w.]+\.(?:py|sh)\b[^`\n]*)`")


def _runs() -> dict[str, str]:
    listed = subprocess.run(["bash", str(ROOT / "bench" / "run_all.sh"), "--list"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    runs = {}
    for line in listed.splitlines():
        name, command = line.split(None, 1)
        runs[name] = command.strip()
    return runs


def _spans(path: Path) -> list[str]:
    return [m.group(1).strip() for m in SPAN.finditer(path.read_text(encoding="utf-8"))]


def _bare(command: str) -> str:
    return command.removeprefix("PYTHONPATH=. ").strip()


@lru_cache(maxsize=None)
def _flags_of(script: Path) -> frozenset[str]:
    """Every option string the script's argparse parsers (subparsers included) define."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    flags = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {a.value for a in node.args
                      if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")}
    return frozenset(flags)


RUNS = _runs()
BENCH_SPANS = sorted({_bare(s) for s in _spans(ROOT / "docs" / "benchmarks.md")})


def test_run_all_lists_its_runs() -> None:
    assert len(RUNS) >= 20, RUNS
    for name, command in RUNS.items():
        assert re.fullmatch(r"[a-z0-9_]+", name), name
        assert "bench/" in command, (name, command)


@pytest.mark.parametrize("command", BENCH_SPANS)
def test_every_benchmark_command_shown_is_a_run(command) -> None:
    # A span may show a run's command, run_all.sh itself (with run names or --list), or name
    # a script without running it.
    if re.fullmatch(r"bench/[\w.]+", command):
        return
    named = re.fullmatch(r"bash bench/run_all\.sh( --list|(?: [a-z0-9_]+)*)", command)
    if named:
        unknown = [n for n in named.group(1).split() if n not in RUNS and n != "--list"]
        assert not unknown, f"bench/run_all.sh has no run named {unknown}"
        return
    assert command in RUNS.values(), (
        f"docs/benchmarks.md shows `{command}`, which bench/run_all.sh does not run: "
        "add it to run_all.sh's RUNS or show the command as it runs there")


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_run_has_its_figures_in_the_docs(name) -> None:
    assert RUNS[name] in BENCH_SPANS, (
        f"bench/run_all.sh's run {name} (`{RUNS[name]}`) is not shown in docs/benchmarks.md")


def _all_commands() -> list[tuple[str, str]]:
    shown = [(path.name, _bare(s)) for path in DOCS for s in _spans(path)]
    shown += [("bench/run_all.sh", c) for c in RUNS.values()]
    return sorted(set(shown))


@pytest.mark.parametrize("where,command", _all_commands())
def test_every_shown_benchmark_is_a_script_with_those_flags(where, command) -> None:
    for script_rel in re.findall(r"\bbench/[\w.]+\.(?:py|sh)\b", command):
        script = ROOT / script_rel
        assert script.is_file(), f"{where} shows `{command}`: {script_rel} does not exist"
        if script.suffix != ".py":
            continue
        # The flags after this script's name, up to a pipe or the next command.
        tail = command.split(script_rel, 1)[1].split("|")[0].split("&&")[0]
        used = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", tail))
        unknown = sorted(used - _flags_of(script))
        assert not unknown, f"{where} shows `{command}`: {script_rel} has no option {unknown}"


def test_a_wrong_flag_would_be_caught() -> None:
    flags = _flags_of(ROOT / "bench" / "queueing_vs_sim.py")
    assert "--jobs" in flags and "--quick" in flags
    assert "--job" not in flags
