"""Which bindings are served: `--bindings` narrows the HTTP faces (gRPC always stays), the card lists what is
served and only that, and docs/bindings.md's route table is the one the proto's annotations give."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest
from conftest import BASE_CARD, StartServer

from a2a_grpc.faces.routes import route_table
from a2a_grpc.protocol import A2A_SERVICE
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.setting_types import bindings

REPO = Path(__file__).resolve().parent.parent
SEND = {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
V1 = {"a2a-version": "1.0"}


def test_docs_route_table_is_the_one_the_proto_annotations_give() -> None:
    document = (REPO / "docs" / "bindings.md").read_text()
    start = document.index("<!-- the route table")
    table = document[document.index("\n", start) + 1 : document.index("<!-- end of the route table")]
    assert table == route_table(A2A_SERVICE), "write it again from a2a_grpc.faces.routes.route_table"
    assert "| `SubscribeToTask` (SSE) | POST | `/tasks/{id=*}:subscribe` | body |" in table, "the spec's prose's verb"


@pytest.mark.parametrize(
    ("text", "served"),
    [
        ("grpc,jsonrpc,http+json", "grpc,jsonrpc,http+json"),
        ("http+json, JSONRPC", "grpc,jsonrpc,http+json"),
        ("jsonrpc", "grpc,jsonrpc"),
        ("grpc", "grpc"),
        ("", "grpc"),
    ],
)
def test_bindings_always_keep_grpc_in_one_order(text: str, served: str) -> None:
    assert bindings(text) == served


@pytest.mark.parametrize(
    ("served", "interfaces", "answers"),
    [
        ("grpc,http+json", ["GRPC", "GRPC", "HTTP+JSON"], {"/message:send": 200, "/": 404}),
        ("grpc,jsonrpc", ["GRPC", "GRPC", "JSONRPC"], {"/message:send": 404, "/": 200}),
        ("grpc", ["GRPC", "GRPC"], {"/message:send": 404, "/": 404}),
    ],
)
async def test_the_card_lists_the_served_bindings_and_only_they_answer(
    start_server: StartServer, served: str, interfaces: list[str], answers: dict[str, int]
) -> None:
    server = await start_server(bindings=served)
    base = f"http://{server.http_target}"
    async with aiohttp.ClientSession() as session:
        async with session.get(base + "/.well-known/agent-card.json") as reply:
            card = json.loads(await reply.text())
        assert [interface["protocolBinding"] for interface in card["supportedInterfaces"]] == interfaces
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": SEND}
        for path, status in answers.items():
            async with session.post(base + path, json=rpc if path == "/" else SEND, headers=V1) as reply:
                assert reply.status == status, (served, path, await reply.text())


async def test_without_the_http_port_the_card_lists_no_http_binding_even_its_own(tmp_path: Path) -> None:
    own = {"url": "https://agent.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    card = tmp_path / "card.json"
    card.write_text(json.dumps({**BASE_CARD, "supportedInterfaces": [own]}))
    server = A2AServer(ServerSettings(listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url="memory"))
    await server.start()
    try:
        assert [interface.protocol_binding for interface in server.card.supported_interfaces] == ["GRPC", "GRPC"]
    finally:
        await server.stop(0)
