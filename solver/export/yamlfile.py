"""YAML documents with a comment header, keys in the order written, multi-line strings as blocks.

Comments quote names from the plan (models, offers, regions): their control characters are
escaped (solver/output/safe_text.py), since YAML rejects them even in a comment. Values need
no such care: PyYAML double-quotes and escapes what is not printable.
"""

from __future__ import annotations

import textwrap

import yaml

from solver.output.safe_text import escape_line

WIDTH = 110


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


class FlowList(list):
    """A short list written on one line (`[0, 1]`), where a block list would take a line per item."""


_Dumper.add_representer(FlowList, lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", value,
                                                                                  flow_style=True))


def document(data: dict, comments: list[str]) -> str:
    head = "".join(f"# {part}\n" for line in comments for part in _wrap(escape_line(line)))
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=WIDTH, allow_unicode=True)
    return head + body


def documents(objs: list[dict], comments: list[str]) -> str:
    """Several YAML documents in one file (`---` between them), the comments at the top."""
    return "---\n".join(document(obj, comments if i == 0 else []) for i, obj in enumerate(objs))


def _wrap(line: str) -> list[str]:
    """Prose wraps; an indented line is a command to copy and stays whole."""
    if line.startswith("  "):
        return [line]
    return textwrap.wrap(line, WIDTH - 2, break_on_hyphens=False) or [""]
