"""The HTTP request as the chain's grpc context (a2a_grpc.faces.call.HttpCall): what the chain and a user's
interceptor read of a call over JSON-RPC and HTTP+JSON is what they read of the same call over gRPC: header
values that are not UTF-8, the peer of an IPv6 caller, the bound on request headers, and the rest of
grpc.aio's servicer context (codes, details, done callbacks, compression, the peer's certificate identity)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import pytest
from certs import Pki
from conftest import BASE_CARD, StartServer, user_message
from http_faces import BINDINGS, Callers, Headers

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import SERVICE_NAME
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.telemetry import ACCESS_LOGGER
from a2a_grpc.tls import ClientTLS

TEST_SECONDS = 20
GRPCURL = str(Path(sys.executable).with_name("grpcurl"))
V1: Headers = (("a2a-version", "1.0"),)
BEARER_CARD: dict[str, Any] = {
    **BASE_CARD,
    "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
    "securityRequirements": [{"schemes": {"bearer": {}}}],
}
MTLS_CARD: dict[str, Any] = {
    **BASE_CARD,
    "securitySchemes": {"cert": {"mtlsSecurityScheme": {}}},
    "securityRequirements": [{"schemes": {"cert": {}}}],
}
NOT_UTF8 = b"Bearer \xff\xfe"


def send() -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(message=user_message("hi"))


def tracebacks(records: list[logging.LogRecord]) -> list[str]:
    return [record.getMessage() for record in records if record.levelno >= logging.ERROR or record.exc_info]


@contextlib.asynccontextmanager
async def serving(
    tmp_path: Path, card: dict[str, Any], interceptors: Sequence[Any] = (), **settings: Any
) -> AsyncIterator[A2AServer]:
    """A server with `interceptors`, its ports on 127.0.0.1 unless `settings` name others."""
    card_path = tmp_path / "card.json"
    card_path.write_text(json.dumps(card))
    settings = {"listen": "127.0.0.1:0", "http_listen": "127.0.0.1:0", **settings}
    server = A2AServer(
        ServerSettings(card_path=str(card_path), store_url="memory", **settings), interceptors=interceptors
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop(0)


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        while True:
            if condition():
                return
            await asyncio.sleep(0.005)


async def raw_http(port: int, head: bytes, body: bytes = b"") -> bytes:
    """The status line of the answer to a request sent byte for byte (HTTP clients refuse bytes that are not text)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    answer = await reader.read()
    writer.close()
    await writer.wait_closed()
    return answer.partition(b"\r\n")[0]


async def test_a_header_value_that_is_not_utf8_is_read_as_latin1_as_grpc_reads_it(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """`Authorization: Bearer \\xff\\xfe` is an unknown token on the three bindings: UNAUTHENTICATED, never a 500."""
    caplog.set_level(logging.INFO)
    server = await start_server(card=BEARER_CARD, bearer_tokens={"t": "alice"})
    async with asyncio.timeout(TEST_SECONDS):
        argv: list[str | bytes] = [GRPCURL, "-plaintext", "-H", "a2a-version: 1.0", "-H", b"authorization: " + NOT_UTF8]
        argv += ["-d", "{}", server.grpc_target, f"{SERVICE_NAME}/ListTasks"]
        process = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _, stderr = await process.communicate()
        assert "Code: Unauthenticated" in stderr.decode(errors="replace"), stderr
        credential = b"A2A-Version: 1.0\r\nAuthorization: " + NOT_UTF8 + b"\r\n"
        rest = await raw_http(server.http_port, b"GET /tasks HTTP/1.1\r\nHost: x\r\n" + credential)
        rpc = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).encode()
        head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + credential
        jsonrpc = await raw_http(server.http_port, head, rpc)
    assert (rest, jsonrpc) == (b"HTTP/1.1 401 Unauthorized", b"HTTP/1.1 401 Unauthorized")
    assert tracebacks(caplog.records) == []


