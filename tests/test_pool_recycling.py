"""The worker pool's recycling: one worker at a time for the job count, never for memory,
and the forkserver's preload (with its warm-up solve) starts no thread.

The recycling checks drive WorkerPool's bookkeeping with stand-in workers (no processes):
what matters is which worker is retired when, not the fork.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from server.pool import Worker, WorkerPool

ROOT = Path(__file__).resolve().parents[1]


class _Process:
    """Stands in for a multiprocessing.Process: killing and reaping it does nothing."""

    def kill(self) -> None:
        pass

    def join(self, timeout: float | None = None) -> None:
        pass


class _Conn:
    def close(self) -> None:
        pass


class _StageBuf:
    value = b""


def _worker(pid: int, jobs: int) -> Worker:
    return Worker(_Process(), _Conn(), _Conn(), pid, 100.0, _StageBuf(), jobs=jobs)


def _pool(max_jobs: int) -> WorkerPool:
    return WorkerPool(size=2, spare=1, max_jobs=max_jobs, max_rss_mib=400.0)  # target: 3 workers


def test_workers_due_together_are_retired_one_at_a_time():
    pool = _pool(max_jobs=10)
    a, b, spare = _worker(1, 9), _worker(2, 9), _worker(3, 0)
    pool._busy.update((a, b))
    pool._idle.append(spare)

    pool._checkin(a, rss_mib=150.0)  # its tenth job, the pool full: retired
    assert pool.restarts["jobs"] == 1 and a not in pool._busy and a not in pool._idle

    pool._checkin(b, rss_mib=150.0)  # due too, but a's replacement is not ready: b runs on
    assert pool.restarts["jobs"] == 1 and b in pool._idle and b.jobs == 10

    replacement = _worker(4, 0)
    pool._idle.appendleft(replacement)  # what the manager does once the new worker is ready
    taken = pool._idle.pop()
    assert taken is b
    pool._busy.add(taken)
    pool._checkin(b, rss_mib=150.0)  # the pool is full again: now b goes
    assert pool.restarts["jobs"] == 2 and b not in pool._idle and b not in pool._busy
    assert list(pool._idle) == [replacement, spare]


def test_memory_retires_a_worker_even_while_another_is_replaced():
    pool = _pool(max_jobs=10)
    a, b = _worker(1, 9), _worker(2, 3)
    pool._busy.update((a, b))  # one short of the target: a replacement is on its way
    pool._checkin(b, rss_mib=450.0)
    assert pool.restarts["memory"] == 1 and b not in pool._idle and b not in pool._busy
    pool._checkin(a, rss_mib=450.0)  # due for both reasons while short: memory does not wait
    assert pool.restarts["memory"] == 2


def test_a_due_worker_of_a_full_pool_is_retired_for_its_job_count():
    pool = _pool(max_jobs=1)
    a, b, c = _worker(1, 0), _worker(2, 0), _worker(3, 0)
    pool._busy.add(a)
    pool._idle.extend((b, c))
    pool._checkin(a, rss_mib=450.0)  # both reasons, the pool full: counted as "jobs", as before
    assert pool.restarts == {"jobs": 1}


def test_the_forkservers_preload_and_its_warm_up_solve_start_no_thread():
    """Forking a process with threads could deadlock the child (server/preload.py)."""
    code = textwrap.dedent("""
        import os
        import numpy  # its BLAS may start threads of its own when it loads: counted before
        before = len(os.listdir("/proc/self/task"))
        import server.preload
        from solver.optimize.backends.mathopt_backend import SOLVES
        print(before, len(os.listdir("/proc/self/task")), len(SOLVES))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    before, after, remembered = map(int, out.stdout.split())
    assert after == before
    assert remembered > 0  # the warm-up solve ran (its proof is remembered for the workers)


def test_workers_import_the_servers_code_not_the_current_directorys(tmp_path):
    """Python 3.11's forkserver puts the current directory first on its path: a server
    started from a folder holding a server/ or solver/ package (another checkout) would
    have run that code in its workers."""
    decoys, marker = tmp_path / "cwd", tmp_path / "decoy-imported"
    for package in ("server", "solver", "cli"):
        (decoys / package).mkdir(parents=True)
        (decoys / package / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write({package!r})\n")
    script = tmp_path / "start_pool.py"  # a script: its own folder, not the current one, heads the path
    script.write_text(textwrap.dedent("""
        from server.pool import WorkerPool

        if __name__ == "__main__":
            pool = WorkerPool(1, 0).start()
            print(len(pool.pids()))
            pool.close()
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=decoys,
                         timeout=180)
    assert not marker.exists(), f"imported from the current directory: {marker.read_text()}"
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1"]


def test_memory_a_trim_cannot_give_back_raises_the_workers_baseline(monkeypatch):
    """A worker trims after jobs that grew it by TRIM_ABOVE_MIB; what stays after a trim
    is its new floor, so that it does not collect and trim after every job from then on."""
    from server import worker

    resident = iter([70.0, 68.0, 70.0, 90.0, 60.0, 75.0])  # rss_mib() readings, in order
    trims = []
    monkeypatch.setattr(worker, "rss_mib", lambda: next(resident))
    monkeypatch.setattr(worker, "_give_back_memory", lambda: trims.append(1))
    assert worker.TRIM_ABOVE_MIB == 16
    assert worker.settle_memory(50.0) == (68.0, 68.0)  # grew 20: trimmed, 18 stayed
    assert worker.settle_memory(68.0) == (70.0, 68.0)  # +2: nothing to do
    assert worker.settle_memory(68.0) == (60.0, 68.0)  # +22: trimmed back below the floor
    assert worker.settle_memory(68.0) == (75.0, 68.0)
    assert len(trims) == 2
