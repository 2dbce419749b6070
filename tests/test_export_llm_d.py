"""Disaggregated plans exported as llm-d prefill/decode workers (issue 24, solver/export/llm_d.py).

Real plans from the installed CLI, exported by the installed CLI; every values file checked
against the llm-d ModelService chart's own values schema (v0.4.12, tests/schemas/), its
pod-level fields and containers as Kubernetes objects (kubernetes-validate, strict), and
its counts against the plan it came from.
"""

from __future__ import annotations

import json
import re
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
        # On AWS (instance types as node labels), prefill on H100 and H200 beside decode on H200.
        "aws": dict(_workload(10, [], serving="disaggregated"), constraints={"providers": ["aws"]}),
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
    for name in ("pure", "mixed", "aws"):
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
            # The plan's fp8 weights beside the KV cache the plan sized (vLLM's "auto": 16-bit) and its
            # token budget and memory fraction (the assignment's engine_options).
            unit_opts = next(a for r, a in assignments if r == role and a["gpus_per_replica"] == tp
                             and a["replicas"] == spec["replicas"])["engine_options"]
            assert args[args.index("--quantization") + 1] == "fp8"
            assert ("--kv-cache-dtype" in args) is (unit_opts["kv_cache_dtype"] == "fp8")
            assert int(args[args.index("--max-num-batched-tokens") + 1]) == unit_opts["max_num_batched_tokens"]
            assert float(args[args.index("--gpu-memory-utilization") + 1]) == pytest.approx(
                unit_opts["kv_cache_memory_fraction"], abs=5e-4)
            assert c["modelCommand"] == "vllmServe" and c["image"].startswith("ghcr.io/llm-d/llm-d-cuda:v")
            # What the chart adds itself (vllmServe: the model, --port, --tensor-parallel-size,
            # --served-model-name) is not ours to repeat.
            assert not {"--port", "--tensor-parallel-size", "--served-model-name", "--model"} & set(args)
            assert v["multinode"] is False and v["routing"]["proxy"]["enabled"] is True
            # Decode's vLLM listens behind the routing sidecar; prefill's on the service port.
            port = 8200 if role == "decode" else 8000
            assert v["routing"]["proxy"]["targetPort"] == 8200 and v["routing"]["servicePort"] == 8000
            assert c["ports"][0]["containerPort"] == port
            assert c["startupProbe"]["httpGet"]["port"] == c["readinessProbe"]["httpGet"]["port"] == port
            env = {e["name"]: e for e in c["env"]}
            assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
            assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"]["value"] == "5600"
            assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
            assert v["modelArtifacts"]["uri"] == "hf://" + v["modelArtifacts"]["name"]
            assert {"name": "dshm", "mountPath": "/dev/shm"} in c["volumeMounts"]
            assert any(vol["name"] == "dshm" and vol["emptyDir"]["medium"] == "Memory" for vol in spec["volumes"])
            # Placement: the plan's GPU and offer, tolerating the GPU nodes' taint.
            unit = next(a for r, a in assignments if r == role and a["gpus_per_replica"] == tp
                        and a["replicas"] == spec["replicas"] and file.startswith(f"chat-{role}-"))
            offer = next(f for f in plan["fleet"] if f["offer_id"] == unit["offer_id"])
            assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
            product = spec["extraConfig"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
                "nodeSelectorTerms"][0]["matchExpressions"][0]
            assert product["key"] == "nvidia.com/gpu.product" and product["values"]
            assert unit["gpu"].split("-")[0] in product["values"][0]
            if offer["provider"] == "aws":
                assert spec["nodeSelector"] == {"node.kubernetes.io/instance-type": offer["name"]}
            else:
                assert "nodeSelector" not in spec  # no instance-type label there
            exported.append((role, tp, spec["replicas"], batch))
            groups.add(v["modelArtifacts"]["labels"]["fleet-planner/pd-group"])
            assert v["modelArtifacts"]["name"] == "meta-llama/Llama-3.1-70B"
        assert sorted(exported) == planned
        if name == "aws":
            assert len({a["gpu"] for r, a in assignments if r == "prefill"}) > 1  # a pool on two GPU types
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
    assert not (tmp_path / "sky").exists() or not any((tmp_path / "sky").iterdir())  # nothing written
    # llm-d's workers run vLLM: a plan sized for TensorRT-LLM is not exported as if it were vLLM
    # (its pools run on Dynamo: tests/test_export_dynamo.py).
    path, plan = plans["trtllm"]
    assert _pool_assignments(plan), "the TensorRT-LLM plan is not disaggregated"
    proc = _export(solver_cli, path, tmp_path / "trt")
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "trt" / "llm-d").exists() and any((tmp_path / "trt" / "dynamo").iterdir())


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
    # Removing a values file stops nothing: the message names the releases to uninstall.
    assert "helm uninstall " + " ".join(sorted(f.removesuffix(".values.yaml") for f in first)) in proc.stdout


