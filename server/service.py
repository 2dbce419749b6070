"""The PlannerService servicer: raw requests in, answers out, errors raised (not handled).

The RPC threads do little: admission (the SolveGate), then a job for a warm worker
process (server/pool.py), then the worker's answer, already serialized, goes back as
is. Requests reach the handlers as bytes (no deserializer), so that garbage or invalid
UTF-8 is decoded where it is reported as INVALID_ARGUMENT with details, and so that a
Solve request is decoded and parsed only in a worker: nothing a caller sends can hold
the server's GIL against health checks. Errors are raised as domain errors and turned
into statuses by server/errors.py.
"""

from __future__ import annotations

import contextlib
import functools
import pickle
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict

import grpc

from server import convert, logs
from server.admission import LARGE_REQUEST_BYTES, SolveGate
from server.calls import CallRegistry
from server.errors import Failed
from server.estimate import estimate_rows
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.metrics import Metrics
from server.pool import Stopped, WorkerDied, WorkerPool
from server.requests import decode
from server.review import outcome_to_proto, summary_to_proto
from server.status import ShuttingDown, WaitCancelled, failure
from solver.catalog import default_catalog
from solver.errors import Cancelled, InputError, PlannerError
from solver.suggest import did_you_mean

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["PlannerService"].full_name


class PlannerServicer:
    def __init__(self, gate: SolveGate, pool: WorkerPool, metrics: Metrics, calls: CallRegistry):
        self._gate = gate
        self._pool = pool
        self._metrics = metrics
        self._calls = calls

    # ------------------------------------------------------------ solving
    def Solve(self, request: bytes, context) -> bytes:
        answer = b""
        for answer in self._job("solve", request, context):
            pass
        return answer

    def SolveStream(self, request: bytes, context) -> Iterator[bytes]:
        yield from self._job("solve", request, context, stream=True)

    def Validate(self, request: bytes, context) -> bytes:
        answer = b""
        for answer in self._job("validate", request, context):
            pass
        return answer

    def _job(self, kind: str, request: bytes, context, stream: bool = False) -> Iterator[bytes]:
        """One job in a worker, holding a solver slot: the worker's progress events (streams),
        then its serialized answer. Solves are counted by outcome before the slot is given
        back, so that a free slot always comes with its solve counted."""
        cancel = self._calls.enter(context)
        counted = [kind != "solve"]

        def count(outcome: str) -> None:
            if not counted[0]:
                counted[0] = True
                self._metrics.solves.labels(outcome).inc()

        try:
            # A large request goes in the large lane (server/admission.py): one slot stays
            # for small solves however many long jobs arrive.
            large = kind == "solve" and len(request) > LARGE_REQUEST_BYTES
            with self._gate.slot(context.time_remaining(), cancel, large=large):
                try:
                    remaining = context.time_remaining()
                    deadline = None if remaining is None else time.monotonic() + remaining
                    rid = logs.request_id_var.get()
                    payload = (request, deadline, stream, rid) if kind == "solve" else (request, rid)
                    t0 = time.monotonic()
                    result = None
                    try:
                        # closing(): a stream whose caller left stops its job now, not at garbage collection.
                        with contextlib.closing(self._pool.run(kind, payload, cancel, deadline)) as messages:
                            for message in messages:
                                if message[0] == "progress":
                                    yield message[2]
                                else:
                                    result = message[2]
                    finally:
                        if kind == "solve":
                            self._metrics.solve_latency.observe(time.monotonic() - t0)
                    count(result.outcome)
                    if result.failure is not None:
                        raise Failed(result.failure)
                finally:
                    count(_outcome(sys.exc_info()[1]))
            yield result.payload
        except (Stopped, WaitCancelled) as exc:
            raise self._cancelled(exc) from None
        except WorkerDied as exc:
            raise PlannerError(f"internal error: {exc}") from None
        finally:
            count(_outcome(sys.exc_info()[1]))
            self._calls.leave(cancel)

    def _cancelled(self, exc: Exception) -> Exception:
        where = f" in its {exc.stage} stage" if isinstance(exc, Stopped) else " while it waited for a solver slot"
        if self._calls.shutting_down:
            return ShuttingDown(f"the server is shutting down and its grace period ended; the call was cancelled{where}. "
                                "To fix: retry on another server or after the restart")
        return Cancelled(f"the call was cancelled; its work stopped{where}")

    # ------------------------------------------------------------ reviews
    def Review(self, request: bytes, context) -> Iterator[pb.ReviewEvent]:
        """A capacity review, one event per scenario as it finishes, then a summary.

        The review holds one solver slot for its whole run. Its document is parsed in a
        worker process (like a workload), then its scenarios are solved one at a time in
        the review runner's own worker process: it costs the server what one solve costs,
        and the admission limit keeps meaning "cores in use". Its results go to a
        temporary folder that is removed at the end (nothing is resumed across calls).
        """
        from solver.review import run_review

        cancel = self._calls.enter(context)
        try:
            with self._gate.slot(context.time_remaining(), cancel, large=True):  # a whole review: the large lane
                result = None
                for message in self._pool.run("review", (request, logs.request_id_var.get()), cancel):
                    result = message[2]
                if result.failure is not None:
                    raise Failed(result.failure)
                review, limit_s = pickle.loads(result.payload)
                logs.event("review.start", review=review.name, scenarios=len(review.scenarios),
                           time_limit_per_scenario_s=limit_s)
                counts: Counter = Counter()
                with tempfile.TemporaryDirectory(prefix="planner-review-") as out_dir:
                    # The slot is held while the caller reads each event; a caller that stops
                    # reading is cancelled by gRPC, which sets `cancel` and stops the workers.
                    for scenario in run_review(review, out_dir, workers=1, backend="local",
                                               time_limit_per_scenario_s=limit_s, cancel=cancel):
                        counts[scenario.status] += 1
                        yield pb.ReviewEvent(scenario=outcome_to_proto(scenario))
                if cancel.is_set():
                    logs.event("review.end", status="cancelled", scenarios_done=sum(counts.values()))
                    raise self._cancelled(Stopped("review", "cooperative"))
                logs.event("review.end", status="done", **{f"scenarios_{k}": v for k, v in counts.items()})
            yield pb.ReviewEvent(summary=summary_to_proto(review, counts))
        except (Stopped, WaitCancelled) as exc:
            raise self._cancelled(exc) from None
        except WorkerDied as exc:
            raise PlannerError(f"internal error: {exc}") from None
        finally:
            self._calls.leave(cancel)

    # ------------------------------------------------------------ quick questions (in this process)
    def Estimate(self, request: bytes, context) -> pb.EstimateResponse:
        rows = estimate_rows(decode(pb.EstimateRequest, request))
        return pb.EstimateResponse(estimates=[convert.to_message(pb.PerfEstimate, r, "estimate") for r in rows])

    def GetCatalog(self, request: bytes, context) -> bytes:
        r = decode(pb.GetCatalogRequest, request)
        return _catalog_answer(r.gpu, r.provider, r.region)


