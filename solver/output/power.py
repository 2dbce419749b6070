"""Power and energy of a plan: kW of the fleet, kWh per period and over the horizon, the
energy per million output tokens of each LLM service, and the owned sites' draw.

Every kW here is board power at full load (the datasheet's max power / TDP, the owner's
figure for owned GPUs, plus owned servers' host power): an upper bound on what the fleet
draws, not a measurement - GPUs serving below their batch limit draw less. It is what a
site's power cap must hold, and what an energy budget should be sized for.

Energy per million tokens is reported at demand: the service's GPUs at full board power
for one hour, over the output tokens its real demand (before headroom) produces in that
hour - kWh per 1e6 output tokens. Spare replicas and headroom raise it; idle GPUs of the
fleet that no replica uses are counted in the fleet's kW, not in any service's.
"""

from __future__ import annotations

from solver.compile.problem import Problem, ServiceDemand
from solver.output.result import PlanResult, SitePower

TOKENS_PER_MILLION = 1e6
SECONDS_PER_HOUR = 3600.0


def _kw(problem: Problem, offer_id: str) -> float | None:
    terms = problem.power
    return None if terms is None else terms.kw_per_instance.get(offer_id)


def fleet_power_kw(problem: Problem, running: dict[str, int]) -> float | None:
    """kW of `running` (offer id -> instances) at full board power; None if a GPU running
    has no board power (a user GPU type without board_power_w): a partial sum would
    understate it."""
    total = 0.0
    for offer_id, n in running.items():
        if n <= 0:
            continue
        kw = _kw(problem, offer_id)
        if kw is None:
            return None
        total += kw * n
    return total


def _output_tokens_per_s(s: ServiceDemand) -> float:
    """Output tokens per second the service's real demand (no headroom) produces; 0 for
    services without an LLM model or output lengths."""
    if s.model is None or s.unit != "requests/s" or not s.class_tokens:
        return 0.0
    shares = s.class_shares if len(s.class_shares) == len(s.class_tokens) else (1.0,) * len(s.class_tokens)
    per_request = sum(share * t.output_tokens for share, t in zip(shares, s.class_tokens))
    return s.raw_demand * per_request


def add_power(result: PlanResult, problem: Problem, running: dict[str, int], assignments,
              periods: list[tuple[float, dict[str, int]]] | None = None) -> PlanResult:
    """Fill the power fields of `result` (in place; returned). `running`: the plan's (first
    period's) instances per offer, firm and spot; `assignments`: its replicas; `periods`:
    a multi-period plan's (hours, running) per period, in result.horizon.periods' order."""
    if problem.power is None:
        return result
    for line in result.fleet:
        kw = _kw(problem, line.offer_id)
        if kw is not None:
            line.power_kw_per_instance = round(kw, 6)
            line.power_kw = round(kw * line.instances, 6)
    result.power_kw = _rounded(fleet_power_kw(problem, running))
    if periods is None:
        result.energy_kwh = result.power_kw  # a single-hour plan: its horizon is one hour
    else:
        energy = 0.0
        for period, (hours, fleet) in zip(result.horizon.periods, periods):
            kw = fleet_power_kw(problem, fleet)
            period.power_kw = _rounded(kw)
            period.energy_kwh = None if kw is None else round(kw * hours, 6)
            energy = None if energy is None or kw is None else energy + kw * hours
        result.energy_kwh = _rounded(energy)
    _service_power(result, problem, assignments)
    terms = problem.power
    if terms.owned_offers:
        result.owned_amortised_usd_per_hour = round(terms.owned_amortised_usd_per_hour, 6)
        result.sites = _sites(problem, running)
    return result


def _service_power(result: PlanResult, problem: Problem, assignments) -> None:
    """Each service's kW (its replicas' GPUs at board power) and, for LLM services, kWh per
    million output tokens at demand; a disaggregated deployment's pools count toward the
    service they serve."""
    kw: dict[str, float | None] = {}
    for a in assignments:
        o = problem.offer(a.offer_id)
        per_instance = _kw(problem, a.offer_id)
        gpus = a.replicas * a.gpus_per_replica
        add = None if per_instance is None else per_instance / o.gpus_per_instance * gpus
        for name in (a.service, a.service.split("#", 1)[0]) if "#" in a.service else (a.service,):
            kw[name] = None if add is None or kw.get(name, 0.0) is None else kw.get(name, 0.0) + add
    for r in result.services:
        r.power_kw = _rounded(kw.get(r.name, 0.0))
        if r.role or r.power_kw is None:
            continue
        tokens = _output_tokens_per_s(problem.service(r.name))
        if tokens > 0:
            r.energy_kwh_per_million_tokens = round(kw.get(r.name, 0.0) / (tokens * SECONDS_PER_HOUR)
                                                    * TOKENS_PER_MILLION, 6)


def _sites(problem: Problem, running: dict[str, int]) -> list[SitePower]:
    caps = {s.name: s.cap_kw for s in problem.power.sites}
    by_site: dict[str, list[float]] = {}
    for offer_id in sorted(problem.power.owned_offers):
        try:
            o = problem.offer(offer_id)
        except KeyError:  # filtered out by the constraints: nothing of it can run
            continue
        row = by_site.setdefault(o.region, [0.0, 0, 0])
        n = running.get(offer_id, 0)
        row[0] += (_kw(problem, offer_id) or 0.0) * n
        row[1] += n * o.gpus_per_instance
        row[2] += problem.offer_limits.get(offer_id, 0) * o.gpus_per_instance
    return [SitePower(name, round(kw, 6), caps.get(name), int(used), int(owned))
            for name, (kw, used, owned) in sorted(by_site.items())]


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 6)
