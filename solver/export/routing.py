"""Traffic split as planned: per unit a Service, per planned service a Gateway API HTTPRoute with weights.

The plan routes each service's traffic unevenly over its configurations (e.g. 0.47 req/s to
an L4 replica and 28 to a GH200): a single Service spreads connections evenly over ready
pods, so the small replica would get as much as the big one and miss its SLOs. Where a
service has several units, each unit gets its own Service (named as the unit) and an
HTTPRoute (gateway.networking.k8s.io/v1, Gateway API standard channel) sends the service's
requests to them with backend weights proportional to the plan's routed rates. The
service-level Service stays, for clients inside the cluster that do not go through a
Gateway (an even split, as its comment says).
"""

from __future__ import annotations

from solver.export.units import Unit

GATEWAY_API = "gateway.networking.k8s.io/v1"
GATEWAY = "fleet-gateway"  # the Gateway the routes attach to (parentRefs): the user's, by this name or edited
WEIGHT_SCALE = 1000  # weights in per mille of the service's traffic: 0.1% resolution
SERVICE_PORT = 80


def weights(units: list[Unit]) -> list[int]:
    """Integers proportional to the units' routed shares; a unit the plan sends traffic to gets at least 1."""
    return [max(1, round(u.routed_share * WEIGHT_SCALE)) if u.routed_share > 0 else 0 for u in units]


def unit_service(u: Unit) -> dict:
    """A Service in front of one unit's servers only: the HTTPRoute's backend for that unit."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": u.name, "labels": {"app.kubernetes.io/name": u.service_slug,
                                                    "app.kubernetes.io/instance": u.name},
                         "annotations": {"fleet-planner/service": u.service,
                                         "fleet-planner/routed-share": f"{u.routed_share:.4f}"}},
            "spec": {"type": "ClusterIP",
                     "selector": {"app.kubernetes.io/instance": u.name, "app.kubernetes.io/component": "server"},
                     "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": "http", "protocol": "TCP"}]}}


def http_route(slug: str, units: list[Unit]) -> dict:
    return {"apiVersion": GATEWAY_API, "kind": "HTTPRoute",
            "metadata": {"name": slug, "labels": {"app.kubernetes.io/name": slug},
                         "annotations": {"fleet-planner/service": units[0].service}},
            "spec": {"parentRefs": [{"name": GATEWAY}],
                     "rules": [{"backendRefs": [{"name": u.name, "port": SERVICE_PORT, "weight": w}
                                                for u, w in zip(units, weights(units))]}]}}


def route_comments(units: list[Unit]) -> list[str]:
    split = ", ".join(f"{u.name} {w}" for u, w in zip(units, weights(units)))
    return [f"The HTTPRoute below sends the requests of {units[0].service!r} to its units with the plan's weights "
            f"({split}, per mille of its routed rate). It needs the Gateway API CRDs (standard channel, v1) and a "
            f"Gateway named {GATEWAY} in this namespace: create one, or set parentRefs to yours. The Service above "
            "spreads connections evenly: use it only where the split does not matter."]
