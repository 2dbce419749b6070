"""The fleet planning MIP, with replicas aggregated over interchangeable offers.

Sets: services s, request classes k of s, offers o, candidate configurations c (each of
one service, one offer, g_c GPUs per replica, per-class throughput t_ck).

Replica groups. Configurations of one service with the same GPUs per replica, span,
precision, source and per-class throughputs perform identically wherever they run; such
a *group* G has one configuration on each of its member offers O(G) (e.g. a 1-GPU L4
replica on the 1-, 2-, 4- and 8-GPU L4 instances of one provider). Groups of any
services with the same replica size and the same member offers form a *pool* P: a
replica of any group in P can be hosted on any offer of P. Per-configuration variables
would repeat every group once per member offer (45,655 configurations are 17,428 groups
for 1,000 services on the default catalog); the pooled form is exact and much smaller:

Variables
  n_o     in Z+   instances of offer o            (<= availability / quota)
  R_G     in Z+   replicas of group G
  Y_Po    in Z+   replicas of pool P hosted on offer o   (only when P has several offers)
  x_Gk    >= 0    class-k traffic routed to G      (only for services with several classes)

Minimise  sum_o price_o * n_o                                   [cost, $/hour]
s.t.
  demand[s]       sum_G t_G R_G >= D_s                    (one class: no routing variables)
  demand[s,k]     sum_G x_Gk >= D_sk                      (several classes)
  capacity[G]     sum_k x_Gk / t_Gk <= R_G                (replicas time-share the classes:
                                                           exact for fractional routing)
  min_replicas[s] sum_G R_G >= m_s ;  max_replicas[s] sum_G R_G <= M_s
  host[P]         sum_{G in P} R_G <= sum_{o in P} Y_Po   (every replica hosted somewhere)
  pack[o]         sum_{P on o} g_P Y_Po <= G_o n_o        (with Y_Po = R_G when P is one group
                                                           on one offer; exact: replica sizes
                                                           are powers of two dividing G_o, or
                                                           whole instances)
  quota[t]        sum_{o of GPU t} G_o n_o <= Q_t
  budget          sum_o price_o n_o <= B
  survive[s,d]    (constraints.redundancy) the replicas outside failure domain d serve
                  serve_fraction x demand: solver/optimize/redundancy.py (groups never span
                  a place; an instance domain keeps every configuration its own group)
  power[site]     sum_{o at site} P_o n_o <= cap_site     (P_o = kW of one instance of o at full
                                                           board power, host included: owned
                                                           servers at the site, solver/compile/power.py)
  same region     (constraints.same_region) binary z per region (a provider's region):
                  fleet:   n_o <= ub(n_o) z_region(o),         sum z <= 1
                  service: R_G <= ub(R_G) z_s,region(G),       sum_region z_s <= 1
                  (groups are then split by region, so a group never spans two)

Exactness: any per-configuration plan maps to (R, Y) by summing, and any (R, Y) decodes
to one (`solution_from`): every group of a pool has a configuration on every offer of the
pool, with the same throughput. Where every pool is one configuration the model is
exactly the per-configuration one, variable for variable.

Models with fewer than POOL_FROM_CONFIGS configurations are not pooled: their MIPs take
milliseconds either way, and per-configuration models keep the plans they always gave
(pooling can pick another of several equally cheap fleets, or split routed traffic
differently over the same replicas).

Tie-break (solver/optimize/tiebreak.py): with the cost fixed at the optimum, fewest GPUs;
then idle GPUs of the chosen fleet carry extra replicas (solver/optimize/headroom.py).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict, defaultdict
from dataclasses import field
from operator import attrgetter

from solver.compile.problem import Config, Problem
from solver.dataclass_repr import dataclass
from solver.interrupt import NEVER, Stop
from solver.optimize import redundancy
from solver.optimize.linear import INF, LinearModel
from solver.optimize.solution import Assignment, Solution, regions_used


@dataclass(frozen=True)
class Group:
    """Replicas of one service that perform identically on each of `configs`' offers."""

    key: str  # the first member's configuration key
    service: str
    configs: tuple[Config, ...]  # one per member offer, by offer id

    @property
    def rep(self) -> Config:
        return self.configs[0]

    @property
    def gpus_per_replica(self) -> int:
        return self.rep.gpus_per_replica


