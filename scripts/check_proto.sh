#!/usr/bin/env bash
# CI check: regenerating the gRPC code from proto/ must reproduce server/generated/
# exactly. Exits non-zero (and prints the diff) on drift.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$root/scripts/gen_proto.sh" "$tmp"
if ! diff -ru --exclude=__pycache__ "$root/server/generated" "$tmp"; then
  echo "error: server/generated is out of date with proto/. To fix: run scripts/gen_proto.sh and commit the result." >&2
  exit 1
fi
echo "generated gRPC code is up to date"
