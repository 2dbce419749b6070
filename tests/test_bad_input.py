"""Bad input through the installed CLI: exit code 2, no traceback, the field path and a fix.

One test per class of bad input; each runs `solver-cli solve FILE` as a subprocess,
exactly as a user would, and reads what the user reads (stderr).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXIT_INPUT, EXIT_INFEASIBLE = 2, 3
ROOT = Path(__file__).resolve().parents[1]


def _cli() -> str:
    # The console script next to the interpreter running the tests (the project's venv).
    beside = Path(sys.executable).parent / "solver-cli"
    found = str(beside) if beside.exists() else shutil.which("solver-cli")
    assert found, "solver-cli is not installed: run `pip install -e .[test]` first"
    return found


def solve(tmp_path: Path, text: str, name: str = "workload.json", *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_text(text)
    return run_cli("solve", str(path), *extra)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([_cli(), *args], capture_output=True, text=True, timeout=120)


def solve_dict(tmp_path: Path, workload: dict) -> subprocess.CompletedProcess:
    return solve(tmp_path, json.dumps(workload))


def assert_bad_input(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit 2, no traceback, a fix, and every needle (field path, names) in the message."""
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_INPUT, out
    assert "Traceback" not in out, out
    assert "To fix:" in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, f"{needle!r} not in: {proc.stderr}"
    return proc.stderr


def service(**overrides) -> dict:
    svc = {"name": "img", "demand": {"items_per_min": 10.0},
           "profiles": [{"gpu": "A10", "items_per_min": 5.0, "latency_ms": 100.0}]}
    svc.update(overrides)
    return svc


def llm_service(**overrides) -> dict:
    svc = {"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16"],
           "demand": {"requests_per_s": 1.0, "prompt_tokens": 512, "output_tokens": 256}}
    svc.update(overrides)
    return svc


# ---------------------------------------------------------------- syntax
def test_malformed_json_gives_line_and_column(tmp_path: Path) -> None:
    proc = solve(tmp_path, '{"services": [\n  {"name": "a",}\n]}')
    assert_bad_input(proc, "malformed JSON", "line 2", "column 16", "trailing comma")


def test_malformed_yaml_gives_line_and_column(tmp_path: Path) -> None:
    proc = solve(tmp_path, "services:\n  - name: a\n   demand: {items_per_min: 3}\n", "workload.yaml")
    assert_bad_input(proc, "malformed YAML", "line 3", "column", "YAML syntax")


@pytest.mark.parametrize("text, suffix", [("[1, 2]", ".json"), ("42", ".json"), ("- a\n- b\n", ".yaml")])
def test_non_object_top_level(tmp_path: Path, text: str, suffix: str) -> None:
    proc = solve(tmp_path, text, "workload" + suffix)
    assert_bad_input(proc, "workload", "must be an object")


def test_missing_workload_file(tmp_path: Path) -> None:
    proc = run_cli("solve", str(tmp_path / "nowhere.json"))
    assert_bad_input(proc, "file not found", "nowhere.json", "check the path")


def test_missing_catalog_file(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service()], "catalog": {"file": "no-such-catalog.json"}})
    assert_bad_input(proc, "catalog.file", "no-such-catalog.json", "file not found")


# ---------------------------------------------------------------- names
def test_unknown_model_suggests_the_closest(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [llm_service(model="llama-3.1-8bb")]})
    assert_bad_input(proc, "services[0].model", "'llama-3.1-8bb'", "did you mean 'llama-3.1-8b'")


def test_unknown_gpu_in_a_profile_suggests_the_closest(tmp_path: Path) -> None:
    svc = service(profiles=[{"gpu": "A100-80G", "items_per_min": 5.0}])
    proc = solve_dict(tmp_path, {"services": [svc]})
    assert_bad_input(proc, "services[0].profiles[0].gpu", "'A100-80G'", "did you mean 'A100-80GB'")


def test_an_ambiguous_gpu_in_a_quota_lists_the_candidates(tmp_path: Path) -> None:
    # Issue 25: "H100" suggested H200 first; it is one of three H100 boards, and none is guessed.
    proc = solve_dict(tmp_path, {"services": [service()], "constraints": {"gpu_quotas": {"H100": 4}}})
    assert_bad_input(proc, "constraints.gpu_quotas.H100", "is ambiguous", "'H100-NVL' or 'H100-PCIe' or 'H100-SXM'",
                     "To fix: write one of H100-NVL, H100-PCIe, H100-SXM")
    assert "H200" not in proc.stderr


