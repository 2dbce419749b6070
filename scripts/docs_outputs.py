"""Shown outputs in README.md and docs/*.md that come from a command: checked or rewritten.

A fenced block preceded by an annotation is the output of that command, run from the
repository root with the installed `solver-cli`:

    <!-- output: solver-cli solve examples/llm-platform.json --explain -->
    ```
    ...
    ```

`<!-- output (trimmed): CMD -->` marks a block that shows only some lines: each shown line
(other than `...`) must appear in the output, in order. A first line `$ CMD` in the block is
the command as shown to the reader, kept as it is.

    python scripts/docs_outputs.py            # check every annotated block (exit 1 on a difference)
    python scripts/docs_outputs.py --write    # rewrite the full (not trimmed) blocks from fresh runs
    python scripts/docs_outputs.py --list     # the annotated blocks, one per line

Volatile figures (wall times) are masked on both sides before comparing (`MASKS`), so the
blocks keep the figures of the run that wrote them while prices, fleets and plans must match.
tests/test_docs_outputs.py runs the check for every block.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANNOTATION = re.compile(r"^<!-- output(?P<trimmed> \(trimmed\))?: (?P<cmd>.+?) -->\s*$")
# Wall-clock figures: they move with the machine, never with the plan.
MASKS = [
    (re.compile(r"\d+(\.\d+)? s solve / \d+(\.\d+)? s total"), "<t> s solve / <t> s total"),
]
TIMEOUT_S = 600


@dataclass
class Block:
    path: Path
    cmd: str
    trimmed: bool
    start: int  # index of the first line inside the fence
    end: int  # index of the closing fence
    lines: list[str]

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.start}: {self.cmd}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8").split("\n")
    out = []
    for i, line in enumerate(text):
        m = ANNOTATION.match(line)
        if not m:
            continue
        if i + 1 >= len(text) or not text[i + 1].startswith("```"):
            raise SystemExit(f"{path}:{i + 1}: an output annotation must sit right above a fenced block")
        end = next((j for j in range(i + 2, len(text)) if text[j].startswith("```")), None)
        if end is None:
            raise SystemExit(f"{path}:{i + 2}: the fenced block never closes")
        out.append(Block(path, m["cmd"], bool(m["trimmed"]), i + 2, end, text[i + 2:end]))
    return out


def run(cmd: str) -> list[str]:
    """The command's output lines (stdout then stderr), right-stripped."""
    argv = shlex.split(cmd)
    if argv[0] == "solver-cli":
        argv[0] = str(Path(sys.executable).with_name("solver-cli"))
    env = dict(os.environ, COLUMNS="400", NO_COLOR="1")
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    lines = (done.stdout + done.stderr).rstrip("\n").split("\n")
    return [line.rstrip() for line in lines]


def masked(line: str) -> str:
    for pattern, replacement in MASKS:
        line = pattern.sub(replacement, line)
    return line.rstrip()


def shown(block: Block) -> tuple[list[str], list[str]]:
    """(the block's `$ command` lines, its output lines)."""
    head = [line for line in block.lines[:1] if line.startswith("$ ")]
    return head, block.lines[len(head):]


def difference(block: Block, output: list[str]) -> str:
    """'' when the block shows what the command prints, else what differs."""
    _, lines = shown(block)
    got = [masked(x) for x in output]
    want = [masked(x) for x in lines]
    if block.trimmed:
        at = 0
        for line in want:
            if line == "...":
                continue
            while at < len(got) and got[at] != line:
                at += 1
            if at == len(got):
                return f"shown line not in the output (in order): {line!r}"
            at += 1
        return ""
    if got == want:
        return ""
    for i, (a, b) in enumerate(zip(want, got)):
        if a != b:
            return f"line {i + 1} differs:\n  shown: {a!r}\n  run:   {b!r}"
    return f"the output has {len(got)} lines, the block {len(want)}"


def write(path: Path, fresh: dict[int, list[str]]) -> None:
    text = path.read_text(encoding="utf-8").split("\n")
    for b in sorted((b for b in blocks(path) if b.start in fresh), key=lambda b: -b.start):
        head, _ = shown(b)
        text[b.start:b.end] = head + fresh[b.start]
    path.write_text("\n".join(text), encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="rewrite full blocks from fresh runs")
    ap.add_argument("--list", action="store_true", help="list the annotated blocks")
    ap.add_argument("--only", help="only blocks whose command contains this text")
    args = ap.parse_args()
    failed = 0
    for path in documents():
        todo = [b for b in blocks(path) if not args.only or args.only in b.cmd]
        if args.list:
            for b in todo:
                print(b.name + (" (trimmed)" if b.trimmed else ""))
            continue
        fresh = {}
        for b in todo:
            output = run(b.cmd)
            why = difference(b, output)
            if why and args.write and not b.trimmed:
                fresh[b.start] = output
                print(f"rewrote {b.name}")
            elif why:
                failed += 1
                print(f"STALE {b.name}\n{why}")
            else:
                print(f"ok {b.name}")
        if fresh:
            write(path, fresh)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