@pytest.mark.parametrize("per_address", [0, 8], ids=["grpc directly", "behind the connection front"])
async def test_an_ipv6_caller_is_one_peer_and_one_budget_on_both_ports(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, per_address: int
) -> None:
    """grpc names the peer `ipv6:%5B::1%5D:PORT`; the HTTP faces name it alike, so an anonymous caller's rate is one
    budget: its one request over gRPC leaves none for HTTP."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    async with (
        serving(
            tmp_path,
            BASE_CARD,
            listen="[::1]:0",
            http_listen="[::1]:0",
            access_log=True,
            max_requests_per_second=0.01,
            max_connections_per_address=per_address or None,
        ) as server,
        asyncio.timeout(TEST_SECONDS),
        aiohttp.ClientSession() as session,
        grpc.aio.insecure_channel(server.grpc_target) as channel,
    ):
        callers = Callers(server, session, channel)
        reasons = [(await callers.call(binding, "SendMessage", send(), V1)).reason for binding in BINDINGS]
    assert reasons == ["", "RATE_LIMITED", "RATE_LIMITED"]
    peers = [
        field.partition("=")[2].rpartition(":")[0]
        for record in caplog.records
        if record.name == ACCESS_LOGGER
        for field in record.getMessage().split()
        if field.startswith("peer=")
    ]
    assert peers == ["ipv6:%5B::1%5D"] * 3


async def test_request_headers_are_bounded_on_http_as_on_grpc(start_server: StartServer) -> None:
    """max_metadata_bytes (16 KiB, each header counted as name + value + 32 bytes, as grpc counts it): one large
    header within it is taken on the three bindings; headers that add up to more are RESOURCE_EXHAUSTED (431)."""
    server = await start_server()
    one_large: Headers = (*V1, ("x-large", "v" * 12_000))
    many: Headers = (*V1, *((f"x-part-{index}", "v" * 7_000) for index in range(3)))
    async with (
        asyncio.timeout(TEST_SECONDS),
        aiohttp.ClientSession() as session,
        grpc.aio.insecure_channel(server.grpc_target) as channel,
    ):
        callers = Callers(server, session, channel)
        taken = {binding: await callers.call(binding, "SendMessage", send(), one_large) for binding in BINDINGS}
        refused = {
            binding: await callers.call(binding, "SendMessage", send(), many) for binding in ("grpc", "http+json")
        }
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}
        async with session.post(callers.base + "/", json=rpc, headers=many) as reply:
            jsonrpc = (reply.status, (await reply.json())["error"])
    assert {binding: outcome.reason for binding, outcome in taken.items()} == dict.fromkeys(BINDINGS, "")
    assert (refused["grpc"].status, refused["http+json"].status) == ("RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED")
    assert refused["http+json"].http_status == 431
    assert jsonrpc == (431, {"code": -32000, "message": "the request headers are larger than 16,384 bytes"})


class Probe(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A user's interceptor that uses grpc.aio's servicer context beyond abort: it reads the peer's identity, the
    code and details, asks for compression, registers a done callback, and (with `x-deny: yes`) ends the call
    with a code and details set, returning the response as grpc allows."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []
        self.ended: list[tuple[Any, ...]] = []

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        deny = ("x-deny", "yes") in tuple(details.invocation_metadata or ())

        def probe(context: Any) -> None:
            context.set_compression(grpc.Compression.Gzip)
            context.disable_next_message_compression()
            context.add_done_callback(lambda ended: self.ended.append((ended.done(), ended.code(), ended.details())))
            identity = (context.peer_identity_key(), context.peer_identities())
            self.seen.append((*identity, context.code(), context.details(), context.cancelled(), context.done()))

        def end(context: Any) -> None:
            if deny:
                context.set_code(grpc.StatusCode.PERMISSION_DENIED)
                context.set_details("denied by the probe")

        async def unary(request: Any, context: Any) -> Any:
            probe(context)
            response = await handler.unary_unary(request, context)
            end(context)
            return response

        async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
            probe(context)
            async for event in handler.unary_stream(request, context):
                yield event
            end(context)

        serialization = (handler.request_deserializer, handler.response_serializer)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(stream, *serialization)
        return grpc.unary_unary_rpc_method_handler(unary, *serialization)


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
@pytest.mark.parametrize("deny", ["no", "yes"])
async def test_a_users_interceptor_has_grpcs_whole_servicer_context_on_http(
    tmp_path: Path, deny: str, method: str
) -> None:
    """A code set without an abort ends the call with that status on the three bindings (a unary call with no
    response, a stream after its events), and the done callbacks see it."""
    probe = Probe()
    async with (
        serving(tmp_path, BASE_CARD, [probe]) as server,
        asyncio.timeout(TEST_SECONDS),
        aiohttp.ClientSession() as session,
        grpc.aio.insecure_channel(server.grpc_target) as channel,
    ):
        callers = Callers(server, session, channel)
        outcomes = {b: await callers.call(b, method, send(), (*V1, ("x-deny", deny))) for b in BINDINGS}
        await until(lambda: len(probe.ended) == len(BINDINGS))
    code = grpc.StatusCode.PERMISSION_DENIED if deny == "yes" else None
    details = "denied by the probe" if deny == "yes" else ""
    assert probe.seen == [(None, None, None, "", False, False)] * len(BINDINGS)
    assert probe.ended == [(True, code, details)] * len(BINDINGS)
    rest = outcomes["http+json"]
    if deny == "no":
        assert [outcome.reason for outcome in outcomes.values()] == [""] * len(BINDINGS)
    elif method == "SendMessage":
        assert [outcome.status for outcome in (outcomes["grpc"], rest)] == ["PERMISSION_DENIED"] * 2
        assert (rest.http_status, outcomes["jsonrpc"].http_status) == (403, 403)
    else:  # the events, then the status: gRPC's, HTTP+JSON's `event: error`, JSON-RPC's last answer
        assert outcomes["grpc"].status == "PERMISSION_DENIED" and "task" in rest.answer[0]
        assert "PERMISSION_DENIED" in (rest.status, rest.answer[-1].get("error", {}).get("status"))
        assert outcomes["jsonrpc"].jsonrpc_code == -32000


async def test_a_users_interceptor_reads_the_client_certificates_identity_as_grpc_names_it(tmp_path: Path) -> None:
    pki = Pki(tmp_path / "pki")
    issued, alice = pki.server("server"), pki.client("alice")
    probe = Probe()
    credentials = ClientTLS(pki.ca_file, alice.cert, alice.key).channel_credentials()
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    context.load_cert_chain(str(alice.cert), str(alice.key))
    tls = {"tls_cert": str(issued.cert), "tls_key": str(issued.key), "tls_client_ca": str(pki.ca_file)}
    async with (
        serving(tmp_path, MTLS_CARD, [probe], **tls) as server,
        asyncio.timeout(TEST_SECONDS),
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        grpc.aio.secure_channel(server.grpc_target, credentials) as channel,
    ):
        callers = Callers(server, session, channel)
        callers.base = f"https://{server.http_target}"
        outcomes = [(await callers.call(b, "SendMessage", send(), V1)).reason for b in BINDINGS]
    assert outcomes == [""] * len(BINDINGS)
    identity = ("x509_subject_alternative_name", [b"spiffe://test.example/alice"])
    assert [(seen[0], list(seen[1] or ())) for seen in probe.seen] == [identity] * len(BINDINGS)
