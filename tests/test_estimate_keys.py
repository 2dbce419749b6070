"""The candidate builder's estimate cache serves queries that differ only in links the
estimate does not read (solver.perf.links_read) with one estimate: check that those
estimates are the same, bit for bit, alone or in a batch; and that the fast frozen
constructors (solver.frozen.maker) make the same objects as the dataclasses' own."""

from __future__ import annotations

import dataclasses
import random

import pytest

from solver.catalog.loader import default_catalog
from solver.compile.candidates import EstimateCache, _QueryKey
from solver.compile.problem import ClassPerf, Config, Rejection
from solver.frozen import maker, stamper, stamper_into
from solver.models.library import get_model
from solver.perf import estimate, estimate_many, links_read
from solver.perf.api import PerfEstimate, PerfQuery

MODELS = ("llama-3.1-8b", "llama-2-13b", "qwen2.5-32b", "llama-3.1-70b", "mixtral-8x7b")


def _queries(seed: int, n: int) -> list[PerfQuery]:
    rng = random.Random(seed)
    gpus = sorted(default_catalog().gpus.values(), key=lambda g: g.name)
    out = []
    for _ in range(n):
        gpu = rng.choice(gpus)
        span = rng.choice([1, 1, 1, 2, 4])
        g = rng.choice([1, 1, 2, 4, 8]) * span
        out.append(PerfQuery(
            model=get_model(rng.choice(MODELS)), gpu=gpu, gpus_per_replica=g,
            interconnect=rng.choice(["none", "pcie", "nvlink"]), usable_memory_gib=gpu.memory_gib,
            precision=rng.choice(["fp16", "fp8"]), engine=rng.choice(["vllm", "sglang"]),
            prompt_tokens=rng.choice([128, 1024]), output_tokens=rng.choice([64, 512]),
            ttft_slo_ms=rng.choice([None, 1000.0]), tpot_slo_ms=rng.choice([None, 50.0]),
            instances_per_replica=span, inter_node_gbs=rng.choice([None, 50.0, 400.0])))
    return out


def _variants(q: PerfQuery) -> list[PerfQuery]:
    """q with every value of the links it does not read."""
    tp_link, stage_link = links_read(q)
    out = []
    for ic in ([q.interconnect] if tp_link else ["none", "pcie", "nvlink"]):
        for gbs in ([q.inter_node_gbs] if stage_link else [None, 25.0, 400.0]):
            out.append(dataclasses.replace(q, interconnect=ic, inter_node_gbs=gbs))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_unread_links_do_not_change_the_estimate(seed):
    queries = _queries(seed, 60)
    variants = [v for q in queries for v in _variants(q)]
    batch = estimate_many(variants)
    at = 0
    for q in queries:
        vs = _variants(q)
        first = estimate(vs[0])
        for v, e in zip(vs, batch[at:at + len(vs)]):
            assert e == first and estimate(v) == first, (q, v)
            assert _QueryKey(v) == _QueryKey(vs[0]) and hash(_QueryKey(v)) == hash(_QueryKey(vs[0]))
        at += len(vs)


def test_read_links_still_tell_queries_apart():
    q = _queries(7, 1)[0]
    tp2 = dataclasses.replace(q, gpus_per_replica=2, instances_per_replica=1, pipeline_stages=None)
    assert links_read(tp2)[0]
    assert _QueryKey(dataclasses.replace(tp2, interconnect="pcie")) != _QueryKey(
        dataclasses.replace(tp2, interconnect="nvlink"))
    spanning = dataclasses.replace(q, gpus_per_replica=16, instances_per_replica=2, pipeline_stages=None)
    assert links_read(spanning)[1]
    assert _QueryKey(dataclasses.replace(spanning, inter_node_gbs=50.0)) != _QueryKey(
        dataclasses.replace(spanning, inter_node_gbs=400.0))


def test_cache_asks_one_estimate_for_equivalent_queries():
    q = dataclasses.replace(_queries(3, 1)[0], gpus_per_replica=1, instances_per_replica=1, pipeline_stages=None)
    cache = EstimateCache()
    got = cache.get_many(_variants(q))
    assert cache.misses == 1 and len(cache) == 1
    assert all(e == estimate(v) for e, v in zip(got, _variants(q)))


