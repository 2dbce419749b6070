#!/usr/bin/env python3
"""Benchmark: the queueing model's saturation rate, per configuration, in one process.

The 32 configurations of tests/test_queueing_speed_equivalence.py (its replicas and
class mixes); each is timed best of five on a fresh model (nothing memoised). Prints
the median and the total milliseconds. Run it on two checkouts back to back to compare:

    PYTHONPATH=/path/to/checkout python bench/saturation_speed.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_queueing_speed_equivalence import CASES, _replica  # noqa: E402

from solver.perf.queueing.model import ReplicaLoadModel  # noqa: E402


def main() -> int:
    best = []
    for model, gpu, gpus, precision, engine, classes, cv, *_ in CASES:
        replica = _replica(model, gpu, gpus, precision, engine)
        times = []
        for _ in range(5):
            m = ReplicaLoadModel(replica, classes, cv)
            t0 = time.perf_counter()
            m.saturation_rate()
            times.append(time.perf_counter() - t0)
        best.append(min(times))
    import solver
    print(f"{len(best)} configurations ({Path(solver.__file__).parents[1]}): saturation rate median "
          f"{statistics.median(best) * 1e3:.2f} ms, total {sum(best) * 1e3:.1f} ms (best of 5 each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
