"""`solver-cli serve` states the worker pool's defaults as literals (so that the CLI starts
without importing the server); they must be the pool's own, which ServerConfig reads, in
the flags and in their help text."""

from __future__ import annotations

import pytest

from cli.main import build_parser
from server import pool
from server.app import ServerConfig


@pytest.mark.parametrize("flag, dest, value, field", [
    ("--spare-workers", "spare_workers", pool.SPARE_WORKERS, "spare_workers"),
    ("--worker-max-jobs", "worker_max_jobs", pool.MAX_JOBS, "worker_max_jobs"),
    ("--worker-max-rss-mib", "worker_max_rss_mib", pool.MAX_RSS_MIB, "worker_max_rss_mib"),
])
def test_the_serve_flags_default_to_the_pools_defaults(flag, dest, value, field):
    serve = build_parser("serve")._subparsers._group_actions[0].choices["serve"]
    action = next(a for a in serve._actions if a.dest == dest)
    assert action.default == value == getattr(ServerConfig(), field)
    assert f"(default {value:g})" in action.help
