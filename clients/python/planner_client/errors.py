"""PlannerClientError: a failed call, with the server's structured details unpacked."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from server import convert
from server.generated.fleetplanner.v1 import planner_pb2 as pb

# The CLI's exit codes (cli/main.py) for each status a call can end with.
EXIT_INPUT, EXIT_INFEASIBLE, EXIT_TIMEOUT, EXIT_OTHER = 2, 3, 4, 5
_EXIT_CODES = {"INVALID_ARGUMENT": EXIT_INPUT, "FAILED_PRECONDITION": EXIT_INFEASIBLE,
               "DEADLINE_EXCEEDED": EXIT_TIMEOUT}


class PlannerClientError(Exception):
    """A call that did not return a result.

    code          the gRPC status name, e.g. "INVALID_ARGUMENT"
    message       the server's message (says how to fix it when it can)
    exit_code     the CLI's exit code: 2 invalid input, 3 infeasible, 4 deadline, 5 other
    violations    [{field, message, fix}] for INVALID_ARGUMENT
    infeasibility [{constraint, message, fix, service}] for FAILED_PRECONDITION
    best_plan     for DEADLINE_EXCEEDED: the best plan found in time (PlanResult JSON), or None
    reason        the server's ErrorInfo reason, e.g. "QUEUE_FULL" ("" when none)
    request_id    the id under which the server logged the call ("" when unknown)
    retry_after_s for RESOURCE_EXHAUSTED: the server's suggested wait, or None
    omitted       how many violations or infeasibility reasons the server left out to fit
                  gRPC's trailer limit (0: the lists are complete; Validate lists every
                  violation)
    """

    def __init__(self, code: str, message: str, *, violations=None, infeasibility=None, best_plan=None,
                 reason: str = "", request_id: str = "", retry_after_s: float | None = None, omitted: int = 0):
        self.code = code
        self.message = message
        self.exit_code = _EXIT_CODES.get(code, EXIT_OTHER)
        self.violations: list[dict] = list(violations or [])
        self.infeasibility: list[dict] = list(infeasibility or [])
        self.best_plan: dict | None = best_plan
        self.reason = reason
        self.request_id = request_id
        self.retry_after_s = retry_after_s
        self.omitted = omitted
        super().__init__(message)

    def __str__(self) -> str:
        if self.violations:
            lines = [f"  - {v['field']}: {v['message']}" + (f" To fix: {v['fix']}" if v["fix"] else "")
                     for v in self.violations]
            if self.omitted:
                lines.append(f"  ... and {self.omitted} more (Validate lists every one)")
            return "invalid input\n" + "\n".join(lines)
        return f"{self.message} ({self.code})"


def from_rpc_error(exc: grpc.RpcError) -> PlannerClientError:
    """Unpack a failed call's rich status (google.rpc.Status details)."""
    code = exc.code().name if exc.code() is not None else "UNKNOWN"
    message = exc.details() or code.lower()
    fields: dict = {}
    try:
        status = rpc_status.from_call(exc)
    except ValueError:  # the trailer disagrees with the status line; keep the plain status
        status = None
    for detail in status.details if status is not None else ():
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            msg = error_details_pb2.BadRequest()
            detail.Unpack(msg)
            fields["violations"] = [_violation(v.field, v.description) for v in msg.field_violations]
        elif detail.Is(pb.Infeasibility.DESCRIPTOR):
            msg = pb.Infeasibility()
            detail.Unpack(msg)
            fields["infeasibility"] = convert.reasons_from_proto(msg)
        elif detail.Is(pb.Plan.DESCRIPTOR):
            msg = pb.Plan()
            detail.Unpack(msg)
            fields["best_plan"] = convert.plan_from_proto(msg)
        elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            msg = error_details_pb2.ErrorInfo()
            detail.Unpack(msg)
            fields["reason"] = msg.reason
            try:
                fields["omitted"] = max(int(msg.metadata["items_total"]) - int(msg.metadata["items_sent"]), 0)
            except (KeyError, ValueError):
                pass
        elif detail.Is(error_details_pb2.RequestInfo.DESCRIPTOR):
            msg = error_details_pb2.RequestInfo()
            detail.Unpack(msg)
            fields["request_id"] = msg.request_id
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            msg = error_details_pb2.RetryInfo()
            detail.Unpack(msg)
            fields["retry_after_s"] = msg.retry_delay.ToTimedelta().total_seconds()
    if code == "UNAUTHENTICATED":
        # The server's words are for any gRPC caller; say it in this client's terms.
        message = ("the server refused the call: missing or wrong bearer token. "
                   "To fix: pass the server's token, PlannerClient(target, token=...)")
    return PlannerClientError(code, message, **fields)


def _violation(field: str, description: str) -> dict:
    message, _, fix = description.partition(" To fix: ")
    return {"field": field, "message": message, "fix": fix}
