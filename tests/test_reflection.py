"""Reflection v1 (`grpc.reflection.v1.ServerReflection`) on a real channel: grpcurl 1.8.6 only speaks v1alpha.

The requests and responses are encoded with grpcio-reflection's v1alpha messages: v1's are the same on the
wire, so what the server receives is exactly what a v1 client sends.
"""

from __future__ import annotations

import asyncio
from typing import TypeAlias

import grpc
from conftest import StartServer
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2
from rpc_helpers import TEST_SECONDS, rpc_error

from a2a_grpc.protocol import SERVICE_NAME

V1_METHOD = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
Request: TypeAlias = reflection_pb2.ServerReflectionRequest
Response: TypeAlias = reflection_pb2.ServerReflectionResponse


async def reflect(target: str, *requests: Request) -> list[Response]:
    """The answers of reflection v1 on `target` to `requests`, sent on one stream."""
    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.stream_stream(V1_METHOD, Request.SerializeToString, Response.FromString)(iter(requests))
        return [answer async for answer in call]


def described_files(answer: Response) -> dict[str, descriptor_pb2.FileDescriptorProto]:
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(data)
        for data in answer.file_descriptor_response.file_descriptor_proto
    ]
    return {file.name: file for file in files}


async def test_v1_lists_the_services_and_both_reflection_versions(start_server: StartServer) -> None:
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        [answer] = await reflect(server.grpc_target, Request(list_services=""))
    assert {service.name for service in answer.list_services_response.service} == {
        SERVICE_NAME,
        "a2a.v1.A2AService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    }


async def test_v1_answers_a_method_symbol_with_the_file_of_its_service(start_server: StartServer) -> None:
    server = await start_server()
    symbols = [f"{SERVICE_NAME}.SendMessage", "grpc.health.v1.Health.Check", f"{SERVICE_NAME}.NoSuchMethod"]
    async with asyncio.timeout(TEST_SECONDS):
        a2a, health, unknown = await reflect(server.grpc_target, *(Request(file_containing_symbol=s) for s in symbols))
    assert "SendMessage" in [method.name for method in described_files(a2a)["a2a.proto"].service[0].method]
    assert described_files(health)["grpc_health/v1/health.proto"].service[0].name == "Health"
    assert unknown.error_response.error_code == grpc.StatusCode.NOT_FOUND.value[0]
    assert unknown.original_request.file_containing_symbol == f"{SERVICE_NAME}.NoSuchMethod"


async def test_v1_describes_itself(start_server: StartServer) -> None:
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        [answer] = await reflect(
            server.grpc_target, Request(file_containing_symbol="grpc.reflection.v1.ServerReflection")
        )
    file = described_files(answer)["grpc/reflection/v1/reflection.proto"]
    [method] = file.service[0].method
    assert (file.package, method.input_type, method.output_type) == (
        "grpc.reflection.v1",
        ".grpc.reflection.v1.ServerReflectionRequest",
        ".grpc.reflection.v1.ServerReflectionResponse",
    )
    assert (method.client_streaming, method.server_streaming) == (True, True)


async def test_a_malformed_v1_request_is_an_invalid_argument(start_server: StartServer) -> None:
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(TEST_SECONDS):
        call = channel.stream_stream(V1_METHOD, bytes, bytes)(iter([b"\xff\xff\xff\xff"]))
        error = await rpc_error(call.read())
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
