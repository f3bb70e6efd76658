"""The HTTP faces on an HTTPS port with client certificates: a caller's mutual-TLS identity is the one its gRPC
calls have (the principal the certificate names, read from the TLS connection as grpc's auth context names it),
so the tasks it made over one binding are its own over the others."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
import grpc
from certs import Pki
from conftest import BASE_CARD, StartServer, user_message

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.tls import ClientTLS

CARD: dict[str, Any] = {
    **BASE_CARD,
    "securitySchemes": {"cert": {"mtlsSecurityScheme": {}}},
    "securityRequirements": [{"schemes": {"cert": {}}}],
}
V1 = {"a2a-version": "1.0"}


def client_context(pki: Pki, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_file))
    issued = pki.client(name)
    context.load_cert_chain(str(issued.cert), str(issued.key))
    return context


async def test_a_client_certificate_is_the_same_caller_over_grpc_and_the_http_faces(
    start_server: StartServer, tmp_path: Path
) -> None:
    pki = Pki(tmp_path / "pki")
    issued = pki.server("server")
    server = await start_server(
        card=CARD, tls_cert=str(issued.cert), tls_key=str(issued.key), tls_client_ca=str(pki.ca_file)
    )
    alice = pki.client("alice")
    credentials = ClientTLS(pki.ca_file, alice.cert, alice.key).channel_credentials()
    async with grpc.aio.secure_channel(server.grpc_target, credentials) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        sent = await stub.SendMessage(
            a2a_pb2.SendMessageRequest(message=user_message("hi")), metadata=tuple(V1.items())
        )
    base = f"https://{server.http_target}"
    for name, owns in (("alice", True), ("bob", False)):
        connector = aiohttp.TCPConnector(ssl=client_context(pki, name))
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.get(f"{base}/tasks/{sent.task.id}", headers=V1) as reply:
                assert (reply.status == 200) is owns, (name, await reply.text())
            rpc = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
            async with session.post(base + "/", json=rpc, headers=V1) as reply:
                listed = (await reply.json())["result"].get("tasks", [])
            assert ([task["id"] for task in listed] == [sent.task.id]) is owns, name
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=str(pki.ca_file)))
    ) as session:
        try:
            async with session.get(f"{base}/tasks", headers=V1) as reply:
                refused: Any = reply.status
        except aiohttp.ClientError as error:  # the handshake itself refuses a client without a certificate
            refused = type(error).__name__
    assert refused != 200
