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

A file the command writes (an export) is shown the same way:

    <!-- file (trimmed): $OUT/chat-lambda-gh200-x1-fp8.yaml from: solver-cli solve examples/llm-platform.json --quiet --export skypilot --export-out $OUT -->

Commands run in bash from the repository root (`$ROOT`), `solver-cli` being the installed
one, with `$OUT` a fresh temporary directory per command (so `A > $OUT/plan.json && B
$OUT/plan.json` works, or `cd $OUT && ...` for relative paths as a reader would see them);
blocks with the same command share one run of it within a process. A block's leading `$ `
lines, and `$ ` lines between its output lines (a transcript of several commands), are the
commands as the reader types them: never compared (the annotation's command is what runs),
and a block with such lines between its outputs is edited by hand, not by --write. In a trimmed
block a line that is `...`, or a comment `# ... what is left out ...`, stands for left-out
lines, indented or not. A command must exit 0 unless the annotation says otherwise,
`<!-- output (exit 3): ... -->` or `<!-- file (trimmed) (exit 2): ... -->` (a shown refusal).

    python scripts/docs_outputs.py            # check every annotated block (exit 1 on a difference)
    python scripts/docs_outputs.py --write    # rewrite the full (not trimmed) blocks from fresh runs
    python scripts/docs_outputs.py --list     # the annotated blocks, one per line

Volatile figures (wall times) are masked on both sides before comparing (`MASKS`), so the
blocks keep the figures of the run that wrote them while prices, fleets and plans must match.
tests/test_docs_outputs.py runs the check for every block.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ANNOTATION = re.compile(r"^<!-- output(?P<trimmed> \(trimmed\))?(?: \(exit (?P<exit>\d{1,3})\))?: (?P<cmd>.+?) -->\s*$")
FILE_ANNOTATION = re.compile(
    r"^<!-- file(?P<trimmed> \(trimmed\))?(?: \(exit (?P<exit>\d{1,3})\))?: (?P<file>\S+) from: (?P<cmd>.+?) -->\s*$")
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
    file: str | None = None  # a file the command writes ($OUT/...), shown instead of its output
    exit: int = 0  # the exit status the docs promise (`(exit N)` in the annotation)

    @property
    def name(self) -> str:
        shows = f"{self.file} from: " if self.file else ""
        return f"{self.path.relative_to(ROOT)}:{self.start}: {shows}{self.cmd}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8").split("\n")
    out = []
    for i, line in enumerate(text):
        m = ANNOTATION.match(line) or FILE_ANNOTATION.match(line)
        if not m:
            if line.startswith("<!-- output") or line.startswith("<!-- file"):
                raise SystemExit(f"{path}:{i + 1}: an annotation this script cannot read: {line!r}")
            continue
        shows = m.groupdict().get("file")
        if shows is not None and not shows.startswith("$OUT/"):
            raise SystemExit(f"{path}:{i + 1}: a shown file must be under $OUT/ (the command's own directory)")
        if i + 1 >= len(text) or not text[i + 1].startswith("```"):
            raise SystemExit(f"{path}:{i + 1}: an output annotation must sit right above a fenced block")
        end = next((j for j in range(i + 2, len(text)) if text[j].startswith("```")), None)
        if end is None:
            raise SystemExit(f"{path}:{i + 2}: the fenced block never closes")
        out.append(Block(path, m["cmd"], bool(m["trimmed"]), i + 2, end, text[i + 2:end], shows,
                         int(m["exit"]) if m["exit"] else 0))
    return out


_OUT_DIRS: list[tempfile.TemporaryDirectory] = []  # removed when the process exits


@functools.lru_cache(maxsize=None)
def _run_once(cmd: str) -> tuple[tuple[str, ...], str, int]:
    """(the command's output lines, its $OUT directory, its exit status): one run per command
    and process. Past TIMEOUT_S the whole process group is killed (bash and what it started)."""
    out = tempfile.TemporaryDirectory(prefix="docs-outputs-")
    _OUT_DIRS.append(out)
    # The installed solver-cli first on PATH (this interpreter's environment, as the tests run it).
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = dict(os.environ, COLUMNS="400", NO_COLOR="1", OUT=out.name, PATH=path, ROOT=str(ROOT))
    proc = subprocess.Popen(["bash", "-c", cmd], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        stderr += f"\n(killed after {TIMEOUT_S} s)"
    lines = (stdout + stderr).rstrip("\n").split("\n")
    return tuple(line.rstrip() for line in lines), out.name, proc.returncode


def run(cmd: str) -> list[str]:
    """The command's output lines (stdout then stderr), right-stripped."""
    return list(_run_once(cmd)[0])


def check(block: Block) -> str:
    """'' when the block shows what its command gives now and the command exits as the
    annotation says (0 unless `(exit N)`), else what differs."""
    _, _, status = _run_once(block.cmd)
    if status != block.exit:
        return (f"the command exited {status}, the annotation expects {block.exit} "
                f"(write `(exit {status})` after the kind if the docs show that): {' / '.join(run(block.cmd)[-3:])}")
    return difference(block, produced(block))


def produced(block: Block) -> list[str]:
    """What the block shows when it is right: the command's output, or the file it wrote
    (right-stripped lines; a file the command did not write reads as one line saying so)."""
    if block.file is None:
        return run(block.cmd)
    lines, out, _ = _run_once(block.cmd)
    path = (Path(out) / block.file[len("$OUT/"):]).resolve()
    if not path.is_relative_to(Path(out).resolve()):
        return [f"(the shown file {block.file} is outside the command's $OUT)"]
    if not path.is_file():
        return [f"(no file {block.file}: the command printed {' / '.join(lines[-3:])})"]
    return [line.rstrip() for line in path.read_text(encoding="utf-8").rstrip("\n").split("\n")]


def masked(line: str) -> str:
    for pattern, replacement in MASKS:
        line = pattern.sub(replacement, line)
    return line.rstrip()


def shown(block: Block) -> tuple[list[str], list[str]]:
    """(the block's leading `$ command` lines, the lines after them)."""
    n = next((i for i, line in enumerate(block.lines) if not line.startswith("$ ")), len(block.lines))
    return block.lines[:n], block.lines[n:]


def _interleaved(block: Block) -> bool:
    """Whether `$ command` lines sit between output lines (a transcript of several commands)."""
    return any(line.startswith("$ ") for line in shown(block)[1])


def _left_out(line: str) -> bool:
    """A trimmed block's mark for lines left out: `...`, or a comment `# ... text ...`."""
    mark = line.strip()
    return mark == "..." or (mark.startswith("# ...") and mark.endswith("..."))


def difference(block: Block, output: list[str]) -> str:
    """'' when the block shows what the command prints, else what differs."""
    _, lines = shown(block)
    got = [masked(x) for x in output]
    # `$ command` lines are the commands as the reader types them, never output
    want = [masked(x) for x in lines if not x.startswith("$ ")]
    if block.trimmed:
        if all(_left_out(line) for line in want):
            return "a trimmed block that shows no line to compare"
        at = 0
        for line in want:
            if _left_out(line):
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
            output = produced(b)
            why = check(b)
            if why and args.write and not b.trimmed and not _interleaved(b):
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
