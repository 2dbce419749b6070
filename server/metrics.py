"""Prometheus metrics of one server: RPCs, solves, latency, queue and in-flight solves.

Each server owns its registry (not the process-global one), so several servers in one
process (tests) keep separate counts; `--metrics-port` exposes it over HTTP.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

LATENCY_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rpcs = Counter("planner_rpcs", "RPCs handled, by method and gRPC status code",
                            ["method", "code"], registry=r)
        self.rpc_latency = Histogram("planner_rpc_latency_seconds", "RPC latency, by method",
                                     ["method"], buckets=LATENCY_BUCKETS_S, registry=r)
        self.solves = Counter("planner_solves", "Solves finished, by outcome (optimal, feasible, infeasible, "
                              "invalid, timeout, cancelled, rejected, error)", ["outcome"], registry=r)
        self.solve_latency = Histogram("planner_solve_seconds", "Time inside the planner per solve (queue excluded)",
                                       buckets=LATENCY_BUCKETS_S, registry=r)
        self.queue_wait = Histogram("planner_solve_queue_seconds", "Time a solve waited for a free solver slot",
                                    buckets=LATENCY_BUCKETS_S, registry=r)
        self.in_flight = Gauge("planner_solves_in_flight", "Solves running now", registry=r)
        self.queued = Gauge("planner_solves_queued", "Solves waiting for a free solver slot", registry=r)
        self.stops = Counter("planner_cancelled_jobs", "Cancelled jobs, by the stage they were in and how they "
                             "stopped (cooperative: by themselves; killed: their worker was killed)",
                             ["stage", "how"], registry=r)
        self.stop_latency = Histogram("planner_cancel_stop_seconds", "From a call's cancel (or deadline) to its "
                                      "worker being stopped or killed", buckets=(0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
                                                                                  0.5, 1, 2.5), registry=r)
        self.worker_restarts = Counter("planner_worker_retirements", "Worker processes taken out of the pool, "
                                       "by reason (jobs, memory, killed, died)", ["reason"], registry=r)
        self.workers_started = Counter("planner_workers_started", "Worker processes started", registry=r)

    def value(self, name: str, labels: dict[str, str] | None = None) -> float:
        """Current value of one sample (tests and the load benchmark read it)."""
        v = self.registry.get_sample_value(name, labels or {})
        return 0.0 if v is None else v

    def serve_http(self, port: int, address: str = "0.0.0.0"):
        """Expose /metrics; returns the HTTP server (call .shutdown() to stop it)."""
        http_server, _thread = start_http_server(port, addr=address, registry=self.registry)
        return http_server
