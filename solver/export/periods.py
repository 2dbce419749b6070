"""A multi-period plan -> the single-period plan of one period, for the export.

A plan over periods (night, day, evening) deploys a different fleet in each; its top-level
`fleet` and `services` are the first period's only. Exporting those as "the plan" would
deploy the night fleet all day, so a multi-period plan is exported one period at a time
(`--period NAME`), and refused without one.

A period lists, per service, its assignments as (config, offer_id, spot, replicas) and its
fleet lines. The rest of a configuration (GPU, GPUs and instances per replica, precision,
batch) comes from the top-level assignment with the same configuration key where the first
period uses it, else from the key itself (SERVICE@OFFER:Ngpu[xMinst]:PRECISION, see
solver/compile/problem.py Candidate.key); a batch the plan states nowhere is left out.
"""

from __future__ import annotations

import re

from solver.errors import InputError

_KEY_TAIL = re.compile(r":(\d+)gpu(?:x(\d+)inst)?:([A-Za-z0-9_]+)$")
_FIX = "export the plan exactly as `solver-cli solve` wrote it"
ALL_PERIODS = "all"  # --period all: every period, a directory each (unless a period is named "all")


def period_names(plan: object) -> list[str]:
    if not isinstance(plan, dict) or not isinstance(plan.get("periods"), list):
        return []
    return [p.get("name") for p in plan["periods"] if isinstance(p, dict) and isinstance(p.get("name"), str)]


def period_hours(plan: object, period: str) -> float | None:
    """The named period's hours as the plan states them (None: not a number)."""
    for p in plan.get("periods") or [] if isinstance(plan, dict) else []:
        if isinstance(p, dict) and p.get("name") == period:
            hours = p.get("hours")
            return hours if isinstance(hours, (int, float)) and not isinstance(hours, bool) else None
    return None


def select_period(plan: object, period: str | None) -> object:
    """The plan to export: the plan itself (single period), or the named period's plan."""
    names = period_names(plan)
    if not names:
        if period is not None:
            raise InputError.single("--period", f"is {period!r}, but the plan has a single period.",
                                    "leave --period out")
        return plan
    if period is None:
        raise InputError.single("--period", f"is required: the plan has {len(names)} periods ({', '.join(names)}), "
                                "each with its own fleet, and its top-level fleet is the first period's only.",
                                f"give --period all (a directory per period under --out), or one period, e.g. "
                                f"--period {names[0]} --out deploy/{names[0]}")
    if period not in names:
        raise InputError.single("--period", f"{period!r} is not one of the plan's periods ({', '.join(names)}).",
                                "give one of those names")
    return _period_plan(plan, next(p for p in plan["periods"] if isinstance(p, dict) and p.get("name") == period))


def _period_plan(plan: dict, p: dict) -> dict:
    top_fleet = {f.get("offer_id"): f for f in plan.get("fleet") or [] if isinstance(f, dict)}
    top_configs = {a.get("config"): a for s in plan.get("services") or [] if isinstance(s, dict)
                   for a in s.get("assignments") or [] if isinstance(a, dict)}
    fleet = [dict(top_fleet.get(f.get("offer_id"), {}), **f) for f in p.get("fleet") or [] if isinstance(f, dict)]
    gpu_of = {f.get("offer_id"): f.get("gpu") for f in fleet}
    top_services = {s.get("name"): s for s in plan.get("services") or [] if isinstance(s, dict)}
    services = []
    for si, s in enumerate(p.get("services") or []):
        if not isinstance(s, dict):
            continue
        base = top_services.get(s.get("name"), {})
        assignments = [_assignment(a, top_configs, gpu_of, f"periods[{p.get('name')}].services[{si}].assignments[{ai}]")
                       for ai, a in enumerate(s.get("assignments") or []) if isinstance(a, dict)]
        services.append({"name": s.get("name"), "model": base.get("model"), "engine": base.get("engine"),
                         "assignments": [a for a in assignments if not isinstance(a["replicas"], int) or a["replicas"] > 0]})
    return {**plan, "workload": f"{plan.get('workload', 'workload')}, period {p.get('name')!r} ({p.get('hours')} h)",
            "total_price_usd_per_hour": p.get("total_price_usd_per_hour"), "fleet": fleet, "services": services,
            "placements": [], "periods": None}


def _assignment(a: dict, top_configs: dict, gpu_of: dict, where: str) -> dict:
    config = a.get("config")
    known = top_configs.get(config)
    if known is not None:
        detail = {k: v for k, v in known.items() if k not in ("replicas", "routed", "throughput_per_replica")}
    else:
        m = _KEY_TAIL.search(config) if isinstance(config, str) else None
        if m is None:
            raise InputError.single(f"{where}.config", f"{config!r} is not a configuration key the export can read.",
                                    _FIX)
        precision = None if m.group(3) == "measured" else m.group(3)
        detail = {"config": config, "offer_id": a.get("offer_id"), "gpu": gpu_of.get(a.get("offer_id")),
                  "gpus_per_replica": int(m.group(1)), "instances_per_replica": int(m.group(2) or 1),
                  "precision": precision, "source": "measured" if precision is None else "estimate"}
    replicas = a.get("replicas")
    cap = (known or {}).get("cap_per_replica") or 1.0
    # The period's traffic split is not in the plan: the replicas' capacity stands in for it.
    return {**detail, "offer_id": a.get("offer_id"), "replicas": replicas, "spot": bool(a.get("spot")),
            "routed": [replicas * cap] if isinstance(replicas, int) else [0.0]}
