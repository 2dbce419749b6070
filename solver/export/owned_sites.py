"""Owned-site placements: which of the plan's owned servers hold which replicas, and on which GPUs.

A plan says "2 instances of owned/dc-east-H100-SXM-8gpu" and "12 chat replicas of 1 GPU,
2 assistant replicas of 2 GPUs" on that offer; the people who run the site need the
servers: what goes where, how many GPUs stay free, what the site draws. This module packs
each owned offer's replicas onto its servers (the plan's instance count of that offer)
and groups the servers by site; site_files.py writes them out.

Packing is first-fit decreasing, the evaluator's rule (solver/evaluate.py `_place`,
re-stated here so that the export reads the plan's JSON alone): replicas spanning several
servers take whole servers first, then single-server replicas by decreasing GPUs, each on
the lowest-numbered server with room. Each server fills from GPU 0 up, so a replica's GPU
indices are the next free ones. When every replica's GPUs per server divide the server's
size and each size divides the larger ones (powers of two, as the planner uses on owned
servers), this never fails while the GPUs asked for fit the GPUs running: every server's
used count is then a multiple of the replica being placed, so a server with any free GPU
has enough. A hand-edited plan can break that; it is refused, never written half-placed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from solver.catalog.owned import OWNED_PROVIDER
from solver.errors import FieldViolation, InputError
from solver.export import names as naming
from solver.export.units import Unit

SITE_LABEL = "fleet-planner/site"  # the node label (Kubernetes) naming the owned site a node belongs to
_FIX = ("export the plan exactly as `solver-cli solve` wrote it (a hand-edited plan must keep each owned "
        "offer's replicas within its servers' GPUs)")


@dataclass(frozen=True)
class ReplicaSlot:
    """One replica's GPUs on one server (a replica spanning servers has a slot on each)."""

    service: str
    unit: str  # the deployment unit (Kubernetes workload / SkyPilot service) the replica belongs to
    precision: str | None
    gpu_indices: tuple[int, ...]
    node: int = 0  # which of the replica's servers this is (0 for a single-server replica)
    nodes: int = 1  # servers the replica spans


@dataclass
class Server:
    """One owned server of the plan: an instance of an owned offer."""

    offer_id: str
    index: int  # 0-based among the plan's instances of this offer
    gpu: str
    gpus: int
    power_kw: float | None  # at full board power, host included (the plan's figure); None: not in the plan
    slots: list[ReplicaSlot] = field(default_factory=list)
    whole: bool = False  # taken whole by a replica spanning servers: no GPU left for another replica

    @property
    def gpus_used(self) -> int:
        return sum(len(s.gpu_indices) for s in self.slots)

    @property
    def gpus_free(self) -> int:
        return 0 if self.whole else self.gpus - self.gpus_used


@dataclass
class SitePlacement:
    """An owned site's running servers and their replicas, with what the plan says of the site."""

    site: str
    label: str  # the value of the site's node label (SITE_LABEL)
    file_stem: str  # its placement file's name, less `.yaml`
    servers: list[Server]
    gpus_owned: int | None  # at the site, of the offers the plan could use (the plan's sites[]); None: not stated
    power_cap_kw: float | None

    @property
    def gpus_running(self) -> int:
        return sum(s.gpus for s in self.servers)

    @property
    def gpus_used(self) -> int:
        return sum(s.gpus_used for s in self.servers)

    @property
    def power_kw(self) -> float | None:
        """The running servers at full board power; None if any server's figure is missing (never a partial sum)."""
        figures = [s.power_kw for s in self.servers]
        return None if any(f is None for f in figures) else round(sum(figures), 6)


def owned_units(units: tuple[Unit, ...] | list[Unit]) -> list[Unit]:
    return [u for u in units if u.provider == OWNED_PROVIDER]


def place_owned(plan: dict, units: tuple[Unit, ...] | list[Unit], where: str = "fleet") -> list[SitePlacement]:
    """The plan's owned servers per site, each replica of an owned unit on one (or, spanning, several)
    of them. `plan`: the (period's) plan the units were cut from; `where`: its fleet's path in the plan
    file, for messages. Raises InputError when the replicas do not fit the servers."""
    lines = _owned_lines(plan, where)
    by_offer: dict[str, list[Unit]] = {}
    for u in owned_units(units):
        by_offer.setdefault(u.offer_id, []).append(u)
    servers: dict[str, list[Server]] = {}
    errors: list[FieldViolation] = []
    for offer_id, (i, line) in sorted(lines.items()):
        try:
            servers[offer_id] = _pack(line, by_offer.get(offer_id, []), f"{where}[{i}]")
        except InputError as exc:
            errors.extend(exc.violations)
    if errors:
        raise InputError(errors)
    return _by_site(plan, lines, servers)


def _owned_lines(plan: dict, where: str) -> dict[str, tuple[int, dict]]:
    """Owned offer id -> (its fleet index, the fleet line, instances summed over a period's tier lines)."""
    lines: dict[str, tuple[int, dict]] = {}
    for i, line in enumerate(plan.get("fleet") or []):
        if not isinstance(line, dict) or line.get("provider") != OWNED_PROVIDER:
            continue
        instances = line.get("instances")
        if not isinstance(instances, int) or isinstance(instances, bool) or instances < 0:
            raise InputError.single(f"{where}[{i}].instances", "must be a whole number >= 0.", _FIX)
        kw = line.get("power_kw_per_instance")
        if kw is not None and (isinstance(kw, bool) or not isinstance(kw, (int, float)) or kw < 0):
            raise InputError.single(f"{where}[{i}].power_kw_per_instance", "must be a number >= 0 or null.", _FIX)
        seen = lines.get(line["offer_id"])
        total = instances + (seen[1]["instances"] if seen else 0)
        lines[line["offer_id"]] = (seen[0] if seen else i, {**line, "instances": total})
    return lines


