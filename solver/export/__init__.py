"""Deployment export: a plan's JSON -> files that run it (SkyPilot or Kubernetes).

    from solver.export import export_plan
    written = export_plan(plan_dict, "kubernetes", "deploy/kubernetes")

units.py cuts the plan into deployment units (service x configuration); skypilot.py and
kubernetes.py write one target each; engines.py and gpus.py hold what both share (engine
images and flags, GPU names per platform).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from solver.errors import FieldViolation, InputError
from solver.export import kubernetes, manifest, skypilot
from solver.export.owned_sites import place_owned
from solver.export.periods import ALL_PERIODS, period_hours, period_names, select_period
from solver.export.schedule import ScheduleOptions, render_scheduled, schedule_options
from solver.export.site_files import site_files
from solver.export.units import load_plan_file, plan_units

TARGETS = {"skypilot": skypilot.render, "kubernetes": kubernetes.render}
GENERATED_MARK = manifest.GENERATED_MARK

__all__ = ["ALL_PERIODS", "TARGETS", "Exported", "ScheduleOptions", "export_plan", "export_periods", "export_scheduled",
           "load_plan_file", "render_plan", "render_with_warnings", "schedule_options"]


@dataclass
class Exported:
    written: list[Path]
    removed: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # for stderr


def render_with_warnings(plan: object, target: str, period: str | None = None) -> tuple[dict[str, str], list[str]]:
    """(file name -> contents, warnings), without writing anything. A multi-period plan needs
    the period to export (solver/export/periods.py). A plan with owned servers also gets
    sites/SITE.yaml per owned site (solver/export/site_files.py)."""
    if target not in TARGETS:
        raise InputError.single("--to", f"unknown target {target!r}.", f"use one of {', '.join(TARGETS)}")
    selected = select_period(plan, period)
    summary = plan_units(selected)
    # Placed before any file is rendered: replicas that do not fit their servers stop the export.
    sites = place_owned(selected, summary.units, "fleet" if period is None else f"periods[{period}].fleet")
    warnings = list(summary.warnings)
    from solver.export.engines import unexpressed

    # Settings the plan was sized with that the pinned image cannot run: said once per unit.
    warnings += [w for w in (unexpressed(u) for u in summary.units if u.model is not None) if w]
    files = TARGETS[target](summary, warnings)
    files.update(site_files(sites, summary, target, None if period is None else (period, period_hours(plan, period))))
    return files, warnings


def render_plan(plan: object, target: str, period: str | None = None) -> dict[str, str]:
    """file name -> contents, without writing anything."""
    return render_with_warnings(plan, target, period)[0]


def export_periods(plan: object, target: str, out_dir: str | Path) -> list[tuple[str, Exported]]:
    """`--period all`: every period of a multi-period plan into OUT_DIR/PERIOD, each checked before any is written."""
    names = period_names(plan)
    if not names:
        raise InputError.single("--period", "is 'all', but the plan has a single period.", "leave --period out")
    for name in names:
        render_with_warnings(plan, target, name)
    return [(name, export_plan(plan, target, Path(out_dir) / name, name)) for name in names]


def export_scheduled(plan: object, target: str, out_dir: str | Path, options: ScheduleOptions) -> Exported:
    """`--period all --schedule keda`: every period's units in OUT_DIR, switched at the boundaries (schedule.py)."""
    if target != "kubernetes":
        raise InputError.single("--schedule", f"is {options.scheduler!r}, a Kubernetes autoscaler; the target is "
                                f"{target}.", "use --to kubernetes, or leave --schedule out")
    files, warnings = render_scheduled(plan, options)  # every check before anything is written
    return _write(files, warnings, target, out_dir)


def export_plan(plan: object, target: str, out_dir: str | Path, period: str | None = None) -> Exported:
    """Write the target's files into out_dir. Files an earlier export wrote there (its manifest
    says which) and this one does not are removed, so `kubectl apply -f DIR` sees the plan only;
    no other file is removed or overwritten (solver/export/manifest.py)."""
    files, warnings = render_with_warnings(plan, target, period)  # every check before anything is written
    return _write(files, warnings, target, out_dir)


def _write(files: dict[str, str], warnings: list[str], target: str, out_dir: str | Path) -> Exported:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError.single(str(out_dir), "exists and is not a directory.", "give a directory for --out")
    previous = manifest.read(out) if out.is_dir() else manifest.Previous()
    warnings += previous.warnings
    if out.is_dir():
        foreign = manifest.foreign_files(out, sorted(files), previous)
        if foreign:
            raise InputError([FieldViolation(str(out / n), "exists and was not written by `solver-cli export`; "
                                             "the export would overwrite it.",
                                             "move it away, or give another --out directory") for n in foreign])
    out.mkdir(parents=True, exist_ok=True)
    remove, stale_warnings = manifest.stale(out, set(files), previous)
    warnings += stale_warnings
    leftovers = manifest.legacy_leftovers(out, set(files), previous)
    if leftovers:
        warnings.append(f"{out} holds files from an export made before exports kept a manifest, which this plan "
                        f"does not have: {', '.join(leftovers)}; not removed (this export cannot tell they are its "
                        "own): delete them if their units are gone")
    written = []
    for name, text in sorted(files.items()):
        path = out / name  # a name may be sites/SITE.yaml: one level down
        path.parent.mkdir(exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        written.append(path)
    manifest.write(out, target, files)
    for path in remove:
        path.unlink(missing_ok=True)
    manifest.remove_empty_subdirs(out)
    return Exported(written, remove, warnings)
