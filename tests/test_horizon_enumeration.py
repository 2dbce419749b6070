"""Optimality over periods: on small random multi-period workloads with on-demand and
reserved tiers, the planner's horizon cost equals exhaustive enumeration.

The enumerator shares no code with the planner. Per period it takes the single-period
enumerator of tests/test_optimality_enumeration.py (exact rational arithmetic, every
replica vector of every service, Pareto-minimal GPU use per offer, services sharing
instances) on the period's demand (base x `demand.profile[period]`), and turns every
combined use into instance counts per offer. Then it tries every reservation vector R
(0 .. the most instances any period needs, per offer that has a reserved price):

  cost(R) = H sum_o pR_o R_o + sum_p h_p min over the period's instance vectors n of
            sum_o pD_o max(0, n_o - R_o)          (an n with n_o > R_o needs on-demand)

and the optimum is the cheapest R. Reservations are constant over the horizon and paid
every hour of it, used or not; on-demand instances are paid only when they run.
"""

from __future__ import annotations

import copy
import functools
import itertools
import math
import random
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from solver.errors import InfeasibleError
from solver.plan import plan
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers_random import random_workload  # noqa: E402
from test_optimality_enumeration import enum_offers, pareto_min, service_usages  # noqa: E402

CASES = 60
MULTIPLIERS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.0)  # exact in binary floating point; at most 1 keeps enumeration small
HOURS = (4.0, 8.0, 12.0)
TOL_USD = 1e-6


def horizon_case(seed: int) -> dict:
    """A random single-hour workload (tests/helpers_random.py) spread over 2-3 periods,
    with 1- and 3-year reserved prices on some offers."""
    rng = random.Random(10_000 + seed)
    w = random_workload(rng, max_services=2)
    cons = w.get("constraints", {})
    cons.pop("budget_usd_per_hour", None)  # a per-hour budget means the peak hour here: not enumerated
    periods = [{"name": f"p{i}", "hours": rng.choice(HOURS)} for i in range(rng.randint(2, 3))]
    w["periods"] = periods
    for svc in w["services"]:
        svc["demand"]["profile"] = {p["name"]: rng.choice(MULTIPLIERS) for p in periods if rng.random() < 0.8}
    for o in w["catalog"]["offers"]:
        roll = rng.random()
        if roll < 0.7:
            o["reserved_3y_price_usd_per_hour"] = round(o["price_usd_per_hour"] * rng.choice((0.4, 0.5, 0.6)), 4)
        if roll < 0.4:
            o["reserved_1y_price_usd_per_hour"] = round(o["price_usd_per_hour"] * rng.choice((0.6, 0.7)), 4)
    tiers = ["on_demand", "reserved_1y", "reserved_3y"]
    if rng.random() < 0.15:
        tiers = ["reserved_1y", "reserved_3y"]  # reserved only: every running instance must be reserved
    cons["pricing_tiers"] = tiers
    w["constraints"] = cons
    return w


def _period_workload(w: dict, period: str) -> dict:
    one = copy.deepcopy(w)
    for svc in one["services"]:
        m = svc["demand"].get("profile", {}).get(period, 1.0)
        svc["demand"]["items_per_min"] = svc["demand"]["items_per_min"] * m
    return one


def period_instance_options(w: dict, period: str) -> list[tuple[int, ...]]:
    """Pareto-minimal instance vectors (per offer) that serve the period, within limits and quotas."""
    one = _period_workload(w, period)
    cons = one.get("constraints", {})
    headroom = Fraction(cons.get("headroom", 0.0))
    offers = enum_offers(one)
    per_service = [service_usages(svc, offers, headroom) for svc in one["services"]]
    if any(not u for u in per_service):
        return []
    combined = {tuple(0 for _ in offers)}
    for usages in per_service:
        combined = pareto_min({tuple(a + b for a, b in zip(c, u)) for c in combined for u in usages})
    quotas = cons.get("gpu_quotas", {})
    out = set()
    for u in combined:
        n = tuple(math.ceil(g / o.gpus) for g, o in zip(u, offers))
        if any(o.limit is not None and k > o.limit for o, k in zip(offers, n)):
            continue
        if any(sum(o.gpus * k for o, k in zip(offers, n) if o.gpu == gpu) > q for gpu, q in quotas.items()):
            continue
        out.add(n)
    return sorted(pareto_min(out))


