"""Disaggregated services on SGLang or TensorRT-LLM (issue 24) -> NVIDIA Dynamo DynamoGraphDeployments.

llm-d (llm_d.py) runs vLLM workers only; a plan sized for SGLang or TensorRT-LLM runs its
pools on Dynamo instead: one DynamoGraphDeployment (DGD) per service and link tier, holding
Dynamo's Frontend (the OpenAI-compatible endpoint, which routes each request to a prefill
and a decode worker) and one component per pool unit (one role, GPU type and worker size,
the plan's worker count). The KV cache moves from prefill to decode over NIXL, as Dynamo's
disaggregated examples do.

Pinned (bump together; read at ai-dynamo/dynamo, see docs/export.md for each file's commit):
- the CRD `nvidia.com/v1alpha1` DynamoGraphDeployment (deploy/cloud/operator/config/crd/bases/
  nvidia.com_dynamographdeployments.yaml @ 967e177c; tests/schemas/ holds the part the tests
  validate against): `spec.services` a map of components; `resources.limits.gpu` a string;
  pod fields under `extraPodSpec`, the container under `extraPodSpec.mainContainer`.
- images `nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.3.1` and `tensorrtllm-runtime:1.3.1`, as
  examples/backends/{sglang,trtllm}/deploy/disagg.yaml @ 04521f47 run them.
- SGLang workers: `python3 -m dynamo.sglang` passes SGLang's own server flags through
  (components/src/dynamo/sglang/args.py): the plan's TP, batch and precision as for
  replicas, `--disaggregation-mode ROLE --disaggregation-transfer-backend nixl`.
- TensorRT-LLM workers: `python3 -m dynamo.trtllm` takes engine settings from a YAML file
  (`--extra-engine-args`): written into a ConfigMap beside the DGD, one key per component, as
  examples/backends/trtllm/deploy/disagg-multinode.yaml ships its engine configs.
The operator names each component's Deployment and Service `DGD-COMPONENT` (lower case) and
gives the Frontend port 8000; its admission webhook (with Grove, which names pods from both)
refuses a DGD whose name and component key together pass 45 characters
(deploy/operator/internal/webhook/validation/), so keys are short (`prefill`, `decode-2`) and
the DGD's name is cut to fit. The Frontend routes with Dynamo's KV router (`--router-mode kv`:
each request to the worker with the least work left after its cached prefix), not
round-robin, which would split a pool on two GPU types evenly.
"""

from __future__ import annotations

from solver.errors import InputError
from solver.export import engines, pd_pools
from solver.export.kubernetes import hf_token_env, node_placement, shm_gib
from solver.export.names import shorten, valid_label_value
from solver.export.pod_size import pod_size
from solver.export.units import PlanSummary, Unit
from solver.export.yamlfile import document, documents

DIR = "dynamo"
API = "nvidia.com/v1alpha1"
KIND = "DynamoGraphDeployment"
RUNTIME_TAG = "1.3.1"
IMAGES = {"sglang": f"nvcr.io/nvidia/ai-dynamo/sglang-runtime:{RUNTIME_TAG}",
          "tensorrt-llm": f"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:{RUNTIME_TAG}"}
BACKEND = {"sglang": "sglang", "tensorrt-llm": "trtllm"}  # the CRD's backendFramework values
FRONTEND = "Frontend"
FRONTEND_PORT = 8000  # the operator's DynamoServicePort
PLATFORM_DOCS = "https://docs.nvidia.com/dynamo/latest/kubernetes/installation_guide.html"
ENGINE_DIR = "/etc/fleet-planner"  # where a TensorRT-LLM worker finds its engine YAML
NAME_LIMIT = 45  # the webhook's bound on len(DGD name) + len(component key) (one more for the dash, to be safe)
GROUP_LABEL = "fleet-planner/pd-group"
MODEL_CACHE = "/model-cache"  # HF_HOME: the checkpoint downloads into an emptyDir, not the container's layer


