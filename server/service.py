"""The PlannerService servicer: requests in, plans out, errors raised (not handled).

Errors are raised as domain errors and turned into statuses by server/errors.py.
Every solve goes through the SolveGate (bounded concurrency and queue), takes its time
limit from the call's deadline, and stops when the call is cancelled.
"""

from __future__ import annotations

import contextvars
import queue
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict

from server import convert, logs
from server.admission import QueueFull, SolveGate, WaitCancelled, WaitExpired
from server.errors import DeadlineWithPlan
from server.estimate import estimate_rows
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
from server.metrics import Metrics
from server.requests import backend_name, read_workload, solve_budget
from server.review import outcome_to_proto, read_review, summary_to_proto
from solver.catalog import default_catalog
from solver.errors import Cancelled, InfeasibleError, InputError, SolverTimeout
from solver.plan import PlanOptions, plan
from solver.review import run_review
from solver.suggest import did_you_mean

MIN_SOLVE_S = 0.05  # below this the solver cannot even load the model
MAX_TIME_LIMIT_S = 86_400.0  # the workload schema's own bound on solver.time_limit_s
_OUTCOMES = ((InputError, "invalid"), (InfeasibleError, "infeasible"), (DeadlineWithPlan, "deadline"),
             (SolverTimeout, "timeout"), (WaitExpired, "timeout"), (QueueFull, "rejected"),
             (Cancelled, "cancelled"), (WaitCancelled, "cancelled"))
_DONE = object()


