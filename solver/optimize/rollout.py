"""From the running fleet to the planned one, step by step, make before break.

`changes` lists, per offer and market (spot or not), the instances kept, added and
removed. `plan_rollout` orders the work so that no service ever has less capacity than
the smaller of what it has now and what the plan gives it:

1. every planned replica gets a place on a planned instance up front: replicas that
   already run where the plan keeps them stay; the others go first-fit in decreasing
   size (replica sizes are powers of two dividing the instance, so this never strands
   room: once an instance's leftover replicas are gone, its planned ones fit);
2. launch the added instances;
3. start a planned replica as soon as its place is free;
4. stop a service's leftover replicas only once every planned replica of that service
   runs: its capacity never drops below the planned one, which serves the demand;
5. terminate instances the plan drops once they are empty.

When nothing can move (service A waits for room that B's leftovers hold while B waits
for room A holds), a temporary instance of the same offer ("surge") runs a copy of one
waiting replica until its place frees; surge instances are terminated at the end. That
costs a little, and is the price of never under-serving.

Without the running replicas (`current_fleet[].replicas`) the rollout assumes that kept
instances already run what the plan places on them: it launches and starts before it
terminates anything.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from solver.compile.problem import RunningInstances


@dataclass(frozen=True)
class Target:
    """A planned replica: its service, configuration, offer, market and GPUs."""

    service: str
    config: str
    offer_id: str
    spot: bool
    gpus: int


@dataclass
class _Replica:
    service: str
    config: str
    gpus: int
    planned: bool  # False: a leftover of the running fleet, to stop
    running: bool
    slots: list["_Instance"] = field(default_factory=list)  # where it runs (several: spans instances)
    copy_of: "_Replica | None" = None  # a surge copy stands in for this waiting planned replica


@dataclass
class _Instance:
    offer_id: str
    spot: bool
    name: str
    gpus: int
    kept: bool  # the plan keeps it (running ones) or launches it (new ones)
    running: bool
    surge: bool = False
    held: list[_Replica] = field(default_factory=list)  # replicas placed here (running or to start)

    def used(self, running_only: bool) -> int:
        return sum(_share(r, self) for r in self.held if r.running or not running_only)


def _share(r: _Replica, inst: _Instance) -> int:
    return inst.gpus if len(r.slots) > 1 else r.gpus


def changes(current: tuple[RunningInstances, ...], firm: dict[str, int], spot: dict[str, int]) -> list[dict]:
    """Per offer and market: instances kept, added, removed (zero counts left out)."""
    now: dict[tuple[str, bool], int] = {}
    for f in current:
        now[(f.offer_id, f.spot)] = now.get((f.offer_id, f.spot), 0) + f.instances
    planned = {(o, False): n for o, n in firm.items()} | {(o, True): n for o, n in spot.items()}
    out = []
    for offer_id, is_spot in sorted(set(now) | set(planned)):
        a, b = now.get((offer_id, is_spot), 0), planned.get((offer_id, is_spot), 0)
        for action, n in (("keep", min(a, b)), ("add", b - a), ("remove", a - b)):
            if n > 0:
                out.append({"offer_id": offer_id, "action": action, "instances": n, "spot": is_spot})
    return out


def change_counts(current: tuple[RunningInstances, ...], firm: dict[str, int], spot: dict[str, int]) -> tuple[int, int]:
    """(instances added, instances removed) from the running fleet to the plan's: what
    change_costs price and max_changed_instances counts (`changes`, summed)."""
    added = removed = 0
    for c in changes(current, firm, spot):
        if c["action"] == "add":
            added += c["instances"]
        elif c["action"] == "remove":
            removed += c["instances"]
    return added, removed


def plan_rollout(current: tuple[RunningInstances, ...], targets: list[Target], firm: dict[str, int],
                 spot: dict[str, int], gpus_per_instance: dict[str, int], config_key) -> dict:
    """The ordered steps from the running fleet to the plan's first period.

    `config_key(service, offer_id, gpus_per_replica, precision)` names a running replica's
    configuration as the plan names its own, so that unchanged replicas stay put."""
    known = any(f.replicas for f in current)
    planned_n = {(o, False): n for o, n in firm.items()} | {(o, True): n for o, n in spot.items()}
    want: dict[tuple[str, bool], list[Target]] = {}
    for t in targets:
        want.setdefault((t.offer_id, t.spot), []).append(t)
    pools: dict[tuple[str, bool], list[_Instance]] = {}
    leftovers: list[_Replica] = []
    for f in current:
        pool = pools.setdefault((f.offer_id, f.spot), [])
        start = len(pool)
        for i in range(f.instances):
            pool.append(_Instance(f.offer_id, f.spot, f"{_label(f.offer_id, f.spot)}#{start + i + 1}",
                                  gpus_per_instance.get(f.offer_id, 1), kept=True, running=True))
        if known:
            leftovers += _place_running(pool[start:], f, config_key)
    planned: list[_Replica] = []
    for key in sorted(set(pools) | set(planned_n)):
        pool = pools.setdefault(key, [])
        n = planned_n.get(key, 0)
        # Keep the running instances whose replicas the plan keeps most of; drop the rest.
        pool.sort(key=lambda inst: (-_overlap(inst, want.get(key, [])), inst.name))
        for inst in pool[n:]:
            inst.kept = False
        added = max(n - len(pool), 0)
        for j in range(added):
            pool.append(_Instance(key[0], key[1], f"{_label(*key)}+{j + 1}", gpus_per_instance.get(key[0], 1),
                                  kept=True, running=False))
        planned += _assign(pool, want.get(key, []), known)
    leftovers = [r for r in leftovers if not r.planned]
    steps: list[dict] = []
    for key in sorted(pools):
        steps += [_step("launch", inst) for inst in pools[key] if not inst.running and inst.kept]
    for key in sorted(pools):
        for inst in pools[key]:
            if inst.kept and not inst.running:
                inst.running = True
    _converge(pools, planned, leftovers, steps)
    for key in sorted(pools):
        steps += [_step("terminate", inst) for inst in pools[key] if not inst.kept and inst.running]
    for i, s in enumerate(steps, start=1):
        s["step"] = i
    note = "" if known else ("the running fleet's replicas were not given: kept instances are taken to run what the "
                             "plan places on them; every launch and start comes before any termination")
    surge = sum(1 for s in steps if s["action"] == "launch" and s.get("temporary"))
    # Instances and replicas refer to each other (held, slots): cycles only the cyclic
    # collector would free. Emptying `held` lets reference counting free them now (plans
    # make no cycles: solver/collector.py).
    for pool in pools.values():
        for inst in pool:
            inst.held.clear()
    return {"steps": steps, "surge_instances": surge, "note": note}


def _label(offer_id: str, spot: bool) -> str:
    return f"{offer_id}{' (spot)' if spot else ''}"


def _place_running(instances: list[_Instance], f: RunningInstances, config_key) -> list[_Replica]:
    """The running replicas on their instances (first fit decreasing, as they were packed)."""
    out = []
    size = instances[0].gpus if instances else 1
    items = sorted(((r.service, config_key(r.service, f.offer_id, r.gpus_per_replica, r.precision), r.gpus_per_replica)
                    for r in f.replicas for _ in range(r.count)), key=lambda x: (-x[2], x[0], x[1]))
    for service, config, g in items:
        rep = _Replica(service, config, g, planned=False, running=True)
        span = max(1, math.ceil(g / size))
        if span > 1:
            free = [i for i in instances if not i.held][:span]
            if len(free) < span:
                continue
            rep.slots = free
        else:
            inst = next((i for i in instances if i.gpus - i.used(False) >= g), None)
            if inst is None:
                continue
            rep.slots = [inst]
        for inst in rep.slots:
            inst.held.append(rep)
        out.append(rep)
    return out


def _overlap(inst: _Instance, wanted: list[Target]) -> int:
    left = [t.config for t in wanted]
    hits = 0
    for r in inst.held:
        if r.config in left:
            left.remove(r.config)
            hits += r.gpus
    return hits


def _assign(pool: list[_Instance], wanted: list[Target], known: bool) -> list[_Replica]:
    """A place for every planned replica of this pool on its planned instances, in
    decreasing size; a running identical replica on a kept instance stays (is adopted).

    Within one size, every replica that can stay is adopted before any new one is placed,
    and a new one goes where it displaces no running replica that a planned one of a
    smaller size could still adopt: placed in plain order, a new replica of service a took
    the instance where b's kept replica ran, and b's moved (on the 100-service re-plan
    benchmark, 115 replica stops where 41 replicas change). Any instance with room will
    do for correctness: sizes are powers of two dividing the instance and come in
    decreasing order, so every instance's free room stays a multiple of the current size."""
    kept = [i for i in pool if i.kept]
    out = []
    ordered = sorted(wanted, key=lambda t: (-t.gpus, t.service, t.config))
    for _, same_size in itertools.groupby(ordered, key=lambda t: t.gpus):
        fresh = []
        for t in same_size:
            size = kept[0].gpus if kept else t.gpus
            span = max(1, math.ceil(t.gpus / size))
            stay = _adoptable(kept, t) if known and span == 1 else None
            if stay is not None:
                stay.planned = True  # it runs where the plan wants it: nothing to do
                out.append(stay)
            else:
                fresh.append((t, span))
        later = [t for t in ordered if t.gpus < (fresh[0][0].gpus if fresh else 0)]
        for t, span in fresh:
            rep = _Replica(t.service, t.config, t.gpus, planned=True, running=False)
            if span > 1:
                free = [i for i in kept if not any(r.planned for r in i.held)]
                rep.slots = sorted(free, key=lambda i: _adoptable_gpus(i, later) > 0)[:span]
            else:
                room = [i for i in kept if _planned_room(i) >= t.gpus]
                # Where the replica leaves room for the running ones a later target adopts.
                inst = next((i for i in room if _planned_room(i) - t.gpus >= _adoptable_gpus(i, later)),
                            room[0] if room else None)
                rep.slots = [inst] if inst is not None else []
            if not known and rep.slots and all(i.running for i in rep.slots):
                rep.running = True  # unknown replicas: a kept instance already runs its share of the plan
            if not rep.slots:
                raise AssertionError(f"rollout: no place for {t.config} on the planned instances")
            for inst in rep.slots:
                inst.held.append(rep)
            out.append(rep)
    return out


