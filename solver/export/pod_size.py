"""CPU and memory a replica's pod requests: its share of the instance, and enough to load the model.

The share: the replica's GPUs' fraction of the instance's vCPUs and host memory, 80% of
it (the rest for the node's own reservations), so replicas packed onto one instance fit
beside each other. Memory is at least the weights one pod loads (its pipeline stage's
part) plus the engine's own use: the engines read the checkpoint through host memory on
the way to the GPUs, and a pod scheduled with less (an 8B fp16 model is 15 GiB of weights;
its share of a small host can be 3 GiB) gets evicted or OOM-killed while loading. Never
more than the instance's host memory minus a reserve, or no node of the planned type could
take the pod; when even that is short of what loading needs, the file and stderr say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solver.export.units import Unit
from solver.models.library import get_model
from solver.perf.api import BYTES_PER_ELEMENT

HOST_SHARE = 0.8  # of the instance's vCPUs and memory a replica's share requests
HOST_ALLOCATABLE = 0.9  # of the host's memory a pod can get at most (kubelet, system daemons, eviction reserve)
ENGINE_OVERHEAD_GIB = 4  # the engine's process beside the weights: CUDA context, tokenizer, Python, buffers
DEFAULT_CPU_PER_GPU = 2  # when the catalog does not state the instance's host size
DEFAULT_MEMORY_GIB_PER_GPU = 16
GIB = 2**30


@dataclass(frozen=True)
class PodSize:
    cpu: int
    memory_gib: int
    notes: tuple[str, ...] = ()  # comments for the file
    warning: str = ""  # for stderr


def weights_gib_per_pod(u: Unit) -> float | None:
    """Weights one pod loads: the model at the unit's precision, split over its pipeline stages.
    None where the library does not know the model (inline models, measured profiles)."""
    arch = get_model(u.model) if u.model else None
    if arch is None:
        return None
    bytes_per_param = BYTES_PER_ELEMENT.get(u.precision or "fp16", 2.0)
    return arch.params_b * 1e9 * bytes_per_param / GIB / u.pipeline_parallel


def pod_size(u: Unit) -> PodSize:
    share = u.gpus_per_node / u.gpus_per_instance
    cpu = max(1, math.floor(u.vcpus * share * HOST_SHARE)) if u.vcpus else DEFAULT_CPU_PER_GPU * u.gpus_per_node
    memory = (max(1, math.floor(u.host_memory_gib * share * HOST_SHARE)) if u.host_memory_gib
              else DEFAULT_MEMORY_GIB_PER_GPU * u.gpus_per_node)
    # Where the offer states no host memory (owned servers, some catalogs) the request is a
    # default per GPU, not a share of anything: say which.
    basis = ("the replica's share of the host" if u.host_memory_gib
             else f"the default of {DEFAULT_MEMORY_GIB_PER_GPU} GiB per GPU (the offer states no host memory)")
    weights = weights_gib_per_pod(u)
    if weights is None:
        return PodSize(cpu, memory)
    need = math.ceil(weights + ENGINE_OVERHEAD_GIB)
    load = f"the {weights:.1f} GiB of {u.precision or 'fp16'} weights this pod loads + {ENGINE_OVERHEAD_GIB} GiB for the engine"
    if need <= memory:
        return PodSize(cpu, memory, (f"Memory request: {memory} GiB, {basis}; loading needs {need} GiB ({load}).",))
    cap = math.floor(u.host_memory_gib * HOST_ALLOCATABLE) if u.host_memory_gib else None
    if cap is not None and need > cap:
        message = (f"{u.name}: loading needs about {need} GiB of host memory ({load}), but the plan's "
                   f"{u.instance_type} has {u.host_memory_gib:g} GiB; the pod requests {cap} GiB so that it can be "
                   "scheduled there, and may fail to load: plan with offers that have more host memory")
        return PodSize(cpu, cap, ("Memory: " + message[len(u.name) + 2:] + ".",), warning=message)
    notes = [f"Memory request: {need} GiB, what loading needs ({load}); {basis} is {memory} GiB."]
    if u.shares_instances:
        notes.append("That is more than this replica's share of the instance the plan packs it on: the packed "
                     "replicas may not all fit on one node.")
    return PodSize(cpu, need, tuple(notes))
