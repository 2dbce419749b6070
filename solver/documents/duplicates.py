"""Duplicate keys in one object: an error, never last-wins.

JSON's and YAML's usual readers keep the last of two equal keys without a word, so a
workload that writes `slo` twice silently loses the first block (its TPOT bound, say).
Both readers here refuse it, naming the key and the lines of both copies.

JSON: the C parser calls `json_pairs_hook` once per object (a dict built and its length
compared: cheap); only when that finds a duplicate is the text read again to say where
(`locate_json_duplicate`: the C parser per member, Python only on the path down to it). YAML: `check_yaml_mapping`
compares the explicit keys of each mapping node of the composed graph, before any value
is built (a merge key `<<` is not a duplicate: overriding merged keys is what it is for).
"""

from __future__ import annotations

import json
import json.decoder
from dataclasses import dataclass

from solver.errors import InputError
from solver.documents.limits import short


class DuplicateKey(Exception):
    """Raised by the JSON hook: the key that appears twice in one object."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


@dataclass(frozen=True)
class Place:
    line: int  # 1-based
    column: int  # 1-based

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


def json_pairs_hook(pairs: list[tuple[str, object]]) -> dict:
    """object_pairs_hook for json.loads: the object, or DuplicateKey for its first repeated key."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return obj


def duplicate_error(what: str, key: str, second: Place | None, first: Place | None, kind: str) -> InputError:
    where = f" at {second} (first at {first})" if second and first else ""
    return InputError.single(
        what, f"the key {short(key, 60)!r} appears twice in one object{where}; {kind} readers keep only the last, "
        "which would silently drop the first.", f"keep one {short(key, 60)!r} there: merge the two into one")


# ---------------------------------------------------------------- JSON: where is it?
_WS = json.decoder.WHITESPACE.match


def _skip(s: str, i: int) -> int:
    return _WS(s, i).end()


def _place(text: str, offset: int) -> Place:
    line_start = text.rfind("\n", 0, offset) + 1
    return Place(text.count("\n", 0, offset) + 1, offset - line_start + 1)


def locate_json_duplicate(text: str) -> tuple[str, Place, Place] | None:
    """The repeated key with the places of both copies, or None when the scan cannot tell
    (the key the parser found is then reported without places).

    Each member of an object and element of a list is read by the C scanner with the
    duplicate hook; only one that raises is entered, so the Python work is one path from
    the top to the duplicate, and the whole costs about one C parse per level."""
    scan = json.JSONDecoder(object_pairs_hook=json_pairs_hook).scan_once
    try:
        found = _descend(text, _skip(text, 0), scan)
    except (RecursionError, ValueError, IndexError, StopIteration):
        return None
    if found is None:
        return None
    key, first, second = found
    return key, _place(text, first), _place(text, second)


def _descend(s: str, i: int, scan) -> tuple[str, int, int] | None:
    """In the object or list at s[i] (which holds a duplicate somewhere): (key, offset of its
    first copy, offset of the second)."""
    if s[i] not in "{[":
        return None
    closing, is_object = ("}", True) if s[i] == "{" else ("]", False)
    starts: dict[str, int] = {}
    i = _skip(s, i + 1)
    while s[i] != closing:
        if is_object:
            key, after_key = json.decoder.scanstring(s, i + 1, True)
            if key in starts:
                return key, starts[key], i
            starts[key] = i
            i = _skip(s, _skip(s, after_key) + 1)  # past the colon
        try:
            _, i = scan(s, i)
        except DuplicateKey:
            return _descend(s, i, scan)
        i = _skip(s, i)
        if s[i] == ",":
            i = _skip(s, i + 1)
    return None


# ---------------------------------------------------------------- YAML
_MERGE_TAG = "tag:yaml.org,2002:merge"


def check_yaml_mapping(node, what: str) -> None:
    """Refuse a mapping node whose explicit keys repeat (same tag and text)."""
    seen: dict[tuple[str, object], object] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue
        value = key_node.value
        ident = (key_node.tag, value if isinstance(value, str) else id(key_node))
        first = seen.get(ident)
        if first is not None:
            raise duplicate_error(what, str(value), _yaml_place(key_node), _yaml_place(first), "YAML")
        seen[ident] = key_node


def _yaml_place(node) -> Place:
    mark = node.start_mark
    return Place(mark.line + 1, mark.column + 1)
