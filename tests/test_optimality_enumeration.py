"""Optimality: on small random workloads the planner's cost equals exhaustive enumeration.

The enumerator shares no code with the planner. It reads the workload dict itself and
works in exact rational arithmetic:

1. Configurations: offer x GPUs per replica (a power of two dividing the instance's GPU
   count) with a measured profile; per request class the class-specific profile wins over
   the generic one; a class whose profile misses the latency SLO is not served there; a
   configuration whose profiles need more memory than the GPU has is dropped.
2. Per service, every replica vector r (r_c <= R_c, see `_replica_bounds`) is tried; the
   feasible ones (min/max replicas, demand with exact fractional routing between classes)
   are reduced to their GPU usage per offer, keeping only the Pareto-minimal vectors.
3. Services share instances: the Minkowski sum of the services' usage sets (Pareto-
   minimal again) lists every way the fleet's GPUs can be used. Replica sizes are powers
   of two dividing the instance size, so replicas totalling u GPUs on one offer fit on
   ceil(u / G) instances of it (first-fit decreasing packs such sizes perfectly).
4. For each combined usage the cheapest fleet is ceil(u_o / G_o) instances per offer
   (every other constraint is an upper bound); the optimum is the cheapest one that
   respects offer limits, GPU quotas and the budget.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest

from solver.errors import InfeasibleError
import solver.solve_stage as solve_stage
from solver.optimize import formulation
from solver.plan import plan
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))  # helpers_random sits beside the tests
from helpers_random import GPU_MEMORY_GIB, random_workload  # noqa: E402

RANDOM_WORKLOADS = 240
COST_TOL_USD_PER_HOUR = 1e-6
SUPPORTED_CONSTRAINTS = {"headroom", "gpu_quotas", "offer_quotas", "budget_usd_per_hour"}


# ---------------------------------------------------------------- exact routing feasibility
def lp_feasible(a_le: list[list[Fraction]], b_le: list[Fraction],
                a_ge: list[list[Fraction]], b_ge: list[Fraction]) -> bool:
    """Is there y >= 0 with a_le y <= b_le and a_ge y >= b_ge (all b >= 0)?

    Phase-1 simplex in exact rationals with Bland's rule (which cannot cycle): minimise the
    sum of artificial variables; the system is feasible iff that minimum is 0.
    """
    n = len((a_le or a_ge)[0])
    p, q = len(a_le), len(a_ge)
    ncol = n + p + 2 * q
    rows: list[list[Fraction]] = []
    basis: list[int] = []
    for i, (a, b) in enumerate(zip(a_le, b_le)):
        row = [Fraction(x) for x in a] + [Fraction(0)] * (p + 2 * q) + [Fraction(b)]
        row[n + i] = Fraction(1)
        rows.append(row)
        basis.append(n + i)
    for i, (a, b) in enumerate(zip(a_ge, b_ge)):
        row = [Fraction(x) for x in a] + [Fraction(0)] * (p + 2 * q) + [Fraction(b)]
        row[n + p + i] = Fraction(-1)  # surplus
        row[n + p + q + i] = Fraction(1)  # artificial
        rows.append(row)
        basis.append(n + p + q + i)
    # Reduced costs of "minimise the artificials"; the last entry is minus the objective.
    obj = [Fraction(0)] * (ncol + 1)
    for j in range(n + p + q, ncol):
        obj[j] = Fraction(1)
    for row in rows[p:]:
        obj = [o - x for o, x in zip(obj, row)]
    while True:
        enter = next((j for j in range(ncol) if obj[j] < 0), None)
        if enter is None:
            return obj[-1] == 0
        best: tuple[Fraction, int, int] | None = None
        for i, row in enumerate(rows):
            if row[enter] > 0:
                cand = (row[-1] / row[enter], basis[i], i)
                if best is None or cand[:2] < best[:2]:
                    best = cand
        assert best is not None, "phase 1 is bounded below by 0"
        i = best[2]
        pivot = rows[i][enter]
        rows[i] = [x / pivot for x in rows[i]]
        for k, row in enumerate(rows):
            if k != i and row[enter] != 0:
                f = row[enter]
                rows[k] = [x - f * y for x, y in zip(row, rows[i])]
        f = obj[enter]
        obj = [x - f * y for x, y in zip(obj, rows[i])]
        basis[i] = enter


def routing_feasible_lp(rates: list[tuple[Fraction, ...]], replicas: list[int], demand: tuple[Fraction, ...]) -> bool:
    """Replicas time-share classes: y_ck replica-time of config c on class k."""
    variables = [(c, k) for c, t in enumerate(rates) for k in range(len(demand)) if t[k] > 0 and replicas[c] > 0]
    needed = [k for k, d in enumerate(demand) if d > 0]
    if not needed:
        return True
    if any(not any(k == vk for _, vk in variables) for k in needed):
        return False
    a_le = [[Fraction(1) if vc == c else Fraction(0) for vc, _ in variables] for c in range(len(rates)) if replicas[c] > 0]
    b_le = [Fraction(r) for r in replicas if r > 0]
    a_ge = [[rates[vc][vk] if vk == k else Fraction(0) for vc, vk in variables] for k in needed]
    b_ge = [demand[k] for k in needed]
    return lp_feasible(a_le, b_le, a_ge, b_ge)


def routing_feasible_two_classes(rates: list[tuple[Fraction, ...]], replicas: list[int],
                                 demand: tuple[Fraction, ...]) -> bool:
    """Two classes: a fractional knapsack decides it exactly.

    Class 1 should go where it costs the least class-2 capacity per unit served, i.e. in
    increasing order of t_c2 / t_c1; whatever replica time is left serves class 2.
    """
    d1, d2 = demand
    if sum(t[0] * r for t, r in zip(rates, replicas)) < d1:
        return False
    cap2 = sum(t[1] * r for t, r in zip(rates, replicas))
    need, lost = d1, Fraction(0)
    for t, r in sorted(((t, r) for t, r in zip(rates, replicas) if t[0] > 0 and r > 0), key=lambda tr: tr[0][1] / tr[0][0]):
        if need <= 0:
            break
        take = min(need, t[0] * r)
        lost += take * t[1] / t[0]
        need -= take
    return cap2 - lost >= d2


def routing_feasible(rates, replicas, demand) -> bool:
    if len(demand) == 1:
        return sum(t[0] * r for t, r in zip(rates, replicas)) >= demand[0]
    if len(demand) == 2:
        return routing_feasible_two_classes(rates, replicas, demand)
    return routing_feasible_lp(rates, replicas, demand)


# ---------------------------------------------------------------- the enumerator
@dataclass(frozen=True)
class EnumOffer:
    id: str
    gpu: str
    gpus: int
    price_usd_per_hour: float
    limit: int | None  # instances


@dataclass(frozen=True)
class EnumConfig:
    offer: int  # index into the offer list
    gpus: int  # per replica
    rates: tuple[Fraction, ...]  # per class, items/min per replica; 0 = not served here


def enum_offers(w: dict) -> list[EnumOffer]:
    quotas = w.get("constraints", {}).get("offer_quotas", {})
    out = []
    for o in w["catalog"]["offers"]:
        oid = f"{o['provider']}/{o['name']}"
        bounds = [b for b in (o.get("available_instances"), quotas.get(oid)) if b is not None]
        out.append(EnumOffer(oid, o["gpu"], o["gpus_per_instance"], o["price_usd_per_hour"], min(bounds) if bounds else None))
    return out


def class_names(svc: dict) -> list[str | None]:
    classes = svc["demand"].get("classes")
    return [c["name"] for c in classes] if classes else [None]


def class_demand(svc: dict, headroom: Fraction) -> tuple[Fraction, ...]:
    d = svc["demand"]
    rate = Fraction(d["items_per_min"]) * (1 + headroom)
    classes = d.get("classes")
    return tuple(rate * Fraction(c["share"]) for c in classes) if classes else (rate,)


def enum_configs(svc: dict, offers: list[EnumOffer]) -> list[EnumConfig]:
    slo = svc.get("slo", {}).get("latency_ms")
    out = []
    for oi, o in enumerate(offers):
        for g in (1, 2, 4, 8):
            if g > o.gpus or o.gpus % g:
                continue
            here = [p for p in svc["profiles"] if p["gpu"] == o.gpu and p.get("gpus_per_replica", 1) == g
                    and p.get("offer") in (None, o.id)]
            if not here or any(p.get("memory_gib_per_gpu", 0) > GPU_MEMORY_GIB[o.gpu] for p in here):
                continue
            rates = []
            for k in class_names(svc):
                specific = [p for p in here if k is not None and p.get("request_class") == k]
                generic = [p for p in here if p.get("request_class") is None]
                assert len(specific) <= 1 and len(generic) <= 1, "the generator never makes ambiguous profiles"
                chosen = (specific or generic or [None])[0]
                ok = chosen is not None and (slo is None or chosen["latency_ms"] <= slo)
                rates.append(Fraction(chosen["items_per_min"]) if ok else Fraction(0))
            if any(rates):
                out.append(EnumConfig(oi, g, tuple(rates)))
    return out


def _replica_bounds(configs: list[EnumConfig], demand: tuple[Fraction, ...], min_r: int, max_r: int | None) -> list[int]:
    """R_c = max(min replicas, sum_k ceil(D_k / t_ck)) bounds every useful replica count.

    With r_c >= sum_k ceil(D_k / t_ck), config c alone can take all of every class it
    serves; lowering r_c to R_c (>= min replicas) keeps the plan feasible and uses fewer GPUs.
    """
    out = []
    for c in configs:
        need = sum(math.ceil(d / t) for d, t in zip(demand, c.rates) if t > 0)
        bound = max(need, min_r)
        out.append(min(bound, max_r) if max_r is not None else bound)
    return out


def pareto_min(vectors: set[tuple[int, ...]]) -> set[tuple[int, ...]]:
    ordered = sorted(vectors, key=sum)
    kept: list[tuple[int, ...]] = []
    for v in ordered:
        if not any(all(a <= b for a, b in zip(k, v)) for k in kept):
            kept.append(v)
    return set(kept)


def service_usages(svc: dict, offers: list[EnumOffer], headroom: Fraction) -> set[tuple[int, ...]]:
    """Pareto-minimal GPU usage per offer over all feasible replica vectors (empty: unservable).

    Every vector r with r_c <= R_c is covered: for each choice of all but the last
    configuration's replicas, the last one's count rises from 0 until the service is
    served; larger counts use more GPUs for the same rest, so they are never minimal.
    """
    demand = class_demand(svc, headroom)
    min_r, max_r = svc.get("min_replicas", 0), svc.get("max_replicas")
    zero = tuple(0 for _ in offers)
    if sum(demand) == 0 and min_r == 0:
        return {zero}
    configs = enum_configs(svc, offers)
    if not configs:
        return set()
    bounds = _replica_bounds(configs, demand, min_r, max_r)
    # Routing depends only on how many replicas have each distinct rate vector.
    kinds = sorted({c.rates for c in configs})
    kind_of = [kinds.index(c.rates) for c in configs]
    served: dict[tuple[int, ...], bool] = {}
    usages: set[tuple[int, ...]] = set()
    for head in itertools.product(*(range(b + 1) for b in bounds[:-1])):
        for last in range(bounds[-1] + 1):
            r = list(head) + [last]
            total = sum(r)
            if max_r is not None and total > max_r:
                break
            if total < min_r:
                continue
            per_kind = [0] * len(kinds)
            for k, n in zip(kind_of, r):
                per_kind[k] += n
            key = tuple(per_kind)
            if key not in served:
                served[key] = routing_feasible(kinds, per_kind, demand)
            if not served[key]:
                continue
            u = list(zero)
            for c, n in zip(configs, r):
                u[c.offer] += c.gpus * n
            usages.add(tuple(u))
            break
    return pareto_min(usages)


def brute_force_optimum(w: dict) -> float | None:
    """Cheapest fleet cost in $/hour, or None when no fleet satisfies the workload.

    Depth-first over the services' usage vectors. The cheapest fleet for a combined usage
    u is ceil(u_o / G_o) instances of each offer; its cost, the instance counts and the
    GPUs per type only grow as services are added, so a partial choice that already costs
    at least the best found, or breaks a limit, quota or the budget, is cut.
    """
    cons = w.get("constraints", {})
    assert set(cons) <= SUPPORTED_CONSTRAINTS, f"the enumerator does not model {set(cons) - SUPPORTED_CONSTRAINTS}"
    headroom = Fraction(cons.get("headroom", 0.0))
    offers = enum_offers(w)
    quotas = cons.get("gpu_quotas", {})
    budget = cons.get("budget_usd_per_hour")
    per_service = [service_usages(svc, offers, headroom) for svc in w["services"]]
    if any(not u for u in per_service):
        return None

    def fleet_cost(u: tuple[int, ...]) -> float | None:
        n = [math.ceil(g / o.gpus) for g, o in zip(u, offers)]
        if any(o.limit is not None and k > o.limit for o, k in zip(offers, n)):
            return None
        if any(sum(o.gpus * k for o, k in zip(offers, n) if o.gpu == gpu) > q for gpu, q in quotas.items()):
            return None
        cost = sum(o.price_usd_per_hour * k for o, k in zip(offers, n))
        if budget is not None and cost > budget + 1e-9:
            return None
        return cost

    options = [sorted(u, key=lambda v: (fleet_cost(v) is None, fleet_cost(v) or 0.0, v)) for u in per_service]
    best: list[float] = []

    def search(i: int, used: tuple[int, ...]) -> None:
        cost = fleet_cost(used)
        if cost is None or (best and cost >= best[0] - 1e-12):
            return
        if i == len(options):
            best[:] = [cost]
            return
        for v in options[i]:
            search(i + 1, tuple(a + b for a, b in zip(used, v)))

    search(0, tuple(0 for _ in offers))
    return best[0] if best else None


# ---------------------------------------------------------------- the tests
@functools.cache
def random_case(seed: int) -> tuple[dict, float | None]:
    w = random_workload(random.Random(seed))
    return w, brute_force_optimum(w)


def check_against_enumeration(w: dict, expected: float | None) -> None:
    """The planner finds the enumerated optimum, or proves infeasibility when there is none."""
    if expected is None:
        with pytest.raises(InfeasibleError):
            plan(parse_workload(w))
        return
    result = plan(parse_workload(w))
    assert result.status == "optimal"
    assert result.evaluation["ok"], result.evaluation
    assert abs(result.total_price_usd_per_hour - expected) <= COST_TOL_USD_PER_HOUR, (
        f"planner ${result.total_price_usd_per_hour}/h, enumeration ${expected}/h")


@pytest.mark.parametrize("seed", range(RANDOM_WORKLOADS))
def test_random_workload_matches_enumeration(seed: int) -> None:
    check_against_enumeration(*random_case(seed))


POOLED_SEEDS = range(0, RANDOM_WORKLOADS, 3)


@pytest.mark.parametrize("seed", POOLED_SEEDS)
def test_pooled_formulation_matches_enumeration(seed: int, monkeypatch) -> None:
    """Replicas pooled over interchangeable offers (the large-model formulation, forced on
    here) give the same optimum on every random workload."""
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    check_against_enumeration(*random_case(seed))


def test_pooling_is_exercised(monkeypatch) -> None:
    """Many random workloads have a service whose replicas can go on several offers."""
    monkeypatch.setattr(formulation, "POOL_FROM_CONFIGS", 0)
    pooled = 0
    for seed in POOLED_SEEDS:
        w, expected = random_case(seed)
        if expected is None:
            continue
        built = []
        monkeypatch.setattr(formulation, "build", _recording(formulation.build, built))
        monkeypatch.setattr(solve_stage, "build", _recording(solve_stage.build, built))
        plan(parse_workload(w))
        pooled += any(len(p.offer_ids) > 1 for f in built for p in f.pools)
    assert pooled >= 15, pooled


def _recording(build, into: list):
    def wrapper(*args, **kwargs):
        f = build(*args, **kwargs)
        into.append(f)
        return f
    return wrapper


def test_random_workloads_cover_the_hard_cases() -> None:
    """The seeds above must exercise classes, constraints and infeasibility, not just easy cases."""
    cases = [random_case(seed) for seed in range(RANDOM_WORKLOADS)]
    workloads = [w for w, _ in cases]
    services = [s for w in workloads for s in w["services"]]
    assert sum(o is None for _, o in cases) >= 30
    assert sum(o is not None for _, o in cases) >= 130
    assert sum(len(s["demand"].get("classes") or []) == 2 for s in services) >= 100
    assert sum(len(s["demand"].get("classes") or []) == 3 for s in services) >= 20
    assert sum(len(w["services"]) > 1 for w in workloads) >= 100
    for key in SUPPORTED_CONSTRAINTS:
        assert sum(key in w.get("constraints", {}) for w in workloads) >= 20, key
    assert sum("min_replicas" in s for s in services) >= 80
    assert sum("max_replicas" in s for s in services) >= 20
    assert sum("slo" in s for s in services) >= 80


def test_two_class_knapsack_agrees_with_exact_lp() -> None:
    """The enumerator's two routing oracles agree (each checks the other)."""
    rng = random.Random(7)
    outcomes = set()
    for _ in range(400):
        n = rng.randint(1, 3)
        rates = [tuple(Fraction(rng.choice((0, 5, 10, 20, 30, 45))) for _ in range(2)) for _ in range(n)]
        rates = [t if any(t) else (Fraction(10), Fraction(0)) for t in rates]
        replicas = [rng.randint(0, 3) for _ in range(n)]
        demand = (Fraction(rng.randint(0, 80), rng.choice((1, 2, 4))), Fraction(rng.randint(0, 80), rng.choice((1, 2, 4))))
        fast = routing_feasible_two_classes(rates, replicas, demand)
        assert fast == routing_feasible_lp(rates, replicas, demand), (rates, replicas, demand)
        outcomes.add(fast)
    assert outcomes == {True, False}