class PlannerServicer(pb_grpc.PlannerServiceServicer):
    def __init__(self, gate: SolveGate, metrics: Metrics):
        self._gate = gate
        self._metrics = metrics

    # ------------------------------------------------------------ solving
    def Solve(self, request: pb.SolveRequest, context) -> pb.SolveResponse:
        return pb.SolveResponse(plan=convert.plan_to_proto(self._solve(request, context)))

    def SolveStream(self, request: pb.SolveRequest, context):
        events: queue.Queue = queue.Queue()

        def on_progress(p) -> None:
            events.put(convert.progress_to_proto(asdict(p)))

        def run() -> None:
            try:
                events.put(self._solve(request, context, on_progress))
            except BaseException as exc:  # noqa: BLE001 - handed to the RPC thread, which raises it
                events.put(exc)
            events.put(_DONE)

        # A copy of this context carries the request id into the solver thread's logs.
        threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True, name="solve").start()
        while (item := events.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, pb.Progress):
                yield pb.SolveEvent(progress=item)
            else:
                yield pb.SolveEvent(plan=convert.plan_to_proto(item))

    def _solve(self, request: pb.SolveRequest, context, on_progress=None) -> dict:
        """One solve from request to PlanResult.to_dict(); records its outcome."""
        cancel = threading.Event()
        context.add_callback(cancel.set)  # fires when the call ends: cancelled, expired or answered
        outcome = "error"
        try:
            workload, catalog = read_workload(request.workload, current_fleet=request.current_fleet
                                              if request.HasField("current_fleet") else None)
            backend = backend_name(request.backend)
            requested_s = request.time_limit_s if request.HasField("time_limit_s") else workload.solver.time_limit_s
            if not 0 < requested_s <= MAX_TIME_LIMIT_S:
                raise InputError.single("time_limit_s", f"must be between 0 and {MAX_TIME_LIMIT_S:g} s, got {requested_s:g}.",
                                        "give the seconds the solver may take, or leave it unset")
            with self._gate.slot(context.time_remaining(), cancel):
                limit_s, by_deadline = solve_budget(requested_s, context.time_remaining())
                if limit_s < MIN_SOLVE_S:
                    raise SolverTimeout(f"the call's deadline leaves {limit_s:.2f} s to solve. "
                                        "To fix: give the call a longer deadline")
                logs.event("solve.start", services=len(workload.services), time_limit_s=round(limit_s, 3),
                           limit_from="deadline" if by_deadline else "request", explain=request.explain)
                t0 = time.monotonic()
                try:
                    result = plan(workload, PlanOptions(time_limit_s=limit_s, backend=backend, explain=request.explain,
                                                        on_progress=on_progress, cancel=cancel, catalog=catalog))
                finally:
                    self._metrics.solve_latency.observe(time.monotonic() - t0)
            if cancel.is_set():
                raise Cancelled("the call was cancelled; the solve stopped")
            d = result.to_dict()
            if by_deadline and d["status"] != "optimal":
                raise DeadlineWithPlan(d, f"the call's deadline ended the solve after {limit_s:.2f} s before the plan "
                                          f"was proven optimal (gap {d.get('optimality_gap')}); the best plan found is "
                                          "in the status details. To fix: give the call a longer deadline")
            outcome = d["status"]
            logs.event("solve.end", status=outcome, total_price_usd_per_hour=d["total_price_usd_per_hour"],
                       solve_time_s=d.get("solve_time_s"))
            return d
        except Exception as exc:
            outcome = next((name for kind, name in _OUTCOMES if isinstance(exc, kind)), "error")
            if cancel.is_set() and outcome not in ("invalid", "rejected"):
                outcome = "cancelled"
            logs.event("solve.end", status=outcome, error=str(exc))
            raise
        finally:
            self._metrics.solves.labels(outcome).inc()

    # ------------------------------------------------------------ reviews
    def Review(self, request: pb.ReviewRequest, context):
        """A capacity review, one event per scenario as it finishes, then a summary.

        The review holds one solver slot for its whole run and solves its scenarios one
        at a time in one worker process: it costs the server what one solve costs, and
        the admission limit keeps meaning "cores in use". Its results go to a temporary
        folder that is removed at the end (nothing is resumed across calls).
        """
        cancel = threading.Event()
        context.add_callback(cancel.set)  # fires when the call ends: cancelled, expired or answered
        review, limit_s = read_review(request)
        with self._gate.slot(context.time_remaining(), cancel):
            logs.event("review.start", review=review.name, scenarios=len(review.scenarios),
                       time_limit_per_scenario_s=limit_s)
            counts: Counter = Counter()
            with tempfile.TemporaryDirectory(prefix="planner-review-") as out_dir:
                # The slot is held while the caller reads each event; a caller that stops
                # reading is cancelled by gRPC, which sets `cancel` and stops the workers.
                for result in run_review(review, out_dir, workers=1, backend="local",
                                         time_limit_per_scenario_s=limit_s, cancel=cancel):
                    counts[result.status] += 1
                    yield pb.ReviewEvent(scenario=outcome_to_proto(result))
            if cancel.is_set():
                logs.event("review.end", status="cancelled", scenarios_done=sum(counts.values()))
                raise Cancelled("the call was cancelled; the review stopped")
            logs.event("review.end", status="done", **{f"scenarios_{k}": v for k, v in counts.items()})
        yield pb.ReviewEvent(summary=summary_to_proto(review, counts))

    # ------------------------------------------------------------ quick questions
    def Validate(self, request: pb.ValidateRequest, context) -> pb.ValidateResponse:
        try:
            workload, _catalog = read_workload(request.workload)
        except InputError as exc:
            return pb.ValidateResponse(valid=False, violations=[pb.FieldViolation(**asdict(v)) for v in exc.violations])
        return pb.ValidateResponse(valid=True, workload=workload.name, services=len(workload.services))

    def Estimate(self, request: pb.EstimateRequest, context) -> pb.EstimateResponse:
        rows = estimate_rows(request)
        return pb.EstimateResponse(estimates=[convert.to_message(pb.PerfEstimate, r, "estimate") for r in rows])

    def GetCatalog(self, request: pb.GetCatalogRequest, context) -> pb.GetCatalogResponse:
        catalog = default_catalog()
        offers = list(catalog.offers)
        for field in ("gpu", "provider", "region"):
            value = getattr(request, field)
            if not value:
                continue
            known = {getattr(o, field) for o in offers}
            if value not in known:
                raise InputError.single(field, f"no offers with {field} {value!r}{did_you_mean(value, known) or '.'}",
                                        f"use one of the catalog's values (GetCatalog without a {field} filter lists them)")
            offers = [o for o in offers if getattr(o, field) == value]
        filtered = any((request.gpu, request.provider, request.region))
        gpus = [g for g in catalog.gpus.values() if not filtered or any(o.gpu == g.name for o in offers)]
        return pb.GetCatalogResponse(
            description=catalog.description,
            gpus=[convert.to_message(pb.GpuType, asdict(g), "gpu") for g in gpus],
            offers=[convert.to_message(pb.Offer, {"id": o.id, **asdict(o)}, "offer") for o in offers])
