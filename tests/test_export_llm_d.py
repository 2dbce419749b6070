"""Disaggregated plans exported as llm-d prefill/decode workers (issue 24, solver/export/llm_d.py).

Real plans from the installed CLI, exported by the installed CLI; every values file checked
against the llm-d ModelService chart's own values schema (v0.4.12, tests/schemas/), its
pod-level fields and containers as Kubernetes objects (kubernetes-validate, strict), and
its counts against the plan it came from.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from test_export import K8S_VERSIONS, _need, run_cli, solve_to_file

VALUES_SCHEMA = ROOT / "tests" / "schemas" / "llm-d-modelservice-values-v0.4.12.json"
CHART_ONLY_KEYS = ("modelCommand", "mountModelVolume")  # the chart's own container keys, not Kubernetes'


def _workload(demand_rps: float, gpu_types: list[str], engine: str = "vllm", serving: str = "auto") -> dict:
    # Llama-3.1-70B fp8 with 4,000-token prompts (aiconfigurator's disaggregation case, issue 24).
    return {"name": "pd", "services": [
        {"name": "chat", "model": "llama-3.1-70b", "precisions": ["fp8"], "engine": engine, "serving": serving,
         "demand": {"requests_per_s": demand_rps, "prompt_tokens": 4000, "output_tokens": 500},
         "slo": {"ttft_ms": 1000, "tpot_ms": 30}}], "constraints": {"gpu_types": gpu_types}}


@pytest.fixture(scope="module")
def plans(solver_cli, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    out = tmp_path_factory.mktemp("pd-plans")
    cases = {
        # All of the service disaggregated, on H200 (one prefill and one decode unit).
        "pure": _workload(10, ["H200"]),
        # Aggregated replicas beside the pools, and a decode pool on two worker sizes.
        "mixed": _workload(23, ["H200", "L40S", "A100-80GB"]),
        "trtllm": _workload(10, ["H200"], engine="tensorrt-llm"),
    }
    result = {}
    for name, w in cases.items():
        (out / f"{name}-workload.json").write_text(json.dumps(w))
        plan = solve_to_file(solver_cli, out / f"{name}-workload.json", out / f"{name}.json")
        result[name] = (out / f"{name}.json", plan)
    return result


def _export(cli: str, plan: Path, out: Path, target: str = "kubernetes") -> subprocess.CompletedProcess:
    return run_cli(cli, "export", str(plan), "--to", target, "--out", str(out))


def _pool_assignments(plan: dict) -> list[tuple[str, dict]]:
    return [(s["role"], a) for s in plan["services"] if s.get("role") for a in s["assignments"]]


def _values_files(out: Path) -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((out / "llm-d").glob("*.values.yaml"))}


def _as_pod(values: dict) -> dict:
    """The pod the chart renders from one role's values: its placement and container as Kubernetes fields."""
    role = next(r for r in ("prefill", "decode") if values[r].get("create"))
    spec = values[role]
    container = {k: v for k, v in spec["containers"][0].items() if k not in CHART_ONLY_KEYS}
    pod = {"containers": [container], **spec.get("extraConfig", {})}
    for key in ("nodeSelector", "tolerations"):
        if key in spec:
            pod[key] = spec[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker"}, "spec": pod}


def test_every_pool_becomes_an_llm_d_release_the_chart_accepts(solver_cli, plans, tmp_path):
    jsonschema = _need("jsonschema", "jsonschema")
    kv = _need("kubernetes_validate", "kubernetes-validate")
    schema = json.loads(VALUES_SCHEMA.read_text())
    for name in ("pure", "mixed"):
        path, plan = plans[name]
        assignments = _pool_assignments(plan)
        assert {r for r, _ in assignments} == {"prefill", "decode"}, f"{name}: the plan is not disaggregated"
        out = tmp_path / name
        proc = _export(solver_cli, path, out)
        assert proc.returncode == 0, proc.stderr
        values = _values_files(out)
        assert len(values) == len(assignments)
        # One release per pool assignment: its role, worker count, GPUs, batch and precision are the plan's.
        planned = sorted((r, a["gpus_per_replica"], a["replicas"], a["batch"]) for r, a in assignments)
        exported = []
        groups = set()
        for file, v in values.items():
            jsonschema.validate(v, schema)
            for version in K8S_VERSIONS:
                kv.validate(_as_pod(v), version, strict=True)
            role = next(r for r in ("prefill", "decode") if v[r].get("create"))
            other = "decode" if role == "prefill" else "prefill"
            assert v[other] == {"create": False}
            spec = v[role]
            c = spec["containers"][0]
            tp = spec["parallelism"]["tensor"]
            assert c["resources"]["limits"]["nvidia.com/gpu"] == str(tp)
            args = c["args"]
            batch = int(args[args.index("--max-num-seqs") + 1])
            assert "NixlConnector" in args[args.index("--kv-transfer-config") + 1]
            assert args[args.index("--kv-cache-dtype") + 1] == "fp8"  # the plan's fp8, KV cache included
            assert c["modelCommand"] == "vllmServe" and c["image"].startswith("ghcr.io/llm-d/llm-d-cuda:v")
            assert spec["extraConfig"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                "nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["NVIDIA-H200"]
            exported.append((role, tp, spec["replicas"], batch))
            groups.add(v["modelArtifacts"]["labels"]["fleet-planner/pd-group"])
            assert v["modelArtifacts"]["name"] == "meta-llama/Llama-3.1-70B"
        assert sorted(exported) == planned
        assert len(groups) == len({s["link"] for s in plan["services"] if s.get("role")})  # one InferencePool per tier
        # install.sh installs every release, and is valid shell.
        script = (out / "llm-d" / "install.sh").read_text()
        assert subprocess.run(["sh", "-n", str(out / "llm-d" / "install.sh")]).returncode == 0
        for file in values:
            assert f"-f {file}" in script and f"--install {file.removesuffix('.values.yaml')} " in script
        assert "llm-d/install.sh" in proc.stdout


def test_a_mixed_service_keeps_its_aggregated_replicas_and_says_how_to_split(solver_cli, plans, tmp_path):
    path, plan = plans["mixed"]
    chat = next(s for s in plan["services"] if s["name"] == "chat")
    assert chat["assignments"], "the plan has no aggregated replicas beside its pools"
    decode = [a for r, a in _pool_assignments(plan) if r == "decode"]
    assert len(decode) > 1  # a pool on two worker sizes: two releases
    out = tmp_path / "mixed"
    proc = _export(solver_cli, path, out)
    assert proc.returncode == 0, proc.stderr
    # The aggregated replicas are Deployments with their Service, as for any service.
    docs = [d for p in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert sum(d["spec"]["replicas"] for d in deployments) == sum(a["replicas"] for a in chat["assignments"])
    assert (out / "chat-service.yaml").exists()
    # The split between the two halves, in the plan's rates, on stderr and in the workers' files.
    aggregated = sum(sum(a["routed"]) for a in chat["assignments"])
    pooled = sum(sum(a["routed"]) for r, a in _pool_assignments(plan) if r == "prefill")
    assert f"{aggregated:.4g} req/s to the aggregated replicas" in proc.stderr
    assert f"{pooled:.4g} req/s to the workers" in proc.stderr
    assert aggregated + pooled == pytest.approx(chat["demand"], rel=1e-6)
    assert "next: kubectl apply -f" in proc.stdout and "llm-d/install.sh" in proc.stdout


def test_what_llm_d_cannot_run_as_planned_is_refused(solver_cli, plans, tmp_path):
    # SkyPilot serves whole requests: no prefill/decode roles.
    proc = _export(solver_cli, plans["pure"][0], tmp_path / "sky", "skypilot")
    assert proc.returncode == 2 and "services[chat]" in proc.stderr and "--to kubernetes" in proc.stderr
    # llm-d's workers run vLLM: a plan sized for TensorRT-LLM is not exported as if it were vLLM.
    path, plan = plans["trtllm"]
    assert _pool_assignments(plan), "the TensorRT-LLM plan is not disaggregated"
    proc = _export(solver_cli, path, tmp_path / "trt")
    assert proc.returncode == 2 and "services[chat].engine" in proc.stderr and "serving: aggregated" in proc.stderr
    for out in (tmp_path / "sky", tmp_path / "trt"):
        assert not out.exists() or not any(out.iterdir())  # nothing written


@pytest.mark.parametrize("edit,field", [
    (lambda s: s.update(role="router"), "role"),
    (lambda s: s.update(serves="nope"), "serves"),
    (lambda s: s.update(serves=["chat"]), "serves"),
    (lambda s: s.update(link=None), "link"),
    (lambda s: s.update(role={"a": 1}), "role"),
])
def test_a_tampered_pool_gets_a_clear_error(solver_cli, plans, tmp_path, edit, field):
    path, plan = plans["pure"]
    bad = json.loads(path.read_text())
    pool = next(s for s in bad["services"] if s.get("role"))
    edit(pool)
    bad_path = tmp_path / "bad.json"
    bad_path.write_text(json.dumps(bad))
    proc = _export(solver_cli, bad_path, tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert f".{field}" in proc.stderr and "Traceback" not in proc.stderr


def test_re_export_removes_the_workers_a_new_plan_no_longer_has(solver_cli, plans, tmp_path):
    out = tmp_path / "deploy"
    assert _export(solver_cli, plans["pure"][0], out).returncode == 0
    first = set(_values_files(out))
    aggregated = tmp_path / "agg.json"
    workload = tmp_path / "agg-workload.json"
    workload.write_text(json.dumps(_workload(10, ["H200"], serving="aggregated")))
    solve_to_file(solver_cli, workload, aggregated)
    proc = _export(solver_cli, aggregated, out)
    assert proc.returncode == 0, proc.stderr
    assert first and not (out / "llm-d").exists()  # its files removed, the empty folder too
    assert any(out.glob("chat-*.yaml"))


def test_pools_in_a_plan_with_owned_servers_keep_to_their_own_nodes(solver_cli, tmp_path):
    # The owned-and-cloud example with its 70B assistant disaggregated on long prompts.
    w = json.loads((ROOT / "examples" / "owned-and-cloud.json").read_text())
    w["services"][1].update(engine="vllm", serving="disaggregated",
                            demand={"requests_per_s": 6, "prompt_tokens": 6000, "output_tokens": 400})
    (tmp_path / "w.json").write_text(json.dumps(w))
    plan = solve_to_file(solver_cli, tmp_path / "w.json", tmp_path / "plan.json")
    pools = _pool_assignments(plan)
    assert pools
    proc = _export(solver_cli, tmp_path / "plan.json", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "sites" / "dc-east.yaml").exists()
    for v in _values_files(tmp_path / "out").values():
        role = next(r for r in ("prefill", "decode") if v[r].get("create"))
        terms = v[role]["extraConfig"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
        on_site = v[role].get("nodeSelector", {}).get("fleet-planner/site")
        # A cloud worker keeps off the owned servers (the plan prices them apart); an owned one selects its site.
        assert on_site == "dc-east" or {"key": "fleet-planner/site", "operator": "DoesNotExist"} in expressions
