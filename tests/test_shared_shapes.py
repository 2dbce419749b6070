"""Offers of one GPU type share a service's replica shapes (solver.compile.candidates._Shape):
check that sharing never hands an offer another's configurations where its hardware makes
them differ. Each offer's configurations, rejections and dominated configurations, built
together with every other offer, must equal those built for that offer alone (a builder
that can share nothing), in the same order."""

from __future__ import annotations

import copy
import dataclasses
import random
import sys
from pathlib import Path

import pytest

from solver.catalog import default_catalog
from solver.compile.candidates import CandidateBuilder, CandidateCache
from solver.compile.compiled import compile_problem
from solver.errors import Cancelled
from solver.interrupt import Stop
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from solve_scaling import generate  # noqa: E402


def _variants():
    """One 8-GPU A100-40GB offer and look-alikes that differ in one piece of hardware each:
    the interconnect (read by tensor-parallel replicas), the usable memory, the inter-node
    bandwidth (read by replicas spanning instances), the fabric (spanning at all) and the
    instance size; plus one that differs only in price and region (shares everything)."""
    cat = default_catalog()
    base = next(o for o in cat.offers if o.id == "aws/p4d.24xlarge")
    assert base.gpus_per_instance == 8 and base.inter_node_fabric
    changes = [
        {},
        {"interconnect": "pcie"},
        {"interconnect": "none", "gpus_per_instance": 1, "inter_node_fabric": "", "inter_node_gbs": None},
        {"gpu_memory_gib": 16.0},
        {"gpu_memory_gib": 16.0, "inter_node_gbs": 400.0},
        {"gpu_memory_gib": 16.0, "inter_node_fabric": "", "inter_node_gbs": None},
        {"gpus_per_instance": 2},
        {"gpus_per_instance": 4, "interconnect": "pcie"},
        {"price_usd_per_hour": base.price_usd_per_hour * 0.7, "region": "elsewhere-1"},
    ]
    return cat, [dataclasses.replace(base, name=f"{base.name}-v{i}", **c) for i, c in enumerate(changes)]


def _services(seed: int, n: int, percentile: bool):
    doc = generate(n, seed)
    rng = random.Random(seed)
    for s in doc["services"]:
        if s.get("model") and rng.random() < 0.3:
            s["model"] = rng.choice(["llama-3.1-70b", "qwen2.5-72b", "llama-3.1-405b"])  # some span instances
        if rng.random() < 0.2:
            s["max_replicas"] = 50  # then no configuration of an offer prunes another
        if percentile and s.get("slo"):
            s["slo"] = dict(s["slo"], percentile=rng.choice([90, 99]))
    return compile_problem(parse_workload(copy.deepcopy(doc)), default_catalog())


def _per_offer(builder: CandidateBuilder, services, offers):
    """Per service, per offer: (configurations, rejections, dominated) of that offer."""
    out = []
    for svc, mine in zip(services, builder.for_services(services)):
        row = []
        for o in offers:
            row.append((tuple(c for c in mine if c.offer_id == o.id),
                        tuple(r for r in builder.rejections if r.service == svc.name and r.offer_id == o.id),
                        tuple(c for c in builder.dominated if c.service == svc.name and c.offer_id == o.id)))
        out.append(row)
    return out


@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("seed,percentile", [(0, False), (1, False), (2, True)])
def test_offers_built_together_equal_offers_built_alone(seed, percentile, cache):
    cat, offers = _variants()
    problem = _services(seed, 12, percentile)
    services = problem.services
    together = _per_offer(CandidateBuilder(cat, offers, problem.calibration, CandidateCache() if cache else None),
                          services, offers)
    for k, o in enumerate(offers):
        alone = _per_offer(CandidateBuilder(cat, [o], problem.calibration, None), services, [o])
        for i, svc in enumerate(services):
            assert together[i][k] == alone[i][0], (svc.name, o.id)
    # Stamped objects carry every field in their own __dict__, as the dataclass makes them.
    for row in together:
        for configs, rejections, dominated in row:
            for obj in configs + rejections + dominated:
                names = [f.name for f in dataclasses.fields(obj)]
                assert set(names) <= set(vars(obj)) and obj == type(obj)(**{n: getattr(obj, n) for n in names})
    assert any(together[i][k][0] or together[i][k][1] for i in range(len(services)) for k in range(len(offers)))


def test_hardware_that_is_read_parts_the_shapes():
    """The look-alike with a PCIe interconnect gets other tensor-parallel configurations than
    the NVLink original, the same 1-GPU ones; the one with less memory, other rejections."""
    cat, offers = _variants()
    problem = _services(3, 20, False)
    rows = _per_offer(CandidateBuilder(cat, offers, problem.calibration, None), problem.services, offers)

    def by_shape(configs):
        return {(c.gpus_per_replica, c.instances_per_replica, c.precision): c.classes for c in configs}

    differ_tp = same_one = 0
    for row in rows:
        nvlink, pcie = by_shape(row[0][0]), by_shape(row[1][0])
        for shape in nvlink.keys() & pcie.keys():
            if shape[0] == 1:
                assert nvlink[shape] == pcie[shape]
                same_one += 1
            elif nvlink[shape] != pcie[shape]:
                differ_tp += 1
    assert differ_tp and same_one
    small = [r for row in rows for r in row[3][1] if r.kind == "vram"]
    big = [r for row in rows for r in row[0][1] if r.kind == "vram"]
    assert len(small) > len(big)


def test_a_cancelled_call_leaves_the_builder_usable():
    """Shapes asked for but never estimated (the call was cancelled between rounds) must not
    make a later call wait for them."""
    cat, offers = _variants()
    problem = _services(4, 8, False)
    class Cancel(Stop):
        def check(self, stage: str) -> None:  # once some shape waits for its estimates
            if any(shape.plans and shape.state == shape.ASKED for shape in builder._shapes.values()):
                raise Cancelled(stage)

    builder = CandidateBuilder(cat, offers, problem.calibration, None, Cancel())
    with pytest.raises(Cancelled):
        builder.for_services(problem.services)
    builder.stop = Stop()
    builder.rejections, builder.dominated = [], []
    again = _per_offer(builder, problem.services, offers)
    fresh = _per_offer(CandidateBuilder(cat, offers, problem.calibration, None), problem.services, offers)
    assert again == fresh
