"""Server reflection under both names clients use: grpc.reflection.v1 and v1alpha.

grpcurl and most current tools ask for `grpc.reflection.v1.ServerReflection` first;
grpcio-reflection ships only the older `v1alpha`. The v1 protocol is v1alpha promoted
unchanged (same messages, same field numbers), so the v1alpha servicer answers both,
and the v1 file descriptor (v1alpha's, renamed) is registered so that reflection can
describe itself under either name.
"""

from __future__ import annotations

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
V1_FILE = "grpc/reflection/v1/reflection.proto"


def enable(server: grpc.Server, service_names: tuple[str, ...]) -> None:
    names = (*service_names, reflection.SERVICE_NAME, V1_SERVICE)
    _register_v1_descriptor()
    servicer = reflection.ReflectionServicer(names)
    method = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString)
    for service in (reflection.SERVICE_NAME, V1_SERVICE):
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"ServerReflectionInfo": method}),))


def _register_v1_descriptor() -> None:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(V1_FILE)
        return  # registered already (another server in this process, or generated code)
    except KeyError:
        pass
    proto = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(proto)
    old, new = f".{proto.package}.", ".grpc.reflection.v1."
    proto.name, proto.package = V1_FILE, "grpc.reflection.v1"
    proto.ClearField("options")  # v1alpha's language options (java package etc.) name v1alpha
    for message in proto.message_type:
        for field in message.field:
            if field.type_name.startswith(old):
                field.type_name = new + field.type_name[len(old):]
    for service in proto.service:
        for m in service.method:
            m.input_type = new + m.input_type[len(old):]
            m.output_type = new + m.output_type[len(old):]
    pool.AddSerializedFile(proto.SerializeToString())
