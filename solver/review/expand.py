"""Load a review file and expand it into concrete scenarios.

`load_review(path)` / `parse_review(data, base_dir)` give a `Review`: the resolved base
workload and catalog, and the full list of scenarios in report order: the base first,
then named scenarios, then each sweep's points, then the sensitivity relaxations.
Names that a change refers to (services, GPU types, offers, providers) are checked
here, once, so that a typo stops the review before any solve rather than failing
every scenario.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solver.catalog.loader import load_catalog_file
from solver.catalog.types import Catalog
from solver.errors import FieldViolation, InputError
from solver.compile.resolve import resolve_catalog
from solver.review.changes import unknown_name
from solver.review.spec import Change, ReviewFile, SweepSpec
from solver.documents.limits import short
from solver.workload.schema import Workload
from solver.documents.parse import load_document
from solver.workload.documents import parse_workload


MAX_SCENARIOS = 100_000  # one review; beyond this, results and the report stop being readable


@dataclass(frozen=True)
class Scenario:
    """One concrete what-if: the base with `changes` applied, in order."""

    id: str  # file-name safe, unique within the review
    name: str
    group: str  # "base" | "scenario" | "sweep" | "sensitivity"
    changes: tuple[Change, ...] = ()
    description: str = ""
    sweep: str | None = None  # the sweep's name, for sweep points
    parameter: str | None = None  # e.g. "demand.factor", "slo.tpot_ms"
    value: float | None = None  # the swept (or relaxed) value
    relaxes: str | None = None  # sensitivity: the constraint's label, e.g. "quota[H100-SXM]"
    service: str | None = None  # sweeps and relaxations about one service

    def changes_json(self) -> list[dict]:
        return [c.model_dump(mode="json", exclude_unset=True, by_alias=True) for c in self.changes]


@dataclass(frozen=True)
class Review:
    spec: ReviewFile
    workload: Workload
    catalog: Catalog
    scenarios: tuple[Scenario, ...]
    base_dir: str = "."
    base_fingerprint: str = field(default="", repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    def fingerprint(self, scenario: Scenario) -> str:
        """Changes when the base, the catalog or the scenario's changes change."""
        text = json.dumps([self.base_fingerprint, scenario.changes_json()], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def scenario(self, scenario_id: str) -> Scenario:
        for s in self.scenarios:
            if s.id == scenario_id:
                return s
        raise KeyError(scenario_id)


def load_review(path: str | Path) -> Review:
    path = Path(path)
    return parse_review(load_document(path, what="review"), base_dir=str(path.parent))


def parse_review(data: Any, base_dir: str = ".", allow_files: bool = True) -> Review:
    """`allow_files=False` (for reviews sent over the network): the base workload and its
    catalog must be inline, so a request can never make the server read its own files."""
    if not isinstance(data, dict):
        raise InputError.single("review", "the review must be an object.", "see examples/review-*.yaml")
    spec = ReviewFile.model_validate_with_paths(data, prefix="review")
    if not allow_files:
        _refuse_files(spec)
    planned = len(spec.scenarios) + sum(len(sweep.point_values()) for sweep in spec.sweeps)
    if planned > MAX_SCENARIOS:
        raise InputError.single("review", f"the review expands to {planned} scenarios, more than {MAX_SCENARIOS}.",
                                "split it into several reviews, or use coarser sweep steps")
    workload = _base_workload(spec, base_dir)
    if not allow_files and workload.catalog.source == "file":
        raise InputError.single("review.base.workload.catalog.file", "catalog files cannot be read here.",
                                "give the catalog inline (catalog.offers), or use the default catalog")
    catalog = _base_catalog(spec, workload, base_dir)
    scenarios = [Scenario("base", "base", "base", description="the base workload, unchanged")]
    for i, s in enumerate(spec.scenarios):
        _check_refs(s.changes, workload, catalog, f"review.scenarios[{i}].changes")
        scenarios.append(Scenario(slug(s.name), s.name, "scenario", tuple(s.changes), s.description))
    for i, sweep in enumerate(spec.sweeps):
        scenarios.extend(_sweep_points(sweep, workload, catalog, f"review.sweeps[{i}]"))
    if spec.sensitivity.enabled:
        from solver.review.sensitivity import relaxations

        scenarios.extend(relaxations(workload, catalog, spec.sensitivity))
    _check_unique(scenarios)
    return Review(spec, workload, catalog, tuple(scenarios), base_dir, _base_fingerprint(workload, catalog))


def _refuse_files(spec: ReviewFile) -> None:
    if isinstance(spec.base.workload, str):
        raise InputError.single("review.base.workload", "workload files cannot be read here.",
                                "put the workload inline under base.workload")
    if spec.base.catalog is not None:
        raise InputError.single("review.base.catalog", "catalog files cannot be read here.",
                                "give the catalog inline in the workload (catalog.offers)")


def _base_workload(spec: ReviewFile, base_dir: str) -> Workload:
    ref = spec.base.workload
    if isinstance(ref, dict):
        try:
            return parse_workload(ref)
        except InputError as exc:
            raise _prefixed(exc, "review.base.workload") from None
    path = Path(ref) if Path(ref).is_absolute() else Path(base_dir) / ref
    try:
        return parse_workload(load_document(path))
    except InputError as exc:
        raise _prefixed(exc, f"review.base.workload ({short(str(path))})") from None


def _base_catalog(spec: ReviewFile, workload: Workload, base_dir: str) -> Catalog:
    if spec.base.catalog is None:
        # A workload file's relative catalog path is relative to the workload file.
        ref = spec.base.workload
        workload_dir = base_dir if isinstance(ref, dict) else str((Path(base_dir) / ref).parent)
        return resolve_catalog(workload, workload_dir)
    path = Path(spec.base.catalog) if Path(spec.base.catalog).is_absolute() else Path(base_dir) / spec.base.catalog
    try:
        return load_catalog_file(path)
    except InputError as exc:
        raise _prefixed(exc, f"review.base.catalog ({short(str(path))})") from None


def _prefixed(exc: InputError, prefix: str) -> InputError:
    return InputError([FieldViolation(f"{prefix}.{v.field}" if v.field else prefix, v.message, v.fix)
                       for v in exc.violations])


def _base_fingerprint(workload: Workload, catalog: Catalog) -> str:
    text = workload.model_dump_json() + repr(catalog.offers) + repr(sorted(catalog.gpus.items()))
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- sweeps
def _sweep_points(sweep: SweepSpec, workload: Workload, catalog: Catalog, where: str) -> list[Scenario]:
    points = []
    for k, value in enumerate(sweep.point_values()):
        body = {**sweep.fixed, sweep.varied: value}
        try:
            change = Change.model_validate_with_paths({sweep.change: body}, prefix=f"{where}.values[{k}]")
        except InputError as exc:
            raise InputError([FieldViolation(v.field, v.message + f" (sweep {sweep.name!r} at {value:g})", v.fix)
                              for v in exc.violations]) from None
        changes = (*sweep.also, change)
        if k == 0:  # the other points differ only in the varied number
            _check_refs(changes, workload, catalog, f"{where}")
        name = f"{sweep.name} {sweep.varied}={value:g}"
        points.append(Scenario(slug(f"{sweep.name}-{value:g}"), name, "sweep", changes, sweep=sweep.name,
                               parameter=f"{sweep.change}.{sweep.varied}", value=float(value),
                               service=sweep.fixed.get("service")))
    return points


def slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name)
    slug = re.sub(r"-[-.]+", "-", slug).strip("-.").lower()
    return slug[:90] or "scenario"


