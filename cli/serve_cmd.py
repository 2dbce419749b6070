"""`solver-cli serve`: run the planner as a gRPC service (docs/grpc.md).

Runs until SIGTERM or Ctrl-C, then drains: calls in flight get --grace-s to finish.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cli.argtypes import MAX_SECONDS, number_in

TOKEN_ENV = "PLANNER_TOKEN"
METRICS_TOKEN_ENV = "PLANNER_METRICS_TOKEN"
EXIT_OK, EXIT_INPUT, EXIT_OTHER = 0, 2, 5


def add_parser(subparsers) -> None:
    s = subparsers.add_parser("serve", help="run the planner as a gRPC service",
                              description="Serve PlannerService (fleetplanner.v1) with health checking and reflection.")
    s.add_argument("--port", type=int, default=50051, help="TCP port; 0 picks a free one (default 50051)")
    s.add_argument("--address", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; use 0.0.0.0 or [::] to accept remote calls)")
    s.add_argument("--workers", type=int, default=None,
                   help="RPC threads (default: max concurrent solves + max queue + 4)")
    s.add_argument("--max-concurrent-solves", type=int, default=os.cpu_count() or 1, metavar="N",
                   help="solves running at once (default: CPU count)")
    s.add_argument("--max-queue", type=int, default=16, metavar="N",
                   help="solves waiting for a slot; more are refused with RESOURCE_EXHAUSTED (default 16)")
    s.add_argument("--max-message-mib", type=number_in(0, 2047, "MiB"), default=16.0, metavar="MIB",
                   help="largest request accepted (default 16 MiB)")
    s.add_argument("--tls-cert", metavar="PEM", help="server certificate chain (enables TLS; needs --tls-key)")
    s.add_argument("--tls-key", metavar="PEM", help="server private key")
    s.add_argument("--tls-client-ca", metavar="PEM",
                   help="CA bundle for client certificates: require mutual TLS")
    s.add_argument("--token", default=None,
                   help=f"bearer token every call must carry (default: ${TOKEN_ENV} if set; prefer the variable, "
                        "command lines are visible to other users)")
    s.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus metrics at http://METRICS-ADDRESS:PORT/metrics")
    s.add_argument("--metrics-address", default=None, metavar="ADDRESS",
                   help="address /metrics listens on (default: --address)")
    s.add_argument("--metrics-token", default=None,
                   help=f"bearer token /metrics requires (default: ${METRICS_TOKEN_ENV}, else the server's --token; "
                        "without either, /metrics is open)")
    s.add_argument("--grace-s", type=number_in(0, MAX_SECONDS, "s", low_allowed=True), default=30.0, metavar="SECONDS",
                   help="on SIGTERM, how long calls in flight may finish (default 30)")
    s.add_argument("--spare-workers", type=int, default=1, metavar="N",
                   help="warm worker processes kept beyond one per solve slot, so a replaced worker "
                        "never delays a call (default 1)")
    s.add_argument("--worker-max-jobs", type=int, default=1000, metavar="N",
                   help="recycle a worker process after this many jobs (default 1000)")
    s.add_argument("--worker-max-rss-mib", type=number_in(0, 1 << 20, "MiB"), default=250.0, metavar="MIB",
                   help="recycle a worker process whose memory after a job is above this (default 250)")
    s.add_argument("--worker-nice", type=int, default=5, metavar="N",
                   help="CPU priority of the worker processes below the server's own (nice increment, 0-19; "
                        "default 5: health checks and admission never wait behind solves)")
    s.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info")
    s.set_defaults(func=run)


def _read_pem(path: str | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read {what} {path}: {exc.strerror or exc}. To fix: check the path") from None


def run(args) -> int:
    from server import logs
    from server.app import ServerConfig, serve

    try:
        config = ServerConfig(
            address=args.address, port=args.port, workers=args.workers,
            max_concurrent_solves=args.max_concurrent_solves, max_queue=args.max_queue,
            max_receive_bytes=int(args.max_message_mib * 1024 * 1024),
            tls_cert=_read_pem(args.tls_cert, "--tls-cert"), tls_key=_read_pem(args.tls_key, "--tls-key"),
            tls_client_ca=_read_pem(args.tls_client_ca, "--tls-client-ca"),
            token=args.token or os.environ.get(TOKEN_ENV) or None,
            metrics_port=args.metrics_port, metrics_address=args.metrics_address,
            metrics_token=args.metrics_token or os.environ.get(METRICS_TOKEN_ENV) or None, grace_s=args.grace_s,
            spare_workers=args.spare_workers, worker_max_jobs=args.worker_max_jobs,
            worker_max_rss_mib=args.worker_max_rss_mib, worker_nice=args.worker_nice, log_level=args.log_level)
        problems = config.check()
        if not 0 <= args.port <= 65535:
            problems.append(f"--port {args.port} is not a TCP port (0-65535).")
        if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
            problems.append(f"--metrics-port {args.metrics_port} is not a TCP port (0-65535).")
        if problems:
            raise ValueError(" ".join(problems))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    logs.configure(args.log_level)
    try:
        return serve(config)
    except (OSError, RuntimeError) as exc:
        # e.g. the port is taken, or the TLS key does not match the certificate
        print(f"error: cannot start the server: {exc}", file=sys.stderr)
        return EXIT_OTHER