def check_supported(u: Unit) -> None:
    """Refuse a pool unit Dynamo's pinned images cannot run as planned."""
    pd_pools.check_unit(u, "Dynamo", IMAGES.get(u.engine or "", IMAGES["sglang"]))
    if u.engine not in IMAGES:
        raise InputError.single(f"services[{u.service}].engine", f"is {u.engine}: Dynamo's workers are written for "
                                "SGLang and TensorRT-LLM here (vLLM pools become llm-d workers).",
                                "plan the service with engine vllm, sglang or tensorrt-llm")


def render(summary: PlanSummary, pools: list[Unit], warnings: list[str], keep_off_sites: bool = False,
           mixed_services: frozenset[str] = frozenset()) -> dict[str, str]:
    """dynamo/TIER.yaml per service and link tier: a DGD (and, for TensorRT-LLM, the ConfigMap
    of its engine settings). `mixed_services`: slugs that also have aggregated replicas."""
    for u in pools:
        check_supported(u)
    pd_pools.check_tiers(pools)
    labels = pd_pools.group_labels(pools)
    tiers: dict[tuple[str, str], list[Unit]] = {}
    for u in pools:
        tiers.setdefault((u.service, u.pool), []).append(u)
    names = {key: dgd_name(labels[key], units) for key, units in tiers.items()}
    files: dict[str, str] = {}
    for key, units in sorted(tiers.items()):
        files[f"{DIR}/{names[key]}.yaml"] = _tier_file(summary, units, names[key], labels[key], keep_off_sites,
                                                        mixed_services, pools, labels, names)
    for service_slug in sorted({u.service_slug for u in pools}):
        service = next(u.service for u in pools if u.service_slug == service_slug)
        tier_count = len({u.pool for u in pools if u.service_slug == service_slug})
        if service_slug in mixed_services:
            warnings.append(f"service {service!r} is served partly by aggregated replicas ({service_slug}-service.yaml) "
                            f"and partly by Dynamo's prefill/decode workers ({DIR}/): route "
                            f"{_split(summary, pools, service_slug, labels, names)} at your gateway, as the plan does")
        elif tier_count > 1:
            warnings.append(f"service {service!r} is served by Dynamo's prefill/decode workers in {tier_count} link "
                            f"tiers ({DIR}/), each behind its own Frontend: route "
                            f"{_split(summary, pools, service_slug, labels, names)} at your gateway, as the plan does")
    return files


def component_names(units: list[Unit]) -> dict[str, str]:
    """unit name -> its component key in the DGD: its role, numbered (by GPU, size and offer)
    where a role has several units in the tier. Short: the name budget is the webhook's 45."""
    out: dict[str, str] = {}
    for role in ("prefill", "decode"):
        mine = sorted((u for u in units if u.role == role), key=lambda u: (u.gpu, u.gpus_per_replica, u.name))
        for i, u in enumerate(mine):
            out[u.name] = role if len(mine) == 1 else f"{role}-{i + 1}"
    return out


def dgd_name(group: str, units: list[Unit]) -> str:
    """The DGD's name: the tier's label, cut (with a digest) to the webhook's budget with its longest key."""
    longest = max([len(FRONTEND), *map(len, component_names(units).values())])
    return shorten(group, NAME_LIMIT - 1 - longest)


def _split(summary: PlanSummary, pools: list[Unit], service_slug: str, labels: dict, names: dict) -> str:
    aggregated, tiers = pd_pools.tier_rates(summary, pools, service_slug, labels)
    by_label = {labels[k]: names[k] for k in labels}
    return ((f"{aggregated:.4g} req/s to the aggregated replicas and " if aggregated > 0 else "")
            + ", ".join(f"{rate:.4g} req/s to {by_label[g]}-frontend:{FRONTEND_PORT}" for g, rate in tiers.items()))