@dataclass(frozen=True)
class Pool:
    """Groups of one replica size that share their member offers."""

    key: tuple[int, tuple[str, ...]]  # (GPUs per replica, member offer ids)
    groups: tuple[Group, ...]

    @property
    def gpus_per_replica(self) -> int:
        return self.key[0]

    @property
    def offer_ids(self) -> tuple[str, ...]:
        return self.key[1]


@dataclass
class Formulation:
    """The MIP built from a Problem: its linear model and the indices that map its variables back to offers
    and configurations."""

    problem: Problem
    model: LinearModel
    configs: list[Config]
    groups: list[Group] = field(default_factory=list)
    pools: list[Pool] = field(default_factory=list)
    n: dict[str, int] = field(default_factory=dict)  # offer id -> var index
    r: dict[str, int] = field(default_factory=dict)  # group key -> var index (replicas R_G)
    y: dict[tuple[tuple, str], int] = field(default_factory=dict)  # (pool key, offer id) -> var index
    x: dict[tuple[str, int], int] = field(default_factory=dict)  # (group key, class) -> var index
    z: dict[tuple[str, tuple[str, str]], int] = field(default_factory=dict)  # (service or "", region) -> binary
    split: dict[tuple[str, str], int] = field(default_factory=dict)  # (service, link tier) -> disaggregated rate
    lost: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # group key -> (u, b, m): redundancy.py
    cost_terms: list[tuple[int, float]] = field(default_factory=list)
    gpu_terms: list[tuple[int, float]] = field(default_factory=list)
    by_service: dict[str, list[Group]] = field(default_factory=dict)
    group_of: dict[str, Group] = field(default_factory=dict)  # config key -> its group
    pool_of: dict[str, Pool] = field(default_factory=dict)  # group key -> its pool
    service_bounds: dict = field(default_factory=dict)  # service -> ServiceBound (pooled models)
    lower_bound: float | None = None  # sum of the services' bounds: no plan costs less (pooled models)

    # ------------------------------------------------------------ plan <-> values
    def values_from(self, sol: Solution) -> list[float] | None:
        """A plan as variable values (a MIP hint); None if it uses what the model lacks."""
        values = [0.0] * len(self.model.variables)
        for offer_id, n in sol.fleet:
            if offer_id not in self.n:
                return None
            values[self.n[offer_id]] = float(n)
        pool_of = self.pool_of
        for a in sol.assignments:
            group = self.group_of.get(a.config_key)
            if group is None:
                return None
            values[self.r[group.key]] += a.replicas
            pool = pool_of[group.key]
            if (pool.key, a.offer_id) in self.y:
                values[self.y[(pool.key, a.offer_id)]] += a.replicas
            for k, routed in enumerate(a.routed):
                if (group.key, k) in self.x:
                    values[self.x[(group.key, k)]] += routed
            for key in ((a.service, region_of(self.problem.offer(a.offer_id))), ("", region_of(self.problem.offer(a.offer_id)))):
                if key in self.z:
                    values[self.z[key]] = 1.0
        if self.split:
            from solver.compile.disagg import pool_name
        for (parent, link), i in self.split.items():  # the rate each tier's prefill pool serves
            pre = pool_name(parent, "prefill", link)
            values[i] += sum(a.routed[0] for a in sol.assignments if a.service == pre and a.routed)
        redundancy.complete_hint(self, values)
        for i, v in enumerate(self.model.variables):
            if values[i] > v.ub + 1e-9:
                return None
        return values

    def solution_from(self, values: list[float], running: dict[tuple[str, str], int] | None = None) -> Solution:
        """Decode values into replicas per configuration (deterministic: pools, groups and
        offers in a fixed order; routed traffic split in proportion to replicas). `running`
        ((group key, offer id) -> replicas running now, re-plans): a pool's groups first take
        the slots of the offers where they run, so that what stays is not moved."""
        fleet = tuple(sorted((o, int(round(values[i]))) for o, i in self.n.items() if round(values[i]) > 0))
        demand = {s.name: s for s in self.problem.services}
        placed: list[tuple[Config, int, Group]] = []
        for pool in self.pools:
            if len(pool.offer_ids) == 1:
                for group in pool.groups:
                    r = int(round(values[self.r[group.key]]))
                    if r > 0:
                        placed.append((group.rep, r, group))
                continue
            slots = {o: int(round(values[self.y[(pool.key, o)]])) for o in pool.offer_ids}
            groups = sorted(pool.groups, key=lambda g: g.key)
            left = {g.key: int(round(values[self.r[g.key]])) for g in groups}
            taken: dict[tuple[str, str], int] = {}
            for first in ((True, False) if running else (False,)):
                for group in groups:
                    for o in pool.offer_ids:
                        cap = min(left[group.key], slots[o])
                        if first:
                            cap = min(cap, running.get((group.key, o), 0))
                        if cap > 0:
                            taken[(group.key, o)] = taken.get((group.key, o), 0) + cap
                            slots[o] -= cap
                            left[group.key] -= cap
            for group in groups:
                members = {c.offer_id: c for c in group.configs}
                for o in pool.offer_ids:
                    if taken.get((group.key, o), 0) > 0:
                        placed.append((members[o], taken[(group.key, o)], group))
        assignments = []
        for c, r, group in placed:
            s = demand[c.service]
            if len(s.class_demand) == 1 or s.mixed_routing:
                routed = (0.0,) * len(s.class_demand)  # filled below, proportionally to capacity
            else:
                total_r = max(int(round(values[self.r[group.key]])), 1)
                routed = tuple(max(values[self.x[(group.key, k)]], 0.0) * r / total_r if (group.key, k) in self.x
                               else 0.0 for k in range(len(s.class_demand)))
            assignments.append(Assignment(c.key, c.service, c.offer_id, c.gpus_per_replica, c.precision, r, routed,
                                          c.instances_per_replica))
        return Solution(fleet, route_single_class(self.problem, _paired(self.problem, assignments),
                                                  {c.key: c for c, _, _ in placed}))


