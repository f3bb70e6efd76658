"""Traffic outside the A2A methods: health and reflection requests that do not parse, a health method the
servicer lacks, request header values that are not UTF-8, bytes to the card's HTTP port that are not HTTP.
Each is answered properly, logs no ERROR traceback, and the server keeps serving."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from conftest import StartServer
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from rpc_helpers import TEST_SECONDS, rpc_error

from a2a_grpc.protocol import AGENT_CARD_PATH, SERVICE_NAME
from a2a_grpc.server import A2AServer

GRPCURL = str(Path(sys.executable).with_name("grpcurl"))
GARBAGE = b"\xff\xff\xff\xff"
HEALTH = "/grpc.health.v1.Health/"
REFLECTION = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
NOT_HTTP = {
    "a header line without a colon": b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
    "an unknown HTTP version": b"GET / HTTP/9.9\r\n\r\n",
    "a Content-Length that is not a number": b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
}


def as_is(data: bytes) -> bytes:
    return data


def tracebacks(records: list[logging.LogRecord]) -> list[str]:
    return [record.getMessage() for record in records if record.levelno >= logging.ERROR or record.exc_info]


async def assert_health_and_reflection_serve(channel: grpc.aio.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    status = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
    assert status.status == health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    async for answer in reflection.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")])
    ):
        assert SERVICE_NAME in {service.name for service in answer.list_services_response.service}


async def test_malformed_health_and_reflection_requests_are_invalid_arguments(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(TEST_SECONDS):
        unary = {"Check", "List"}
        calls = [channel.unary_unary(HEALTH + name, as_is, as_is)(GARBAGE) for name in unary]
        errors = [await rpc_error(call) for call in calls]
        watch = channel.unary_stream(HEALTH + "Watch", as_is, as_is)(GARBAGE)
        errors.append(await rpc_error(watch.read()))
        reflect = channel.stream_stream(REFLECTION, as_is, as_is)(iter([GARBAGE]))
        errors.append(await rpc_error(reflect.read()))
        for error in errors:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
            assert "DecodeError" not in (error.details() or "") and "Unexpected" not in (error.details() or "")
        await assert_health_and_reflection_serve(channel)
    assert tracebacks(caplog.records) == []


async def test_a_health_method_the_servicer_lacks_is_unimplemented_without_a_traceback(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(TEST_SECONDS):
        health = health_pb2_grpc.HealthStub(channel)
        try:
            await health.List(health_pb2.HealthListRequest())
        except grpc.aio.AioRpcError as error:  # grpcio-health-checking's asyncio servicer has no List yet
            assert error.code() == grpc.StatusCode.UNIMPLEMENTED, error
    assert tracebacks(caplog.records) == []


async def grpcurl_get_task(server: A2AServer, *headers: bytes) -> tuple[int, str]:
    """GetTask through grpcurl, which sends header values byte for byte (Python clients refuse non-ASCII)."""
    header_args = [arg for header in headers for arg in (b"-H", header)]
    argv: list[str | bytes] = [
        GRPCURL,
        "-plaintext",
        *header_args,
        "-d",
        '{"id": "t"}',
        server.grpc_target,
        f"{SERVICE_NAME}/GetTask",
    ]
    process = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, stderr = await process.communicate()
    return process.returncode or 0, stderr.decode(errors="replace")


async def test_header_values_that_are_not_utf8_are_answered_without_a_traceback(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        code, output = await grpcurl_get_task(server, b"a2a-version: \xff\xfe")
        assert (code, "Code: FailedPrecondition" in output, "VERSION_NOT_SUPPORTED" in output) == (73, True, True)
        code, output = await grpcurl_get_task(server, b"a2a-version: 1.0", b"x-trace: \xff")
        assert (code, "Code: NotFound" in output, "TASK_NOT_FOUND" in output) == (69, True, True), output
    assert tracebacks(caplog.records) == []


async def exchange(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    answer = await reader.read()
    writer.close()
    await writer.wait_closed()
    return answer


async def test_bytes_to_the_card_port_that_are_not_http_are_one_quiet_line_each(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        for request in NOT_HTTP.values():
            assert (await exchange(server.http_port, request)).startswith(b"HTTP/1.0 400 Bad Request\r\n")
        card = f"GET {AGENT_CARD_PATH} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
        assert (await exchange(server.http_port, card)).startswith(b"HTTP/1.1 200 OK\r\n")
    assert tracebacks(caplog.records) == []
    quiet = [record for record in caplog.records if record.name == "aiohttp.server" and record.levelno == logging.INFO]
    assert len(quiet) == len(NOT_HTTP), [record.getMessage() for record in quiet]
    assert all("\n" not in record.getMessage() for record in quiet)
