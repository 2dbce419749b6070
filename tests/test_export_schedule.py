"""`export --period all --schedule keda`: a multi-period plan as one directory that KEDA switches at the boundaries.

Through the installed CLI on examples/periods-day.yaml's plan (night 8 h, day 10 h,
evening 6 h): every unit of every period is written once, each unit's ScaledObject has a
cron trigger per period it runs in with the plan's replica count, the windows tile the day
from --day-starts, and the ScaledObjects pass KEDA's own CRD schema (tests/schemas/,
KEDA v2.20.2, made strict as test_export.py does for its CRDs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES
from test_export import SCHEMAS, _need, _strict, k8s_docs, run_cli, solve_to_file, validate_k8s

SCALEDOBJECT_SCHEMA = SCHEMAS / "scaledobject-v1alpha1-keda-v2.20.2.json"
MINUTES_PER_DAY = 24 * 60
SCHEDULE = ("--period", "all", "--schedule", "keda")


@pytest.fixture(scope="module")
def periods_plan(solver_cli, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sched")
    solve_to_file(solver_cli, EXAMPLES / "periods-day.yaml", d / "plan.json")
    return d / "plan.json"


@pytest.fixture(scope="module")
def scheduled(solver_cli, periods_plan, tmp_path_factory):
    """(plan, export directory, stdout, stderr) of a scheduled export starting at 22:00 in Berlin."""
    out = tmp_path_factory.mktemp("sched-out") / "k8s"
    proc = run_cli(solver_cli, "export", str(periods_plan), "--to", "kubernetes", "--out", str(out), *SCHEDULE,
                   "--day-starts", "22:00", "--timezone", "Europe/Berlin")
    assert proc.returncode == 0, proc.stderr
    return json.loads(periods_plan.read_text()), out, proc.stdout, proc.stderr


def _scaled_objects(out: Path) -> dict[str, dict]:
    docs = k8s_docs([out / "keda-schedule.yaml"])
    assert all(d["kind"] == "ScaledObject" for d in docs)
    return {d["metadata"]["name"]: d for d in docs}


def _workloads(out: Path) -> dict[str, dict]:
    docs = k8s_docs(sorted(p for p in out.glob("*.yaml") if p.name != "keda-schedule.yaml"))
    return {d["metadata"]["name"]: d for d in docs if d["kind"] in ("Deployment", "LeaderWorkerSet")}


def _minute(cron: str) -> int:
    """`M H * * *` -> minutes after midnight (the only form the export writes)."""
    minute, hour, *rest = cron.split()
    assert rest == ["*", "*", "*"], cron
    return int(hour) * 60 + int(minute)


def _planned_replicas(plan: dict) -> dict[tuple[str, str, bool], dict[str, int]]:
    """(service, offer, spot) -> {period: replicas}, from the plan's periods (the example runs one
    configuration per offer, so these name a unit)."""
    out: dict = {}
    for p in plan["periods"]:
        for s in p["services"]:
            for a in s["assignments"]:
                if a["replicas"]:
                    out.setdefault((s["name"], a["offer_id"], bool(a.get("spot"))), {})[p["name"]] = a["replicas"]
    return out


def test_every_unit_of_every_period_is_written_once(scheduled):
    plan, out, stdout, _ = scheduled
    workloads = _workloads(out)
    planned = _planned_replicas(plan)
    assert len(workloads) == len(planned)  # one object per (service, configuration, spot), none twice
    assert set(_scaled_objects(out)) == set(workloads)
    # Every workload starts at zero: KEDA sets the current period's count.
    assert all(w["spec"]["replicas"] == 0 for w in workloads.values())
    assert f"wrote {len(list(out.glob('*.yaml')))} kubernetes file(s) to {out}:" in stdout
    assert not [p for p in out.iterdir() if p.is_dir()]  # one directory, no per-period sub-directories


def test_triggers_reproduce_the_plans_replicas_per_period(scheduled):
    plan, out, _, _ = scheduled
    workloads = _workloads(out)
    planned = _planned_replicas(plan)
    got = {}
    for name, so in _scaled_objects(out).items():
        w = workloads[name]
        assert so["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert so["spec"]["minReplicaCount"] == 0
        triggers = {t["name"]: int(t["metadata"]["desiredReplicas"]) for t in so["spec"]["triggers"]}
        assert all(t["type"] == "cron" for t in so["spec"]["triggers"])
        assert so["spec"]["maxReplicaCount"] == max(triggers.values())
        annotations = w["metadata"]["annotations"]
        got[(annotations["fleet-planner/service"], annotations["fleet-planner/offer"], name.endswith("-spot"))] = triggers
    assert got == planned


def test_windows_tile_the_day_from_day_starts(scheduled):
    plan, out, _, _ = scheduled
    windows = {}
    for so in _scaled_objects(out).values():
        for t in so["spec"]["triggers"]:
            meta = t["metadata"]
            assert meta["timezone"] == "Europe/Berlin"
            window = (_minute(meta["start"]), _minute(meta["end"]))
            assert windows.setdefault(t["name"], window) == window  # a period has one window for every unit
    start = 22 * 60
    for p in plan["periods"]:  # in order: each starts where the previous ended, the first at --day-starts
        end = (start + round(p["hours"] * 60)) % MINUTES_PER_DAY
        assert windows[p["name"]] == (start, end), p["name"]
        start = end
    assert start == 22 * 60  # back at the first period's start: 24 h


def test_route_weights_are_not_pretended(scheduled):
    """A service whose units change across periods gets no fixed-weight route, and is told so."""
    plan, out, _, stderr = scheduled
    routes = [d for d in k8s_docs(sorted(out.glob("*.yaml"))) if d["kind"] == "HTTPRoute"]
    changing = {s for s, _, _ in _planned_replicas(plan)}  # both services of the example change units
    assert not routes
    for service in changing:
        assert f"service '{service}': no weighted HTTPRoute in the scheduled export" in stderr
        assert "No HTTPRoute: the units of" in (out / f"{service}-service.yaml").read_text()


def test_scheduled_objects_validate(scheduled):
    jsonschema = _need("jsonschema", "jsonschema")
    _, out, _, _ = scheduled
    schema = _strict(json.loads(SCALEDOBJECT_SCHEMA.read_text()))
    objects = list(_scaled_objects(out).values())
    for so in objects:
        jsonschema.validate(so, schema)
    validate_k8s([d for d in k8s_docs(sorted(out.glob("*.yaml"))) if d["kind"] != "ScaledObject"])
    # The schema catches what KEDA would refuse: a misspelt field, a missing trigger type.
    bad = json.loads(json.dumps(objects[0]))
    bad["spec"]["minReplicas"] = bad["spec"].pop("minReplicaCount")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    bad = json.loads(json.dumps(objects[0]))
    del bad["spec"]["triggers"][0]["type"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_timezone_defaults_to_utc(solver_cli, periods_plan, tmp_path):
    proc = run_cli(solver_cli, "export", str(periods_plan), "--to", "kubernetes", "--out", str(tmp_path / "k"),
                   "--schedule", "keda", "--day-starts", "06:30")  # --period left out: the schedule is every period
    assert proc.returncode == 0, proc.stderr
    triggers = [t["metadata"] for so in _scaled_objects(tmp_path / "k").values() for t in so["spec"]["triggers"]]
    assert {t["timezone"] for t in triggers} == {"Etc/UTC"}
    assert "30 6 * * *" in {t["start"] for t in triggers}


@pytest.mark.parametrize("flags, flag, says", [
    (["--day-starts", "25:00"], "--day-starts", "'25:00', not a time of day"),
    (["--day-starts", "6"], "--day-starts", "'6', not a time of day"),
    ([], "--day-starts", "is required with --schedule"),
    (["--day-starts", "06:00", "--timezone", "Mars/Olympus"], "--timezone", "'Mars/Olympus' is not a time zone"),
    (["--day-starts", "06:00", "--timezone", ""], "--timezone", "'' is not a time zone"),
])
def test_bad_schedule_flags_exit_2_naming_the_flag(solver_cli, periods_plan, tmp_path, flags, flag, says):
    proc = run_cli(solver_cli, "export", str(periods_plan), "--to", "kubernetes", "--out", str(tmp_path / "k"),
                   *SCHEDULE, *flags)
    assert proc.returncode == 2 and f"  - {flag}: " in proc.stderr and says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "To fix:" in proc.stderr and not (tmp_path / "k").exists()


@pytest.mark.parametrize("args, flag", [
    (["--to", "kubernetes", "--period", "all", "--day-starts", "06:00"], "--day-starts"),
    (["--to", "kubernetes", "--period", "all", "--timezone", "Etc/UTC"], "--timezone"),
    (["--to", "kubernetes", "--period", "day", "--schedule", "keda", "--day-starts", "06:00"], "--period"),
    (["--to", "skypilot", "--period", "all", "--schedule", "keda", "--day-starts", "06:00"], "--schedule"),
    (["--to", "kubernetes", "--period", "all", "--schedule", "cron", "--day-starts", "06:00"], "--schedule"),
])
def test_schedule_flags_out_of_place_are_refused(solver_cli, periods_plan, tmp_path, args, flag):
    proc = run_cli(solver_cli, "export", str(periods_plan), "--out", str(tmp_path / "k"), *args)
    assert proc.returncode == 2 and f"  - {flag}: " in proc.stderr, proc.stderr
    assert not (tmp_path / "k").exists()


def test_single_period_plan_is_refused(solver_cli, tmp_path):
    solve_to_file(solver_cli, EXAMPLES / "s1-throughput.json", tmp_path / "plan.json")
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", "kubernetes", "--out",
                   str(tmp_path / "k"), "--schedule", "keda", "--day-starts", "06:00")
    assert proc.returncode == 2, proc.stderr
    assert "--schedule: needs a plan with two or more periods: this plan has a single period" in proc.stderr
    assert not (tmp_path / "k").exists()


def test_periods_that_are_not_a_day_are_refused(solver_cli, periods_plan, tmp_path):
    plan = json.loads(periods_plan.read_text())
    plan["periods"][1]["hours"] = 12  # 8 + 12 + 6 = 26 h
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", "kubernetes", "--out",
                   str(tmp_path / "k"), *SCHEDULE, "--day-starts", "06:00")
    assert proc.returncode == 2 and "periods: sum to 26 h, not a day" in proc.stderr, proc.stderr
    plan["periods"][1]["hours"] = 9.99  # not a whole number of minutes; 26 h back to 23.99 + the rest
    plan["periods"][2]["hours"] = 6.01
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", "kubernetes", "--out",
                   str(tmp_path / "k"), *SCHEDULE, "--day-starts", "06:00")
    assert proc.returncode == 2 and "periods[1].hours: is 9.99 h, not a whole number of minutes" in proc.stderr
    assert not (tmp_path / "k").exists()


# A 405B model at fp16 needs two 8-GPU instances per replica: a LeaderWorkerSet, scheduled through its
# scale subresource (lws v1: specReplicasPath .spec.replicas), not a Deployment.
MULTI_NODE_DAY = {
    "name": "multi-node-day",
    "periods": [{"name": "night", "hours": 12}, {"name": "day", "hours": 12}],
    "services": [{"name": "llama-405b", "model": "llama-3.1-405b", "precisions": ["fp16"], "engine": "vllm",
                  "demand": {"requests_per_s": 1.0, "prompt_tokens": 512, "output_tokens": 128,
                             "profile": {"night": 0.2}}, "min_replicas": 1}],
    "constraints": {"gpu_types": ["H100-SXM"], "providers": ["aws"]},
}


def test_leaderworkersets_are_scaled_through_their_scale_subresource(solver_cli, tmp_path):
    jsonschema = _need("jsonschema", "jsonschema")
    (tmp_path / "w.json").write_text(json.dumps(MULTI_NODE_DAY))
    solve_to_file(solver_cli, tmp_path / "w.json", tmp_path / "plan.json")
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", "kubernetes", "--out",
                   str(tmp_path / "k"), *SCHEDULE, "--day-starts", "08:00")
    assert proc.returncode == 0, proc.stderr
    lws = [d for d in k8s_docs(sorted((tmp_path / "k").glob("*.yaml"))) if d["kind"] == "LeaderWorkerSet"]
    assert len(lws) == 1 and lws[0]["spec"]["replicas"] == 0
    (so,) = _scaled_objects(tmp_path / "k").values()
    assert so["spec"]["scaleTargetRef"] == {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                            "name": lws[0]["metadata"]["name"]}
    assert [(t["metadata"]["start"], t["metadata"]["end"]) for t in so["spec"]["triggers"]] == [
        ("0 8 * * *", "0 20 * * *"), ("0 20 * * *", "0 8 * * *")]
    jsonschema.validate(so, _strict(json.loads(SCALEDOBJECT_SCHEMA.read_text())))
    validate_k8s(lws)
