"""The engine settings a plan was sized with reach the exported servers (issue 25: deploy
exactly what was planned).

Each assignment of a plan carries `engine_options`: the engine version's defaults with the
service's options applied (token budget, memory fraction, KV-cache type, scheduler,
multi-step). The export starts the engine with them, in each engine's own flags, whatever
the pinned image's defaults are; what the image cannot run is a warning. Real plans from the
installed CLI, exported by the installed CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from test_export import run_cli, solve_to_file


def _workload(engine: str, precision: str = "fp8", **options) -> dict:
    svc = {"name": "chat", "model": "llama-3.1-8b", "precisions": [precision], "engine": engine,
           "demand": {"requests_per_s": 20, "prompt_tokens": 1000, "output_tokens": 200},
           "slo": {"ttft_ms": 1500, "tpot_ms": 60}}
    if options:
        svc["engine_options"] = options
    return {"name": "settings", "services": [svc], "constraints": {"gpu_types": ["H100-SXM"]}}


def _plan(cli: str, tmp: Path, name: str, workload: dict) -> tuple[Path, dict]:
    (tmp / f"{name}-w.json").write_text(json.dumps(workload))
    return tmp / f"{name}.json", solve_to_file(cli, tmp / f"{name}-w.json", tmp / f"{name}.json")


def _commands(cli: str, plan: Path, out: Path) -> tuple[list[list[str]], str]:
    proc = run_cli(cli, "export", str(plan), "--to", "kubernetes", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    docs = [d for f in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    commands = [c["command"] for d in docs if d["kind"] == "Deployment"
                for c in d["spec"]["template"]["spec"]["containers"]]
    assert commands
    return commands, proc.stderr


def _flag(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


def test_the_services_engine_options_reach_the_server(solver_cli, tmp_path):
    path, plan = _plan(solver_cli, tmp_path, "opts", _workload(
        "vllm", max_num_batched_tokens=2048, kv_cache_memory_fraction=0.85, kv_cache_dtype="fp8"))
    opts = [a["engine_options"] for a in plan["services"][0]["assignments"]]
    assert all(o["max_num_batched_tokens"] == 2048 and o["kv_cache_memory_fraction"] == 0.85
               and o["kv_cache_dtype"] == "fp8" for o in opts)
    commands, _ = _commands(solver_cli, path, tmp_path / "out")
    for args in commands:
        assert _flag(args, "--max-num-batched-tokens") == "2048"
        assert _flag(args, "--gpu-memory-utilization") == "0.85"
        assert _flag(args, "--kv-cache-dtype") == "fp8"
    # SkyPilot's run line carries the same flags.
    proc = run_cli(solver_cli, "export", str(path), "--to", "skypilot", "--out", str(tmp_path / "sky"))
    assert proc.returncode == 0, proc.stderr
    text = "\n".join(f.read_text() for f in (tmp_path / "sky").glob("*.yaml"))
    assert "--max-num-batched-tokens 2048" in text and "--gpu-memory-utilization 0.85" in text


def test_the_kv_cache_is_the_one_the_plan_sized(solver_cli, tmp_path):
    # vLLM's "auto" KV cache is 16-bit beside fp8 weights (docs/engines.md): the plan holds as
    # many sequences as a 16-bit cache allows, and the server must not get an fp8 one.
    path, plan = _plan(solver_cli, tmp_path, "auto", _workload("vllm"))
    assert {a["engine_options"]["kv_cache_dtype"] for a in plan["services"][0]["assignments"]} == {"fp16"}
    commands, _ = _commands(solver_cli, path, tmp_path / "out")
    for args in commands:
        assert _flag(args, "--quantization") == "fp8" and "--kv-cache-dtype" not in args
    # A plan from before assignments reported their settings: the old reading (fp8 with fp8 weights).
    old = json.loads(path.read_text())
    for a in old["services"][0]["assignments"]:
        del a["engine_options"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    commands, _ = _commands(solver_cli, tmp_path / "old.json", tmp_path / "old")
    for args in commands:
        assert _flag(args, "--kv-cache-dtype") == "fp8" and "--max-num-batched-tokens" not in args


def test_sglang_gets_its_own_names_and_vllm_v0_settings_are_a_warning(solver_cli, tmp_path):
    path, _ = _plan(solver_cli, tmp_path, "sg", _workload("sglang", "fp16", scheduler="prefill_first", multi_step=4,
                                                           max_num_batched_tokens=4096))
    commands, stderr = _commands(solver_cli, path, tmp_path / "sg-out")
    for args in commands:
        assert _flag(args, "--chunked-prefill-size") == "4096" and _flag(args, "--mem-fraction-static")
        assert "--enable-mixed-chunk" not in args  # prefill-only steps: SGLang's own default
        # SGLang 0.5.9 declares --num-continuous-decode-steps and reads it nowhere: no dead flag,
        # a warning instead.
        assert "--num-continuous-decode-steps" not in args
    assert "4 decode steps per scheduling decision, which lmsysorg/sglang:v0.5.9 does not run" in stderr
    # vLLM V0's prefill-only steps and multi-step: the pinned image runs V1, which has neither.
    path, _ = _plan(solver_cli, tmp_path, "v0", _workload("vllm-0.9", "fp16", scheduler="prefill_first", multi_step=8))
    commands, stderr = _commands(solver_cli, path, tmp_path / "v0-out")
    assert "vLLM V0's prefill-only steps with 8 decode steps" in stderr and "To fix" in stderr


def test_an_fp8_kv_cache_is_passed_beside_16_bit_weights(solver_cli, tmp_path):
    path, plan = _plan(solver_cli, tmp_path, "kv", _workload("vllm", "bf16", kv_cache_dtype="fp8"))
    assert {a["engine_options"]["kv_cache_dtype"] for a in plan["services"][0]["assignments"]} == {"fp8"}
    commands, _ = _commands(solver_cli, path, tmp_path / "out")
    for args in commands:
        assert _flag(args, "--dtype") == "bfloat16" and _flag(args, "--kv-cache-dtype") == "fp8"


def test_what_trtllm_serve_cannot_be_told_is_a_warning(solver_cli, tmp_path):
    # Sized for MAX_UTILIZATION (KV blocks as tokens arrive): trtllm-serve reserves whole sequences.
    path, _ = _plan(solver_cli, tmp_path, "trt", _workload("tensorrt-llm", "fp16", kv_admission="paged_on_demand"))
    _, stderr = _commands(solver_cli, path, tmp_path / "out")
    assert "GUARANTEED_NO_EVICT" in stderr and "To fix" in stderr
    path, _ = _plan(solver_cli, tmp_path, "trt0", _workload("tensorrt-llm", "fp16"))
    _, stderr = _commands(solver_cli, path, tmp_path / "out0")
    assert "GUARANTEED_NO_EVICT" not in stderr  # its own default: nothing to say


def test_trtllm_fp8_on_a_16_bit_repository_is_a_warning(solver_cli, tmp_path):
    # TensorRT-LLM reads fp8 weights from a quantized checkpoint; a library name resolves to
    # Meta's 16-bit repository, which would load at twice the planned memory.
    path, _ = _plan(solver_cli, tmp_path, "lib", _workload("tensorrt-llm"))
    _, stderr = _commands(solver_cli, path, tmp_path / "lib-out")
    assert "meta-llama/Llama-3.1-8B is not a fp8 one" in stderr and "name a fp8 checkpoint" in stderr
    named = _workload("tensorrt-llm")
    named["services"][0]["model"] = "nvidia/Llama-3.1-8B-Instruct-FP8"
    path, _ = _plan(solver_cli, tmp_path, "nv", named)
    _, stderr = _commands(solver_cli, path, tmp_path / "nv-out")
    assert "not a fp8 one" not in stderr


def test_a_release_other_than_the_images_is_said_in_the_files(solver_cli, tmp_path):
    from solver.perf.engines import parse_engine

    current = parse_engine("vllm")[1]  # the planner's default: the current release
    path, _ = _plan(solver_cli, tmp_path, "cur", _workload("vllm"))
    assert run_cli(solver_cli, "export", str(path), "--to", "kubernetes", "--out", str(tmp_path / "a")).returncode == 0
    text = "".join(f.read_text() for f in (tmp_path / "a").glob("*.yaml"))
    if current != "0.11.0":
        assert f"Planned for vllm {current}; the pinned image runs 0.11.0" in " ".join(text.split())
    # Planned for the image's own release: nothing to say.
    path, _ = _plan(solver_cli, tmp_path, "same", _workload("vllm-0.11"))
    assert run_cli(solver_cli, "export", str(path), "--to", "kubernetes", "--out", str(tmp_path / "b")).returncode == 0
    assert "Planned for" not in "".join(f.read_text() for f in (tmp_path / "b").glob("*.yaml"))


def test_a_plan_with_a_number_of_thousands_of_digits_is_refused(solver_cli, tmp_path):
    path, _ = _plan(solver_cli, tmp_path, "big", _workload("vllm"))
    (tmp_path / "huge.json").write_text(path.read_text().replace('"multi_step": 1', '"multi_step": ' + "9" * 5000))
    proc = run_cli(solver_cli, "export", str(tmp_path / "huge.json"), "--to", "kubernetes", "--out",
                   str(tmp_path / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "huge.json" in proc.stderr


def _export_with(cli: str, tmp: Path, name: str, value):
    """Export the plan with one setting of its first assignment replaced."""
    path, _ = _plan(cli, tmp, "t", _workload("vllm"))
    bad = json.loads(path.read_text())
    bad["services"][0]["assignments"][0]["engine_options"][name] = value
    (tmp / "bad.json").write_text(json.dumps(bad))
    return run_cli(cli, "export", str(tmp / "bad.json"), "--to", "kubernetes", "--out", str(tmp / "out"))


@pytest.mark.parametrize("value", ["8192; rm -rf /", -5, 0, 2.5, True, None, {"a": 1}])
def test_a_tampered_setting_is_refused_naming_it(solver_cli, tmp_path, value):
    proc = _export_with(solver_cli, tmp_path, "max_num_batched_tokens", value)
    if value is None:  # a setting the plan does not state: the image's default
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode == 2, proc.stderr
    assert "assignments[0].engine_options.max_num_batched_tokens" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_unknown_setting_is_refused(solver_cli, tmp_path):
    proc = _export_with(solver_cli, tmp_path, "enforce_eager", True)
    assert proc.returncode == 2 and "engine_options.enforce_eager" in proc.stderr
