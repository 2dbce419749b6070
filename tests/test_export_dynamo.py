"""Disaggregated plans on SGLang and TensorRT-LLM exported as NVIDIA Dynamo DynamoGraphDeployments
(issue 24, solver/export/dynamo.py).

Real plans from the installed CLI, exported by the installed CLI; every DGD checked against
the part of Dynamo's CRD tests/schemas/ holds (v1alpha1 @ 967e177c: unknown component keys
fail, as the API server would prune them), each worker's pod fields and container as
Kubernetes objects (kubernetes-validate, strict), the TensorRT-LLM engine settings as YAML,
and every count against the plan it came from.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from test_export import K8S_VERSIONS, _need, run_cli, solve_to_file
from test_export_llm_d import _pool_assignments, _workload

DGD_SCHEMA = ROOT / "tests" / "schemas" / "dynamographdeployment-v1alpha1-dynamo-967e177.json"


@pytest.fixture(scope="module")
def plans(solver_cli, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    out = tmp_path_factory.mktemp("dynamo-plans")
    cases = {
        # Aggregated replicas beside the pools (the optimizer's choice at 23 requests/s).
        "sglang": _workload(23, ["H200", "L40S", "A100-80GB"], engine="sglang"),
        # All disaggregated; the decode pool on two worker sizes.
        "trtllm": _workload(10, ["H200"], engine="tensorrt-llm", serving="disaggregated"),
        # Two link tiers of one service (GCP's two RDMA speeds), under a name far past the name budget.
        "tiers": dict(_workload(10, [], engine="sglang", serving="disaggregated"),
                      constraints={"providers": ["aws", "gcp"]}),
    }
    cases["tiers"]["services"][0].update(name="a-very-long-service-name-for-the-retrieval-augmented-generation-team",
                                         slo={"ttft_ms": 1000, "tpot_ms": 30, "percentile": 99})
    result = {}
    for name, w in cases.items():
        (out / f"{name}-workload.json").write_text(json.dumps(w))
        result[name] = (out / f"{name}.json", solve_to_file(solver_cli, out / f"{name}-workload.json",
                                                            out / f"{name}.json"))
    return result


def _export(cli: str, plan: Path, out: Path) -> subprocess.CompletedProcess:
    return run_cli(cli, "export", str(plan), "--to", "kubernetes", "--out", str(out))


def _docs(out: Path) -> dict[str, list[dict]]:
    return {p.name: list(yaml.safe_load_all(p.read_text())) for p in sorted((out / "dynamo").glob("*.yaml"))}


def _as_pod(component: dict) -> dict:
    """The pod the operator builds from one component: its pod fields, its container as `main`."""
    spec = {k: v for k, v in component["extraPodSpec"].items() if k != "mainContainer"}
    spec["containers"] = [{"name": "main", **component["extraPodSpec"]["mainContainer"]}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker"}, "spec": spec}


def _arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


@pytest.mark.parametrize("case", ["sglang", "trtllm"])
def test_every_pool_becomes_a_dynamo_component_the_crd_accepts(solver_cli, plans, tmp_path, case):
    jsonschema = _need("jsonschema", "jsonschema")
    kv = _need("kubernetes_validate", "kubernetes-validate")
    schema = json.loads(DGD_SCHEMA.read_text())
    path, plan = plans[case]
    assignments = _pool_assignments(plan)
    assert {r for r, _ in assignments} == {"prefill", "decode"}, f"{case}: the plan is not disaggregated"
    proc = _export(solver_cli, path, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "llm-d").exists()  # llm-d runs vLLM only
    files = _docs(tmp_path)
    assert len(files) == 1  # one service, one link tier
    docs = next(iter(files.values()))
    dgd = docs[-1]
    jsonschema.validate(dgd, schema)
    assert dgd["apiVersion"] == "nvidia.com/v1alpha1" and dgd["kind"] == "DynamoGraphDeployment"
    assert dgd["spec"]["backendFramework"] == {"sglang": "sglang", "trtllm": "trtllm"}[case]
    name = dgd["metadata"]["name"]
    services = dgd["spec"]["services"]
    assert services["Frontend"]["componentType"] == "frontend"
    workers = {k: v for k, v in services.items() if k != "Frontend"}
    # Dynamo's webhook (with Grove) refuses a DGD whose name and component key pass 45 characters.
    for key in services:
        assert len(f"{name}-{key.lower()}") <= 45, key
    frontend = services["Frontend"]["extraPodSpec"]["mainContainer"]
    assert _arg(frontend["args"], "--router-mode") == "kv"  # not round-robin over unlike workers
    assert {e["name"] for e in frontend["env"]} == {"HF_TOKEN"}  # it tokenizes: gated models need the token
    config = {}
    if case == "trtllm":
        config_map = docs[0]
        assert config_map["kind"] == "ConfigMap"
        for version in K8S_VERSIONS:
            kv.validate(config_map, version, strict=True)
        config = {k: yaml.safe_load(v) for k, v in config_map["data"].items()}
        assert set(config) == {f"{k}.yaml" for k in workers}
    else:
        assert len(docs) == 1
    exported = []
    for key, c in workers.items():
        for version in K8S_VERSIONS:
            kv.validate(_as_pod(c), version, strict=True)
        role = c["subComponentType"]
        assert c["componentType"] == "worker" and key.startswith(role)
        gpus = int(c["resources"]["limits"]["gpu"])
        assert c["resources"]["requests"]["gpu"] == str(gpus)
        main = c["extraPodSpec"]["mainContainer"]
        args = main["args"]
        assert main["command"] == ["python3", "-m", f"dynamo.{dgd['spec']['backendFramework']}"]
        assert _arg(args, "--disaggregation-mode") == role
        assert _arg(args, "--model-path") == _arg(args, "--served-model-name") == "meta-llama/Llama-3.1-70B"
        if case == "sglang":
            tp, batch = int(_arg(args, "--tp")), int(_arg(args, "--max-running-requests"))
            assert _arg(args, "--disaggregation-transfer-backend") == "nixl"
            # The plan's fp8 weights, its KV cache (SGLang's "auto": 16-bit), token budget and memory fraction.
            opts = next(a["engine_options"] for r, a in assignments if r == role and a["gpus_per_replica"] == gpus
                        and a["replicas"] == c["replicas"])
            assert _arg(args, "--quantization") == "fp8"
            assert ("--kv-cache-dtype" in args) is (opts["kv_cache_dtype"] == "fp8")
            assert int(_arg(args, "--chunked-prefill-size")) == opts["max_num_batched_tokens"]
            assert float(_arg(args, "--mem-fraction-static")) == pytest.approx(opts["kv_cache_memory_fraction"],
                                                                               abs=5e-4)
        else:
            engine = config[f"{key}.yaml"]
            assert _arg(args, "--extra-engine-args") == f"/etc/fleet-planner/{key}.yaml"
            assert {"name": "engine-config", "mountPath": "/etc/fleet-planner", "readOnly": True} in main["volumeMounts"]
            assert c["extraPodSpec"]["volumes"][0]["configMap"]["name"] == docs[0]["metadata"]["name"]
            tp, batch = engine["tensor_parallel_size"], engine["max_batch_size"]
            # The CLI flags say the same as the file (whichever of the two Dynamo's version reads).
            assert (int(_arg(args, "--tensor-parallel-size")), int(_arg(args, "--max-batch-size"))) == (tp, batch)
            assert engine["cache_transceiver_config"] == {"backend": "DEFAULT"}
            assert engine["disable_overlap_scheduler"] is (role == "prefill")
        assert tp == gpus
        # Placement: the plan's GPU, tolerating the GPU nodes' taint; the service's label on the pods.
        pod = c["extraPodSpec"]
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        product = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"][0]["matchExpressions"][0]
        assert product["key"] == "nvidia.com/gpu.product" and "H200" in product["values"][0]
        assert c["extraPodMetadata"]["labels"]["app.kubernetes.io/name"] == "chat"
        assert c["extraPodMetadata"]["labels"]["fleet-planner/gpu"] == "H200"
        # The checkpoint downloads into an emptyDir (HF_HOME), not the container's writable layer.
        assert {"name": "model-cache", "mountPath": "/model-cache"} in main["volumeMounts"]
        assert {"name": "model-cache", "emptyDir": {}} in pod["volumes"]
        assert {"name": "HF_HOME", "value": "/model-cache"} in main["env"]
        assert c["sharedMemory"]["size"].endswith("Gi")
        exported.append((role, gpus, c["replicas"], batch))
    planned = sorted((r, a["gpus_per_replica"], a["replicas"], a["batch"]) for r, a in assignments)
    assert sorted(exported) == planned
    aggregated = [a for s in plan["services"] if not s.get("role") for a in s["assignments"]]
    # The SGLang case is served both ways (the optimizer's choice): the split is the gateway's, in the plan's rates.
    assert bool(aggregated) is (case == "sglang")
    if aggregated:
        assert "chat-service.yaml" in {p.name for p in tmp_path.iterdir()}
        assert f"to {name}-frontend:8000" in proc.stderr
    assert f"kubectl apply -f {tmp_path / 'dynamo'}" in proc.stdout


def test_two_link_tiers_are_two_graphs_with_the_plans_split(solver_cli, plans, tmp_path):
    jsonschema = _need("jsonschema", "jsonschema")
    schema = json.loads(DGD_SCHEMA.read_text())
    path, plan = plans["tiers"]
    links = {s["link"] for s in plan["services"] if s.get("role")}
    assert len(links) == 2, "the plan no longer spans two link tiers"
    proc = _export(solver_cli, path, tmp_path)
    assert proc.returncode == 0, proc.stderr
    files = _docs(tmp_path)
    assert len(files) == 2
    routed: dict[str, float] = {}
    for svc in plan["services"]:
        if svc.get("role") == "prefill":
            routed[svc["link"]] = routed.get(svc["link"], 0.0) + sum(sum(a["routed"]) for a in svc["assignments"])
    assert sum(routed.values()) == pytest.approx(10, rel=1e-6)
    names = set()
    assert "2 link tiers" in proc.stderr
    for docs in files.values():
        dgd = docs[-1]
        jsonschema.validate(dgd, schema)
        name = dgd["metadata"]["name"]
        names.add(name)
        for key in dgd["spec"]["services"]:
            assert len(f"{name}-{key.lower()}") <= 45, key
        # No aggregated replicas, but two Frontends: stderr gives the plan's rate for each.
        link = dgd["metadata"]["annotations"]["fleet-planner/link"]
        assert f"{routed[link]:.4g} req/s to {name}-frontend:8000" in proc.stderr
    assert len(names) == 2


def test_a_tier_on_two_engines_is_refused(solver_cli, plans, tmp_path):
    path, plan = plans["sglang"]
    bad = json.loads(path.read_text())
    decode = next(s for s in bad["services"] if s.get("role") == "decode")
    decode["engine"] = "tensorrt-llm"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    proc = _export(solver_cli, tmp_path / "bad.json", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert "services[chat].engine" in proc.stderr and "one engine" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_component_key_the_crd_does_not_know_fails_the_schema():
    # The check above can fail: a misspelt key (resources.limits.gpus) is what the API server would drop.
    jsonschema = _need("jsonschema", "jsonschema")
    schema = json.loads(DGD_SCHEMA.read_text())
    good = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "x"},
            "spec": {"services": {"w": {"componentType": "worker", "resources": {"limits": {"gpu": "1"}}}}}}
    jsonschema.validate(good, schema)
    for bad in ({"resources": {"limits": {"gpus": "1"}}}, {"replica": 2}, {"resources": {"limits": {"gpu": 1}}}):
        doc = json.loads(json.dumps(good))
        doc["spec"]["services"]["w"].update(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, schema)


def test_re_export_names_the_graphs_to_delete(solver_cli, plans, tmp_path):
    out = tmp_path / "deploy"
    assert _export(solver_cli, plans["trtllm"][0], out).returncode == 0
    first = sorted(p.stem for p in (out / "dynamo").glob("*.yaml"))
    workload = tmp_path / "agg-workload.json"
    workload.write_text(json.dumps(_workload(10, ["H200"], engine="tensorrt-llm", serving="aggregated")))
    solve_to_file(solver_cli, workload, tmp_path / "agg.json")
    proc = _export(solver_cli, tmp_path / "agg.json", out)
    assert proc.returncode == 0, proc.stderr
    assert first and not (out / "dynamo").exists()
    # Removing a DGD's file stops nothing: the message names the objects to delete.
    assert "kubectl delete dynamographdeployment " + " ".join(first) in proc.stdout
    assert "kubectl delete configmap --ignore-not-found " + " ".join(f"{n}-engine" for n in first) in proc.stdout
