"""Export of owned-site placements (issue 27, item 4), through the installed CLI.

A plan that runs replicas on owned servers exports, beside the deployment files,
sites/SITE.yaml per owned site: every server the plan runs there and the replicas (with
their GPU indices) on each. The checks here read the plan JSON on their own - never the
export's packing - and hold the files to it: the placements cover exactly the plan's owned
replicas, no server holds more GPUs than it has, the servers are the plan's owned
instances. Kubernetes pods of owned units select their site's node label and cloud pods
avoid it; SkyPilot files of owned units run on the site's SSH Node Pool. A hand-edited plan
whose replicas do not fit its servers is refused (exit 2, no traceback, nothing written).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, ROOT
from test_export import k8s_docs, validate_k8s

SITE_LABEL = "fleet-planner/site"
_KEY_GPUS = re.compile(r":(\d+)gpu(?:x(\d+)inst)?:")

# Two owned sites of 4-GPU L40S servers, measured profiles (a fast solve), nothing from the cloud:
# 4 two-GPU and 5 one-GPU replicas are 13 GPUs, so both sites' servers run (3 servers hold 12).
TWO_SITES = {
    "name": "two-sites",
    "services": [
        {"name": "images", "demand": {"items_per_min": 400},
         "profiles": [{"gpu": "L40S", "gpus_per_replica": 2, "items_per_min": 100}]},
        {"name": "embed", "demand": {"items_per_min": 500}, "profiles": [{"gpu": "L40S", "items_per_min": 100}]},
    ],
    "owned": [{"gpu": "L40S", "count": 8, "site": "dc-a", "gpus_per_instance": 4},
              {"gpu": "L40S", "count": 8, "site": "dc-b", "gpus_per_instance": 4}],
    "sites": [{"name": "dc-a", "electricity_usd_per_kwh": 0.10, "power_cap_kw": 5},
              {"name": "dc-b", "electricity_usd_per_kwh": 0.20}],
    "constraints": {"providers": ["owned"]},
}
# The same over a day: at night a quarter of the demand runs on fewer servers.
TWO_SITES_DAY = {
    **TWO_SITES, "name": "two-sites-day",
    "periods": [{"name": "night", "hours": 10}, {"name": "day", "hours": 14}],
    "services": [{**s, "demand": {**s["demand"], "profile": {"night": 0.25}}} for s in TWO_SITES["services"]],
}
# Cloud only: the export must look exactly as it did before owned sites existed.
CLOUD_ONLY = {
    "name": "cloud-only",
    "services": [{"name": "embed", "demand": {"items_per_min": 300},
                  "profiles": [{"gpu": "L4", "items_per_min": 100}]}],
    "constraints": {"providers": ["aws"]},
}


def run_cli(cli: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=300)


def solve(cli: str, workload: Path | dict, out: Path, *flags: str) -> tuple[Path, dict]:
    if isinstance(workload, dict):
        path = out.with_suffix(".workload.json")
        path.write_text(json.dumps(workload))
        workload = path
    proc = run_cli(cli, "solve", str(workload), "--format", "json", "--quiet", *flags)
    assert proc.returncode == 0, proc.stderr
    out.write_text(proc.stdout)
    return out, json.loads(proc.stdout)


def export(cli: str, plan: Path, target: str, out: Path, *flags: str) -> subprocess.CompletedProcess:
    proc = run_cli(cli, "export", str(plan), "--to", target, "--out", str(out), *flags)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


@pytest.fixture(scope="module")
def owned_cloud(solver_cli, tmp_path_factory) -> tuple[Path, dict]:
    return solve(solver_cli, EXAMPLES / "owned-and-cloud.json", tmp_path_factory.mktemp("oc") / "plan.json")


@pytest.fixture(scope="module")
def two_sites(solver_cli, tmp_path_factory) -> tuple[Path, dict]:
    return solve(solver_cli, TWO_SITES, tmp_path_factory.mktemp("two") / "plan.json", "--no-verify")


# ------------------------------------------------------------------ what the plan says, read on its own
def owned_offers(plan: dict) -> set[str]:
    return {f["offer_id"] for f in plan["fleet"] if f["provider"] == "owned"}


def planned_slots(fleet: list[dict], services: list[dict]) -> Counter:
    """(service, offer, GPUs on one server) -> how many server slots the plan's owned replicas take."""
    owned = {f["offer_id"] for f in fleet if f["provider"] == "owned"}
    slots: Counter = Counter()
    for s in services:
        for a in s["assignments"]:
            if a["offer_id"] not in owned or a["replicas"] == 0:
                continue
            m = _KEY_GPUS.search(a["config"])
            gpus, span = (a["gpus_per_replica"], a["instances_per_replica"]) if "gpus_per_replica" in a else (
                int(m.group(1)), int(m.group(2) or 1))
            slots[(s["name"], a["offer_id"], gpus // span)] += a["replicas"] * span
    return slots


def planned_servers(fleet: list[dict]) -> Counter:
    servers: Counter = Counter()
    for f in fleet:
        if f["provider"] == "owned":
            servers[f["offer_id"]] += f["instances"]
    return servers


def read_sites(out: Path) -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted((out / "sites").glob("*.yaml"))}


def check_placements(sites: dict[str, dict], fleet: list[dict], services: list[dict]) -> None:
    """The site files hold exactly the plan's owned replicas, on exactly its owned servers, within their GPUs."""
    assert set(sites) == {f["region"] for f in fleet if f["provider"] == "owned" and f["instances"] > 0}
    slots: Counter = Counter()
    servers: Counter = Counter()
    for name, site in sites.items():
        assert site["site"] == name
        for srv in site["servers"]:
            servers[srv["offer_id"]] += 1
            used = [i for r in srv["replicas"] for i in r["gpu_indices"]]
            assert len(used) == len(set(used)), f"{srv['server']}: a GPU holds two replicas"
            assert all(0 <= i < srv["gpus"] for i in used), f"{srv['server']}: GPU index out of range"
            assert srv["gpus_used"] == len(used) <= srv["gpus"]
            for r in srv["replicas"]:
                slots[(r["service"], srv["offer_id"], len(r["gpu_indices"]))] += 1
        totals = site["totals"]
        assert totals["servers_running"] == len(site["servers"])
        assert totals["gpus_running"] == sum(s["gpus"] for s in site["servers"])
        assert totals["gpus_used"] == sum(s["gpus_used"] for s in site["servers"])
    assert slots == planned_slots(fleet, services)
    assert servers == +planned_servers(fleet)


# ------------------------------------------------------------------ the shipped example
def test_owned_and_cloud_placement_is_the_plans(solver_cli, owned_cloud, tmp_path):
    plan_path, plan = owned_cloud
    proc = export(solver_cli, plan_path, "kubernetes", tmp_path / "k")
    assert "wrote 1 owned-site placement(s)" in proc.stdout and "sites/dc-east.yaml" in proc.stdout
    sites = read_sites(tmp_path / "k")
    check_placements(sites, plan["fleet"], plan["services"])
    site = sites["dc-east"]
    (stated,) = plan["sites"]
    assert site["totals"]["power_kw"] == pytest.approx(stated["power_kw"])  # 2 servers x 10.2 kW
    assert site["totals"]["power_cap_kw"] == stated["power_cap_kw"] == 25
    assert site["totals"]["gpus_owned"] == stated["gpus_owned"] == 32
    assert site["totals"]["gpus_running"] == stated["gpus_running"]
    assert site["node_label"] == {SITE_LABEL: "dc-east"}
    text = (tmp_path / "k" / "sites" / "dc-east.yaml").read_text()
    assert "kubectl label node NODE fleet-planner/site=dc-east" in text and "exactly 2 of the site's servers" in text


def test_kubernetes_pods_land_on_their_site_and_cloud_pods_stay_off(solver_cli, owned_cloud, tmp_path):
    plan_path, plan = owned_cloud
    export(solver_cli, plan_path, "kubernetes", tmp_path / "k")
    docs = k8s_docs(sorted((tmp_path / "k").glob("*.yaml")))  # sites/ is not among them: not an object
    validate_k8s(docs)
    workloads = [d for d in docs if d["kind"] == "Deployment"]
    owned = owned_offers(plan)
    assert {d["metadata"]["annotations"]["fleet-planner/offer"] in owned for d in workloads} == {True, False}
    for d in workloads:
        pod = d["spec"]["template"]["spec"]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        (term,) = terms
        keys = {e["key"]: e["operator"] for e in term["matchExpressions"]}
        assert keys["nvidia.com/gpu.product"] == "In"
        if d["metadata"]["annotations"]["fleet-planner/offer"] in owned:
            assert pod["nodeSelector"][SITE_LABEL] == "dc-east" and SITE_LABEL not in keys
        else:
            assert SITE_LABEL not in pod.get("nodeSelector", {}) and keys[SITE_LABEL] == "DoesNotExist"


def skypilot_check(files: list[Path], home: Path) -> list[dict]:
    """SkyPilot's own task schema and loader on the files (tests/skypilot_check.py), HOME apart."""
    if importlib.util.find_spec("sky") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("skypilot is required in CI (pip install -e '.[test]')")
        pytest.skip("skypilot is not installed (pip install -e '.[test]'); CI runs this test")
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "skypilot_check.py"), *map(str, files)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "HOME": str(home)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_skypilot_runs_owned_units_on_the_sites_ssh_node_pool(solver_cli, owned_cloud, tmp_path):
    plan_path, plan = owned_cloud
    export(solver_cli, plan_path, "skypilot", tmp_path / "s")
    files = sorted((tmp_path / "s").glob("*.yaml"))
    results = {Path(r["file"]).name: r for r in skypilot_check(files, tmp_path / "home")}
    assert [r for r in results.values() if not r["ok"]] == []
    for f in files:
        resources = yaml.safe_load(f.read_text())["resources"]
        if "-owned-" in f.name:
            assert resources["infra"] == "ssh/dc-east" and "cloud" not in resources and "region" not in resources
            assert (results[f.name]["cloud"], results[f.name]["region"]) == ("ssh", "ssh-dc-east")
            assert "sky ssh up --infra dc-east" in f.read_text()
        else:
            assert "infra" not in resources and resources["cloud"] == "lambda"
    site = read_sites(tmp_path / "s")["dc-east"]
    assert site["skypilot_infra"] == "ssh/dc-east" and "node_label" not in site
    check_placements(read_sites(tmp_path / "s"), plan["fleet"], plan["services"])


