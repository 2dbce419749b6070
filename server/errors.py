"""One interceptor turns every error a handler raises into a rich gRPC status.

Handlers raise the planner's own errors (solver.errors), the server's few (queue full,
shutting down) or a Failed carrying a status a worker process already built; the
ErrorInterceptor sends each as a google.rpc.Status in the `grpc-status-details-bin`
trailer (server/status.py builds them, bounded to fit gRPC's trailer limit), so no
handler needs a try/except. Unexpected exceptions become INTERNAL with the request id,
and a logged traceback, never a traceback sent to the caller.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import grpc

from server import logs
from server.status import Failure, failure


class Failed(Exception):
    """A failure whose status is already built (by a worker process)."""

    def __init__(self, f: Failure):
        self.failure = f
        super().__init__(f.message)


class _Status(NamedTuple):  # the grpc.Status interface that abort_with_status takes
    code: grpc.StatusCode
    details: str
    trailing_metadata: tuple


def to_status(exc: BaseException, request_id: str) -> grpc.Status:
    """The rich gRPC status for a raised error."""
    f = exc.failure if isinstance(exc, Failed) else failure(exc, request_id)
    return _Status(grpc.StatusCode[f.code], f.message, (("grpc-status-details-bin", f.details),))


class ErrorInterceptor(grpc.ServerInterceptor):
    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        if handler.unary_unary:
            return handler._replace(unary_unary=_guard_unary(handler.unary_unary))
        if handler.unary_stream:
            return handler._replace(unary_stream=_guard_stream(handler.unary_stream))
        return handler  # this API has no client-streaming methods


def _abort(exc: Exception, context: grpc.ServicerContext):
    if context.code() not in (None, grpc.StatusCode.OK):
        raise exc  # an abort already in progress (its own exception); leave it be
    status = to_status(exc, logs.request_id_var.get())
    if status.code == grpc.StatusCode.INTERNAL and not isinstance(exc, Failed):
        logs.log.error("rpc.internal_error", exc_info=exc, extra={"fields": {}})
    context.abort_with_status(status)


def _guard_unary(behavior):
    def guarded(request, context):
        try:
            return behavior(request, context)
        except Exception as exc:  # noqa: BLE001 - this is the one place errors become statuses
            _abort(exc, context)

    return guarded


def _guard_stream(behavior):
    def guarded(request, context):
        try:
            yield from behavior(request, context)
        except Exception as exc:  # noqa: BLE001
            _abort(exc, context)

    return guarded


def log_level_for(code: grpc.StatusCode) -> int:
    return logging.ERROR if code in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN) else logging.INFO
