"""`--period all --schedule keda`: one Kubernetes directory that runs a multi-period plan's
fleets and switches them at the period boundaries, every day.

A plan states its periods' names and hours in order, and the horizon repeats; when the
hours sum to 24 the periods are a day, and the clock time the first one starts at
(`--day-starts HH:MM`, in `--timezone`) fixes every boundary. The directory holds every
unit any period runs (the union, one Deployment or LeaderWorkerSet each, at 0 replicas)
and `keda-schedule.yaml`: per unit a KEDA ScaledObject with one `cron` trigger per period
the unit runs in, whose window is that period's and whose desiredReplicas is the plan's
count there. Outside its windows a unit scales to zero (minReplicaCount 0).

Written against KEDA v2.20.2 (kedacore/keda, commit 68a5b50): the ScaledObject CRD
(config/crd/bases/keda.sh_scaledobjects.yaml) and the cron scaler
(pkg/scalers/cron_scaler.go: metadata start, end, timezone, desiredReplicas - all
required, desiredReplicas must not be 0, start must differ from end). KEDA scales any
resource with a /scale subresource; LeaderWorkerSet (lws v1) has one
(specReplicasPath .spec.replicas), so multi-node units are scheduled the same way.

What KEDA cannot switch: an HTTPRoute's weights. A service whose units all run in every
period keeps its weighted route, with weights from the units' capacity over the whole day;
a service whose units change from period to period gets no route (its fixed weights would
send requests to units scaled to zero) and is served by its Service, an even split over
the pods that run. The files and stderr say which.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from solver.errors import InputError
from solver.export import kubernetes
from solver.export.owned_sites import owned_units
from solver.export.periods import period_names, select_period
from solver.export.units import PlanSummary, Unit, plan_units
from solver.export.yamlfile import document

SCHEDULERS = ("keda",)
KEDA_API = "keda.sh/v1alpha1"
KEDA_VERSION = "v2.20.2"  # the release whose CRD and cron scaler these objects follow
SCHEDULE_FILE = "keda-schedule.yaml"
DEFAULT_TIMEZONE = "Etc/UTC"
MINUTES_PER_DAY = 24 * 60
HOURS_PER_DAY = 24
# KEDA's defaults, quoted in the file's header (the objects leave them unset).
KEDA_COOLDOWN_S = 300
KEDA_POLLING_S = 30
HPA_SCALE_DOWN_WINDOW_S = 300

_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True)
class ScheduleOptions:
    """What the command line asked for: the scaler, the first period's start (minutes after midnight) and the zone."""

    scheduler: str
    day_start_minute: int
    timezone: str


@dataclass(frozen=True)
class Window:
    """One period's daily window: [start_minute, end_minute) after midnight, wrapping past 24:00."""

    period: str
    hours: float
    start_minute: int
    end_minute: int

    @property
    def start_cron(self) -> str:
        return _cron(self.start_minute)

    @property
    def end_cron(self) -> str:
        return _cron(self.end_minute)

    @property
    def clock(self) -> str:
        return f"{_clock(self.start_minute)}-{_clock(self.end_minute)}"


def _cron(minute_of_day: int) -> str:
    """Every day at that minute: `M H * * *` (KEDA parses minute, hour, day of month, month, day of week)."""
    return f"{minute_of_day % 60} {minute_of_day // 60} * * *"


def _clock(minute_of_day: int) -> str:
    return f"{minute_of_day // 60:02d}:{minute_of_day % 60:02d}"


# ------------------------------------------------------------------ the command line's options
def schedule_options(scheduler: str | None, day_starts: str | None, timezone: str | None) -> ScheduleOptions | None:
    """The flags, checked: None without --schedule (then --day-starts and --timezone must be absent too)."""
    if scheduler is None:
        given = [flag for flag, value in (("--day-starts", day_starts), ("--timezone", timezone)) if value is not None]
        if given:
            raise InputError.single(given[0], "is only used with --schedule.",
                                    "add --schedule keda (with --period all), or leave it out")
        return None
    if scheduler not in SCHEDULERS:
        raise InputError.single("--schedule", f"is {scheduler!r}; the export can write {', '.join(SCHEDULERS)}.",
                                "give --schedule keda")
    if day_starts is None:
        raise InputError.single("--day-starts", "is required with --schedule: the plan gives its periods' lengths, "
                                "not the clock time the first one starts at.",
                                "give the first period's start, e.g. --day-starts 22:00")
    zone = DEFAULT_TIMEZONE if timezone is None else timezone  # an empty --timezone is an error, not the default
    return ScheduleOptions(scheduler, parse_clock(day_starts), check_timezone(zone))