def test_lp_oracle_time_shares_replicas() -> None:
    # One replica: 60/min of short or 20/min of long. 30 short (0.5 replica) + 10 long (0.5) fits; 11 long does not.
    rates = [(Fraction(60), Fraction(20))]
    assert routing_feasible_lp(rates, [1], (Fraction(30), Fraction(10)))
    assert not routing_feasible_lp(rates, [1], (Fraction(30), Fraction(11)))


# ---------------------------------------------------------------- hand-made cases with known answers
def _offer(name: str, gpu: str, gpus: int, price: float, **extra) -> dict:
    return {"provider": "p", "name": name, "gpu": gpu, "gpus_per_instance": gpus, "price_usd_per_hour": price, **extra}


def _service(name: str, rate: float, profiles: list[dict], **extra) -> dict:
    return {"name": name, "demand": {"items_per_min": rate}, "profiles": profiles, **extra}


def test_two_services_share_one_eight_gpu_instance() -> None:
    # Each service needs one 4-GPU A100 replica; one 8-GPU instance ($10) beats two 4-GPU ones ($12).
    prof = [{"gpu": "A100-80GB", "gpus_per_replica": 4, "items_per_min": 100.0, "latency_ms": 50.0}]
    w = {"services": [_service("a", 80, prof), _service("b", 90, prof)],
         "catalog": {"offers": [_offer("x8", "A100-80GB", 8, 10.0), _offer("x4", "A100-80GB", 4, 6.0)]}}
    assert brute_force_optimum(w) == 10.0
    result = plan(parse_workload(w))
    assert result.total_price_usd_per_hour == pytest.approx(10.0, abs=COST_TOL_USD_PER_HOUR)
    assert [(f.offer_id, f.instances) for f in result.fleet] == [("p/x8", 1)]


