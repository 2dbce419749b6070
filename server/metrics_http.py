"""Prometheus `/metrics` over HTTP, optionally behind a bearer token.

Metrics reveal traffic and failure rates, so they get the same protection as the API
when asked: with a token, a scrape must send `Authorization: Bearer <token>` (Prometheus:
`authorization: {credentials: ...}` in the scrape config) or it gets 401. Bind it to
loopback or an internal address with --metrics-address.
"""

from __future__ import annotations

import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from server.auth import bearer_matches


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        pass  # one line per scrape on stderr would drown the server's JSON logs


def _guarded(app, token: bytes):
    def guarded(environ, start_response):
        if not bearer_matches(environ.get("HTTP_AUTHORIZATION"), token):
            start_response("401 Unauthorized", [("Content-Type", "text/plain; charset=utf-8"),
                                                 ("WWW-Authenticate", 'Bearer realm="metrics"')])
            return [b"metrics need the header `Authorization: Bearer <token>` (the server's --metrics-token)\n"]
        return app(environ, start_response)

    return guarded


def serve_metrics(registry: CollectorRegistry, port: int, address: str, token: str | None = None):
    """Start serving /metrics in a daemon thread; returns the HTTP server (call .shutdown())."""
    app = make_wsgi_app(registry)
    if token:
        app = _guarded(app, token.encode())
    family = socket.getaddrinfo(address.strip("[]"), port, type=socket.SOCK_STREAM)[0][0]

    class Server(ThreadingWSGIServer):
        address_family = family

    httpd = make_server(address.strip("[]"), port, app, Server, handler_class=_QuietHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True, name="metrics-http").start()
    return httpd
