"""Issue 11, items 1 and 4: hostile and broken documents are refused cheaply and clearly.

The CLI cases run the installed `solver-cli` as a subprocess (exit 2, no traceback, the
field and a fix); the parser cases call solver.workload.documents directly; the gRPC
cases are in test_grpc_hardening.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from solver.errors import InputError
from solver.documents import limits
from solver.documents.parse import load_document, parse_text
from test_bad_input import assert_bad_input, llm_service, run_cli, solve, solve_dict

BASE = {"services": [llm_service()]}


def yaml_bomb(levels: int = 7, width: int = 10) -> str:
    """A "billion laughs" workload: `levels` lists of `width` aliases to the previous one
    (width ** levels leaves), padded to the 666 bytes of the issue's probe."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    text = "\n".join(lines) + f"\nservices: [*l{levels - 1}]\n"
    return text + "#" * max(0, 665 - len(text)) + "\n"


# ---------------------------------------------------------------- the alias bomb (item 1)
def test_the_bomb_is_666_bytes_and_expands_to_ten_million_values() -> None:
    assert len(yaml_bomb().encode()) == 666


def test_cli_solve_refuses_a_yaml_alias_bomb(tmp_path: Path) -> None:
    proc = solve(tmp_path, yaml_bomb(), "bomb.yaml")
    assert_bad_input(proc, "workload", "aliases are expanded", f"{limits.MAX_VALUES:,}")


