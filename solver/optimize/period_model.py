"""One period of a multi-period plan as a MIP: firm (on-demand + reserved) and spot
instances per offer, replicas per configuration and market, and the period's rows.

Written into a `LinearModel` so that the same rows serve two models:
- the per-period subproblem of the reserved-level branch and bound
  (solver/optimize/multiperiod.py), where the reservation enters as price segments of
  the firm instances: the first `lo` are prepaid, the next `hi - lo` cost the reserved
  price, the rest on-demand (`reserved=None`);
- the monolithic horizon MIP, where every period shares one integer reservation
  variable per offer (`reserved` = those variables' indices).

Per period p (hours h), offer o, configuration c, class k:

  F_o  in Z+  firm instances (on-demand or reserved)      S_o in Z+  spot instances
  r_c, q_c in Z+  firm / spot replicas of c               x_ck, y_ck >= 0 routed traffic

  demand      sum_c t_ck (r_c + q_c) >= D_sk (one class)  or  sum_c (x_ck + y_ck) >= D_sk
  firm share  sum_c t_c r_c >= (1 - share) D_s           (max_spot_share: spot may carry at most `share`)
  regions     sum_{c in region} t_ck q_c <= (1/K) sum_c t_ck q_c   (spot over at least K regions)
  survive     the redundancy rows (solver/optimize/redundancy.py) over r and q alike, and the spot
              cover rows (solver/optimize/spot_cover.py): every q of one offer lost at once
  pack        sum_c g_c r_c <= G_o F_o ;  sum_c g_c q_c <= G_o S_o
  quota/limit per GPU type and offer over F_o + S_o (running instances)
  power[site] sum_{o at site} P_o (F_o + S_o) <= cap_site   (P_o: kW of one instance, solver/compile/power.py)
  changes     (first period, with a running fleet) a_o >= F_o - C_o, d_o >= C_o - F_o, same for spot
  cost        h (price segments of F_o + spot_o S_o) + add_usd sum a + remove_usd sum d
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from solver.catalog.owned import OWNED_PROVIDER
from solver.compile.problem import Config, Problem, ServiceDemand
from solver.optimize import spot_cover
from solver.optimize.linear import INF, LinearModel

RESERVED_TIERS = ("reserved_1y", "reserved_3y")


@dataclass(frozen=True)
class OfferPrices:
    """What one instance of an offer costs per hour in each market the workload allows."""

    on_demand: float | None  # None: on-demand not allowed
    spot: float | None  # None: spot not allowed or not offered
    reserved: float | None  # the cheapest allowed reservation; None: none (or never cheaper than on-demand)
    reserved_term: str | None  # "reserved_1y" | "reserved_3y"

    @property
    def firm(self) -> bool:
        return self.on_demand is not None or self.reserved is not None


def offer_prices(problem: Problem) -> dict[str, OfferPrices]:
    h = problem.horizon
    tiers = h.tiers if h is not None else (problem.pricing,)
    spot_ok = "spot" in tiers and not (h is not None and h.max_spot_share == 0)
    out = {}
    for o in problem.offers:
        # Owned servers run at their energy price whatever tiers the cloud is bought in.
        od = o.price_usd_per_hour if "on_demand" in tiers or o.provider == OWNED_PROVIDER else None
        spot = o.spot_price_usd_per_hour if spot_ok else None
        reserved = [(o.tier_price(t), t) for t in RESERVED_TIERS if t in tiers and o.tier_price(t) is not None]
        best = min(reserved) if reserved else (None, None)
        if best[0] is not None and od is not None and best[0] >= od:
            # A reservation costs every hour; on-demand only the hours used: never worse.
            best = (None, None)
        out[o.id] = OfferPrices(od, spot, best[0], best[1])
    return out


@dataclass(frozen=True)
class PeriodSpec:
    """A period as the model sees it: demand per service, hours, and whether the running
    fleet's change costs apply (the first period of the horizon)."""

    index: int  # in the merged list
    hours: float
    services: tuple[ServiceDemand, ...]  # demand scaled to this period
    first: bool = False


