"""Building the gRPC server (`create_server`) apart from running it until SIGTERM (`serve`).

Tests and benchmarks call `create_server` on 127.0.0.1:0 and drive the returned server;
`solver-cli serve` calls `serve`, which adds signal handling and graceful draining.
The server's process runs the RPC threads, admission, health, reflection and metrics;
requests are decoded, parsed and solved in a pool of worker processes (server/pool.py).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from server import logs, reflection
from server.admission import SolveGate
from server.auth import TokenInterceptor
from server.calls import CallRegistry
from server.errors import ErrorInterceptor
from server.metrics import Metrics
from server.metrics_http import serve_metrics
from server.observe import ObserveInterceptor
from server.pool import MAX_JOBS, MAX_RSS_MIB, SPARE_WORKERS, WorkerPool, stop_forkserver
from server.service import SERVICE_NAME, PlannerServicer, add_to_server

MIB = 1024 * 1024
RPC_BACKLOG_FACTOR = 4  # calls in flight or waiting for an RPC thread, per thread; beyond: RESOURCE_EXHAUSTED
CANCEL_MARGIN_S = 2.0  # after the grace: time for cancelled calls to answer CANCELLED before gRPC drops them


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
    metrics_token: str | None = None  # bearer token /metrics needs; default: `token`
    grace_s: float = 30.0  # on SIGTERM: how long calls in flight may finish
    spare_workers: int = SPARE_WORKERS  # warm worker processes beyond one per solver slot
    worker_max_jobs: int = MAX_JOBS  # a worker is recycled after this many jobs
    worker_max_rss_mib: float = MAX_RSS_MIB  # ... or when its memory after a job is above this
    worker_nice: int = 5  # workers' CPU priority below the server's own (0: the same)
    log_level: str | None = None  # workers log like the server (None: as the `planner.server` logger is set)

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
        if self.spare_workers < 0:
            out.append("--spare-workers must not be negative.")
        if self.worker_max_jobs < 1:
            out.append("--worker-max-jobs must be at least 1.")
        if not self.worker_max_rss_mib > 0:
            out.append("--worker-max-rss-mib must be positive.")
        if not 0 <= self.worker_nice <= 19:
            out.append("--worker-nice must be between 0 and 19.")
        return out


class PlannerServer:
    """A started gRPC server with its health service, metrics, solve gate and worker pool."""

    def __init__(self, grpc_server: grpc.Server, port: int, health_servicer: health.HealthServicer,
                 metrics: Metrics, gate: SolveGate, pool: WorkerPool, calls: CallRegistry, metrics_http=None):
        self.grpc_server = grpc_server
        self.port = port
        self.health = health_servicer
        self.metrics = metrics
        self.gate = gate
        self.pool = pool
        self.calls = calls
        self._metrics_http = metrics_http
        self.metrics_port = metrics_http.server_port if metrics_http is not None else None
        self._stopped: threading.Event | None = None

    def stop(self, grace_s: float | None = None) -> threading.Event:
        """Stop taking calls (health turns NOT_SERVING, new calls are refused), let calls in
        flight finish for up to grace_s, then cancel the rest: they answer CANCELLED. The
        worker processes are stopped last. The returned event is set when all is done."""
        if self._stopped is not None:
            if not grace_s:
                self.calls.cancel_all()  # a second stop without grace: cut the grace short
            return self._stopped
        self._stopped = threading.Event()
        grace = max(grace_s or 0.0, 0.0)
        self.health.enter_graceful_shutdown()
        self.calls.begin_shutdown()
        grpc_done = self.grpc_server.stop(grace + CANCEL_MARGIN_S)  # refuses new calls from now on

        def drain() -> None:
            if not self.calls.wait_idle(grace):
                n = self.calls.cancel_all()
                logs.event("server.grace_ended", calls_cancelled=n)
            grpc_done.wait()
            self.pool.close()
            if self._metrics_http is not None:
                self._metrics_http.shutdown()
                self._metrics_http.server_close()
            self._stopped.set()

        threading.Thread(target=drain, daemon=True, name="server-stop").start()
        return self._stopped

    def wait_for_termination(self, timeout_s: float | None = None) -> bool:
        return self.grpc_server.wait_for_termination(timeout_s)


def create_server(config: ServerConfig) -> tuple[PlannerServer, int]:
    """Build, bind and start the server (and its worker processes); returns it and the bound port."""
    problems = config.check()
    if problems:
        raise ValueError(" ".join(problems))
    metrics = Metrics()
    gate = SolveGate(config.max_concurrent_solves, config.max_queue, metrics)
    log_level = config.log_level
    if log_level is None and logs.log.handlers:
        log_level = logging.getLevelName(logs.log.level).lower()
    pool = WorkerPool(config.max_concurrent_solves, config.spare_workers, config.worker_max_jobs,
                      config.worker_max_rss_mib, log_level, metrics, config.worker_nice)
    calls = CallRegistry()
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
        # A bounded backlog, but well above the threads: a burst of solves that the gate will
        # turn away (QUEUE_FULL) in a moment must not get a health check refused meanwhile.
        maximum_concurrent_rpcs=RPC_BACKLOG_FACTOR * threads,
    )
    add_to_server(PlannerServicer(gate, pool, metrics, calls), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable(server, (SERVICE_NAME, health.SERVICE_NAME))

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
    metrics_http = None
    try:
        pool.start(wait=True)  # warm workers before the first call: no call pays for a start
        if config.metrics_port is not None:
            metrics_http = serve_metrics(metrics.registry, config.metrics_port,
                                         config.metrics_address or config.address,
                                         config.metrics_token or config.token)
    except BaseException:
        pool.close()
        raise
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return PlannerServer(server, port, health_servicer, metrics, gate, pool, calls, metrics_http), port


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
               workers=config.thread_count(), worker_processes=planner.pool.pids(), metrics_port=planner.metrics_port)
    if config.token and config.tls_cert is None and config.address not in ("127.0.0.1", "localhost", "::1"):
        logs.event("server.warning", message="the bearer token travels in plain text; add --tls-cert/--tls-key")
    try:
        while not stopping.wait(0.5):
            pass
        done = planner.stop(config.grace_s)  # from here on, new calls are refused
        logs.event("server.draining", signal=received[0], grace_s=config.grace_s,
                   solves_running=planner.gate.running, solves_waiting=planner.gate.waiting)
        stopping.clear()
        while not done.wait(0.2):
            if stopping.is_set():  # a second signal: no more grace
                logs.event("server.grace_cut_short", signal=received[-1])
                planner.stop(0)
                stopping.clear()
        stop_forkserver()  # this process is about to exit: reap the workers' forkserver too
        logs.event("server.stopped")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 0