def _replica_specs(units: list[Unit]) -> list[tuple[Unit, int]]:
    """(unit, GPUs per server) per replica, in packing order: spanning replicas first, then by
    decreasing GPUs; the unit name breaks ties so the packing is the same in every export."""
    specs = [(u, u.gpus_per_node) for u in units for _ in range(u.replicas)]
    return sorted(specs, key=lambda s: (not s[0].multi_node, -s[1] * s[0].instances_per_replica, s[0].name))


def _pack(line: dict, units: list[Unit], where: str) -> list[Server]:
    size, count = line["gpus_per_instance"], line["instances"]
    servers = [Server(line["offer_id"], i, line["gpu"], size, line.get("power_kw_per_instance")) for i in range(count)]
    for unit, gpus in _replica_specs(units):
        if gpus > size:
            raise InputError.single(where, f"{unit.name}: a replica takes {gpus} GPUs per server, but the servers of "
                                    f"{line['offer_id']} have {size}.", _FIX)
        placed = _place_spanning(servers, unit, gpus) if unit.multi_node else _place_single(servers, unit, gpus)
        if not placed:
            raise InputError.single(where, _no_fit_message(line, units, unit, gpus), _FIX)
    return servers


def _place_single(servers: list[Server], unit: Unit, gpus: int) -> bool:
    """The lowest-numbered server with `gpus` free takes the replica on its next free GPUs."""
    for s in servers:
        if s.gpus_free >= gpus:
            first = s.gpus_used
            s.slots.append(ReplicaSlot(unit.service, unit.name, unit.precision, tuple(range(first, first + gpus))))
            return True
    return False


def _place_spanning(servers: list[Server], unit: Unit, gpus: int) -> bool:
    """A replica over several servers takes the lowest-numbered run of empty ones, whole (one
    pipeline stage each, as the planner sizes it: nothing else shares them)."""
    span = unit.instances_per_replica
    for start in range(len(servers) - span + 1):
        run = servers[start:start + span]
        if all(not s.slots and not s.whole for s in run):
            for node, s in enumerate(run):
                s.slots.append(ReplicaSlot(unit.service, unit.name, unit.precision, tuple(range(gpus)), node, span))
                s.whole = True
            return True
    return False


def _no_fit_message(line: dict, units: list[Unit], unit: Unit, gpus: int) -> str:
    asked = sum(u.replicas * u.gpus_per_replica for u in units)
    listing = ", ".join(f"{u.name} {u.replicas} x {u.gpus_per_replica} GPU(s)"
                        + (f" over {u.instances_per_replica} servers" if u.multi_node else "") for u in units)
    what = (f"a replica of {unit.name} spanning {unit.instances_per_replica} servers finds no "
            f"{unit.instances_per_replica} empty ones" if unit.multi_node else
            f"a replica of {unit.name} needs {gpus} GPU(s) and no server has that many free")
    return (f"the plan's replicas on {line['offer_id']} ({listing}: {asked} GPUs) do not fit its "
            f"{line['instances']} server(s) of {line['gpus_per_instance']} GPUs: {what}.")


def _by_site(plan: dict, lines: dict[str, tuple[int, dict]], servers: dict[str, list[Server]]) -> list[SitePlacement]:
    stated = _stated_sites(plan)
    grouped: dict[str, list[Server]] = {}
    for offer_id, (_, line) in sorted(lines.items()):
        grouped.setdefault(str(line.get("region")), []).extend(servers[offer_id])
    files = site_file_names(list(grouped))
    return [SitePlacement(site, site_label(site), files[site], srv, *stated.get(site, (None, None)))
            for site, srv in sorted(grouped.items())]


def _stated_sites(plan: dict) -> dict[str, tuple[int | None, float | None]]:
    """Site -> (GPUs owned there, power cap kW) from the plan's `sites` (absent in plans without power)."""
    out = {}
    for s in plan.get("sites") or []:
        if isinstance(s, dict) and isinstance(s.get("site"), str):
            owned, cap = s.get("gpus_owned"), s.get("power_cap_kw")
            out[s["site"]] = (owned if isinstance(owned, int) and not isinstance(owned, bool) else None,
                              cap if isinstance(cap, (int, float)) and not isinstance(cap, bool) else None)
    return out


def site_label(site: str) -> str:
    """The value of the site's node label. A site name is letters, digits and . _ - (the workload
    schema), so it usually is a valid label value as it is; one that is not (64 characters, a
    trailing dash or dot) is reduced to a DNS label with a hash of its name, still one per site."""
    return site if naming.valid_label_value(site) and site else naming.with_suffix(naming.slug(site) or "site",
                                                                                  naming.digest(site))


def site_file_names(sites: list[str]) -> dict[str, str]:
    """Site -> its placement file's name: its label, with a hash of the name where two sites differ only
    in case (Kubernetes labels are case-sensitive; some disks' file names are not)."""
    folded: dict[str, int] = {}
    for s in sites:
        folded[site_label(s).lower()] = folded.get(site_label(s).lower(), 0) + 1
    return {s: site_label(s) if folded[site_label(s).lower()] == 1 else f"{site_label(s)}-{naming.digest(s)}"
            for s in sites}
