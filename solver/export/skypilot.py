"""SkyPilot: one `sky serve` service YAML per deployment unit (service x configuration).

Each file pins the plan's instance (cloud, region, instance_type, accelerators) when a
replica has its instance to itself; `num_nodes` carries multi-instance replicas; the
service section fixes the planned replica count and probes the engine's /health. The
engine runs from its pinned image (`image_id: docker:...`), so SkyPilot and Kubernetes
exports run the same server build.

SkyPilot launches one VM per replica node. Where the plan packs several replicas onto one
larger instance (e.g. two 1-GPU replicas on a 2-GPU box), that packing cannot be written
for SkyPilot: the file then asks for the replica's own GPUs in the plan's cloud and region
and says so; the Kubernetes export keeps the packing (the scheduler bin-packs GPUs).

Owned servers are reached as an SSH Node Pool named after the site (`infra: ssh/SITE`,
SkyPilot >= 0.10: `sky ssh up` turns the pool's hosts into a small Kubernetes cluster, so
replicas share a server's GPUs there as planned); sites/SITE.yaml lists the servers.
"""

from __future__ import annotations

import shlex

from solver.catalog.owned import OWNED_PROVIDER
from solver.errors import InputError
from solver.export import engines
from solver.export.gpus import SKYPILOT_CLOUDS, arm64_note, skypilot_accelerator
from solver.export.units import PlanSummary, Unit
from solver.export.yamlfile import document

READINESS_DELAY_S = 1800  # weights download and load: large models take many minutes on first start


def render(summary: PlanSummary, warnings: list[str]) -> dict[str, str]:
    """file name -> YAML text, one per unit (warnings: for stderr; none of its own yet)."""
    pool = next((u for u in summary.units if u.role), None)
    if pool is not None:
        # `sky serve` runs replicas that serve whole requests; it has no prefill/decode roles.
        raise InputError.single(f"services[{pool.service}]", "is served disaggregated (prefill and decode pools), "
                                "which SkyPilot's `sky serve` cannot run.",
                                "export it with --to kubernetes (llm-d workers), or plan it with serving: aggregated")
    return {f"{u.name}.yaml": _unit_file(summary, u) for u in summary.units}


def _unit_file(summary: PlanSummary, u: Unit) -> str:
    engines.check_supported(u)
    comments = _header(summary, u)
    known_cloud = u.provider.lower() in SKYPILOT_CLOUDS
    accelerator = skypilot_accelerator(u.gpu, u.provider, u.instance_type)
    if accelerator is None:
        accelerator = u.gpu
        comments.append(f"SkyPilot's catalog has no {u.gpu} accelerator: set resources.accelerators to the name your "
                        "SkyPilot version uses (`sky show-gpus`).")
    resources = (_owned_resources(u, accelerator, comments) if u.provider == OWNED_PROVIDER
                 else _cloud_resources(u, accelerator, known_cloud, comments))
    resources["ports"] = engines.PORT
    if u.spot:
        resources["use_spot"] = True
    if u.model is not None:
        resources["image_id"] = f"docker:{engines.image(u)}"
    data: dict = {"name": u.name, "resources": resources, "num_nodes": u.instances_per_replica}
    if u.model is not None:
        data["secrets"] = {"HF_TOKEN": None}  # pass with `--secret HF_TOKEN` (gated models)
    data["service"] = {"readiness_probe": {"path": engines.HEALTH_PATH, "initial_delay_seconds": READINESS_DELAY_S},
                       "replicas": u.replicas}
    data["run"] = _run(u, comments)
    return document(data, comments)


def _cloud_resources(u: Unit, accelerator: str, known_cloud: bool, comments: list[str]) -> dict:
    """Where a cloud unit runs: the plan's cloud, region and (a replica alone on it) instance type."""
    resources: dict = {}
    if known_cloud:
        resources["cloud"] = u.provider.lower()
        resources["region"] = u.region
    if known_cloud and u.own_instance:
        resources["instance_type"] = u.instance_type
        # SkyPilot wants the instance's own accelerators; the engine uses the replica's share of them.
        resources["accelerators"] = f"{accelerator}:{u.gpus_per_instance}"
        if u.gpus_per_node < u.gpus_per_instance:
            comments.append(f"Each replica uses {u.gpus_per_node} of the {u.gpus_per_instance} GPUs of "
                            f"{u.instance_type}, as planned (no other replica fits there).")
        return resources
    resources["accelerators"] = f"{accelerator}:{u.gpus_per_node}"
    if not known_cloud:
        comments.append(f"Provider {u.provider!r} is not a SkyPilot cloud: set resources.cloud (or infra) to where "
                        f"{u.gpu} GPUs run for you; the plan priced {u.instance_type!r}.")
    else:
        comments.append(f"The plan packs replicas onto {u.instance_type} ({u.gpus_per_instance} GPUs); SkyPilot runs "
                        f"one VM per replica, so this asks for {u.gpus_per_node} {u.gpu} in {u.region} and SkyPilot "
                        "picks the instance (the Kubernetes export keeps the packing).")
    return resources