@dataclass
class PeriodVars:
    spec: PeriodSpec
    F: dict[str, int] = field(default_factory=dict)  # offer -> firm instances
    S: dict[str, int] = field(default_factory=dict)  # offer -> spot instances
    seg: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # offer -> (prepaid, reserved, on-demand)
    nod: dict[str, int] = field(default_factory=dict)  # monolithic: offer -> on-demand instances above R
    r: dict[tuple[str, bool], int] = field(default_factory=dict)  # (config key, spot) -> replicas
    x: dict[tuple[str, bool, int], int] = field(default_factory=dict)  # (config key, spot, class) -> traffic
    hourly_terms: list[tuple[int, float]] = field(default_factory=list)  # $/hour of this period (no prepaid part)
    change_terms: list[tuple[int, float]] = field(default_factory=list)  # one-time $ of changing the fleet
    changed_vars: list[int] = field(default_factory=list)  # instances added + removed
    budget_row: int | None = None  # index of the per-hour budget row (its bound moves with `lo`)
    configs: list[Config] = field(default_factory=list)


def instance_upper_bounds(problem: Problem, configs: list[Config], services: tuple[ServiceDemand, ...]) -> dict[str, int]:
    """Per offer: instances beyond this are never needed in a period with this demand."""
    by_name = {s.name: s for s in services}
    gpus: dict[str, int] = {}
    for c in configs:
        gpus[c.offer_id] = gpus.get(c.offer_id, 0) + c.gpus_per_replica * replica_bound(c, by_name[c.service], problem)
    out = {}
    for offer_id, g in gpus.items():
        o = problem.offer(offer_id)
        ub = math.ceil(g / o.gpus_per_instance)
        if offer_id in problem.offer_limits:
            ub = min(ub, problem.offer_limits[offer_id])
        out[offer_id] = ub
    return out


def running_counts(problem: Problem) -> dict[tuple[str, bool], int]:
    """Instances of the running fleet per (offer, spot)."""
    h = problem.horizon
    out: dict[tuple[str, bool], int] = {}
    for f in (h.current_fleet or ()) if h is not None else ():
        out[(f.offer_id, f.spot)] = out.get((f.offer_id, f.spot), 0) + f.instances
    return out


