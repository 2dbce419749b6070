"""Optional bearer-token check: `authorization: Bearer <token>` on every call.

Health checks stay open so that load balancers and orchestrators can probe the server
without the secret; everything else (reflection included) needs the token.
"""

from __future__ import annotations

import hmac

import grpc

OPEN_METHODS = ("/grpc.health.v1.Health/",)


class TokenInterceptor(grpc.ServerInterceptor):
    def __init__(self, token: str):
        if not token:
            raise ValueError("empty token")
        self._expected = f"Bearer {token}".encode()

    def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        if method.startswith(OPEN_METHODS) or self._authorized(handler_call_details.invocation_metadata):
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        return _rejecting(handler)

    def _authorized(self, metadata) -> bool:
        for key, value in metadata or ():
            if key == "authorization":
                given = value.encode() if isinstance(value, str) else value
                return hmac.compare_digest(given, self._expected)  # constant time: no timing oracle
        return False


def _deny(request, context):
    context.abort(grpc.StatusCode.UNAUTHENTICATED,
                  "missing or wrong bearer token. To fix: send the metadata `authorization: Bearer <token>` "
                  "(solver-cli solve --server ... --token TOKEN)")


def _deny_stream(request, context):
    _deny(request, context)
    yield  # never reached; makes this a generator like the handler it replaces


def _rejecting(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    if handler.unary_stream:
        return handler._replace(unary_stream=_deny_stream)
    if handler.unary_unary:
        return handler._replace(unary_unary=_deny)
    if handler.stream_unary:
        return handler._replace(stream_unary=_deny)
    return handler._replace(stream_stream=_deny_stream)
