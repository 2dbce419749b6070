"""Structured logs: one JSON object per line, each carrying the current request id.

The request id lives in a context variable set by the RPC interceptor, so every log
line written while serving a call (the solver thread included, which runs in a copy
of the call's context) names the call it belongs to.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time

LOGGER_NAME = "planner.server"
request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

log = logging.getLogger(LOGGER_NAME)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a line is logged, not when configured (a
    test that swaps stderr, then closes its copy, must not break later servers' logs)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def configure(level: str = "info") -> None:
    """Send the server's logs to stderr as JSON lines."""
    handler = _StderrHandler()
    handler.setFormatter(JsonFormatter())
    log.handlers[:] = [handler]
    log.setLevel(level.upper())
    log.propagate = False


def event(name: str, level: int = logging.INFO, **fields) -> None:
    """Log one structured event: `event("rpc.end", code="OK", duration_ms=12.5)`."""
    log.log(level, name, extra={"fields": fields})
