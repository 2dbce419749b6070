"""The evaluator's own check of owned hardware: site power caps, owned counts, energy prices.

Re-derived from the raw workload (`owned`, `sites`) and the catalog's board power, never
from the planner's compiled PowerTerms or the prices it put on the owned offers: a
mistake in solver/catalog/owned.py or solver/compile/power.py (a wrong kW, a row left
out, a count off by a server) shows here as a violation. Only the offer *name* is shared
with the planner (it is how a plan names an owned server, not a number it computed).
"""

from __future__ import annotations

from solver.catalog.gpu_names import resolve_gpu_name
from solver.catalog.owned import OWNED_PROVIDER, owned_offer_name

TOL = 1e-6


def owned_violations(workload, catalog, running: dict[str, int], prices: dict[str, float]) -> list[str]:
    """Violations of the owned hardware's limits by `running` (offer id -> instances
    running, firm and spot together), and owned offers priced other than at their energy.
    `prices`: offer id -> the $/hour per instance the plan was costed at."""
    if not workload.owned and not any(o.startswith(OWNED_PROVIDER + "/") for o in running):
        return []
    out: list[str] = []
    sites = {s.name: s for s in workload.sites}
    site_kw: dict[str, float] = {}
    expected: set[str] = set()
    for i, entry in enumerate(workload.owned):
        gpu = entry.gpu if entry.gpu in catalog.gpus else resolve_gpu_name(entry.gpu, catalog.gpus).name
        if gpu is None:
            out.append(f"owned[{i}]: GPU {entry.gpu!r} is not in the catalog")
            continue
        offer_id = f"{OWNED_PROVIDER}/{owned_offer_name(entry.site, gpu, entry.gpus_per_instance)}"
        expected.add(offer_id)
        n = running.get(offer_id, 0)
        servers = entry.count // entry.gpus_per_instance
        if n > servers:
            out.append(f"{n} servers of {offer_id} run, but owned[{i}] owns {entry.count} GPUs = {servers} servers")
        watts = catalog.gpus[gpu].board_power_w
        per_gpu_kw = entry.power_kw_per_gpu if entry.power_kw_per_gpu is not None else \
            (watts / 1000.0 if watts is not None else None)
        if per_gpu_kw is None:
            out.append(f"owned[{i}]: no power figure for {gpu} (power_kw_per_gpu unset, no board power)")
            continue
        server_kw = entry.gpus_per_instance * per_gpu_kw + entry.host_power_kw_per_instance
        site_kw[entry.site] = site_kw.get(entry.site, 0.0) + n * server_kw
        energy = server_kw * sites[entry.site].electricity_usd_per_kwh
        if n and offer_id in prices and abs(prices[offer_id] - energy) > TOL * max(1.0, energy):
            out.append(f"{offer_id} is priced ${prices[offer_id]:.6f}/hour per server; its energy costs "
                       f"${energy:.6f}/hour ({server_kw:g} kW x ${sites[entry.site].electricity_usd_per_kwh:g}/kWh)")
    for offer_id, n in sorted(running.items()):
        if n and offer_id.startswith(OWNED_PROVIDER + "/") and offer_id not in expected:
            out.append(f"the plan runs {offer_id}, which no owned entry describes")
    for name, kw in sorted(site_kw.items()):
        cap = sites[name].power_cap_kw
        if cap is not None and kw > cap * (1 + TOL) + TOL:
            out.append(f"site {name}: the owned servers running draw {kw:.4f} kW at full board power, above its "
                       f"power_cap_kw {cap:g}")
    return out