def test_unknown_gpu_in_allowed_gpu_types(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service()], "constraints": {"gpu_types": ["A10", "L4OS"]}})
    assert_bad_input(proc, "constraints.gpu_types[1]", "did you mean", "'L40S'")


def test_unknown_gpu_in_an_inline_offer(tmp_path: Path) -> None:
    offer = {"provider": "p", "name": "x", "gpu": "A1O", "gpus_per_instance": 1, "price_usd_per_hour": 1.0}
    proc = solve_dict(tmp_path, {"services": [service()], "catalog": {"offers": [offer]}})
    assert_bad_input(proc, "catalog.offers[0].gpu", "did you mean 'A10'")


def test_unknown_offer_in_offer_quotas(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service()], "constraints": {"offer_quotas": {"aws/g5.xlarg": 2}}})
    assert_bad_input(proc, "constraints.offer_quotas.aws/g5.xlarg", "unknown offer", "did you mean 'aws/g5.xlarge'")


def test_unknown_provider(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service()], "constraints": {"providers": ["aw"]}})
    assert_bad_input(proc, "constraints.providers[0]", "'aw'", "did you mean 'aws'")


def test_unknown_region(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service()], "constraints": {"regions": ["us-east-9"]}})
    assert_bad_input(proc, "constraints.regions[0]", "'us-east-9'", "did you mean")


# ---------------------------------------------------------------- numbers
def test_negative_number(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service(demand={"items_per_min": -10.0})]})
    assert_bad_input(proc, "services[0].demand.items_per_min", "greater than or equal to 0")


def test_negative_quota(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service()], "constraints": {"gpu_quotas": {"A10": -1}}})
    assert_bad_input(proc, "constraints.gpu_quotas", "negative", "use 0 or more")


@pytest.mark.parametrize("literal", ["NaN", "-Infinity"])
def test_non_finite_json_literal_names_the_field(tmp_path: Path, literal: str) -> None:
    text = '{"services": [{"name": "img", "demand": {"items_per_min": %s},\n' \
           '  "profiles": [{"gpu": "A10", "items_per_min": 5}]}]}' % literal
    proc = solve(tmp_path, text)
    assert_bad_input(proc, "services[0].demand.items_per_min", "finite number")


@pytest.mark.parametrize("literal", [".nan", "-.inf"])
def test_non_finite_yaml_value_names_the_field(tmp_path: Path, literal: str) -> None:
    text = f"services:\n  - name: img\n    demand: {{items_per_min: {literal}}}\n" \
           "    profiles: [{gpu: A10, items_per_min: 5}]\n"
    proc = solve(tmp_path, text, "workload.yaml")
    assert_bad_input(proc, "services[0].demand.items_per_min", "not a finite number", "use a finite number")


@pytest.mark.parametrize("field, value, path", [
    ("demand", {"items_per_min": 1e12}, "services[0].demand.items_per_min"),
    ("min_replicas", 10**9, "services[0].min_replicas"),
])
def test_absurd_number_asks_to_check_units(tmp_path: Path, field: str, value, path: str) -> None:
    proc = solve_dict(tmp_path, {"services": [service(**{field: value})]})
    assert_bad_input(proc, path, "less than or equal to", "check the units")


def test_absurd_budget(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service()], "constraints": {"budget_usd_per_hour": 1e12}})
    assert_bad_input(proc, "constraints.budget_usd_per_hour", "check the units")


# ---------------------------------------------------------------- contradictions
def test_max_replicas_below_min_replicas(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service(min_replicas=3, max_replicas=2)]})
    assert_bad_input(proc, "services[0]", "max_replicas (2) is below min_replicas (3)", "raise max_replicas")


def test_class_shares_not_summing_to_one(tmp_path: Path) -> None:
    classes = [{"name": "short", "share": 0.5, "prompt_tokens": 100, "output_tokens": 50},
               {"name": "long", "share": 0.4, "prompt_tokens": 4000, "output_tokens": 500}]
    proc = solve_dict(tmp_path, {"services": [llm_service(demand={"requests_per_s": 1.0, "classes": classes})]})
    assert_bad_input(proc, "services[0].demand", "sum to 0.9", "add up to 1")