def test_cli_review_refuses_a_yaml_alias_bomb_in_the_review_and_in_its_base_workload(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(yaml_bomb())
    proc = run_cli("review", str(tmp_path / "bomb.yaml"), "--out", str(tmp_path / "out"))
    assert_bad_input(proc, "review", "aliases are expanded")
    (tmp_path / "review.yaml").write_text("base: {workload: bomb.yaml}\n")
    proc = run_cli("review", str(tmp_path / "review.yaml"), "--out", str(tmp_path / "out"))
    assert_bad_input(proc, "review.base.workload", "aliases are expanded")
    assert not (tmp_path / "out").exists()


def test_the_bomb_is_refused_from_the_node_graph_before_any_value_is_built() -> None:
    with pytest.raises(InputError, match="once its YAML aliases are expanded"):
        parse_text(yaml_bomb(), ".yaml")


def test_value_checks_visit_shared_containers_once_not_once_per_path() -> None:
    """10 ** 7 paths through 7 shared lists: the non-finite/limits walk sees 70 entries,
    so it neither takes minutes nor counts the document as too large."""
    node: list = [1.5] * 10
    for _ in range(6):
        node = [node] * 10
    limits.check_values({"x": node}, "workload")  # no InputError: 71 values, not 10 ** 7
    leaf = node
    for _ in range(6):
        leaf = leaf[0]
    leaf[3] = float("nan")
    with pytest.raises(InputError, match="not a finite number") as err:
        limits.check_values({"x": node}, "workload")
    assert err.value.violations[0].field == "workload.x[0][0][0][0][0][0][3]"


def test_aliases_in_moderation_still_work(tmp_path: Path) -> None:
    """Shared blocks are real use: two services with one SLO and one demand anchor."""
    text = """
demand: &demand {requests_per_s: 2, prompt_tokens: 512, output_tokens: 128}
services:
  - {name: a, model: llama-3.1-8b, demand: *demand, slo: &slo {ttft_ms: 2000, tpot_ms: 80}}
  - {name: b, model: llama-3.1-8b, demand: *demand, slo: *slo}
"""
    data = parse_text(text, ".yaml")
    del data["demand"]
    workload_file = tmp_path / "w.json"
    workload_file.write_text(json.dumps(data))
    assert run_cli("solve", str(workload_file), "--format", "json").returncode == 0
    proc = solve(tmp_path, "services:\n  - &svc {name: a, model: llama-3.1-8b, demand: {requests_per_s: 2, "
                           "prompt_tokens: 512, output_tokens: 128}}\n", "ok.yaml", "--format", "json")
    assert proc.returncode == 0, proc.stderr


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(InputError, match="refers to the node that contains it"):
        parse_text("services: &s [*s]\n", ".yaml")


# ---------------------------------------------------------------- nesting (item 4)
def test_json_nested_a_thousand_deep_is_bad_input_not_a_recursion_error(tmp_path: Path) -> None:
    proc = solve(tmp_path, '{"services": ' + "[" * 1000 + "]" * 1000 + "}")
    assert_bad_input(proc, "workload", "levels deep")


def test_json_nested_a_hundred_deep_is_refused_by_the_limit(tmp_path: Path) -> None:
    proc = solve(tmp_path, '{"services": ' + "[" * 100 + "]" * 100 + "}")
    assert_bad_input(proc, "workload", f"more than {limits.MAX_DEPTH} levels deep")


@pytest.mark.parametrize("text", ["services: " + "[" * 10_000 + "]" * 10_000,
                                  "services:\n" + "".join(" " * i + "- \n" for i in range(1, 2000))])
def test_yaml_nested_ten_thousand_deep_is_bad_input(tmp_path: Path, text: str) -> None:
    proc = solve(tmp_path, text, "deep.yaml")
    assert_bad_input(proc, "workload")
    assert "levels deep" in proc.stderr or "nesting depth" in proc.stderr


# ---------------------------------------------------------------- strings, numbers, types (item 4)
def test_a_lone_surrogate_is_refused_at_validation_with_its_path(tmp_path: Path) -> None:
    proc = solve(tmp_path, json.dumps({"name": "\ud800", **BASE}))
    assert_bad_input(proc, "workload.name", "unpaired surrogate")


def test_a_surrogate_pair_escape_is_a_real_character() -> None:
    assert parse_text('{"name": "\\ud83d\\ude80"}')["name"] == "\U0001F680"


@pytest.mark.parametrize("text, needle", [
    ('{"x": "' + "y" * 20_000 + '"}', "20,000 characters"),
    ('{"' + "k" * 20_000 + '": 1}', "(a key)"),
    ('{"x": 1e19}', "out of range"),
    ('{"x": -123456789012345678901234567890}', "out of range"),
    ('{"x": ' + "9" * 5000 + "}", "cannot be read"),
    ('{"x": [NaN]}', "workload.x[0]: nan is not a finite number"),
])
def test_json_strings_and_numbers_are_bounded(text: str, needle: str) -> None:
    with pytest.raises(InputError) as err:
        parse_text(text)
    assert needle in str(err.value)


@pytest.mark.parametrize("text, needle", [
    ("x: 1" + ":1" * 20_000, "too long to be a count"),  # base 60: quadratic to convert
    ("x: 0x" + "f" * 100, "too long to be a count"),
    ("x: !!binary aGVsbG8=", "a bytes value is not allowed"),
    ("x: !!set {a, b}", "a set value is not allowed"),
    ("1: x", "the key 1 is not a string"),
    ("x: .inf", "not a finite number"),
    ("x: !!python/object:os.system {}", "malformed YAML"),
    ("x: a\ud800", "unpaired surrogate"),  # found by the fuzzer: libyaml cannot encode it
])
def test_yaml_values_are_only_what_json_has(text: str, needle: str) -> None:
    with pytest.raises(InputError) as err:
        parse_text(text, ".yaml")
    assert needle in str(err.value)


def test_yaml_dates_stay_strings_as_in_json() -> None:
    assert parse_text("as_of: 2024-05-01\n", ".yaml") == {"as_of": "2024-05-01"}


def test_documents_over_the_size_limit_are_refused_before_parsing() -> None:
    with pytest.raises(InputError, match="more than the limit"):
        parse_text(" " * (limits.MAX_YAML_BYTES + 1) + "a: 1", ".yaml")
    with pytest.raises(InputError, match="more than the limit"):
        parse_text(" " * (limits.MAX_JSON_BYTES + 1) + "{}")


def test_more_values_than_the_limit_are_refused() -> None:
    with pytest.raises(InputError, match="more than 1,000,000 values"):
        parse_text('{"x": [' + "0," * limits.MAX_VALUES + "0]}")


# ---------------------------------------------------------------- calibration (item 4)
@pytest.mark.parametrize("key", ["bandwidth_efficiency", "compute_efficiency", "max_batch", "link_efficiency",
                                 "engine_factor.vllm", "fp8_compute_efficiency"])
def test_a_zero_calibration_divisor_is_bad_input_naming_the_constant(tmp_path: Path, key: str) -> None:
    proc = solve_dict(tmp_path, {**BASE, "solver": {"calibration": {key: 0}}})
    assert_bad_input(proc, "solver.calibration", key, "at least")


def test_calibration_whole_numbers_and_ranges() -> None:
    from solver.perf.api import Calibration

    with pytest.raises(ValueError, match="max_batch must be a whole number"):
        Calibration.from_overrides({"max_batch": 0.5})
    with pytest.raises(ValueError, match="between 0 and"):
        Calibration.from_overrides({"error_band": 1e300})
    assert Calibration.from_overrides({"max_batch": 64, "bandwidth_efficiency": 0.5}).max_batch == 64


# ---------------------------------------------------------------- review sweeps (item 4)
def test_a_sweep_over_the_whole_double_range_is_bad_input(tmp_path: Path) -> None:
    review = {"base": {"workload": BASE}, "sweeps": [
        {"name": "huge", "change": "demand", "values": {"from": -1.7e308, "to": 1.7e308, "step": 1}}]}
    (tmp_path / "review.json").write_text(json.dumps(review))
    proc = run_cli("review", str(tmp_path / "review.json"), "--out", str(tmp_path / "out"))
    assert_bad_input(proc, "review")


def test_a_range_whose_point_count_overflows_is_refused_by_the_spec() -> None:
    from solver.review.expand import parse_review

    review = {"base": {"workload": BASE}, "sweeps": [
        {"name": "tiny-step", "change": "demand", "values": {"from": 0, "to": 1e18, "step": 1e-300}}]}
    with pytest.raises(InputError, match="more than 10000 points"):
        parse_review(review)


# ---------------------------------------------------------------- catalog files (items 1 and 4)
def _with_catalog(tmp_path: Path, file: str) -> subprocess.CompletedProcess:
    return solve_dict(tmp_path, {**BASE, "catalog": {"file": file}})


@pytest.mark.parametrize("file, needle", [
    ("/proc/self/mem", "Input/output error"),
    ("/dev/zero", "not a regular file (a character device)"),
    ("/", "is a directory"),
    ("x" * 5000 + ".json", "File name too long"),
    ("a/" * 3000 + "c.json", "File name too long"),
])
def test_unreadable_catalog_files_are_clear_errors(tmp_path: Path, file: str, needle: str) -> None:
    if file.startswith("/proc") and not Path(file).exists():
        pytest.skip("no /proc here")
    stderr = assert_bad_input(_with_catalog(tmp_path, file), "catalog", needle)
    assert len(stderr) < 2000  # a long name is shortened, not echoed


def test_a_fifo_as_catalog_file_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "catalog.json"
    os.mkfifo(fifo)
    assert_bad_input(_with_catalog(tmp_path, str(fifo)), "catalog", "a FIFO/pipe")


def test_an_oversized_catalog_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(limits.MAX_JSON_BYTES + 1)  # sparse: no disk used
    assert_bad_input(_with_catalog(tmp_path, str(big)), "catalog", "more than the limit")
    with pytest.raises(InputError, match="more than the limit"):
        load_document(big, "catalog")


def test_catalog_listing_refuses_devices_too(tmp_path: Path) -> None:
    assert_bad_input(run_cli("catalog", "--file", "/dev/zero"), "catalog", "not a regular file")


def test_a_file_that_is_not_utf8_names_the_offset(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_bytes(b'{"name": "\xff"}')
    assert_bad_input(run_cli("solve", str(tmp_path / "w.json")), "not UTF-8", "offset 10")


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "w.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(BASE).encode())
    assert run_cli("solve", str(tmp_path / "w.json")).returncode == 0


@pytest.mark.parametrize("slo, constraints", [
    ({"latency_ms": 1e-7}, {}),  # found by the fuzzer: relaxed and rounded to 0, an invalid change
    ({"latency_ms": 5e-324}, {}),  # too small to relax at all in double precision
    ({"latency_ms": 3.6e6}, {"budget_usd_per_hour": 1e7, "gpu_quotas": {"A10": 10_000_000}}),  # at the maximum
])
def test_sensitivity_relaxations_stay_valid_at_the_edges_of_the_schema(slo, constraints) -> None:
    from solver.review.expand import parse_review

    svc = {"name": "img", "demand": {"items_per_min": 10.0}, "slo": slo,
           "profiles": [{"gpu": "A10", "items_per_min": 5.0, "latency_ms": 1.0}]}
    review = parse_review({"base": {"workload": {"services": [svc], "constraints": constraints}}})
    relaxed = {s.relaxes: s.value for s in review.scenarios if s.group == "sensitivity"}
    if slo["latency_ms"] == 1e-7:
        assert relaxed["slo[img].latency_ms"] == pytest.approx(1.25e-7)
    else:  # already at the schema's maximum: nothing to relax
        assert not {"slo[img].latency_ms", "budget", "quota[A10]"} & set(relaxed)


# ---------------------------------------------------------------- fleets beyond any real one (issue 26)
def test_a_demand_no_fleet_could_serve_is_refused_before_the_solve(tmp_path: Path) -> None:
    """275 bytes asking for 1e9 requests/s (the schema allows it) used to grow a worker by
    ~100 MB/s past its time limit; the replicas' lower bound refuses it in about a second."""
    svc = llm_service(demand={"requests_per_s": 1e9, "prompt_tokens": 512, "output_tokens": 256})
    proc = solve_dict(tmp_path, {"services": [svc], "solver": {"time_limit_s": 10}})
    assert_bad_input(proc, "services[0].demand", "chat", "100,000 replicas")


def test_a_running_fleet_beyond_the_limit_is_refused(tmp_path: Path) -> None:
    from solver.compile.fleet_size import MAX_RUNNING_INSTANCES
    running = [{"offer_id": "lambda/gpu_1x_gh200", "instances": MAX_RUNNING_INSTANCES},
               {"offer_id": "lambda/gpu_1x_a10", "instances": 1}]
    proc = solve_dict(tmp_path, {"services": [llm_service()], "current_fleet": running})
    assert_bad_input(proc, "current_fleet", f"{MAX_RUNNING_INSTANCES + 1:,} instances")


def test_the_fleet_bound_is_a_lower_bound_on_what_the_plan_uses() -> None:
    """The estimate never exceeds the replicas a real plan uses (so nothing plannable is refused)."""
    from solver.compile.candidates import build_problem
    from solver.compile.fleet_size import replicas_needed
    from solver.compile.resolve import resolve_catalog
    from solver.plan import plan
    from solver.workload.documents import parse_workload

    w = json.loads((Path(__file__).resolve().parents[1] / "examples" / "llm-platform.json").read_text())
    workload = parse_workload(w)
    problem = build_problem(workload, resolve_catalog(workload))
    d = plan(workload).to_dict()
    for s in d["services"]:
        used = sum(a["replicas"] for a in s["assignments"])
        assert 0 < replicas_needed(problem)[s["name"]] <= used + 1e-9, s["name"]
