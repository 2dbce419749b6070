"""requirements.lock (scripts/lock.sh) stays in step with pyproject.toml: every direct
dependency of the product, its tests and the Ray backend is pinned there, with hashes, at
a version pyproject allows. .ci/run installs from it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _locked() -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes)."""
    text = (ROOT / "requirements.lock").read_text()
    out: dict[str, tuple[str, int]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)", block)
        if m:
            out[canonicalize_name(m.group(1))] = (m.group(2), block.count("--hash=sha256:"))
    return out


def test_every_direct_dependency_is_locked_with_hashes_at_an_allowed_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + project["optional-dependencies"]["test"] \
        + project["optional-dependencies"]["ray"]
    locked = _locked()
    assert len(locked) > 50  # the whole tree, not just the direct dependencies
    problems = []
    for spec in wanted:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        if name not in locked:
            problems.append(f"{req.name} is not in requirements.lock")
            continue
        version, hashes = locked[name]
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}=={version} in requirements.lock is outside pyproject's {req.specifier}")
        if hashes == 0:
            problems.append(f"{req.name} has no hash in requirements.lock")
    assert not problems, "; ".join(problems) + ". To fix: run scripts/lock.sh"


def test_ci_installs_from_the_lock():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "--require-hashes -r requirements.lock" in ci