def parse_clock(text: str) -> int:
    """`HH:MM` (24-hour clock) -> minutes after midnight."""
    m = _CLOCK.match(text.strip())
    if m is None:
        raise InputError.single("--day-starts", f"is {text!r}, not a time of day.",
                                "give HH:MM on a 24-hour clock, e.g. --day-starts 06:30")
    return int(m.group(1)) * 60 + int(m.group(2))


def check_timezone(name: str) -> str:
    """An IANA zone name (KEDA loads it with Go's time.LoadLocation, from the same database)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError.single("--timezone", f"{name!r} is not a time zone of the IANA database.",
                                "give an Area/City name, e.g. --timezone Europe/Berlin, or Etc/UTC") from None
    return name


# ------------------------------------------------------------------ the periods' windows
def period_windows(plan: object, day_start_minute: int) -> list[Window]:
    """The plan's periods, in order, as windows of a day that starts its first period at day_start_minute."""
    names = period_names(plan)
    if len(names) < 2:
        raise InputError.single("--schedule", "needs a plan with two or more periods: "
                                + ("this plan has a single period, so there is no boundary to switch at."
                                   if not names else f"this plan's only period, {names[0]!r}, runs all the time."),
                                "leave --schedule out")
    hours = [_hours(plan, i) for i in range(len(plan["periods"]))]
    total_h = sum(hours)
    if not math.isclose(total_h, HOURS_PER_DAY, abs_tol=1e-6):
        raise InputError.single("periods", f"sum to {total_h:g} h, not a day: --schedule switches fleets on a "
                                "daily clock, so the periods must add up to 24 h (a weekly or other horizon is not "
                                "supported).",
                                "export --period all without --schedule and switch the directories yourself")
    windows, start = [], day_start_minute
    for name, h in zip(names, hours):
        end = (start + round(h * 60)) % MINUTES_PER_DAY
        windows.append(Window(name, h, start, end))
        start = end
    return windows


def _hours(plan: dict, i: int) -> float:
    """periods[i].hours, which must be a whole number of minutes for a cron boundary."""
    h = plan["periods"][i].get("hours")
    if isinstance(h, bool) or not isinstance(h, (int, float)) or h <= 0:
        raise InputError.single(f"periods[{i}].hours", "must be a positive number.",
                                "export the plan exactly as `solver-cli solve` wrote it")
    if not math.isclose(h * 60, round(h * 60), abs_tol=1e-6):
        raise InputError.single(f"periods[{i}].hours", f"is {h:g} h, not a whole number of minutes: a cron "
                                "schedule switches on the minute.",
                                "plan with periods whose hours are whole minutes (e.g. 7.5, not 7.33)")
    return float(h)


# ------------------------------------------------------------------ the union of the periods' units
UnitKey = tuple[str, str, bool]  # (service, configuration key, spot): what makes a unit the same across periods


def _key(plan: dict, service: str, a: dict) -> UnitKey:
    # As plan_units decides a unit's spot: the whole plan on spot, or this assignment.
    return service, str(a.get("config")), plan.get("pricing") == "spot" or a.get("spot") is True


def _period_plans(plan: dict, windows: list[Window]) -> dict[str, dict]:
    return {w.period: select_period(plan, w.period) for w in windows}


def _replicas_by_period(plan: dict, period_plans: dict[str, dict]) -> dict[UnitKey, dict[str, int]]:
    counts: dict[UnitKey, dict[str, int]] = {}
    for period, p in period_plans.items():
        for s in p["services"]:
            for a in s["assignments"]:
                counts.setdefault(_key(plan, s["name"], a), {})[period] = a["replicas"]
    return counts


