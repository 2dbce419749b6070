"""Requests against the model's context length (issue 13): prompt + output tokens must fit.

The workload check (installed CLI, exit 2, field path and fix), the inline model's
max_context_tokens, the library's values, the independent evaluator, `solver-cli
estimate`, and the gRPC service on a real loopback server.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from grpc_support import running_server
from planner_client import PlannerClient, PlannerClientError
from server.generated.fleetplanner.v1 import planner_pb2 as pb
from server.generated.fleetplanner.v1 import planner_pb2_grpc as pb_grpc
from solver.catalog import default_catalog
from solver.compile.resolve import check_references, reference_problems, resolve_catalog
from solver.errors import InputError
from solver.evaluate import evaluate
from solver.models.context import longer_context_models
from solver.models.library import ALIASES, MODEL_LIBRARY, get_model
from solver.optimize.solution import Assignment, Solution
from solver.plan import plan
from solver.workload.documents import parse_workload

EXIT_INPUT = 2
# The issue's case: Llama-3.1-8B serves 131,072 tokens (config.json with llama3 RoPE scaling).
ISSUE = {"name": "long", "services": [{"name": "chat", "model": "llama-3.1-8b",
                                       "demand": {"requests_per_s": 1, "prompt_tokens": 500000, "output_tokens": 256}}]}
SMALL_INLINE = {"name": "my-8b", "params_b": 8.03, "layers": 32, "hidden_size": 4096, "attention_heads": 32,
                "kv_heads": 8, "head_dim": 128, "vocab_size": 128256, "intermediate_size": 14336}


def solver_cli() -> str:
    beside = Path(sys.executable).parent / "solver-cli"
    found = str(beside) if beside.exists() else shutil.which("solver-cli")
    assert found, "solver-cli is not installed: run `pip install -e .[test]` first"
    return found


def run_cli(tmp_path: Path, *args: str, workload: dict | None = None) -> subprocess.CompletedProcess:
    if workload is not None:
        path = tmp_path / "workload.json"
        path.write_text(json.dumps(workload))
        args = (*args[:1], str(path), *args[1:])
    return subprocess.run([solver_cli(), *args], capture_output=True, text=True, timeout=300)


def two_classes(model, long_prompt: int, long_output: int = 256) -> dict:
    return {"name": "mc", "services": [{"name": "chat", "model": model, "demand": {"requests_per_s": 1, "classes": [
        {"name": "short", "share": 0.75, "prompt_tokens": 512, "output_tokens": 256},
        {"name": "huge", "share": 0.25, "prompt_tokens": long_prompt, "output_tokens": long_output}]}}]}


def problems_of(doc: dict) -> list:
    """What a user gets for a document: field errors and reference errors in one InputError."""
    with pytest.raises(InputError) as err:
        workload = parse_workload(doc)
        check_references(workload, resolve_catalog(workload))
    return err.value.violations


# ------------------------------------------------------------------ the installed CLI
def test_the_issues_case_is_bad_input_with_the_field_and_the_fix(tmp_path):
    proc = run_cli(tmp_path, "solve", workload=ISSUE)
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_INPUT, out
    assert "Traceback" not in out
    assert "services[0].demand.prompt_tokens" in proc.stderr
    assert "500,256 tokens" in proc.stderr and "131,072 tokens" in proc.stderr  # what was asked, what it supports
    assert "To fix: shorten the prompt or output" in proc.stderr
    assert "use a model with a longer context, e.g. llama-4-" in proc.stderr  # one that serves 500,256


def test_the_issues_case_under_format_json(tmp_path):
    proc = run_cli(tmp_path, "solve", "--format", "json", workload=ISSUE)
    assert proc.returncode == EXIT_INPUT, proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert [e["field"] for e in errors] == ["services[0].demand.prompt_tokens"]
    assert "131,072" in errors[0]["message"] and errors[0]["fix"].startswith("shorten the prompt or output")


def test_one_class_over_the_limit_is_named_and_the_others_are_not(tmp_path):
    proc = run_cli(tmp_path, "solve", "--format", "json", workload=two_classes("llama-3.1-8b", 130000, 2000))
    assert proc.returncode == EXIT_INPUT, proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert [e["field"] for e in errors] == ["services[0].demand.classes[1].prompt_tokens"]
    assert "class 'huge'" in errors[0]["message"] and "132,000 tokens" in errors[0]["message"]


# ------------------------------------------------------------------ the check's edges
def test_a_request_of_exactly_the_context_fits():
    doc = two_classes("llama-3.1-8b", 131072 - 256)
    workload = parse_workload(doc)
    check_references(workload, resolve_catalog(workload))  # no error
    assert [v.field for v in problems_of(two_classes("llama-3.1-8b", 131072 - 255))] == \
        ["services[0].demand.classes[1].prompt_tokens"]


def test_model_names_resolve_to_the_library_models_context():
    doc = dict(ISSUE, services=[dict(ISSUE["services"][0], model="meta-llama/Llama-3.1-8B-Instruct")])
    [v] = problems_of(doc)
    assert "llama-3.1-8b's context of 131,072 tokens" in v.message


def test_context_errors_arrive_with_field_errors_in_one_round():
    doc = two_classes("phi-3-mini", 4000, 2000)
    doc["services"][0]["demand"]["requests_per_s"] = -1
    assert [v.field for v in problems_of(doc)] == ["services[0].demand.requests_per_s",
                                                   "services[0].demand.classes[1].prompt_tokens"]


def test_every_service_is_checked():
    doc = {"services": [dict(ISSUE["services"][0], name=f"s{i}", model=m)
                        for i, m in enumerate(("llama-3.1-8b", "gemma-2-9b", "llama-4-scout"))]}
    assert [v.field for v in problems_of(doc)] == ["services[0].demand.prompt_tokens",
                                                   "services[1].demand.prompt_tokens"]  # Scout serves 10M


# ------------------------------------------------------------------ inline models
def test_an_inline_model_with_max_context_tokens_is_checked():
    model = dict(SMALL_INLINE, max_context_tokens=8192)
    [v] = problems_of(two_classes(model, 8000, 500))
    assert v.field == "services[0].demand.classes[1].prompt_tokens"
    assert "my-8b's context of 8,192 tokens" in v.message
    assert "describe it inline" not in v.fix  # it already is
    workload = parse_workload(two_classes(model, 7000, 500))
    check_references(workload, resolve_catalog(workload))  # 7,500 fits


def test_an_inline_model_without_max_context_tokens_is_not_checked():
    doc = dict(ISSUE, services=[dict(ISSUE["services"][0], model=SMALL_INLINE)])
    workload = parse_workload(doc)
    check_references(workload, resolve_catalog(workload))  # no limit stated: no error
    assert reference_problems(doc, default_catalog()) == []


@pytest.mark.parametrize("value", [0, -5, 1.5, "long"])
def test_max_context_tokens_must_be_a_positive_whole_number(value):
    doc = two_classes(dict(SMALL_INLINE, max_context_tokens=value), 1000)
    fields = [v.field for v in problems_of(doc)]
    assert "services[0].model.max_context_tokens" in fields
    assert not any("prompt_tokens" in f for f in fields)  # no context check against a bad limit


def test_the_schema_describes_max_context_tokens(tmp_path):
    proc = run_cli(tmp_path, "schema")
    assert proc.returncode == 0, proc.stderr
    field = json.loads(proc.stdout)["$defs"]["InlineModel"]["properties"]["max_context_tokens"]
    assert "prompt + output" in field["description"]


# ------------------------------------------------------------------ the library
def test_every_library_model_has_a_context_length_with_its_source():
    for model in MODEL_LIBRARY.values():
        assert isinstance(model.max_context_tokens, int) and model.max_context_tokens > 0, model.name
        assert len(model.context_source) > 20, model.name
    for alias, name in ALIASES.items():
        assert get_model(alias).max_context_tokens == MODEL_LIBRARY[name].max_context_tokens


def test_list_models_shows_each_context(tmp_path):
    proc = run_cli(tmp_path, "estimate", "--list-models")
    assert proc.returncode == 0, proc.stderr
    assert "context tokens" in proc.stdout.splitlines()[0]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("llama-3.1-8b "))
    assert "131,072" in row


def test_library_contexts_follow_the_published_values():
    """A few values whose source is not simply the config's max_position_embeddings."""
    expected = {"llama-3.1-8b": 131072, "llama-2-7b": 4096, "deepseek-v3": 131072, "qwen3-8b": 131072,
                "mistral-nemo-12b": 128000, "mistral-7b": 32768, "llama-4-scout": 10485760, "phi-3-mini": 4096}
    assert {name: MODEL_LIBRARY[name].max_context_tokens for name in expected} == expected
    assert "163840" in MODEL_LIBRARY["deepseek-v3"].context_source  # the config's larger value, named
    assert "YaRN" in MODEL_LIBRARY["qwen3-8b"].context_source


