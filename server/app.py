"""Building the gRPC server (`create_server`) apart from running it until SIGTERM (`serve`).

Tests and benchmarks call `create_server` on 127.0.0.1:0 and drive the returned server;
`solver-cli serve` calls `serve`, which adds signal handling and graceful draining.
"""

from __future__ import annotations

import os
import signal
import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from server import logs
from server.admission import SolveGate
from server.auth import TokenInterceptor
from server.errors import ErrorInterceptor
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
from server.metrics import Metrics
from server.observe import ObserveInterceptor
from server.service import PlannerServicer

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["PlannerService"].full_name
MIB = 1024 * 1024


@dataclass
class ServerConfig:
    address: str = "127.0.0.1"  # loopback unless asked: the service may run without TLS or token
    port: int = 50051  # 0: any free port
    max_concurrent_solves: int = field(default_factory=lambda: os.cpu_count() or 1)  # one core per solve
    max_queue: int = 16  # solves waiting for a slot; more get RESOURCE_EXHAUSTED
    workers: int | None = None  # RPC threads; default: solves + queue + 4 for quick calls
    max_receive_bytes: int = 16 * MIB  # a 5000-service workload is ~1 MiB of JSON
    max_send_bytes: int = 64 * MIB
    tls_cert: bytes | None = None  # PEM; with tls_key: serve TLS
    tls_key: bytes | None = None
    tls_client_ca: bytes | None = None  # PEM; clients must present a certificate it signed (mTLS)
    token: str | None = None  # bearer token every call (but health checks) must carry
    metrics_port: int | None = None  # Prometheus /metrics over HTTP
    metrics_address: str | None = None  # default: the same address as the gRPC port
    grace_s: float = 30.0  # on SIGTERM: how long calls in flight may finish

    def thread_count(self) -> int:
        return self.workers or self.max_concurrent_solves + self.max_queue + 4

    def check(self) -> list[str]:
        """Problems with the settings, as sentences with a fix."""
        out = []
        if self.max_concurrent_solves < 1:
            out.append("--max-concurrent-solves must be at least 1.")
        if self.max_queue < 0:
            out.append("--max-queue must not be negative.")
        if self.workers is not None and self.workers <= self.max_concurrent_solves + self.max_queue:
            out.append(f"--workers ({self.workers}) must exceed --max-concurrent-solves + --max-queue "
                       f"({self.max_concurrent_solves + self.max_queue}), or queued solves would block quick calls. "
                       "To fix: raise --workers or leave it out")
        if (self.tls_cert is None) != (self.tls_key is None):
            out.append("TLS needs both --tls-cert and --tls-key.")
        if self.tls_client_ca is not None and self.tls_cert is None:
            out.append("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key too.")
        # gRPC reports a bad PEM only as "failed to bind"; say what is wrong instead.
        for name, pem, marker in (("--tls-cert", self.tls_cert, b"-----BEGIN CERTIFICATE-----"),
                                  ("--tls-key", self.tls_key, b"PRIVATE KEY-----"),
                                  ("--tls-client-ca", self.tls_client_ca, b"-----BEGIN CERTIFICATE-----")):
            if pem is not None and marker not in pem:
                out.append(f"{name} is not a PEM file (no {marker.decode().strip('-')} block). "
                           "To fix: pass the PEM-encoded file")
        if self.grace_s < 0:
            out.append("--grace-s must not be negative.")
        return out


class PlannerServer:
    """A started gRPC server with its health service, metrics and solve gate."""

    def __init__(self, grpc_server: grpc.Server, port: int, health_servicer: health.HealthServicer,
                 metrics: Metrics, gate: SolveGate, metrics_http=None):
        self.grpc_server = grpc_server
        self.port = port
        self.health = health_servicer
        self.metrics = metrics
        self.gate = gate
        self._metrics_http = metrics_http
        self.metrics_port = metrics_http.server_port if metrics_http is not None else None

    def stop(self, grace_s: float | None = None) -> threading.Event:
        """Stop taking calls (health turns NOT_SERVING), let calls in flight finish for up to
        grace_s, then cancel the rest. The returned event is set when all are done."""
        self.health.enter_graceful_shutdown()
        done = self.grpc_server.stop(grace_s)
        if self._metrics_http is not None:
            self._metrics_http.shutdown()
        return done

    def wait_for_termination(self, timeout_s: float | None = None) -> bool:
        return self.grpc_server.wait_for_termination(timeout_s)


def create_server(config: ServerConfig) -> tuple[PlannerServer, int]:
    """Build, bind and start the server; returns it and the bound port."""
    problems = config.check()
    if problems:
        raise ValueError(" ".join(problems))
    metrics = Metrics()
    gate = SolveGate(config.max_concurrent_solves, config.max_queue, metrics)
    interceptors = [ObserveInterceptor(metrics)]
    if config.token:
        interceptors.append(TokenInterceptor(config.token))
    interceptors.append(ErrorInterceptor())
    threads = config.thread_count()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rpc"),
        interceptors=interceptors,
        options=[("grpc.max_receive_message_length", config.max_receive_bytes),
                 ("grpc.max_send_message_length", config.max_send_bytes),
                 ("grpc.so_reuseport", 0)],  # never share a port silently with another server
        maximum_concurrent_rpcs=threads,  # past every thread: RESOURCE_EXHAUSTED, not an unbounded backlog
    )
    pb_grpc.add_PlannerServiceServicer_to_server(PlannerServicer(gate, metrics), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)

    target = f"{config.address}:{config.port}"
    try:
        if config.tls_cert is not None:
            creds = grpc.ssl_server_credentials([(config.tls_key, config.tls_cert)],
                                                root_certificates=config.tls_client_ca,
                                                require_client_auth=config.tls_client_ca is not None)
            port = server.add_secure_port(target, creds)
        else:
            port = server.add_insecure_port(target)
    except RuntimeError:
        port = 0
    if port == 0:
        why = "in use, or not an address of this host"
        if config.tls_cert is not None:
            why += "; or the TLS key does not match the certificate"
        raise OSError(f"cannot listen on {target} ({why})")
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    metrics_http = None
    if config.metrics_port is not None:
        metrics_http = metrics.serve_http(config.metrics_port, config.metrics_address or config.address)
    return PlannerServer(server, port, health_servicer, metrics, gate, metrics_http), port


def serve(config: ServerConfig) -> int:
    """Run until SIGTERM/SIGINT, then drain: calls in flight get `grace_s` to finish."""
    planner, port = create_server(config)
    stopping = threading.Event()
    received: list[str] = []

    def on_signal(signum, _frame):
        received.append(signal.Signals(signum).name)
        stopping.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    logs.event("server.listening", address=config.address, port=port, tls=config.tls_cert is not None,
               mutual_tls=config.tls_client_ca is not None, token=bool(config.token),
               max_concurrent_solves=config.max_concurrent_solves, max_queue=config.max_queue,
               workers=config.thread_count(), metrics_port=planner.metrics_port)
    if config.token and config.tls_cert is None and config.address not in ("127.0.0.1", "localhost", "::1"):
        logs.event("server.warning", message="the bearer token travels in plain text; add --tls-cert/--tls-key")
    try:
        while not stopping.wait(0.5):
            pass
        done = planner.stop(config.grace_s)  # from here on, new calls are refused
        logs.event("server.draining", signal=received[0], grace_s=config.grace_s,
                   solves_running=planner.gate.running, solves_waiting=planner.gate.waiting)
        done.wait()
        logs.event("server.stopped")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0
