"""Disaggregated services (issue 24) -> llm-d ModelService Helm values: a release per pool unit.

A disaggregated service is a prefill pool and a decode pool joined by one link tier (the
plan's `link`: provider, region and the network between the workers). llm-d runs exactly
that: vLLM workers labelled `llm-d.ai/role: prefill` or `decode`, the KV cache sent from
prefill to decode over NIXL, a routing sidecar in each decode pod, and an InferencePool
whose scheduler picks a prefill and a decode worker per request. Its ModelService chart
(llm-d-incubation/llm-d-modelservice) writes the workers from Helm values; this module
writes those values, one release per pool unit (one role, one GPU type, one count), so a
pool on two GPU types - or a service's pools in two link tiers - is several releases. The
releases of one link tier share `modelArtifacts.labels`: one InferencePool selects them.

Pinned (bump together; read at llm-d-incubation/llm-d-modelservice@3051935e, 2026-04-22):
- chart `llm-d-modelservice` v0.4.12 (appVersion v0.4.0), Helm repo
  https://llm-d-incubation.github.io/llm-d-modelservice/; keys as in its values.yaml and
  values.schema.json (tests/schemas/ holds the schema the tests validate against).
- images `ghcr.io/llm-d/llm-d-cuda:v0.4.0` (vLLM with NIXL) and
  `ghcr.io/llm-d/llm-d-routing-sidecar:v0.4.0`, the release the chart's appVersion names.
- `modelCommand: vllmServe`: the chart adds `vllm serve MODEL --port --tensor-parallel-size
  --served-model-name`; the plan's batch, precision and the NIXL connector
  (`--kv-transfer-config {"kv_connector":"NixlConnector","kv_role":"kv_both"}`, as the
  chart's P/D examples) are ours. The side channel (VLLM_NIXL_SIDE_CHANNEL_HOST/PORT) is
  the pod's IP and port 5600, as there.
What stays the user's: the Gateway, and the InferencePool with llm-d's P/D scheduler
profile (llm-d's P/D guide); the files say which labels it must select.
"""

from __future__ import annotations

import math

from solver.errors import InputError
from solver.export import engines, pd_pools
from solver.export.gpus import k8s_gpu_resource
from solver.export.kubernetes import hf_token_env, node_placement, resources, shm_volume
from solver.export.units import PlanSummary, Unit
from solver.export.yamlfile import document
from solver.models.library import get_model

DIR = "llm-d"
CHART = "llm-d-modelservice/llm-d-modelservice"
CHART_VERSION = "v0.4.12"
CHART_REPO = "https://llm-d-incubation.github.io/llm-d-modelservice/"
IMAGE = "ghcr.io/llm-d/llm-d-cuda:v0.4.0"
SIDECAR_IMAGE = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.4.0"
NIXL_SIDE_CHANNEL_PORT = 5600
KV_TRANSFER_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
SERVICE_PORT = 8000  # the port the InferencePool targets (routing.servicePort)
DECODE_VLLM_PORT = 8200  # behind the decode pod's routing sidecar (routing.proxy.targetPort)
GROUP_LABEL = "fleet-planner/pd-group"  # one link tier's workers: what its InferencePool selects
CHECKPOINT_MARGIN = 1.2  # the download volume over the 16-bit checkpoint: tokenizer, configs, a partial file


def check_supported(u: Unit) -> None:
    """Refuse a pool unit llm-d's pinned images cannot run as planned."""
    pd_pools.check_unit(u, "llm-d's chart", IMAGE)
    if u.engine != "vllm":
        raise InputError.single(f"services[{u.service}].engine", f"is {u.engine}, and the plan serves it "
                                "disaggregated: llm-d's workers run vLLM, and a deployment on another engine "
                                "would not perform as planned.",
                                "plan the service with engine vllm, sglang or tensorrt-llm (Dynamo), or with "
                                "serving: aggregated")