def brute_force_horizon(w: dict) -> tuple[float, tuple[int, ...]] | None:
    """(the cheapest horizon cost, its reservation per offer), or None when some period has no fleet."""
    offers_raw = w["catalog"]["offers"]
    tiers = w["constraints"]["pricing_tiers"]
    od_ok = "on_demand" in tiers
    reserved_price = []
    for o in offers_raw:
        prices = [o[f"{t}_price_usd_per_hour"] for t in ("reserved_1y", "reserved_3y")
                  if t in tiers and f"{t}_price_usd_per_hour" in o]
        reserved_price.append(min(prices) if prices else None)
    periods = w["periods"]
    hours = sum(p["hours"] for p in periods)
    options = [period_instance_options(w, p["name"]) for p in periods]
    if any(not opts for opts in options):
        return None
    top = [max((n[i] for opts in options for n in opts), default=0) for i in range(len(offers_raw))]
    ranges = [range(top[i] + 1) if reserved_price[i] is not None else range(1) for i in range(len(offers_raw))]
    best = None
    for R in itertools.product(*ranges):
        cost = hours * sum(reserved_price[i] * R[i] for i in range(len(R)) if reserved_price[i] is not None)
        for p, opts in zip(periods, options):
            cheapest = None
            for n in opts:
                extra = [max(0, n[i] - R[i]) for i in range(len(n))]
                if not od_ok and any(extra):
                    continue
                c = sum(o["price_usd_per_hour"] * e for o, e in zip(offers_raw, extra))
                cheapest = c if cheapest is None else min(cheapest, c)
            if cheapest is None:
                cost = None
                break
            cost += p["hours"] * cheapest
        if cost is not None and (best is None or cost < best[0]):
            best = (cost, R)
    return best


@functools.cache
def enumerated(seed: int) -> tuple[dict, tuple[float, tuple[int, ...]] | None]:
    w = horizon_case(seed)
    return w, brute_force_horizon(w)


def plan_matches_enumeration(w: dict, expected: float | None, shown: str) -> dict | None:
    """Plan `w` and check it against the enumerated optimum: InfeasibleError where there is
    none, else proven optimal, evaluated ok and at the enumerated cost (`shown`: the result's
    field the failure message shows). Returns the result, or None when infeasible."""
    if expected is None:
        with pytest.raises(InfeasibleError):
            plan(parse_workload(w))
        return None
    result = plan(parse_workload(w)).to_dict()
    assert result["status"] == "optimal", result["horizon_solver"]
    assert result["evaluation"]["ok"], result["evaluation"]
    assert abs(result["horizon_cost_usd"] - expected) <= TOL_USD * max(1.0, expected), (
        f"planner ${result['horizon_cost_usd']}, enumeration ${expected}; {shown} {result[shown]}")
    return result


@pytest.mark.parametrize("seed", range(CASES))
def test_multi_period_plan_matches_enumeration(seed: int) -> None:
    w, found = enumerated(seed)
    result = plan_matches_enumeration(w, found[0] if found is not None else None, "reservations")
    if result is not None:
        assert all(p["evaluation"]["ok"] for p in result["periods"])


def test_cases_exercise_reservations_and_on_demand() -> None:
    """The seeds must include plans that reserve, plans that do not, infeasible ones, and reserved-only tiers."""
    reserve = skip = infeasible = reserved_only = 0
    for seed in range(CASES):
        w, found = enumerated(seed)
        reserved_only += "on_demand" not in w["constraints"]["pricing_tiers"]
        if found is None:
            infeasible += 1
            continue
        reserve += any(found[1])
        skip += not any(found[1])
    assert reserve >= 10 and skip >= 5 and infeasible >= 3 and reserved_only >= 3, (reserve, skip, infeasible, reserved_only)
