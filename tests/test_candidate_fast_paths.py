"""The candidate builder's fast paths against the straightforward ones: estimated-only
services built without a generator (solver.compile.candidates._PlainBuild) must give what
_OfferCandidates.build gives, and pruning shape by shape (_Pruning) what prune_configs gives
offer by offer - the same configurations, rejections and dominated configurations, in the
same order."""

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
from solver.compile.problem import ClassPerf
from solver.compile.pruning import prune_configs
from solver.workload.documents import parse_workload

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from solve_scaling import generate  # noqa: E402


def _problem(seed: int, n: int):
    """Generated services, some with big models (replicas across instances), max_replicas
    (no pruning), percentile SLOs (capped: the generator's path) or two request classes."""
    doc = generate(n, seed)
    rng = random.Random(seed)
    for s in doc["services"]:
        if s.get("model") and rng.random() < 0.3:
            s["model"] = rng.choice(["llama-3.1-70b", "qwen2.5-72b", "llama-3.1-405b"])
        if rng.random() < 0.2:
            s["max_replicas"] = 50
        if s.get("slo") and rng.random() < 0.2:
            s["slo"] = dict(s["slo"], percentile=rng.choice([90, 99]))
        if s.get("model") and rng.random() < 0.2:
            s["precisions"] = ["fp8", "fp16", "int4"]
    doc["services"].append({"name": "big", "model": "llama-3.1-405b", "precisions": ["fp16"],
                            "demand": {"requests_per_s": 2.0, "prompt_tokens": 1024, "output_tokens": 256},
                            "slo": {"ttft_ms": 5000, "tpot_ms": 100}})  # spans instances (810 GB of fp16 weights)
    return compile_problem(parse_workload(copy.deepcopy(doc)), default_catalog())


@pytest.mark.parametrize("seed,cache", [(0, False), (1, True), (2, False)])
def test_fast_paths_equal_the_straightforward_ones(seed, cache):
    cat = default_catalog()
    problem = _problem(seed, 12)
    services, offers = problem.services, list(problem.offers)
    assert any(o.inter_node_fabric for o in offers)

    fast = CandidateBuilder(cat, offers, problem.calibration, CandidateCache() if cache else None)
    got = fast.for_services(services)

    plain = CandidateBuilder(cat, offers, problem.calibration, None)
    slow = CandidateBuilder(cat, offers, problem.calibration, None)
    slow._plain = False  # every service through _OfferCandidates.build
    everything = slow.for_services(services, prune=False)
    assert plain.for_services(services, prune=False) == everything
    assert plain.rejections == slow.rejections == fast.rejections

    dominated = []
    for svc, mine, every in zip(services, got, everything):
        kept = []
        for o in offers:
            configs = [c for c in every if c.offer_id == o.id]
            survivors = prune_configs(configs, svc)
            kept += survivors
            dominated += [c for c in configs if all(c is not s for s in survivors)]
        assert mine == kept, svc.name
    assert fast.dominated == dominated
    # Objects made field by field carry every field in their own __dict__, as the dataclass makes them.
    names = {f.name for f in dataclasses.fields(ClassPerf)}
    assert all(set(vars(k)) == names for row in got for c in row for k in c.classes)
    assert dominated and any(c.instances_per_replica > 1 for row in got for c in row)
