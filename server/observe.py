"""Per-call request id, structured start/end logs and RPC metrics, in one interceptor.

The request id comes from the caller's `x-request-id` metadata when it is sane, else is
generated; it is sent back as initial metadata and put in every log line of the call.
"""

from __future__ import annotations

import re
import time
import uuid

import grpc

from server import logs
from server.errors import log_level_for
from server.metrics import Metrics

_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def request_id_from(metadata) -> str:
    for key, value in metadata or ():
        if key == "x-request-id" and isinstance(value, str) and _SANE_ID.match(value):
            return value
    return uuid.uuid4().hex[:16]


class ObserveInterceptor(grpc.ServerInterceptor):
    def __init__(self, metrics: Metrics):
        self._metrics = metrics

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        metadata = handler_call_details.invocation_metadata
        if handler.unary_unary:
            return handler._replace(unary_unary=self._unary(handler.unary_unary, method, metadata))
        if handler.unary_stream:
            return handler._replace(unary_stream=self._stream(handler.unary_stream, method, metadata))
        return handler

    def _begin(self, context, method: str, metadata):
        rid = request_id_from(metadata)
        token = logs.request_id_var.set(rid)
        try:
            context.send_initial_metadata((("x-request-id", rid),))
        except Exception:  # noqa: BLE001 - the call may already be gone; the id still goes to the logs
            pass
        logs.event("rpc.start", method=method, peer=context.peer())
        return token, time.monotonic()

    def _end(self, context, method: str, token, t0: float, failed: bool) -> None:
        code = context.code()
        if code is None:
            if not context.is_active():
                code = grpc.StatusCode.CANCELLED  # the caller left (cancel or deadline) before the answer
            else:
                code = grpc.StatusCode.UNKNOWN if failed else grpc.StatusCode.OK
        details = context.details()
        if isinstance(details, bytes):
            details = details.decode("utf-8", "replace")
        elapsed = time.monotonic() - t0
        short = method.rsplit("/", 1)[-1]
        self._metrics.rpcs.labels(short, code.name).inc()
        self._metrics.rpc_latency.labels(short).observe(elapsed)
        logs.event("rpc.end", log_level_for(code), method=method, code=code.name,
                   duration_ms=round(elapsed * 1000, 1), details=details or None)
        try:
            logs.request_id_var.reset(token)
        except ValueError:
            pass  # an abandoned stream is closed later from another context; nothing to restore there

    def _unary(self, behavior, method, metadata):
        def observed(request, context):
            token, t0 = self._begin(context, method, metadata)
            failed = True
            try:
                response = behavior(request, context)
                failed = False
                return response
            finally:
                self._end(context, method, token, t0, failed)

        return observed

    def _stream(self, behavior, method, metadata):
        def observed(request, context):
            token, t0 = self._begin(context, method, metadata)
            failed = True
            try:
                yield from behavior(request, context)
                failed = False
            finally:
                self._end(context, method, token, t0, failed)

        return observed
