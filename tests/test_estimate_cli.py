"""`solver-cli estimate`, run as the installed command in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from solver.catalog import default_catalog
from solver.models import get_model
from solver.perf import PerfQuery, estimate

CLI = Path(sys.executable).with_name("solver-cli")
if not CLI.exists():
    CLI = Path(shutil.which("solver-cli") or CLI)

REQUIRED = {"gpu", "gpus_per_replica", "precision", "engine", "batch", "memory_gib_per_gpu", "ttft_ms", "tpot_ms",
            "output_tokens_per_s", "requests_per_s", "binding_limit", "error_band", "feasible", "reason"}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), "estimate", *args], capture_output=True, text=True, timeout=60)


def test_json_has_one_object_per_configuration_matching_the_model():
    out = cli("llama-3.1-8b", "--gpu", "H100-SXM", "--gpus-per-replica", "1,2", "--precision", "fp16,fp8",
              "--prompt-tokens", "1024", "--output-tokens", "128", "--tpot-ms", "40", "--format", "json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert [(r["gpus_per_replica"], r["precision"]) for r in rows] == [(1, "fp16"), (1, "fp8"), (2, "fp16"), (2, "fp8")]
    assert all(REQUIRED <= set(r) for r in rows)
    gpu = default_catalog().gpus["H100-SXM"]
    direct = estimate(PerfQuery(model=get_model("llama-3.1-8b"), gpu=gpu, gpus_per_replica=1, interconnect="none",
                                usable_memory_gib=rows[0]["memory_gib_per_gpu"] and 80.0, precision="fp16",
                                prompt_tokens=1024, output_tokens=128, tpot_slo_ms=40))
    assert rows[0]["batch"] == direct.batch
    assert rows[0]["output_tokens_per_s"] == pytest.approx(direct.output_tokens_per_s, rel=1e-3)
    assert rows[0]["tpot_ms"] <= 40 and rows[0]["usd_per_million_output_tokens"] > 0


def test_pinned_measurement_conditions_are_honoured():
    out = cli("llama-2-7b", "--gpu", "A10", "--gpus-per-replica", "1", "--precision", "fp16", "--batch", "4",
              "--engine", "tensorrt-llm", "--format", "json")
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)
    assert (row["batch"], row["engine"], row["feasible"]) == (4, "tensorrt-llm", True)


def test_infeasible_configurations_say_why():
    out = cli("llama-2-13b", "--gpu", "A10", "--format", "json")
    rows = {r["gpus_per_replica"]: r for r in json.loads(out.stdout)}
    assert not rows[1]["feasible"] and rows[1]["reason_kind"] == "vram" and "VRAM" in rows[1]["reason"]
    assert rows[2]["feasible"]


def test_table_across_the_catalog():
    out = cli("mistral-7b", "--tpot-ms", "50")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "TPOT ms" in lines[1] and "$/M out tok" in lines[1]
    listed = {line.split()[0] for line in lines[3:-1]}
    assert {"A10G", "L4", "H100-SXM", "A100-80GB"} <= listed
    assert "fp8" in out.stdout and "error" not in out.stderr.lower()


@pytest.mark.parametrize("args,expected", [
    (("lama-3-8b",), "did you mean 'llama-3.1-8b'"),
    (("llama-3.1-8b", "--gpu", "H100-SXN"), "did you mean 'H100-SXM'"),
    (("llama-3.1-8b", "--precision", "fp3"), "unknown precision"),
    (("llama-3.1-8b", "--engine", "vlm"), "did you mean 'vllm'"),
    (("llama-3.1-8b", "--gpus-per-replica", "two"), "--gpus-per-replica"),
    ((), "give a model name"),
])
def test_bad_names_exit_2_with_a_hint_and_no_traceback(args, expected):
    out = cli(*args)
    assert out.returncode == 2
    assert expected in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_list_models():
    out = cli("--list-models")
    assert out.returncode == 0
    assert "llama-3.1-405b" in out.stdout and "mixtral-8x7b" in out.stdout and "deepseek-r1-distill-llama-8b" in out.stdout