def _tier_file(summary: PlanSummary, units: list[Unit], name: str, group: str, keep_off_sites: bool,
               mixed_services: frozenset[str], pools: list[Unit], labels: dict, names: dict) -> str:
    first = units[0]
    components = component_names(units)
    notes = [first.model_note] if first.model_note else []
    engine_files: dict[str, str] = {}
    services: dict = {FRONTEND: _frontend(first)}
    for u in sorted(units, key=lambda x: (x.role != "prefill", components[x.name])):
        key = components[u.name]
        services[key] = _component(u, key, name, group, keep_off_sites, notes, engine_files)
    dgd = {"apiVersion": API, "kind": KIND,
           "metadata": {"name": name, "labels": {"app.kubernetes.io/name": first.service_slug, GROUP_LABEL: group},
                        "annotations": {"fleet-planner/service": first.service, "fleet-planner/link": first.pool}},
           "spec": {"backendFramework": BACKEND[first.engine], "services": services}}
    comments = _comments(summary, units, name, components, keep_off_sites, mixed_services, pools, labels, names) + notes
    if not engine_files:
        return document(dgd, comments)
    config = {"apiVersion": "v1", "kind": "ConfigMap",
              "metadata": {"name": config_map(name), "labels": {"app.kubernetes.io/name": first.service_slug}},
              "data": engine_files}
    return documents([config, dgd], comments)


def config_map(name: str) -> str:
    return f"{name}-engine"


def _frontend(u: Unit) -> dict:
    """Dynamo's OpenAI-compatible endpoint. It tokenizes (the workers skip it), so it reads the
    model's tokenizer from Hugging Face: the token too."""
    container: dict = {"image": IMAGES[u.engine], "command": ["python3", "-m", "dynamo.frontend"],
                       "args": ["--http-port", str(FRONTEND_PORT), "--router-mode", "kv"]}
    env = hf_token_env(u)
    if env:
        container["env"] = env
    return {"componentType": "frontend", "replicas": 1, "extraPodSpec": {"mainContainer": container}}


def _component(u: Unit, key: str, name: str, group: str, keep_off_sites: bool, notes: list[str],
               engine_files: dict[str, str]) -> dict:
    size = pod_size(u)
    gpus = str(u.gpus_per_replica)
    pod = node_placement(u, keep_off_sites)
    container: dict = {"image": IMAGES[u.engine], "command": ["python3", "-m", f"dynamo.{BACKEND[u.engine]}"]}
    if u.engine == "sglang":
        container["args"] = _sglang_args(u, notes)
    else:
        file = f"{key}.yaml"
        engine_files[file] = _trtllm_engine_yaml(u, notes)
        container["args"] = _trtllm_args(u, f"{ENGINE_DIR}/{file}")
        pod["volumes"] = [{"name": "engine-config", "configMap": {"name": config_map(name)}}]
        container["volumeMounts"] = [{"name": "engine-config", "mountPath": ENGINE_DIR, "readOnly": True}]
    pod.setdefault("volumes", []).append({"name": "model-cache", "emptyDir": {}})
    container.setdefault("volumeMounts", []).append({"name": "model-cache", "mountPath": MODEL_CACHE})
    container["env"] = [{"name": "HF_HOME", "value": MODEL_CACHE}, *hf_token_env(u)]
    pod["mainContainer"] = container
    return {"componentType": "worker", "subComponentType": u.role, "replicas": u.replicas,
            "resources": {"requests": {"cpu": str(size.cpu), "memory": f"{size.memory_gib}Gi", "gpu": gpus},
                          "limits": {"gpu": gpus}},
            # /dev/shm for NCCL's tensor-parallel traffic, sized as the plan's replicas get it.
            "sharedMemory": {"size": f"{shm_gib(u)}Gi"},
            # The service's label on every worker pod: what the plan's spread (redundancy) selects.
            "extraPodMetadata": {"labels": _pod_labels(u, group)},
            "extraPodSpec": pod}


def _pod_labels(u: Unit, group: str) -> dict[str, str]:
    labels = {"app.kubernetes.io/name": u.service_slug, GROUP_LABEL: group}
    if valid_label_value(u.gpu):
        labels["fleet-planner/gpu"] = u.gpu  # the component key no longer says which GPU
    return labels


def _sglang_args(u: Unit, notes: list[str]) -> list[str]:
    model = u.model_repo or u.model
    args = ["--model-path", model, "--served-model-name", model, "--tp", str(u.tensor_parallel)]
    if u.batch:
        # A prefill worker's planned batch is the prompts it holds at once (the TTFT model's).
        args += ["--max-running-requests", str(u.batch)]
    args += engines.sglang_settings(u)
    args += engines.sglang_precision(u, notes)
    return args + ["--skip-tokenizer-init",  # the Frontend tokenizes (Dynamo's examples)
                   "--disaggregation-mode", u.role, "--disaggregation-transfer-backend", "nixl",
                   "--host", "0.0.0.0"]