def test_duplicate_service_names(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service(), service()]})
    assert_bad_input(proc, "services", "unique", "img", "rename")
    assert any(line.strip().startswith("- services") for line in proc.stderr.splitlines()), \
        f"no field path: {proc.stderr}"


# ---------------------------------------------------------------- empty, unknown, wrong type
@pytest.mark.parametrize("text, needle", [("{}", "services"), ('{"services": []}', "services"), ("  \n", "empty")])
def test_empty_workload(tmp_path: Path, text: str, needle: str) -> None:
    assert_bad_input(solve(tmp_path, text), needle)


def test_unknown_field(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, {"services": [service(replicas=3)]})
    assert_bad_input(proc, "services[0].replicas", "unknown field", "solver-cli schema")


@pytest.mark.parametrize("workload, path", [
    ({"services": [service(demand={"items_per_min": "ten"})]}, "services[0].demand.items_per_min"),
    ({"services": [service(min_replicas=1.5)]}, "services[0].min_replicas"),
    ({"services": "img"}, "services"),
    ({"services": [service()], "constraints": ["A10"]}, "constraints"),
    ({"services": [service()], "constraints": {"allow_consumer_gpus": "maybe"}}, "constraints.allow_consumer_gpus"),
    ({"services": [service(name=5)]}, "services[0].name"),
])
def test_wrong_type(tmp_path: Path, workload: dict, path: str) -> None:
    assert_bad_input(solve_dict(tmp_path, workload), path)


# ---------------------------------------------------------------- no feasible fleet
INFEASIBLE_70B_ON_A10 = {
    "services": [{"name": "big-chat", "model": "llama-2-70b", "precisions": ["fp16"],
                  "demand": {"requests_per_s": 1.0, "prompt_tokens": 512, "output_tokens": 256}}],
    "constraints": {"gpu_types": ["A10"]},
}


def test_infeasible_workload_exits_3_naming_service_constraint_and_fix(tmp_path: Path) -> None:
    proc = solve_dict(tmp_path, INFEASIBLE_70B_ON_A10)
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_INFEASIBLE, out
    assert "Traceback" not in out
    assert "big-chat" in out
    assert "llama-2-70b" in out and "fp16" in out
    assert "vram" in out.lower() or "memory" in out.lower()
    assert "fp8" in out and "GB" in out  # the fix: allow fp8, or offers with more memory


def test_infeasible_workload_as_json(tmp_path: Path) -> None:
    proc = solve(tmp_path, json.dumps(INFEASIBLE_70B_ON_A10), "workload.json", "--format", "json")
    assert proc.returncode == EXIT_INFEASIBLE, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == "infeasible"
    reasons = doc["infeasibility"]
    assert [r["service"] for r in reasons] == ["big-chat"]
    assert reasons[0]["constraint"] == "vram[big-chat]"
    assert "fp8" in reasons[0]["fix"]


def test_infeasible_request_class_names_the_service_and_the_class(tmp_path: Path) -> None:
    # The long class's only measurement misses the latency SLO: no configuration serves it.
    classes = [{"name": "short", "share": 0.5, "prompt_tokens": 1, "output_tokens": 1},
               {"name": "long", "share": 0.5, "prompt_tokens": 1, "output_tokens": 1}]
    svc = {"name": "thumbnails", "demand": {"items_per_min": 10.0, "classes": classes}, "slo": {"latency_ms": 100.0},
           "profiles": [{"gpu": "A10", "request_class": "short", "items_per_min": 20.0, "latency_ms": 50.0},
                        {"gpu": "A10", "request_class": "long", "items_per_min": 20.0, "latency_ms": 150.0}]}
    offer = {"provider": "p", "name": "a10", "gpu": "A10", "gpus_per_instance": 1, "price_usd_per_hour": 1.0}
    proc = solve_dict(tmp_path, {"services": [svc], "catalog": {"offers": [offer]}})
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_INFEASIBLE, out
    assert "thumbnails" in out and "long" in out, out
    assert "latency" in out, out