def test_two_services_do_not_share_when_two_small_instances_are_cheaper() -> None:
    prof = [{"gpu": "A100-80GB", "gpus_per_replica": 4, "items_per_min": 100.0, "latency_ms": 50.0}]
    w = {"services": [_service("a", 80, prof), _service("b", 90, prof)],
         "catalog": {"offers": [_offer("x8", "A100-80GB", 8, 13.0), _offer("x4", "A100-80GB", 4, 6.0)]}}
    expected = brute_force_optimum(w)
    assert expected == 12.0
    check_against_enumeration(w, expected)


def test_one_replica_time_shares_two_classes() -> None:
    # 30/min short (0.5 replica) + 30/min long (1.5 replicas) = exactly 2 replicas.
    # Giving each class its own replicas would need ceil(0.5) + ceil(1.5) = 3.
    classes = [{"name": "short", "share": 0.5, "prompt_tokens": 1, "output_tokens": 1},
               {"name": "long", "share": 0.5, "prompt_tokens": 1, "output_tokens": 1}]
    svc = {"name": "mixed", "demand": {"items_per_min": 60.0, "classes": classes},
           "profiles": [{"gpu": "A10", "request_class": "short", "items_per_min": 60.0, "latency_ms": 50.0},
                        {"gpu": "A10", "request_class": "long", "items_per_min": 20.0, "latency_ms": 200.0}]}
    w = {"services": [svc], "catalog": {"offers": [_offer("a10", "A10", 1, 1.0)]}}
    expected = brute_force_optimum(w)
    assert expected == 2.0
    check_against_enumeration(w, expected)


