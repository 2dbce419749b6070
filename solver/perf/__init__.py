"""Performance model: per-replica throughput and latency of one configuration.

`estimate(query)` is the single entry point the planner uses for LLMs; measured
profiles in a workload bypass it.
"""

from solver.perf.api import PerfEstimate, PerfQuery, Calibration
from solver.perf.llm import estimate

__all__ = ["PerfEstimate", "PerfQuery", "Calibration", "estimate"]