def test_suggested_models_serve_the_length_and_are_close_in_size():
    picks = longer_context_models(200_000, near_params_b=8.0)
    assert picks and all(m.max_context_tokens >= 200_000 for m in picks)
    assert longer_context_models(20_000, near_params_b=8.0)[0].params_b < 10  # an 8B-class model first
    assert longer_context_models(10**9) == []


# ------------------------------------------------------------------ the independent evaluator
def test_the_evaluator_refuses_a_plan_whose_requests_exceed_the_context():
    """The same plan, evaluated against the same workload with a stated context shorter than
    its requests: the performance is identical, only the context check can object."""
    fits = two_classes(SMALL_INLINE, 2048)
    result = plan(parse_workload(fits))
    sol = Solution(tuple(sorted((f.offer_id, f.instances) for f in result.fleet)), tuple(
        Assignment(a.config, s.name, a.offer_id, a.gpus_per_replica, a.precision, a.replicas, tuple(a.routed),
                   a.instances_per_replica) for s in result.services for a in s.assignments))
    catalog = default_catalog()
    assert evaluate(parse_workload(fits), catalog, sol).ok
    too_long = parse_workload(two_classes(dict(SMALL_INLINE, max_context_tokens=2048), 2048))  # 2,304 > 2,048
    report = evaluate(too_long, catalog, sol)
    assert report.violations == ["chat/huge: 2048 prompt + 256 output tokens exceed the context of my-8b (2048 tokens)"]


