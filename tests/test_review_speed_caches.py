"""Review throughput work (issue 10): what is remembered between scenarios never answers
for another input, and the faster numerics are the same numbers bit for bit.

* Cached vs cold: random review scenarios (demand, prices, quotas, SLOs) solved one after
  another in a warm process give exactly the results of the same scenarios each solved
  after `clear_all` (timings aside).
* Groupings of configurations are remembered by the identity of the configurations: a
  list with one configuration changed (another object) is grouped afresh.
* Candidate-cache offer keys are made from an offer's hardware: other hardware, other
  key (an offer changed in place is never served the configurations of its old self).
* `solver.perf.queueing.exp.exp` and the in-place normal CDF equal numpy's exp and the
  original expression bit for bit, underflow, infinities and NaN included.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pytest

from solver.caches import clear_all
from solver.catalog import default_catalog
from solver.compile.candidates import _offer_hardware, build_problem
from solver.optimize import formulation
from solver.output.result import plain
from solver.perf.queueing.exp import exp
from solver.perf.queueing.numerics import _phi
from solver.review import parse_review
from solver.review.execute import BaseCase, solve_scenario

MODELS = ["llama-3.1-8b", "mistral-7b", "qwen2.5-7b", "gemma-2-9b", "llama-3.2-3b"]
PRICED = ["H100-SXM", "A100-80GB", "L40S", "L4", "A10G"]


def _workload(rng: random.Random) -> dict:
    services = []
    for i in range(6):
        if i == 5:  # one measured-profile service
            services.append({"name": f"svc{i}", "demand": {"items_per_min": 600.0}, "slo": {"latency_ms": 2500},
                             "profiles": [{"gpu": g, "items_per_min": 40.0 * f, "latency_ms": round(2000 / f)}
                                          for g, f in (("L4", 1.0), ("A10G", 1.2), ("L40S", 2.4))]})
            continue
        services.append({"name": f"svc{i}", "model": MODELS[i % len(MODELS)], "precisions": ["fp16", "fp8"],
                         "demand": {"requests_per_s": round(rng.uniform(1, 12), 2), "prompt_tokens": 512,
                                    "output_tokens": rng.choice([128, 256])},
                         "slo": {"ttft_ms": 3000, "tpot_ms": rng.choice([50, 80])}, "min_replicas": 1})
    return {"name": "caches", "services": services, "constraints": {"gpu_quotas": {"H100-SXM": 32}}}


def _change(rng: random.Random) -> dict:
    kind = rng.choice(["demand", "service_demand", "price", "quota", "slo"])
    if kind == "demand":
        return {"demand": {"factor": round(rng.uniform(0.5, 3.0), 2)}}
    if kind == "service_demand":
        return {"demand": {"service": f"svc{rng.randrange(6)}", "factor": round(rng.uniform(0.5, 4.0), 2)}}
    if kind == "price":
        return {"price": {"gpu": rng.choice(PRICED), "factor": round(rng.uniform(0.5, 1.5), 2)}}
    if kind == "quota":
        return {"gpu_quota": {"gpu": "H100-SXM", "gpus": rng.choice([0, 8, 64])}}
    return {"slo": {"service": f"svc{rng.randrange(5)}", "tpot_ms": rng.choice([30, 40, 60, 100])}}


def _comparable(result) -> str:
    d = result.to_dict()

    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("wall_s", "solve_time_s", "total_time_s", "timings")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return json.dumps(strip(json.loads(json.dumps(d))), sort_keys=True)


@pytest.mark.parametrize("seed", [3, 11])
def test_warm_review_scenarios_equal_cold_ones(seed):
    """Each scenario solved warm (after the others) equals it solved with every cache empty,
    and a performance change (an SLO) is never answered from another scenario's entries."""
    rng = random.Random(seed)
    spec = {"name": "caches", "base": {"workload": _workload(rng)}, "time_limit_per_scenario_s": 30,
            "sensitivity": {"enabled": False},
            "scenarios": [{"name": f"s{i}", "changes": [_change(rng) for _ in range(rng.randint(1, 2))]}
                          for i in range(7)]
            # An SLO tightened, then the same scenario with the base's SLO: the second must
            # not reuse the first's candidates (nor its grouping, bounds or values under load).
            + [{"name": "tight", "changes": [{"slo": {"service": "svc0", "tpot_ms": 25}}]},
               {"name": "loose", "changes": [{"slo": {"service": "svc0", "tpot_ms": 200}}]}]}
    review = parse_review(spec)
    base = BaseCase(review.workload, review.catalog)
    clear_all()
    warm = [_comparable(solve_scenario(base, s, 30.0)) for s in review.scenarios]
    cold = []
    for s in review.scenarios:
        clear_all()
        cold.append(_comparable(solve_scenario(base, s, 30.0)))
    clear_all()
    assert [json.loads(w)["status"] for w in warm] == [json.loads(c)["status"] for c in cold]
    for s, w, c in zip(review.scenarios, warm, cold):
        assert w == c, s.name
    assert json.loads(warm[-2])["status"] in ("optimal", "infeasible")
    assert warm[-2] != warm[-1]


