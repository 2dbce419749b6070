"""Where one replica of N GPUs is cheapest to buy: used by `estimate` (CLI and API)."""

from __future__ import annotations

from dataclasses import dataclass

from solver.catalog.loader import interconnect_for
from solver.catalog.types import Catalog, GpuType


@dataclass(frozen=True)
class Host:
    """How one replica is bought: an offer of the catalog, or the bare GPU when none hosts it."""

    offer_id: str | None
    interconnect: str
    usable_memory_gib: float
    instances_per_replica: int
    inter_node_gbs: float | None
    price_usd_per_replica_hour: float | None


def cheapest_host(catalog: Catalog, gpu: GpuType, gpus: int) -> Host | None:
    """The cheapest offer per replica: instances that hold whole replicas, else replicas
    spanning instances over an inter-node fabric; None when no offer can host it."""
    best = None
    for o in catalog.offers:
        if o.gpu != gpu.name:
            continue
        n = o.gpus_per_instance
        if gpus <= n and n % gpus == 0:
            cost, span = o.price_usd_per_hour / (n // gpus), 1
        elif o.inter_node_fabric and gpus % n == 0:
            cost, span = o.price_usd_per_hour * (gpus // n), gpus // n
        else:
            continue
        if best is None or cost < best.price_usd_per_replica_hour:
            best = Host(o.id, o.interconnect, catalog.usable_memory_gib(o), span, o.inter_node_gbs, cost)
    return best


def unbought_host(gpu: GpuType, gpus: int) -> Host:
    """The bare GPU's figures, for estimates of sizes no offer sells."""
    return Host(None, interconnect_for(gpu, gpus), gpu.memory_gib, 1, None, None)