# ------------------------------------------------------------------ solver-cli estimate
def test_estimate_names_the_flags_when_the_lengths_exceed_the_context(tmp_path):
    proc = run_cli(tmp_path, "estimate", "llama-3.1-8b", "--prompt-tokens", "500000")
    out = proc.stdout + proc.stderr
    assert proc.returncode == EXIT_INPUT, out
    assert "Traceback" not in out
    assert "--prompt-tokens 500,000 + --output-tokens 256" in proc.stderr and "131,072 tokens" in proc.stderr
    assert "To fix: shorten the prompt or output" in proc.stderr
    ok = run_cli(tmp_path, "estimate", "llama-3.1-8b", "--prompt-tokens", "130816", "--gpu", "H100-SXM")
    assert ok.returncode == 0, ok.stderr  # 130,816 + 256 = 131,072: fits


def test_estimate_of_an_inline_model_uses_its_max_context_tokens(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(dict(SMALL_INLINE, max_context_tokens=4096)))
    proc = run_cli(tmp_path, "estimate", "--model-json", str(path), "--prompt-tokens", "4000", "--output-tokens", "200")
    assert proc.returncode == EXIT_INPUT, proc.stdout + proc.stderr
    assert "my-8b's context of 4,096 tokens" in proc.stderr and "--model-json file" not in proc.stderr


# ------------------------------------------------------------------ the gRPC service
@pytest.fixture(scope="module")
def server():
    with running_server() as (planner, target):
        yield target


def test_grpc_solve_is_invalid_argument_with_the_field(server):
    with grpc.insecure_channel(server) as channel:
        stub = pb_grpc.PlannerServiceStub(channel)
        with pytest.raises(grpc.RpcError) as raw:
            stub.Solve(pb.SolveRequest(workload=pb.Workload(json=json.dumps(two_classes("llama-3.1-8b", 200000)))),
                       timeout=60)
    assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    [detail] = [d for d in rpc_status.from_call(raw.value).details if d.Is(error_details_pb2.BadRequest.DESCRIPTOR)]
    bad_request = error_details_pb2.BadRequest()
    detail.Unpack(bad_request)
    assert [v.field for v in bad_request.field_violations] == ["services[0].demand.classes[1].prompt_tokens"]
    assert "131,072" in bad_request.field_violations[0].description


def test_grpc_validate_reports_the_field(server):
    """Validate answers OK with valid=false and the violations (its contract for bad workloads)."""
    with grpc.insecure_channel(server) as channel:
        verdict = pb_grpc.PlannerServiceStub(channel).Validate(
            pb.ValidateRequest(workload=pb.Workload(json=json.dumps(ISSUE))), timeout=30)
    assert not verdict.valid
    assert [v.field for v in verdict.violations] == ["services[0].demand.prompt_tokens"]
    assert verdict.violations[0].fix.startswith("shorten the prompt or output")


def test_grpc_estimate_is_invalid_argument_with_the_field(server):
    with PlannerClient(server, timeout_s=60) as client:
        with pytest.raises(PlannerClientError) as err:
            client.estimate("llama-3.1-8b", prompt_tokens=500000)
        assert err.value.code == "INVALID_ARGUMENT" and err.value.exit_code == EXIT_INPUT
        assert [v["field"] for v in err.value.violations] == ["prompt_tokens"]
        assert client.estimate("llama-3.1-8b", gpu="H100-SXM", prompt_tokens=130816)  # fits