def _trtllm_args(u: Unit, engine_yaml: str) -> list[str]:
    model = u.model_repo or u.model
    # TP and batch both here and in the file: the file overrides the flags' defaults, and one
    # Dynamo release or another may read either.
    args = ["--model-path", model, "--served-model-name", model, "--tensor-parallel-size", str(u.tensor_parallel)]
    if u.batch:
        args += ["--max-batch-size", str(u.batch)]
    return args + ["--extra-engine-args", engine_yaml, "--disaggregation-mode", u.role]


def _trtllm_engine_yaml(u: Unit, notes: list[str]) -> str:
    """The engine settings of one TensorRT-LLM worker: the plan's TP and batch, and what
    disaggregation needs (the KV cache transceiver; no overlap scheduler on prefill workers,
    as Dynamo's engine configs say)."""
    engines.trtllm_precision(u, notes)
    settings: dict = {"backend": "pytorch", "tensor_parallel_size": u.tensor_parallel}
    if u.batch:
        settings["max_batch_size"] = u.batch
    if u.setting("max_num_batched_tokens"):
        settings["max_num_tokens"] = u.setting("max_num_batched_tokens")  # the planned token budget
    kv: dict = {}
    if u.setting("kv_cache_memory_fraction"):
        kv["free_gpu_memory_fraction"] = u.setting("kv_cache_memory_fraction")
    if u.setting("kv_cache_dtype") == "fp8":
        kv["dtype"] = "fp8"  # the LLM API's KvCacheConfig.dtype; else "auto": the checkpoint's
    if kv:
        settings["kv_cache_config"] = kv
    settings.update({"enable_chunked_prefill": True, "disable_overlap_scheduler": u.role == "prefill",
                     "cache_transceiver_config": {"backend": "DEFAULT"}})
    return document(settings, [])


def _comments(summary: PlanSummary, units: list[Unit], name: str, components: dict[str, str], keep_off_sites: bool,
              mixed_services: frozenset[str], pools: list[Unit], labels: dict, names: dict) -> list[str]:
    first = units[0]
    price = (f", ${summary.total_price_usd_per_hour:,.4f}/hour in all" if summary.total_price_usd_per_hour is not None
             else "")
    engine = "SGLang" if first.engine == "sglang" else "TensorRT-LLM"
    lines = [f"Generated by `solver-cli export --to kubernetes` from plan {summary.workload!r} ({summary.status}{price}).",
             f"Service {first.service!r} ({first.model_repo or first.model} on {engine}) is served disaggregated in "
             f"link tier {first.pool!r}; Dynamo's Frontend (Service {name}-frontend, port {FRONTEND_PORT}) sends each "
             "request to a prefill and a decode worker, and the KV cache moves between them over NIXL."]
    for u in sorted(units, key=lambda x: (x.role != "prefill", components[x.name])):
        lines.append(f"  {components[u.name]}: {u.role}, {u.replicas} worker(s) of {u.gpus_per_replica} x {u.gpu} on "
                     f"{u.offer_id} ({u.region})" + (f", {u.precision}" if u.precision else "")
                     + (f", max batch {u.batch}" if u.batch else "")
                     + f"; the plan routes {u.routed_per_s:.4g} req/s here ({u.routed_share:.1%} of the pool's)")
        lines.extend(u.name_notes)
    if len({u.gpu for u in units if u.role == "prefill"}) > 1 or len({u.gpu for u in units if u.role == "decode"}) > 1:
        lines.append("The Frontend's KV router sends each request to the worker with the least work left (after its "
                     "cached prefix), not by the plan's shares: a pool on two GPU types gets about the split above "
                     "when the faster workers take more.")
    lines += ["Needs Dynamo's platform (operator and CRDs) in the cluster, as its installation guide says:",
              f"  {PLATFORM_DOCS}",
              f"  kubectl apply -f {name}.yaml"]
    split = (_split(summary, pools, first.service_slug, labels, names) if first.service_slug in mixed_services
             else "")
    lines.extend(pd_pools.closing_comments(first, mixed_services, split, keep_off_sites))
    return lines
