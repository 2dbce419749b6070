"""Python client of the planner's gRPC service (fleetplanner.v1.PlannerService).

    from planner_client import PlannerClient, PlannerClientError

    with PlannerClient("localhost:50051", token="...", timeout_s=30) as client:
        plan = client.solve({"services": [...]})   # the CLI's `--format json` plan

See clients/python/README.md.
"""

from planner_client.client import PlannerClient
from planner_client.errors import PlannerClientError

__all__ = ["PlannerClient", "PlannerClientError"]
