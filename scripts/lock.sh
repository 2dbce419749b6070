#!/usr/bin/env bash
# Regenerate requirements.lock: every package the product, its tests and the Ray review
# backend install, pinned with hashes, so that two fresh machines install the same bits.
# .ci/run installs from it (pip --require-hashes), then the project itself without deps.
#
# Usage: scripts/lock.sh            (needs network access to PyPI; installs uv in a temp venv)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q "uv>=0.9,<0.10"
cd "$root"
"$tmp/venv/bin/uv" pip compile pyproject.toml --extra test --extra ray --python-version 3.11 \
  --generate-hashes -o requirements.lock
