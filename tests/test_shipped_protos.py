"""The protos shipped for clients in other languages (proto/grpc, proto/google/rpc)
compile, carry their upstream licence headers, and describe exactly the messages the
server speaks: each message the server's Python packages use has the same fields
(name, number, type, label) in the shipped file."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

PROTO = Path(__file__).resolve().parents[1] / "proto"
SHIPPED = ["grpc/health/v1/health.proto", "grpc/reflection/v1/reflection.proto",
           "grpc/reflection/v1alpha/reflection.proto", "google/rpc/status.proto", "google/rpc/error_details.proto",
           "google/rpc/code.proto"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    spec = importlib.util.find_spec("grpc_tools")
    if spec is None:
        pytest.skip("grpcio-tools is not installed")
    out = tmp_path_factory.mktemp("protos") / "set.pb"
    well_known = Path(spec.origin).parent / "_proto"
    # In a subprocess: protoc's extension and ortools' bundled protobuf crash one process.
    proc = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}", f"-I{well_known}",
                           f"--descriptor_set_out={out}", *SHIPPED], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"the shipped protos do not compile: {proc.stderr}"
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return {f.name: f for f in files}


def _fields(message: descriptor_pb2.DescriptorProto) -> dict[str, tuple]:
    return {f.name: (f.number, f.type, f.label, f.type_name.rsplit(".", 1)[-1]) for f in message.field}


def _runtime(module) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    return proto


def _assert_same_messages(shipped: descriptor_pb2.FileDescriptorProto, runtime: descriptor_pb2.FileDescriptorProto):
    by_name = {m.name: m for m in shipped.message_type}
    for message in runtime.message_type:
        assert message.name in by_name, f"{message.name} is missing from {shipped.name}"
        assert _fields(by_name[message.name]) == _fields(message), f"{shipped.name}: {message.name} differs"
    for enum in runtime.enum_type:
        theirs = {e.name: {v.name: v.number for v in e.value} for e in shipped.enum_type}[enum.name]
        assert theirs == {v.name: v.number for v in enum.value}


def test_every_shipped_proto_keeps_its_licence_header():
    for name in SHIPPED:
        head = (PROTO / name).read_text()[:600]
        assert "Licensed under the Apache License, Version 2.0" in head, name
    assert "Apache License" in (PROTO / "grpc" / "LICENSE").read_text()


def test_health_matches_what_the_server_serves(compiled):
    from grpc_health.v1 import health_pb2

    shipped, runtime = compiled["grpc/health/v1/health.proto"], _runtime(health_pb2)
    _assert_same_messages(shipped, runtime)
    served = {m.name for m in runtime.service[0].method}
    assert served <= {m.name for m in shipped.service[0].method}  # the shipped file also has List


def test_google_rpc_details_match_what_the_server_sends(compiled):
    from google.rpc import code_pb2, error_details_pb2, status_pb2

    for name, module in (("google/rpc/status.proto", status_pb2), ("google/rpc/error_details.proto", error_details_pb2),
                         ("google/rpc/code.proto", code_pb2)):
        _assert_same_messages(compiled[name], _runtime(module))


@pytest.mark.parametrize("version", ["v1alpha", "v1"])
def test_reflection_matches_what_the_server_serves(compiled, version):
    """The server's grpcio-reflection serves v1alpha; v1 has the same messages under another package."""
    from grpc_reflection.v1alpha import reflection_pb2

    _assert_same_messages(compiled[f"grpc/reflection/{version}/reflection.proto"], _runtime(reflection_pb2))
