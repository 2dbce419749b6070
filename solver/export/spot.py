"""Spot capacity on the managed Kubernetes of each cloud: the node label to select and the taint to tolerate.

A plan priced for spot must run on spot nodes, or the fleet costs the on-demand price (and
the plan's spot budget is wrong); a comment alone leaves that to chance. Per cloud:
- GKE: Spot VM nodes carry `cloud.google.com/gke-spot: "true"`; node pools may be tainted
  `cloud.google.com/gke-spot="true":NoSchedule` (GKE docs, "Spot VMs"), so tolerate it.
- EKS managed node groups label `eks.amazonaws.com/capacityType: SPOT` (EKS docs, "Managed
  node groups", capacity types); no taint by default. (Karpenter labels
  `karpenter.sh/capacity-type: spot` instead: the file's comment says so.)
- AKS spot node pools label `kubernetes.azure.com/scalesetpriority: spot` and always taint
  `kubernetes.azure.com/scalesetpriority=spot:NoSchedule` (AKS docs, "Add a spot node pool").
"""

from __future__ import annotations

SPOT_NODES = {
    "gcp": ({"cloud.google.com/gke-spot": "true"},
            [{"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]),
    "aws": ({"eks.amazonaws.com/capacityType": "SPOT"}, []),
    "azure": ({"kubernetes.azure.com/scalesetpriority": "spot"},
              [{"key": "kubernetes.azure.com/scalesetpriority", "operator": "Equal", "value": "spot",
                "effect": "NoSchedule"}]),
}


def spot_placement(provider: str) -> tuple[dict[str, str], list[dict]] | None:
    """(node selector, tolerations) for spot nodes on the provider's managed Kubernetes; None: unknown."""
    return SPOT_NODES.get(provider.lower())


def spot_comment(provider: str) -> str:
    if provider.lower() == "aws":
        return ("The plan is priced for spot instances: the pods select EKS managed node groups' spot nodes "
                "(eks.amazonaws.com/capacityType: SPOT); with Karpenter, select karpenter.sh/capacity-type: spot "
                "instead.")
    if spot_placement(provider):
        return "The plan is priced for spot instances: the pods select the cloud's spot nodes and tolerate their taint."
    return (f"The plan is priced for spot instances, and {provider!r} has no spot node label this export knows: "
            "run this on a spot / preemptible node pool (add its node selector and toleration).")
