"""GPU fleet planner core: workload -> cheapest proven-optimal GPU fleet.

This package never imports grpc or protobuf; the CLI, the gRPC server and batch
reviews all call :func:`solver.plan.plan`.
"""

__version__ = "0.1.0"