def route_single_class(problem: Problem, assignments: list[Assignment], configs: dict[str, Config]) -> tuple[Assignment, ...]:
    """Single-class services (and services whose replicas all serve the service's mix):
    route demand in proportion to each assignment's capacity, split by class share. A
    disaggregated deployment's capacity is the smaller of its two pools' (every request
    prefilled is decoded), and both pools carry the rate routed to it."""
    capacity: dict[str, float] = defaultdict(float)
    for a in assignments:
        capacity[a.service] += configs[a.config_key].throughput * a.replicas
    rate = _split_routing(problem, capacity)
    out = []
    for a in assignments:
        s = problem.service(a.service)
        if len(s.class_demand) == 1 or s.mixed_routing:
            cap = configs[a.config_key].throughput * a.replicas
            total = capacity[a.service]
            served = rate.get(a.service, s.total_demand)
            routed = served * cap / total if total > 0 else 0.0
            a = Assignment(a.config_key, a.service, a.offer_id, a.gpus_per_replica, a.precision, a.replicas,
                           tuple(routed * d / s.total_demand if s.total_demand > 0 else 0.0 for d in s.class_demand),
                           a.instances_per_replica)
        out.append(a)
    out.sort(key=lambda a: (a.service, a.config_key))
    return tuple(out)


def _paired(problem: Problem, assignments: list[Assignment]) -> list[Assignment]:
    """Without the workers of a pool whose partner pool has none: they would serve nothing
    (the MIP may leave such workers on GPUs it pays for anyway; they are dropped, not billed)."""
    pools = {a.service for a in assignments if "#" in a.service}
    if not pools:
        return assignments
    from solver.compile.disagg import pool_name

    def partnered(name: str) -> bool:
        s = problem.service(name)
        other = pool_name(s.feeds, "decode" if s.role == "prefill" else "prefill", s.link)
        return other in pools

    return [a for a in assignments if "#" not in a.service or partnered(a.service)]


def _split_routing(problem: Problem, capacity: dict[str, float]) -> dict[str, float]:
    """The rate each service with disaggregated pools (and each pool) serves: the demand
    split in proportion to the aggregated replicas' capacity and each tier's smaller pool."""
    from solver.compile.disagg import pool_name

    tiers: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for s in problem.services:
        if s.role == "prefill" and capacity.get(s.name, 0.0) > 0:
            tiers[s.feeds].append((s.name, pool_name(s.feeds, "decode", s.link)))
    rate: dict[str, float] = {s.name: 0.0 for s in problem.services if s.role}  # pools without a partner: none
    for parent, pairs in tiers.items():
        parts = [min(capacity.get(pre, 0.0), capacity.get(dec, 0.0)) for pre, dec in pairs]
        total = capacity.get(parent, 0.0) + sum(parts)
        demand = problem.service(parent).total_demand
        if total <= 0:
            continue
        rate[parent] = demand * capacity.get(parent, 0.0) / total
        for (pre, dec), part in zip(pairs, parts):
            rate[pre] = rate[dec] = demand * part / total
    return rate