def test_unknown_fields_get_did_you_mean_at_every_depth(solver_cli, tmp_path):
    import json

    path = tmp_path / "typos.json"
    path.write_text(json.dumps({"services": [{"name": "a", "modle": "llama-3.1-8b",
                                              "demand": {"requests_per_s": 1, "prompt_tokns": 3, "output_tokens": 8},
                                              "slo": {"ttf_ms": 300}}],
                                "constraint": {}, "solver": {"time_limt_s": 3}}))
    proc = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    for field, suggestion in (("services[0].modle", "'model'"), ("services[0].demand.prompt_tokns", "'prompt_tokens'"),
                              ("services[0].slo.ttf_ms", "'ttft_ms'"), ("constraint", "'constraints'"),
                              ("solver.time_limt_s", "'time_limit_s'")):
        line = next(x for x in proc.stderr.splitlines() if f"- {field}:" in x)
        assert "did you mean" in line and suggestion in line, line


def test_field_and_name_errors_arrive_together(solver_cli, tmp_path):
    import json

    path = tmp_path / "both.json"
    path.write_text(json.dumps({"services": [{"name": "a", "model": "lama-3-8b", "demand": {
        "requests_per_s": -1, "prompt_tokens": 3, "output_tokens": 3}}], "constraints": {"providers": ["gpc"]}}))
    proc = subprocess.run([solver_cli, "solve", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    for field in ("services[0].demand.requests_per_s", "services[0].model", "constraints.providers[0]"):
        assert f"- {field}:" in proc.stderr, (field, proc.stderr)


def test_provider_and_region_names_ignore_case():
    from solver.plan import plan
    from solver.workload.documents import parse_workload

    w = {"services": [{"name": "a", "model": "llama-3.1-8b", "precisions": ["fp16"],
                       "demand": {"requests_per_s": 1, "prompt_tokens": 256, "output_tokens": 128}}],
         "constraints": {"providers": ["GCP"], "regions": ["US-Central1"]}}
    r = plan(parse_workload(w))
    assert r.fleet and all(f.provider == "gcp" and f.region == "us-central1" for f in r.fleet)


_OFFER = {"provider": "p", "name": "n", "gpu": "H100-SXM", "gpus_per_instance": 1, "price_usd_per_hour": 2}
_GPU = {"name": "X-1", "memory_gib": 80, "memory_bandwidth_gbs": 2000, "fp16_tflops": 500}


@pytest.mark.parametrize("catalog, needles", [
    ({"gpus": [_GPU]}, ("catalog.gpus", "add catalog.offers")),
    ({"file": "cat.json", "offers": [_OFFER]}, ("catalog.offers", "catalog.file", "put them in the catalog file")),
    ({"file": "cat.json", "gpus": [_GPU]}, ("catalog.gpus", "catalog.file")),
    ({"source": "default", "offers": [_OFFER]}, ("catalog.source is 'default'", "catalog.offers", "'inline'")),
])
def test_catalog_parts_that_would_be_ignored_are_refused(tmp_path: Path, catalog: dict, needles) -> None:
    # Before, each of these planned on another catalog than the one written, without a word.
    (tmp_path / "cat.json").write_text(json.dumps({"offers": [_OFFER]}))
    assert_bad_input(solve_dict(tmp_path, {"services": [llm_service()], "catalog": catalog}), *needles)


def test_change_costs_without_a_running_fleet_wait_for_one(tmp_path: Path) -> None:
    """Issue 25, item 6: change costs in the file are the price of changing whatever fleet
    `--current` (or a gRPC request) brings; without one they are unused and must not switch
    planners: the plan is the one without them, to the line (timings aside)."""
    w = {"services": [llm_service()], "change_costs": {"add_instance_usd": 1, "max_changed_instances": 0}}
    with_costs = solve(tmp_path, json.dumps(w), "with.json", "--format", "json", "--no-verify")
    without = solve(tmp_path, json.dumps({"services": [llm_service()]}), "without.json", "--format", "json",
                    "--no-verify")
    assert with_costs.returncode == 0 and without.returncode == 0, with_costs.stderr + without.stderr
    a, b = json.loads(with_costs.stdout), json.loads(without.stdout)
    assert (a["status"], a["total_price_usd_per_hour"], a["fleet"]) == (b["status"], b["total_price_usd_per_hour"], b["fleet"])
    assert "periods" not in a and "periods" not in b  # today's single-hour planner for both


@pytest.mark.parametrize("value, fix", [([0.0001], "use a number"), (0.5, "use a smaller value"),
                                         (-0.1, "use a larger value"), ("x", "use a number")])
def test_a_bad_relative_gap_names_the_field_and_the_fix(tmp_path: Path, value, fix: str) -> None:
    # relative_gap > 0 also starts large solves from warm starts: bad values never get that far.
    proc = solve_dict(tmp_path, {"services": [service()], "solver": {"relative_gap": value}})
    assert_bad_input(proc, "solver.relative_gap", f"To fix: {fix}")


@pytest.mark.parametrize("args, flag", [
    (("solve", "examples/s3-big-model.json", "--time-limit", "nan"), "--time-limit"),
    (("solve", "examples/s3-big-model.json", "--time-limit", "1e309"), "--time-limit"),
    (("solve", "examples/s3-big-model.json", "--time-limit", "-1"), "--time-limit"),
    (("solve", "examples/s3-big-model.json", "--time-limit", "86401"), "--time-limit"),
    (("solve", "examples/s3-big-model.json", "--time-limit", "x"), "--time-limit"),
    (("serve", "--port", "0", "--grace-s", "nan"), "--grace-s"),
    (("serve", "--port", "0", "--max-message-mib", "1e309"), "--max-message-mib"),
    (("serve", "--port", "0", "--max-message-mib", "0"), "--max-message-mib"),
    (("serve", "--port", "0", "--worker-max-rss-mib", "inf"), "--worker-max-rss-mib"),
    (("review", "examples/review-quarterly.yaml", "--out", "unused", "--time-limit-per-scenario", "nan"),
     "--time-limit-per-scenario"),
    (("catalog", "--max-price", "nan"), "--max-price"),
    (("catalog", "--max-price", "-5"), "--max-price"),
])
def test_hostile_numeric_flags_exit_2_naming_the_flag(args, flag):
    """NaN, infinity, out-of-range and non-numbers are refused by the argument parser: exit 2,
    the flag named, the range given; never a traceback, a solve or a server that starts."""
    proc = subprocess.run([_cli(), *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    assert f"argument {flag}:" in proc.stderr and "Traceback" not in proc.stderr
    assert "out of range; use" in proc.stderr or "is not a number" in proc.stderr


def test_catalog_filters_refuse_what_would_list_the_wrong_offers() -> None:
    """`catalog --min-gpus -3` listed every offer and `--max-price 0` did too (0 was read as
    no filter); now the first is an error naming the flag and the second lists none."""
    proc = subprocess.run([_cli(), "catalog", "--min-gpus", "-3"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2 and "argument --min-gpus: -3 is too few; use 1 or more" in proc.stderr, proc.stderr
    proc = subprocess.run([_cli(), "catalog", "--max-price", "0", "--format", "json"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 0 and json.loads(proc.stdout) == [], proc.stdout[:300]


@pytest.mark.parametrize("slo, impossible", [
    ({"ttft_ms": 5, "tpot_ms": 2}, ["slo[chat].ttft_ms", "slo[chat].tpot_ms"]),
    ({"ttft_ms": 5, "tpot_ms": 50}, ["slo[chat].ttft_ms"]),
    ({"ttft_ms": 5000, "tpot_ms": 2}, ["slo[chat].tpot_ms"]),
])
def test_every_bound_no_configuration_meets_is_reported(tmp_path: Path, slo: dict, impossible: list) -> None:
    """Issue 25, item 5: a configuration's rejection names only the first bound it misses
    (TTFT), so an impossible TPOT beside an impossible TTFT went unreported."""
    proc = solve(tmp_path, json.dumps({"services": [llm_service(slo=slo)]}), "workload.json", "--format", "json")
    assert proc.returncode == EXIT_INFEASIBLE, proc.stdout + proc.stderr
    reasons = json.loads(proc.stdout)["infeasibility"]
    assert [r["constraint"] for r in reasons] == impossible
    for r in reasons:
        assert r["fix"].startswith(f"relax slo.{r['constraint'].split('.')[-1]} to at least"), r


# ---------------------------------------------------------------- GPU names as people write them (issue 25)
@pytest.mark.parametrize("written, canonical", [
    ("NVIDIA H100 80GB HBM3", "H100-SXM"),  # nvidia-smi's name of the SXM board (the PCIe card has HBM2e)
    ("NVIDIA L4", "L4"), ("l40s", "L40S"), ("h100 pcie", "H100-PCIe"), ("NVIDIA H100 NVL", "H100-NVL"),
    ("NVIDIA A100-SXM4-80GB", "A100-80GB"), ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
    ("A100 80GB", "A100-80GB"),  # the catalog's unqualified name is its default board
    ("Tesla T4", "T4"), ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("AMD Instinct MI300X", "MI300X"),
])
def test_gpu_names_resolve_to_the_catalog_s(written: str, canonical: str) -> None:
    from solver.catalog import default_catalog
    from solver.catalog.gpu_names import resolve_gpu_name

    assert resolve_gpu_name(written, default_catalog().gpus).name == canonical


@pytest.mark.parametrize("written, candidates", [
    ("H100 80GB", ("H100-PCIe", "H100-SXM")),  # suggested A100-80GB, never an H100, before
    ("h100", ("H100-NVL", "H100-PCIe", "H100-SXM")),  # suggested H200 first before
    ("V100", ("V100-16GB", "V100-32GB")),
])
def test_ambiguous_gpu_names_list_their_candidates(written: str, candidates: tuple) -> None:
    from solver.catalog import default_catalog
    from solver.catalog.gpu_names import resolve_gpu_name

    assert resolve_gpu_name(written, default_catalog().gpus).candidates == candidates


def test_a_gpu_written_as_nvidia_smi_prints_it_plans_as_the_catalog_name(tmp_path: Path) -> None:
    w = {"services": [service(profiles=[{"gpu": "NVIDIA L4", "items_per_min": 5.0, "latency_ms": 100.0}])],
         "constraints": {"gpu_types": ["nvidia l4"], "gpu_quotas": {"NVIDIA L4": 8}}}
    proc = solve(tmp_path, json.dumps(w), "workload.json", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert {f["gpu"] for f in json.loads(proc.stdout)["fleet"]} == {"L4"}


def test_catalog_gpu_filter_reads_names_as_people_write_them() -> None:
    proc = run_cli("catalog", "--gpu", "NVIDIA L4", "--format", "json")
    assert proc.returncode == 0 and {o["gpu"] for o in json.loads(proc.stdout)} == {"L4"}, proc.stderr
    proc = run_cli("catalog", "--gpu", "h100")
    assert proc.returncode == EXIT_INPUT and "'h100' is ambiguous" in proc.stderr and "H100-SXM" in proc.stderr


def test_cp_sat_is_not_offered_and_says_why(tmp_path: Path) -> None:
    """Issue 25, item 7: CP-SAT proved no plan here (it solves an integer-scaled copy of the
    model) and, with percentile SLOs, gave up at once with a false time-limit message."""
    proc = run_cli("solve", str(ROOT / "examples/s1-throughput.json"), "--backend", "cp-sat")
    assert proc.returncode == EXIT_INPUT and "argument --backend: CP-SAT is not offered" in proc.stderr, proc.stderr
    assert "To fix: use scip, highs or auto" in proc.stderr
    help_text = run_cli("solve", "--help").stdout
    assert "--backend {auto,scip,highs}" in help_text and "cp-sat" not in help_text
    assert_bad_input(solve_dict(tmp_path, {"services": [service()], "solver": {"backend": "cp-sat"}}),
                     "solver.backend: CP-SAT is not offered", "use scip, highs or auto")


@pytest.mark.parametrize("patch, field, kind, optional", [
    ({"catalog": None}, "catalog", "null", True),
    ({"constraints": []}, "constraints", "a list", True),
    ({"services": ["chat"]}, "services[0]", "a text string", False),
    ({"services": [{"name": "chat", "model": "llama-3.1-8b", "demand": 5}]}, "services[0].demand", "a number", False),
])
def test_a_value_where_an_object_belongs_is_named_in_the_users_words(tmp_path: Path, patch, field, kind,
                                                                      optional) -> None:
    """pydantic says "Input should be a valid dictionary or instance of CatalogRef": a class
    name of this code base that means nothing to the person who wrote `catalog: null`."""
    doc = {"services": [llm_service()], **patch}
    proc = solve(tmp_path, json.dumps(doc), "workload.json", "--format", "json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (error,) = [e for e in json.loads(proc.stdout)["errors"] if e["field"] == field]
    assert error["message"] == f"an object ({{...}}) is needed here, not {kind}.", error
    assert error["fix"] == "use an object ({...})" + (", or leave the field out" if optional else ""), error
    assert "instance of" not in proc.stdout


@pytest.mark.parametrize("service_patch, top_patch, field, message, fix", [
    ({"arrival_cv": 2.0}, {}, "services[0].arrival_cv",
     "unknown field; it belongs in demand.arrival_cv.", "move it into demand"),
    ({"percentile": 99}, {}, "services[0].percentile",
     "unknown field; it belongs in slo.percentile.", "move it into slo"),
    ({}, {"headroom": 0.2}, "headroom",
     "unknown field; it belongs in constraints.headroom.", "move it into constraints"),
    ({}, {"slo": {"ttft_ms": 500}}, "slo",  # services is a list: into each of its entries
     "unknown field; it belongs in services[].slo.", "move it into each entry of services"),
    ({"gpu": "L4"}, {}, "services[0].gpu",
     "unknown field; it belongs in profiles[].gpu.", "move it into each entry of profiles"),
    ({"replicsa": 2}, {}, "services[0].replicsa", "unknown field.",
     "remove it, or check its spelling against `solver-cli schema`"),
])
def test_a_field_written_one_level_too_high_says_where_it_belongs(tmp_path: Path, service_patch, top_patch, field,
                                                                  message, fix) -> None:
    """`percentile: 99` beside `slo` got "did you mean 'profiles' or 'engine'?"; the field
    exists, one object down."""
    doc = {"services": [{**llm_service(), **service_patch}], **top_patch}
    proc = solve(tmp_path, json.dumps(doc), "workload.json", "--format", "json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (error,) = [e for e in json.loads(proc.stdout)["errors"] if e["field"] == field]
    assert error["message"].startswith(message.rstrip(".")) and error["fix"] == fix, error



def test_a_union_field_gets_one_line_naming_every_kind_it_takes(tmp_path: Path) -> None:
    """`model` is a library name or an inline object: `model: 5` got two contradictory lines
    ("should be a valid string", "an object is needed here") and no hint that it is optional."""
    doc = {"services": [{**llm_service(), "model": 5}]}
    proc = solve(tmp_path, json.dumps(doc), "workload.json", "--format", "json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [e for e in json.loads(proc.stdout)["errors"] if e["field"] == "services[0].model"]
    assert errors == [{"field": "services[0].model",
                       "message": "a text string or an object ({...}) is needed here, not a number.",
                       "fix": "use a text string or an object ({...}), or leave the field out"}], errors


@pytest.mark.parametrize("patch, field", [
    ({"services": [{**llm_service(), "SLO": {"ttft_ms": 500}}]}, "services[0].SLO"),  # a schema class's spelling
    ({"services": [llm_service()], "Constraints": {}}, "Constraints"),
    ({"services": [{**llm_service(), "bool": 1}]}, "services[0].bool"),
])
def test_a_key_spelled_like_a_union_branch_stays_in_the_path(tmp_path: Path, patch, field) -> None:
    """Union branches are named like types ('str', 'InlineModel', 'dict[str,any]') in pydantic's
    locations; a user's unknown field spelled like one must not vanish from the path."""
    proc = solve(tmp_path, json.dumps(patch), "workload.json", "--format", "json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert field in [e["field"] for e in json.loads(proc.stdout)["errors"]], proc.stdout


def test_an_inline_model_with_errors_is_not_also_told_to_be_a_string(tmp_path: Path) -> None:
    doc = {"services": [{**llm_service(), "model": {"params_b": "x"}}]}
    proc = solve(tmp_path, json.dumps(doc), "workload.json", "--format", "json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert any(e["field"].startswith("services[0].model.") for e in errors), errors
    assert not any("valid string" in e["message"] for e in errors), errors
