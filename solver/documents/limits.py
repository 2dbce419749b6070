"""Input limits: what any workload, catalog or review document may hold, checked before
any expensive work (validation, solving).

A document is bounded three ways, cheapest first:
1. its size in bytes, before it is parsed (`check_size`);
2. for YAML, its composed node graph, before any Python value is built
   (`check_yaml_graph`): nesting depth, repeated keys (solver/documents/duplicates.py),
   and the number of values with every alias expanded. Aliases are allowed (shared SLO or profile blocks are real use), but a
   document with aliases may expand to no more values than one written out in full,
   so a 666-byte "billion laughs" is rejected in milliseconds;
3. its parsed values (`check_values`): nesting depth, number of values, value types
   (only what JSON has), string lengths and encodability, and number ranges. Shared
   (aliased) containers are checked once, never once per path through the aliases.

Every limit is far above what a real document needs (a 5000-service workload, the
schema's maximum, is about 1 MiB of JSON, 150,000 values and 8 levels deep).
"""

from __future__ import annotations

import math
from typing import Any

from solver.errors import InputError

MIB = 1024 * 1024
# JSON: the gRPC service's receive limit. YAML parses about ten times slower than JSON
# (libyaml plus Python construction), so its bound is lower; large generated documents
# are JSON anyway.
MAX_JSON_BYTES = 16 * MIB
MAX_YAML_BYTES = 2 * MIB
MAX_DEPTH = 64  # nested objects/lists; the workload schema uses 6, a review with an inline base 9
MAX_VALUES = 1_000_000  # every object, list, key, string, number, boolean and null, aliases expanded
MAX_STRING_CHARS = 10_000  # any one string or key (names are limited further by the schema)
# Integers and floats alike: far beyond any count, rate, price or latency, and small
# enough that products and ratios of two inputs stay finite in double precision.
MAX_ABS_NUMBER = 1e18
MAX_NUMBER_CHARS = 40  # a YAML integer literal (hex, octal, base 60): longer ones are refused unparsed

def short(text: str, limit: int = 120) -> str:
    """A value for an error message: never echo a megabyte back."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def check_size(n_bytes: int, what: str, yaml: bool) -> None:
    limit = MAX_YAML_BYTES if yaml else MAX_JSON_BYTES
    if n_bytes > limit:
        kind = "YAML" if yaml else "JSON"
        fix = ("convert it to JSON (up to 16 MiB), or split it" if yaml else "split it into smaller documents")
        raise InputError.single(what, f"the {kind} document is {n_bytes:,} bytes, more than the limit of "
                                f"{limit:,} bytes.", fix)


def too_deep(what: str) -> InputError:
    return InputError.single(what, f"the document nests objects/lists more than {MAX_DEPTH} levels deep.",
                             "flatten it: a workload needs fewer than 10 levels")


def _too_many(what: str, aliases: bool) -> InputError:
    how = " once its YAML aliases are expanded" if aliases else ""
    return InputError.single(what, f"the document holds more than {MAX_VALUES:,} values{how}.",
                             "shrink it, or split it; YAML aliases (*name) count once per use")


def check_yaml_graph(root, what: str) -> None:
    """Bound a composed YAML node graph (yaml.nodes) before constructing it: depth, and
    the expanded value count, each node's count computed once (memoised by identity)."""
    from yaml.nodes import MappingNode, SequenceNode

    from solver.documents.duplicates import check_yaml_mapping

    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    has_alias = False
    # Iterative post-order walk: a child's size is known before its parent's.
    stack: list[tuple[Any, bool, int]] = [(root, False, 1)]
    on_path: set[int] = set()
    while stack:
        node, children_done, level = stack.pop()
        key = id(node)
        if not children_done:
            if key in sizes:
                has_alias = True  # reached again: an alias (or a merge) to a node built earlier
                continue
            if level > MAX_DEPTH:
                raise too_deep(what)
            if key in on_path:  # a recursive alias cannot be built into a value
                raise InputError.single(what, "a YAML alias refers to the node that contains it.",
                                        "remove the recursive alias")
            children = _children(node, MappingNode, SequenceNode)
            if isinstance(node, MappingNode):
                check_yaml_mapping(node, what)  # once per node, like the sizes: aliases add nothing
            if not children:
                sizes[key], depths[key] = 1, 1
                continue
            on_path.add(key)
            stack.append((node, True, level))
            stack.extend((child, False, level + 1) for child in children)
        else:
            on_path.discard(key)
            children = _children(node, MappingNode, SequenceNode)
            size = 1 + sum(sizes[id(c)] for c in children)
            depth = 1 + max(depths[id(c)] for c in children)
            if size > MAX_VALUES:
                raise _too_many(what, has_alias)
            if level - 1 + depth > MAX_DEPTH:
                raise too_deep(what)
            sizes[key], depths[key] = size, depth