def replica_bound(c: Config, s: ServiceDemand, problem: Problem) -> int:
    need = sum(math.ceil(d / t - 1e-9) for t, d in zip((k.throughput for k in c.classes), s.class_demand)
               if t > 0 and d > 0)
    ub = max(need, s.min_replicas, 1 if s.total_demand > 0 or s.min_replicas else 0)
    if s.max_replicas is not None:
        ub = min(ub, s.max_replicas)
    if s.redundancy_domain == "instance" and ub > 0:
        from solver.optimize.redundancy import per_instance

        ub += per_instance(c, problem)  # one instance's worth more, that a loss can take
    limit = problem.offer_limits.get(c.offer_id)
    if limit is not None:
        ub = min(ub, limit * problem.offer(c.offer_id).gpus_per_instance // c.gpus_per_replica)
    return ub


def add_period(lm: LinearModel, problem: Problem, configs: list[Config], spec: PeriodSpec,
               prices: dict[str, OfferPrices], box_hi: dict[str, int], reserved: dict[str, int] | None = None,
               tag: str = "") -> PeriodVars:
    """Add one period's variables and rows to `lm`; return their indices.

    `box_hi`: per offer, instances the reservation may reach (sizes the variables).
    `reserved`: monolithic model only, the shared reservation variables.
    """
    h = problem.horizon
    pv = PeriodVars(spec)
    services = {s.name: s for s in spec.services}
    pv.configs = [c for c in configs if replica_bound(c, services[c.service], problem) > 0]
    by_offer: dict[str, list[Config]] = {}
    for c in pv.configs:
        by_offer.setdefault(c.offer_id, []).append(c)
    n_ub = instance_upper_bounds(problem, pv.configs, spec.services)
    # The first period may keep running instances, even idle ones, when changing costs more.
    keepable = running_counts(problem) if spec.first else {}
    p = f"{tag}" if tag else ""
    for o in problem.offers:
        if o.id not in by_offer and not any(k[0] == o.id for k in keepable):
            continue
        pr = prices[o.id]
        ub = max(n_ub.get(o.id, 0), keepable.get((o.id, False), 0), keepable.get((o.id, True), 0))
        limit = problem.offer_limits.get(o.id)
        ub = min(ub, limit) if limit is not None else ub
        if pr.firm:
            pv.F[o.id] = lm.var(f"F{p}[{o.id}]", 0, max(ub, 0), integer=True)
            _firm_cost(lm, pv, o.id, pr, spec.hours, box_hi.get(o.id, 0), ub, reserved, p)
        if pr.spot is not None:
            pv.S[o.id] = lm.var(f"S{p}[{o.id}]", 0, ub, integer=True)
            pv.hourly_terms.append((pv.S[o.id], pr.spot))
        for c in by_offer.get(o.id, []):
            rb = replica_bound(c, services[c.service], problem)
            for spot in (False, True):
                if (pv.S if spot else pv.F).get(o.id) is not None:
                    pv.r[(c.key, spot)] = lm.var(f"{'q' if spot else 'r'}{p}[{c.key}]", 0, rb, integer=True)
    _demand_rows(lm, pv, spec.services, h.max_spot_share if h else None, p)
    if h is not None and h.spot_min_regions:
        _region_rows(lm, problem, pv, spec.services, h.spot_min_regions, p)
    _replica_rows(lm, pv, spec.services, p)
    if problem.same_region:
        _same_region_rows(lm, problem, pv, p)
    _pack_rows(lm, problem, pv, by_offer, p)
    _limit_rows(lm, problem, pv, p)
    if problem.power is not None:
        _power_rows(lm, problem, pv, p)
    if any(s.redundancy_domain for s in spec.services) or spot_cover.active(spec.services):
        _survive_rows(lm, problem, pv, spec.services, p)
    if spec.first and h is not None and h.current_fleet is not None:
        _change_rows(lm, problem, pv, h, p)
    return pv


def _firm_cost(lm, pv: PeriodVars, offer_id: str, pr: OfferPrices, hours: float, hi: int, ub: int,
               reserved: dict[str, int] | None, p: str) -> None:
    F = pv.F[offer_id]
    if reserved is not None:
        # Monolithic: firm instances above the shared reservation R_o pay on-demand.
        if offer_id in reserved:
            nod = lm.var(f"nod{p}[{offer_id}]", 0, ub if pr.on_demand is not None else 0)
            lm.row(f"firm{p}[{offer_id}]", [(F, 1.0), (reserved[offer_id], -1.0), (nod, -1.0)], ub=0.0)
            pv.nod[offer_id] = nod
            pv.hourly_terms.append((nod, pr.on_demand or 0.0))
        else:
            # No reservation variable: on-demand (an offer whose reservations no period can
            # use has F fixed at 0; its missing on-demand price costs nothing then).
            pv.hourly_terms.append((F, pr.on_demand or 0.0))
        return
    # Decomposition: convex price segments (prepaid, reserved, on-demand); bounds set per node.
    hi = hi if pr.reserved is not None else 0
    f0 = lm.var(f"f0{p}[{offer_id}]", 0, 0.0)
    f1 = lm.var(f"f1{p}[{offer_id}]", 0, float(hi))
    fd = lm.var(f"fd{p}[{offer_id}]", 0, float(ub) if pr.on_demand is not None else 0.0)
    lm.row(f"firm{p}[{offer_id}]", [(F, 1.0), (f0, -1.0), (f1, -1.0), (fd, -1.0)], lb=0.0, ub=0.0)
    pv.seg[offer_id] = (f0, f1, fd)
    pv.hourly_terms += [(f1, pr.reserved or 0.0), (fd, pr.on_demand or 0.0)]


def _demand_rows(lm, pv: PeriodVars, services, share: float | None, p: str) -> None:
    by_service: dict[str, list[Config]] = {}
    for c in pv.configs:
        by_service.setdefault(c.service, []).append(c)
    firm_share = None if share is None or share >= 1.0 else 1.0 - share
    for s in services:
        mine = by_service.get(s.name, [])
        keys = [(c, spot) for c in mine for spot in (False, True) if (c.key, spot) in pv.r]
        if len(s.class_demand) == 1 or s.mixed_routing:
            # One class, or the service's mix on every replica (all classes carry its cap):
            # one row, as in the single-period model (formulation._demand_rows).
            d = s.total_demand
            if d > 0:
                lm.row(f"demand{p}[{s.name}]", [(pv.r[(c.key, spot)], c.classes[0].throughput) for c, spot in keys], lb=d)
                if firm_share:
                    lm.row(f"firm_share{p}[{s.name}]", [(pv.r[(c.key, False)], c.classes[0].throughput)
                                                        for c, spot in keys if not spot], lb=firm_share * d)
            continue
        for k, (cname, d) in enumerate(zip(s.class_names, s.class_demand)):
            terms, firm_terms = [], []
            for c, spot in keys:
                if c.classes[k].throughput > 0:
                    v = pv.x[(c.key, spot, k)] = lm.var(f"x{p}[{c.key},{'spot' if spot else 'firm'},{cname}]", 0, INF)
                    terms.append((v, 1.0))
                    if not spot:
                        firm_terms.append((v, 1.0))
            if d > 0:
                lm.row(f"demand{p}[{s.name},{cname}]", terms, lb=d)
                if firm_share:
                    lm.row(f"firm_share{p}[{s.name},{cname}]", firm_terms, lb=firm_share * d)
        for c, spot in keys:
            share_terms = [(pv.x[(c.key, spot, k)], 1.0 / c.classes[k].throughput)
                           for k in range(len(s.class_names)) if (c.key, spot, k) in pv.x]
            lm.row(f"capacity{p}[{c.key},{'spot' if spot else 'firm'}]",
                   share_terms + [(pv.r[(c.key, spot)], -1.0)], ub=0.0)


@dataclass(frozen=True)
class _Replicas:
    """Firm or spot replicas of one configuration in one period, as the survive rows see a
    group (solver/optimize/redundancy.py): a key, its configuration, its service."""

    key: str
    rep: Config
    service: str


def _survive_rows(lm, problem: Problem, pv: PeriodVars, services, p: str) -> None:
    """constraints.redundancy in this period, firm and spot replicas alike (a spot instance
    is an instance; one of each on an offer is counted lost at once, a safe over-count), and
    constraints.spot_interruptions (one offer's spot replicas lost at once)."""
    from types import SimpleNamespace

    from solver.optimize import redundancy

    groups: dict[str, list[_Replicas]] = {}
    r: dict[str, int] = {}
    is_spot: dict[str, bool] = {}
    config = {c.key: c for c in pv.configs}
    for (key, spot), i in pv.r.items():
        c = config[key]
        g = _Replicas(f"{p}|{key}|{'spot' if spot else 'firm'}", c, c.service)
        groups.setdefault(c.service, []).append(g)
        r[g.key] = i
        is_spot[g.key] = spot
    redundancy.add_rows(SimpleNamespace(problem=problem, model=lm, r=r, by_service=groups, lost={}),
                        services=tuple(services))
    spot_cover.add_rows(lm, groups, r, is_spot, services, p)


def _region_rows(lm, problem: Problem, pv: PeriodVars, services, regions: int, p: str) -> None:
    """No region holds more than 1/K of a service's spot capacity (per class): spot capacity
    is then either zero or spread over at least K regions."""
    for s in services:
        spot = [c for c in pv.configs if c.service == s.name and (c.key, True) in pv.r]
        locations = sorted({problem.offer(c.offer_id).location for c in spot})
        if not spot:
            continue
        for k, cname in enumerate(s.class_names):
            for loc in locations:
                terms = [(pv.r[(c.key, True)], c.classes[k].throughput * ((1.0 if problem.offer(c.offer_id).location == loc
                                                                           else 0.0) - 1.0 / regions))
                         for c in spot if c.classes[k].throughput > 0]
                lm.row(f"spot_regions{p}[{s.name},{cname},{loc}]", terms, ub=0.0)


def _replica_rows(lm, pv: PeriodVars, services, p: str) -> None:
    service_of = {c.key: c.service for c in pv.configs}
    by_service: dict[str, list[tuple[int, float]]] = {}  # one pass (a scan per service was quadratic)
    for (key, _spot), i in pv.r.items():
        by_service.setdefault(service_of[key], []).append((i, 1.0))
    for s in services:
        terms = by_service.get(s.name, [])
        if s.min_replicas:
            lm.row(f"min_replicas{p}[{s.name}]", terms, lb=s.min_replicas)
        if s.max_replicas is not None:
            lm.row(f"max_replicas{p}[{s.name}]", terms, ub=s.max_replicas)


def _same_region_rows(lm, problem: Problem, pv: PeriodVars, p: str) -> None:
    """constraints.same_region, in each period: one binary per (service or fleet, region),
    exactly one chosen, and nothing runs in a region not chosen."""
    region = {o.id: (o.provider, o.region) for o in problem.offers}
    service_of = {c.key: c.service for c in pv.configs}
    offer_of = {c.key: c.offer_id for c in pv.configs}
    chosen: dict[tuple[str, tuple], int] = {}

    def z(owner: str, where: tuple) -> int:
        if (owner, where) not in chosen:
            chosen[(owner, where)] = lm.var(f"region{p}[{owner or 'fleet'},{where[0]}/{where[1]}]", 0, 1, integer=True)
        return chosen[(owner, where)]

    if problem.same_region == "fleet":
        for market, inst in (("firm", pv.F), ("spot", pv.S)):
            for offer_id, i in inst.items():
                ub = lm.variables[i].ub
                lm.row(f"in_region{p}[{offer_id},{market}]", [(i, 1.0), (z("", region[offer_id]), -ub)], ub=0.0)
    else:
        for (key, spot), i in pv.r.items():
            offer_id = offer_of[key]
            ub = lm.variables[i].ub
            lm.row(f"in_region{p}[{key},{'spot' if spot else 'firm'}]",
                   [(i, 1.0), (z(service_of[key], region[offer_id]), -ub)], ub=0.0)
    owners = sorted({owner for owner, _ in chosen})
    for owner in owners:
        lm.row(f"one_region{p}[{owner or 'fleet'}]", [(v, 1.0) for (o, _w), v in chosen.items() if o == owner], ub=1.0)


def _pack_rows(lm, problem: Problem, pv: PeriodVars, by_offer: dict[str, list[Config]], p: str) -> None:
    for offer_id, mine in by_offer.items():
        if offer_id not in pv.F and offer_id not in pv.S:
            continue
        g = float(problem.offer(offer_id).gpus_per_instance)
        for spot, inst in ((False, pv.F), (True, pv.S)):
            if offer_id not in inst:
                continue
            terms = [(pv.r[(c.key, spot)], float(c.gpus_per_replica)) for c in mine if (c.key, spot) in pv.r]
            lm.row(f"pack{p}[{offer_id},{'spot' if spot else 'firm'}]", terms + [(inst[offer_id], -g)], ub=0.0)


def _limit_rows(lm, problem: Problem, pv: PeriodVars, p: str) -> None:
    """Quotas and availability count running instances, firm and spot alike."""
    for offer_id, limit in sorted(problem.offer_limits.items()):
        terms = [(d[offer_id], 1.0) for d in (pv.F, pv.S) if offer_id in d]
        if len(terms) > 1:
            lm.row(f"limit{p}[{offer_id}]", terms, ub=limit)
    for gpu, quota in sorted(problem.gpu_quotas.items()):
        terms = [(d[o.id], float(o.gpus_per_instance)) for o in problem.offers if o.gpu == gpu
                 for d in (pv.F, pv.S) if o.id in d]
        if terms:
            lm.row(f"quota{p}[{gpu}]", terms, ub=quota)


def _power_rows(lm, problem: Problem, pv: PeriodVars, p: str) -> None:
    """A site's power cap over its running instances in this period (an idle reservation
    draws nothing; owned servers are never reserved or spot, but the row does not rely on it)."""
    for site in problem.power.sites:
        terms = [(d[offer_id], kw) for offer_id, kw in site.offer_kw for d in (pv.F, pv.S) if offer_id in d]
        if terms:
            lm.row(f"power{p}[{site.name}]", terms, ub=site.cap_kw)


def _change_rows(lm, problem: Problem, pv: PeriodVars, h, p: str) -> None:
    """Instances started and stopped against the running fleet (first period only)."""
    running: dict[tuple[str, bool], int] = {}
    for f in h.current_fleet:
        running[(f.offer_id, f.spot)] = running.get((f.offer_id, f.spot), 0) + f.instances
    keys = sorted(set(running) | {(o, False) for o in pv.F} | {(o, True) for o in pv.S})
    for offer_id, spot in keys:
        now = running.get((offer_id, spot), 0)
        var = (pv.S if spot else pv.F).get(offer_id)
        label = f"{offer_id},{'spot' if spot else 'firm'}"
        if var is None:
            # The plan can no longer use this offer (filtered, spot not allowed, no
            # configuration): all `now` instances go, at the removal price like any other.
            rem = lm.var(f"remove{p}[{label}]", float(now), float(now))
            pv.change_terms.append((rem, h.remove_instance_usd))
            pv.changed_vars.append(rem)
            continue
        add = lm.var(f"add{p}[{label}]", 0, INF)
        rem = lm.var(f"remove{p}[{label}]", 0, float(now))
        lm.row(f"added{p}[{label}]", [(add, 1.0), (var, -1.0)], lb=-now)
        lm.row(f"removed{p}[{label}]", [(rem, 1.0), (var, 1.0)], lb=now)
        pv.change_terms += [(add, h.add_instance_usd), (rem, h.remove_instance_usd)]
        pv.changed_vars += [add, rem]
    if h.max_changed_instances is not None:
        lm.row(f"max_changed{p}", [(v, 1.0) for v in pv.changed_vars], ub=h.max_changed_instances)


def budget_row(lm, pv: PeriodVars, prices: dict[str, OfferPrices], budget: float, tag: str = "") -> None:
    """Per-hour (peak) budget of the period in the decomposition: prepaid reserved
    instances cost every hour too, so the bound is lowered by their price x `lo`
    (set per node); in the monolithic model the reservation variables carry it."""
    lm.row(f"budget{tag}", list(pv.hourly_terms), ub=budget)
    pv.budget_row = len(lm.rows) - 1
