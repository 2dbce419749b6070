import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def cli_path() -> str:
    """The installed console script (the real CLI, run as a subprocess)."""
    exe = Path(sys.executable).with_name("solver-cli")
    if exe.exists():
        return str(exe)
    found = shutil.which("solver-cli")
    if not found:
        pytest.fail("solver-cli is not installed: run `pip install -e .[test]`")
    return found


@pytest.fixture(scope="session")
def solver_cli() -> str:
    return cli_path()


@pytest.fixture(scope="module")
def a100_vllm07():
    """Llama-3.1-8B on one A100-40GB with vLLM 0.7 (prefill-first, a 4,096-token context and
    budget), slowed as the planner's default confidence slows it (bench/queueing_vs_sim.py's
    a100-8b-vllm07-4k): the queueing model's tests against the simulator."""
    from solver.catalog import default_catalog
    from solver.catalog.hosting import cheapest_host
    from solver.confidence import slowdown
    from solver.models import get_model
    from solver.perf import PerfQuery, estimate
    from solver.perf.queueing import replica_for

    catalog = default_catalog()
    gpu = catalog.gpus["A100-40GB"]
    host = cheapest_host(catalog, gpu, 1)
    q = PerfQuery(model=get_model("llama-3.1-8b"), gpu=gpu, gpus_per_replica=1, interconnect=host.interconnect,
                  usable_memory_gib=host.usable_memory_gib, precision="fp16", engine="vllm-0.7",
                  instances_per_replica=host.instances_per_replica, inter_node_gbs=host.inter_node_gbs,
                  max_model_len=4096)
    assert estimate(q).feasible
    return replica_for(q).slowed(slowdown(0.9))
