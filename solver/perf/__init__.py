"""Performance model: per-replica throughput and latency of one LLM serving configuration.

`estimate(query)` is the single entry point the planner uses for LLMs (`estimate_many`
for many queries at once: the same results, on numpy arrays); measured profiles in a
workload bypass it. The physics is in `llm.py`, the fitted constants and
the calibration rows in `calibration.py`; docs/performance-model.md explains both.
Override constants per workload with `Calibration.from_overrides({...})`.
"""

from solver.perf.api import Calibration, PerfEstimate, PerfQuery
from solver.perf.llm import estimate, estimate_many, links_read, memory_budget

__all__ = ["PerfEstimate", "PerfQuery", "Calibration", "estimate", "estimate_many", "links_read", "memory_budget"]
