"""Kubernetes: per deployment unit a Deployment (a LeaderWorkerSet when a replica spans
instances), per service a Service in front of all its units' servers.

Pods ask for the replica's GPUs through the vendor's device plugin (nvidia.com/gpu or
amd.com/gpu), run on nodes whose GPU feature discovery label names the plan's GPU, and -
on EKS, GKE and AKS, whose nodes carry the cloud's instance type - on the plan's instance
type; the scheduler then packs replicas onto instances as the plan does. CPU and memory
requests: the replica's share of the instance's host, and at least what loading its
weights needs (pod_size.py). Spot plans select the cloud's spot nodes (spot.py). Multi-node replicas use LeaderWorkerSet
(leaderworkerset.x-k8s.io/v1, kubernetes-sigs/lws) with the engine's own multi-node
launch: Ray for vLLM, --nnodes/--node-rank for SGLang. Owned servers are nodes labelled with
their site (owned_sites.SITE_LABEL): an owned unit's pods select its site, and where a plan
has owned units its cloud units' pods keep off every node with a site label.
"""

from __future__ import annotations

import shlex

from solver.export import engines
from solver.export.gpus import K8S_INSTANCE_LABEL_CLOUDS, arm64_note, k8s_gpu_resource, k8s_product_label
from solver.catalog.owned import OWNED_PROVIDER
from solver.export.names import valid_label_value
from solver.export.owned_sites import SITE_LABEL, owned_units, site_label
from solver.export.pod_size import pod_size
from solver.export.routing import http_route, route_comments, unit_service
from solver.export.spot import spot_comment, spot_placement
from solver.export.units import PlanSummary, Unit
from solver.export.yamlfile import documents

STARTUP_BUDGET_S = 1800  # weights download and load before liveness checks begin
HF_SECRET = "hf-token"
LWS_API = "leaderworkerset.x-k8s.io/v1"


def render(summary: PlanSummary, warnings: list[str], unrouted: frozenset[str] = frozenset(),
           service_notes: dict[str, list[str]] | None = None) -> dict[str, str]:
    """file name -> YAML text: one per unit, one Service per planned service; warnings for stderr appended.
    A service on several units also gets a Service per unit and a weighted HTTPRoute (routing.py),
    unless its slug is in `unrouted` (a scheduled export whose route weights would be wrong in
    some period: schedule.py); `service_notes`: more comments for a service's file, by slug."""
    by_service: dict[str, list[Unit]] = {}
    replicas = [u for u in summary.units if not u.role]
    for u in replicas:
        engines.check_supported(u)
        by_service.setdefault(u.service_slug, []).append(u)
    files: dict[str, str] = {}
    # A cluster that holds owned servers: cloud pods must not take their GPUs (the plan prices them apart).
    keep_off_sites = bool(owned_units(summary.units))
    pools = [u for u in summary.units if u.role]
    if pools:  # disaggregated services: vLLM's run as llm-d workers, SGLang's and TensorRT-LLM's on Dynamo
        from solver.export import dynamo, llm_d, pd_pools  # imported here: they import us

        pd_pools.check_tiers(pools)  # before the split by engine: a tier runs one
        vllm = [u for u in pools if u.engine == "vllm"]
        others = [u for u in pools if u.engine != "vllm"]
        if vllm:
            files.update(llm_d.render(summary, vllm, warnings, keep_off_sites, frozenset(by_service)))
        if others:
            files.update(dynamo.render(summary, others, warnings, keep_off_sites, frozenset(by_service)))
    for u in replicas:
        routed = len(by_service[u.service_slug]) > 1 and u.service_slug not in unrouted
        files[f"{u.name}.yaml"] = _workload(summary, u, warnings, routed=routed, keep_off_sites=keep_off_sites)
    for slug, units in by_service.items():
        files[f"{slug}-service.yaml"] = _service(slug, units, routed=slug not in unrouted,
                                                 notes=(service_notes or {}).get(slug, []))
    return files


def _labels(u: Unit, component: str) -> dict:
    return {"app.kubernetes.io/name": u.service_slug, "app.kubernetes.io/instance": u.name,
            "app.kubernetes.io/component": component}