def replica_upper_bound(c: Config, p: Problem) -> int:
    """Replicas of one configuration beyond this are never needed (nor allowed)."""
    return _capped_bound(c, _need_bound(c, p), p)


def _capped_bound(c: Config, need: int, p: Problem) -> int:
    """`need` capped by the instances of the configuration's offer the limits allow."""
    limit = p.offer_limits.get(c.offer_id)
    if limit is not None:
        offer = p.offer(c.offer_id)
        need = min(need, limit * offer.gpus_per_instance // c.gpus_per_replica)
    return need


def _need_bound(c: Config, p: Problem) -> int:
    """Replicas the demand (and min/max replicas) could ever ask of this configuration."""
    s = p.service(c.service)
    need = 0
    for t, d in zip((k.throughput for k in c.classes), s.class_demand):
        if t > 0 and d > 0:
            need += math.ceil(d / t - 1e-9)
    ub = max(need, s.min_replicas, 1 if s.total_demand > 0 or s.min_replicas else 0)
    if s.max_replicas is not None:
        ub = min(ub, s.max_replicas)
    return ub


class _NeedBounds:
    """`_need_bound` for many configurations of one problem: each service's terms once
    (the same arithmetic, in the same order)."""

    __slots__ = ("_services", "all_positive")

    def __init__(self, p: Problem):
        # Per service: demand per class, the floor max(min_replicas, 1 if anything to
        # serve) and max_replicas (the same terms, in the same order, as one at a time).
        self._services = {s.name: (s.class_demand, max(s.min_replicas, 1 if s.total_demand > 0 or s.min_replicas
                                                       else 0), s.max_replicas) for s in p.services}
        # Every service's floor is at least one replica and its max_replicas (if any) too:
        # every configuration's need bound is then at least one.
        self.all_positive = all(floor >= 1 and (most is None or most >= 1)
                                for _, floor, most in self._services.values())

    def of(self, c: Config) -> int:
        demand, floor, most = self._services[c.service]
        need = 0
        for k, d in zip(c.classes, demand):
            t = k.throughput
            if t > 0 and d > 0:
                need += math.ceil(d / t - 1e-9)
        ub = need if need > floor else floor
        if most is not None and most < ub:
            ub = most
        return ub


POOL_FROM_CONFIGS = 300
# The per-service bounds come from floating-point sub-solves: a hair below their sum, so
# rounding can never make the bound claim more than is proven.
LB_MARGIN_ABS = 1e-7
LB_MARGIN_REL = 1e-9


def bound_reached(lower_bound: float) -> float:
    """How far above the services' summed bound a plan may cost and still reach it: twice
    the margin the bound was lowered by (LB_MARGIN_REL/ABS), far below any price difference
    (prices have at most 6 decimals)."""
    return 2 * (LB_MARGIN_ABS + LB_MARGIN_REL * abs(lower_bound))


def region_of(offer) -> tuple[str, str]:
    """A region is a provider's region: names are only unique within one provider."""
    return (offer.provider, offer.region)


def region_violations(problem: Problem, sol: Solution) -> list[str]:
    """What breaks constraints.same_region in a plan (empty when it holds or is unset)."""
    if not problem.same_region:
        return []
    fleet, per_service = regions_used(lambda o: region_of(problem.offer(o)), sol)
    if problem.same_region == "fleet":
        return [f"the fleet spans {len(fleet)} regions"] if len(fleet) > 1 else []
    return [f"{name} spans {len(r)} regions" for name, r in sorted(per_service.items()) if len(r) > 1]


def group_configs(configs: list[Config], pool: bool = True, region: dict[str, tuple] | None = None
                  ) -> tuple[list[Group], list[Pool]]:
    """Groups (interchangeable configurations of one service) and pools, in the order their
    first configuration appears; with `pool` False every configuration is its own group;
    with `region` (offer id -> region) a group never spans two regions."""
    grouping = _grouping(configs, pool, region)
    return list(grouping.groups), list(grouping.pools)


@dataclass(frozen=True)
class _Grouping:
    """`_group_configs` of one list of configurations, with the indices a model build
    derives from it: the groups of each service (in group order), each configuration's
    group by key and each group's pool by the group's key. Shared by every model built from the list: a model copies what it keeps."""

    groups: tuple[Group, ...]
    pools: tuple[Pool, ...]
    by_service: dict[str, tuple[Group, ...]]
    group_of: dict[str, Group]
    pool_of: dict[str, Pool]


def _grouping(configs: list[Config], pool: bool, region: dict[str, tuple] | None) -> _Grouping:
    """The grouping of `configs`, remembered for the last few lists of configurations
    without regions, by the identity of their configurations: configurations are immutable
    and the candidate cache hands the same objects to every plan whose candidates are
    unchanged (review scenarios that change demand, quotas or prices), so the same objects
    in the same order group the same way. An entry holds its configurations, so their ids
    cannot be reused while it lives."""
    if region is not None:
        return _indexed(*_group_configs(configs, pool, region))
    key = (pool, tuple(map(id, configs)))
    with _GROUPINGS_LOCK:
        hit = _GROUPINGS.get(key)
        if hit is not None:
            _GROUPINGS.move_to_end(key)
    if hit is not None and len(hit[0]) == len(configs) and all(a is b for a, b in zip(hit[0], configs)):
        return hit[1]
    grouping = _indexed(*_group_configs(configs, pool, None))
    with _GROUPINGS_LOCK:
        _GROUPINGS[key] = (tuple(configs), grouping)
        while len(_GROUPINGS) > GROUPINGS_KEPT:
            _GROUPINGS.popitem(last=False)
    return grouping


def _indexed(groups: list[Group], pools: list[Pool]) -> _Grouping:
    by_service: dict[str, list[Group]] = {}
    group_of: dict[str, Group] = {}
    for g in groups:
        by_service.setdefault(g.service, []).append(g)
        for c in g.configs:
            group_of[c.key] = g
    return _Grouping(tuple(groups), tuple(pools), {name: tuple(gs) for name, gs in by_service.items()}, group_of,
                     {g.key: pool for pool in pools for g in pool.groups})


GROUPINGS_KEPT = 16  # lists of configurations whose grouping is remembered (least recently used out)
_GROUPINGS: OrderedDict[tuple, tuple[tuple[Config, ...], _Grouping]] = OrderedDict()
_GROUPINGS_LOCK = threading.Lock()


def _group_configs(configs: list[Config], pool: bool, region: dict[str, tuple] | None
                   ) -> tuple[list[Group], list[Pool]]:
    global _LAST_GROUPS
    members: dict[tuple, list[Config]] = {}
    for c in configs:
        if pool and region is None:
            key = c.replica_kind
        else:
            key = (c.replica_kind, None if pool else c.offer_id, region[c.offer_id] if region is not None else None)
        found = members.get(key)
        if found is None:
            members[key] = [c]
        else:
            found.append(c)
    groups = []
    by_pool: dict[tuple, list[Group]] = {}
    # A group of the same configuration objects (in the same order) as in the last grouping
    # made is that group again (configurations are immutable): taken, not made again.
    last, made = _LAST_GROUPS, {}
    for cs in members.values():
        ids = tuple(map(id, cs))
        known = last.get(ids)
        if known is None:
            if len(cs) > 1:
                cs = sorted(cs, key=_offer_id)
                offer_ids = tuple(c.offer_id for c in cs)
                if len(set(offer_ids)) != len(cs):  # cannot happen: one configuration per offer and key
                    raise AssertionError(f"two configurations of one group on one offer: {[c.key for c in cs]}")
            else:
                offer_ids = (cs[0].offer_id,)
            known = (Group(cs[0].key, cs[0].service, tuple(cs)), (cs[0].gpus_per_replica, offer_ids))
        made[ids] = known
        g, pool_key = known
        groups.append(g)
        found = by_pool.get(pool_key)
        if found is None:
            by_pool[pool_key] = [g]
        else:
            found.append(g)
    _LAST_GROUPS = made  # each entry's group holds its configurations: their ids stay theirs
    return groups, [Pool(k, tuple(gs)) for k, gs in by_pool.items()]


# The groups of the last grouping made, by the ids of their configurations in list order,
# with their pool keys: the next list (another scenario's) shares most of them.
_LAST_GROUPS: dict[tuple[int, ...], tuple[Group, tuple]] = {}


_offer_id = attrgetter("offer_id")


def build(problem: Problem, configs: list[Config] | None = None, *, budget: bool = True,
          quotas: bool = True, stop: Stop = NEVER, bounds: bool = True,
          power: bool | frozenset[str] = True) -> Formulation:
    """The MIP of `problem`. `budget`, `quotas` and `power` False leave those rows out (the
    infeasibility diagnosis re-solves without them); `power` may also name the sites whose
    cap is left out."""
    source = problem.configs if configs is None else configs
    needs = _NeedBounds(problem)
    # Groups never span a region under same_region: service, nor a place a service must
    # survive losing (constraints.redundancy); an instance domain keeps configurations apart.
    by_region = {o.id: region_of(o) for o in problem.offers} if problem.same_region == "service" \
        else redundancy.grouping_places(problem)
    may_pool = not redundancy.needs_configs_apart(problem)
    if needs.all_positive and _room_for_one_replica(source, problem) and len({c.key for c in source}) == len(source):
        # Every configuration has a positive bound and its own key, so none is dropped: the
        # list's own grouping (often remembered), and each group's bound from its first
        # member's need (its members share the service and throughputs, hence the need).
        grouping = _grouping(source, may_pool and len(source) >= POOL_FROM_CONFIGS, by_region)
        configs = list(source)
        group_ub = {g.key: _group_need_bound(g, redundancy.raised_bound(g.rep, needs.of(g.rep), problem), problem)
                    for g in grouping.groups}
    else:
        ub = {}
        need_of: dict[str, int] = {}  # config key -> its need bound (before the offer's limit)
        for c in source:
            need = redundancy.raised_bound(c, needs.of(c), problem)
            bound = _capped_bound(c, need, problem)
            if bound > 0:
                ub[c.key] = (c, bound)
                need_of[c.key] = need
        configs = [c for c, _ in ub.values()]
        grouping = _grouping(configs, may_pool and len(configs) >= POOL_FROM_CONFIGS, by_region)
        group_ub = {g.key: _group_bound(g, problem, ub, need_of) for g in grouping.groups}
    lm = LinearModel()
    f = Formulation(problem, lm, configs)
    f.groups, f.pools = list(grouping.groups), list(grouping.pools)
    f.by_service = {name: list(gs) for name, gs in grouping.by_service.items()}
    f.group_of = dict(grouping.group_of)
    f.pool_of = dict(grouping.pool_of)
    hosted_ub = _hosted_bounds(f, problem, group_ub)
    for o in problem.offers:
        if o.id not in hosted_ub:
            continue
        n_ub = math.ceil(hosted_ub[o.id] / o.gpus_per_instance)
        if quotas and o.id in problem.offer_limits:
            n_ub = min(n_ub, problem.offer_limits[o.id])
        f.n[o.id] = lm.var(f"n[{o.id}]", 0, n_ub, integer=True)
        f.cost_terms.append((f.n[o.id], o.price_usd_per_hour))
        f.gpu_terms.append((f.n[o.id], float(o.gpus_per_instance)))
    for g in f.groups:
        f.r[g.key] = lm.var(f"r[{g.key}]" if len(g.configs) == 1 else f"R[{g.key}+{len(g.configs) - 1}]",
                            0, group_ub[g.key], integer=True)
    for pool in f.pools:
        if len(pool.offer_ids) == 1:
            continue
        total = sum(group_ub[g.key] for g in pool.groups)
        for oid in pool.offer_ids:
            limit = problem.offer_limits.get(oid)
            ub = total
            if limit is not None:
                ub = min(ub, limit * problem.offer(oid).gpus_per_instance // pool.gpus_per_replica)
            f.y[(pool.key, oid)] = lm.var(f"y[{pool.gpus_per_replica}gpu@{oid}#{len(f.y)}]", 0, ub, integer=True)
    stop.check("model building")
    _demand_rows(f, stop)
    _replica_rows(f)
    _host_and_packing_rows(f)
    if quotas:
        _quota_rows(f)
    if problem.same_region:
        _same_region_rows(f, group_ub)
    if redundancy.active(problem):
        redundancy.add_rows(f)
    if budget and problem.budget_usd_per_hour is not None:
        lm.row("budget", f.cost_terms, ub=problem.budget_usd_per_hour)
    if power is not False and problem.power is not None:
        _power_rows(f, frozenset() if power is True else power)
    # Large models: each service's own bound (with its survive rows, where it has a domain).
    if bounds and len(configs) >= POOL_FROM_CONFIGS:
        # Each service's integer rounding, proven service by service (solver/optimize/
        # service_bounds.py): a lower bound on any plan's cost, and plans to start from.
        from solver.optimize.service_bounds import service_lower_bounds

        f.service_bounds = service_lower_bounds(f, stop)
        f.lower_bound = sum(b.bound for b in f.service_bounds.values()) * (1 - LB_MARGIN_REL) - LB_MARGIN_ABS
    lm.objective = dict(f.cost_terms)
    return f


def _room_for_one_replica(configs, p: Problem) -> bool:
    """Whether every configuration's offer limit (if any) allows one replica of it."""
    limits = p.offer_limits
    if not limits:
        return True
    for c in configs:
        limit = limits.get(c.offer_id)
        if limit is not None and limit * p.offer(c.offer_id).gpus_per_instance // c.gpus_per_replica < 1:
            return False
    return True


def _group_need_bound(g: Group, need: int, p: Problem) -> int:
    """`_group_bound` of a group whose every member has the need bound `need`."""
    if len(g.configs) == 1:
        return _capped_bound(g.rep, need, p)
    if p.offer_limits and all(c.offer_id in p.offer_limits for c in g.configs):
        need = min(need, sum(_capped_bound(c, need, p) for c in g.configs))
    return need


def _group_bound(g: Group, p: Problem, ub: dict[str, tuple[Config, int]], need_of: dict[str, int]) -> int:
    """The need bound, and the members' availability when every member offer is limited
    (a member's bound is the smaller of the two, so the sum is right in both cases)."""
    if len(g.configs) == 1:
        return ub[g.rep.key][1]
    need = need_of[g.rep.key]
    if all(c.offer_id in p.offer_limits for c in g.configs):
        need = min(need, sum(ub[c.key][1] for c in g.configs))
    return need


def _hosted_bounds(f: Formulation, p: Problem, group_ub: dict[str, int]) -> dict[str, int]:
    """GPUs that replicas could ever take on each offer (for the instance variables' bounds)."""
    gpus: dict[str, int] = defaultdict(int)
    for pool in f.pools:
        hosted = pool.gpus_per_replica * sum(group_ub[g.key] for g in pool.groups)
        for oid in pool.offer_ids:
            gpus[oid] += hosted
    return gpus


def _demand_rows(f: Formulation, stop: Stop) -> None:
    p, lm = f.problem, f.model
    fed = _split_rates(f)
    for i, s in enumerate(p.services):
        if i % 64 == 0:
            stop.check("model building")
        mine = f.by_service.get(s.name, [])
        if len(s.class_demand) == 1 or s.mixed_routing:
            # One class, or the service's mix on every replica (all classes carry its cap).
            if s.role:  # a pool of a disaggregated deployment: it serves the rate routed to its tier
                lm.row(f"demand[{s.name}]", [(f.r[g.key], g.rep.classes[0].throughput) for g in mine]
                       + [(f.split[(s.feeds, s.link)], -1.0)], lb=0.0)
            elif s.total_demand > 0:
                lm.row(f"demand[{s.name}]", [(f.r[g.key], g.rep.classes[0].throughput) for g in mine]
                       + fed.get(s.name, []), lb=s.total_demand)
            continue
        for k, (cname, d) in enumerate(zip(s.class_names, s.class_demand)):
            terms = []
            for g in mine:
                if g.rep.classes[k].throughput > 0:
                    f.x[(g.key, k)] = lm.var(f"x[{g.key},{cname}]", 0, INF)
                    terms.append((f.x[(g.key, k)], 1.0))
            if d > 0:
                lm.row(f"demand[{s.name},{cname}]", terms, lb=d)
        for g in mine:
            share = [(f.x[(g.key, k)], 1.0 / g.rep.classes[k].throughput) for k in range(len(s.class_names))
                     if (g.key, k) in f.x]
            lm.row(f"capacity[{g.key}]", share + [(f.r[g.key], -1.0)], ub=0.0)


def _split_rates(f: Formulation) -> dict[str, list[tuple[int, float]]]:
    """One rate variable per (service, link tier) with both pools in the model: the requests
    the service sends to that disaggregated deployment (solver/compile/disagg.py)."""
    fed: dict[str, list[tuple[int, float]]] = defaultdict(list)
    roles: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s in f.problem.services:
        if s.role and f.by_service.get(s.name):
            roles[(s.feeds, s.link)].add(s.role)
    for s in f.problem.services:
        key = (s.feeds, s.link)
        if s.role == "prefill" and len(roles[key]) == 2:
            f.split[key] = f.model.var(f"split[{s.feeds}@{s.link}]", 0, s.total_demand)
            fed[s.feeds].append((f.split[key], 1.0))
    for s in f.problem.services:  # a pool whose partner has no workers serves nothing
        if s.role and (s.feeds, s.link) not in f.split:
            f.split[(s.feeds, s.link)] = f.model.var(f"split[{s.feeds}@{s.link}:{s.role}]", 0, 0)
    return fed


def _replica_rows(f: Formulation) -> None:
    for s in f.problem.services:
        terms = [(f.r[g.key], 1.0) for g in f.by_service.get(s.name, [])]
        if s.min_replicas:
            f.model.row(f"min_replicas[{s.name}]", terms, lb=s.min_replicas)
        if s.max_replicas is not None:
            f.model.row(f"max_replicas[{s.name}]", terms, ub=s.max_replicas)


def _host_and_packing_rows(f: Formulation) -> None:
    on_offer: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for pool in f.pools:
        g = float(pool.gpus_per_replica)
        if len(pool.offer_ids) == 1:
            on_offer[pool.offer_ids[0]].extend((f.r[grp.key], g) for grp in pool.groups)
            continue
        hosted = [(f.y[(pool.key, oid)], -1.0) for oid in pool.offer_ids]
        f.model.row(f"host[{pool.gpus_per_replica}gpu:{pool.groups[0].key}]",
                    [(f.r[grp.key], 1.0) for grp in pool.groups] + hosted, ub=0.0)
        for oid in pool.offer_ids:
            on_offer[oid].append((f.y[(pool.key, oid)], g))
    for o in f.problem.offers:
        if o.id in f.n:
            f.model.row(f"pack[{o.id}]", on_offer[o.id] + [(f.n[o.id], -float(o.gpus_per_instance))], ub=0.0)


def _same_region_rows(f: Formulation, group_ub: dict[str, int]) -> None:
    p, lm = f.problem, f.model
    if p.same_region == "fleet":
        for o in p.offers:
            if o.id not in f.n:
                continue
            key = ("", region_of(o))
            if key not in f.z:
                f.z[key] = lm.var(f"z[{o.provider}/{o.region}]", 0, 1, integer=True)
            lm.row(f"region[{o.id}]", [(f.n[o.id], 1.0), (f.z[key], -lm.variables[f.n[o.id]].ub)], ub=0.0)
        lm.row("one_region", [(z, 1.0) for z in f.z.values()], ub=1.0)
        return
    for s in p.services:
        own: list[tuple[int, float]] = []
        for g in f.by_service.get(s.name, []):
            key = (s.name, region_of(p.offer(g.rep.offer_id)))
            if key not in f.z:
                f.z[key] = lm.var(f"z[{s.name}@{key[1][0]}/{key[1][1]}]", 0, 1, integer=True)
                own.append((f.z[key], 1.0))
            lm.row(f"region[{g.key}]", [(f.r[g.key], 1.0), (f.z[key], -float(group_ub[g.key]))], ub=0.0)
        if own:
            lm.row(f"one_region[{s.name}]", own, ub=1.0)


def _power_rows(f: Formulation, relaxed: frozenset[str]) -> None:
    """power[site]: the site's running instances at full board power stay within its cap
    (sites in `relaxed` left out). Only instance variables enter, so the row is the same
    in the pooled and per-configuration models."""
    for site in f.problem.power.sites:
        terms = [(f.n[offer_id], kw) for offer_id, kw in site.offer_kw if offer_id in f.n]
        if terms and site.name not in relaxed:
            f.model.row(f"power[{site.name}]", terms, ub=site.cap_kw)


def _quota_rows(f: Formulation) -> None:
    p = f.problem
    for gpu, quota in sorted(p.gpu_quotas.items()):
        terms = [(f.n[o.id], float(o.gpus_per_instance)) for o in p.offers if o.gpu == gpu and o.id in f.n]
        if terms:
            f.model.row(f"quota[{gpu}]", terms, ub=quota)


def gpu_objective(f: Formulation) -> dict[int, float]:
    """Tie-break 1: total GPUs (integer coefficients, so bounds are proven quickly)."""
    return dict(f.gpu_terms)