def _owned_resources(u: Unit, accelerator: str, comments: list[str]) -> dict:
    """An owned unit: the site's SSH Node Pool, the replica's own GPUs (the pool packs replicas onto servers)."""
    comments.extend(_owned_comments(u))
    return {"infra": owned_infra(u.region), "accelerators": f"{accelerator}:{u.gpus_per_node}"}


def owned_infra(site: str) -> str:
    """SkyPilot's infra for an owned site: the SSH Node Pool of that name."""
    return f"ssh/{site}"


def _owned_comments(u: Unit) -> list[str]:
    return [f"Runs on the owned servers of site {u.region!r}, as SkyPilot's SSH Node Pool {u.region!r} "
            f"(infra: {owned_infra(u.region)}; sites/ in this directory says how many servers and which replicas "
            "go on each). Create the pool: list the servers under its name in ~/.sky/ssh_node_pools.yaml, then:",
            f"  sky ssh up --infra {u.region}",
            "Servers already in a Kubernetes cluster: set infra: k8s/CONTEXT instead."]


def _header(summary: PlanSummary, u: Unit) -> list[str]:
    price = (f"${summary.total_price_usd_per_hour:,.4f}/hour" if summary.total_price_usd_per_hour is not None else "")
    what = (f"{u.model_repo or u.model} on {u.engine}" if u.model is not None else "measured-profile service")
    lines = [
        f"Generated by `solver-cli export --to skypilot` from plan {summary.workload!r} ({summary.status}"
        + (f", {price} in all" if price else "") + ").",
        f"Service {u.service!r} ({what}): {u.replicas} replica(s) of {u.gpus_per_replica} x {u.gpu}"
        + (f" over {u.instances_per_replica} instances" if u.multi_node else "")
        + f" on {u.offer_id} ({u.region})"
        + (f", {u.precision}" if u.precision else "")
        + (f", tensor parallel {u.tensor_parallel} x pipeline parallel {u.pipeline_parallel}" if u.model else "")
        + (f", max batch {u.batch}" if u.batch else "") + ".",
    ]
    if u.routed_share < 0.9999:
        lines.append(f"The plan routes {u.routed_share:.1%} of the traffic of {u.service!r} here; its other units are "
                     "separate files: split traffic across their endpoints in that proportion.")
    lines.extend(u.name_notes)
    note = arm64_note(u)
    if note:
        lines.append(note)
    lines.append("Launch (HF_TOKEN from your environment):" if u.model else "Launch:")
    lines.append(f"  sky serve up -n {u.name} {u.name}.yaml" + (" --secret HF_TOKEN" if u.model else ""))
    return lines


def _run(u: Unit, comments: list[str]) -> str:
    if u.model is None:
        comments.append("No model: the planner sized this service from measured profiles. Replace `run` (and add "
                        "resources.image_id) with the command that starts its server on port "
                        f"{engines.PORT} with {engines.HEALTH_PATH}; as written it stops with a message.")
        message = f"solver-cli export: set the command that serves {u.service} on port {engines.PORT}"
        return f"echo {shlex.quote(message)} >&2\nexit 1\n"
    if not u.multi_node:
        launch = engines.server(u)
        comments.extend(launch.notes)
        return _sh(launch.args) + "\n"
    head = 'HEAD_IP=$(echo "$SKYPILOT_NODE_IPS" | head -n1)\n'
    if u.engine == "sglang":
        launch = engines.server(u, nnodes="$SKYPILOT_NUM_NODES", node_rank="$SKYPILOT_NODE_RANK",
                                leader_address="$HEAD_IP")
        comments.extend(launch.notes)
        return head + _sh(launch.args) + "\n"
    launch = engines.server(u)  # vLLM: Ray across the nodes, the server on the head node
    comments.extend(launch.notes)
    return (head + 'if [ "$SKYPILOT_NODE_RANK" = "0" ]; then\n'
            f"  {engines.vllm_ray_leader(u, '$SKYPILOT_NUM_NODES')}\n"
            f"  {_sh(launch.args)}\n"
            "else\n"
            f"  {engines.vllm_ray_worker('$HEAD_IP')}\n"
            "fi\n")


def _sh(args: list[str]) -> str:
    """Shell words; arguments holding a $VARIABLE stay expandable."""
    return " ".join(f'"{a}"' if "$" in a else shlex.quote(a) for a in args)
