"""gRPC server reflection, served as `grpc.reflection.v1` and `grpc.reflection.v1alpha`.

grpcio-reflection serves v1alpha only, and with the upb descriptor pool its servicer finds no file for a
method symbol (`pkg.Service.Method`, what `grpcurl describe` of a method asks for). v1 is v1alpha under
another package name, message for message and field for field, so one servicer answers both, and the v1
descriptor (for clients that describe the reflection service itself) is v1alpha's renamed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection, reflection_pb2

from a2a_grpc.interceptors.server.services import GuardedServices

V1ALPHA_SERVICE_NAME: str = reflection.SERVICE_NAME
V1_PACKAGE = "grpc.reflection.v1"
V1_SERVICE_NAME = f"{V1_PACKAGE}.ServerReflection"
V1_FILE = "grpc/reflection/v1/reflection.proto"
METHOD = "ServerReflectionInfo"


class ReflectionServicer(reflection.aio.ReflectionServicer):  # type: ignore[misc]
    """grpcio-reflection's servicer that answers a method symbol with the file of its service."""

    def _file_containing_symbol(self, request: Any, symbol: str) -> Any:
        return super()._file_containing_symbol(request, _service_of_method(symbol) or symbol)


def add_reflection(services: Iterable[str], server: GuardedServices) -> None:
    """Serve reflection v1 and v1alpha on `server`, listing `services` and both reflection services."""
    servicer = ReflectionServicer((*services, V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME))
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
        response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
    )
    for service in (V1_SERVICE_NAME, V1ALPHA_SERVICE_NAME):
        server.add_registered_method_handlers(service, {METHOD: handler})


def _service_of_method(symbol: str) -> str | None:
    """`pkg.Service` when `symbol` is `pkg.Service.Method` of a service in the pool."""
    service_name, _, method = symbol.rpartition(".")
    try:
        service = descriptor_pool.Default().FindServiceByName(service_name)
    except KeyError:
        return None
    return service_name if method in service.methods_by_name else None


def _v1_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto()
    reflection_pb2.DESCRIPTOR.CopyToProto(file)
    v1alpha, v1 = f".{file.package}.", f".{V1_PACKAGE}."
    file.name, file.package = V1_FILE, V1_PACKAGE
    file.ClearField("options")  # v1alpha's are deprecated=true and its Java and Go package names
    for message in file.message_type:
        for field in message.field:
            if field.type_name:
                field.type_name = field.type_name.replace(v1alpha, v1)
    for method in file.service[0].method:
        method.input_type = method.input_type.replace(v1alpha, v1)
        method.output_type = method.output_type.replace(v1alpha, v1)
    return file


descriptor_pool.Default().AddSerializedFile(_v1_file().SerializeToString())