def test_an_export_without_its_manifest_still_knows_its_own_files(solver_cli, plans, tmp_path):
    # Every file starts with the generated header (install.sh has no #! line for that).
    out = tmp_path / "deploy"
    assert _export(solver_cli, plans["pure"][0], out).returncode == 0
    assert (out / "llm-d" / "install.sh").read_text().startswith("# Generated by `solver-cli export")
    (out / ".solver-cli-export").unlink()
    proc = _export(solver_cli, plans["pure"][0], out)
    assert proc.returncode == 0, proc.stderr


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
    values = _values_files(tmp_path / "out")
    assert values
    for v in values.values():
        role = next(r for r in ("prefill", "decode") if v[r].get("create"))
        terms = v[role]["extraConfig"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
        # Pools run on cloud offers (owned servers state no network for a KV transfer): their
        # workers keep off the owned servers, which the plan prices apart.
        assert {"key": "fleet-planner/site", "operator": "DoesNotExist"} in expressions


def test_each_link_tier_gets_its_own_valid_label(solver_cli, plans, tmp_path):
    """Two tiers of one service (here a second copy of the plan's pools under another link
    name, as a plan over two regions has) are two InferencePools: distinct labels, each a
    valid label value even where the tier's name has no ASCII letter left."""
    path, plan = plans["pure"]
    edited = json.loads(path.read_text())
    pools = [s for s in edited["services"] if s.get("role")]
    for weird in ("ñ/日本/ü", "nebius/eu-north1/rdma-800g"):  # no slug left; a name that slugs like the real one
        for p in pools:
            edited["services"].append(dict(p, name=p["name"].split("@")[0] + "@" + weird, link=weird))
    bad_path = tmp_path / "two-tiers.json"
    bad_path.write_text(json.dumps(edited))
    proc = _export(solver_cli, bad_path, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    labels = {}
    for v in _values_files(tmp_path / "out").values():
        label = v["modelArtifacts"]["labels"]["fleet-planner/pd-group"]
        role = next(r for r in ("prefill", "decode") if v[r].get("create"))
        labels.setdefault(label, []).append(role)
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", label) and len(label) <= 63, label
    assert len(labels) == 3 and all(sorted(r) == ["decode", "prefill"] for r in labels.values()), labels


def _over_two_instances(a: dict) -> None:
    a.update(instances_per_replica=2, gpus_per_replica=2 * a["gpus_per_replica"])


@pytest.mark.parametrize("edit,needle", [
    (lambda svcs: svcs.remove(next(s for s in svcs if s.get("role") == "decode")), "no decode pool"),
    (lambda svcs: next(s for s in svcs if s.get("role") == "decode").update(model="llama-3.1-8b"), "one model"),
    (lambda svcs: _over_two_instances(next(s for s in svcs if s.get("role") == "prefill")["assignments"][0]),
     "within one instance"),
    (lambda svcs: [s.update(model="org/m{{ fail }}") for s in svcs], ".model"),
])
def test_pools_the_planner_never_makes_are_refused(solver_cli, plans, tmp_path, edit, needle):
    path, _ = plans["pure"]
    bad = json.loads(path.read_text())
    edit(bad["services"])
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    proc = _export(solver_cli, tmp_path / "bad.json", tmp_path / "out")
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
