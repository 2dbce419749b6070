"""Reading JSON or YAML documents (workloads, catalogs, reviews, fleets): text -> plain data.

Syntax errors name the line and column; everything else (size, nesting, YAML alias
expansion, value types, strings, numbers: solver/documents/limits.py) names the field
path. The checks run before the document reaches validation or the solver, so a
hostile document costs about as much as its text, never more.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from solver.errors import InputError
from solver.documents import limits
from solver.documents.duplicates import DuplicateKey, duplicate_error, json_pairs_hook, locate_json_duplicate
from solver.documents.files import read_document_file


@functools.cache
def _yaml_loader() -> type:
    """The YAML loader class, built on first use: PyYAML costs a JSON workload's cold
    CLI run tens of milliseconds of imports for nothing."""
    import yaml

    # libyaml when PyYAML was built with it (about 10x faster, and it caps nesting at 1000
    # levels while scanning); otherwise the pure-Python parser.
    _Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Loader(_Base):
        """The safe loader with two changes: YAML 1.1 dates stay strings (`as_of: 2024-05-01`
        is text, as in JSON), and integer literals are length-bounded before conversion
        (a base-60 literal such as 1:2:3:... costs quadratic time to convert)."""

        yaml_implicit_resolvers = {
            first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
            for first, resolvers in _Base.yaml_implicit_resolvers.items()
        }

        def construct_yaml_int(self, node):
            value = self.construct_scalar(node)
            if len(value) > limits.MAX_NUMBER_CHARS:
                raise yaml.constructor.ConstructorError(
                    None, None, f"an integer of {len(value)} characters is too long to be a count", node.start_mark)
            return super().construct_yaml_int(node)

    _Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
    return _Loader


def load_document(path: Path, what: str = "workload") -> Any:
    """Read a JSON or YAML file (bounded: see solver/documents/files.py) and parse it."""
    return parse_text(read_document_file(path, what), suffix=path.suffix.lower(), what=what)


def parse_text(text: str, suffix: str = ".json", what: str = "workload", allow_list: bool = False) -> Any:
    as_yaml = suffix in (".yaml", ".yml")
    # Characters, not bytes: text from a file was already bounded in bytes, and for
    # gRPC text the message size limit applies; this is the cheap first gate.
    limits.check_size(len(text), what, as_yaml)
    if not text.strip():
        raise InputError.single(what, "the document is empty.", "give a workload with at least one service")
    data = _parse_yaml(text, what) if as_yaml else _parse_json(text, what)
    if not isinstance(data, dict) and not (allow_list and isinstance(data, list)):
        raise InputError.single(what, f"the document must be an object/mapping, not {_type_name(data)}.",
                                "start the file with `{` (JSON) or `key: value` lines (YAML)")
    limits.check_values(data, what)
    return data


def check_document(data: Any, what: str = "workload") -> Any:
    """The same value checks for a document that arrived already parsed (a gRPC Struct)."""
    if not isinstance(data, dict):
        raise InputError.single(what, f"the document must be an object, not {_type_name(data)}.",
                                "send a JSON object")
    limits.check_values(data, what)
    return data


def _parse_json(text: str, what: str) -> Any:
    try:
        # NaN/Infinity literals parse to floats here and are rejected by check_values with their path.
        return json.loads(text, object_pairs_hook=json_pairs_hook)
    except DuplicateKey as exc:
        # Rare: only now is the text scanned again to say where (the first repeat in document order).
        found = locate_json_duplicate(text)
        key, first, second = found if found else (exc.key, None, None)
        raise duplicate_error(what, key, second, first, "JSON") from None
    except json.JSONDecodeError as exc:
        raise InputError.single(what, f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}.",
                                "fix the JSON syntax (a trailing comma or missing quote is typical)") from None
    except RecursionError:
        raise limits.too_deep(what) from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise InputError.single(what, f"a number cannot be read: {limits.short(str(exc), 80)}.",
                                "check the numbers") from None


def _parse_yaml(text: str, what: str) -> Any:
    import yaml

    try:
        loader = _yaml_loader()(text)  # libyaml takes UTF-8: text from a caller in this process may not encode
    except UnicodeEncodeError as exc:
        raise InputError.single(what, f"the text holds a character that is not valid Unicode (U+{ord(text[exc.start]):04X}, "
                                f"an unpaired surrogate, at position {exc.start}).", "remove it") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        limits.check_yaml_graph(node, what)  # before anything is built: aliases cost what they expand to
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        tab = _tab_near(text, mark)
        if tab is not None:
            raise InputError.single(what, f"malformed YAML: a tab character at line {tab[0]}, column {tab[1]}; YAML "
                                    "does not allow tabs for indentation or before a token.",
                                    "replace the tab with spaces") from None
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError.single(what, f"malformed YAML{where}: {limits.short(str(problem), 200)}.",
                                "fix the YAML syntax") from None
    except RecursionError:  # the pure-Python parser nests one call per level
        raise limits.too_deep(what) from None
    except ValueError as exc:
        raise InputError.single(what, f"a value cannot be read: {limits.short(str(exc), 80)}.",
                                "check the numbers") from None
    finally:
        loader.dispose()


def _tab_near(text: str, mark) -> tuple[int, int] | None:
    """(line, column), 1-based, of the tab a YAML syntax error is about: the character at the
    error, or a tab in the error line's leading whitespace (libyaml's "cannot start any token"
    and "violates indentation" do not say the character is a tab)."""
    if mark is None:
        return None
    lines = text.split("\n", mark.line + 1)
    if mark.line >= len(lines):
        return None
    line = lines[mark.line]
    if mark.column < len(line) and line[mark.column] == "\t":
        return mark.line + 1, mark.column + 1
    indent = line[:len(line) - len(line.lstrip(" \t"))]
    if "\t" in indent[:mark.column + 1]:
        return mark.line + 1, indent.index("\t") + 1
    return None


def _type_name(data: Any) -> str:
    return "null" if data is None else "a list" if isinstance(data, list) else type(data).__name__
