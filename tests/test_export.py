"""Deployment export: every example's plan through the installed CLI, validated by the targets' own schemas.

Kubernetes objects: kubernetes-validate's OpenAPI JSON schemas of the Kubernetes API
(strict: unknown fields fail), and LeaderWorkerSet against its CRD schema from
kubernetes-sigs/lws v0.8.0 (tests/schemas/, made strict the same way); the pod templates
inside a LeaderWorkerSet also as core/v1 PodTemplates. SkyPilot files: SkyPilot's task
schema and Task.from_yaml_config, in a subprocess (tests/skypilot_check.py). Both
validators are test-only dependencies; CI installs them (`.[test]`), and without them
here the validation tests skip with the install line, while CI fails.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, ROOT

SCHEMAS = ROOT / "tests" / "schemas"
LWS_SCHEMA = SCHEMAS / "leaderworkerset-v1-lws-v0.8.0.json"
HTTPROUTE_SCHEMA = SCHEMAS / "httproute-v1-gateway-api-v1.6.1.json"
K8S_VERSIONS = ("1.30.0", "1.37.0")  # an older and the newest API the validator ships


def _need(module: str, package: str, load: bool = True):
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{package} is required in CI (pip install -e '.[test]')")
        pytest.skip(f"{package} is not installed (pip install -e '.[test]'); CI runs this test")
    return importlib.import_module(module) if load else None


def run_cli(cli: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def solve_to_file(cli: str, workload: Path, out: Path) -> dict:
    proc = run_cli(cli, "solve", str(workload), "--format", "json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    out.write_text(proc.stdout)
    return json.loads(proc.stdout)


# ------------------------------------------------------------------ plans
@pytest.fixture(scope="module")
def example_plans(solver_cli, tmp_path_factory) -> dict[str, Path]:
    """examples/*.json|yaml that `solve` plans (the review spec is not a workload) -> their PLAN.json."""
    out = tmp_path_factory.mktemp("plans")
    plans = {}
    for path in sorted([*EXAMPLES.glob("*.json"), *EXAMPLES.glob("*.yaml")]):
        proc = run_cli(solver_cli, "solve", str(path), "--format", "json", "--quiet")
        if proc.returncode == 0:
            (out / f"{path.stem}.json").write_text(proc.stdout)
            plans[path.stem] = out / f"{path.stem}.json"
    assert {"llm-platform", "s1-throughput", "s2-latency", "s3-big-model"} <= set(plans)
    return plans


MULTI_NODE = {
    "name": "multi-node",
    "services": [
        {"name": "llama-405b", "model": "llama-3.1-405b", "precisions": ["fp16"], "engine": "vllm",
         "demand": {"requests_per_s": 0.5, "prompt_tokens": 512, "output_tokens": 128}, "min_replicas": 1},
        {"name": "llama-405b-sg", "model": "llama-3.1-405b", "precisions": ["bf16"], "engine": "sglang",
         "demand": {"requests_per_s": 0.5, "prompt_tokens": 512, "output_tokens": 128}, "min_replicas": 1},
    ],
    # 810 GB of fp16 weights do not fit one 8 x 80 GB instance: each replica spans two p5.48xlarge.
    "constraints": {"gpu_types": ["H100-SXM"], "providers": ["aws"]},
}

# Two 1-GPU replicas on the only offer, a 2-GPU instance: the plan packs them onto one.
PACKED = {
    "name": "packed",
    "services": [{"name": "chat", "model": "llama-3.1-8b", "precisions": ["fp16"],
                  "demand": {"requests_per_s": 0.1, "prompt_tokens": 256, "output_tokens": 64}, "min_replicas": 2}],
    "catalog": {"offers": [{"provider": "aws", "name": "g5.12xlarge-two", "region": "us-east-1", "gpu": "A10G",
                            "gpus_per_instance": 2, "price_usd_per_hour": 2.0}]},
}


@pytest.fixture(scope="module")
def multi_node_plan(solver_cli, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("multi")
    (d / "w.json").write_text(json.dumps(MULTI_NODE))
    plan = solve_to_file(solver_cli, d / "w.json", d / "plan.json")
    assert all(a["instances_per_replica"] == 2 for s in plan["services"] for a in s["assignments"])
    return d / "plan.json"


@pytest.fixture(scope="module")
def packed_plan(solver_cli, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("packed")
    (d / "w.json").write_text(json.dumps(PACKED))
    plan = solve_to_file(solver_cli, d / "w.json", d / "plan.json")
    assert plan["fleet"][0]["instances"] == 1 and plan["services"][0]["assignments"][0]["replicas"] == 2
    return d / "plan.json"


def export(cli: str, plan: Path, target: str, out: Path) -> list[Path]:
    proc = run_cli(cli, "export", str(plan), "--to", target, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    files = sorted(out.glob("*.yaml"))
    assert files and f"wrote {len(files)} {target} file(s)" in proc.stdout
    return files


def k8s_docs(files: list[Path]) -> list[dict]:
    return [doc for f in files for doc in yaml.safe_load_all(f.read_text()) if doc]


# ------------------------------------------------------------------ validators
def _strict(schema):
    """CRD schemas prune unknown fields; for validation, reject them as kubeconform -strict does."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (out.get("type") == "object" and "properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def validate_k8s(docs: list[dict]) -> None:
    kv = _need("kubernetes_validate", "kubernetes-validate")
    jsonschema = _need("jsonschema", "jsonschema")
    lws = _strict(json.loads(LWS_SCHEMA.read_text()))
    route = _strict(json.loads(HTTPROUTE_SCHEMA.read_text()))
    for doc in docs:
        if doc["kind"] == "HTTPRoute":
            jsonschema.validate(doc, route)
        elif doc["kind"] == "LeaderWorkerSet":
            jsonschema.validate(doc, lws)
            for role in ("leaderTemplate", "workerTemplate"):
                template = doc["spec"]["leaderWorkerTemplate"][role]
                for version in K8S_VERSIONS:
                    kv.validate({"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"},
                                 "template": template}, version, strict=True)
        else:
            for version in K8S_VERSIONS:
                kv.validate(doc, version, strict=True)


class _SkyPilotChecker:
    """tests/skypilot_check.py --serve: one subprocess for the module's SkyPilot checks
    (importing SkyPilot takes seconds; a process per check paid it a dozen times), with HOME
    a temporary directory of its own (SkyPilot writes state under ~/.sky)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def check(self, files: list[Path]) -> list[dict]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps([str(f) for f in files]) + "\n")
        self.proc.stdin.flush()
        lines = []
        for line in self.proc.stdout:
            if line.rstrip("\n") == "END":
                return [json.loads(x) for x in lines if x.startswith("{")]
            lines.append(line)
        raise AssertionError(f"the SkyPilot checker ended (exit {self.proc.wait()}): {self._stderr()[-3000:]}")

    def _start(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="skyhome-"))
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "skypilot_check.py"), "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, text=True,
                                     env={**os.environ, "HOME": str(self.home)})
        if self.proc.stdout.readline().rstrip("\n") != "READY":
            raise AssertionError(f"the SkyPilot checker did not start (exit {self.proc.wait()}): "
                                 f"{self._stderr()[-3000:]}")

    def _stderr(self) -> str:
        self.err.seek(0)
        return self.err.read()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.err.close()
            shutil.rmtree(self.home, ignore_errors=True)
            self.proc = None


_SKYPILOT = _SkyPilotChecker()


@pytest.fixture(scope="module", autouse=True)
def _skypilot_checker():
    yield
    _SKYPILOT.close()


def validate_skypilot(files: list[Path]) -> list[dict]:
    _need("sky", "skypilot", load=False)  # SkyPilot runs in the subprocess only
    return _SKYPILOT.check(files)


# ------------------------------------------------------------------ every example, both targets
@pytest.mark.parametrize("target", ["kubernetes", "skypilot"])
def test_every_example_plan_exports_and_validates(solver_cli, example_plans, target, tmp_path):
    for name, plan_path in example_plans.items():
        plan = json.loads(plan_path.read_text())
        if plan.get("periods"):
            continue  # one period at a time: test_each_period_exports_its_own_fleet
        pools = [a for s in plan["services"] if s.get("role") for a in s["assignments"]]
        if pools:
            # Disaggregated pools become llm-d workers on vLLM and Dynamo components on SGLang and
            # TensorRT-LLM (tests/test_export_llm_d.py, test_export_dynamo.py validate them):
            # Kubernetes only; SkyPilot refuses them, naming the fix.
            proc = run_cli(solver_cli, "export", str(plan_path), "--to", target, "--out", str(tmp_path / name))
            engine = next(s["engine"] for s in plan["services"] if s.get("role"))
            if target == "kubernetes":
                assert proc.returncode == 0, proc.stderr
                if engine == "vllm":
                    assert len(list((tmp_path / name / "llm-d").glob("*.values.yaml"))) == len(pools), name
                else:
                    graphs = [yaml.safe_load_all(p.read_text()) for p in (tmp_path / name / "dynamo").glob("*.yaml")]
                    workers = [c for docs in graphs for d in docs if d["kind"] == "DynamoGraphDeployment"
                               for c in d["spec"]["services"].values() if c["componentType"] == "worker"]
                    assert len(workers) == len(pools), name
                continue
            assert proc.returncode == 2, name
            assert "--to kubernetes" in proc.stderr, name
            assert "serving: aggregated" in proc.stderr, name
            assert not (tmp_path / name).exists() or not any((tmp_path / name).iterdir())
            continue
        files = export(solver_cli, plan_path, target, tmp_path / name)
        units = [(s["name"], a) for s in plan["services"] for a in s["assignments"]]
        if target == "kubernetes":
            docs = k8s_docs(files)
            validate_k8s(docs)
            workloads = [d for d in docs if d["kind"] in ("Deployment", "LeaderWorkerSet")]
            # One Service per planned service; a service on several units adds one per unit, and an HTTPRoute.
            services = [d for d in docs if d["kind"] == "Service" and "app.kubernetes.io/instance" not in
                        d["metadata"]["labels"]]
            assert len(workloads) == len(units), name
            assert sorted(d["metadata"]["name"] for d in services) == sorted({s["name"] for s in plan["services"]})
            routes = [d for d in docs if d["kind"] == "HTTPRoute"]
            several = {s["name"] for s in plan["services"] if len(s["assignments"]) > 1}
            assert sorted(d["metadata"]["name"] for d in routes) == sorted(several), name
            assert sum(d["spec"]["replicas"] for d in workloads) == sum(a["replicas"] for _, a in units)
        else:
            results = validate_skypilot(files)
            assert [r for r in results if not r["ok"]] == [], name
            assert len(results) == len(units), name
            assert sum(r["min_replicas"] for r in results) == sum(a["replicas"] for _, a in units)
            assert all(r["readiness_path"] == "/health" for r in results)


def test_llm_platform_exports_carry_the_plans_decisions(solver_cli, example_plans, tmp_path):
    plan = json.loads(example_plans["llm-platform"].read_text())
    chat = next(s for s in plan["services"] if s["name"] == "chat")
    assert chat["model"] == "llama-3.1-8b" and chat["engine"] == "vllm"
    fleet = {f["offer_id"]: f for f in plan["fleet"]}
    docs = {d["metadata"]["name"]: d for d in k8s_docs(export(solver_cli, example_plans["llm-platform"],
                                                               "kubernetes", tmp_path / "k"))
            if d["kind"] in ("Deployment", "LeaderWorkerSet")}
    sky = {Path(r["file"]).stem: r for r in validate_skypilot(
        export(solver_cli, example_plans["llm-platform"], "skypilot", tmp_path / "s"))}
    for a in chat["assignments"]:
        line = fleet[a["offer_id"]]
        (name,) = [n for n in docs if n.startswith("chat-") and docs[n]["metadata"]["annotations"]
                   ["fleet-planner/offer"] == a["offer_id"]]
        pod = docs[name]["spec"]["template"]["spec"]
        (c,) = pod["containers"]
        assert c["image"].startswith("vllm/vllm-openai:v")
        cmd = c["command"]
        assert cmd[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
        assert cmd[cmd.index("--tensor-parallel-size") + 1] == str(a["gpus_per_replica"])
        assert cmd[cmd.index("--max-num-seqs") + 1] == str(a["batch"])
        if a["precision"] == "fp8":
            assert cmd[cmd.index("--quantization") + 1] == "fp8"
        assert c["resources"]["limits"]["nvidia.com/gpu"] == str(a["gpus_per_replica"])
        assert c["readinessProbe"]["httpGet"]["path"] == "/health"
        gpu_terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert gpu_terms["nodeSelectorTerms"][0]["matchExpressions"][0]["key"] == "nvidia.com/gpu.product"
        if line["provider"] in ("aws", "gcp", "azure"):
            assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": line["name"]}
        # The replica's share of the host, from the catalog's instance size.
        assert int(c["resources"]["requests"]["cpu"]) <= line["vcpus"]
        r = sky[name]
        assert (r["cloud"], r["region"], r["instance_type"]) == (line["provider"], line["region"], line["name"])
        assert sum(r["accelerators"].values()) == line["gpus_per_instance"]
        assert r["min_replicas"] == a["replicas"] and r["num_nodes"] == 1
        assert f"--max-num-seqs {a['batch']}" in r["run"]


def test_measured_profile_service_gets_a_placeholder_not_a_fake_server(solver_cli, example_plans, tmp_path):
    files = export(solver_cli, example_plans["s1-throughput"], "kubernetes", tmp_path / "k")
    (deploy,) = [d for d in k8s_docs(files) if d["kind"] == "Deployment"]
    (c,) = deploy["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "SET-ME/stable-diffusion-server:TAG" and "command" not in c
    text = next(f for f in files if f.name.startswith("stable-diffusion-seed")).read_text()
    assert "No model" in text and "Set `image`" in text
    # The seed catalog's provider is no cloud: no instance-type selector, a note instead of a cloud.
    assert "nodeSelector" not in deploy["spec"]["template"]["spec"]
    sky_files = export(solver_cli, example_plans["s1-throughput"], "skypilot", tmp_path / "s")
    (r,) = validate_skypilot(sky_files)
    assert r["ok"] and r["cloud"] is None and r["run"].rstrip().endswith("exit 1")
    assert "is not a SkyPilot cloud" in sky_files[0].read_text()


# ------------------------------------------------------------------ multi-node and packing
def test_multi_instance_replica_becomes_a_multi_node_spec(solver_cli, multi_node_plan, tmp_path):
    docs = k8s_docs(export(solver_cli, multi_node_plan, "kubernetes", tmp_path / "k"))
    validate_k8s(docs)
    lws = {d["metadata"]["name"]: d for d in docs if d["kind"] == "LeaderWorkerSet"}
    assert len(lws) == 2 and not [d for d in docs if d["kind"] == "Deployment"]
    for name, d in lws.items():
        assert d["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
        tpl = d["spec"]["leaderWorkerTemplate"]
        assert tpl["size"] == 2 and d["spec"]["replicas"] == 1
        leader = tpl["leaderTemplate"]["spec"]["containers"][0]
        worker = tpl["workerTemplate"]["spec"]["containers"][0]
        assert leader["resources"]["limits"]["nvidia.com/gpu"] == "8" == worker["resources"]["limits"]["nvidia.com/gpu"]
        assert "readinessProbe" in leader and "readinessProbe" not in worker
        words = " ".join(leader["command"])
        if "-sg-" in name:
            assert "--tp-size 8 --pp-size 2" in words and "--nnodes $(LWS_GROUP_SIZE)" in words
            assert "--node-rank $(LWS_WORKER_INDEX)" in " ".join(worker["command"])
        else:
            assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in words and "ray" in words
            assert "worker --ray_address=$(LWS_LEADER_ADDRESS)" in " ".join(worker["command"])
    results = validate_skypilot(export(solver_cli, multi_node_plan, "skypilot", tmp_path / "s"))
    assert len(results) == 2
    for r in results:
        assert r["ok"], r
        assert r["num_nodes"] == 2 and r["instance_type"] == "p5.48xlarge" and r["accelerators"] == {"H100": 8}
        assert "SKYPILOT_NODE_RANK" in r["run"]


def test_packed_replicas_keep_their_gpus_and_skypilot_says_why_no_instance_type(solver_cli, packed_plan, tmp_path):
    docs = k8s_docs(export(solver_cli, packed_plan, "kubernetes", tmp_path / "k"))
    validate_k8s(docs)
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    files = export(solver_cli, packed_plan, "skypilot", tmp_path / "s")
    (r,) = validate_skypilot(files)
    assert r["ok"] and r["instance_type"] is None and r["accelerators"] == {"A10G": 1} and r["region"] == "us-east-1"
    assert "packs replicas onto g5.12xlarge-two" in " ".join(files[0].read_text().split())


def test_multi_node_tensorrt_llm_is_refused_with_the_fix(solver_cli, tmp_path):
    w = copy.deepcopy(MULTI_NODE)
    w["services"] = [dict(w["services"][0], engine="tensorrt-llm")]
    (tmp_path / "w.json").write_text(json.dumps(w))
    solve_to_file(solver_cli, tmp_path / "w.json", tmp_path / "plan.json")
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", "kubernetes", "--out", str(tmp_path / "k"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "multi-node TensorRT-LLM" in proc.stderr and "To fix:" in proc.stderr
    assert not (tmp_path / "k").exists()  # checked before anything is written


# ------------------------------------------------------------------ the validators can fail
def test_validators_reject_broken_files(solver_cli, example_plans, multi_node_plan, tmp_path):
    kv = _need("kubernetes_validate", "kubernetes-validate")
    jsonschema = _need("jsonschema", "jsonschema")
    docs = k8s_docs(export(solver_cli, example_plans["s3-big-model"], "kubernetes", tmp_path / "k"))
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    c = deploy["spec"]["template"]["spec"]["containers"][0]
    c["readinesProbe"] = c.pop("readinessProbe")
    with pytest.raises(kv.ValidationError):
        validate_k8s([deploy])
    lws = next(d for d in k8s_docs(export(solver_cli, multi_node_plan, "kubernetes", tmp_path / "m"))
               if d["kind"] == "LeaderWorkerSet")
    lws["spec"]["leaderWorkerTemplate"]["groupSize"] = lws["spec"]["leaderWorkerTemplate"].pop("size")
    with pytest.raises(jsonschema.ValidationError):
        validate_k8s([lws])
    route = next(d for d in k8s_docs(export(solver_cli, example_plans["llm-platform"], "kubernetes", tmp_path / "r"))
                 if d["kind"] == "HTTPRoute")
    validate_k8s([route])
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = -1  # the schema's minimum is 0
    with pytest.raises(jsonschema.ValidationError):
        validate_k8s([route])
    broken = tmp_path / "broken.yaml"
    good = export(solver_cli, example_plans["s3-big-model"], "skypilot", tmp_path / "s")[0]
    config = yaml.safe_load(good.read_text())
    config["resources"]["cloud"] = "seed"
    broken.write_text(yaml.safe_dump(config))
    (r,) = validate_skypilot([broken])
    assert not r["ok"] and "seed" in r["error"]


# ------------------------------------------------------------------ the command line
def test_solve_export_writes_the_files_and_keeps_stdout_the_plan(solver_cli, tmp_path):
    out = tmp_path / "deploy"
    proc = run_cli(solver_cli, "solve", str(EXAMPLES / "s3-big-model.json"), "--format", "json", "--quiet",
                   "--export", "kubernetes", "--export-out", str(out))
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["status"] == "optimal" and plan["services"][0]["model"] == "llama-2-13b"
    assert sorted(p.name for p in out.glob("*.yaml")) == sorted(
        ["llama-13b-chat-seed-a10-x2-fp16.yaml", "llama-13b-chat-service.yaml"])
    assert "wrote 2 kubernetes file(s)" in proc.stderr
    default = run_cli(solver_cli, "solve", str(EXAMPLES / "s3-big-model.json"), "--quiet", "--export", "skypilot",
                      cwd=tmp_path)
    assert default.returncode == 0, default.stderr
    assert (tmp_path / "deploy" / "skypilot" / "llama-13b-chat-seed-a10-x2-fp16.yaml").exists()


def test_reexport_removes_files_of_units_that_are_gone(solver_cli, example_plans, tmp_path):
    out = tmp_path / "k"
    export(solver_cli, example_plans["llm-platform"], "kubernetes", out)
    (out / "notes.yaml").write_text("# mine\n")  # not written by the export: kept
    proc = run_cli(solver_cli, "export", str(example_plans["s3-big-model"]), "--to", "kubernetes", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(f.name for f in out.glob("*.yaml")) == ["llama-13b-chat-seed-a10-x2-fp16.yaml",
                                                          "llama-13b-chat-service.yaml", "notes.yaml"]


@pytest.mark.parametrize("content, expect", [
    ("not json {", "is not JSON"),
    ('{"fleet": []}', "is not a plan"),
    ('{"status": "infeasible", "infeasibility": [{"constraint": "budget", "message": "above the budget."}]}',
     "plan.status: is 'infeasible': there is no fleet to deploy (above the budget)"),
    ('{"status": "optimal", "fleet": [], "services": [{"name": "x", "assignments": [{"config": "c"}]}]}',
     "services[0].assignments[0].offer_id: is missing"),
])
def test_bad_plan_exits_2_with_a_clear_error(solver_cli, tmp_path, content, expect):
    path = tmp_path / "plan.json"
    path.write_text(content)
    proc = run_cli(solver_cli, "export", str(path), "--to", "kubernetes", "--out", str(tmp_path / "k"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert expect in proc.stderr and "To fix:" in proc.stderr


def test_plan_without_the_model_field_is_refused_not_exported_as_a_placeholder(solver_cli, example_plans, tmp_path):
    plan = json.loads(example_plans["s3-big-model"].read_text())
    del plan["services"][0]["model"]  # as plans written before the export existed
    (tmp_path / "old.json").write_text(json.dumps(plan))
    proc = run_cli(solver_cli, "export", str(tmp_path / "old.json"), "--to", "kubernetes", "--out", str(tmp_path / "k"))
    assert proc.returncode == 2 and "services[0].model: is missing" in proc.stderr and "re-run" in proc.stderr


def test_long_service_names_give_valid_kubernetes_names(solver_cli, tmp_path):
    name = "a-very-long-service-name-" + "x" * 70
    w = {"services": [{"name": name, "model": "llama-3.1-8b", "demand": {"requests_per_s": 0.2, "prompt_tokens": 256,
                                                                         "output_tokens": 64}}]}
    (tmp_path / "w.json").write_text(json.dumps(w))
    solve_to_file(solver_cli, tmp_path / "w.json", tmp_path / "plan.json")
    docs = k8s_docs(export(solver_cli, tmp_path / "plan.json", "kubernetes", tmp_path / "k"))
    validate_k8s(docs)
    for d in docs:
        assert len(d["metadata"]["name"]) <= 50 and len(d["metadata"]["labels"]["app.kubernetes.io/name"]) <= 63


def test_infeasible_plan_from_solve_is_refused(solver_cli, tmp_path):
    w = {"services": [{"name": "s", "model": "llama-3.1-8b", "demand": {"requests_per_s": 5, "prompt_tokens": 256,
                                                                          "output_tokens": 64}}],
         "constraints": {"budget_usd_per_hour": 0.01}}
    (tmp_path / "w.json").write_text(json.dumps(w))
    proc = run_cli(solver_cli, "solve", str(tmp_path / "w.json"), "--format", "json", "--quiet")
    assert proc.returncode == 3
    (tmp_path / "plan.json").write_text(proc.stdout)
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", "skypilot")
    assert proc.returncode == 2 and "is 'infeasible': there is no fleet to deploy" in proc.stderr


def test_unknown_target_and_missing_file_exit_2(solver_cli, example_plans, tmp_path):
    proc = run_cli(solver_cli, "export", str(example_plans["s1-throughput"]), "--to", "nomad")
    assert proc.returncode == 2 and "invalid choice: 'nomad'" in proc.stderr and "skypilot" in proc.stderr
    proc = run_cli(solver_cli, "solve", str(EXAMPLES / "s1-throughput.json"), "--export", "nomad")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
    proc = run_cli(solver_cli, "export", str(tmp_path / "missing.json"), "--to", "skypilot")
    assert proc.returncode == 2 and "no such file" in proc.stderr and "Traceback" not in proc.stderr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli(solver_cli, "solve", str(EXAMPLES / "s1-throughput.json"), "--export", "kubernetes",
                   "--export-out", str(blocker))
    assert proc.returncode == 2 and "not a directory" in proc.stderr


# ------------------------------------------------------------------ names (issue 25)
def _llm_service(name: str, model="llama-3.1-8b") -> dict:
    return {"name": name, "model": model, "demand": {"requests_per_s": 0.2, "prompt_tokens": 256, "output_tokens": 64}}


COLLIDING = ["Chat_A", "chat.a", "chat-a", "Chat", "chat", "a/b", "a:b", "a.b", "a-b"]


@pytest.fixture(scope="module")
def colliding_plan(solver_cli, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("colliding")
    w = {"name": "colliding", "services": [_llm_service(n) for n in COLLIDING],
         "constraints": {"providers": ["aws"], "gpu_types": ["L4"]}}
    (d / "w.json").write_text(json.dumps(w))
    solve_to_file(solver_cli, d / "w.json", d / "plan.json")
    return d / "plan.json"


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_services_whose_names_slug_alike_get_their_own_service_and_pods(solver_cli, colliding_plan, tmp_path):
    proc = run_cli(solver_cli, "export", str(colliding_plan), "--to", "kubernetes", "--out", str(tmp_path / "k"))
    assert proc.returncode == 0, proc.stderr
    docs = k8s_docs(sorted((tmp_path / "k").glob("*.yaml")))
    validate_k8s(docs)
    services = [d for d in docs if d["kind"] == "Service"]
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert len(services) == len(COLLIDING) == len({s["metadata"]["name"] for s in services})
    assert len({d["metadata"]["name"] for d in deployments}) == len(deployments)
    for svc in services:
        planned = svc["metadata"]["annotations"]["fleet-planner/service"]
        picked = [d for d in deployments if _selects(svc["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])]
        # Each Service selects the pods of exactly one planned service.
        assert {d["metadata"]["annotations"]["fleet-planner/service"] for d in picked} == {planned}
    names = {d["metadata"]["annotations"]["fleet-planner/service"]: d["metadata"]["labels"]["app.kubernetes.io/name"]
             for d in deployments}
    assert names["chat-a"] == "chat-a" and names["chat"] == "chat" and names["a-b"] == "a-b"  # exact names stay
    assert names["Chat_A"].startswith("chat-a-") and names["a:b"].startswith("a-b-")
    assert "warning: services 'Chat_A', 'chat-a', 'chat.a' all reduce to the Kubernetes name 'chat-a'" in proc.stderr
    text = (tmp_path / "k" / f"{names['Chat_A']}-service.yaml").read_text()
    assert "a hash of its own name" in " ".join(text.split())


def test_colliding_names_do_not_depend_on_the_order_of_services(solver_cli, colliding_plan, tmp_path):
    plan = json.loads(colliding_plan.read_text())
    plan["services"].reverse()
    (tmp_path / "reversed.json").write_text(json.dumps(plan))
    for name, path in (("a", colliding_plan), ("b", tmp_path / "reversed.json")):
        proc = run_cli(solver_cli, "export", str(path), "--to", "skypilot", "--out", str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr
    a = {p.name: p.read_text() for p in (tmp_path / "a").glob("*.yaml")}
    b = {p.name: p.read_text() for p in (tmp_path / "b").glob("*.yaml")}
    assert a == b and len(a) == len(COLLIDING)


def test_units_on_offers_that_slug_alike_get_distinct_names(solver_cli, example_plans, tmp_path):
    plan = json.loads(example_plans["s3-big-model"].read_text())
    line = plan["fleet"][0]
    twin = dict(line, offer_id=line["offer_id"] + ":b", region=line["region"] + "-b")
    plan["fleet"].append(twin)
    (a,) = plan["services"][0]["assignments"]
    plan["services"][0]["assignments"].append(dict(a, config=a["config"] + "-b", offer_id=twin["offer_id"]))
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    docs = k8s_docs(export(solver_cli, tmp_path / "plan.json", "kubernetes", tmp_path / "k"))
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert len(deployments) == 2 and len({d["metadata"]["name"] for d in deployments}) == 2
    assert {d["metadata"]["annotations"]["fleet-planner/offer"] for d in deployments} == {line["offer_id"],
                                                                                          twin["offer_id"]}
    assert all(len(d["metadata"]["name"]) <= 50 for d in deployments)


# ------------------------------------------------------------------ control characters (issue 25)
NASTY = "\x00\x1b[31m\x07\x7f\x85\u2028\u009b"  # NUL, ESC sequence, BEL, DEL, NEL, line separator, CSI
UNSAFE = __import__("re").compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def _inline_model(name: str) -> dict:
    return {"name": name, "params_b": 8.03, "layers": 32, "hidden_size": 4096, "attention_heads": 32, "kv_heads": 8,
            "head_dim": 128, "vocab_size": 128256, "intermediate_size": 14336}


@pytest.fixture(scope="module")
def nasty_plan(solver_cli, tmp_path_factory) -> tuple[Path, str]:
    d = tmp_path_factory.mktemp("nasty")
    w = {"name": "ctl" + NASTY, "services": [dict(_llm_service("chat"), model=_inline_model("m" + NASTY))],
         "catalog": {"offers": [{"provider": "aws", "name": "g6.x" + NASTY, "region": "us-east-1" + NASTY, "gpu": "L4",
                                 "gpus_per_instance": 1, "price_usd_per_hour": 1.0}]}}
    (d / "w.json").write_text(json.dumps(w))
    table = run_cli(solver_cli, "solve", str(d / "w.json"), "--quiet")
    assert table.returncode == 0, table.stderr
    plan = solve_to_file(solver_cli, d / "w.json", d / "plan.json")
    # JSON may carry a lone surrogate, which the workload reader refuses but a plan file can hold.
    plan["fleet"][0]["region"] += "\udc80"
    (d / "plan.json").write_text(json.dumps(plan))
    return d / "plan.json", table.stdout


def test_solve_table_escapes_control_characters(nasty_plan):
    _, table = nasty_plan
    assert not UNSAFE.search(table), repr(UNSAFE.search(table).group())
    assert "\\x1b[31m" in table and "\\x00" in table and "\\u2028" in table  # shown escaped, not dropped


@pytest.mark.parametrize("target", ["kubernetes", "skypilot"])
def test_control_characters_in_names_give_files_that_parse(solver_cli, nasty_plan, target, tmp_path):
    plan_path, _ = nasty_plan
    proc = run_cli(solver_cli, "export", str(plan_path), "--to", target, "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    assert not UNSAFE.search(proc.stdout + proc.stderr)
    files = sorted((tmp_path / "o").glob("*.yaml"))
    headers = ""
    for f in files:
        raw = f.read_bytes().decode("utf-8")  # a lone surrogate could not have been written as UTF-8
        headers += "".join(line for line in raw.splitlines(keepends=True) if line.startswith("#"))
    assert not UNSAFE.search(headers) and "m\\x00\\x1b[31m\\x07\\x7f\\x85\\u2028\\x9b" in headers
    if target == "kubernetes":
        docs = k8s_docs(files)
        validate_k8s(docs)
        (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
        # Values keep the exact name (YAML escapes it); the instance name is no valid label value: no selector.
        assert deploy["spec"]["template"]["spec"]["containers"][0]["command"][2] == "m" + NASTY
        assert "nodeSelector" not in deploy["spec"]["template"]["spec"]
    else:
        (config,) = [yaml.safe_load(f.read_text()) for f in files]
        assert config["resources"]["region"] == "us-east-1" + NASTY + "\udc80"


# ------------------------------------------------------------------ re-export (issue 25)
def test_reexport_keeps_files_it_did_not_write_even_with_the_generated_header(solver_cli, example_plans, tmp_path):
    out = tmp_path / "k"
    before = export(solver_cli, example_plans["llm-platform"], "kubernetes", out)
    # A copy the user made of a generated file, and a generated file the user edited: neither is removed.
    mine = out / "my-chat-copy.yaml"
    mine.write_text((out / "chat-service.yaml").read_text())
    edited = out / "embed-images-service.yaml"
    edited.write_text(edited.read_text() + "# tuned by hand\n")
    proc = run_cli(solver_cli, "export", str(example_plans["s3-big-model"]), "--to", "kubernetes", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(f.name for f in out.glob("*.yaml")) == ["embed-images-service.yaml", "llama-13b-chat-seed-a10-x2-fp16.yaml",
                                                          "llama-13b-chat-service.yaml", "my-chat-copy.yaml"]
    assert "embed-images-service.yaml was written by an earlier export and edited since" in proc.stderr
    assert f"removed {len(before) - 1} file(s)" in proc.stdout  # all but the edited one
    manifest = json.loads((out / ".solver-cli-export").read_text())
    assert sorted(manifest["files"]) == ["llama-13b-chat-seed-a10-x2-fp16.yaml", "llama-13b-chat-service.yaml"]


def test_export_refuses_to_overwrite_a_file_it_did_not_write(solver_cli, example_plans, tmp_path):
    out = tmp_path / "k"
    out.mkdir()
    theirs = out / "llama-13b-chat-service.yaml"
    theirs.write_text("apiVersion: v1\nkind: Service\n")
    proc = run_cli(solver_cli, "export", str(example_plans["s3-big-model"]), "--to", "kubernetes", "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "llama-13b-chat-service.yaml: exists and was not written by `solver-cli export`" in proc.stderr
    assert "To fix: move it away" in proc.stderr
    assert theirs.read_text() == "apiVersion: v1\nkind: Service\n" and sorted(p.name for p in out.iterdir()) == [
        theirs.name]


def test_files_of_an_export_without_a_manifest_are_kept_with_a_warning(solver_cli, example_plans, tmp_path):
    out = tmp_path / "k"
    before = len(export(solver_cli, example_plans["llm-platform"], "kubernetes", out))
    (out / ".solver-cli-export").unlink()  # as an export from before manifests left the directory
    proc = run_cli(solver_cli, "export", str(example_plans["s3-big-model"]), "--to", "kubernetes", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert len(list(out.glob("*.yaml"))) == before + 2
    assert "export made before exports kept a manifest" in proc.stderr and "chat-service.yaml" in proc.stderr


# ------------------------------------------------------------------ the served model (issue 25)
SERVED = {  # the workload's model -> what the engine must load
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",  # an HF id: as given
    "deepseek-r1-distill-llama-8b": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",  # not the library's Llama-3.1-8B
    "mistral-7b-v0.3": "mistralai/Mistral-7B-v0.3",  # not the library's v0.1
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B",  # a library name: the library's repository, said in a comment
    "qwen3-8b-instruct": "qwen3-8b-instruct",  # no known repository: as given, with a warning
}


def test_the_export_serves_the_users_model_not_the_librarys_base(solver_cli, tmp_path):
    w = {"name": "models", "services": [_llm_service(f"s{i}", model) for i, model in enumerate(SERVED)],
         "constraints": {"providers": ["aws"], "gpu_types": ["L4"]}}
    (tmp_path / "w.json").write_text(json.dumps(w))
    solve_to_file(solver_cli, tmp_path / "w.json", tmp_path / "plan.json")
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", "kubernetes", "--out", str(tmp_path / "k"))
    assert proc.returncode == 0, proc.stderr
    for i, (model, repo) in enumerate(SERVED.items()):
        (path,) = (tmp_path / "k").glob(f"s{i}-aws-*.yaml")
        (deploy,) = yaml.safe_load_all(path.read_text())
        assert deploy["spec"]["template"]["spec"]["containers"][0]["command"][:3] == ["vllm", "serve", repo], model
        words = " ".join(path.read_text().split())
        if model == "llama-3.1-8b":
            assert "is a library name: the export chose Hugging Face meta-llama/Llama-3.1-8B" in words
    assert "warning: model 'qwen3-8b-instruct' is not a Hugging Face id" in proc.stderr
    assert proc.stderr.count("is not a Hugging Face id") == 1  # the known names need no warning
    sky = export(solver_cli, tmp_path / "plan.json", "skypilot", tmp_path / "s")
    for i, repo in enumerate(SERVED.values()):
        (config,) = [yaml.safe_load(p.read_text()) for p in sky if p.name.startswith(f"s{i}-")]
        assert config["run"].startswith(f"vllm serve {repo} "), config["run"]


# ------------------------------------------------------------------ spot and pod size (issue 25)
SPOT_LABELS = {"gcp": ("cloud.google.com/gke-spot", "true"), "aws": ("eks.amazonaws.com/capacityType", "SPOT"),
               "azure": ("kubernetes.azure.com/scalesetpriority", "spot")}
SPOT_TAINTS = {"gcp": {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
               "azure": {"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
                         "effect": "NoSchedule"}}


def _one_service_plan(cli: str, d: Path, constraints: dict) -> Path:
    w = {"name": "one", "services": [_llm_service("chat")], "constraints": constraints}
    (d / "w.json").write_text(json.dumps(w))
    solve_to_file(cli, d / "w.json", d / "plan.json")
    return d / "plan.json"


@pytest.mark.parametrize("provider", ["gcp", "aws", "azure"])
def test_spot_plans_select_spot_nodes_and_tolerate_their_taint(solver_cli, provider, tmp_path):
    plan_path = _one_service_plan(solver_cli, tmp_path, {"providers": [provider], "pricing": "spot"})
    docs = k8s_docs(export(solver_cli, plan_path, "kubernetes", tmp_path / "k"))
    validate_k8s(docs)
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    key, value = SPOT_LABELS[provider]
    assert pod["nodeSelector"][key] == value
    spot_tolerations = [t for t in pod["tolerations"] if t["key"] != "nvidia.com/gpu"]
    assert spot_tolerations == ([SPOT_TAINTS[provider]] if provider in SPOT_TAINTS else [])
    on_demand = _one_service_plan(solver_cli, tmp_path, {"providers": [provider]})
    (deploy,) = [d for d in k8s_docs(export(solver_cli, on_demand, "kubernetes", tmp_path / "od"))
                 if d["kind"] == "Deployment"]
    assert key not in deploy["spec"]["template"]["spec"].get("nodeSelector", {})


@pytest.mark.parametrize("host_gib, expect_gib, warned", [
    (400, 320, False),  # a big host: the replica's 80% share, more than loading needs
    (22, 19, False),  # the share (17 GiB) is less than 15 GiB of fp16 weights + 4: the need wins
    (16, 14, True),  # the host cannot hold what loading needs: its allocatable 90%, and a warning
])
def test_memory_request_covers_the_weights_within_the_host(solver_cli, tmp_path, host_gib, expect_gib, warned):
    plan = json.loads(_one_service_plan(solver_cli, tmp_path, {"providers": ["azure"], "gpu_types": ["A100-80GB"]})
                      .read_text())
    (a,) = plan["services"][0]["assignments"]
    assert a["precision"] == "fp16" and a["gpus_per_replica"] == 1 and plan["fleet"][0]["gpus_per_instance"] == 1
    plan["fleet"][0]["host_memory_gib"] = host_gib
    (tmp_path / "edited.json").write_text(json.dumps(plan))
    proc = run_cli(solver_cli, "export", str(tmp_path / "edited.json"), "--to", "kubernetes", "--out", str(tmp_path / "k"))
    assert proc.returncode == 0, proc.stderr
    (deploy,) = [d for d in k8s_docs(sorted((tmp_path / "k").glob("*.yaml"))) if d["kind"] == "Deployment"]
    assert deploy["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] == f"{expect_gib}Gi"
    assert ("may fail to load" in proc.stderr) == warned


# ------------------------------------------------------------------ SkyPilot's accelerator names (issue 25)
SKY_NAMES = ROOT / "tests" / "data" / "skypilot_accelerators.csv"
CATALOG_DATA = ROOT / "solver" / "catalog" / "data"


def _csv_rows(path: Path) -> list[dict]:
    import csv

    return list(csv.DictReader(line for line in path.read_text().splitlines() if not line.startswith("#")))


def test_every_catalog_gpu_has_skypilots_name_for_its_cloud():
    from solver.export import gpus

    clouds_of = {}
    for r in _csv_rows(SKY_NAMES):
        clouds_of.setdefault(r["accelerator"], set()).add(r["cloud"])
    catalog_gpus = {r["name"] for f in ("gpus.csv", "gpus_supplement.csv") for r in _csv_rows(CATALOG_DATA / f)}
    assert catalog_gpus - set(gpus._SKYPILOT) == set()  # every GPU stated, not left to a fallback
    for gpu, name in gpus._SKYPILOT.items():
        assert name is None or name in clouds_of, (gpu, name)
    wrong = set()
    for f in ("offers.csv", "offers_supplement.csv"):
        for r in _csv_rows(CATALOG_DATA / f):
            if r["provider"] in gpus.SKYPILOT_CLOUDS:
                name = gpus.skypilot_accelerator(r["gpu"], r["provider"], r["name"])
                if r["provider"] not in clouds_of.get(name, set()):
                    wrong.add((r["provider"], r["name"], r["gpu"], name))
    assert wrong == set()
    assert gpus.skypilot_accelerator("RTX-PRO-6000", "aws", "g7e.2xlarge") == "RTXPRO6000"


def test_skypilot_names_from_its_code_are_in_the_installed_skypilot():
    """The rows taken from SkyPilot's source (not its catalog file) still say so in the installed wheel."""
    spec = importlib.util.find_spec("sky")
    if spec is None:
        _need("sky", "skypilot", load=False)
    sky_root = Path(spec.origin).parent
    for r in _csv_rows(SKY_NAMES):
        if r["source"].startswith("skypilot 0.14.1 "):
            path = r["source"].split()[2].rstrip(":")
            assert f"'{r['accelerator']}'" in (sky_root.parent / path).read_text(), r


# ------------------------------------------------------------------ multi-period plans (issue 25)
@pytest.fixture(scope="module")
def periods_plan(solver_cli, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("periods")
    proc = run_cli(solver_cli, "solve", str(EXAMPLES / "periods-day.yaml"), "--current",
                   str(EXAMPLES / "running-fleet.json"), "--format", "json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    (d / "plan.json").write_text(proc.stdout)
    return d / "plan.json"


def test_multi_period_plan_is_refused_without_a_period(solver_cli, periods_plan, tmp_path):
    proc = run_cli(solver_cli, "export", str(periods_plan), "--to", "kubernetes", "--out", str(tmp_path / "k"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--period: is required: the plan has 3 periods (night, day, evening)" in proc.stderr
    assert "To fix: give --period all" in proc.stderr and not (tmp_path / "k").exists()
    proc = run_cli(solver_cli, "export", str(periods_plan), "--to", "kubernetes", "--period", "noon")
    assert proc.returncode == 2 and "'noon' is not one of the plan's periods" in proc.stderr


@pytest.mark.parametrize("target", ["kubernetes", "skypilot"])
def test_each_period_exports_its_own_fleet(solver_cli, periods_plan, target, tmp_path):
    plan = json.loads(periods_plan.read_text())
    for period in plan["periods"]:
        out = tmp_path / period["name"]
        proc = run_cli(solver_cli, "export", str(periods_plan), "--to", target, "--out", str(out),
                       "--period", period["name"])
        assert proc.returncode == 0, proc.stderr
        files = sorted(out.glob("*.yaml"))
        planned = [(s["name"], a) for s in period["services"] for a in s["assignments"] if a["replicas"]]
        if target == "kubernetes":
            docs = k8s_docs(files)
            validate_k8s(docs)
            workloads = [d for d in docs if d["kind"] == "Deployment"]
            assert sum(d["spec"]["replicas"] for d in workloads) == sum(a["replicas"] for _, a in planned)
            assert len(workloads) == len(planned)  # on-demand and spot replicas of one configuration: two units
        else:
            results = validate_skypilot(files)
            assert [r for r in results if not r["ok"]] == []
            assert sum(r["min_replicas"] for r in results) == sum(a["replicas"] for _, a in planned)
        spot_files = [f for f in files if f.stem.endswith("-spot")]
        assert len(spot_files) == sum(1 for _, a in planned if a["spot"])
        assert all(f"period '{period['name']}'" in f.read_text() for f in files if not f.stem.endswith("-service"))


def test_solve_export_period_writes_that_period(solver_cli, tmp_path):
    out = tmp_path / "evening"
    proc = run_cli(solver_cli, "solve", str(EXAMPLES / "periods-day.yaml"), "--current",
                   str(EXAMPLES / "running-fleet.json"), "--format", "json", "--quiet", "--export", "kubernetes",
                   "--export-out", str(out), "--export-period", "evening")
    assert proc.returncode == 0, proc.stderr
    evening = next(p for p in json.loads(proc.stdout)["periods"] if p["name"] == "evening")
    docs = [d for d in k8s_docs(sorted(out.glob("*.yaml"))) if d["kind"] == "Deployment"]
    assert sum(d["spec"]["replicas"] for d in docs) == sum(a["replicas"] for s in evening["services"]
                                                           for a in s["assignments"])



# ------------------------------------------------------------------ weighted routing (issue 25)
def test_several_units_get_a_weighted_route_that_follows_the_plan(solver_cli, example_plans, tmp_path):
    plan = json.loads(example_plans["llm-platform"].read_text())
    docs = k8s_docs(export(solver_cli, example_plans["llm-platform"], "kubernetes", tmp_path / "k"))
    validate_k8s(docs)
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    workloads = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("Deployment", "LeaderWorkerSet")}
    routes = [d for d in docs if d["kind"] == "HTTPRoute"]
    assert routes
    for route in routes:
        svc = next(s for s in plan["services"] if s["name"] == route["metadata"]["annotations"]["fleet-planner/service"])
        (rule,) = route["spec"]["rules"]
        backends = rule["backendRefs"]
        assert len(backends) == len(svc["assignments"])
        routed = {}
        for b in backends:
            backend = services[b["name"]]  # each unit's own Service ...
            unit = workloads[b["name"]]  # ... selects that unit's pods only
            pod_labels = unit["spec"]["template"]["metadata"]["labels"]
            assert _selects(backend["spec"]["selector"], pod_labels)
            assert not any(_selects(backend["spec"]["selector"], w["spec"]["template"]["metadata"]["labels"])
                           for n, w in workloads.items() if n != b["name"])
            routed[unit["metadata"]["annotations"]["fleet-planner/offer"]] = b["weight"]
        total = sum(sum(a["routed"]) for a in svc["assignments"])
        for a in svc["assignments"]:  # weights per mille of the planned rates, to rounding
            assert abs(routed[a["offer_id"]] - 1000 * sum(a["routed"]) / total) <= 1


@pytest.mark.parametrize("edit, expect", [
    (lambda p: p["fleet"][0].update(vcpus="lots"), "fleet[0].vcpus: must be a number or null"),
    (lambda p: p["fleet"][0].update(host_memory_gib=[16]), "fleet[0].host_memory_gib: must be a number or null"),
    (lambda p: p["services"][0]["assignments"][0].update(routed="all"), "assignments[0].routed: must be a list"),
    (lambda p: p["services"][0]["assignments"][0].update(batch="big"), "assignments[0].batch: must be a number"),
])
def test_hand_edited_plan_fields_exit_2_naming_the_field(solver_cli, example_plans, tmp_path, edit, expect):
    plan = json.loads(example_plans["s3-big-model"].read_text())
    edit(plan)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = run_cli(solver_cli, "export", str(tmp_path / "plan.json"), "--to", "kubernetes", "--out", str(tmp_path / "k"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert expect in proc.stderr and "To fix:" in proc.stderr


def test_a_unit_never_takes_a_service_name():
    from solver.export.names import distinct

    # Service "a" on aws L4 would name its unit "a-aws-l4-x1-fp16": taken by a service of that name.
    labels, _ = distinct({"a|cfg": "a-aws-l4-x1-fp16", "b|cfg": "b-aws-l4-x1-fp16"}, keep_exact=False,
                         reserved=frozenset({"a", "a-aws-l4-x1-fp16"}))
    assert labels["b|cfg"] == "b-aws-l4-x1-fp16"
    assert labels["a|cfg"].startswith("a-aws-l4-x1-fp16-") and len(labels["a|cfg"]) == len("a-aws-l4-x1-fp16") + 7


def test_period_all_writes_a_directory_per_period(solver_cli, periods_plan, example_plans, tmp_path):
    plan = json.loads(periods_plan.read_text())
    proc = run_cli(solver_cli, "export", str(periods_plan), "--to", "kubernetes", "--out", str(tmp_path / "k"),
                   "--period", "all")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == sorted(p["name"] for p in plan["periods"])
    for period in plan["periods"]:
        docs = [d for d in k8s_docs(sorted((tmp_path / "k" / period["name"]).glob("*.yaml"))) if d["kind"] == "Deployment"]
        assert sum(d["spec"]["replicas"] for d in docs) == sum(a["replicas"] for s in period["services"]
                                                               for a in s["assignments"]), period["name"]
        assert f"(period {period['name']}):" in proc.stdout
    single = run_cli(solver_cli, "export", str(example_plans["s3-big-model"]), "--to", "kubernetes", "--period", "all",
                     "--out", str(tmp_path / "x"))
    assert single.returncode == 2 and "is 'all', but the plan has a single period" in single.stderr