def _check_unique(scenarios: list[Scenario]) -> None:
    seen: dict[str, str] = {}
    for s in scenarios:
        if s.id in seen:
            raise InputError.single("review", f"scenarios {seen[s.id]!r} and {s.name!r} have the same file name "
                                    f"{s.id!r}.", "give them names that differ in letters or digits")
        seen[s.id] = s.name


# ---------------------------------------------------------------- names the changes use
def _check_refs(changes, workload: Workload, catalog: Catalog, where: str) -> None:
    services = [s.name for s in workload.services]
    gpus = set(catalog.gpus)
    offers = {o.id for o in catalog.offers}
    providers = {o.provider for o in catalog.offers}
    # (provider, gpu, id) of every offer, including ones the changes add, for price selectors.
    sellers = [(o.provider, o.gpu, o.id) for o in catalog.offers]
    problems: list[FieldViolation] = []

    def need(ok: bool, path: str, what: str, name: str, choices, fix: str) -> None:
        if not ok:
            problems.append(FieldViolation(path, unknown_name(what, name, choices), fix))

    for i, change in enumerate(changes):
        path, body = f"{where}[{i}].{change.kind}", change.body
        if change.kind == "add_gpus":
            gpus |= {g.name for g in body}
        elif change.kind == "add_offers":
            for g in body:
                offers.add(f"{g.provider}/{g.name}")
                providers.add(g.provider)
                sellers.append((g.provider, g.gpu, f"{g.provider}/{g.name}"))
        if change.kind in ("demand", "slo") and body.service is not None:
            need(body.service in services, f"{path}.service", "service", body.service, services,
                 f"use one of {', '.join(services[:10])}")
        if change.kind == "gpu_quota":
            need(body.gpu in gpus, f"{path}.gpu", "GPU type", body.gpu, gpus, "use a name from `solver-cli catalog --gpus`")
        if change.kind in ("offer_quota", "availability"):
            need(body.offer in offers, f"{path}.offer", "offer", body.offer, offers, "use an id from `solver-cli catalog`")
        if change.kind == "remove_gpus":
            for k, name in enumerate(body):
                need(name in gpus, f"{path}[{k}]", "GPU type", name, gpus, "use a name from `solver-cli catalog --gpus`")
        if change.kind == "remove_offers":
            for k, name in enumerate(body):
                need(name in offers, f"{path}[{k}]", "offer", name, offers, "use an id from `solver-cli catalog`")
        if change.kind == "constraints":
            regions = {o.region for o in catalog.offers}
            for attr, known, what in (("providers", providers, "provider"), ("regions", regions, "region"),
                                      ("gpu_types", gpus, "GPU type"), ("exclude_gpu_types", gpus, "GPU type")):
                for k, name in enumerate(getattr(body, attr) or []):
                    need(name in known, f"{path}.{attr}[{k}]", what, name, known, "check the spelling in `solver-cli catalog`")
        if change.kind == "price":
            for attr, known, what in (("provider", providers, "provider"), ("gpu", gpus, "GPU type"), ("offer", offers, "offer")):
                value = getattr(body, attr)
                if value is not None:
                    need(value in known, f"{path}.{attr}", what, value, known, "check the spelling in `solver-cli catalog`")
            if not problems and not any(body.provider in (None, p) and body.gpu in (None, g) and body.offer in (None, o)
                                        for p, g, o in sellers):
                problems.append(FieldViolation(path, "no offer matches every selector given.",
                                               "drop a selector, or check that the provider sells that GPU"))
    if problems:
        raise InputError(problems)