# ------------------------------------------------------------------ small inline workloads
def test_two_sites_each_get_their_servers_and_label(solver_cli, two_sites, tmp_path):
    plan_path, plan = two_sites
    assert {f["region"] for f in plan["fleet"]} == {"dc-a", "dc-b"}  # the workload needs both sites' servers
    export(solver_cli, plan_path, "kubernetes", tmp_path / "k")
    sites = read_sites(tmp_path / "k")
    check_placements(sites, plan["fleet"], plan["services"])
    assert sorted(sites) == ["dc-a", "dc-b"]
    docs = [d for d in k8s_docs(sorted((tmp_path / "k").glob("*.yaml"))) if d["kind"] == "Deployment"]
    validate_k8s(docs)
    site_of = {f["offer_id"]: f["region"] for f in plan["fleet"]}
    for d in docs:
        offer = d["metadata"]["annotations"]["fleet-planner/offer"]
        assert d["spec"]["template"]["spec"]["nodeSelector"][SITE_LABEL] == site_of[offer]
    for site in sites.values():
        line = {s["site"]: s for s in plan["sites"]}[site["site"]]
        assert site["totals"]["power_kw"] == pytest.approx(line["power_kw"])
        assert site["totals"]["power_cap_kw"] == line["power_cap_kw"]


