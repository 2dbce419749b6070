"""The planner as a gRPC service (see docs/grpc.md)."""
