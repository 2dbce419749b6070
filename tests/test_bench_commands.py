"""The benchmark commands the docs show are the benchmarks as they are (issue 25: docs that cannot go stale).

docs/benchmarks.md shows current figures, each with the command that measured it, and
`bench/run_all.sh` re-measures every one of them by name. Here:
* each command in benchmarks.md is one of run_all.sh's runs, character for character, each
  run is in benchmarks.md, and where the page names a run (`name`: `command`, the targets
  table's run column, the README's benchmark table) the name is that run's;
* every `bench/...` command in the README or docs/ (inline code, or a `$ ` line of a fenced
  block) names a script that exists, a subcommand that script has, and only the `--` flags
  its argparse parser for that subcommand defines. The flags are read from the scripts'
  `add_argument` calls rather than from `--help`, because a script without a parser would
  run the whole benchmark when handed `--help`. Single-dash flags (libFuzzer's `-runs=`)
  and flag values are not checked.

The figures themselves are not re-measured here (the runs take ~50 minutes and their timings
move with the machine); `bash bench/run_all.sh NAME` does that."""

from __future__ import annotations

import ast
import re
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
SCRIPT = r"\bbench/[\w./]+\.(?:py|sh)\b"
# Inline code that mentions a benchmark script; `PYTHONPATH=. ` in front is how the docs
# run them from a checkout, and run_all.sh exports it once.
SPAN = re.compile(r"`([^`\n]*" + SCRIPT + r"[^`\n]*)`")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _listed() -> list[tuple[str, str]]:
    out = subprocess.run(["bash", str(ROOT / "bench" / "run_all.sh"), "--list"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [tuple(line.split(None, 1)) for line in out.splitlines()]


LISTED = _listed()
RUNS = {name: command.strip() for name, command in LISTED}


def _bare(command: str) -> str:
    return command.removeprefix("PYTHONPATH=. ").strip()


def _spans(path: Path) -> list[str]:
    return [_bare(m.group(1)) for m in SPAN.finditer(path.read_text(encoding="utf-8"))]


def _fenced(path: Path) -> list[str]:
    """`$ ` command lines of fenced blocks that run a benchmark script (comments cut)."""
    commands, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
        elif inside and line.lstrip().startswith("$ ") and re.search(SCRIPT, line):
            commands.append(_bare(line.lstrip()[2:].split("  #")[0].split(" # ")[0]))
    return commands


@dataclass
class Parser:
    flags: set[str] = field(default_factory=set)  # the top-level parser's
    commands: dict[str, set[str]] = field(default_factory=dict)  # a subcommand's own flags


@lru_cache(maxsize=None)
def _parser_of(script: Path) -> Parser:
    """The options the script's argparse parsers define: a variable bound to
    `subparsers.add_parser(NAME)` holds NAME's flags, any other the top level's."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    sub_of: dict[str, str] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "attr", "") == "add_parser" and node.value.args
                and isinstance(node.value.args[0], ast.Constant) and isinstance(node.targets[0], ast.Name)):
            sub_of[node.targets[0].id] = node.value.args[0].value
    parser = Parser(commands={name: set() for name in sub_of.values()})
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            names = {a.value for a in node.args
                     if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")}
            owner = getattr(node.func.value, "id", None)
            (parser.commands[sub_of[owner]] if owner in sub_of else parser.flags).update(names)
    return parser


def _problems(command: str) -> list[str]:
    """What is wrong with the benchmark scripts one shown command runs."""
    problems = []
    for script_rel in re.findall(SCRIPT, command):
        script = ROOT / script_rel
        if not script.is_file():
            problems.append(f"{script_rel} does not exist")
            continue
        if script.suffix != ".py":
            continue
        # The words after this script's name, up to a pipe or the next command.
        tail = re.split(r"\||&&|;", command.split(script_rel, 1)[1])[0]
        words = tail.split()
        parser = _parser_of(script)
        allowed = set(parser.flags)
        if parser.commands:
            # The first word that is not a flag or a placeholder ("[--solves 100]", "<commit>");
            # none named: the doc speaks of the script as a whole, any subcommand's flags may appear.
            chosen = next((w for w in words if not w.startswith(("-", "[", "<"))), None)
            if chosen is not None and chosen not in parser.commands:
                problems.append(f"{script_rel} has no subcommand {chosen!r} (it has {sorted(parser.commands)})")
                continue
            allowed |= parser.commands[chosen] if chosen else set().union(*parser.commands.values())
        unknown = sorted(set(FLAG.findall(tail)) - allowed)
        if unknown:
            problems.append(f"{script_rel} has no option {unknown}")
    return problems


def test_run_all_lists_its_runs() -> None:
    names = [name for name, _ in LISTED]
    assert len(names) >= 20, LISTED
    assert len(set(names)) == len(names), f"run names twice: {sorted(n for n in names if names.count(n) > 1)}"
    for name, command in RUNS.items():
        assert re.fullmatch(r"[a-z0-9_]+", name), name
        assert "bench/" in command, (name, command)


BENCH_SPANS = sorted(set(_spans(BENCHMARKS)))


@pytest.mark.parametrize("command", BENCH_SPANS)
def test_every_benchmark_command_shown_is_a_run(command) -> None:
    # A span shows a run's command, or run_all.sh itself, or names a script without running it.
    if re.fullmatch(r"bench/[\w.]+", command) or command.startswith("bash bench/run_all.sh"):
        return
    assert command in RUNS.values(), (
        f"docs/benchmarks.md shows `{command}`, which bench/run_all.sh does not run: "
        "add it to run_all.sh's RUNS or show the command as it runs there")


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_run_has_its_figures_in_the_docs(name) -> None:
    text = BENCHMARKS.read_text(encoding="utf-8")
    assert f"`{name}`: `{RUNS[name]}`" in text or f"`{name}`: `PYTHONPATH=. {RUNS[name]}`" in text, (
        f"bench/run_all.sh's run {name} is not shown in docs/benchmarks.md as `{name}`: `{RUNS[name]}`")


def _named_runs() -> list[tuple[str, str]]:
    """(where, name) for every place the docs name a run."""
    named = []
    text = BENCHMARKS.read_text(encoding="utf-8")
    named += [("benchmarks.md: `name`: `command`", m.group(1)) for m in re.finditer(r"^`([a-z0-9_]+)`: `", text, re.M)]
    targets = text.split("\n## The targets\n", 1)[1].split("\n## ", 1)[0]
    for row in targets.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] != "issue" and not cells[0].startswith("---"):
            named += [("benchmarks.md targets table", n.strip()) for n in cells[3].split(",")]
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("\n## Benchmarks\n", 1)[1].split("\n## ", 1)[0]
    for row in readme.splitlines():
        if row.startswith("| ") and not row.startswith("| benchmark"):
            runs = re.search(r"\(((?:`[a-z0-9_]+`(?:, )?)+)\)\s*$", row.split("|")[1])  # "(`run`, `run`)"
            assert runs, f"README benchmark row without its runs in parentheses: {row[:80]}"
            named += [("README benchmark table", n) for n in re.findall(r"`([a-z0-9_]+)`", runs.group(1))]
    for path in DOCS:
        for command in _spans(path) + _fenced(path):
            m = re.match(r"bash bench/run_all\.sh((?: [a-z0-9_]+)*)$", command)
            if m:
                named += [(f"{path.name}: `{command}`", n) for n in m.group(1).split()]
    return named


def test_every_run_the_docs_name_exists() -> None:
    named = _named_runs()
    assert len(named) >= 2 * len(RUNS), named  # each run is named at least in its paragraph and the README
    unknown = [(where, name) for where, name in named if name not in RUNS]
    assert not unknown, f"bench/run_all.sh has no runs named {unknown} (bash bench/run_all.sh --list)"


def _all_commands() -> list[tuple[str, str]]:
    shown = [(path.name, c) for path in DOCS for c in _spans(path) + _fenced(path)]
    shown += [("bench/run_all.sh", c) for c in RUNS.values()]
    return sorted(set(shown))


@pytest.mark.parametrize("where,command", _all_commands())
def test_every_shown_benchmark_is_a_script_with_those_flags(where, command) -> None:
    problems = _problems(command)
    assert not problems, f"{where} shows `{command}`: {problems}"


@pytest.mark.parametrize("command,problem", [
    (".venv/bin/python bench/queueing_vs_sim.py --jobs 2", None),
    (".venv/bin/python bench/queueing_vs_sim.py --job 2", "no option ['--job']"),
    (".venv/bin/python bench/no_such_bench.py", "does not exist"),
    (".venv/bin/python bench/server_pool.py cancel --repeats 2", None),
    (".venv/bin/python bench/server_pool.py cancel --repeats 2 --solves 3", "no option ['--solves']"),
    (".venv/bin/python bench/server_pool.py cancle --repeats 2", "no subcommand 'cancle'"),
    (".venv/bin/python bench/load_grpc.py --clients 8 | tee out.txt --not-a-flag", None),
])
def test_what_a_shown_command_is_checked_for(command, problem) -> None:
    found = _problems(command)
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found