def test_mixing_gpu_types_beats_either_alone() -> None:
    # 100/min: 4 A10 ($4) or 2 A100 ($5); one of each serves 110/min for $3.5.
    w = {"services": [_service("img", 100, [{"gpu": "A10", "items_per_min": 30.0, "latency_ms": 90.0},
                                            {"gpu": "A100-80GB", "items_per_min": 80.0, "latency_ms": 40.0}])],
         "catalog": {"offers": [_offer("a10", "A10", 1, 1.0), _offer("a100", "A100-80GB", 1, 2.5)]}}
    expected = brute_force_optimum(w)
    assert expected == 3.5
    check_against_enumeration(w, expected)


def test_latency_slo_rules_out_the_cheap_gpu() -> None:
    w = {"services": [_service("img", 100, [{"gpu": "A10", "items_per_min": 30.0, "latency_ms": 90.0},
                                            {"gpu": "A100-80GB", "items_per_min": 80.0, "latency_ms": 40.0}],
                               slo={"latency_ms": 50.0})],
         "catalog": {"offers": [_offer("a10", "A10", 1, 1.0), _offer("a100", "A100-80GB", 1, 2.5)]}}
    expected = brute_force_optimum(w)
    assert expected == 5.0
    check_against_enumeration(w, expected)


def test_gpu_quota_forces_the_dearer_gpu_and_budget_makes_it_infeasible() -> None:
    base = {"services": [_service("img", 100, [{"gpu": "A10", "items_per_min": 30.0, "latency_ms": 90.0},
                                               {"gpu": "A100-80GB", "items_per_min": 80.0, "latency_ms": 40.0}])],
            "catalog": {"offers": [_offer("a10", "A10", 1, 1.0), _offer("a100", "A100-80GB", 1, 2.5)]}}
    # Without A10s: 2 A100 at $5. A $4.5 budget then leaves nothing.
    w = {**base, "constraints": {"gpu_quotas": {"A10": 0}}}
    expected = brute_force_optimum(w)
    assert expected == 5.0
    check_against_enumeration(w, expected)
    w = {**base, "constraints": {"gpu_quotas": {"A10": 0}, "budget_usd_per_hour": 4.5}}
    assert brute_force_optimum(w) is None
    check_against_enumeration(w, None)


