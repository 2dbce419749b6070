"""What every disaggregated-serving export shares (llm_d.py, dynamo.py): checks that a plan's
prefill and decode pools are the plan the planner writes, and each link tier's name.

A disaggregated service is a prefill pool and a decode pool joined by one link tier (the
plan's `link`: provider, region and the network between the workers). Each stack writes a
tier's workers its own way; both refuse the same impossible plans and name a tier alike.
"""

from __future__ import annotations

import re

from solver.errors import InputError
from solver.export.gpus import vendor
from solver.export.kubernetes import site_comments
from solver.export.names import distinct
from solver.export.units import PlanSummary, Unit

FIX = "export the plan exactly as `solver-cli solve` wrote it"

# A Hugging Face repository id: what the stacks load (llm-d renders it through Helm's
# template engine, Dynamo passes it as --model-path); anything else - braces, quotes,
# spaces, colons - would be read as template code or YAML there, or cut off.
_HF_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def check_unit(u: Unit, stack: str, image: str) -> None:
    """Refuse a pool unit no stack runs as planned: no model, a model that is not a Hugging
    Face id, a worker over several instances, a GPU the stack's pinned CUDA image cannot drive."""
    where = f"services[{u.service}]"
    if u.model is None:
        raise InputError.single(where, "has a disaggregated pool without a model.", "plan pools from a model")
    if not _HF_REPO.fullmatch(u.model_repo or u.model):
        raise InputError.single(f"{where}.model", f"is {(u.model_repo or u.model)[:80]!r}: {stack} loads a "
                                "Hugging Face repository id (letters, digits, . _ - and one /).",
                                "name the model by its Hugging Face id")
    if u.instances_per_replica != 1:
        raise InputError.single(where, f"has a {u.role} worker over {u.instances_per_replica} instances; the "
                                "planner sizes pool workers within one instance.", FIX)
    if vendor(u.gpu) != "NVIDIA":
        raise InputError.single(where, f"has a {u.role} pool on {u.gpu}: {stack}'s pinned worker image "
                                f"({image}) is built for NVIDIA GPUs.",
                                "constrain the service's disaggregation to NVIDIA GPU types "
                                "(disaggregation.prefill_gpu_types / decode_gpu_types), or serve it aggregated")


def check_tiers(pools: list[Unit]) -> None:
    """Each link tier of a service has both roles, on one model and one engine: the plan's
    pools come in pairs (prefill and decode workers of two engines cannot pass a KV cache)."""
    tiers: dict[tuple[str, str], dict[str, set]] = {}
    engines: dict[tuple[str, str], set] = {}
    for u in pools:
        tiers.setdefault((u.service, u.pool), {}).setdefault(u.role, set()).add(u.model_repo or u.model)
        engines.setdefault((u.service, u.pool), set()).add(u.engine)
    for (service, tier), names in sorted(engines.items()):
        if len(names) > 1:
            raise InputError.single(f"services[{service}].engine", f"is {' and '.join(sorted(map(str, names)))} in "
                                    f"link tier {tier!r}: prefill and decode must run one engine.", FIX)
    for (service, tier), roles in sorted(tiers.items()):
        missing = [r for r in ("prefill", "decode") if r not in roles]
        if missing:
            raise InputError.single(f"services[{service}]", f"has no {missing[0]} pool in link tier {tier!r} beside "
                                    f"its {'decode' if missing[0] == 'prefill' else 'prefill'} pool.", FIX)
        models = set().union(*roles.values())
        if len(models) > 1:
            raise InputError.single(f"services[{service}]", f"serves {', '.join(sorted(map(str, models)))} in link "
                                    f"tier {tier!r}: prefill and decode must run one model.", FIX)


def group_labels(pools: list[Unit]) -> dict[tuple[str, str], str]:
    """(service, link tier) -> the name its workers share: a valid label and DNS-1035 name,
    distinct for distinct tiers (two tiers whose names reduce alike get hashes of their own)."""
    keys = sorted({(u.service, u.pool) for u in pools})
    labels, _ = distinct({f"{s}\n{t}": f"{next(u.service_slug for u in pools if u.service == s)}-{t}"
                          for s, t in keys}, keep_exact=False, fallback="pd-group")
    return {(s, t): labels[f"{s}\n{t}"] for s, t in keys}


def tier_rates(summary: PlanSummary, pools: list[Unit], slug: str,
               labels: dict[tuple[str, str], str]) -> tuple[float, dict[str, float]]:
    """A service's requests/s to its aggregated replicas, and to each link tier's workers (by
    the tier's name): how the plan splits a service served both ways."""
    aggregated = sum(u.routed_per_s for u in summary.units if u.service_slug == slug and not u.role)
    tiers: dict[str, float] = {}
    for u in pools:
        if u.service_slug == slug and u.role == "prefill":  # every request is prefilled once
            group = labels[(u.service, u.pool)]
            tiers[group] = tiers.get(group, 0.0) + u.routed_per_s
    return aggregated, tiers


def closing_comments(u: Unit, mixed_services: frozenset[str], split: str, keep_off_sites: bool) -> list[str]:
    """The last comments of a tier's files: RDMA, the split with aggregated replicas (`split`:
    the plan's rates in the stack's words), the site, the token."""
    lines = []
    if "rdma" in u.pool.lower():
        lines.append("The plan sized the KV transfer on RDMA: the cluster must give these pods the nodes' RDMA NICs "
                     "(an RDMA device plugin or host networking); over plain TCP NIXL is slower and TTFT grows.")
    if u.service_slug in mixed_services:
        lines.append(f"The service also has aggregated replicas ({u.service_slug}-service.yaml): route {split} at the "
                     "gateway, as the plan does.")
    lines.extend(site_comments(u, keep_off_sites))
    lines.append("Gated models need a Hugging Face token: kubectl create secret generic hf-token "
                 "--from-literal=token=hf_...")
    return lines