def _planned_room(inst: _Instance) -> int:
    return inst.gpus - sum(_share(r, inst) for r in inst.held if r.planned)


def _adoptable(kept: list[_Instance], t: Target) -> _Replica | None:
    """A running replica identical to target t, on a kept instance with room for it among
    the planned replicas placed so far."""
    return next((r for i in kept if i.running for r in i.held
                 if not r.planned and r.running and r.config == t.config and r.copy_of is None
                 and len(r.slots) == 1 and _planned_room(i) >= t.gpus), None)


def _adoptable_gpus(inst: _Instance, later: list[Target]) -> int:
    """GPUs of the running replicas on `inst` that smaller targets still to place could adopt."""
    configs = {t.config for t in later}
    return sum(r.gpus for r in inst.held if not r.planned and r.running and len(r.slots) == 1
               and r.config in configs)


def _converge(pools, planned: list[_Replica], leftovers: list[_Replica], steps: list[dict]) -> None:
    waiting = [r for r in planned if not r.running]
    surge: list[_Replica] = []
    while waiting or surge:
        moved = False
        for r in list(waiting):
            if all(i.gpus - i.used(True) >= _share(r, i) for i in r.slots):
                r.running = True
                waiting.remove(r)
                steps.append(_step("start", r.slots[0], r))
                moved = True
                for copy in [c for c in surge if c.copy_of is r]:
                    _stop(copy, steps)
                    surge.remove(copy)
        covered = {id(c.copy_of) for c in surge}
        blocked = {r.service for r in waiting if id(r) not in covered}
        for r in list(leftovers):
            if r.running and r.service not in blocked:
                _stop(r, steps)
                leftovers.remove(r)
                moved = True
        if moved:
            continue
        # Nothing moves: a temporary instance runs a copy of the largest uncovered waiting replica.
        r = next((x for x in sorted(waiting, key=lambda x: (-x.gpus, x.service, x.config)) if id(x) not in covered), None)
        if r is None:
            raise AssertionError("rollout: waiting replicas are covered but cannot start")  # placement guarantees room
        proto = r.slots[0]
        pool = pools[(proto.offer_id, proto.spot)]
        span = len(r.slots)
        temp = [i for i in pool if i.surge and i.gpus - i.used(True) >= r.gpus] if span == 1 else []
        if not temp:
            n = sum(1 for i in pool if i.surge)
            temp = [_Instance(proto.offer_id, proto.spot, f"{_label(proto.offer_id, proto.spot)}+surge{n + j + 1}",
                              proto.gpus, kept=False, running=True, surge=True) for j in range(span)]
            pool += temp
            steps += [_step("launch", i) | {"temporary": True} for i in temp]
        copy = _Replica(r.service, r.config, r.gpus, planned=False, running=True, slots=temp[:span], copy_of=r)
        for i in copy.slots:
            i.held.append(copy)
        steps.append(_step("start", copy.slots[0], copy) | {"temporary": True})
        surge.append(copy)


def _stop(r: _Replica, steps: list[dict]) -> None:
    r.running = False
    for inst in r.slots:
        inst.held.remove(r)
    steps.append(_step("stop", r.slots[0], r) | ({"temporary": True} if r.copy_of is not None else {}))


def _step(action: str, inst: _Instance, r: _Replica | None = None) -> dict:
    s = {"step": 0, "action": action, "offer_id": inst.offer_id, "spot": inst.spot, "instance": inst.name,
         "service": None, "config": None, "gpus": None, "temporary": False}
    if r is not None:
        s.update({"service": r.service, "config": r.config, "gpus": r.gpus})
    return s