def test_grouping_is_recomputed_for_changed_configurations():
    clear_all()
    catalog = default_catalog()
    from solver.workload.documents import parse_workload

    workload = parse_workload(_workload(random.Random(5)))
    configs = list(build_problem(workload, catalog, cache=None).configs)
    assert len(configs) >= formulation.POOL_FROM_CONFIGS
    first = formulation.group_configs(configs)
    again = formulation.group_configs(configs)
    fresh = formulation._group_configs(configs, True, None)
    assert first == again == fresh
    # Another object with another throughput: never the remembered grouping.
    c = configs[0]
    changed = replace(c, classes=tuple(replace(k, throughput=k.throughput * 1.5 + 1.0) for k in c.classes))
    other = [changed] + configs[1:]
    got = formulation.group_configs(other)
    assert got == formulation._group_configs(other, True, None)
    assert any(changed in g.configs for g in got[0])
    assert not any(c in g.configs for g in got[0])
    # Bounded: only the last few lists are kept.
    for n in range(formulation.GROUPINGS_KEPT + 5):
        formulation.group_configs(configs[n:])
    assert len(formulation._GROUPINGS) <= formulation.GROUPINGS_KEPT
    clear_all()
    assert not formulation._GROUPINGS


def test_offer_hardware_keys_differ_with_hardware():
    catalog = default_catalog()
    offer = catalog.offers[0]
    gpu = catalog.gpus[offer.gpu]
    usable = catalog.usable_memory_gib(offer)
    same = _offer_hardware(replace(offer, price_usd_per_hour=offer.price_usd_per_hour * 2), gpu, usable)
    assert same == _offer_hardware(offer, gpu, usable)  # price is not hardware
    assert _offer_hardware(offer, gpu, usable + 1.0) != same
    assert _offer_hardware(replace(offer, inter_node_gbs=(offer.inter_node_gbs or 0) + 100.0), gpu, usable) != same
    assert _offer_hardware(replace(offer, gpus_per_instance=offer.gpus_per_instance * 2), gpu, usable) != same


def test_an_offer_changed_in_place_gets_its_own_candidates():
    """The same offer id with less GPU memory: warm candidates equal cold ones, not the old ones."""
    from solver.workload.documents import parse_workload

    clear_all()
    catalog = default_catalog()
    workload = parse_workload(_workload(random.Random(2)))
    before = build_problem(workload, catalog)  # warm the cache with the catalog as it is
    target = next(c.offer_id for c in before.configs if c.source == "estimate" and c.precision == "fp16")
    smaller = replace(catalog, offers=tuple(replace(o, gpu_memory_gib=6.0) if o.id == target else o
                                            for o in catalog.offers))
    warm = build_problem(workload, smaller)
    clear_all()
    cold = build_problem(workload, smaller)
    assert warm.configs == cold.configs and warm.rejections == cold.rejections
    assert [c for c in warm.configs if c.offer_id == target] != [c for c in before.configs if c.offer_id == target]
    clear_all()


def test_exp_is_numpys_bit_for_bit():
    rng = np.random.default_rng(0)
    specials = np.array([-np.inf, np.inf, np.nan, 0.0, -0.0, -745.0, -745.13, -745.14, -746.0, -746.0000001,
                         -708.4, -708.39, -1e300, 709.0, 710.0])
    for trial in range(400):
        n = int(rng.integers(1, 2000))
        v = -np.abs(rng.normal(0, float(rng.choice([1, 30, 300, 1e4, 1e8])), n)) ** int(rng.choice([1, 2]))
        if trial % 3 == 0:
            v[rng.integers(0, n, min(n, 20))] = rng.uniform(-760, -700, min(n, 20))
        if trial % 5 == 0:
            v = np.concatenate([v, specials])
        with np.errstate(all="ignore"):
            want = np.exp(v)
            got = exp(v.copy())
            got_inplace = exp(v.copy(), inplace=True)
        for g in (got, got_inplace):
            assert np.array_equal(np.isnan(g), np.isnan(want))
            assert (g.view(np.int64)[~np.isnan(want)] == want.view(np.int64)[~np.isnan(want)]).all()
    v = np.array([-800.0, -1.0])
    exp(v)
    assert v[0] == -800.0  # not in place unless asked


def _phi_reference(z):
    z = np.asarray(z, dtype=float)
    x = np.abs(z) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * np.exp(-x * x)
    return 0.5 * (1.0 + np.sign(z) * y)


def test_normal_cdf_in_place_is_the_formula_bit_for_bit():
    rng = np.random.default_rng(1)
    for shape in [(1,), (33,), (33, 1, 27, 16), (2, 64, 3), (5, 7)]:
        for scale in (0.01, 1.0, 5.0, 30.0, 1e4, 1e9):
            z = rng.normal(rng.normal(0, 3), scale, shape)
            with np.errstate(all="ignore"):
                assert (_phi(z).view(np.int64) == _phi_reference(z).view(np.int64)).all()


@dataclass
class _Leaf:
    x: float
    names: tuple = ()


@dataclass
class _Empty:
    pass


@dataclass
class _Tree:
    leaves: list = field(default_factory=list)
    by_name: dict = field(default_factory=dict)
    empty: _Empty = field(default_factory=_Empty)
    kind: type = _Leaf


def test_plain_matches_asdict():
    tree = _Tree([_Leaf(1.5, ("a", "b")), _Leaf(float("inf"))], {"k": [_Leaf(2.0)], "n": None}, _Empty(), _Leaf)
    assert plain(tree) == asdict(tree)
    assert plain(tree)["kind"] is _Leaf
    assert plain(_Empty()) == {} and plain(None) is None and plain(True) is True
