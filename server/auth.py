"""Optional bearer-token check: `authorization: Bearer <token>` on every call.

Health checks stay open so that load balancers and orchestrators can probe the server
without the secret; everything else (reflection included) needs the token. The scheme
name is case-insensitive (RFC 7235: `bearer`, `Bearer` and `BEARER` are the same); the
token itself is compared exactly, in constant time.
"""

from __future__ import annotations

import hmac

import grpc

OPEN_METHODS = ("/grpc.health.v1.Health/",)
DENIED = ("missing or wrong bearer token. To fix: send the metadata `authorization: Bearer <token>` "
          "with the token the server was started with")


def bearer_matches(header: str | bytes | None, token: bytes) -> bool:
    """Whether an Authorization value is `Bearer <token>` (any case for the scheme)."""
    if header is None:
        return False
    value = header.encode("utf-8", "replace") if isinstance(header, str) else header
    scheme, sep, given = value.partition(b" ")
    if not sep or scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(given.lstrip(b" "), token)  # constant time: no timing oracle


class TokenInterceptor(grpc.ServerInterceptor):
    def __init__(self, token: str):
        if not token:
            raise ValueError("empty token")
        self._token = token.encode()

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
            if key == "authorization":  # gRPC metadata keys arrive lower-cased
                return bearer_matches(value, self._token)
        return False


def _deny(request, context):
    context.abort(grpc.StatusCode.UNAUTHENTICATED, DENIED)


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