def render(summary: PlanSummary, pools: list[Unit], warnings: list[str], keep_off_sites: bool = False,
           mixed_services: frozenset[str] = frozenset()) -> dict[str, str]:
    """llm-d/UNIT.values.yaml per pool unit, and llm-d/install.sh that installs them all.
    `mixed_services`: service slugs that also have aggregated replicas (their split is the gateway's)."""
    for u in pools:
        check_supported(u)
    pd_pools.check_tiers(pools)
    labels = pd_pools.group_labels(pools)
    files: dict[str, str] = {}
    for u in pools:
        notes = [u.model_note] if u.model_note else []
        values = _values(u, keep_off_sites, notes, labels[(u.service, u.pool)])
        files[f"{DIR}/{u.name}.values.yaml"] = document(
            values, _comments(summary, u, pools, keep_off_sites, mixed_services, labels) + notes)
    files[f"{DIR}/install.sh"] = _install_script(summary, pools)
    for label in sorted({u.service_slug for u in pools} & mixed_services):
        service = next(u.service for u in pools if u.service_slug == label)
        warnings.append(f"service {service!r} is served partly by aggregated replicas ({label}-service.yaml) and "
                        f"partly by llm-d's prefill/decode workers ({DIR}/): route {_split(summary, pools, label, labels)} "
                        "at your gateway, as the plan does")
    return files


def _split(summary: PlanSummary, pools: list[Unit], label: str, labels: dict[tuple[str, str], str]) -> str:
    """How the plan splits a mixed service's requests: aggregated replicas against each link tier's workers."""
    aggregated, tiers = pd_pools.tier_rates(summary, pools, label, labels)
    return (f"{aggregated:.4g} req/s to the aggregated replicas and "
            + ", ".join(f"{rate:.4g} req/s to the workers labelled {GROUP_LABEL}={g}" for g, rate in tiers.items()))


def _comments(summary: PlanSummary, u: Unit, pools: list[Unit], keep_off_sites: bool,
              mixed_services: frozenset[str], labels: dict[tuple[str, str], str]) -> list[str]:
    group = labels[(u.service, u.pool)]
    price = (f", ${summary.total_price_usd_per_hour:,.4f}/hour in all" if summary.total_price_usd_per_hour is not None
             else "")
    peers = [p for p in pools if p.service == u.service and p.pool == u.pool and p is not u]
    lines = [f"Generated by `solver-cli export --to kubernetes` from plan {summary.workload!r} ({summary.status}{price}).",
             f"Service {u.service!r} ({u.model_repo or u.model} on vLLM) is served disaggregated: this is its {u.role} "
             f"pool's unit on {u.offer_id} ({u.region}): {u.replicas} worker(s) of {u.gpus_per_replica} x {u.gpu}"
             + (f", {u.precision}" if u.precision else "") + (f", max batch {u.batch}" if u.batch else "")
             + f"; the plan routes {u.routed_per_s:.4g} req/s here ({u.routed_share:.1%} of the pool's).",
             f"Link tier {u.pool!r}: its workers carry the label {GROUP_LABEL}={group}; the same tier's "
             + ("other releases: " + ", ".join(f"{p.name} ({p.role}, {p.replicas} worker(s) of {p.gpus_per_replica} x "
                                          f"{p.gpu})" for p in peers)
                if peers else "only release is this one") + ".",
             f"Install (all releases: {DIR}/install.sh):",
             f"  helm repo add llm-d-modelservice {CHART_REPO}",
             f"  helm upgrade --install {u.name} {CHART} --version {CHART_VERSION} -f {u.name}.values.yaml",
             "Requests reach the workers through an InferencePool (Gateway API Inference Extension) with llm-d's "
             "prefill/decode scheduler profile, installed as llm-d's P/D guide says, selecting "
             f"llm-d.ai/inference-serving=true and {GROUP_LABEL}={group} on port {SERVICE_PORT}.",
             *u.name_notes]
    split = _split(summary, pools, u.service_slug, labels) if u.service_slug in mixed_services else ""
    lines.extend(pd_pools.closing_comments(u, mixed_services, split, keep_off_sites))
    return lines