def test_a_cloud_only_plan_writes_no_sites_and_no_site_rules(solver_cli, tmp_path):
    plan_path, _ = solve(solver_cli, CLOUD_ONLY, tmp_path / "plan.json", "--no-verify")
    proc = export(solver_cli, plan_path, "kubernetes", tmp_path / "k")
    assert not (tmp_path / "k" / "sites").exists() and "placement" not in proc.stdout
    assert SITE_LABEL not in "".join(p.read_text() for p in (tmp_path / "k").glob("*.yaml"))


def test_period_all_places_each_periods_owned_servers(solver_cli, tmp_path):
    plan_path, plan = solve(solver_cli, TWO_SITES_DAY, tmp_path / "plan.json", "--no-verify")
    proc = export(solver_cli, plan_path, "kubernetes", tmp_path / "k", "--period", "all")
    counts = {}
    for period in plan["periods"]:
        out = tmp_path / "k" / period["name"]
        sites = read_sites(out)
        check_placements(sites, period["fleet"], period["services"])
        for site in sites.values():
            assert (site["period"], site["period_hours"]) == (period["name"], period["hours"])
        counts[period["name"]] = sum(s["totals"]["servers_running"] for s in sites.values())
    assert proc.stdout.count("owned-site placement(s)") == len(plan["periods"])
    assert counts["night"] < counts["day"]  # a quarter of the demand at night runs on fewer servers


