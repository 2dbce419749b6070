"""Reading workload and catalog documents: JSON or YAML text -> plain data, with errors
that name the line and column (syntax) or the field path (non-finite numbers)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from solver.errors import InputError
from solver.workload.schema import Workload

def load_document(path: Path, what: str = "workload") -> Any:
    """Read JSON or YAML; syntax errors become InputError with line and column."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError.single(what, f"file not found: {path}.", "check the path") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise InputError.single(what, f"cannot read {path}: {exc.__class__.__name__}.", "pass a readable text file") from None
    return parse_text(text, suffix=path.suffix.lower(), what=what)


def parse_text(text: str, suffix: str = ".json", what: str = "workload") -> Any:
    if not text.strip():
        raise InputError.single(what, "the document is empty.", "give a workload with at least one service")
    if suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise InputError.single(what, f"malformed YAML{where}: {getattr(exc, 'problem', exc)}.", "fix the YAML syntax") from None
    else:
        try:
            # NaN/Infinity literals parse to floats here and are rejected below with their path.
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError.single(what, f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}.",
                                    "fix the JSON syntax (a trailing comma or missing quote is typical)") from None
    if not isinstance(data, dict):
        raise InputError.single(what, f"the document must be an object/mapping, not {type(data).__name__}.",
                                "start the file with `{` (JSON) or `key: value` lines (YAML)")
    _reject_non_finite(data, what)
    return data


def _reject_non_finite(node: Any, path: str) -> None:
    if isinstance(node, float) and not math.isfinite(node):
        raise InputError.single(path, f"{node} is not a finite number.", "use a finite number")
    if isinstance(node, dict):
        for k, v in node.items():
            _reject_non_finite(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _reject_non_finite(v, f"{path}[{i}]")


def parse_workload(data: Any) -> Workload:
    if not isinstance(data, dict):
        raise InputError.single("workload", "the workload must be an object.", "see `solver-cli schema`")
    return Workload.model_validate_with_paths(data)


def load_workload(path: str | Path) -> Workload:
    return parse_workload(load_document(Path(path)))


def load_current_fleet(path: Path) -> list:
    """A running fleet file (JSON or YAML): a list of {offer_id, instances, ...}, or an
    object {current_fleet: [...]}. The entries are validated with the workload."""
    what = f"--current ({path})"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError.single(what, f"file not found: {path}.", "check the path") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise InputError.single(what, f"cannot read {path}: {exc.__class__.__name__}.", "pass a readable text file") from None
    if not text.strip():
        raise InputError.single(what, "the file is empty.", "write [] for no running instances, or the running fleet")
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            fleet = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise InputError.single(what, f"malformed YAML{where}: {getattr(exc, 'problem', exc)}.", "fix the YAML syntax") from None
    else:
        try:
            fleet = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError.single(what, f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}.",
                                    "fix the JSON syntax (a trailing comma or missing quote is typical)") from None
    if isinstance(fleet, dict) and set(fleet) == {"current_fleet"}:
        fleet = fleet["current_fleet"]
    _reject_non_finite(fleet, "current_fleet")
    if not isinstance(fleet, list):
        raise InputError.single(what, "expected a list of {offer_id, instances} or an object with only `current_fleet`.",
                                'write [{"offer_id": "aws/g6.xlarge", "instances": 2}] or {"current_fleet": [...]}')
    return fleet