def _values(u: Unit, keep_off_sites: bool, notes: list[str], group: str) -> dict:
    placement = node_placement(u, keep_off_sites)
    role: dict = {"create": True, "replicas": u.replicas}
    if "nodeSelector" in placement:
        role["nodeSelector"] = placement["nodeSelector"]
    if placement.get("tolerations"):
        role["tolerations"] = placement["tolerations"]
    # The chart renders extraConfig into the pod spec: the GPU product's node affinity (and
    # an owned site's), with the spread, exactly as the plan's aggregated pods get them.
    extra = {k: placement[k] for k in ("affinity", "topologySpreadConstraints") if k in placement}
    if extra:
        role["extraConfig"] = extra
    role["parallelism"] = {"tensor": u.tensor_parallel, "data": 1, "dataLocal": 1, "workers": 1}
    role["containers"] = [_container(u, notes)]
    # The chart's own volume (metrics-volume) kept beside /dev/shm: a list given here replaces the chart's.
    role["volumes"] = [{"name": "metrics-volume", "emptyDir": {}}, shm_volume(u)]
    other = "decode" if u.role == "prefill" else "prefill"
    return {
        "multinode": False,
        "accelerator": {"type": "nvidia"},
        "modelArtifacts": {
            "name": u.model_repo or u.model,
            "uri": f"hf://{u.model_repo or u.model}",
            "size": _checkpoint_size(u),
            "labels": {"llm-d.ai/inference-serving": "true", "llm-d.ai/model": u.service_slug,
                       GROUP_LABEL: group},
        },
        "routing": {"servicePort": SERVICE_PORT,
                    "proxy": {"enabled": True, "image": SIDECAR_IMAGE, "imagePullPolicy": "IfNotPresent",
                              "targetPort": DECODE_VLLM_PORT, "connector": "nixlv2", "secure": False}},
        u.role: role,
        other: {"create": False},
    }


def _container(u: Unit, notes: list[str]) -> dict:
    args = []
    if u.batch:
        # A prefill worker's planned batch is the prompts it holds at once (the TTFT model's).
        args += ["--max-num-seqs", str(u.batch)]
    args += engines.vllm_settings(u)
    args += engines.vllm_precision(u, notes)
    args += ["--kv-transfer-config", KV_TRANSFER_CONFIG]
    port = DECODE_VLLM_PORT if u.role == "decode" else SERVICE_PORT
    res = resources(u)
    gpu = k8s_gpu_resource(u.gpu)
    return {
        "name": "vllm",
        "image": IMAGE,
        "modelCommand": "vllmServe",
        "args": args,
        "env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_SIDE_CHANNEL_PORT)},
                *hf_token_env(u)],
        "ports": [{"containerPort": port, "protocol": "TCP"},
                  {"containerPort": NIXL_SIDE_CHANNEL_PORT, "protocol": "TCP"}],
        "resources": {"requests": res["requests"], "limits": {gpu: res["limits"][gpu]}},
        "mountModelVolume": True,
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        # The chart sets no probes; the model's download and load take minutes.
        "startupProbe": {"httpGet": {"path": engines.HEALTH_PATH, "port": port}, "periodSeconds": 10,
                         "failureThreshold": 180},
        "readinessProbe": {"httpGet": {"path": engines.HEALTH_PATH, "port": port}, "periodSeconds": 10},
    }


def _checkpoint_size(u: Unit) -> str:
    """The emptyDir the chart downloads the checkpoint into: the 16-bit checkpoint and a margin
    (an fp8 plan quantizes a 16-bit checkpoint online)."""
    arch = get_model(u.model) if u.model else None
    if arch is None:
        return "200Gi"
    return f"{max(1, math.ceil(arch.params_b * 1e9 * 2 / 2**30 * CHECKPOINT_MARGIN))}Gi"


def _install_script(summary: PlanSummary, pools: list[Unit]) -> str:
    # No #! line: the generated header comes first, as in every file an export writes (a
    # re-export without its manifest recognises its own files by it). Run it with `sh`.
    lines = [f"# Generated by `solver-cli export --to kubernetes` from plan {summary.workload!r}: installs the llm-d",
             "# prefill and decode workers of the plan's disaggregated services (one Helm release per unit).",
             "# Run: sh install.sh. A release a later export no longer writes keeps running: helm uninstall it.",
             "set -eu",
             'cd "$(dirname "$0")"',
             f"helm repo add llm-d-modelservice {CHART_REPO} --force-update",
             "helm repo update llm-d-modelservice"]
    lines += [f"helm upgrade --install {u.name} {CHART} --version {CHART_VERSION} -f {u.name}.values.yaml"
              for u in sorted(pools, key=lambda p: p.name)]
    return "\n".join(lines) + "\n"
