"""Workload documents: a parsed document -> a validated `Workload`, and running-fleet files.

The reading itself (size, nesting, YAML aliases, duplicate keys, values) is
solver/documents/parse.py, shared with catalogs and reviews."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from solver.documents.files import read_document_file
from solver.documents.parse import load_document, parse_text
from solver.errors import InputError
from solver.workload.schema import Workload


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


def load_current_fleet(path: Path) -> list:
    """A running fleet file (JSON or YAML): a list of {offer_id, instances, ...}, or an
    object {current_fleet: [...]}. The entries are validated with the workload."""
    what = f"--current ({path})"
    # The same bounded reading and parsing as a workload (size, nesting, aliases, numbers).
    text = read_document_file(path, what)
    if not text.strip():
        raise InputError.single(what, "the file is empty.", "write [] for no running instances, or the running fleet")
    fleet = parse_text(text, suffix=path.suffix.lower(), what=what, allow_list=True)
    if isinstance(fleet, dict) and set(fleet) == {"current_fleet"}:
        fleet = fleet["current_fleet"]
    if not isinstance(fleet, list):
        raise InputError.single(what, "expected a list of {offer_id, instances} or an object with only `current_fleet`.",
                                'write [{"offer_id": "aws/g6.xlarge", "instances": 2}] or {"current_fleet": [...]}')
    return fleet
