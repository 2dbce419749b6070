"""Small random workloads for the enumeration and property tests.

Non-LLM services described only by measured profiles (items/min per replica, latency)
over a small inline catalog, so an exhaustive enumerator can find the true optimum.
Every number is a dyadic rational or a whole number, so demand x share x (1 + headroom)
is exact in binary floating point and the enumerator's exact arithmetic sees the same
demands the planner does.

`random_workload(rng)` takes any `random.Random`: the enumeration test seeds it with
0, 1, 2, ...; the property tests with seeds that hypothesis draws (and prints on failure).
The mix (about a third infeasible, a third with request classes, most with several
services) is checked by `test_random_workloads_cover_the_hard_cases`.
"""

from __future__ import annotations

import copy
import random

# GPU types of the default catalog (inline catalogs keep the default GPU list), with a
# plausible per-GPU hourly price to start from and usable memory (for memory profiles).
GPU_PRICE_USD_PER_HOUR = {"T4": 0.35, "L4": 0.8, "A10": 1.0, "A100-80GB": 2.5}
GPU_MEMORY_GIB = {"T4": 16, "L4": 24, "A10": 24, "A100-80GB": 80}
INSTANCE_SIZES = (1, 2, 4, 8)
# Shares that are exact in binary floating point (and sum to exactly 1).
TWO_CLASS_SHARES = ((0.5, 0.5), (0.25, 0.75), (0.75, 0.25), (0.375, 0.625), (0.125, 0.875))
THREE_CLASS_SHARES = ((0.25, 0.25, 0.5), (0.5, 0.25, 0.25), (0.125, 0.375, 0.5))
HEADROOMS = (0.25, 0.5, 0.125)


def random_offers(rng: random.Random) -> list[dict]:
    """2-4 offers; repeated GPU types with different sizes make sharing and mixing matter."""
    n = rng.randint(2, 4)
    gpus = rng.sample(sorted(GPU_PRICE_USD_PER_HOUR), k=rng.randint(1, min(3, n)))
    offers = []
    for i in range(n):
        gpu = gpus[i % len(gpus)] if i < len(gpus) else rng.choice(gpus)
        size = rng.choice(INSTANCE_SIZES)
        # Big instances are sometimes cheaper per GPU, sometimes dearer: both must be explored.
        factor = rng.choice((0.75, 0.875, 1.0, 1.125, 1.25))
        price = round(GPU_PRICE_USD_PER_HOUR[gpu] * size * factor, 4)
        offer = {"provider": rng.choice(("p", "q")), "name": f"o{i}-{gpu.lower()}x{size}", "gpu": gpu,
                 "gpus_per_instance": size, "price_usd_per_hour": price}
        if rng.random() < 0.1:
            offer["available_instances"] = rng.randint(0, 3)
        offers.append(offer)
    return offers


MAX_CONFIGS_PER_SERVICE = 4  # (offer, GPUs per replica) pairs a service's profiles reach
MAX_REPLICAS_OF_SLOWEST = 8  # demand <= this x the slowest profile's throughput


def _profile(rng: random.Random, gpu: str, g: int, unit: str) -> dict:
    # Throughput grows with GPUs per replica, sometimes less than proportionally.
    rate = max(1, round(rng.randint(8, 30) * g * rng.choice((0.5, 0.75, 1.0, 1.25))))
    p = {"gpu": gpu, "gpus_per_replica": g, unit: float(rate), "latency_ms": float(rng.choice((50, 100, 150, 200, 300)))}
    if rng.random() < 0.05:
        p["memory_gib_per_gpu"] = float(rng.choice((20, 30, 60)))
    return p


def reachable_configs(profiles: list[dict], offers: list[dict]) -> int:
    """How many (offer, GPUs per replica) pairs the profiles apply to."""
    pairs = set()
    for p in profiles:
        for o in offers:
            oid = f"{o['provider']}/{o['name']}"
            g, size = p.get("gpus_per_replica", 1), o["gpus_per_instance"]
            if p["gpu"] == o["gpu"] and g <= size and size % g == 0 and p.get("offer") in (None, oid):
                pairs.add((oid, g))
    return len(pairs)