def test_cached_keys_let_their_queries_go_and_still_find_their_estimates():
    queries = _queries(5, 40)
    cache = EstimateCache()
    first = cache.get_many(queries)
    assert all(key.query is None for key in cache._data)  # the cache holds no query objects
    again = cache.get_many([dataclasses.replace(q) for q in queries])  # equal queries, new objects
    assert cache.misses == len(cache) and cache.hits == len(queries) + len(queries) - len(cache)
    assert all(a is b for a, b in zip(first, again)) and first == [estimate(q) for q in queries]


def test_maker_makes_the_same_objects():
    perf = ClassPerf(1.5, 20.0, 30.0, None, 8, "slo", "")
    cases = [
        (ClassPerf, perf, dict(throughput=1.5, ttft_ms=20.0, tpot_ms=30.0, latency_ms=None, batch=8,
                               binding_limit="slo", reason="")),
        (Config, Config("s", "o", 2, "fp16", "estimate", (perf,), 30.0, 0.1, instances_per_replica=2),
         dict(service="s", offer_id="o", gpus_per_replica=2, precision="fp16", source="estimate", classes=(perf,),
              memory_gib_per_gpu=30.0, error_band=0.1, instances_per_replica=2)),
        (Rejection, Rejection("s", "o", "L4", 1, None, "vram", "why"),
         dict(service="s", offer_id="o", gpu="L4", gpus_per_replica=1, precision=None, kind="vram", reason="why")),
        (PerfEstimate, PerfEstimate(False, "no", "vram", memory_gib_per_gpu=3.0),
         dict(feasible=False, reason="no", reason_kind="vram", memory_gib_per_gpu=3.0)),
    ]
    for cls, want, kwargs in cases:
        got = maker(cls)(**kwargs)
        assert type(got) is cls and got == want and hash(got) == hash(want) and repr(got) == repr(want)
        assert dataclasses.asdict(got) == dataclasses.asdict(want)
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.__setattr__(dataclasses.fields(cls)[0].name, None)
    assert maker(Config)(**cases[1][2]).key == cases[1][1].key
    with pytest.raises(TypeError):
        maker(Rejection)(service="s")  # fields without defaults left out
    with pytest.raises(TypeError):
        maker(ClassPerf)(throughput=1.0, speed=2.0)  # not a field


def test_stamper_makes_the_same_objects():
    perf = ClassPerf(1.5, 20.0, 30.0, None, 8, "slo", "")
    template = dict(service="s", gpus_per_replica=2, precision="fp16", source="estimate", classes=(perf,),
                    memory_gib_per_gpu=30.0, error_band=0.1, instances_per_replica=2, pending_cap=None)
    stamp = stamper(Config, "offer_id")
    for offer in ("o", "p"):
        got, want = stamp(template, offer), Config(**template, offer_id=offer)
        assert type(got) is Config and got == want and hash(got) == hash(want) and repr(got) == repr(want)
        assert vars(got) == {f.name: getattr(want, f.name) for f in dataclasses.fields(Config)}
        assert got.key == want.key
        with pytest.raises(dataclasses.FrozenInstanceError):
            got.__setattr__("offer_id", None)
    assert "offer_id" not in template and template["service"] == "s"  # copied, never changed
    with pytest.raises(TypeError):
        stamper(Config, "offer")  # not a field


def test_stamper_into_appends_the_stampers_objects_in_order():
    perf = ClassPerf(1.5, 20.0, 30.0, None, 8, "slo", "")
    templates = [dict(service="s", gpus_per_replica=g, precision=p, source="estimate", classes=(perf,),
                      memory_gib_per_gpu=30.0, error_band=0.1, instances_per_replica=1, pending_cap=None)
                 for g, p in ((1, "fp16"), (2, "fp8"), (4, "fp16"))]
    out = ["already there"]
    stamper_into(Config, "offer_id")(templates, "o", out)
    assert out[0] == "already there" and len(out) == 4
    for got, template in zip(out[1:], templates):
        want = Config(**template, offer_id="o")
        assert type(got) is Config and got == want and repr(got) == repr(want)
        assert vars(got) == {f.name: getattr(want, f.name) for f in dataclasses.fields(Config)}
    assert all("offer_id" not in t for t in templates)  # copied, never changed
    with pytest.raises(TypeError):
        stamper_into(Config, "offer")  # not a field