def _workload(summary: PlanSummary, u: Unit, warnings: list[str], routed: bool, keep_off_sites: bool = False) -> str:
    """The unit's Deployment or LeaderWorkerSet; with `routed`, followed by the unit's own Service.
    `keep_off_sites`: the plan has owned servers, which this unit's pods must not use unless it is theirs."""
    comments = header(summary, u) + site_comments(u, keep_off_sites)
    size = pod_size(u)
    comments.extend(size.notes)
    if size.warning:
        warnings.append(size.warning)
    meta = {"name": u.name, "labels": _labels(u, "server"),
            "annotations": {"fleet-planner/service": u.service, "fleet-planner/offer": u.offer_id,
                            "fleet-planner/routed-share": f"{u.routed_share:.4f}"}}
    if not u.multi_node:
        pod = _pod_spec(u, [_server_container(u, comments)], keep_off_sites)
        obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": _initial_replicas(u),
            "selector": {"matchLabels": {"app.kubernetes.io/instance": u.name}},
            # The planned fleet has no spare GPUs for a surge pod: replace replicas one at a time.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {"metadata": {"labels": _labels(u, "server")}, "spec": pod}}}
        return documents([obj, unit_service(u)] if routed else [obj], comments)
    leader = _pod_spec(u, [_server_container(u, comments, leader=True)], keep_off_sites)
    worker = _pod_spec(u, [_worker_container(u)], keep_off_sites)
    obj = {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": meta, "spec": {
        "replicas": _initial_replicas(u),
        "leaderWorkerTemplate": {
            "size": u.instances_per_replica,
            # One replica is one model split over its pods: a lost pod restarts the whole group.
            "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": {"metadata": {"labels": _labels(u, "server")}, "spec": leader},
            "workerTemplate": {"metadata": {"labels": _labels(u, "worker")}, "spec": worker}}}}
    comments.append(f"Needs the LeaderWorkerSet controller (kubernetes-sigs/lws); each replica is a group of "
                    f"{u.instances_per_replica} pods, one per instance, {u.gpus_per_node} GPUs each.")
    return documents([obj, unit_service(u)] if routed else [obj], comments)


def _initial_replicas(u: Unit) -> int:
    """A scheduled unit starts at 0: KEDA sets the current period's count (starting the first
    period's would run the night fleet at noon until KEDA's cooldown scaled it down)."""
    return 0 if u.replicas_by_period else u.replicas


def _replica_count(u: Unit) -> str:
    if not u.replicas_by_period:
        return f"{u.replicas} replica(s)"
    by_period = ", ".join(f"{period} {n}" for period, n in u.replicas_by_period)
    return f"replicas by period ({by_period}; set by the KEDA ScaledObject of the same name)"


def header(summary: PlanSummary, u: Unit) -> list[str]:
    price = (f", ${summary.total_price_usd_per_hour:,.4f}/hour in all" if summary.total_price_usd_per_hour is not None
             else "")
    what = f"{u.model_repo or u.model} on {u.engine}" if u.model is not None else "measured-profile service"
    lines = [f"Generated by `solver-cli export --to kubernetes` from plan {summary.workload!r} ({summary.status}{price}).",
             f"Service {u.service!r} ({what}): {_replica_count(u)} of {u.gpus_per_replica} x {u.gpu}"
             + (f" over {u.instances_per_replica} instances" if u.multi_node else "")
             + f", planned on {u.offer_id} ({u.region})" + (f", {u.precision}" if u.precision else "")
             + (f", max batch {u.batch}" if u.batch else "") + "."]
    lines.extend(u.name_notes)
    note = arm64_note(u)
    if note:
        lines.append(note)
    if u.spot:
        lines.append(spot_comment(u.provider))
    if u.model is not None:
        lines.append("Gated models need a Hugging Face token (optional for open models):")
        lines.append(f"  kubectl create secret generic {HF_SECRET} --from-literal=token=hf_...")
    return lines