def _union_plan(plan: dict, period_plans: dict[str, dict], windows: list[Window]) -> dict:
    """A single-period plan holding every unit any period runs; its `routed` is the unit's
    capacity over the day (replica-hours), the weights of the routes that are kept."""
    hours = {w.period: w.hours for w in windows}
    fleet: dict[str, dict] = {}
    services: dict[str, dict] = {}
    for period, p in period_plans.items():
        for line in p["fleet"]:
            fleet.setdefault(line.get("offer_id"), line)
        for s in p["services"]:
            union = services.setdefault(s["name"], {**s, "assignments": []})
            by_key = {_key(plan, s["name"], a): a for a in union["assignments"]}
            for a in s["assignments"]:
                capacity_h = sum(a["routed"]) * hours[period]
                known = by_key.get(_key(plan, s["name"], a))
                if known is None:
                    union["assignments"].append({**a, "routed": [capacity_h]})
                else:
                    known["replicas"] = max(known["replicas"], a["replicas"])
                    known["routed"] = [known["routed"][0] + capacity_h]
    return {**period_plans[windows[0].period], "workload": plan.get("workload", "workload"),
            "fleet": list(fleet.values()), "services": list(services.values())}


# ------------------------------------------------------------------ rendering
def render_scheduled(plan: object, options: ScheduleOptions) -> tuple[dict[str, str], list[str]]:
    """(file name -> contents, warnings): the union's files and keda-schedule.yaml."""
    windows = period_windows(plan, options.day_start_minute)
    period_plans = _period_plans(plan, windows)
    counts = _replicas_by_period(plan, period_plans)
    summary = plan_units(_union_plan(plan, period_plans, windows))
    if owned_units(summary.units):
        raise InputError.single("--schedule", "the plan runs owned servers, whose per-period placements "
                                "(sites/SITE.yaml) the scheduled export does not write.",
                                "export --period all without --schedule")
    units = tuple(replace(u, replicas_by_period=tuple((w.period, counts[(u.service, u.config, u.spot)].get(w.period, 0))
                                                      for w in windows))
                  for u in summary.units)
    # The union runs no period's fleet all day: its files quote the plan's price averaged over the day.
    summary = replace(summary, units=units, workload=f"{summary.workload}, every period on a daily schedule; "
                      "price averaged over the day",
                      total_price_usd_per_hour=_average_price(plan))
    warnings = list(summary.warnings)
    unrouted, service_notes = _routing(units, windows, warnings)
    files = kubernetes.render(summary, warnings, unrouted=unrouted, service_notes=service_notes)
    if SCHEDULE_FILE in files:  # unit names end in -xN (and a precision, -spot or a hash): cannot happen
        raise InputError.single("--schedule", f"a unit's file is named {SCHEDULE_FILE}.", "rename the service")
    files[SCHEDULE_FILE] = _schedule_file(summary, windows, options)
    return files, warnings


def _average_price(plan: dict) -> float | None:
    price = plan.get("average_price_usd_per_hour")
    return price if isinstance(price, (int, float)) and not isinstance(price, bool) else None


def _routing(units: tuple[Unit, ...], windows: list[Window], warnings: list[str]) -> tuple[frozenset[str], dict]:
    """(services that get no HTTPRoute, comments per service file): routes KEDA cannot switch."""
    by_service: dict[str, list[Unit]] = {}
    for u in units:
        by_service.setdefault(u.service_slug, []).append(u)
    unrouted, notes = set(), {}
    for slug, service_units in by_service.items():
        if len(service_units) < 2:
            continue
        split = "; ".join(f"{w.period}: " + ", ".join(f"{u.name} x{dict(u.replicas_by_period)[w.period]}"
                                                      for u in service_units if dict(u.replicas_by_period)[w.period])
                          for w in windows)
        idle = [(u.name, w.period) for u in service_units for w in windows if not dict(u.replicas_by_period)[w.period]]
        if idle:
            unrouted.add(slug)
            notes[slug] = [f"No HTTPRoute: the units of {service_units[0].service!r} change from period to period "
                           f"({split}). A route's weights are fixed, KEDA scales only replicas, and a weight on a "
                           "unit scaled to zero sends that share of requests to no pod (most gateways answer 503). "
                           "This Service spreads connections evenly over the pods that run, whatever their "
                           "capacity: a smaller replica gets as much as a bigger one."]
            warnings.append(f"service {service_units[0].service!r}: no weighted HTTPRoute in the scheduled export "
                            f"({idle[0][0]} runs no replica in period {idle[0][1]!r}, and KEDA cannot switch route "
                            "weights); its Service splits requests evenly over the running pods")
        else:
            notes[slug] = [f"Scheduled by KEDA ({split}): the route's weights are the units' capacity over the "
                           "whole day (replica-hours); KEDA scales replicas, not weights, so within a period the "
                           "split follows the day's average, not that period's plan."]
    return frozenset(unrouted), notes


