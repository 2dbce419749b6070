"""The README's command table is the CLI as it is (issue 25: docs that cannot go stale).

Every subcommand the CLI has is in the table, and every flag a row names is one that
command's own `--help` lists - so a renamed or removed flag, or a new command, fails here
until the README moves with it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = str(Path(sys.executable).with_name("solver-cli"))


def _rows() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    return [line.split("`")[1] for line in table.splitlines() if line.startswith("| `solver-cli ")]


def _help(*words: str) -> str:
    done = subprocess.run([CLI, *words, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


ROWS = _rows()


def test_every_subcommand_is_in_the_table() -> None:
    listed = {row.split()[1] for row in ROWS}
    commands = re.search(r"\{([a-z,-]+)\}", _help()).group(1).split(",")
    assert set(commands) <= listed, f"not in the README's command table: {sorted(set(commands) - listed)}"


@pytest.mark.parametrize("row", ROWS, ids=[" ".join(r.split()[:3]) for r in ROWS])
def test_every_flag_a_row_names_is_the_commands_own(row) -> None:
    words = row.split()[1:]
    command = [words[0]] + ([words[1]] if words[0] == "workload" else [])  # workload's own subcommand
    shown = _help(*command)
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", row))
    assert flags, row
    missing = sorted(f for f in flags if not re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", shown))
    assert not missing, f"`solver-cli {' '.join(command)} --help` has no {missing}"


def test_a_renamed_flag_would_be_caught() -> None:
    shown = _help("export")
    assert re.search(r"(?<![\w-])--out(?![\w-])", shown)
    assert not re.search(r"(?<![\w-])--output-dir(?![\w-])", shown)