def _random_profiles(rng: random.Random, offers: list[dict], classes: list[dict] | None, unit: str) -> list[dict]:
    # Profiles on (GPU, GPUs per replica) pairs that the offers can host, plus sometimes
    # one that no offer can host (an 8-GPU replica when the largest instance has 4).
    hostable = sorted({(o["gpu"], g) for o in offers for g in INSTANCE_SIZES
                       if g <= o["gpus_per_instance"] and o["gpus_per_instance"] % g == 0})
    picks = rng.sample(hostable, k=min(len(hostable), rng.randint(1, 3)))
    if rng.random() < 0.1:
        picks.append((rng.choice(sorted(GPU_PRICE_USD_PER_HOUR)), 8))
    profiles: list[dict] = []
    for gpu, g in dict.fromkeys(picks):
        if classes is None:
            profiles.append(_profile(rng, gpu, g, unit))
            continue
        # Per class: a class-specific profile, or the generic one, or none (class not served here).
        generic = rng.random() < 0.4
        if generic:
            profiles.append(_profile(rng, gpu, g, unit))
        for c in classes:
            if rng.random() < (0.5 if generic else 0.85):
                p = _profile(rng, gpu, g, unit)
                p["request_class"] = c["name"]
                profiles.append(p)
    if not profiles:
        profiles.append(_profile(rng, picks[0][0], picks[0][1], unit))
    if classes is not None and rng.random() < 0.95:
        # Usually every class is measured somewhere; otherwise the service is unservable.
        covered = {p.get("request_class") for p in profiles}
        for c in classes:
            if None not in covered and c["name"] not in covered:
                p = _profile(rng, picks[0][0], picks[0][1], unit)
                p["request_class"] = c["name"]
                profiles.append(p)
    if rng.random() < 0.1:
        # Pin one (GPU, size) measurement to one offer of that GPU: other offers lose it.
        p = rng.choice(profiles)
        g = p["gpus_per_replica"]
        same = [o for o in offers if o["gpu"] == p["gpu"] and o["gpus_per_instance"] % g == 0 and o["gpus_per_instance"] >= g]
        if same:
            o = rng.choice(same)
            p["offer"] = f"{o['provider']}/{o['name']}"
    return profiles


def _request_class(name: str, share: float) -> dict:
    # The schema asks every class for token counts; measured profiles ignore them.
    tokens = {"short": (128, 64), "mid": (1024, 256), "long": (4096, 512)}[name]
    return {"name": name, "share": share, "prompt_tokens": tokens[0], "output_tokens": tokens[1]}


def random_service(rng: random.Random, name: str, offers: list[dict]) -> dict:
    unit = "items_per_min"
    classes: list[dict] | None = None
    roll = rng.random()
    if roll < 0.3:
        shares = rng.choice(TWO_CLASS_SHARES)
        classes = [_request_class(n, s) for n, s in zip(("short", "long"), shares)]
    elif roll < 0.38:
        shares = rng.choice(THREE_CLASS_SHARES)
        classes = [_request_class(n, s) for n, s in zip(("short", "mid", "long"), shares)]
    # Keep exhaustive enumeration tractable: few configurations per service.
    for _ in range(50):
        profiles = _random_profiles(rng, offers, classes, unit)
        if reachable_configs(profiles, offers) <= MAX_CONFIGS_PER_SERVICE:
            break
    else:
        profiles = profiles[:1]
    slowest = min(p[unit] for p in profiles)
    # Whole items/min (so every demand x share x (1 + headroom) is exact in binary floats).
    rate = float(max(1, int(slowest * rng.randint(1, 4 * MAX_REPLICAS_OF_SLOWEST) / 4)))
    if rng.random() < 0.05:
        rate = 0.0
    demand: dict = {unit: rate}
    if classes is not None:
        demand["classes"] = classes
    svc: dict = {"name": name, "demand": demand, "profiles": profiles}
    if rng.random() < 0.25 or rate == 0.0:
        svc["min_replicas"] = rng.randint(1, 3)
    if rng.random() < 0.1:
        svc["max_replicas"] = svc.get("min_replicas", 0) + rng.randint(2, 6)
    if rng.random() < 0.3:
        # Usually an SLO that some profile meets (and slower ones miss); rarely one none meets.
        hostable = [p for p in profiles if reachable_configs([p], offers)] or profiles
        names = [c["name"] for c in classes] if classes else [None]
        per_class = [min((p["latency_ms"] for p in hostable if p.get("request_class") in (k, None)), default=100.0)
                     for k in names]
        fastest = max(per_class)
        slo = fastest + rng.choice((0, 25, 50, 100)) if rng.random() < 0.95 else min(per_class) - 10
        svc["slo"] = {"latency_ms": float(slo)}
    return svc


def random_workload(rng: random.Random, *, max_services: int = 3) -> dict:
    """A small workload dict over an inline catalog; the optimum needs only a few instances."""
    offers = random_offers(rng)
    services = [random_service(rng, f"svc{i}", offers) for i in range(rng.randint(1, max_services))]
    w: dict = {"name": "random", "services": services, "catalog": {"offers": offers},
               "solver": {"time_limit_s": 20}}
    c = _random_constraints(rng, offers)
    if c:
        w["constraints"] = c
    return w


def _random_constraints(rng: random.Random, offers: list[dict]) -> dict:
    c: dict = {}
    if rng.random() < 0.2:
        c["headroom"] = rng.choice(HEADROOMS)
    if rng.random() < 0.2:
        gpu = rng.choice(offers)["gpu"]
        c["gpu_quotas"] = {gpu: rng.choice((1, 2, 4, 6, 8, 12))}
    if rng.random() < 0.2:
        o = rng.choice(offers)
        c["offer_quotas"] = {f"{o['provider']}/{o['name']}": rng.randint(0, 3)}
    if rng.random() < 0.15:
        c["budget_usd_per_hour"] = float(rng.choice((1, 2, 3, 5, 8, 12, 20)))
    return c


def scale_demand(workload: dict, service_index: int, factor: float) -> dict:
    """A copy of `workload` with one service's demand multiplied by `factor`."""
    w = copy.deepcopy(workload)
    d = w["services"][service_index]["demand"]
    for unit in ("items_per_min", "requests_per_s"):
        if unit in d:
            d[unit] = d[unit] * factor
    return w