def site_comments(u: Unit, keep_off_sites: bool) -> list[str]:
    if u.provider == OWNED_PROVIDER:
        label = f"{SITE_LABEL}={site_label(u.region)}"
        return [f"Runs on the owned servers of site {u.region!r}: label them (sites/ in this directory says how many "
                 "and which replicas go on each):", f"  kubectl label node NODE {label}"]
    if keep_off_sites:
        return [f"Keeps off the owned sites' servers (nodes labelled {SITE_LABEL}): the plan runs cloud capacity "
                "here."]
    return []


def _site_placement(u: Unit, keep_off_sites: bool) -> tuple[dict[str, str], list[dict]]:
    """(node selector, node-affinity expressions) that put an owned unit on its site's nodes and
    keep a cloud unit off every site's nodes (the expression ANDs with the GPU product's)."""
    if u.provider == OWNED_PROVIDER:
        return {SITE_LABEL: site_label(u.region)}, []
    if keep_off_sites:
        return {}, [{"key": SITE_LABEL, "operator": "DoesNotExist"}]
    return {}, []


# The well-known node labels of a failure domain a cluster can spread pods over (a region or
# provider is a cluster of its own: the plan's units there are separate deployments).
SPREAD_KEYS = {"instance": "kubernetes.io/hostname", "zone": "topology.kubernetes.io/zone"}


def _pod_spec(u: Unit, containers: list[dict], keep_off_sites: bool = False) -> dict:
    spec = node_placement(u, keep_off_sites)
    spec["terminationGracePeriodSeconds"] = 60
    spec["containers"] = containers
    spec["volumes"] = [shm_volume(u), {"name": "model-cache", "emptyDir": {}}]
    return spec


def shm_volume(u: Unit) -> dict:
    """/dev/shm for the pod: NCCL and the engines' worker processes exchange tensors through
    shared memory, and a container's default is 64 MiB (a quarter of the pod's memory, 1-16 GiB)."""
    return {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shm_gib(u)}Gi"}}


def shm_gib(u: Unit) -> int:
    """/dev/shm's size: a quarter of the pod's memory, 1-16 GiB."""
    return max(1, min(16, pod_size(u).memory_gib // 4))


def node_placement(u: Unit, keep_off_sites: bool = False) -> dict:
    """The pod spec's nodeSelector, affinity, tolerations and spread: the plan's instance type,
    GPU, spot tier and site, as every pod of the unit needs them (llm_d.py's workers too)."""
    spec: dict = {}
    # A custom catalog's instance name need not be a valid label value; no node could carry it then.
    if u.provider.lower() in K8S_INSTANCE_LABEL_CLOUDS and valid_label_value(u.instance_type):
        spec["nodeSelector"] = {"node.kubernetes.io/instance-type": u.instance_type}
    spot = spot_placement(u.provider) if u.spot else None
    if spot:
        spec.setdefault("nodeSelector", {}).update(spot[0])
    site_selector, site_expressions = _site_placement(u, keep_off_sites)
    if site_selector:
        spec.setdefault("nodeSelector", {}).update(site_selector)
    key, values = k8s_product_label(u.gpu)
    expressions = ([{"key": key, "operator": "In", "values": values}] if values else []) + site_expressions
    if expressions:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}
    spec["tolerations"] = [{"key": k8s_gpu_resource(u.gpu), "operator": "Exists", "effect": "NoSchedule"},
                           *(spot[1] if spot else [])]
    spread = SPREAD_KEYS.get(u.redundancy_domain)
    if spread:
        # The plan survives losing any one instance (or zone) however the replicas are
        # packed; spreading the service's pods over them is cheap insurance beyond it, soft so
        # that a cluster without spare nodes still schedules them.
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": spread, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": u.service_slug}}}]
    return spec


def resources(u: Unit) -> dict:
    size = pod_size(u)
    gpus = str(u.gpus_per_node)
    return {"requests": {"cpu": str(size.cpu), "memory": f"{size.memory_gib}Gi", k8s_gpu_resource(u.gpu): gpus},
            "limits": {k8s_gpu_resource(u.gpu): gpus}}


