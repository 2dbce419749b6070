"""Domain errors -> rich gRPC statuses (google.rpc.Status) that always fit in trailers.

A status travels in HTTP/2 trailers (`grpc-message` and, base64-encoded,
`grpc-status-details-bin`), and clients refuse trailers over 8 KiB by default: a status
that big reaches them as RESOURCE_EXHAUSTED, which tells them to retry a request that
can never succeed. So every status built here is bounded: the message is summarised
("... and 57 more") within MAX_MESSAGE_BYTES, the detail lists (field violations,
infeasibility reasons) keep as many items as fit in MAX_DETAILS_BYTES, and
ErrorInfo.metadata says how many there were and how many were sent. The code never
changes with the size: bad input stays INVALID_ARGUMENT, no fleet FAILED_PRECONDITION.

No grpc import: the worker processes build statuses too (server/worker.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from server import convert
from solver.errors import Cancelled, InfeasibleError, InputError, PlannerError, SolverTimeout

DOMAIN = "fleetplanner.v1"
QUEUE_FULL_RETRY_S = 1.0
# Trailers are limited to 8 KiB by default (grpc.max_metadata_size). The message is
# percent-encoded (up to 3 bytes per byte) and the details base64-encoded (4 per 3):
# 3 * 512 + 4/3 * 4096 = 7,000 bytes at worst, leaving room for the other trailers.
MAX_MESSAGE_BYTES = 512
MAX_DETAILS_BYTES = 4096
MAX_ITEM_CHARS = 300  # one field path or description; longer ones are cut with "..."


class QueueFull(Exception):
    """Every solver slot is busy and the waiting line is full."""

    def __init__(self, running: int, waiting: int):
        self.running, self.waiting = running, waiting
        super().__init__(f"the server is busy: {running} solves running and {waiting} waiting (the limit). "
                         "To fix: retry after a short backoff, or raise --max-concurrent-solves/--max-queue")


class WaitExpired(Exception):
    """The call's deadline passed while the solve waited for a slot."""


class WaitCancelled(Exception):
    """The call was cancelled while the solve waited for a slot."""


class ShuttingDown(Exception):
    """The server's shutdown grace ended while the call was in flight."""


@dataclass(frozen=True)
class Failure:
    """A call's failure as it goes on the wire; plain fields, so it crosses processes."""

    code: str  # grpc.StatusCode name, e.g. "INVALID_ARGUMENT"
    message: str
    details: bytes  # a serialized google.rpc.Status: the `grpc-status-details-bin` trailer
    reason: str  # the ErrorInfo reason, e.g. "INVALID_WORKLOAD"
    outcome: str  # the solve outcome label for metrics, e.g. "invalid"