# ------------------------------------------------------------------ refusals
def _edited(plan: dict, edit) -> dict:
    plan = json.loads(json.dumps(plan))
    edit(plan)
    return plan


def _owned_line(plan: dict) -> dict:
    return next(f for f in plan["fleet"] if f["provider"] == "owned")


def _owned_assignment(plan: dict, service: str) -> dict:
    svc = next(s for s in plan["services"] if s["name"] == service)
    return next(a for a in svc["assignments"] if a["offer_id"].startswith("owned/"))


@pytest.mark.parametrize("edit, expect", [
    # 18 GPUs of replicas on one 8-GPU server.
    (lambda p: _owned_line(p).update(instances=1), "do not fit its 1 server(s) of 8 GPUs"),
    # 5 replicas of 3 GPUs are 15 GPUs, fewer than the 16 running, but 2 servers hold only 4 of them.
    (lambda p: (_owned_assignment(p, "chat").update(replicas=0),
                _owned_assignment(p, "assistant-70b").update(replicas=5, gpus_per_replica=3)),
     "no server has that many free"),
    # One replica larger than a server.
    (lambda p: _owned_assignment(p, "assistant-70b").update(gpus_per_replica=16), "takes 16 GPUs per server"),
])
@pytest.mark.parametrize("target", ["kubernetes", "skypilot"])
def test_replicas_that_do_not_fit_the_servers_are_refused(solver_cli, owned_cloud, tmp_path, edit, expect, target):
    plan = _edited(owned_cloud[1], edit)
    for s in plan["services"]:  # an assignment edited down to no replica leaves the plan
        s["assignments"] = [a for a in s["assignments"] if a["replicas"] >= 1]
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", target, "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and expect in proc.stderr and "To fix:" in proc.stderr
    assert "owned/dc-east-H100-SXM-8gpu" in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_user_file_in_sites_is_never_overwritten_and_a_gone_site_is_removed(solver_cli, owned_cloud, tmp_path):
    plan_path, _ = owned_cloud
    out = tmp_path / "k"
    (out / "sites").mkdir(parents=True)
    (out / "sites" / "dc-east.yaml").write_text("servers: [mine]\n")
    proc = run_cli(solver_cli, "export", str(plan_path), "--to", "kubernetes", "--out", str(out))
    assert proc.returncode == 2 and "sites/dc-east.yaml: exists and was not written" in proc.stderr
    assert (out / "sites" / "dc-east.yaml").read_text() == "servers: [mine]\n"
    (out / "sites" / "dc-east.yaml").unlink()
    export(solver_cli, plan_path, "kubernetes", out)
    assert (out / "sites" / "dc-east.yaml").exists()
    cloud_plan, _ = solve(solver_cli, CLOUD_ONLY, tmp_path / "cloud.json", "--no-verify")
    proc = export(solver_cli, cloud_plan, "kubernetes", out)
    assert "sites/dc-east.yaml" in proc.stdout and not (out / "sites").exists()  # removed, and its empty directory


# ------------------------------------------------------------------ the packing, directly
def _plan_with(size: int, servers: int, replica_gpus: list[int], spanning: tuple[int, int, int] | None = None
               ) -> tuple[dict, list]:
    """A plan of one owned offer (SIZE-GPU servers) with one-server replicas of the given GPUs and,
    optionally, (replicas, GPUs, servers each spans) of a multi-server service."""
    from solver.export.units import plan_units

    offer = f"owned/s-L4-{size}gpu"

    def service(name: str, gpus: int, replicas: int, span: int = 1) -> dict:
        shape = f"{gpus}gpu" + (f"x{span}inst" if span > 1 else "")
        return {"name": name, "model": None, "assignments": [
            {"config": f"{name}@{offer}:{shape}:measured", "offer_id": offer, "gpu": "L4", "gpus_per_replica": gpus,
             "instances_per_replica": span, "replicas": replicas}]}

    services = [service(f"svc{g}", g, n) for g, n in sorted(Counter(replica_gpus).items())]
    if spanning:
        services.append(service("big", spanning[1], spanning[0], spanning[2]))
    plan = {"status": "optimal", "workload": "w", "services": services, "fleet": [
        {"offer_id": offer, "provider": "owned", "name": offer.split("/")[1], "region": "s", "gpu": "L4",
         "gpus_per_instance": size, "instances": servers, "power_kw_per_instance": 1.0}]}
    return plan, list(plan_units(plan).units)


