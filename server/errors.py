"""One table from domain errors to gRPC status codes, applied by one interceptor.

Handlers raise the planner's own errors (solver.errors) or the server's few (queue
full, deadline with a best plan); the ErrorInterceptor turns each into a rich status
(google.rpc.Status in the `grpc-status-details-bin` trailer) so no handler needs a
try/except. Unexpected exceptions become INTERNAL with the request id, and a logged
traceback, never a traceback sent to the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from server import convert, logs
from server.admission import QueueFull, WaitCancelled, WaitExpired
from solver.errors import Cancelled, InfeasibleError, InputError, PlannerError, SolverTimeout

DOMAIN = "fleetplanner.v1"
QUEUE_FULL_RETRY_S = 1.0


class DeadlineWithPlan(Exception):
    """The call's deadline ended the solve before optimality was proven; carries the
    best plan found (a PlanResult.to_dict() dict)."""

    def __init__(self, plan: dict, message: str):
        self.plan = plan
        super().__init__(message)


def _bad_request(exc: InputError) -> list:
    return [error_details_pb2.BadRequest(field_violations=[
        error_details_pb2.BadRequest.FieldViolation(
            field=v.field, description=f"{v.message} To fix: {v.fix}" if v.fix else v.message)
        for v in exc.violations])]


def _infeasible(exc: InfeasibleError) -> list:
    reasons = [asdict(r) for r in exc.reasons]
    return [convert.reasons_to_proto(reasons),
            error_details_pb2.PreconditionFailure(violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type=r["constraint"], subject=r["service"] or "", description=str(reason))
                for r, reason in zip(reasons, exc.reasons)])]


def _best_plan(exc: DeadlineWithPlan) -> list:
    return [convert.plan_to_proto(exc.plan)]


def _retry_later(exc: QueueFull) -> list:
    return [error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=int(QUEUE_FULL_RETRY_S)))]


def _none(exc: Exception) -> list:
    return []


# Most specific first: (error type, status code, ErrorInfo reason, details builder).
TABLE: list[tuple[type[BaseException], grpc.StatusCode, str, Callable[..., list]]] = [
    (InputError, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_WORKLOAD", _bad_request),
    (InfeasibleError, grpc.StatusCode.FAILED_PRECONDITION, "INFEASIBLE", _infeasible),
    (DeadlineWithPlan, grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_BEST_PLAN", _best_plan),
    (SolverTimeout, grpc.StatusCode.DEADLINE_EXCEEDED, "NO_PLAN_IN_TIME", _none),
    (WaitExpired, grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_IN_QUEUE", _none),
    (QueueFull, grpc.StatusCode.RESOURCE_EXHAUSTED, "QUEUE_FULL", _retry_later),
    (Cancelled, grpc.StatusCode.CANCELLED, "CANCELLED", _none),
    (WaitCancelled, grpc.StatusCode.CANCELLED, "CANCELLED", _none),
    (PlannerError, grpc.StatusCode.INTERNAL, "PLANNER_ERROR", _none),
]


def to_status(exc: BaseException, request_id: str) -> grpc.Status:
    """The rich gRPC status for a raised error."""
    for kind, code, reason, details in TABLE:
        if isinstance(exc, kind):
            message, extra = str(exc) or reason.lower().replace("_", " "), details(exc)
            break
    else:
        code, reason, extra = grpc.StatusCode.INTERNAL, "INTERNAL", []
        message = f"internal error; the server's logs have the details under request id {request_id}"
    packed = []
    for detail in [*extra, error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN),
                   error_details_pb2.RequestInfo(request_id=request_id)]:
        a = any_pb2.Any()
        a.Pack(detail)
        packed.append(a)
    return rpc_status.to_status(status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=packed))


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
    if status.code == grpc.StatusCode.INTERNAL:
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