def _mounts() -> list[dict]:
    return [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "model-cache", "mountPath": "/root/.cache/huggingface"}]


def hf_token_env(u: Unit) -> list[dict]:
    if u.model is None:
        return []
    return [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": HF_SECRET, "key": "token", "optional": True}}}]


def _probe(period_s: int, failures: int) -> dict:
    return {"httpGet": {"path": engines.HEALTH_PATH, "port": "http"}, "periodSeconds": period_s,
            "timeoutSeconds": 5, "failureThreshold": failures}


def _server_container(u: Unit, comments: list[str], leader: bool = False) -> dict:
    c: dict = {"name": "server", "image": engines.image(u)}
    if u.model is None:
        comments.append("No model: the planner sized this service from measured profiles. Set `image` to your server "
                        f"(listening on port {engines.PORT}, answering {engines.HEALTH_PATH}); the placeholder is not a "
                        "valid image reference, so nothing runs until you do.")
    elif not u.multi_node:
        launch = engines.server(u)
        comments.extend(launch.notes)
        c["command"] = launch.args
    elif u.engine == "sglang":
        launch = engines.server(u, nnodes="$(LWS_GROUP_SIZE)", node_rank="$(LWS_WORKER_INDEX)",
                                leader_address="$(LWS_LEADER_ADDRESS)")
        comments.extend(launch.notes)
        c["command"] = launch.args
    else:  # vLLM: the Ray head waits for the group's workers, then the server runs across them
        launch = engines.server(u)
        comments.extend(launch.notes)
        c["command"] = ["sh", "-c", engines.vllm_ray_leader(u, "$(LWS_GROUP_SIZE)") + "; exec "
                        + " ".join(_quote(a) for a in launch.args)]
    env = hf_token_env(u)
    if env:
        c["env"] = env
    c["ports"] = [{"name": "http", "containerPort": engines.PORT}]
    c["resources"] = resources(u)
    # Startup covers the model load; readiness gates traffic; liveness restarts a hung server.
    c["startupProbe"] = _probe(10, STARTUP_BUDGET_S // 10)
    c["readinessProbe"] = _probe(10, 3)
    c["livenessProbe"] = _probe(20, 3)
    c["volumeMounts"] = _mounts()
    return c


def _worker_container(u: Unit) -> dict:
    if u.engine == "sglang":
        args = engines.server(u, nnodes="$(LWS_GROUP_SIZE)", node_rank="$(LWS_WORKER_INDEX)",
                              leader_address="$(LWS_LEADER_ADDRESS)").args
    else:
        args = ["sh", "-c", engines.vllm_ray_worker("$(LWS_LEADER_ADDRESS)")]
    c: dict = {"name": "worker", "image": engines.image(u), "command": args}
    env = hf_token_env(u)
    if env:
        c["env"] = env
    c["resources"] = resources(u)
    c["volumeMounts"] = _mounts()
    return c


def _service(slug: str, units: list[Unit], routed: bool = True, notes: list[str] | None = None) -> str:
    first = units[0]
    comments = [f"Generated by `solver-cli export --to kubernetes`: the endpoint of service {first.service!r}, "
                f"in front of the servers of {len(units)} unit(s): " + ", ".join(u.name for u in units) + ".",
                *first.name_notes, *(notes or [])]
    routed = routed and len(units) > 1
    if routed:
        shares = ", ".join(f"{u.name} {u.routed_share:.1%}" for u in units)
        comments.append(f"The plan routes {shares} of the traffic.")
        comments.extend(route_comments(units))
    obj = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": slug, "labels": {"app.kubernetes.io/name": slug},
                        "annotations": {"fleet-planner/service": first.service}},
           "spec": {"type": "ClusterIP",
                    "selector": {"app.kubernetes.io/name": slug, "app.kubernetes.io/component": "server"},
                    "ports": [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]}}
    return documents([obj, http_route(slug, units)] if routed else [obj], comments)


def _quote(arg: str) -> str:
    """Shell words for `sh -c`; $(VAR) references (expanded by Kubernetes first) stay as they are."""
    return f'"{arg}"' if "$(" in arg else shlex.quote(arg)
