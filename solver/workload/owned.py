"""Owned hardware and its sites: the workload's `owned` and `sites` entries.

Kept apart from the rest of the schema (solver/workload/schema.py only names the two
lists) so that this input grows without touching the other sections. How the planner
reads them: owned GPUs become offers of provider "owned" in region = site
(solver/catalog/owned.py), each site's power cap one linear row (solver/compile/power.py).
docs/owned-and-power.md has the cost model.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from solver.documents.strict import StrictModel

# Sizes an owned instance (a server) may have: powers of two keep the planner's packing
# exact (docs/formulation.md, "Packing is exact"), and 8 is the HGX/DGX board.
OWNED_INSTANCE_SIZES = (1, 2, 4, 8, 16)
DEFAULT_GPUS_PER_INSTANCE = 8


class Site(StrictModel):
    """A place owned GPUs run: its power envelope and what its electricity costs."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="the "
                      "site's name, unique among the sites (letters, digits and . _ -); owned entries name it, and "
                      "it is the region of the site's offers (offer ids owned/<site>-<gpu>-<n>gpu)")
    power_cap_kw: float | None = Field(default=None, gt=0, le=1e7, description="the most the owned GPUs running "
                                       "at this site may draw together, kilowatts (board power at full load x "
                                       "GPUs, plus each owned entry's host_power_kw_per_instance); unset: no cap")
    electricity_usd_per_kwh: float = Field(ge=0, le=100, description="what one kWh costs at this site, US "
                                           "dollars (with the cooling overhead folded in if you count it, e.g. "
                                           "price x PUE): a running owned instance costs its kW x this per hour")


class OwnedGpus(StrictModel):
    """GPUs the organisation already owns at one site."""

    gpu: str = Field(min_length=1, max_length=100, description="GPU type: a catalog GPU name (`solver-cli catalog "
                     "--gpus`), written as people write it (\"NVIDIA H100 80GB HBM3\" is H100-SXM)")
    count: int = Field(ge=1, le=1_000_000, description="GPUs owned at this site, a whole number of instances "
                       "(count / gpus_per_instance servers)")
    site: str = Field(min_length=1, max_length=64, description="the site (one of `sites[].name`) they run at")
    gpus_per_instance: int = Field(default=DEFAULT_GPUS_PER_INSTANCE, ge=1, le=16, description="GPUs per server: "
                                   "1, 2, 4, 8 or 16 (replicas take a power of two of a server's GPUs, or whole "
                                   "servers); default 8, an HGX/DGX board")
    amortised_cost_usd_per_gpu_hour: float = Field(default=0.0, ge=0, le=1e4, description="the hardware's "
                                                   "amortised cost per GPU and hour, US dollars (purchase, "
                                                   "support and space over its life): paid whether the GPUs run "
                                                   "or not, so it is reported beside the plan's cost and never "
                                                   "changes which plan is cheapest; default 0")
    power_kw_per_gpu: float | None = Field(default=None, gt=0, le=10, description="kW one GPU draws at full "
                                           "load; unset: the catalog's board power for the GPU type "
                                           "(`board_power_w` / 1000)")
    host_power_kw_per_instance: float = Field(default=0.0, ge=0, le=100, description="kW each server draws "
                                              "beside its GPUs (CPUs, memory, fans, NICs) at full load; counted "
                                              "in the site's power cap and energy price. Default 0 (GPUs only); "
                                              "an NVIDIA DGX H100 is specified at 10.2 kW for 8 x 700 W GPUs, "
                                              "i.e. about 4.6 kW of host")

    @model_validator(mode="after")
    def _whole_instances(self):
        if self.gpus_per_instance not in OWNED_INSTANCE_SIZES:
            raise ValueError(f"gpus_per_instance {self.gpus_per_instance} is not one of "
                             f"{', '.join(map(str, OWNED_INSTANCE_SIZES))}. To fix: describe the servers by one of "
                             "those sizes (replicas take powers of two of a server's GPUs)")
        if self.count % self.gpus_per_instance:
            raise ValueError(f"count {self.count} is not a whole number of {self.gpus_per_instance}-GPU servers. "
                             f"To fix: list the remainder as another entry with its own gpus_per_instance, or set "
                             f"count to a multiple of {self.gpus_per_instance}")
        return self


def check_owned_and_sites(owned: list[OwnedGpus], sites: list[Site]) -> None:
    """Cross-entry rules: unique site names, every owned entry's site listed, one entry per
    (gpu, site, server size). Raises ValueError naming the entry (pydantic then reports it
    at the workload's root, with the path written into the message)."""
    names = [s.name for s in sites]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"site names must be unique; repeated: {', '.join(dup)}. To fix: rename them")
    seen: dict[tuple[str, str, int], int] = {}
    for i, o in enumerate(owned):
        if o.site not in names:
            from solver.suggest import did_you_mean

            raise ValueError(f"owned[{i}].site: unknown site {o.site!r}{did_you_mean(o.site, names) or '.'} To fix: "
                             f"add it to sites (with its electricity_usd_per_kwh), or use one of "
                             f"{', '.join(names) or '(no sites listed)'}")
        key = (o.gpu, o.site, o.gpus_per_instance)
        if key in seen:
            raise ValueError(f"owned[{i}] repeats owned[{seen[key]}] ({o.gpu} at {o.site} in "
                             f"{o.gpus_per_instance}-GPU servers). To fix: add their counts into one entry")
        seen[key] = i