def _outcome(exc: BaseException | None) -> str:
    """The solve outcome label of an error that ended a job."""
    if isinstance(exc, (Stopped, WaitCancelled, GeneratorExit)):
        return "cancelled"  # GeneratorExit: a stream whose caller went away
    if isinstance(exc, WorkerDied):
        return "error"
    if isinstance(exc, Failed):
        return exc.failure.outcome
    return failure(exc, "-").outcome if exc is not None else "error"


@functools.lru_cache(maxsize=64)
def _catalog_answer(gpu: str, provider: str, region: str) -> bytes:
    """The built-in catalog, filtered and serialized; it never changes while the server runs."""
    catalog = default_catalog()
    offers = list(catalog.offers)
    for field, value in (("gpu", gpu), ("provider", provider), ("region", region)):
        if not value:
            continue
        known = {getattr(o, field) for o in offers}
        if value not in known:
            raise InputError.single(field, f"no offers with {field} {value!r}{did_you_mean(value, known) or '.'}",
                                    f"use one of the catalog's values (GetCatalog without a {field} filter lists them)")
        offers = [o for o in offers if getattr(o, field) == value]
    filtered = any((gpu, provider, region))
    gpus = [g for g in catalog.gpus.values() if not filtered or any(o.gpu == g.name for o in offers)]
    return pb.GetCatalogResponse(
        description=catalog.description,
        gpus=[convert.to_message(pb.GpuType, _gpu_fields(g), "gpu") for g in gpus],
        offers=[convert.to_message(pb.Offer, {"id": o.id, **asdict(o)}, "offer") for o in offers]).SerializeToString()


def _gpu_fields(gpu) -> dict:
    """A GPU type as the GpuType message holds it: board_power_w is not one of its fields yet
    (its field numbers are coordinated with other work on the proto); plans carry the power
    that matters to a caller (Plan.power_kw, FleetLine.power_kw_per_instance)."""
    fields = asdict(gpu)
    fields.pop("board_power_w", None)
    return fields


def add_to_server(servicer: PlannerServicer, server: grpc.Server) -> None:
    """Register the service with raw-bytes requests (decoded by the handlers, or by the
    workers) and, where the worker already serialized the answer, raw-bytes responses."""
    handlers = {
        "Solve": grpc.unary_unary_rpc_method_handler(servicer.Solve),
        "SolveStream": grpc.unary_stream_rpc_method_handler(servicer.SolveStream),
        "Validate": grpc.unary_unary_rpc_method_handler(servicer.Validate),
        "Estimate": grpc.unary_unary_rpc_method_handler(
            servicer.Estimate, response_serializer=pb.EstimateResponse.SerializeToString),
        "GetCatalog": grpc.unary_unary_rpc_method_handler(servicer.GetCatalog),
        "Review": grpc.unary_stream_rpc_method_handler(
            servicer.Review, response_serializer=pb.ReviewEvent.SerializeToString),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)
