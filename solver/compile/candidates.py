"""Candidate configurations: offer x GPUs per replica x precision -> per-replica performance.

Measured profiles win; otherwise the LLM performance model estimates. Configurations
that do not fit or miss an SLO are dropped and kept as `Rejection`s for explanations;
configurations that can never be part of a unique cheapest plan are pruned (see
`solver.compile.pruning`).

A configuration's performance depends only on the service's performance key (model,
token lengths, SLOs, precisions, engine, profiles), the offer's hardware and the
calibration — never on demand, prices, quotas or the budget. So the candidates of one
(service, offer) pair are cached across calls (`CandidateCache`): review scenarios and
repeated scheduler calls that change only demand, prices or limits rebuild nothing.

Estimates are made in bulk: every (service, offer) pair's build first says which
performance queries it needs, the builder estimates all of them at once
(`solver.perf.estimate_many`, numpy arrays) in chunks that each end well within 100 ms
(a cancel or deadline is checked between chunks), and the builds then finish with the
results - the same configurations and rejections, in the same order, as one at a time.
Estimates are also cached by query across calls (`ESTIMATES`, least recently used out).

Within one call, offers of one GPU type share a service's replica shapes (`_Shape`: g GPUs
per replica x instances spanned, on that GPU with its usable memory and the links the
estimates read): the queries, their estimates and each precision's outcome are made once,
and every offer stamps its own configurations and rejections from it (a 1-GPU replica on
1-, 2-, 4- and 8-GPU instances is one shape). Offers whose configurations come from the
same list of shapes are pruned once, and lists that share their first shapes share the
pruning of those (`_Pruning`). Services that are estimated only (the most common kind)
are built by a small state machine (`_PlainBuild`) rather than the general generator;
tests/test_candidate_fast_paths.py holds both to the same answers.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import fields, replace
from operator import attrgetter, itemgetter
from typing import Generator, Sequence

from solver.catalog.types import Catalog, GpuType, Offer
from solver.compile.compiled import compile_problem
from solver.compile.load_caps import cap_under_load
from solver.compile.problem import ClassPerf, Config, Problem, Profile, Rejection, ServiceDemand
from solver.compile.pruning import prune_configs, prune_offers, prune_whole_instance_configs
from solver.frozen import maker, stamper_into
from solver.interrupt import NEVER, Stop
from solver.lru import LockedLru
from solver.models.library import ModelArch
from solver.perf import Calibration, PerfEstimate, PerfQuery, estimate_many, links_read
from solver.workload.schema import Workload


def replica_sizes(gpus_per_instance: int) -> list[int]:
    """GPUs per replica: powers of two dividing the instance's GPU count, and the whole
    instance (a 6-GPU instance: 1, 2 and 6).

    These make packing exact: replicas whose sizes are powers of two that each divide the
    instance size fit into n instances iff their GPUs sum to at most n x size, and a
    whole-instance replica takes an instance of its own. Other divisors are not exact
    (on 30-GPU instances, replicas of 15, 10, 10, 6, 6, 6, 6 GPUs sum to 59 <= 60 yet do
    not fit two instances), so they are not planned.
    """
    sizes, g = [], 1
    while g <= gpus_per_instance:
        if gpus_per_instance % g == 0:
            sizes.append(g)
        g *= 2
    if sizes[-1] != gpus_per_instance:
        sizes.append(gpus_per_instance)
    return sizes


_SIZES: dict[int, tuple[int, ...]] = {}


def _replica_sizes(gpus_per_instance: int) -> tuple[int, ...]:
    """`replica_sizes`, remembered per instance size (asked once per service and offer)."""
    sizes = _SIZES.get(gpus_per_instance)
    if sizes is None:
        sizes = _SIZES[gpus_per_instance] = tuple(replica_sizes(gpus_per_instance))
    return sizes


def _a(n: int) -> str:
    """The article before a number read aloud: "an 8-GPU", "an 11-GPU", "a 6-GPU"."""
    return "an" if str(n).startswith("8") or n in (11, 18) else "a"


def _slo_miss(svc: ServiceDemand, ttft: float | None, tpot: float | None, latency: float | None) -> str:
    slo = svc.slo
    checks = (("TTFT", slo.ttft_ms, ttft), ("TPOT", slo.tpot_ms, tpot), ("latency", slo.latency_ms, latency))
    for label, bound, value in checks:
        if bound is None:
            continue
        if value is None:
            return f"the measured profile gives no {label} to check the {label} SLO against"
        if value > bound + 1e-9:
            return f"misses the {label} SLO: {value:g} ms > {bound:g} ms"
    return ""


def _slo_kind(reason: str) -> str:
    """"misses the TPOT SLO: ..." -> "tpot" (the kinds explanations group by)."""
    words = reason.split(" ")
    if reason.startswith("misses the") and len(words) > 2 and words[2].lower() in ("ttft", "tpot", "latency"):
        return words[2].lower()
    return ""


_HASHES: dict[int, tuple[object, int]] = {}  # id -> (object, hash): see _hash_once


def _hash_once(obj) -> int:
    """hash(obj), remembered per object: a query's model, GPU and calibration are frozen
    dataclasses whose hash walks every field, and thousands of queries share a few of them."""
    hit = _HASHES.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    if len(_HASHES) >= 4096:
        _HASHES.clear()
    h = hash(obj)
    _HASHES[id(obj)] = (obj, h)  # the reference keeps the id from being reused
    return h


_TRIPLES: dict[tuple[int, int, int], tuple] = {}  # ids -> (model, GPU, calibration, their hashes)


def _object_hashes(model, gpu, calibration) -> tuple[int, int, int]:
    """(_hash_once of each), remembered per triple: thousands of queries share a few."""
    ids = (id(model), id(gpu), id(calibration))
    hit = _TRIPLES.get(ids)
    if hit is not None and hit[0] is model and hit[1] is gpu and hit[2] is calibration:
        return hit[3]
    if len(_TRIPLES) >= 4096:
        _TRIPLES.clear()
    hashes = (_hash_once(model), _hash_once(gpu), _hash_once(calibration))
    _TRIPLES[ids] = (model, gpu, calibration, hashes)  # the references keep the ids from being reused
    return hashes


_new_query = maker(PerfQuery)  # PerfQuery(**fields), made faster
_new_object = object.__new__
_THROUGHPUT = attrgetter("throughput")


def _class_perf(ttft_ms, tpot_ms, latency_ms, batch, binding_limit, reason, throughput) -> ClassPerf:
    """ClassPerf(throughput, ...), made faster (one per estimate a configuration reads): every
    field given, in the order maker(ClassPerf) leaves them in (its defaults', then the rest)."""
    obj = _new_object(ClassPerf)
    obj.__dict__.update({"ttft_ms": ttft_ms, "tpot_ms": tpot_ms, "latency_ms": latency_ms, "batch": batch,
                         "binding_limit": binding_limit, "reason": reason, "throughput": throughput})
    return obj


_new_rejection = maker(Rejection)
# (templates: every field but the offer id, offer id, out): the objects of offers of one shape.
_configs_on = stamper_into(Config, "offer_id")
_rejections_on = stamper_into(Rejection, "offer_id")

_QUERY_OBJECTS = ("model", "gpu", "calibration")
_VALUE_FIELDS = tuple(f.name for f in fields(PerfQuery) if f.name not in _QUERY_OBJECTS)
_query_values = attrgetter(*_VALUE_FIELDS)
_INTERCONNECT_AT = _VALUE_FIELDS.index("interconnect")
_INTER_NODE_AT = _VALUE_FIELDS.index("inter_node_gbs")
_UNREAD = ("unread",)  # stands for a field the estimate does not read (no query value equals it)


class _QueryKey:
    """A PerfQuery as a dictionary key, hashed once (and cheaply). Equal queries have equal
    keys, and so do queries that differ only in links the estimate does not read
    (`solver.perf.links_read`): one estimate serves them all, the same bits."""

    __slots__ = ("query", "_parts", "_hash")

    def __init__(self, q: PerfQuery):
        self.query: PerfQuery | None = q  # until estimated (EstimateCache.get_many)
        values = _query_values(q)
        objects = _object_hashes(q.model, q.gpu, q.calibration)
        tp_link, stage_link = links_read(q)
        if not (tp_link and stage_link):
            values = list(values)
            if not tp_link:
                values[_INTERCONNECT_AT] = _UNREAD
            if not stage_link:
                values[_INTER_NODE_AT] = _UNREAD
            values = tuple(values)
        self._parts = (q.model, q.gpu, q.calibration, values)  # compared item by item, identity first
        self._hash = hash((*objects, values))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self._hash == other._hash and self._parts == other._parts


class EstimateCache(LockedLru):
    """PerfQuery -> PerfEstimate, shared by services, calls and threads; the least recently
    used entries go first when full. Misses are estimated together (`estimate_many`)."""

    CHUNK = 2048  # queries per batch: tens of ms each, so a cancel or deadline bites between them

    def __init__(self, max_entries: int = 200_000):  # _QueryKey -> PerfEstimate
        super().__init__(max_entries)

    def get_many(self, queries: Sequence[PerfQuery], stop: Stop = NEVER) -> list[PerfEstimate]:
        out: list[PerfEstimate | None] = [None] * len(queries)
        missing: dict[_QueryKey, list[int]] = {}
        data = self._data
        keys: dict[int, _QueryKey] = {}  # by id: builders hand the same query object for equal queries
        with self._lock:
            for i, q in enumerate(queries):
                key = keys.get(id(q))
                if key is None:
                    key = keys[id(q)] = _QueryKey(q)
                e = data.get(key)
                if e is None:
                    missing.setdefault(key, []).append(i)
                else:
                    data.move_to_end(key)
                    out[i] = e
            self.misses += len(missing)
            self.hits += len(queries) - len(missing)
        todo = list(missing)
        for start in range(0, len(todo), self.CHUNK):
            stop.check("candidate configurations")
            chunk = todo[start:start + self.CHUNK]
            made = estimate_many([key.query for key in chunk])
            with self._lock:
                for key, e in zip(chunk, made):
                    key.query = None  # estimated: its parts compare it, the query (~0.9 KB) may go
                    data[key] = e
                    data.move_to_end(key)
                while len(data) > self.max_entries:
                    data.popitem(last=False)
            for key, e in zip(chunk, made):
                for i in missing[key]:
                    out[i] = e
        return out



ESTIMATES = EstimateCache()


class _Key:
    """A cache key whose hash is computed once (tuples of dataclasses rehash every time)."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: tuple):
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self._hash == other._hash and self.value == other.value


class CandidateCache:
    """service performance key -> offer hardware key -> that pair's pruned configurations,
    rejections and dominated configurations. Two levels, so a service's (large) key is
    compared once per service, not once per offer. Bounded in (service, offer) entries:
    when full, the services cached first are dropped until half the room is free (dicts
    keep insertion order, so hits cost no bookkeeping). Thread-safe."""

    # Entries are ~1-2 KB each: 1,000 services x 67 offers fit.
    def __init__(self, max_entries: int = 100_000, max_rows: int = 1024):
        self.max_entries = max_entries
        self._services: dict[_Key, dict[_Key, tuple]] = {}
        self._size = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        # A service's whole row over one list of offers (see row()): its entries put together.
        self.max_rows = max_rows
        self._rows: OrderedDict[tuple, tuple] = OrderedDict()
        # The same rows by the offers' hardware keys (see hardware_row()).
        self._hardware_rows: OrderedDict[tuple, tuple] = OrderedDict()

    def row(self, key: tuple, catalog: Catalog, offers: Sequence[Offer]) -> tuple | None:
        """(configurations, rejections, dominated) of one service over exactly these catalog
        and offer objects, as put by put_row: the entries it was made of, put together
        (their values depend only on their keys). Held by weak references (nothing here
        keeps a catalog alive): a dead object's id reused by a new one fails the check."""
        found = self._rows.get(key)
        if found is None or found[0]() is not catalog or len(found[1]) != len(offers) \
                or not all(r() is o for r, o in zip(found[1], offers)):
            return None
        with self._lock:
            if key in self._rows:
                self._rows.move_to_end(key)
        return found[2]

    def put_row(self, key: tuple, catalog: Catalog, offers: Sequence[Offer], value: tuple,
                hardware_key: tuple | None = None) -> None:
        entry = (weakref.ref(catalog), tuple(weakref.ref(o) for o in offers), value)
        with self._lock:
            self._rows[key] = entry
            while len(self._rows) > self.max_rows:
                self._rows.popitem(last=False)
            if hardware_key is not None:
                self._hardware_rows[hardware_key] = value
                while len(self._hardware_rows) > self.max_rows:
                    self._hardware_rows.popitem(last=False)

    def hardware_row(self, key: tuple) -> tuple | None:
        """A row by (service key, service name, the offers' hardware keys in order): what
        its entries are keyed on, so it serves another catalog whose offers differ only in
        what no entry reads (prices, availability: a review scenario's price change)."""
        found = self._hardware_rows.get(key)
        if found is not None:
            with self._lock:
                if key in self._hardware_rows:
                    self._hardware_rows.move_to_end(key)
        return found

    def service(self, service_key: _Key) -> dict[_Key, tuple]:
        """The offers cached for one service key (a live dict: read it, `put` into it)."""
        found = self._services.get(service_key)
        if found is None:
            with self._lock:
                found = self._services.setdefault(service_key, {})
        return found

    def get(self, per_service: dict[_Key, tuple], offer_key: _Key):
        found = per_service.get(offer_key)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        return found

    def put(self, per_service: dict[_Key, tuple], offer_key: _Key, value: tuple) -> None:
        with self._lock:
            if self._size >= self.max_entries:
                for key in list(self._services):
                    if self._size < self.max_entries // 2:
                        break
                    if self._services[key] is not per_service:  # never the one being filled
                        self._size -= len(self._services.pop(key))
            if offer_key not in per_service:
                self._size += 1
            per_service[offer_key] = value

    def __len__(self) -> int:
        return self._size

    def clear(self) -> None:
        with self._lock:
            self._services.clear()
            self._rows.clear()
            self._hardware_rows.clear()
            self._size = 0
            self.hits = self.misses = 0


SHARED_CACHE = CandidateCache()


def _offer_hardware(offer: Offer, gpu: GpuType, usable_gib: float) -> tuple:
    """What of an offer decides performance (not its price, availability or provenance)."""
    return (offer.id, gpu, offer.gpus_per_instance, usable_gib, offer.interconnect, offer.inter_node_fabric,
            offer.inter_node_gbs)


_OFFER_KEYS: dict[tuple[int, int], tuple[weakref.ref, _Key]] = {}  # see _offer_key


def _offer_key(catalog: Catalog, offer: Offer) -> _Key:
    """The offer's hardware key, remembered per (offer, GPU type) object - what it is made
    of (the usable memory is the offer's, else its GPU type's), so catalogs that share
    them (a review scenario's catalog with some prices changed) share keys: making one
    hashes the GPU type's every field, ~70 offers a plan. The entry holds the offer by a
    weak reference (a catalog sent with each request is not kept alive by this; a dead
    offer's id reused by a new one fails the identity check) and the GPU type in its key."""
    gpu = catalog.gpus[offer.gpu]
    hit = _OFFER_KEYS.get((id(offer), id(gpu)))
    if hit is not None and hit[0]() is offer and hit[1].value[1] is gpu:
        return hit[1]
    if len(_OFFER_KEYS) >= 4096:
        _OFFER_KEYS.clear()
    key = _Key(_offer_hardware(offer, gpu, catalog.usable_memory_gib(offer)))
    _OFFER_KEYS[(id(offer), id(gpu))] = (weakref.ref(offer), key)
    return key


# Builds between checks for a cancel or deadline: each takes tens of microseconds, so a
# stop still bites within milliseconds, and the check's clock read is not paid per build.
_CHECK_EVERY = 64


def _picker(positions: list[int]):
    """A function: a sequence -> the tuple of its items at these positions, in this order."""
    if not positions:
        return lambda items: ()
    if len(positions) == 1:
        at = positions[0]
        return lambda items: (items[at],)
    return itemgetter(*positions)


class CandidateBuilder:
    def __init__(self, catalog: Catalog, offers: list[Offer] | tuple[Offer, ...], calibration: Calibration,
                 cache: CandidateCache | None = None, stop: Stop = NEVER):
        self.stop = stop
        self.catalog = catalog
        self.offers = offers
        self.calibration = calibration
        self.cache = cache
        self.rejections: list[Rejection] = []
        self.dominated: list[Config] = []  # pruned; kept for explanations (closest to an SLO)
        self._offer_keys: dict[int, _Key] = {}  # by position in self.offers
        # Queries made so far, by the identities of their service, model, GPU and calibration
        # and the values of the rest: offers of one GPU type share most of a service's queries
        # (a 1-GPU replica on 2-, 4- and 8-GPU instances), so each is made once. `_held`
        # keeps those objects alive, so that their ids are never reused meanwhile.
        self._queries: dict[tuple, PerfQuery] = {}
        self._held: list[tuple] = []
        self._shapes: dict[int, _Shape] = {}  # one for_services call's (see _OfferCandidates._shape)
        # One for_services call's: offers' layouts by position, hardware shapes' numbers and
        # services' numbers (see _OfferCandidates._shape).
        self._layouts: dict[int, _Layout] = {}
        self._hardware_shapes: dict[tuple, int] = {}
        self._slots: dict[int, int] = {}
        self._slotted: list[ServiceDemand] = []  # keeps the ids in _slots from being reused
        # By service number: the calibration and every field of a query of the service made
        # with it (see _OfferCandidates._query).
        self._query_fields: dict[int, tuple[Calibration, dict]] = {}
        self._hardware: tuple[_Key, ...] | None = None  # one for_services call's (see _hardware_keys)

    _plain = True  # build estimated-only services with _PlainBuild (tests compare it with _Build)

    def _slot(self, svc: ServiceDemand) -> int:
        """The service's number in this for_services call (its shapes' keys start there)."""
        slot = self._slots.get(id(svc))
        if slot is None:
            slot = self._slots[id(svc)] = len(self._slotted)
            self._slotted.append(svc)
        return slot

    def _offer_key_at(self, i: int) -> _Key:
        """The hardware key of self.offers[i] (kept by position: `offers` may be reassigned)."""
        key = self._offer_keys.get(i)
        offer = self.offers[i]
        if key is None or key.value[0] != offer.id:
            key = self._offer_keys[i] = _offer_key(self.catalog, offer)
        return key

    def _hardware_keys(self) -> tuple[_Key, ...]:
        """Every offer's hardware key, in order (a row's key; see CandidateCache.hardware_row);
        once per for_services call."""
        if self._hardware is None:
            self._hardware = tuple(self._offer_key_at(i) for i in range(len(self.offers)))
        return self._hardware

    def for_service(self, svc: ServiceDemand, prune: bool = True) -> list[Config]:
        """The service's configurations on every offer (pruned of those another of the same
        offer dominates, unless `prune` is False: the evaluator wants them all)."""
        return self.for_services([svc], prune)[0]

    def for_services(self, services: Sequence[ServiceDemand], prune: bool = True) -> list[list[Config]]:
        """`for_service` of each service, with the estimates of all of them made together.
        Rejections and dominated configurations are added in service, then offer, order."""
        # Per service: per offer, a cached tuple or a _Build, and the key of its row; or the
        # row itself, found whole in the cache.
        rows: list[tuple[ServiceDemand, list | None, tuple | None, tuple | None]] = []
        # One build per (service key, offer) missing from the cache: by service key, then by
        # the offer's position (offer keys are per offer: they start with its id).
        builds: dict[_Key, dict[int, _Build]] = {}
        fresh: list[_Build] = []
        offer_ids = tuple(map(id, self.offers)) if self.cache is not None and prune else ()
        # Shapes by the ids of this call's services (held by `rows`); a cancelled call may
        # leave some asked and never estimated, so each call starts afresh.
        self._shapes = {}
        self._layouts, self._hardware_shapes, self._slots, self._slotted = {}, {}, {}, []
        self._query_fields = {}
        self._hardware = None
        gpus = self.catalog.gpus
        hardware = [(gpus[o.gpu], self.catalog.usable_memory_gib(o)) for o in self.offers]  # once, not per service
        layouts = self._layouts
        for svc in services:
            self.stop.check("candidate configurations")  # (nothing below runs long: builds run later)
            service_key = cached = pending = row_key = None
            if self.cache is not None and prune:
                # Pruning inside one offer depends on max_replicas being set (see pruning.py).
                service_key = _Key((svc.performance_key(), svc.max_replicas is None, self.calibration))
                # A repeated call, or one that changes only demand or prices, has the same
                # offers: the service's whole row at once (~70 lookups less).
                row_key = (service_key, svc.name, id(self.catalog), offer_ids)
                whole = self.cache.row(row_key, self.catalog, self.offers)
                if whole is None:
                    # Other catalog or offer objects with the same hardware (a review scenario
                    # that changes prices): the same entries, so the same row.
                    whole = self.cache.hardware_row((service_key, svc.name, self._hardware_keys()))
                    if whole is not None:
                        self.cache.put_row(row_key, self.catalog, self.offers, whole)
                if whole is not None:
                    rows.append((svc, None, None, whole))
                    continue
                cached = self.cache.service(service_key)
                pending = builds.setdefault(service_key, {})
            mine: list = []
            # Estimated only (no profiles, no percentile SLO's caps): built without a generator.
            kind = _PlainBuild if svc.model is not None and not svc.profiles \
                and (svc.slo.percentile is None or not svc.slo.bounds()) and self._plain else _Build
            base = self._slot(svc) * _SLOT
            # Measured only: the GPU types its profiles name (an offer of another one gets a
            # single rejection, as _OfferCandidates._measured makes it).
            profiled = {p.gpu for p in svc.profiles} if svc.model is None and svc.profiles and self._plain \
                else None
            offer_keys = self._hardware_keys() if cached is not None else None  # _offer_key_at of each
            hits = misses = 0
            for i, offer in enumerate(self.offers):
                found = offer_key = None
                if cached is not None:
                    offer_key = offer_keys[i]
                    found = pending.get(i)
                    if found is None:  # CandidateCache.get, counted below
                        found = cached.get(offer_key)
                        if found is None:
                            misses += 1
                        else:
                            hits += 1
                if found is None:
                    layout = layouts.get(i)
                    if layout is None:
                        layout = layouts[i] = _Layout(offer, *hardware[i], self._hardware_shapes)
                    if profiled is not None and offer.gpu not in profiled:
                        found = _Unprofiled(svc, offer, service_key, offer_key)
                    else:
                        found = kind(_OfferCandidates(self, svc, offer, *hardware[i], base=base, layout=layout),
                                     service_key, offer_key)
                    fresh.append(found)
                    if cached is not None:
                        pending[i] = found
                mine.append(found)
            if hits or misses:
                self.cache.hits += hits
                self.cache.misses += misses
            rows.append((svc, mine, row_key, None))
        self._run(fresh)
        pruned = _Pruning([], [], 0, 0)  # this call's, from no shapes on (see _pruned)
        for i, b in enumerate(fresh):
            if not i % _CHECK_EVERY:
                self.stop.check("candidate configurations")
            kept, dominated = self._pruned(b, pruned) if prune else (b.configs, ())
            b.found = (kept, b.rejections, dominated)
            if b.service_key is not None:
                self.cache.put(self.cache.service(b.service_key), b.offer_key, b.found)
        out: list[list[Config]] = []
        for svc, mine, row_key, whole in rows:
            if whole is not None:
                configs, rejections, dominated_all = whole
                out.append(list(configs))
                self.rejections.extend(rejections)
                self.dominated.extend(dominated_all)
                continue
            configs: list[Config] = []
            rejections: list[Rejection] = []
            dominated_all: list[Config] = []
            for found in mine:
                mine_, rejected, dominated = found.found if isinstance(found, _Build) else found
                if mine_ and mine_[0].service != svc.name:  # built for another service with the same performance key
                    mine_ = tuple(replace(c, service=svc.name) for c in mine_)
                if rejected and rejected[0].service != svc.name:
                    rejected = tuple(replace(r, service=svc.name) for r in rejected)
                if dominated and dominated[0].service != svc.name:
                    dominated = tuple(replace(c, service=svc.name) for c in dominated)
                configs.extend(mine_)
                rejections.extend(rejected)
                dominated_all.extend(dominated)
            if row_key is not None:
                self.cache.put_row(row_key, self.catalog, self.offers,
                                   (tuple(configs), tuple(rejections), tuple(dominated_all)),
                                   (row_key[0], svc.name, self._hardware_keys()))
            out.append(configs)
            self.rejections.extend(rejections)
            self.dominated.extend(dominated_all)
        self._shapes = {}
        return out

    @staticmethod
    def _pruned(b: _Build, done: _Pruning) -> tuple[tuple[Config, ...], tuple[Config, ...]]:
        """(kept, dominated) of one build's configurations (`prune_configs`). Builds whose
        configurations all come from the same list of shapes differ only in their offer,
        which pruning (within one offer) never reads: their positions are pruned once, from
        the shapes' configurations (see _Pruning), list by list."""
        configs = b.configs
        if len(configs) < 2:
            return configs, ()
        signature = b.offer.signature
        if signature is not None:
            if b.offer.svc.max_replicas is not None:
                return configs, ()  # prune_configs keeps every one, in order
            at = done.of(signature)
            if at is not None and at.n == len(configs):
                pickers = at.pickers()
                return pickers[0](configs), pickers[1](configs)
        position = {id(c): i for i, c in enumerate(configs)}  # prune_configs keeps the objects it is given
        kept_at = [position[id(c)] for c in prune_configs(list(configs), b.offer.svc)]  # in its order
        kept = set(kept_at)
        return _picker(kept_at)(configs), tuple(c for i, c in enumerate(configs) if i not in kept)

    def _run(self, builds: list[_Build]) -> None:
        """Drive the builds together: each round, every build that waits for estimates gets
        them from one bulk request (a few rounds: single instances, then 2-, then 4-instance
        replicas where a model fits no single instance)."""
        waiting: list[_Build] = []
        for i, b in enumerate(builds):
            if not i % _CHECK_EVERY:
                self.stop.check("candidate configurations")
            b.advance(None, waiting)
        idle = 0  # rounds in a row that asked nothing: builds waiting on shapes others asked for
        while waiting:
            queries = [q for b in waiting for q in b.asked]
            idle = 0 if queries else idle + 1
            if idle > 1:  # every shape's asker resumes in the round after it asked: never twice
                raise RuntimeError("candidate builds wait on shapes nobody asked for")
            estimates = ESTIMATES.get_many(queries, self.stop)
            now, waiting, at = waiting, [], 0
            for i, b in enumerate(now):
                if not i % _CHECK_EVERY:
                    self.stop.check("candidate configurations")
                n = len(b.asked)
                b.advance(estimates[at:at + n], waiting)
                at += n


class _Pruning:
    """`prune_configs` of one offer's configurations that come from a list of shapes (in
    that order: every shape's configurations use more GPUs than the earlier shapes'), as
    positions: the kept ones in prune_configs' order, and the survivors it compares the
    next ones with. prune_configs sorts by GPUs first, so the configurations of a list's
    last shape come after all the others and cannot change which of those survive: a
    list's answer is its list without the last shape's, extended by that shape's. Offers of
    one GPU type share their first shapes (1, 2, 4 GPUs...): each shape is pruned once
    (the answers form a tree: a list's answer holds those of the lists one shape longer).
    Within one shape every configuration has the same GPUs and instances, and their keys
    differ only in their precision, so the sort is by (-total throughput, precision)."""

    __slots__ = ("kept_at", "survivors", "n", "top", "_pickers", "_longer")

    def __init__(self, kept_at: list[int], survivors: list[tuple], n: int, top: int):
        self.kept_at = kept_at  # positions of the kept configurations, in prune_configs' order
        self.survivors = survivors  # theirs: (throughputs, GPUs per replica, instances per replica)
        self.n = n  # configurations in all
        self.top = top  # the most GPUs per replica of any shape so far
        self._pickers = None
        self._longer: dict[_Shape, _Pruning | None] = {}  # by the shape that lengthens the list

    def of(self, signature: list[_Shape]) -> _Pruning | None:
        """The answer for this list lengthened by `signature` (remembered, its shorter lists'
        too); None where a shape does not use more GPUs than the earlier ones (never, as
        builds list them: then prune_configs itself answers)."""
        at = self
        for shape in signature:
            longer = at._longer
            found = longer.get(shape, False)
            if found is False:
                found = longer[shape] = at.extended(shape)
            if found is None:
                return None
            at = found
        return at

    def extended(self, shape: _Shape) -> _Pruning | None:
        gpus = shape.g * shape.span
        if gpus <= self.top:
            return None
        rows = shape.rows
        if not rows:
            return _Pruning(self.kept_at, self.survivors, self.n, gpus)
        kept_at, survivors, n = list(self.kept_at), list(self.survivors), self.n
        order = sorted(range(len(rows)), key=lambda j: rows[j][:2]) if len(rows) > 1 else (0,)
        for j in order:
            thr, span = rows[j][2], rows[j][3]
            for theirs, g, their_span in survivors:  # pruning._dominates(survivor, this one)
                if gpus % g or (their_span != 1 and their_span != span):
                    continue
                k = gpus // g
                if all(a * k >= b - 1e-12 for a, b in zip(theirs, thr)):
                    break
            else:
                survivors.append((thr, gpus, span))
                kept_at.append(n + j)
        return _Pruning(kept_at, survivors, n + len(rows), gpus)

    def pickers(self) -> tuple:
        """(configurations -> the kept ones, in prune_configs' order; -> the others, in order)"""
        if self._pickers is None:
            kept = set(self.kept_at)
            self._pickers = (_picker(self.kept_at), _picker([i for i in range(self.n) if i not in kept]))
        return self._pickers



class _Build:
    """One (service, offer) pair's configurations being built (see _OfferCandidates.build)."""

    __slots__ = ("offer", "service_key", "offer_key", "steps", "asked", "configs", "rejections", "found")

    def __init__(self, offer: _OfferCandidates, service_key: _Key | None, offer_key: _Key | None):
        self.offer = offer
        self.service_key = service_key
        self.offer_key = offer_key
        self.steps: Generator | None = None
        self.asked: list[PerfQuery] = []
        self.configs: tuple[Config, ...] = ()
        self.rejections: tuple[Rejection, ...] = ()
        self.found: tuple | None = None  # (kept, rejected, dominated) once built

    def advance(self, estimates: list[PerfEstimate] | None, waiting: list[_Build]) -> None:
        """Send the estimates asked for; the build asks for more (and waits) or finishes."""
        if self.steps is None:
            self.steps = self.offer.build()
        try:
            self.asked = self.steps.send(estimates)
            waiting.append(self)
        except StopIteration as done:
            self.configs, self.rejections = done.value
            self.asked = []


class _Unprofiled(_Build):
    """A _Build of a measured-only service (no LLM model) on an offer of a GPU type none of
    its profiles names: done from the start, with the one rejection _OfferCandidates.build
    makes for it (_measured's for 1 GPU; no other size, no profile of that GPU, nothing to
    cap)."""

    __slots__ = ()

    def __init__(self, svc: ServiceDemand, offer: Offer, service_key: _Key | None, offer_key: _Key | None):
        super().__init__(None, service_key, offer_key)
        self.rejections = (_new_rejection(
            service=svc.name, offer_id=offer.id, gpu=offer.gpu, gpus_per_replica=1, precision=None, kind="no_profile",
            reason=f"no measured profile for {offer.gpu} and the service has no LLM model to estimate from"),)

    def advance(self, estimates: list[PerfEstimate] | None, waiting: list[_Build]) -> None:
        self.asked = []


class _PlainBuild(_Build):
    """A _Build of a service that is estimated only (an LLM model, no measured profiles, no
    percentile SLO to cap for): _OfferCandidates.build's steps for it, in the same order and
    rounds, as a state machine rather than a generator (thousands of builds a plan: no
    generator, no dictionary of shapes, no calls that find nothing to do)."""

    __slots__ = ("_step", "_shapes", "_mine", "_plans", "_configs")

    def advance(self, estimates: list[PerfEstimate] | None, waiting: list[_Build]) -> None:
        oc = self.offer
        if estimates is None:  # first: the shapes of single-instance replicas, every size
            layout, base, shapes_of, model = oc._layout, oc._base, oc.b._shapes, oc.svc.model
            shapes, mine, plans, queries = [], [], [], []
            new, asked = _Shape.NEW, _Shape.ASKED
            for g, number in zip(layout.sizes, layout.single):
                shape = shapes_of.get(base + number)
                if shape is None:
                    shape = shapes_of[base + number] = _Shape(oc._plan(model, g, 1), g, 1)
                if shape.state == new:  # as _ask: the new shapes' queries, in order
                    shape.state = asked
                    mine.append(shape)
                    for p in shape.plans:
                        plans.append(p)
                        queries.extend(p.queries)
                shapes.append(shape)
            oc.signature = []
            self._configs = []
            self._step = 1
            self._shapes, self._mine, self._plans, self.asked = shapes, mine, plans, queries
            if mine or any(s.state != _Shape.DONE for s in shapes):
                waiting.append(self)
                return
        elif self._got(estimates, waiting):
            return
        if self._step == 1:
            oc._stamp_all(self._shapes, self._configs)
            if not oc.offer.inter_node_fabric or not oc._spans():
                return self._done()
            self._step = 2
            if self._ask([oc._shape(oc.svc.model, oc.offer.gpus_per_instance, 2)], waiting):
                return
        if self._step == 2:  # replicas across 2 instances: the model fits no single one
            found = oc._stamped(oc.offer.gpus_per_instance, 2, self._shapes[0])
            if found:
                self._configs.extend(found)
                return self._done()
            self._step = 3
            if self._ask([oc._shape(oc.svc.model, oc.offer.gpus_per_instance, 4)], waiting):
                return
        self._configs.extend(oc._stamped(oc.offer.gpus_per_instance, 4, self._shapes[0]))
        self._done()

    def _ask(self, shapes: list[_Shape], waiting: list[_Build]) -> bool:
        """_OfferCandidates._estimate's start: ask for the new shapes' queries; whether to
        wait (for them, or for shapes another build asked for)."""
        self._shapes = shapes
        mine = [s for s in shapes if s.state == _Shape.NEW]
        for s in mine:
            s.state = _Shape.ASKED
        self._mine = mine
        self._plans = plans = [p for s in mine for p in s.plans]
        self.asked = queries = [q for p in plans for q in p.queries]
        if queries or any(s.state != _Shape.DONE for s in shapes):
            waiting.append(self)
            return True
        return False

    def _got(self, estimates: list[PerfEstimate], waiting: list[_Build]) -> bool:
        """_OfferCandidates._estimate's round: the outcomes of the shapes this build asked
        for; whether to wait another round (for shapes another build asked for)."""
        at = 0
        for p in self._plans:
            p.estimates = estimates[at:at + len(p.queries)]
            at += len(p.queries)
        oc = self.offer
        for s in self._mine:
            s.finish([oc._outcome(p, s.g, s.span) for p in s.plans])
        self._mine, self._plans, self.asked = [], [], []
        if any(s.state != _Shape.DONE for s in self._shapes):
            waiting.append(self)
            return True
        return False

    def _done(self) -> None:
        self.configs, self.rejections = tuple(self._configs), tuple(self.offer.rejections)
        self.asked = []


class _Plan:
    """One precision of one replica size: why it cannot be estimated, or its queries and
    (once made) their estimates."""

    __slots__ = ("precision", "why", "queries", "estimates")

    def __init__(self, precision: str, why: tuple[str, str] | None, queries: list[PerfQuery]):
        self.precision = precision
        self.why = why
        self.queries = queries
        self.estimates: list[PerfEstimate] = []


class _Shape:
    """One service's estimated configurations of one replica shape (GPUs per replica x
    instances it spans) on one GPU type with its usable memory and the links its estimates
    read: per precision, a rejection (kind, reason) or a configuration's (classes, memory,
    error band), with no offer in them. Every offer with that hardware shares one: the
    8-GPU instance's 1-GPU replicas are the 1-GPU instance's. Offers stamp their own
    configurations and rejections from it (`_OfferCandidates._stamped`)."""

    __slots__ = ("plans", "g", "span", "state", "_rows", "configs", "rejections")
    NEW, ASKED, DONE = 0, 1, 2

    def __init__(self, plans: list[_Plan], g: int, span: int):
        self.plans = plans
        self.g, self.span = g, span
        self.state = _Shape.NEW
        self._rows = None
        # Per plan (precision, in order), a configuration's or a rejection's fields but the offer id.
        self.configs: list[dict] = []
        self.rejections: list[dict] = []

    def finish(self, items: list[tuple[bool, dict]]) -> None:
        """Its items, from its plans' estimates - per plan, (whether a configuration, its
        fields but the offer id): the shape is done."""
        self.configs = [t for is_config, t in items if is_config]
        self.rejections = [t for is_config, t in items if not is_config]
        self.state = _Shape.DONE
        # Read only while new or asked: the queries (~0.7 KB each) go now, not with the
        # builder (52 of a 1,000-service build's 437 MB peak).
        self.plans = ()

    @property
    def rows(self) -> list[tuple]:
        """What pruning reads of each configuration (see _Pruning), in order: (-total
        throughput, precision as its key ends, throughputs, instances per replica)."""
        if self._rows is None:
            rows = []
            for t in self.configs:
                thr = tuple(map(_THROUGHPUT, t["classes"]))
                rows.append((-sum(thr), t["precision"] or "measured", thr, t["instances_per_replica"]))
            self._rows = rows
        return self._rows


_SLOT = 1 << 24  # a shape's key: its service's number x _SLOT + its hardware shape's number


class _Layout:
    """One offer's replica sizes and, per (GPUs per replica, instances spanned), the number of
    its hardware shape in one for_services call: equal numbers for offers whose estimates of
    that shape read the same hardware (see _OfferCandidates._shape). Made once per offer and
    call, so that each service's shapes are found by a number, not a tuple made per service."""

    __slots__ = ("offer", "gpu", "usable_gib", "sizes", "single", "_numbers", "_shapes")

    def __init__(self, offer: Offer, gpu: GpuType, usable_gib: float, numbers: dict[tuple, int]):
        self.offer, self.gpu, self.usable_gib = offer, gpu, usable_gib
        self._numbers = numbers  # the call's: hardware shape -> its number
        self._shapes: dict[tuple[int, int], int] = {}
        self.sizes = _replica_sizes(offer.gpus_per_instance)
        self.single = tuple(self.number(g, 1) for g in self.sizes)  # one instance per replica, per size

    def number(self, g: int, span: int) -> int:
        found = self._shapes.get((g, span))
        if found is None:
            offer = self.offer
            hardware = (id(self.gpu), offer.gpu, self.usable_gib, g, span, offer.interconnect if g > 1 else None,
                        offer.inter_node_gbs if span > 1 else None)
            numbers = self._numbers
            found = numbers.get(hardware)
            if found is None:
                found = numbers[hardware] = len(numbers)
            self._shapes[(g, span)] = found
        return found


class _OfferCandidates:
    """The configurations (and rejections) of one service on one offer."""

    def __init__(self, builder: CandidateBuilder, svc: ServiceDemand, offer: Offer, gpu: GpuType,
                 usable_gib: float | None = None, base: int | None = None, layout: _Layout | None = None):
        self.b = builder
        self.svc = svc
        self.offer = offer
        self.gpu = gpu
        self.usable_gib = builder.catalog.usable_memory_gib(offer) if usable_gib is None else usable_gib
        self.rejections: list[Rejection] = []
        self.signature: list[_Shape] | None = None  # see build
        # Where this service's shapes start among the builder's, and the offer's hardware shapes.
        self._base = builder._slot(svc) * _SLOT if base is None else base
        self._layout = _Layout(offer, gpu, self.usable_gib, builder._hardware_shapes) if layout is None else layout
        self._query_key: tuple | None = None  # see _query

    def build(self) -> Generator[list[PerfQuery], list[PerfEstimate], tuple[tuple[Config, ...], tuple[Rejection, ...]]]:
        """A generator: yields the performance queries it needs, is sent their estimates (a
        list in the same order), and returns (configurations, rejections)."""
        offer, model = self.offer, self.svc.model
        configs: list[Config] = []
        sizes = _replica_sizes(offer.gpus_per_instance)
        shapes = {g: self._shape(model, g, 1) for g in sizes if model is not None and not self._has_profile(g)}
        yield from self._estimate(shapes.values())
        measured = bool(self.svc.profiles) or model is None  # else _measured finds nothing (and says nothing)
        # Configurations from shapes alone: then which shapes decides them up to the offer,
        # and their pruning is done once per list of shapes (see CandidateBuilder._pruned).
        self.signature = None if measured else []
        for g in sizes:
            if measured:
                configs.extend(self._measured(g))
            if g in shapes:
                configs.extend(self._stamped(g, 1, shapes[g]))
        if model is not None and offer.inter_node_fabric:
            configs.extend((yield from self._spanning(model)))
        self._unplannable_profiles(sizes)
        capped = cap_under_load(self, configs)  # percentile SLOs: the usable rate under load
        if capped is not configs:
            self.signature = None  # capped per offer (its own queries): not shared
        return tuple(capped), tuple(self.rejections)

    def _unplannable_profiles(self, sizes: Sequence[int]) -> None:
        """Profiles of this offer's GPU whose replica size this offer cannot host exactly:
        said so (never dropped silently)."""
        if not self.svc.profiles:
            return
        offer = self.offer
        odd = sorted({p.gpus_per_replica for p in self.svc.profiles if p.gpu == offer.gpu
                      and p.offer in (None, offer.id) and p.gpus_per_replica not in sizes})
        for g in odd:
            precision = next(p.precision for p in self.svc.profiles if p.gpus_per_replica == g and p.gpu == offer.gpu)
            if g > offer.gpus_per_instance:
                why = f"{_a(g)} {g}-GPU replica does not fit {_a(offer.gpus_per_instance)} {offer.gpus_per_instance}-GPU instance"
            else:
                why = (f"{g}-GPU replicas do not pack exactly on {offer.gpus_per_instance}-GPU instances: only powers "
                       f"of two that divide the instance ({', '.join(map(str, sizes[:-1] or sizes))}) or the whole "
                       f"instance ({offer.gpus_per_instance}) are planned")
            self._reject(g, precision, "profile_size",
                         f"{why}. To fix: measure with {' or '.join(map(str, sizes))} GPUs per replica, or use "
                         f"offers with {g} GPUs per instance")

    def _has_profile(self, g: int) -> bool:
        return bool(self.svc.profiles) and any(self._profile_matches(p, g) for p in self.svc.profiles)

    def _profile_matches(self, p: Profile, g: int) -> bool:
        return p.gpu == self.offer.gpu and p.gpus_per_replica == g and p.offer in (None, self.offer.id)

    def _measured(self, g: int) -> list[Config]:
        svc, offer = self.svc, self.offer
        if not svc.profiles and svc.model is not None:
            return []  # nothing measured, and no rejection to record (an LLM service is estimated)
        out = []
        profiles = [p for p in svc.profiles if self._profile_matches(p, g)]
        for precision in sorted({p.precision for p in profiles}, key=lambda x: x or ""):
            perfs = []
            for cname in svc.class_names:
                match = [p for p in profiles if p.precision == precision and p.request_class in (cname, None)]
                match.sort(key=lambda p: p.request_class is None)  # class-specific first
                if not match:
                    perfs.append(ClassPerf(0.0, reason="no measured profile for this request class"))
                    continue
                p = match[0]
                miss = _slo_miss(svc, p.ttft_ms, p.tpot_ms, p.latency_ms)
                perfs.append(ClassPerf(0.0 if miss else p.rate, p.ttft_ms, p.tpot_ms, p.latency_ms, reason=miss,
                                       binding_limit="measured"))
            mem = max((p.memory_gib_per_gpu or 0 for p in profiles), default=0) or None
            if mem is not None and mem > self.usable_gib + 1e-9:
                self._reject(g, precision, "vram", f"measured {mem:g} GiB per GPU exceeds the {self.usable_gib:g} GiB of {offer.gpu}")
                continue
            if all(c.throughput <= 0 for c in perfs):
                reason = next((c.reason for c in perfs if c.reason), "no usable measurement")
                self._reject(g, precision, _slo_kind(reason) or "no_profile", reason)
                continue
            out.append(Config(svc.name, offer.id, g, precision, "measured", tuple(perfs), mem))
        if not profiles and svc.model is None and g == 1 and not any(
                p.gpu == offer.gpu and p.offer in (None, offer.id) for p in svc.profiles):
            self._reject(g, None, "no_profile",
                         f"no measured profile for {offer.gpu} and the service has no LLM model to estimate from")
        return out

    def _plan(self, model: ModelArch, g: int, span: int) -> list[_Plan]:
        """Per precision: why the model cannot be estimated on this replica, or the queries
        (one per request class) to estimate."""
        svc, gpu = self.svc, self.gpu
        plans = []
        for precision in svc.precisions:
            why = None
            if not gpu.supports(precision):
                why = ("precision", f"{gpu.name} does not support {precision}")
            elif not gpu.llm_estimates:
                why = ("unsupported", f"{gpu.name} has no calibrated LLM estimate; add a measured profile")
            elif model.attention_heads % g:
                why = ("unsupported", f"{g}-way tensor parallelism does not divide {model.attention_heads} attention heads")
            queries = [] if why else [self._query(model, g * span, span, precision, t.prompt_tokens, t.output_tokens)
                                      for t in svc.class_tokens]
            plans.append(_Plan(precision, why, queries))
        return plans

    def _shape(self, model: ModelArch, g: int, span: int) -> _Shape:
        """The service's shape of g GPUs x span instances on this offer's hardware: made
        once per builder call for every offer that shares it. An estimate reads the
        interconnect only with tensor parallelism (g > 1) and the inter-node bandwidth only
        across instances (span > 1; see `solver.perf.links_read`), so only then do they part
        offers; the GPU type, its name and the usable memory always do."""
        key = self._base + self._layout.number(g, span)
        shapes = self.b._shapes
        found = shapes.get(key)
        if found is None:
            found = shapes[key] = _Shape(self._plan(model, g, span), g, span)
        return found

    def _estimate(self, shapes) -> Generator[list[PerfQuery], list[PerfEstimate], None]:
        """Ask for the queries of the shapes nobody has asked for yet, all at once; wait
        (yield nothing new) for those another build asked for, which that build finishes
        in the same round, before this one resumes (builds resume in the order they asked)."""
        mine = [s for s in shapes if s.state == _Shape.NEW]
        for s in mine:
            s.state = _Shape.ASKED
        plans = [p for s in mine for p in s.plans]
        queries = [q for p in plans for q in p.queries]
        while queries or any(s.state != _Shape.DONE for s in shapes):
            estimates = yield queries
            at = 0
            for p in plans:
                p.estimates = estimates[at:at + len(p.queries)]
                at += len(p.queries)
            for s in mine:
                s.finish([self._outcome(p, s.g, s.span) for p in s.plans])
            mine, plans, queries = [], [], []

    def _outcome(self, plan: _Plan, g: int, span: int) -> tuple[bool, dict]:
        """One precision's rejection or configuration, from its estimates (one per request
        class, in class order): (whether a configuration, every field but the offer id) -
        what every offer of the shape stamps."""
        svc = self.svc
        precision = plan.precision

        def rejected(kind: str, reason: str) -> tuple[bool, dict]:
            return False, {"service": svc.name, "gpu": self.offer.gpu, "gpus_per_replica": g * span,
                           "precision": precision, "kind": kind, "reason": reason}

        if plan.why is not None:
            return rejected(*plan.why)
        perfs: list[ClassPerf] = []
        mem, band = None, 0.0
        for e in plan.estimates:
            if not e.feasible and e.reason_kind in ("vram", "unsupported"):
                return rejected(e.reason_kind, e.reason)
            band = e.error_band
            if not e.feasible:
                perfs.append(_class_perf(e.ttft_ms, e.tpot_ms, e.latency_ms, e.batch, e.binding_limit, e.reason, 0.0))
                continue
            mem = max(mem or 0.0, e.memory_gib_per_gpu)
            if svc.size_with_error_band:
                # Size for the pessimistic end of the bands (of the estimate's regimes):
                # slower tokens, fewer requests - as the model checked the SLOs.
                ttft_hi = e.ttft_ms * (1 + e.ttft_error_band)
                latency_hi = ttft_hi + (e.latency_ms - e.ttft_ms) * (1 + e.tpot_error_band)
                perfs.append(_class_perf(ttft_hi, e.tpot_ms * (1 + e.tpot_error_band), latency_hi, e.batch,
                                         e.binding_limit, "", e.requests_per_s / (1 + e.error_band)))
            else:
                perfs.append(_class_perf(e.ttft_ms, e.tpot_ms, e.latency_ms, e.batch, e.binding_limit, "",
                                         e.requests_per_s))
        if all(c.throughput <= 0 for c in perfs):
            first = next(c for c in perfs if c.reason)
            return rejected(_slo_kind(first.reason) or "latency", first.reason)
        return True, {"service": svc.name, "gpus_per_replica": g * span, "precision": precision, "source": "estimate",
                      "classes": tuple(perfs), "memory_gib_per_gpu": mem, "error_band": band,
                      "instances_per_replica": span, "pending_cap": None}

    def _stamped(self, g: int, span: int, shape: _Shape) -> list[Config]:
        """This offer's configurations of the shape; its rejections recorded (in precision order)."""
        out: list[Config] = []
        self._stamp_all([shape], out)
        return out

    def _stamp_all(self, shapes: list[_Shape], configs: list[Config]) -> None:
        """_stamped of each shape in turn, its configurations added to `configs`."""
        offer_id = self.offer.id
        if self.signature is not None:
            self.signature.extend(shapes)
        for shape in shapes:
            if shape.rejections:
                _rejections_on(shape.rejections, offer_id, self.rejections)
            _configs_on(shape.configs, offer_id, configs)

    def _spanning(self, model: ModelArch) -> Generator[list[PerfQuery], list[PerfEstimate], list[Config]]:
        """Replicas across 2 or 4 instances, only where the model fits no single instance."""
        if not self._spans():
            return []
        whole = self.offer.gpus_per_instance
        out: list[Config] = []
        for span in (2, 4):
            shape = self._shape(model, whole, span)
            yield from self._estimate([shape])
            found = self._stamped(whole, span, shape)
            out.extend(found)
            if found:
                break
        return out

    def _spans(self) -> bool:
        """Whether replicas across instances are planned: the whole-instance replica was
        rejected, for memory only."""
        whole = self.offer.gpus_per_instance
        single = [r for r in self.rejections if r.gpus_per_replica == whole]
        return bool(single) and all(r.kind == "vram" for r in single)

    def _query(self, model, gpus, span, precision, prompt, output) -> PerfQuery:
        if self._query_key is None:
            # What the memo key takes from the service and offer (see CandidateBuilder._queries).
            self._query_key = (id(self.svc), id(self.gpu), id(self.b.calibration), self.offer.interconnect,
                               self.usable_gib, self.offer.inter_node_gbs)
        key = (self._query_key, id(model), gpus, span, precision, prompt, output)
        made = self.b._queries.get(key)
        if made is not None:
            return made
        svc, slo, cal = self.svc, self.svc.slo, self.b.calibration
        b = self.b
        b._held.append((svc, model, self.gpu, cal))
        like = b._query_fields.get(self._base)
        if like is not None and like[0] is cal:
            # The service's other queries' fields, then what this one's own are (in place:
            # the same __dict__, in the same order, as _new_query makes).
            made = _new_object(PerfQuery)
            d = made.__dict__
            d.update(like[1])
            d["model"] = model
            d["gpu"] = self.gpu
            d["gpus_per_replica"] = gpus
            d["interconnect"] = self.offer.interconnect
            d["usable_memory_gib"] = self.usable_gib
            d["precision"] = precision
            d["prompt_tokens"] = prompt
            d["output_tokens"] = output
            d["instances_per_replica"] = span
            d["inter_node_gbs"] = self.offer.inter_node_gbs
            b._queries[key] = made
            return made
        # size_with_error_band: the model checks the SLOs against the pessimistic end of the
        # band of each estimate's regime (memory- or compute-bound).
        made = b._queries[key] = _new_query(
            model=model, gpu=self.gpu, gpus_per_replica=gpus, interconnect=self.offer.interconnect,
            usable_memory_gib=self.usable_gib, precision=precision, engine=svc.engine,
            prompt_tokens=prompt, output_tokens=output,
            ttft_slo_ms=slo.ttft_ms, tpot_slo_ms=slo.tpot_ms, latency_slo_ms=slo.latency_ms,
            instances_per_replica=span, inter_node_gbs=self.offer.inter_node_gbs, calibration=cal,
            kv_precision=svc.kv_cache_dtype, max_batch=svc.max_batch, kv_cache_memory_fraction=svc.kv_cache_memory_fraction,
            size_with_error_band=svc.size_with_error_band, max_num_batched_tokens=svc.max_num_batched_tokens,
            scheduler=svc.scheduler, kv_admission=svc.kv_admission, multi_step=svc.multi_step,
        )
        b._query_fields[self._base] = (cal, dict(made.__dict__))
        return made

    def _reject(self, g, precision, kind, reason):
        self.rejections.append(_new_rejection(service=self.svc.name, offer_id=self.offer.id, gpu=self.offer.gpu,
                                              gpus_per_replica=g, precision=precision, kind=kind, reason=reason))


class PrunedOffers(LockedLru):
    """prune_offers' answers by their exact input: the same catalog and offer objects (by
    identity: catalogs and offers are frozen, and each process's default catalog is loaded
    once), limits, kept offers, tiers and location rule. Comparing ~70 offers pairwise
    within their groups costs ~0.4 ms a plan; a repeated call, or one that changes only
    demand, has the same offers. The least recently used go first. Thread-safe."""

    def __init__(self, max_entries: int = 16):  # its answers hold offers: a few catalogs' worth at most
        super().__init__(max_entries)

    def prune(self, offers: list[Offer], limits: dict[str, int], catalog: Catalog, keep: set[str],
              tiers: tuple[str, ...] | None, by_location: bool) -> tuple[list[Offer], list[tuple[str, str]]]:
        key = (id(catalog), tuple(map(id, offers)), tuple(sorted(limits.items())), frozenset(keep), tiers,
               by_location)
        with self._lock:
            found = self._data.get(key)
            # The entry holds the offers it was made for (their ids are not reused while it
            # lives) and a weak reference to the catalog (not kept alive by this).
            if found is not None and found[0]() is catalog and all(a is b for a, b in zip(found[1], offers)):
                self._data.move_to_end(key)
                self.hits += 1
                return list(found[2]), list(found[3])
            self.misses += 1
        kept, dropped = prune_offers(offers, limits, catalog, keep=keep, tiers=tiers, by_location=by_location)
        with self._lock:
            self._store(key, (weakref.ref(catalog), tuple(offers), tuple(kept), tuple(dropped)))
        return kept, dropped



PRUNED_OFFERS = PrunedOffers()


class WholeInstancePruning(LockedLru):
    """prune_whole_instance_configs' answers by their exact input: the same configuration
    objects in the same order (the candidate cache hands the same ones to every plan whose
    candidates are unchanged), the same offer objects behind them (prices: an offer whose
    price changed is another object), limits, GPU types under quota, tiers, location rule
    and kept offers. A review scenario that changes demand, a quota's size or another GPU
    type's price prunes each service as the last one did (~0.1 ms a service). Each entry
    holds its configurations and offers, so their ids are not reused while it lives.
    Thread-safe."""

    def __init__(self, max_entries: int = 2048):
        super().__init__(max_entries)

    def prune(self, configs: list[Config], offers: dict[str, Offer], limits: dict[str, int],
              gpu_quotas: dict[str, int], tiers: tuple[str, ...] | None, by_location: bool,
              keep: set[str], rules: tuple) -> list[Config]:
        """`rules`: what the call takes besides the configurations and their offers, as a
        hashable (the same for every service of one plan; see add_candidates)."""
        behind = tuple(map(offers.__getitem__, map(_OFFER_ID, configs)))
        key = (tuple(map(id, configs)), tuple(map(id, behind)), rules)
        with self._lock:
            found = self._lookup(key)
        if found is not None:
            return list(found[2])
        kept = prune_whole_instance_configs(configs, offers, limits, gpu_quotas, tiers=tiers,
                                            by_location=by_location, keep=keep)
        with self._lock:
            self._store(key, (tuple(configs), behind, tuple(kept)))
        return kept


_OFFER_ID = attrgetter("offer_id")
WHOLE_INSTANCE_PRUNING = WholeInstancePruning()


def add_candidates(problem: Problem, catalog: Catalog, cache: CandidateCache | None = SHARED_CACHE,
                   stop: Stop = NEVER) -> Problem:
    """The compiled problem with its (pruned) candidate configurations and rejections."""
    limits = problem.offer_limits
    # Offers a measured profile names are not interchangeable with their look-alikes.
    pinned = {p.offer for s in problem.services for p in s.profiles if p.offer is not None}
    # Multi-period plans: offers compare in every pricing tier, and the running fleet's offers
    # stay (changing them costs). An offer never stands in for one in another region when
    # regions matter (constraints.same_region, or spot spread over regions).
    h = problem.horizon
    tiers = h.tiers if h is not None else None
    by_location = bool(problem.same_region) or (h is not None and h.spot_min_regions is not None) \
        or problem.redundancy_by_location
    running = {f.offer_id for f in (h.current_fleet or ())} if h is not None else set()
    # A reclaimed spot pool is one offer's spot instances (constraints.spot_interruptions):
    # two offers of the same hardware that sell spot are two pools, so they never stand in
    # for one another. An offer without spot holds firm instances only, which no pool's
    # loss takes: it is pruned as before.
    pools = problem.spot_pools()
    if any(s.redundancy_domain == "instance" for s in problem.services):
        # An instance's loss is bounded per offer (solver/survival.py): two offers of the
        # same hardware are then two node pools a service can spread over, not one.
        offers, dominated = list(problem.offers), []
    elif cache is not None:
        offers, dominated = PRUNED_OFFERS.prune(list(problem.offers), limits, catalog, pinned | running | pools,
                                                tiers, by_location)
    else:  # no caches: everything recomputed
        offers, dominated = prune_offers(list(problem.offers), limits, catalog, keep=pinned | running | pools,
                                         tiers=tiers, by_location=by_location)
    builder = CandidateBuilder(catalog, offers, problem.calibration, cache, stop)
    offers_by_id = {o.id: o for o in offers}
    configs: list[Config] = []
    # What whole-instance pruning reads besides the configurations and their offers.
    kept_offers = running | pools  # never lose configurations (changing them costs; a pool is a pool)
    rules = (tuple(sorted(limits.items())), frozenset(problem.gpu_quotas), tiers, by_location, frozenset(kept_offers))
    for mine in builder.for_services(problem.services):
        if mine and problem.service(mine[0].service).redundancy_domain == "instance":
            configs.extend(mine)  # no swap across offers: it could pack more of the service on one instance
        elif cache is not None:
            configs.extend(WHOLE_INSTANCE_PRUNING.prune(mine, offers_by_id, limits, problem.gpu_quotas, tiers,
                                                        by_location, kept_offers, rules))
        else:  # no caches: everything recomputed
            configs.extend(prune_whole_instance_configs(mine, offers_by_id, limits, problem.gpu_quotas, tiers=tiers,
                                                        by_location=by_location, keep=kept_offers))
    services = problem.services
    if any(s.serving != "aggregated" for s in services):
        from solver.compile.disagg import add_disaggregated, worker_offers

        # Workers have offers of their own: one dominated on price for whole replicas may sit
        # in the region (or on the network) a pool needs.
        services, configs = add_disaggregated(problem, catalog, worker_offers(problem, catalog), configs)
        used = {c.offer_id for c in configs}
        back = {o.id for o in problem.offers if o.id in used} - {o.id for o in offers}
        if back:
            offers = [o for o in problem.offers if o.id in back or o.id in offers_by_id]
            dominated = [d for d in dominated if d[0] not in back]
    return replace(problem, services=services, offers=tuple(offers), configs=tuple(configs),
                   rejections=tuple(builder.rejections),
                   dominated=tuple(builder.dominated),
                   filtered_out=problem.filtered_out + tuple(dominated))


def build_problem(workload: Workload, catalog: Catalog, cache: CandidateCache | None = SHARED_CACHE,
                  stop: Stop = NEVER) -> Problem:
    return add_candidates(compile_problem(workload, catalog), catalog, cache, stop)