def _children(node, mapping_cls, sequence_cls) -> list:
    if isinstance(node, mapping_cls):
        return [n for pair in node.value for n in pair]
    if isinstance(node, sequence_cls):
        return list(node.value)
    return []


def check_values(data: Any, what: str) -> None:
    """Bound parsed values: depth, count, types, strings and numbers, in document order
    (the first problem is reported). Each container is visited once even when YAML
    aliases share it, so the cost is that of the text, not of its expansion.

    Paths are built only for an error: each level links to its parent's."""
    seen: set[int] = set()
    count = 0
    # One entry per open container: (iterator over (key or index, value), whether a dict, path link).
    # A path link is (parent link, key or index), or None at the top.
    stack: list[tuple[Any, bool, Any]] = [(iter({what: data}.items()), True, None)]
    while stack:
        items, is_dict, link = stack[-1]
        entry = next(items, None)
        if entry is None:
            stack.pop()
            continue
        key, value = entry
        count += 2 if is_dict else 1  # a key counts as a value, as in the YAML node graph
        if count > MAX_VALUES:
            raise _too_many(what, aliases=False)
        if is_dict:
            if not isinstance(key, str):
                raise InputError.single(_path(link, what), f"the key {short(repr(key))} is not a string.",
                                        "quote the key (YAML reads 1, true and null as non-strings)")
            if len(key) > MAX_STRING_CHARS or not key.isascii():
                _check_string(key, _path((link, key), what) + " (a key)")
        kind = type(value)
        if kind is dict or kind is list:
            if id(value) in seen:
                continue
            seen.add(id(value))
            if len(stack) >= MAX_DEPTH:
                raise too_deep(what)
            stack.append((iter(value.items()) if kind is dict else enumerate(value), kind is dict, (link, key)))
        elif kind is str:
            if len(value) > MAX_STRING_CHARS or not value.isascii():
                _check_string(value, _path((link, key), what))
        elif kind is float or kind is int:
            if not -MAX_ABS_NUMBER <= value <= MAX_ABS_NUMBER:  # False for NaN too
                _check_number(value, _path((link, key), what))
        elif kind is not bool and value is not None:
            raise InputError.single(_path((link, key), what), f"a {kind.__name__} value is not allowed here.",
                                    "use only strings, numbers, booleans, null, lists and objects "
                                    "(quote YAML dates and tagged values)")


def _path(link: Any, what: str) -> str:
    """The keys and indexes on the way to an entry, e.g. workload.services[0].name."""
    parts: list[str] = []
    while link is not None:
        link, key = link
        parts.append(f"[{key}]" if isinstance(key, int) else f".{short(key, 60)}")
    return "".join(reversed(parts)).lstrip(".")


def _check_string(text: str, path: str) -> None:
    if len(text) > MAX_STRING_CHARS:
        raise InputError.single(path, f"the string is {len(text):,} characters long, more than {MAX_STRING_CHARS:,}.",
                                "shorten it")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError.single(path, f"the string holds a character that is not valid Unicode text "
                                    f"(U+{ord(text[exc.start]):04X}, an unpaired surrogate, at position {exc.start}).",
                                    "remove it, or escape a pair of surrogates for characters beyond U+FFFF") from None


def _check_number(value: int | float, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError.single(path, f"{value} is not a finite number.", "use a finite number")
    if abs(value) > MAX_ABS_NUMBER:
        raise InputError.single(path, f"{short(str(value), 40)} is out of range: numbers are limited to "
                                f"+-{MAX_ABS_NUMBER:g}.", "check the units")
