"""Replica sizes: powers of two dividing the instance, or the whole instance — and a clear
word for measured profiles of any other size (never silently ignored)."""

from __future__ import annotations

import pytest

from solver.compile.candidates import replica_sizes
from solver.errors import InfeasibleError
from solver.plan import plan
from solver.workload.documents import parse_workload


def test_sizes():
    assert replica_sizes(8) == [1, 2, 4, 8]
    assert replica_sizes(6) == [1, 2, 6]
    assert replica_sizes(3) == [1, 3]
    assert replica_sizes(1) == [1]


def _workload(profiles, offers):
    return parse_workload({"name": "odd", "services": [
        {"name": "img", "demand": {"items_per_min": 200}, "profiles": profiles}],
        "catalog": {"offers": offers}})


SIX = {"provider": "p", "name": "six", "gpu": "L4", "gpus_per_instance": 6, "price_usd_per_hour": 6.0}


def test_a_three_gpu_profile_on_six_gpu_instances_is_rejected_with_the_reason():
    w = _workload([{"gpu": "L4", "gpus_per_replica": 3, "items_per_min": 100}], [SIX])
    with pytest.raises(InfeasibleError) as info:
        plan(w)
    (reason,) = info.value.reasons
    assert reason.constraint == "profiles[img]"
    assert "3-GPU replicas do not pack exactly on 6-GPU instances" in reason.message
    assert "no measured profile" not in reason.message
    assert "1 or 2 or 6 GPUs per replica" in reason.fix


def test_a_whole_instance_profile_of_any_size_is_planned_and_packs_with_others():
    offers = [SIX]
    w = parse_workload({"name": "odd", "services": [
        {"name": "big", "demand": {"items_per_min": 150}, "profiles": [
            {"gpu": "L4", "gpus_per_replica": 6, "items_per_min": 100}]},
        {"name": "small", "demand": {"items_per_min": 60}, "profiles": [
            {"gpu": "L4", "gpus_per_replica": 2, "items_per_min": 40}]}], "catalog": {"offers": offers}})
    r = plan(w)
    assert r.evaluation["ok"]
    assert [(f.offer_id, f.instances) for f in r.fleet] == [("p/six", 3)]  # 2 whole + one holding 2x2 GPUs
    big = next(s for s in r.services if s.name == "big")
    assert [(a.gpus_per_replica, a.replicas) for a in big.assignments] == [(6, 2)]


def test_a_profile_larger_than_every_instance_says_so(solver_cli, tmp_path):
    import json
    import subprocess

    path = tmp_path / "w.json"
    path.write_text(json.dumps({"name": "odd", "services": [
        {"name": "img", "demand": {"items_per_min": 200},
         "profiles": [{"gpu": "L4", "gpus_per_replica": 8, "items_per_min": 100}]}],
        "catalog": {"offers": [SIX]}}))
    proc = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3
    assert "an 8-GPU replica does not fit a 6-GPU instance" in proc.stdout
