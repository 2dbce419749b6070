"""PlannerClient: typed calls to the planner service, with deadlines and retries.

Results are the same JSON-shaped dicts the CLI prints (`solver-cli solve --format json`),
so callers and the CLI can treat local and remote plans alike.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from planner_client.errors import PlannerClientError, from_rpc_error
from server import convert
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc

MIB = 1024 * 1024
# When solve() gets a time limit, its deadline is at least the limit plus this much, so
# that the limit (not the deadline) ends the solve, as it does locally: room for the
# model build before the limit's clock matters little, evaluation and the answer do.
ANSWER_SLACK_S = 10.0
EXPLAIN_SLACK_S = 15.0  # explaining re-solves per service after the main solve
_BACKENDS = {None: pb.BACKEND_UNSPECIFIED, "auto": pb.BACKEND_AUTO, "scip": pb.BACKEND_SCIP,
             "highs": pb.BACKEND_HIGHS, "cp-sat": pb.BACKEND_CP_SAT}
PathOrBytes = str | Path | bytes

Workload = dict | str | Path


class PlannerClient:
    """A connection to one planner service.

    target         "host:port"
    token          bearer token, sent as `authorization: Bearer <token>`
    timeout_s      deadline of each call (None: no deadline; solve() may stretch it, see solve)
    ca_cert        PEM (bytes or a path) to verify the server with; turns TLS on
    client_cert, client_key   PEM for mutual TLS
    tls            TLS with the system's root certificates (implied by ca_cert/client_cert)
    server_name    the name the server's certificate must carry, if not the target's host
    retries        how many times a call that failed with UNAVAILABLE is retried
    backoff_s, max_backoff_s  first and largest wait between retries (doubling, jittered)
    """

    def __init__(self, target: str, token: str | None = None, timeout_s: float | None = None, *,
                 ca_cert: PathOrBytes | None = None, client_cert: PathOrBytes | None = None,
                 client_key: PathOrBytes | None = None, tls: bool = False, server_name: str | None = None,
                 retries: int = 4, backoff_s: float = 0.2, max_backoff_s: float = 5.0,
                 max_message_bytes: int = 64 * MIB):
        if (client_cert is None) != (client_key is None):
            raise ValueError("mutual TLS needs both client_cert and client_key")
        if timeout_s is not None and not timeout_s > 0:
            raise _bad_argument("timeout_s", f"must be positive, got {timeout_s}.", "give seconds > 0, or None")
        self.target = target
        self.timeout_s = timeout_s
        self.retries = max(0, retries)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        options = [("grpc.max_receive_message_length", max_message_bytes),
                   ("grpc.max_send_message_length", max_message_bytes)]
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        if tls or ca_cert is not None or client_cert is not None:
            creds = grpc.ssl_channel_credentials(root_certificates=_pem(ca_cert), private_key=_pem(client_key),
                                                 certificate_chain=_pem(client_cert))
            self._channel = grpc.secure_channel(target, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = pb_grpc.PlannerServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    # ------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "PlannerClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ calls
    def solve(self, workload: Workload, time_limit_s: float | None = None, explain: bool = False,
              backend: str | None = None, base_dir: str | Path | None = None,
              current_fleet: list[dict] | None = None) -> dict:
        """The cheapest fleet for `workload` (a dict, JSON/YAML text, or a file path), as
        the CLI's plan JSON. With time_limit_s, the call's deadline is stretched to at
        least time_limit_s + 10 s (+15 s with explain) so the limit ends the solve.
        base_dir: where a relative catalog.file resolves (default: the workload file's
        folder, or the current directory). current_fleet: the fleet that runs now,
        [{offer_id, instances, spot?, replicas?: [{service, count, gpus_per_replica?,
        precision?}]}]; the plan then carries `changes` and a `rollout`."""
        request = self._solve_request(workload, time_limit_s, explain, backend, base_dir, current_fleet)
        response = self._call(self._stub.Solve, request, self._solve_timeout(time_limit_s, explain))
        plan = convert.plan_from_proto(response.plan)
        if response.deadline_exceeded:
            raise _deadline_with_plan(plan)
        return plan

    def solve_stream(self, workload: Workload, time_limit_s: float | None = None, explain: bool = False,
                     backend: str | None = None, base_dir: str | Path | None = None,
                     current_fleet: list[dict] | None = None) -> Iterator[dict]:
        """Events of one solve: {"event": "progress", "elapsed_s", "best_usd_per_hour",
        "bound_usd_per_hour", "solutions_found"} for each improving plan, then
        {"event": "plan", "plan": <plan JSON>}. Closing the iterator early (break)
        cancels the call, which stops the solve on the server."""
        request = self._solve_request(workload, time_limit_s, explain, backend, base_dir, current_fleet)
        timeout = self._solve_timeout(time_limit_s, explain)
        deadline = None if timeout is None else time.monotonic() + timeout
        def event_dict(event) -> dict:
            if event.WhichOneof("event") == "progress":
                return {"event": "progress", **convert.to_dict(event.progress)}
            plan = convert.plan_from_proto(event.plan)
            if event.deadline_exceeded:
                raise _deadline_with_plan(plan)
            return {"event": "plan", "plan": plan}

        yield from self._stream(self._stub.SolveStream, request, deadline, event_dict)

    def review(self, review: Workload, time_limit_per_scenario_s: float | None = None,
               timeout_s: float | None = None) -> Iterator[dict]:
        """Run a capacity review (a dict, JSON/YAML text, or a review file's path) on the
        server. Yields {"event": "scenario", id, name, group, status, usd_per_hour, gpus,
        optimality_gap, solve_time_s, error, reasons, "result": <ScenarioResult JSON,
        as in the review's scenarios/<id>.json>} per scenario as it finishes, then
        {"event": "summary", "review", "scenarios", "statuses": {status: count}}.
        The base workload and catalog must be inline (the server reads no files).
        timeout_s: the call's deadline (default: none, since a review can take hours;
        the client's timeout_s is for single calls). Closing the iterator early cancels
        the call, which stops the review on the server."""
        if time_limit_per_scenario_s is not None and not time_limit_per_scenario_s > 0:
            raise _bad_argument("time_limit_per_scenario_s", f"must be positive, got {time_limit_per_scenario_s}.",
                                "give seconds > 0")
        request = pb.ReviewRequest(time_limit_per_scenario_s=time_limit_per_scenario_s)
        if isinstance(review, Path):
            if review.suffix.lower() in (".yaml", ".yml"):
                request.yaml = review.read_text()
            else:
                request.json = review.read_text()
        elif isinstance(review, str):
            if review.lstrip().startswith("{"):
                request.json = review
            else:
                request.yaml = review
        elif isinstance(review, dict):
            request.json = json.dumps(review)
        else:
            raise TypeError(f"review must be a dict, JSON/YAML text or a path, not {type(review).__name__}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        def event_dict(event) -> dict:
            if event.WhichOneof("event") == "scenario":
                fields = convert.to_dict(event.scenario)
                result = json.loads(fields.pop("result_json"))
                return {"event": "scenario", **fields, "result": result}
            summary = convert.to_dict(event.summary)
            summary["statuses"] = {c["status"]: c["count"] for c in summary["statuses"]}
            return {"event": "summary", **summary}

        yield from self._stream(self._stub.Review, request, deadline, event_dict)

    def _stream(self, method, request, deadline: float | None, event_dict) -> Iterator[dict]:
        """A server-streaming call, retried on UNAVAILABLE only before its first event."""
        for attempt in range(self.retries + 1):
            call = method(request, timeout=_left(deadline), metadata=self._metadata)
            received = False
            try:
                for event in call:
                    received = True
                    yield event_dict(event)
                return
            except grpc.RpcError as exc:
                if received or not self._should_retry(exc, attempt, deadline):
                    raise from_rpc_error(exc) from None
            finally:
                call.cancel()  # no-op after the stream ended; stops the server's work when abandoned

    def validate(self, workload: Workload, base_dir: str | Path | None = None) -> dict:
        """{"valid": bool, "violations": [{field, message, fix}], "workload": name, "services": n}."""
        request = pb.ValidateRequest(workload=_workload_message(workload, base_dir))
        response = self._call(self._stub.Validate, request, self.timeout_s)
        return convert.to_dict(response)

    def estimate(self, model: str, gpu: str | None = None, gpus_per_replica: int = 1, precision: str = "fp16",
                 engine: str = "vllm", prompt_tokens: int = 512, output_tokens: int = 256,
                 ttft_ms: float | None = None, tpot_ms: float | None = None,
                 latency_ms: float | None = None) -> list[dict]:
        """Predicted throughput and latency of `model` per GPU type (or on `gpu` only)."""
        request = pb.EstimateRequest(model=model, gpu=gpu or "", gpus_per_replica=gpus_per_replica,
                                     precision=precision, engine=engine, prompt_tokens=prompt_tokens,
                                     output_tokens=output_tokens, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                                     latency_ms=latency_ms)
        return [convert.to_dict(e) for e in self._call(self._stub.Estimate, request, self.timeout_s).estimates]

    def get_catalog(self, gpu: str | None = None, provider: str | None = None, region: str | None = None) -> dict:
        """{"description", "gpus": [GPU types], "offers": [offers]} of the server's built-in catalog."""
        request = pb.GetCatalogRequest(gpu=gpu or "", provider=provider or "", region=region or "")
        return convert.to_dict(self._call(self._stub.GetCatalog, request, self.timeout_s))

    def health(self, service: str = "") -> str:
        """The server's health status name ("SERVING", "NOT_SERVING", ...)."""
        response = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service), self.timeout_s)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    # ------------------------------------------------------------ plumbing
    def _solve_request(self, workload, time_limit_s, explain, backend, base_dir, current_fleet=None) -> pb.SolveRequest:
        if backend not in _BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; use one of auto, scip, highs")
        if time_limit_s is not None and not time_limit_s > 0:
            raise _bad_argument("time_limit_s", f"must be positive, got {time_limit_s}.", "give seconds > 0")
        request = pb.SolveRequest(workload=_workload_message(workload, base_dir), time_limit_s=time_limit_s,
                                  explain=explain, backend=_BACKENDS[backend])
        if current_fleet is not None:
            try:
                request.current_fleet.CopyFrom(convert.current_fleet_to_proto(current_fleet))
            except ValueError as exc:
                raise _bad_argument("current_fleet", f"{exc}.", "give [{offer_id, instances, spot?, replicas?}]") from None
        return request

    def _solve_timeout(self, time_limit_s: float | None, explain: bool) -> float | None:
        if time_limit_s is None:
            return self.timeout_s
        floor = time_limit_s + ANSWER_SLACK_S + (EXPLAIN_SLACK_S if explain else 0.0)
        return floor if self.timeout_s is None else max(self.timeout_s, floor)

    def _call(self, method: Callable, request, timeout_s: float | None):
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for attempt in range(self.retries + 1):
            try:
                return method(request, timeout=_left(deadline), metadata=self._metadata)
            except grpc.RpcError as exc:
                if not self._should_retry(exc, attempt, deadline):
                    raise from_rpc_error(exc) from None
        raise AssertionError("unreachable: the last attempt raises")

    def _should_retry(self, exc: grpc.RpcError, attempt: int, deadline: float | None) -> bool:
        """UNAVAILABLE (server down, restarting, connection lost) is worth another try: after
        a jittered exponential wait, while attempts and the deadline last."""
        if exc.code() != grpc.StatusCode.UNAVAILABLE or attempt >= self.retries:
            return False
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** attempt)
        wait_s = ceiling / 2 + random.uniform(0, ceiling / 2)  # jitter spreads out clients retrying together
        if deadline is not None and time.monotonic() + wait_s >= deadline:
            return False
        time.sleep(wait_s)
        return True


