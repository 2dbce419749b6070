"""Multi-period plans through the installed CLI: bad input (exit 2, the field named, a fix,
never a traceback), `--current FLEET`, and the per-period table with the diff."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from test_bad_input import assert_bad_input, run_cli, solve_dict

OFFERS = [{"provider": "x", "name": "l4", "region": "r1", "gpu": "L4", "gpus_per_instance": 1,
           "price_usd_per_hour": 10.0, "spot_price_usd_per_hour": 3.0, "reserved_3y_price_usd_per_hour": 4.0}]


def workload(**extra) -> dict:
    w = {"name": "day", "periods": [{"name": "peak", "hours": 8}, {"name": "off", "hours": 16}],
         "services": [{"name": "a", "demand": {"items_per_min": 100.0, "profile": {"peak": 2.0}},
                       "profiles": [{"gpu": "L4", "items_per_min": 50.0}]}],
         "constraints": {"pricing_tiers": ["on_demand", "spot", "reserved_3y"]},
         "catalog": {"offers": OFFERS}}
    w.update(extra)
    return w


def test_profile_naming_an_unknown_period(tmp_path: Path) -> None:
    w = workload()
    w["services"][0]["demand"]["profile"] = {"peek": 2.0}
    assert_bad_input(solve_dict(tmp_path, w), "services[0].demand.profile.peek", "unknown period 'peek'", "'peak'")


def test_profile_without_periods(tmp_path: Path) -> None:
    w = workload()
    del w["periods"]
    assert_bad_input(solve_dict(tmp_path, w), "services[0].demand.profile.peak", "declares no periods")


def test_negative_multiplier(tmp_path: Path) -> None:
    w = workload()
    w["services"][0]["demand"]["profile"] = {"peak": -1.0}
    assert_bad_input(solve_dict(tmp_path, w), "services[0].demand.profile.peak", "greater than or equal to 0")


@pytest.mark.parametrize("hours", [0, -8])
def test_hours_not_positive(tmp_path: Path, hours: float) -> None:
    w = workload()
    w["periods"][0]["hours"] = hours
    assert_bad_input(solve_dict(tmp_path, w), "periods[0].hours", "greater than 0")


def test_repeated_period_names(tmp_path: Path) -> None:
    w = workload()
    w["periods"][1]["name"] = "peak"
    assert_bad_input(solve_dict(tmp_path, w), "periods", "repeated: peak")


def test_current_fleet_naming_an_unknown_offer(tmp_path: Path) -> None:
    w = workload(current_fleet=[{"offer_id": "x/l44", "instances": 2}])
    assert_bad_input(solve_dict(tmp_path, w), "current_fleet[0].offer_id", "unknown offer 'x/l44'", "'x/l4'")


def test_current_fleet_file_naming_an_unknown_offer(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_text(json.dumps(workload()))
    (tmp_path / "fleet.json").write_text(json.dumps([{"offer_id": "y/nope", "instances": 1}]))
    proc = run_cli("solve", str(tmp_path / "w.json"), "--current", str(tmp_path / "fleet.json"))
    assert_bad_input(proc, "current_fleet[0].offer_id", "unknown offer 'y/nope'")


def test_current_fleet_file_missing_or_malformed(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_text(json.dumps(workload()))
    proc = run_cli("solve", str(tmp_path / "w.json"), "--current", str(tmp_path / "none.json"))
    assert_bad_input(proc, "--current", "file not found")
    (tmp_path / "bad.json").write_text('[{"offer_id": "x/l4", "instances": 1,}]')
    proc = run_cli("solve", str(tmp_path / "w.json"), "--current", str(tmp_path / "bad.json"))
    assert_bad_input(proc, "--current", "line 1, column")
    (tmp_path / "obj.json").write_text('{"fleet": []}')
    proc = run_cli("solve", str(tmp_path / "w.json"), "--current", str(tmp_path / "obj.json"))
    assert_bad_input(proc, "--current", "expected a list")


def test_running_replicas_that_do_not_fit(tmp_path: Path) -> None:
    w = workload(current_fleet=[{"offer_id": "x/l4", "instances": 1, "replicas": [{"service": "a", "count": 2}]}])
    assert_bad_input(solve_dict(tmp_path, w), "current_fleet[0].replicas", "take 2 GPUs")


@pytest.mark.parametrize("share", [1.5, -0.1])
def test_spot_share_outside_zero_one(tmp_path: Path, share: float) -> None:
    w = workload()
    w["constraints"]["max_spot_share"] = share
    assert_bad_input(solve_dict(tmp_path, w), "constraints.max_spot_share")


def test_spot_share_without_spot(tmp_path: Path) -> None:
    w = workload()
    w["constraints"] = {"pricing_tiers": ["on_demand"], "max_spot_share": 0.5}
    assert_bad_input(solve_dict(tmp_path, w), "constraints", "max_spot_share", "spot is not an allowed pricing tier")


def test_unknown_tier(tmp_path: Path) -> None:
    w = workload()
    w["constraints"]["pricing_tiers"] = ["on_demand", "reserved_5y"]
    assert_bad_input(solve_dict(tmp_path, w), "constraints.pricing_tiers[1]")


def test_negative_change_cost(tmp_path: Path) -> None:
    w = workload(change_costs={"add_instance_usd": -1})
    assert_bad_input(solve_dict(tmp_path, w), "change_costs.add_instance_usd")


def test_table_and_json_with_a_running_fleet(tmp_path: Path) -> None:
    w = workload()
    w["constraints"]["max_spot_share"] = 0.5
    (tmp_path / "w.json").write_text(json.dumps(w))
    (tmp_path / "fleet.json").write_text(json.dumps({"current_fleet": [
        {"offer_id": "x/l4", "instances": 3, "replicas": [{"service": "a", "count": 3}]}]}))
    table = run_cli("solve", str(tmp_path / "w.json"), "--current", str(tmp_path / "fleet.json"))
    assert table.returncode == 0, table.stderr
    for needle in ("peak", "off", "Reservations", "Changes against the running fleet", "Rollout, make before break",
                   "First period (peak"):
        assert needle in table.stdout, table.stdout
    proc = run_cli("solve", str(tmp_path / "w.json"), "--current", str(tmp_path / "fleet.json"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    for key in ("periods", "reservations", "horizon_cost_usd", "changes", "rollout"):
        assert key in d
    assert [p["name"] for p in d["periods"]] == ["peak", "off"]
    assert set(d["periods"][0]) >= {"name", "hours", "fleet", "total_price_usd_per_hour"}
    assert set(d["reservations"][0]) >= {"offer_id", "instances", "term"}
    assert {c["action"] for c in d["changes"]} <= {"add", "remove", "keep"}
    assert set(d["changes"][0]) >= {"offer_id", "action", "instances"}


def test_plans_without_periods_keep_their_json(tmp_path: Path) -> None:
    """No periods, tiers or running fleet: none of the new keys."""
    w = workload()
    for key in ("periods",):
        del w[key]
    del w["services"][0]["demand"]["profile"]
    del w["constraints"]
    proc = solve_dict(tmp_path, w)
    out = subprocess.run([*proc.args, "--format", "json"], capture_output=True, text=True, timeout=120)
    d = json.loads(out.stdout)
    assert not {"periods", "reservations", "horizon_cost_usd", "changes", "rollout"} & set(d)


def test_the_readme_periods_commands_run_as_documented() -> None:
    """Issue 25, item 6: the README's first periods command (and the example's own header)
    exited 2 (change_costs without current_fleet); both documented commands now plan."""
    root = Path(__file__).resolve().parents[1]
    proc = run_cli("solve", str(root / "examples/periods-day.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("image-and-embedding-day: OPTIMAL (proven optimal) — $145.30 over 24 hours"), \
        proc.stdout[:300]
    assert "Changes against the running fleet" not in proc.stdout
    proc = run_cli("solve", str(root / "examples/periods-day.yaml"), "--current", str(root / "examples/running-fleet.json"))
    assert proc.returncode == 0, proc.stderr
    assert "Changes against the running fleet (first period):" in proc.stdout and "Rollout" in proc.stdout