def clean(text: str, limit: int = MAX_ITEM_CHARS) -> str:
    """Text safe for a proto string (valid UTF-8: lone surrogates escaped), at most `limit` chars."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _summary(items: list[str], what: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """As many items as fit in `limit` UTF-8 bytes, then "(and N more <what>)"."""
    out = ""
    for i, item in enumerate(items):
        rest = len(items) - i - 1
        tail = f" (and {rest} more {what})" if rest else ""
        candidate = item if not out else f"{out}; {item}"
        if len((candidate + tail).encode()) <= limit:
            out = candidate
            continue
        rest = len(items) - i
        tail = f" (and {rest} more {what})"
        if not out:  # even the first item is too long: cut it
            room = limit - len(tail.encode()) - 3
            out = item.encode()[:max(room, 0)].decode("utf-8", "ignore") + "..."
        return out + tail
    return out


# ------------------------------------------------------------------ detail builders
# Each takes the error and n (how many list items to include) and returns the details.

def _violations(exc: InputError) -> list:
    return list(exc.violations)


def _bad_request(exc: InputError, n: int) -> list:
    return [error_details_pb2.BadRequest(field_violations=[
        error_details_pb2.BadRequest.FieldViolation(
            field=clean(v.field), description=clean(f"{v.message} To fix: {v.fix}" if v.fix else v.message, 600))
        for v in exc.violations[:n]])]


def _infeasible(exc: InfeasibleError, n: int) -> list:
    reasons = [asdict(r) for r in exc.reasons[:n]]
    for r in reasons:
        for key in ("constraint", "message", "fix", "service"):
            if r[key] is not None:
                r[key] = clean(r[key], 600 if key in ("message", "fix") else MAX_ITEM_CHARS)
    return [convert.reasons_to_proto(reasons),
            error_details_pb2.PreconditionFailure(violations=[
                error_details_pb2.PreconditionFailure.Violation(
                    type=r["constraint"], subject=r["service"] or "",
                    description=f"{r['message']} To fix: {r['fix']}" if r["fix"] else r["message"])
                for r in reasons])]


def _retry_later(exc: QueueFull, n: int) -> list:
    return [error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=int(QUEUE_FULL_RETRY_S)))]


def _none(exc: BaseException, n: int) -> list:
    return []


def _input_message(exc: InputError) -> str:
    return _summary([clean(str(v), 400) for v in exc.violations], "problems; Validate lists every one")


def _infeasible_message(exc: InfeasibleError) -> str:
    return "no feasible fleet: " + _summary([clean(str(r), 400) for r in exc.reasons], "reasons",
                                            MAX_MESSAGE_BYTES - 20)


# Most specific first: (error type, status code, ErrorInfo reason, outcome label,
# the list whose items are bounded (or None), details builder, message builder or None).
TABLE: list[tuple[type[BaseException], str, str, str, Callable | None, Callable, Callable | None]] = [
    (InputError, "INVALID_ARGUMENT", "INVALID_WORKLOAD", "invalid", _violations, _bad_request, _input_message),
    (InfeasibleError, "FAILED_PRECONDITION", "INFEASIBLE", "infeasible", lambda e: e.reasons, _infeasible,
     _infeasible_message),
    (SolverTimeout, "DEADLINE_EXCEEDED", "NO_PLAN_IN_TIME", "timeout", None, _none, None),
    (WaitExpired, "DEADLINE_EXCEEDED", "DEADLINE_IN_QUEUE", "timeout", None, _none, None),
    (QueueFull, "RESOURCE_EXHAUSTED", "QUEUE_FULL", "rejected", None, _retry_later, None),
    (ShuttingDown, "CANCELLED", "SHUTTING_DOWN", "cancelled", None, _none, None),
    (Cancelled, "CANCELLED", "CANCELLED", "cancelled", None, _none, None),
    (WaitCancelled, "CANCELLED", "CANCELLED", "cancelled", None, _none, None),
    (PlannerError, "INTERNAL", "PLANNER_ERROR", "error", None, _none, None),
]


def failure(exc: BaseException, request_id: str) -> Failure:
    """The bounded rich status for a raised error (INTERNAL, naming the request id, for
    anything unexpected: the caller never sees a traceback)."""
    for kind, code, reason, outcome, items_of, details, message_of in TABLE:
        if isinstance(exc, kind):
            items = list(items_of(exc)) if items_of else []
            message = message_of(exc) if message_of else clean(str(exc) or reason.lower().replace("_", " "), 400)
            return _fit(code, message, reason, outcome, request_id,
                        lambda n, exc=exc, details=details: details(exc, n), len(items))
    message = f"internal error; the server's logs have the details under request id {request_id}"
    return _fit("INTERNAL", message, "INTERNAL", "error", request_id, lambda n: [], 0)


def make_failure(code: str, message: str, reason: str, outcome: str, request_id: str) -> Failure:
    """A failure that is no domain error (e.g. the worker process died)."""
    return _fit(code, clean(message, 400), reason, outcome, request_id, lambda n: [], 0)


def _fit(code: str, message: str, reason: str, outcome: str, request_id: str,
         details_for: Callable[[int], list], total: int) -> Failure:
    """The status with as many of the `total` list items as fit in MAX_DETAILS_BYTES."""

    def build(n: int) -> bytes:
        meta = {"items_total": str(total), "items_sent": str(n)} if total else {}
        packed = []
        for detail in [*details_for(n), error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=meta),
                       error_details_pb2.RequestInfo(request_id=clean(request_id, 64))]:
            a = any_pb2.Any()
            a.Pack(detail)
            packed.append(a)
        return status_pb2.Status(code=getattr(code_pb2, code), message=message, details=packed).SerializeToString()

    blob = build(total)
    if len(blob) > MAX_DETAILS_BYTES:
        lo, hi = 0, total  # largest n that fits: build(lo) fits (ErrorInfo alone is small), build(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if len(build(mid)) <= MAX_DETAILS_BYTES:
                lo = mid
            else:
                hi = mid
        blob = build(lo)
    return Failure(code, message, blob, reason, outcome)


def unpack_counts(info: error_details_pb2.ErrorInfo) -> tuple[int, int] | None:
    """(items in the error, items sent) from an ErrorInfo, or None when it lists none."""
    try:
        return int(info.metadata["items_total"]), int(info.metadata["items_sent"])
    except (KeyError, ValueError):
        return None
