"""The last tie-breaks: among fleets of the optimal cost and GPU count, the fewest
instances, then the instances on offers earliest in id order, and every order of the
catalog gives that fleet. Before this tie-break the planner gave 3 x mm/1xA10 here, and a
warm process cache could turn such a tie the other way (tests/test_compiled_problem.py)."""

from __future__ import annotations

import itertools

import pytest

from solver.plan import PlanOptions, plan
from solver.workload.documents import parse_workload


def _offer(provider: str, name: str, gpus: int, price: float) -> dict:
    return {"provider": provider, "name": name, "gpu": "A10", "gpus_per_instance": gpus,
            "price_usd_per_hour": price, "source": "test", "as_of": "test"}


def _fleet(offers: list[dict], items_per_min: float) -> tuple[list[tuple[str, int]], str]:
    doc = {"name": "ties",
           "services": [{"name": "sd", "demand": {"items_per_min": items_per_min},
                         "profiles": [{"gpu": "A10", "items_per_min": 34, "latency_ms": 1765}]}],
           "catalog": {"offers": offers}}
    result = plan(parse_workload(doc), PlanOptions()).to_dict()
    assert result["status"] == "optimal" and result["evaluation"]["ok"]
    return [(f["offer_id"], f["instances"]) for f in result["fleet"]], result["solver"]["tie_break"]


OFFERS = [_offer("zz", "1xA10", 1, 1.0), _offer("aa", "2xA10", 2, 2.0), _offer("mm", "1xA10", 1, 1.0),
          _offer("bb", "4xA10", 4, 4.0)]


@pytest.mark.parametrize("order", list(itertools.permutations(range(4))))
def test_fewest_instances_then_offer_id_whatever_the_catalog_order(order):
    # 100 items/min at 34 a replica: 3 replicas, 3 GPUs at $3/hour in every cheapest fleet
    # (3 x a 1-GPU offer, or a 2-GPU and a 1-GPU one; the 4-GPU one costs $4).
    fleet, ties = _fleet([OFFERS[i] for i in order], 100)
    assert fleet == [("aa/2xA10", 1), ("mm/1xA10", 1)]
    assert ties == "fewest GPUs, fewest instances"


def test_fewest_instances_never_costs_a_gpu_or_a_dollar():
    # 4 replicas: one 4-GPU instance ($4, 4 GPUs) beats two 2-GPU ones on instances at
    # the same cost and GPUs; a cheaper fleet always comes first.
    assert _fleet(OFFERS, 130)[0] == [("bb/4xA10", 1)]
    cheaper = [_offer("zz", "1xA10", 1, 0.9), _offer("bb", "4xA10", 4, 4.0)]
    assert _fleet(cheaper, 130)[0] == [("zz/1xA10", 4)]
