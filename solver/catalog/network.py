"""The network of each offer: what joins a prefill worker to a decode worker.

Two links per instance: its Ethernet (VPC) bandwidth, which every instance has, and an
RDMA fabric (InfiniBand, RoCE, AWS EFA, GCP GPUDirect) where the offer has one. The RDMA
figure is the catalog's `inter_node_gbs` (gigabytes per second, the same figure replicas
spanning instances use); Ethernet figures come with their sources from
`data/offer_network.csv` (gathered from provider documentation; its `source` column says
where, and docs/disaggregation.md lists the caveats). An offer without a sourced Ethernet figure gets
DEFAULT_ETHERNET_GBIT_S: low on purpose, so a plan never counts on bandwidth nobody stated.
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path

from solver.catalog.types import Offer
from solver.dataclass_repr import dataclass

DEFAULT_ETHERNET_GBIT_S = 10.0  # the smallest figure GPU instances state (e.g. "up to 10 Gigabit")
_DATA = Path(__file__).parent / "data" / "offer_network.csv"


@dataclass(frozen=True)
class Links:
    """One instance's links to other instances, in gigabits per second."""

    ethernet_gbit_s: float
    rdma_gbit_s: float | None  # None: no RDMA fabric
    ethernet_source: str  # where the Ethernet figure comes from ("default" when none is stated)


@functools.lru_cache(maxsize=1)
def _stated() -> dict[tuple[str, str], tuple[float | None, float | None, str]]:
    """(provider, instance name) -> (Ethernet Gbit/s, RDMA Gbit/s, source) as the data file states them."""
    out = {}
    with _DATA.open(newline="") as f:
        for row in csv.DictReader(f):
            ethernet = (row.get("network_gbps") or "").strip()
            # "up to" figures are bursts: a KV stream is sustained, so the stated baseline counts.
            baseline = re.search(r"baseline ([0-9.]+)", row.get("note") or "")
            if baseline:
                ethernet = baseline.group(1)
            rdma = (row.get("rdma_gbps") or "").strip() if (row.get("rdma") or "").strip() == "true" else ""
            out[(row["provider"], row["name"])] = (float(ethernet) if ethernet else None,
                                                    float(rdma) if rdma else None, row.get("source", ""))
    return out


def offer_links(offer: Offer) -> Links:
    """The offer's links: the data file's sourced figures first; the catalog's inter-node
    fabric (GB/s, as replicas spanning instances use it) for RDMA it does not state."""
    ethernet, rdma, source = _stated().get((offer.provider, offer.name), (None, None, ""))
    if rdma is None and offer.inter_node_fabric and offer.inter_node_gbs:
        rdma = offer.inter_node_gbs * 8
    if ethernet is None:
        ethernet, source = DEFAULT_ETHERNET_GBIT_S, "default"
    return Links(ethernet, rdma, source)
