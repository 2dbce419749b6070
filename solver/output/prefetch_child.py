"""The helper process of solver/output/prefetch.py: `at_load` for a plan's assignments.

Started by the planner as `python -I -c "...; main(sys.argv[1:])" PARENT_PID IN_FD OUT_FD`
on the planner's own module path (solver/output/prefetch.py, _HELPER): IN_FD holds the
pickle of (catalog, calibration, items), OUT_FD takes one record per value (4-byte
little-endian length, then the pickle of (index, value)), from the last item to the
first: the planner computes from the front.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import sys

from solver.compile.load_caps import at_load
from solver.lifeline import die_with_parent


def main(argv: list[str]) -> int:
    parent, in_fd, out_fd = (int(a) for a in argv)
    die_with_parent(parent)  # first: a planner that is gone already ends it here
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    gc.disable()  # short-lived, and its objects make no cycles (solver/collector.py)
    with os.fdopen(in_fd, "rb") as f:
        f.seek(0)
        catalog, calibration, items = pickle.load(f)
    for i in range(len(items) - 1, -1, -1):
        svc, c, replicas, routed = items[i]
        try:
            value = at_load(catalog, calibration, svc, c, replicas, routed)
        except Exception:  # noqa: BLE001 - the planner computes it again and reports what went wrong
            continue
        record = pickle.dumps((i, value), protocol=pickle.HIGHEST_PROTOCOL)
        data = memoryview(len(record).to_bytes(4, "little") + record)
        while data:  # the reader takes only whole records
            data = data[os.write(out_fd, data):]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