def _deadline_with_plan(plan: dict) -> PlannerClientError:
    """The call's deadline ended the solve before optimality was proven: reported like a
    deadline (the CLI exits 4), with the best plan found in time."""
    return PlannerClientError(
        "DEADLINE_EXCEEDED", f"the call's deadline ended the solve after {plan.get('solve_time_s')} s, before the plan "
        f"was proven optimal (gap {plan.get('optimality_gap')}); the best plan found is in best_plan. "
        "To fix: give the call a longer deadline (timeout_s)", best_plan=plan, reason="DEADLINE_BEST_PLAN")


def _bad_argument(field: str, message: str, fix: str) -> PlannerClientError:
    """A bad argument, reported like the server's INVALID_ARGUMENT (the CLI exits 2)."""
    return PlannerClientError("INVALID_ARGUMENT", f"{field}: {message}",
                              violations=[{"field": field, "message": message, "fix": fix}])


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(deadline - time.monotonic(), 0.001)


def _pem(value: PathOrBytes | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


def _workload_message(workload: Any, base_dir: str | Path | None = None) -> pb.Workload:
    """dict -> exact JSON text; str -> JSON or YAML text; Path -> the file's text. A
    catalog file the workload names travels along (the server reads no files)."""
    if isinstance(workload, Path):
        text = workload.read_text()
        msg = pb.Workload(yaml=text) if workload.suffix.lower() in (".yaml", ".yml") else pb.Workload(json=text)
        data = _peek(text)
        base_dir = workload.parent if base_dir is None else base_dir
    elif isinstance(workload, str):
        msg = pb.Workload(json=workload) if workload.lstrip().startswith("{") else pb.Workload(yaml=workload)
        data = _peek(workload)
    elif isinstance(workload, dict):
        msg = pb.Workload(json=json.dumps(workload))
        data = workload
    else:
        raise TypeError(f"workload must be a dict, JSON/YAML text or a path, not {type(workload).__name__}")
    path = _catalog_path(data, base_dir)
    if path is not None:
        try:
            msg.catalog_file.CopyFrom(pb.CatalogDocument(path=str(path), text=path.read_text()))
        except (OSError, UnicodeDecodeError) as exc:
            raise PlannerClientError("INVALID_ARGUMENT", f"cannot read the catalog file {path}", violations=[
                {"field": "catalog.file", "message": f"cannot read {path}: {exc.__class__.__name__}.",
                 "fix": "check the path (a relative path resolves against the workload file's folder, or base_dir)"}],
            ) from None
    return msg


def referenced_catalog_file(workload: Any, base_dir: str | Path | None = None) -> Path | None:
    """The local catalog file a workload (dict, JSON/YAML text or path) names, resolved as
    solve() resolves it, i.e. the file solve() would send along; None when it names none."""
    if isinstance(workload, Path):
        return _catalog_path(_peek(workload.read_text()), workload.parent if base_dir is None else base_dir)
    return _catalog_path(_peek(workload) if isinstance(workload, str) else workload, base_dir)


def _peek(text: str) -> Any:
    """The document as data, only to find a catalog file; the server reports syntax errors."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _catalog_path(data: Any, base_dir: str | Path | None) -> Path | None:
    """The catalog file a workload names, resolved as the local CLI resolves it."""
    ref = data.get("catalog") if isinstance(data, dict) else None
    if not isinstance(ref, dict) or not isinstance(ref.get("file"), str) or ref.get("source", "file") != "file":
        return None
    path = Path(ref["file"])
    return Path(base_dir) / path if base_dir and not path.is_absolute() else path