def test_replicas_spanning_servers_take_whole_servers_first():
    from solver.errors import InputError
    from solver.export.owned_sites import place_owned

    plan, units = _plan_with(8, 5, [1, 1, 1, 1], spanning=(2, 16, 2))  # 2 replicas of 16 GPUs over 2 servers each
    (site,) = place_owned(plan, units)
    assert [[(slot.unit, slot.node, slot.nodes) for slot in s.slots] for s in site.servers[:4]] == [
        [("big-owned-l4-x16", 0, 2)], [("big-owned-l4-x16", 1, 2)], [("big-owned-l4-x16", 0, 2)],
        [("big-owned-l4-x16", 1, 2)]]
    assert [len(s.slots) for s in site.servers] == [1, 1, 1, 1, 4] and site.gpus_used == 36
    plan, units = _plan_with(8, 4, [1, 1, 1, 1], spanning=(2, 16, 2))  # the spanning replicas fill all 4
    with pytest.raises(InputError, match="svc1-owned-l4-x1 needs 1 GPU"):
        place_owned(plan, units)
    plan, units = _plan_with(8, 3, [], spanning=(2, 16, 2))
    with pytest.raises(InputError, match="spanning 2 servers finds no 2 empty ones"):
        place_owned(plan, units)


def test_power_of_two_replicas_always_fit_when_their_gpus_do():
    """First-fit decreasing never fails where the GPUs suffice and every replica size divides the
    larger ones (powers of two up to the server's size): 400 random fleets, exactly full ones among them."""
    from solver.export.owned_sites import place_owned

    rng = random.Random(27)
    full = 0
    for _ in range(400):
        size = rng.choice([1, 2, 4, 8, 16])
        sizes = [g for g in (1, 2, 4, 8, 16) if g <= size]
        gpus = [rng.choice(sizes) for _ in range(rng.randint(1, 30))]
        servers = -(-sum(gpus) // size)  # just enough GPUs
        full += sum(gpus) == servers * size
        plan, units = _plan_with(size, servers, gpus)
        (site,) = place_owned(plan, units)
        assert site.gpus_used == sum(gpus) and all(s.gpus_used <= s.gpus for s in site.servers)
        assert sorted(len(slot.gpu_indices) for s in site.servers for slot in s.slots) == sorted(gpus)
    assert full > 20  # the tight case is exercised, not only fleets with spare GPUs


def test_one_gpu_short_is_refused():
    from solver.errors import InputError
    from solver.export.owned_sites import place_owned

    plan, units = _plan_with(8, 2, [4, 4, 4, 2, 2, 1])  # 17 GPUs on 16
    with pytest.raises(InputError, match="do not fit its 2 server"):
        place_owned(plan, units)


def test_the_placement_check_catches_a_wrong_file(owned_cloud, tmp_path):
    """check_placements is what the tests above rely on: a file that drops a replica, doubles a GPU
    or invents a server fails it."""
    _, plan = owned_cloud
    from solver.export import render_plan

    good = {n.removeprefix("sites/").removesuffix(".yaml"): yaml.safe_load(t)
            for n, t in render_plan(plan, "kubernetes").items() if n.startswith("sites/")}
    check_placements(good, plan["fleet"], plan["services"])
    breaks = [
        lambda s: s["dc-east"]["servers"][1]["replicas"].pop(),
        lambda s: s["dc-east"]["servers"][1]["replicas"][0].update(gpu_indices=[1]),
        lambda s: s["dc-east"]["servers"].append({**s["dc-east"]["servers"][0], "server": "extra"}),
    ]
    for brk in breaks:
        bad = json.loads(json.dumps(good))
        brk(bad)
        with pytest.raises(AssertionError):
            check_placements(bad, plan["fleet"], plan["services"])


def test_owned_pods_say_their_memory_is_a_default_not_a_host_share() -> None:
    """Owned servers state no host memory: the pod's request is a default per GPU, and its
    comment must not call it the replica's share of a host the plan knows nothing about."""
    from solver.export import render_plan
    from solver.plan import PlanOptions, plan
    from solver.documents.parse import load_document
    from solver.workload.documents import parse_workload

    result = plan(parse_workload(load_document(EXAMPLES / "owned-and-cloud.json")), PlanOptions(verify=False))
    files = render_plan(result.to_dict(), "kubernetes")
    owned = [text for name, text in files.items() if "-owned-" in name]
    assert owned
    for text in owned:
        assert "Memory request" in text and "share of the host" not in text, text[:600]
        assert "the offer states no host memory" in text
