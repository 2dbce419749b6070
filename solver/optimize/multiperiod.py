"""The multi-period plan: one MIP over the horizon, solved by branching on reserved levels.

The model (docs/formulation.md, "Periods, tiers and the running fleet"): per offer o an
integer reservation R_o, paid every hour of the horizon H at the reserved price; per
period p (h_p hours) firm instances F_op (reserved up to R_o, on-demand above it) and
spot instances S_op, with every single-period row (demand, SLO-feasible configurations,
packing, quotas, spot share and regions, change costs in the first period):

  minimise  H sum_o pR_o R_o + sum_p h_p sum_o (pD_o (F_op - R_o)^+ + pS_o S_op) + changes

Only R links the periods, so the solver branches on reservation boxes lo_o <= R_o <= hi_o
(`_search`). At a node each period is a single-period MIP whose firm instances are priced
in convex segments: the first lo_o are prepaid (their H pR_o lo_o is a constant), the next
hi_o - lo_o cost pR_o per hour, any more pD_o. For every R in the box this prices every
period's fleet at or below what it really costs, so the sum of the period optima (plus
the prepaid constant) is a lower bound; the period fleets together, with each R_o chosen
as the best level for them, are a feasible plan: the incumbent. Branching splits the box
of the offer whose reservation is priced least accurately at its best level for the
periods' fleets. A child re-solves only the periods whose fleet the split changes the price
of (a period that stays inside the child's box keeps its optimum). Periods with equal
demand are merged (their hours add up): identical periods would only repeat work.

Plans besides the nodes' (docs/formulation.md, "Incumbents"): right after the root, a dive
from the horizon LP's reservation (`_lp_dive`: every period solved with it prepaid), then
fleets at on-demand and Dantzig-Wolfe prices, and a restricted master MIP over the fleets
found. They give plans; the bound is the nodes' period MIPs and the cut LP (`_cut_lp`).

Budgets per day or month link all periods: a plan that breaks them is never taken
(`_horizon_cost`), and the restricted master MIP picks known fleets within them.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from solver.compile.problem import Config, Problem
from solver.interrupt import NEVER, Stop
from solver.optimize.backends import SolveOptions
from solver.optimize.linear import INF, LinearModel, SolveOutcome
from solver.optimize.period_model import (PeriodSpec, PeriodVars, add_period, budget_row,
                                          instance_upper_bounds, offer_prices, running_counts)

HOURS_PER_DAY = 24.0
HOURS_PER_MONTH = 730.0
COST_TOL_USD_PER_HOUR = 1e-6  # the single-period MIP's absolute gap, per hour of the horizon


@dataclass
class PeriodPlan:
    """One merged period's fleet: firm and spot instances per offer, replicas per
    (configuration, spot) and their routed traffic per class."""

    firm: dict[str, int]
    spot: dict[str, int]
    replicas: dict[tuple[str, bool], int]
    routed: dict[tuple[str, bool], tuple[float, ...]]
    objective: float  # the period's MIP objective at its node's prices (without the prepaid part)
    bound: float
    status: str
    values: list[float] = field(default_factory=list, repr=False)


@dataclass
class HorizonSolution:
    status: str  # "optimal" | "feasible"
    horizon_cost_usd: float
    bound_usd: float
    reserved: dict[str, int]  # offer id -> instances reserved for the horizon
    reserved_term: dict[str, str]
    plans: list[PeriodPlan]  # per original period (merged periods share one)
    merged_index: list[int]  # original period -> merged period
    method: str  # "reserved-level branch and bound"
    nodes: int = 0
    period_solves: int = 0
    merged_periods: int = 0
    detail: str = ""
    change_cost_usd: float = 0.0

    @property
    def gap(self) -> float:
        if self.horizon_cost_usd <= 0:
            return 0.0
        return max(0.0, (self.horizon_cost_usd - self.bound_usd) / self.horizon_cost_usd)


@dataclass
class _Column:
    """A period fleet the restricted master may pick: firm instances per reservable offer,
    and the rest of its cost (other firm instances at on-demand, spot, changes)."""

    k: int
    firm: dict[str, int]
    other_usd: float  # over the period
    other_usd_per_hour: float  # running cost per hour, for the per-hour budget
    plan: PeriodPlan


@dataclass
class _Node:
    lo: dict[str, int]
    hi: dict[str, int]
    plans: list[PeriodPlan | None]
    bound: float = -math.inf
    depth: int = 0
    finished: bool = False  # a leaf whose unproven periods had the rest of the time


# Period MIPs solved at once (the planning target machine has 2 cores).
PERIOD_WORKERS = max(1, min(2, os.cpu_count() or 1))
ROOT_SHARE = 0.5  # of the time, at most, for the root's first pass over the periods
MIN_PERIOD_S = 0.5
ROOT_ROUNDS = 4  # Dantzig-Wolfe rounds at the root: more fleets for the restricted master
SMOOTHING = 0.7  # weight of the uniform prices in each round's prices (stabilises the master's duals)
MASTER_MIP_SHARE = 0.25  # of the time left, at most, for one restricted master MIP
MASTER_EVERY = 25  # nodes between restricted master MIPs
DIVE_EVERY = 10  # nodes between dives (every period solved at the master LP's rounded reservation)
LP_DIVE_SHARE = 0.35  # of the time left, at most, for each round of the dive from the horizon LP


class HorizonSolver:
    def __init__(self, problem: Problem, configs: list[Config], backend, stop: Stop = NEVER,
                 time_limit_s: float = 60.0):
        self.p = problem
        self.configs = configs
        self.backend = backend
        self.stop = stop
        self.t0 = time.monotonic()
        self.deadline = self.t0 + time_limit_s
        if stop.deadline is not None:
            self.deadline = min(self.deadline, stop.deadline)
        self.prices = offer_prices(problem)
        self.specs, self.merged_index = merge_periods(problem)
        self.hours = sum(s.hours for s in self.specs)
        self.tol = COST_TOL_USD_PER_HOUR * max(self.hours, 1.0)
        # Instances an offer may need in any period: the reservation never exceeds it.
        self.cap: dict[str, int] = {}
        for spec in self.specs:
            for o, ub in instance_upper_bounds(problem, configs, spec.services).items():
                self.cap[o] = max(self.cap.get(o, 0), ub)
        for (o, _spot), n in running_counts(problem).items():
            if any(x.id == o for x in problem.offers):
                self.cap[o] = max(self.cap.get(o, 0), min(n, problem.offer_limits.get(o, n)))
        self.res = sorted(o for o, pr in self.prices.items() if pr.reserved is not None and self.cap.get(o, 0) > 0)
        self.models: list[tuple[LinearModel, PeriodVars]] = []
        for spec in self.specs:
            self.stop.check("building the multi-period model")
            lm = LinearModel()
            pv = add_period(lm, problem, configs, spec, self.prices, self.cap)
            if problem.budget_usd_per_hour is not None:
                budget_row(lm, pv, self.prices, problem.budget_usd_per_hour)
            lm.objective = {}
            for i, c in pv.hourly_terms:
                lm.objective[i] = lm.objective.get(i, 0.0) + c * spec.hours
            for i, c in pv.change_terms:
                lm.objective[i] = lm.objective.get(i, 0.0) + c
            self.models.append((lm, pv))
        self.columns: list[_Column] = []
        self._seen: set[tuple] = set()
        self._lock = threading.Lock()  # period solves may run on several threads
        # (period, price per firm instance of each reservable offer over the period, the period
        # MIP's lower bound at those prices): every fleet of the period satisfies
        # sum_o price_o F_o + (its other costs) >= bound.
        self.cuts: list[tuple[int, dict[str, float], float]] = []
        self.U = [instance_upper_bounds(problem, configs, spec.services) for spec in self.specs]
        for (o, _spot), n in running_counts(problem).items():  # running instances may stay, idle
            if self.specs[0].first and o in self.cap:
                self.U[0][o] = max(self.U[0].get(o, 0), min(n, self.cap[o]))
        self.period_solves = 0
        self.nodes = 0
        self.rounds = 0
        self.leaves = 0

    # ------------------------------------------------------------------ one period
    def _solve_period(self, k: int, lo: dict[str, int], hi: dict[str, int], price: dict[str, float],
                      hint: PeriodPlan | None = None, seconds: float | None = None) -> PeriodPlan:
        """Period k with its reservable firm instances priced in segments: the first lo_o
        prepaid, up to hi_o at price_o each (for the whole period), any more on-demand.
        At most `seconds` (else until the deadline); after the deadline, no plan."""
        if self.stop.cancelled:
            self.stop.check("the multi-period solve")
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            return PeriodPlan({}, {}, {}, {}, math.inf, -math.inf, "no_solution")
        lm, pv = self.models[k]
        for o, (f0, f1, _fd) in pv.seg.items():
            # Only reservable offers have prepaid and reserved layers (an offer without a
            # reserved price in a box would get free instances: its layer costs 0).
            a, b = (lo.get(o, 0), hi.get(o, 0)) if o in self.res else (0, 0)
            lm.variables[f0].ub = float(a)
            lm.variables[f1].ub = float(max(b - a, 0))
            if o in price:
                lm.objective[f1] = price[o]
        if pv.budget_row is not None:
            prepaid = sum(self.prices[o].reserved * lo.get(o, 0) for o in self.res)
            lm.rows[pv.budget_row].ub = self.p.budget_usd_per_hour - prepaid
        opts = SolveOptions(time_limit_s=max(min(left, seconds if seconds is not None else left), 0.05),
                            hint=self._hint(pv, hint, lo, hi),
                            absolute_gap=COST_TOL_USD_PER_HOUR * self.specs[k].hours * 0.5, cancel=self.stop.cancel)
        out = self.backend.solve(lm, opts)
        with self._lock:
            self.period_solves += 1
            plan = self._plan(pv, out)
            if all(lo.get(o, 0) == 0 and hi.get(o, 0) >= self.cap[o] for o in self.res) and math.isfinite(plan.bound):
                # Linear prices over the whole range: a cut for the master LP (see _cut_lp).
                self.cuts.append((k, {o: lm.objective.get(pv.seg[o][1], 0.0) for o in self.res if o in pv.seg},
                                  plan.bound))
            return plan

    @staticmethod
    def _hint(pv: PeriodVars, plan: PeriodPlan | None, lo: dict[str, int], hi: dict[str, int]) -> list[float] | None:
        """A plan of this period as a start for the MIP at a node's prices: its fleet and
        replicas kept, the firm instances re-split over the node's price segments (a fleet
        is feasible at any prices; its old split may break the new segment bounds)."""
        if plan is None or not plan.values:
            return None
        values = list(plan.values)
        for o, (f0, f1, fd) in pv.seg.items():
            n = int(round(values[pv.F[o]]))
            a, b = lo.get(o, 0), max(hi.get(o, 0) - lo.get(o, 0), 0)
            values[f0] = float(min(n, a))
            values[f1] = float(min(n - values[f0], b))
            values[fd] = float(n - values[f0] - values[f1])
        return values

    def _solve_many(self, tasks: list[tuple], share: float | None = None) -> list[PeriodPlan]:
        """Periods are independent models: solve them on PERIOD_WORKERS threads (the MIP
        solver releases the GIL while it works). With `share`, the batch gets that share of
        the time left, split evenly, so that one hard period cannot take it all; a period
        left without any plan then gets a second try with whatever time remains."""
        seconds = None
        if share is not None:
            waves = math.ceil(len(tasks) / max(PERIOD_WORKERS, 1))
            seconds = max(share * (self.deadline - time.monotonic()) / max(waves, 1), MIN_PERIOD_S)
        tasks = [(*t, seconds) for t in tasks]
        if len(tasks) <= 1 or PERIOD_WORKERS <= 1:
            plans = [self._solve_period(*t) for t in tasks]
        else:
            with ThreadPoolExecutor(PERIOD_WORKERS, thread_name_prefix="period") as pool:
                plans = list(pool.map(lambda t: self._solve_period(*t), tasks))
        if share is not None:
            for i, plan in enumerate(plans):
                if not math.isfinite(plan.objective) and plan.status != "infeasible":
                    plans[i] = self._solve_period(*tasks[i][:-1], None)
        return plans

    def _plan(self, pv: PeriodVars, out: SolveOutcome) -> PeriodPlan:
        if out.values is None:
            bound = out.bound if out.bound is not None else (math.inf if out.status == "infeasible" else -math.inf)
            return PeriodPlan({}, {}, {}, {}, math.inf, bound, out.status)
        v = out.values
        firm = {o: int(round(v[i])) for o, i in pv.F.items() if round(v[i]) > 0}
        spot = {o: int(round(v[i])) for o, i in pv.S.items() if round(v[i]) > 0}
        replicas = {key: int(round(v[i])) for key, i in pv.r.items() if round(v[i]) > 0}
        routed: dict[tuple[str, bool], tuple[float, ...]] = {}
        # Routed traffic per class where the model routes classes (else None: by capacity).
        classes = {s.name: 1 if s.mixed_routing else len(s.class_demand) for s in pv.spec.services}
        service_of = {c.key: c.service for c in pv.configs}
        for key in replicas:
            n = classes[service_of[key[0]]]
            if n > 1:
                routed[key] = tuple(max(v[pv.x[(key[0], key[1], j)]], 0.0) if (key[0], key[1], j) in pv.x else 0.0
                                    for j in range(n))
        # No bound from the solver (stopped at its first plan, say) is no bound: the plan's own
        # cost bounds nothing unless it is proven optimal. (Taking it as the bound once made a
        # 500-service horizon "optimal" at $18.2 million with a $54,905 plan at hand.)
        bound = out.bound if out.bound is not None else (out.objective if out.status == "optimal" else -math.inf)
        if out.status == "optimal":
            bound = max(bound, out.objective - COST_TOL_USD_PER_HOUR * pv.spec.hours)
        plan = PeriodPlan(firm, spot, replicas, routed, out.objective, min(bound, out.objective), out.status, list(v))
        self._add_column(pv.spec.index, plan)
        return plan

    def _add_column(self, k: int, plan: PeriodPlan) -> None:
        key = (k, tuple(sorted(plan.firm.items())), tuple(sorted(plan.spot.items())))
        if key in self._seen:
            return
        self._seen.add(key)
        h = self.specs[k].hours
        _, pv = self.models[k]
        hourly = sum(self.prices[o].spot * n for o, n in plan.spot.items())
        hourly += sum(self.prices[o].on_demand * n for o, n in plan.firm.items() if o not in self.res)
        change = sum(c * plan.values[i] for i, c in pv.change_terms)
        self.columns.append(_Column(k, {o: n for o, n in plan.firm.items() if o in self.res},
                                    hourly * h + change, hourly, plan))

    # ------------------------------------------------------------------ prices
    def _uniform_price(self, o: str, k: int) -> float:
        """A reservation's cost spread over the periods by their hours (perfect use)."""
        return self.specs[k].hours * self.prices[o].reserved

    def _master(self) -> dict[str, tuple[float, ...]] | None:
        """Prices of firm instances per period from the restricted Dantzig-Wolfe master (an LP:
        convex combinations of the known fleets per period, and a reservation): where the
        known fleets say a reservation is worth more or less than its uniform spread."""
        lm = LinearModel()
        R = {o: lm.var(f"R[{o}]", 0.0, float(self.cap[o])) for o in self.res}
        cost: dict[int, float] = {R[o]: self.hours * self.prices[o].reserved for o in self.res}
        by_k: dict[int, list[tuple[int, _Column]]] = {}
        for j, col in enumerate(self.columns):
            if math.isfinite(col.plan.objective):
                w = lm.var(f"w[{j}]", 0.0, 1.0)
                cost[w] = col.other_usd
                by_k.setdefault(col.k, []).append((w, col))
        if len(by_k) < len(self.specs):
            return None
        links = {}
        big = 10.0 * max((self.hours * (pr.on_demand or pr.reserved or 0.0) for pr in self.prices.values()), default=1.0)
        for k, spec in enumerate(self.specs):
            lm.row(f"one[{k}]", [(w, 1.0) for w, _ in by_k[k]], lb=1.0, ub=1.0)
            for o in self.res:
                pr = self.prices[o]
                nod = lm.var(f"nod[{o},{k}]", 0.0, INF)
                cost[nod] = spec.hours * pr.on_demand if pr.on_demand is not None else big
                use = [(w, -float(col.firm.get(o, 0))) for w, col in by_k[k] if col.firm.get(o, 0)]
                lm.row(f"link[{o},{k}]", [(nod, 1.0), (R[o], 1.0)] + use, lb=0.0)
                links[(o, k)] = len(lm.rows) - 1
        lm.objective = cost
        out = self.backend.solve(lm, SolveOptions(time_limit_s=max(self.deadline - time.monotonic(), 1.0),
                                                  relax_integrality=True))
        if out.duals is None:
            return None
        price = {}
        for o in self.res:
            pr = self.prices[o]
            price[o] = tuple(min(max(out.duals[links[(o, k)]], 0.0),
                                 spec.hours * pr.on_demand if pr.on_demand is not None else math.inf)
                             for k, spec in enumerate(self.specs))
        return price

    def _column_rounds(self, plans: list[PeriodPlan], best):
        """A few rounds of pricing the periods at (smoothed) master prices: only for more
        and better fleets to choose from; the bound comes from the search."""
        full = {o: 0 for o in self.res}
        for _ in range(ROOT_ROUNDS if self.res else 0):
            if time.monotonic() >= self.deadline or (best is not None and self._root_bound >= best[0] - self.tol):
                break
            price = self._master()
            if price is None:
                break
            plans = self._solve_many([(k, full, self.cap,
                                       {o: SMOOTHING * self._uniform_price(o, k) + (1 - SMOOTHING) * price[o][k]
                                        for o in self.res}, plans[k]) for k in range(len(self.specs))])
            self.rounds += 1
            best = self._better(best, plans)
        return best

    # ------------------------------------------------------------------ plans for given fleets
    def _offer_cost(self, o: str, R: int, plans: list[PeriodPlan]) -> float:
        """What offer o's firm instances cost over the horizon with R reserved."""
        pr = self.prices[o]
        cost = self.hours * pr.reserved * R
        for spec, plan in zip(self.specs, plans):
            extra = max(plan.firm.get(o, 0) - R, 0)
            if extra and pr.on_demand is None:
                return math.inf
            cost += spec.hours * (pr.on_demand or 0.0) * extra
        return cost

    def _best_level(self, o: str, plans: list[PeriodPlan], lo: int, hi: int) -> int:
        levels = sorted({lo, hi} | {pl.firm.get(o, 0) for pl in plans if lo <= pl.firm.get(o, 0) <= hi})
        return min(levels, key=lambda n: (self._offer_cost(o, n, plans), n))

    def _assemble(self, plans: list[PeriodPlan], lo=None, hi=None) -> tuple[float, dict[str, int]] | None:
        """The cheapest reservation (in a box, if given) for these period fleets: (cost, R) or None."""
        R = {}
        for o in self.res:
            a = lo[o] if lo else 0
            b = hi[o] if hi else max((pl.firm.get(o, 0) for pl in plans), default=0)
            R[o] = self._best_level(o, plans, a, max(a, b))
        R = self._couple(R, plans)
        return None if R is None else self._horizon_cost(plans, R)

    def _couple(self, R: dict[str, int], plans) -> dict[str, int] | None:
        """Meet reserved_gpus_min/max by the cheapest steps per GPU (a heuristic for plans;
        the bound does not depend on it, and the search's leaves are exact)."""
        h = self.p.horizon
        gmin = (h.reserved_gpus_min or 0) if h else 0
        gmax = h.reserved_gpus_max if h else None
        G = {o: self.p.offer(o).gpus_per_instance for o in R}
        total = sum(G[o] * R[o] for o in R)
        while total < gmin:
            steps = [((self._offer_cost(o, R[o] + 1, plans) - self._offer_cost(o, R[o], plans)) / G[o], o)
                     for o in R if R[o] + 1 <= min(self.cap.get(o, 0), self.p.offer_limits.get(o, 10**9))]
            steps = [s for s in steps if math.isfinite(s[0])]
            if not steps:
                return None
            o = min(steps)[1]
            R[o] += 1
            total += G[o]
        while gmax is not None and total > gmax:
            steps = [((self._offer_cost(o, R[o] - 1, plans) - self._offer_cost(o, R[o], plans)) / G[o], o)
                     for o in R if R[o] > 0]
            steps = [s for s in steps if math.isfinite(s[0])]
            if not steps:
                return None
            o = min(steps)[1]
            R[o] -= 1
            total -= G[o]
        return R if total >= gmin and (gmax is None or total <= gmax) else None

    def _horizon_cost(self, plans: list[PeriodPlan], R: dict[str, int]) -> tuple[float, dict[str, int]] | None:
        """The plans' cost over the horizon with R reserved; None where a budget breaks."""
        total = 0.0
        for o in R:
            c = self._offer_cost(o, R[o], plans)
            if not math.isfinite(c):
                return None
            total += c
        reserved_hourly = sum(self.prices[o].reserved * R[o] for o in R)
        for spec, (lm, pv), plan in zip(self.specs, self.models, plans):
            if not math.isfinite(plan.objective):
                return None
            hourly = reserved_hourly
            for o, n in plan.firm.items():
                if o in R:
                    hourly += (self.prices[o].on_demand or 0.0) * max(n - R[o], 0)
                else:
                    hourly += self.prices[o].on_demand * n
                    total += spec.hours * self.prices[o].on_demand * n
            for o, n in plan.spot.items():
                hourly += self.prices[o].spot * n
                total += spec.hours * self.prices[o].spot * n
            if self.p.budget_usd_per_hour is not None and hourly > self.p.budget_usd_per_hour + 1e-9:
                return None
            total += sum(c * plan.values[i] for i, c in pv.change_terms)
        budget = self.horizon_budget()
        if budget is not None and total > budget + 1e-6:
            return None
        return total, R

    def _better(self, best, plans: list[PeriodPlan], lo=None, hi=None):
        if any(pl is None or not math.isfinite(pl.objective) for pl in plans):
            return best
        for box in ((None, None), (lo, hi)) if lo is not None else ((None, None),):
            found = self._assemble(plans, *box)
            if found is not None and (best is None or found[0] < best[0] - 1e-9):
                best = (found[0], found[1], list(plans))
        return best

    def _restricted_master(self, best):
        """Pick one known fleet per period and the reservation, exactly (a MIP over the
        fleets found so far, with budgets and reservation bounds)."""
        left = self.deadline - time.monotonic()
        if left <= 0.1 or not self.res:
            return best
        lm = LinearModel()
        R = {o: lm.var(f"R[{o}]", 0, self.cap[o], integer=True) for o in self.res}
        cost: dict[int, float] = {R[o]: self.hours * self.prices[o].reserved for o in self.res}
        pick: dict[int, list[tuple[int, _Column]]] = {}
        for j, col in enumerate(self.columns):
            if math.isfinite(col.plan.objective):
                z = lm.var(f"z[{j}]", 0, 1, integer=True)
                cost[z] = col.other_usd
                pick.setdefault(col.k, []).append((z, col))
        if len(pick) < len(self.specs):
            return best
        for k, spec in enumerate(self.specs):
            lm.row(f"one[{k}]", [(z, 1.0) for z, _ in pick[k]], lb=1.0, ub=1.0)
            nods = []
            for o in self.res:
                pr = self.prices[o]
                use = [(z, -float(col.firm.get(o, 0))) for z, col in pick[k] if col.firm.get(o, 0)]
                if pr.on_demand is not None:
                    nod = lm.var(f"nod[{o},{k}]", 0.0, INF)
                    cost[nod] = spec.hours * pr.on_demand
                    lm.row(f"link[{o},{k}]", [(nod, 1.0), (R[o], 1.0)] + use, lb=0.0)
                    nods.append((nod, pr.on_demand))
                else:
                    lm.row(f"link[{o},{k}]", [(R[o], 1.0)] + use, lb=0.0)
            if self.p.budget_usd_per_hour is not None:
                lm.row(f"budget[{k}]", [(R[o], self.prices[o].reserved) for o in self.res] + nods
                       + [(z, col.other_usd_per_hour) for z, col in pick[k]], ub=self.p.budget_usd_per_hour)
        self._reserved_gpus_row(lm, R)
        budget = self.horizon_budget()
        if budget is not None:
            lm.row("horizon_budget", list(cost.items()), ub=budget)
        lm.objective = cost
        out = self.backend.solve(lm, SolveOptions(time_limit_s=max(MASTER_MIP_SHARE * left, 0.1),
                                                  absolute_gap=self.tol * 0.5, cancel=self.stop.cancel))
        if out.values is None:
            return best
        chosen = [next(col.plan for z, col in pick[k] if out.values[z] > 0.5) for k in range(len(self.specs))]
        found = self._horizon_cost(chosen, {o: int(round(out.values[R[o]])) for o in self.res})
        if found is not None and (best is None or found[0] < best[0] - 1e-9):
            return found[0], found[1], chosen
        return best

    def horizon_budget(self) -> float | None:
        """The tighter of the per-day and per-month budgets, over the whole horizon."""
        h = self.p.horizon
        limits = []
        if h is not None and h.budget_usd_per_day is not None:
            limits.append(h.budget_usd_per_day * self.hours / HOURS_PER_DAY)
        if h is not None and h.budget_usd_per_month is not None:
            limits.append(h.budget_usd_per_month * self.hours / HOURS_PER_MONTH)
        return min(limits) if limits else None

    # ------------------------------------------------------------------ the cut master LP
    def _cut_lp(self, lo: dict[str, int], hi: dict[str, int]) -> tuple[float, dict[str, float]] | None:
        """A lower bound for the box lo <= R <= hi, without solving a period: the horizon with
        each period's fleets known only through the cuts (an LP in R, F, and theta_p >= 0, the
        period's other costs). With cuts at the uniform price (reserved hours all used) and
        at the on-demand price, it charges reservations that some periods cannot use.
        Returns (bound, the LP's R), or None when the box leaves no plan."""
        if not self.res or not self.cuts:
            return None
        lm = LinearModel()
        R = {o: lm.var(f"R[{o}]", float(lo[o]), float(hi[o])) for o in self.res}
        cost: dict[int, float] = {R[o]: self.hours * self.prices[o].reserved for o in self.res}
        F: dict[tuple[str, int], int] = {}
        theta = []
        for k, spec in enumerate(self.specs):
            theta.append(lm.var(f"theta[{k}]", 0.0, INF))
            cost[theta[k]] = 1.0
            for o in self.res:
                pr = self.prices[o]
                F[(o, k)] = f = lm.var(f"F[{o},{k}]", 0.0, float(self.U[k].get(o, 0)))
                if pr.on_demand is not None:
                    nod = lm.var(f"nod[{o},{k}]", 0.0, INF)
                    cost[nod] = spec.hours * pr.on_demand
                    lm.row(f"link[{o},{k}]", [(nod, 1.0), (R[o], 1.0), (f, -1.0)], lb=0.0)
                else:
                    lm.row(f"link[{o},{k}]", [(R[o], 1.0), (f, -1.0)], lb=0.0)
        with self._lock:
            cuts = list(self.cuts)
        for j, (k, price, bound) in enumerate(cuts):
            lm.row(f"cut[{j}]", [(theta[k], 1.0)] + [(F[(o, k)], c) for o, c in price.items() if c], lb=bound)
        self._reserved_gpus_row(lm, R)
        budget = self.horizon_budget()
        if budget is not None:
            lm.row("horizon_budget", list(cost.items()), ub=budget)
        lm.objective = cost
        out = self.backend.solve(lm, SolveOptions(time_limit_s=max(self.deadline - time.monotonic(), 1.0),
                                                  relax_integrality=True))
        if out.status == "infeasible":
            return math.inf, {}
        if out.status != "optimal" or out.objective is None:
            return None
        # The LP's optimum, less a hair for its own tolerances, is a valid bound.
        return out.objective - 1e-7 * max(1.0, abs(out.objective)), {o: out.values[R[o]] for o in self.res}

    def _on_demand_pass(self, best, hints: list[PeriodPlan | None]):
        """Every period with firm instances at their on-demand price: the fleets that need no
        reservation, and a cut that makes the master LP charge idle reservations."""
        if not self.res or any(self.prices[o].on_demand is None for o in self.res):
            return best
        full = {o: 0 for o in self.res}
        tasks = [(k, full, self.cap, {o: spec.hours * self.prices[o].on_demand for o in self.res}, hints[k])
                 for k, spec in enumerate(self.specs)]
        plans = self._solve_many(tasks, ROOT_SHARE)
        return self._better(best, plans)

    def _dive(self, R_frac: dict[str, float], lo: dict[str, int], hi: dict[str, int], best, rounds: int = 2,
              hints: list[PeriodPlan | None] | None = None, share: float | None = None):
        """A plan from a (fractional) reservation: round it into the box, solve every period
        with exactly that much reserved, then re-choose each reservation for the fleets found
        and repeat while it changes. `hints`: a plan per period to start each MIP from (the
        previous round's after the first); `share`: of the time left, at most, per round
        (a period MIP stopped early still returns its best fleet: a plan, not a proof)."""
        R = {o: min(max(int(math.floor(R_frac.get(o, 0.0) + 0.5)), lo[o]), hi[o]) for o in self.res}
        seen = set()
        hints = list(hints) if hints is not None else [None] * len(self.specs)
        for _ in range(rounds):
            key = tuple(sorted(R.items()))
            if key in seen or time.monotonic() >= self.deadline:
                break
            seen.add(key)
            plans = self._solve_many([(k, R, R, {}, hints[k]) for k in range(len(self.specs))], share)
            if any(not math.isfinite(pl.objective) for pl in plans):
                break
            self.leaves += 1
            found = self._horizon_cost(plans, dict(R)) if self._reservation_ok(R) else None
            if found is not None and (best is None or found[0] < best[0] - 1e-9):
                best = (found[0], found[1], plans)
            best = self._better(best, plans)
            again = self._assemble(plans)
            if again is None:
                break
            R, hints = again[1], plans
        return best

    def _reserved_gpus_row(self, lm: LinearModel, R: dict[str, int]) -> None:
        """horizon.reserved_gpus_min / max over the reservation variables R, where set."""
        h = self.p.horizon
        if h is not None and (h.reserved_gpus_min or h.reserved_gpus_max is not None):
            lm.row("reserved_gpus", [(R[o], float(self.p.offer(o).gpus_per_instance)) for o in self.res],
                   lb=float(h.reserved_gpus_min or 0),
                   ub=float(h.reserved_gpus_max) if h.reserved_gpus_max is not None else INF)

    def _reservation_ok(self, R: dict[str, int]) -> bool:
        """Within horizon.reserved_gpus_min / max (a rounded reservation may not be)."""
        h = self.p.horizon
        gpus = sum(self.p.offer(o).gpus_per_instance * n for o, n in R.items())
        return (h is None or ((not h.reserved_gpus_min or gpus >= h.reserved_gpus_min)
                              and (h.reserved_gpus_max is None or gpus <= h.reserved_gpus_max)))

    def _horizon_lp(self, seconds: float) -> dict[str, float] | None:
        """The reservation of the horizon's LP relaxation: every period's rows in one model,
        one reservation per offer shared by all (docs/formulation.md), integrality relaxed.
        Its bound is weaker than the period MIPs' (fractional replicas), but its reservation
        weighs every period at once, where a period alone sees a uniform price. At most
        `seconds`, building included; None when they run out or the solve is cancelled."""
        until = min(self.deadline, time.monotonic() + seconds)
        lm = LinearModel()
        R = {o: lm.var(f"R[{o}]", 0.0, float(self.cap[o])) for o in self.res}
        cost: dict[int, float] = {R[o]: self.hours * self.prices[o].reserved for o in self.res}
        for spec in self.specs:
            if self.stop.cancelled or time.monotonic() >= until:
                return None  # a heuristic out of time: the plans found so far stand (not a timeout)
            tag = f"@{spec.index}"
            first_var, first_row = len(lm.variables), len(lm.rows)
            pv = add_period(lm, self.p, self.configs, spec, self.prices, self.cap, reserved=R, tag=tag)
            # Names must be unique in one model, and some period rows (redundancy's) carry no
            # period in theirs: every name this period added gets its tag.
            for item in itertools.chain(lm.variables[first_var:], lm.rows[first_row:]):
                item.name = f"{tag}/{item.name}"
            if self.p.budget_usd_per_hour is not None:
                lm.row(f"budget{tag}", list(pv.hourly_terms) + [(R[o], self.prices[o].reserved) for o in self.res],
                       ub=self.p.budget_usd_per_hour)
            for i, c in pv.hourly_terms:
                cost[i] = cost.get(i, 0.0) + c * spec.hours
            for i, c in pv.change_terms:
                cost[i] = cost.get(i, 0.0) + c
        self._reserved_gpus_row(lm, R)
        lm.objective = cost
        left = until - time.monotonic()
        if left <= 0.1:
            return None
        out = self.backend.solve(lm, SolveOptions(time_limit_s=left, relax_integrality=True, cancel=self.stop.cancel))
        if out.status != "optimal" or out.values is None:
            return None
        return {o: out.values[R[o]] for o in self.res}

    def _lp_dive(self, root: _Node, best, root_s: float):
        """Plans from the horizon LP's reservation, rounded two ways: each level up (the
        periods' fleets fill what the LP splits into fractions) and to the nearest. Neither
        wins everywhere (on the benchmark's day case, seed 0: up $1,058, nearest $1,064;
        seed 2: up $1,043, nearest $936), so both are tried, each from the root's fleets."""
        if not self.res or self.deadline - time.monotonic() < 2 * MIN_PERIOD_S:
            return best
        # The dive's MIPs, with prepaid instances to fill, are harder than the root's: with
        # less time left than two root passes (one per rounding) they stop at their starts
        # (the benchmark's week case, and its day case at 10 s), and the time is the bound's.
        if self.deadline - time.monotonic() < 2 * root_s:
            return best
        R_frac = self._horizon_lp(max(root_s, MIN_PERIOD_S))  # at most one root pass's time
        if R_frac is None or self.deadline - time.monotonic() < 2 * root_s:
            return best
        tried = set()
        for rounding in (lambda v: math.ceil(v - 1e-6), lambda v: math.floor(v + 0.5)):
            R = {o: float(rounding(R_frac[o])) for o in self.res}
            if tuple(sorted(R.items())) in tried:
                continue
            tried.add(tuple(sorted(R.items())))
            best = self._dive(R, root.lo, root.hi, best, hints=root.plans, share=LP_DIVE_SHARE)
        return best

    # ------------------------------------------------------------------ the search
    def solve(self) -> HorizonSolution:
        root = _Node({o: 0 for o in self.res}, {o: self.cap[o] for o in self.res}, [None] * len(self.specs))
        started = time.monotonic()
        self._evaluate(root)
        root_s = time.monotonic() - started
        if any(pl.status == "infeasible" for pl in root.plans):
            return self._no_plan(math.inf, "")
        self._root_bound = root.bound
        best = self._better(None, root.plans)
        best = self._lp_dive(root, best, root_s)
        best = self._on_demand_pass(best, root.plans)
        best = self._column_rounds(list(root.plans), best)
        lp = self._cut_lp(root.lo, root.hi)
        if lp is not None and lp[0] != math.inf:
            root.bound = max(root.bound, lp[0])
            best = self._dive(lp[1], root.lo, root.hi, best, hints=root.plans)
        best = self._restricted_master(best)
        counter = itertools.count()
        # A bound of +inf is a proof (some period has no fleet); -inf only says a period's
        # MIP ran out of time without one, so the node stays open (else an empty heap would
        # read as "infeasible").
        heap = [(root.bound, next(counter), root)] if root.bound != math.inf else []
        detail = ""
        unexplored = math.inf  # the lowest bound of leaves left unsolved when their time ran out
        while heap:
            bound, _, node = heap[0]
            if best is not None and bound >= best[0] - self.tol:
                heap = []  # every open node is at least as dear as the plan: proven
                break
            if time.monotonic() >= self.deadline or self.stop.cancelled:
                detail = "cancelled" if self.stop.cancelled else "time limit"
                break
            heapq.heappop(heap)
            self.nodes += 1
            if self.nodes % MASTER_EVERY == 0:
                best = self._restricted_master(best)
            split = self._branch(node, best)
            if split is None and not node.finished and time.monotonic() < self.deadline - MIN_PERIOD_S:
                # A leaf's periods cut short by a share of the time (the root's first pass)
                # get the rest of it, from their plans: nothing else is left to explore here.
                node.finished = True
                open_ = [k for k, pl in enumerate(node.plans) if pl is not None and pl.status == "feasible"]
                if open_:
                    tasks = [(k, node.lo, node.hi, {o: self._uniform_price(o, k) for o in self.res}, node.plans[k])
                             for k in open_]
                    for k, plan in zip(open_, self._solve_many(tasks, share=1.0)):
                        if math.isfinite(plan.objective):
                            node.plans[k] = plan
                    prepaid = sum(self.hours * self.prices[o].reserved * node.lo[o] for o in self.res)
                    node.bound = max(node.bound, prepaid + sum(pl.bound for pl in node.plans))
                    best = self._better(best, node.plans, node.lo, node.hi)
                    heapq.heappush(heap, (node.bound, next(counter), node))
                    continue
            if split is None:
                if any(pl is None or pl.status not in ("optimal", "infeasible") for pl in node.plans):
                    # A leaf whose periods ran out of time unsolved, or solved without proof
                    # (a plan, and a bound below it): its region is not explored, so its
                    # bound stays in the answer's. (A leaf's plans were once read as exact:
                    # a period MIP cut short at a 10 % gap came back "optimal".)
                    unexplored = min(unexplored, node.bound)
                    detail = detail or "time limit"
                continue  # a leaf: its exact plan is already the incumbent (or it has none)
            o, level = split
            for lo_o, hi_o in ((node.lo[o], level), (level + 1, node.hi[o])):
                child = self._child(node, o, lo_o, hi_o)
                if child is None:
                    continue
                lp = self._cut_lp(child.lo, child.hi)
                if lp is not None and (lp[0] == math.inf or (best is not None and lp[0] >= best[0] - self.tol)):
                    continue  # the master LP already proves the box dearer (no period solved)
                try:
                    self._evaluate(child, parent=node)
                except BaseException:
                    heapq.heappush(heap, (node.bound, next(counter), node))  # the bound stays honest
                    raise
                if lp is not None:
                    child.bound = max(child.bound, lp[0])
                best = self._better(best, child.plans, child.lo, child.hi)
                if lp is not None and self.nodes % DIVE_EVERY == 0:
                    best = self._dive(lp[1], child.lo, child.hi, best, hints=child.plans)
                if child.bound != math.inf and (best is None or child.bound < best[0] - self.tol):
                    heapq.heappush(heap, (child.bound, next(counter), child))
        if detail and best is not None:
            best = self._restricted_master(best)
        if best is None:
            return self._no_plan(min(min((b for b, _, _ in heap), default=math.inf), unexplored), detail)
        cost, R, plans = best
        bound = min(min((b for b, _, _ in heap), default=cost), cost, unexplored)
        status = "optimal" if cost - bound <= self.tol else "feasible"
        return self._solution(status, cost, bound, R, plans, detail)

    def _evaluate(self, node: _Node, parent: _Node | None = None) -> None:
        """The node's period plans (missing ones solved) and its bound: prepaid H pR lo plus
        each period's MIP bound with reserved-range instances at the uniform price."""
        missing = [k for k in range(len(self.specs)) if node.plans[k] is None]
        tasks = [(k, node.lo, node.hi, {o: self._uniform_price(o, k) for o in self.res},
                  parent.plans[k] if parent is not None else None) for k in missing]
        # The root's first pass shares the time: every period gets a plan before any is proven.
        share = ROOT_SHARE if parent is None else None
        for k, plan in zip(missing, self._solve_many(tasks, share)):
            node.plans[k] = plan
        prepaid = sum(self.hours * self.prices[o].reserved * node.lo[o] for o in self.res)
        node.bound = prepaid + sum(pl.bound for pl in node.plans)
        if parent is not None:
            node.bound = max(node.bound, parent.bound)  # the parent's region holds the child's

    def _child(self, node: _Node, o: str, lo_o: int, hi_o: int) -> _Node | None:
        if lo_o > hi_o:
            return None
        child = _Node(dict(node.lo), dict(node.hi), [None] * len(self.specs), depth=node.depth + 1)
        child.lo[o], child.hi[o] = lo_o, hi_o
        h = self.p.horizon
        G = {x: self.p.offer(x).gpus_per_instance for x in self.res}
        if h is not None and h.reserved_gpus_max is not None and sum(G[x] * child.lo[x] for x in G) > h.reserved_gpus_max:
            return None
        if h is not None and h.reserved_gpus_min and sum(G[x] * child.hi[x] for x in G) < h.reserved_gpus_min:
            return None
        for k, plan in enumerate(node.plans):
            if plan is None or not math.isfinite(plan.objective):
                continue
            f = plan.firm.get(o, 0)
            if hi_o < node.hi[o] and f <= hi_o:
                child.plans[k] = plan  # layers above hi_o got dearer, and this fleet uses none of them
            elif lo_o > node.lo[o] and f >= lo_o:
                # Layers lo..lo_o became prepaid: the same fleet stays optimal, its period cost
                # falls by what those layers cost here (the prepaid constant holds them now).
                shift = -self._uniform_price(o, k) * (lo_o - node.lo[o])
                child.plans[k] = PeriodPlan(plan.firm, plan.spot, plan.replicas, plan.routed, plan.objective + shift,
                                            plan.bound + shift, plan.status, plan.values)
        return child

    def _branch(self, node: _Node, best) -> tuple[str, int] | None:
        """The offer whose reservation the node's prices understate most, and where to split."""
        if any(pl is None or not math.isfinite(pl.objective) for pl in node.plans):
            return self._widest(node)
        choice, worst = None, self.tol
        for o in self.res:
            lo, hi = node.lo[o], node.hi[o]
            if lo >= hi:
                continue
            level = self._best_level(o, node.plans, lo, hi)
            charged = self.hours * self.prices[o].reserved * lo
            for k, (spec, plan) in enumerate(zip(self.specs, node.plans)):
                f = plan.firm.get(o, 0)
                charged += self._uniform_price(o, k) * min(max(f - lo, 0), hi - lo)
                charged += spec.hours * (self.prices[o].on_demand or 0.0) * max(f - hi, 0)
            gap = self._offer_cost(o, level, node.plans) - charged
            if gap > worst:
                choice, worst = (o, level if level < hi else level - 1), gap
        if choice is None and best is not None and node.bound < best[0] - self.tol:
            return self._widest(node)  # priced right, yet a budget or reservation bound binds: narrow
        return choice

    def _widest(self, node: _Node) -> tuple[str, int] | None:
        open_ = [(node.hi[o] - node.lo[o], o) for o in self.res if node.hi[o] > node.lo[o]]
        if not open_:
            return None
        _, o = max(open_)
        return o, (node.lo[o] + node.hi[o]) // 2

    # ------------------------------------------------------------------ results
    def _solution(self, status, cost, bound, R, plans, detail) -> HorizonSolution:
        change = sum(c * plans[0].values[i] for i, c in self.models[0][1].change_terms) if plans and plans[0].values else 0.0
        return HorizonSolution(
            status, cost, bound, {o: n for o, n in sorted(R.items()) if n > 0},
            {o: self.prices[o].reserved_term for o, n in R.items() if n > 0},
            [plans[m] for m in self.merged_index], list(self.merged_index), "reserved-level branch and bound",
            self.nodes, self.period_solves, len(self.specs), detail, change)

    def _no_plan(self, bound: float, detail: str) -> HorizonSolution:
        return HorizonSolution("infeasible" if bound == math.inf else "no_solution", math.inf, bound, {}, {}, [],
                               list(self.merged_index), "reserved-level branch and bound", self.nodes,
                               self.period_solves, len(self.specs), detail)

def merge_periods(problem: Problem) -> tuple[list[PeriodSpec], list[int]]:
    """Distinct periods (equal demand multipliers merged, hours added) and, per original
    period, its merged index. The first period stays apart when the running fleet's
    change costs apply to it. Without periods: one period of one hour."""
    h = problem.horizon
    periods = problem.periods or ()
    if not periods:
        return [PeriodSpec(0, 1.0, problem.services, first=True)], [0]
    keep_first = h is not None and h.current_fleet is not None
    specs: list[PeriodSpec] = []
    index: dict[tuple, int] = {}
    merged = []
    for j, period in enumerate(periods):
        mult = tuple(s.period_multipliers[j] for s in problem.services)
        key = ("first",) if keep_first and j == 0 else mult
        if key not in index:
            index[key] = len(specs)
            specs.append(PeriodSpec(len(specs), 0.0, tuple(s.in_period(j) for s in problem.services),
                                    first=keep_first and j == 0))
        k = index[key]
        specs[k] = PeriodSpec(k, specs[k].hours + period.hours, specs[k].services, specs[k].first)
        merged.append(k)
    return specs, merged