def _schedule_file(summary: PlanSummary, windows: list[Window], options: ScheduleOptions) -> str:
    objs = [scaled_object(u, windows, options.timezone) for u in summary.units]
    return "---\n".join(document(obj, _schedule_header(summary, windows, options) if i == 0 else [])
                        for i, obj in enumerate(objs))


def scaled_object(u: Unit, windows: list[Window], timezone: str) -> dict:
    """The unit's ScaledObject: a cron trigger per period it runs in; zero replicas outside them."""
    by_period = dict(u.replicas_by_period)
    running = [(w, by_period[w.period]) for w in windows if by_period[w.period] > 0]
    triggers = [{"type": "cron", "name": w.period,
                 "metadata": {"timezone": timezone, "start": w.start_cron, "end": w.end_cron,
                              "desiredReplicas": str(n)}} for w, n in running]
    return {"apiVersion": KEDA_API, "kind": "ScaledObject",
            "metadata": {"name": u.name, "labels": {"app.kubernetes.io/name": u.service_slug,
                                                    "app.kubernetes.io/instance": u.name},
                         "annotations": {"fleet-planner/service": u.service, "fleet-planner/offer": u.offer_id}},
            "spec": {"scaleTargetRef": _target(u),
                     "minReplicaCount": 0,
                     "maxReplicaCount": max(n for _, n in running),
                     "triggers": triggers}}


def _target(u: Unit) -> dict:
    if u.multi_node:
        return {"apiVersion": kubernetes.LWS_API, "kind": "LeaderWorkerSet", "name": u.name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": u.name}


def _schedule_header(summary: PlanSummary, windows: list[Window], options: ScheduleOptions) -> list[str]:
    price = (f", ${summary.total_price_usd_per_hour:,.4f}/hour"
             if summary.total_price_usd_per_hour is not None else "")
    lines = [f"Generated by `solver-cli export --to kubernetes --schedule keda` from plan {summary.workload!r} "
             f"({summary.status}{price}).",
             f"Switches the plan's fleets at its period boundaries every day, clock times in {options.timezone}: "
             + ", ".join(f"{w.period} {w.clock} ({w.hours:g} h)" for w in windows) + ".",
             f"Needs KEDA (ScaledObject {KEDA_API}, `cron` scaler; written against KEDA {KEDA_VERSION}): one "
             "ScaledObject per unit, a trigger per period the unit runs in, holding the period's replicas during "
             "its window; outside every window the unit scales to zero (minReplicaCount 0). LeaderWorkerSets are "
             "scaled through their scale subresource like Deployments.",
             "The Deployments and LeaderWorkerSets start at 0 replicas: after `kubectl apply -f DIR`, KEDA starts "
             f"the current period's fleet at its next poll (every {KEDA_POLLING_S} s), whatever the time of day. "
             "Do not set their replicas by hand: KEDA owns them.",
             "Timing: a period's new pods start at its boundary and serve only once their weights are loaded "
             f"(minutes). Scale-downs wait the HPA's scale-down window ({HPA_SCALE_DOWN_WINDOW_S} s) and scale-to-zero "
             f"KEDA's cooldownPeriod ({KEDA_COOLDOWN_S} s), both defaults: the previous period's pods overlap the next "
             "period's by about 5 minutes, which the plan does not price.",
             "Daylight saving: the boundaries are wall-clock times, so on the days the clocks change the period "
             "spanning the change runs an hour shorter or longer."]
    return lines
