"""TLS, mutual TLS and the bearer token, on a real server with throwaway certificates."""

from __future__ import annotations

import grpc
import pytest
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from grpc_support import SMALL, make_certificates, running_server
from planner_client import PlannerClient, PlannerClientError


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certificates(tmp_path_factory.mktemp("certs"))


def test_tls(certs):
    with running_server(tls_cert=certs["server.pem"], tls_key=certs["server.key"]) as (_planner, target):
        with PlannerClient(target, ca_cert=certs["ca.pem"], timeout_s=30) as c:
            assert c.validate(SMALL)["valid"]
            assert c.solve(SMALL)["status"] == "optimal"
        # A client that does not trust the CA cannot connect.
        with PlannerClient(target, tls=True, timeout_s=5, retries=0) as c:
            with pytest.raises(PlannerClientError) as err:
                c.validate(SMALL)
        assert err.value.code == "UNAVAILABLE"
        # Nor can a plaintext client.
        with PlannerClient(target, timeout_s=5, retries=0) as c:
            with pytest.raises(PlannerClientError) as err:
                c.validate(SMALL)
        assert err.value.code == "UNAVAILABLE"


def test_mutual_tls(certs):
    with running_server(tls_cert=certs["server.pem"], tls_key=certs["server.key"],
                        tls_client_ca=certs["ca.pem"]) as (_planner, target):
        with PlannerClient(target, ca_cert=certs["ca.pem"], client_cert=certs["client.pem"],
                           client_key=certs["client.key"], timeout_s=30) as c:
            assert c.validate(SMALL)["valid"]
        with PlannerClient(target, ca_cert=certs["ca.pem"], timeout_s=5, retries=0) as c:
            with pytest.raises(PlannerClientError) as err:
                c.validate(SMALL)
        assert err.value.code == "UNAVAILABLE"  # the handshake fails without a client certificate


def test_token(certs):
    with running_server(token="s3cret") as (planner, target):
        with PlannerClient(target, token="s3cret", timeout_s=30) as c:
            assert c.solve(SMALL)["status"] == "optimal"
            assert c.get_catalog(provider="lambda")["offers"]
        for token in (None, "wrong", "s3cret "):
            with PlannerClient(target, token=token, timeout_s=30) as c:
                with pytest.raises(PlannerClientError) as err:
                    c.solve(SMALL)
                assert (err.value.code, err.value.exit_code) == ("UNAUTHENTICATED", 5)
                assert "bearer token" in err.value.message
                with pytest.raises(PlannerClientError):
                    list(c.solve_stream(SMALL))
                assert c.health() == "SERVING"  # health checks stay open for probes
        with grpc.insecure_channel(target) as channel:  # reflection needs the token too
            with pytest.raises(grpc.RpcError) as raw:
                ProtoReflectionDescriptorDatabase(channel).get_services()
            assert raw.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert planner.metrics.value("planner_solves_total", {"outcome": "optimal"}) == 1
        assert planner.metrics.value("planner_rpcs_total", {"method": "Solve", "code": "UNAUTHENTICATED"}) == 3