def test_min_replicas_on_zero_demand() -> None:
    w = {"services": [_service("standby", 0, [{"gpu": "L4", "items_per_min": 10.0, "latency_ms": 90.0}], min_replicas=3)],
         "catalog": {"offers": [_offer("l4x1", "L4", 1, 0.8), _offer("l4x4", "L4", 4, 2.2)]}}
    expected = brute_force_optimum(w)
    assert expected == pytest.approx(2.2)
    check_against_enumeration(w, expected)


def test_profile_pinned_to_the_dearer_of_two_identical_offers() -> None:
    # The measurement holds only on p/dear; p/cheap has the same GPUs but no profile, so
    # it cannot stand in for p/dear (offer pruning must not treat them as identical).
    w = {"services": [_service("img", 10, [{"gpu": "A10", "items_per_min": 20.0, "latency_ms": 50.0, "offer": "p/dear"}])],
         "catalog": {"offers": [_offer("dear", "A10", 1, 2.0), _offer("cheap", "A10", 1, 1.0)]}}
    expected = brute_force_optimum(w)
    assert expected == 2.0
    check_against_enumeration(w, expected)


def test_max_replicas_when_the_greedy_plan_breaks_it() -> None:
    # Greedy: 3 L4 replicas for $3, but max_replicas is 2. The cheapest plan that keeps to
    # 2 replicas is one A100 ($5); a $3 greedy bound must not prune it.
    w = {"services": [_service("img", 100, [{"gpu": "L4", "items_per_min": 40.0, "latency_ms": 50.0},
                                            {"gpu": "A100-80GB", "items_per_min": 100.0, "latency_ms": 50.0}],
                               max_replicas=2)],
         "catalog": {"offers": [_offer("l4", "L4", 1, 1.0), _offer("a100", "A100-80GB", 1, 5.0)]}}
    expected = brute_force_optimum(w)
    assert expected == 5.0
    check_against_enumeration(w, expected)
