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
    """Validate a workload document. When fields are wrong, unknown names in it (models,
    GPU types, offers, providers, regions) are reported in the same error, not in a second
    round after the fields are fixed (checked against the built-in catalog, and only when
    the document uses it)."""
    if not isinstance(data, dict):
        raise InputError.single("workload", "the workload must be an object.", "see `solver-cli schema`")
    try:
        return Workload.model_validate_with_paths(data)
    except InputError as exc:
        catalog = data.get("catalog")
        if catalog in (None, {}) or (isinstance(catalog, dict) and catalog.get("source") == "default"):
            from solver.catalog import default_catalog
            from solver.compile.resolve import reference_problems

            seen = {v.field for v in exc.violations}
            extra = [v for v in reference_problems(data, default_catalog()) if v.field not in seen]
            if extra:
                raise InputError(exc.violations + extra) from None
        raise


def load_workload(path: str | Path) -> Workload:
    return parse_workload(load_document(Path(path)))
