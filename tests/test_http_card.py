"""The agent card over HTTP from `a2a-grpc serve` in its own process: ProtoJSON naming the gRPC
interface, cache headers, conditional requests, custom cards, no card when --http-listen is empty."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from card_schema import card_schema_errors
from google.protobuf import json_format
from process import CARD, SERVING, Ports, ServerProcess, health_status, http_get, launch, serve_process

from a2a_grpc.generated import a2a_pb2

SERVING_LINE = re.compile(r"serving A2A on (\S+) \(card on http://(\S+?)/\.well-known/agent-card\.json\)")
JSONRPC_INTERFACE = {"url": "https://agent.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve_process(tmp_path_factory.mktemp("card-server")) as server:
        yield server


def write_card(tmp_path: Path, card: dict[str, Any]) -> str:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    return str(path)


def test_the_card_is_protojson_naming_the_grpc_interface_then_the_http_faces(demo_server: ServerProcess) -> None:
    reply = http_get(demo_server.card_url)
    assert reply.status == 200
    assert reply.headers.get_content_type() == "application/json"
    card = reply.json()
    assert card["name"] == "a2a-grpc demo agent"
    assert card["supportedInterfaces"] == [
        {"url": demo_server.grpc_target, "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": demo_server.grpc_target, "protocolBinding": "GRPC", "protocolVersion": "0.3"},
        {"url": f"http://{demo_server.ports.http_target}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": f"http://{demo_server.ports.http_target}", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ]
    assert "defaultInputModes" in card and "default_input_modes" not in card, "ProtoJSON names are camelCase"
    parsed = json_format.ParseDict(card, a2a_pb2.AgentCard())  # an unknown field would raise
    assert parsed.capabilities.streaming
    assert card_schema_errors(card) == [], "the spec's AgentCard schema: no 0.3 field merged in"


def test_the_card_carries_cache_control_and_a_strong_etag(demo_server: ServerProcess) -> None:
    reply = http_get(demo_server.card_url)
    assert re.fullmatch(r'"[^"]+"', reply.headers["ETag"] or ""), reply.headers["ETag"]
    assert re.search(r"max-age=\d+", reply.headers["Cache-Control"] or "")
    assert http_get(demo_server.card_url).headers["ETag"] == reply.headers["ETag"], "the same card, the same tag"


@pytest.mark.parametrize(
    "if_none_match",
    ["{etag}", "W/{etag}", '"something-else", {etag}', "*"],
    ids=["exact", "weak", "in-a-list", "star"],
)
def test_if_none_match_with_the_current_tag_is_not_modified(demo_server: ServerProcess, if_none_match: str) -> None:
    etag = http_get(demo_server.card_url).headers["ETag"] or ""
    reply = http_get(demo_server.card_url, {"If-None-Match": if_none_match.format(etag=etag)})
    assert reply.status == 304
    assert reply.body == b""
    assert reply.headers["ETag"] == etag
    assert reply.headers["Cache-Control"]


def test_if_none_match_with_another_tag_gets_the_card(demo_server: ServerProcess) -> None:
    reply = http_get(demo_server.card_url, {"If-None-Match": '"not-the-current-tag"'})
    assert reply.status == 200
    assert reply.json()["name"] == "a2a-grpc demo agent"


def test_head_answers_the_headers_without_the_card(demo_server: ServerProcess) -> None:
    reply = http_get(demo_server.card_url, method="HEAD")
    assert reply.status == 200
    assert reply.body == b""
    assert reply.headers["ETag"] == http_get(demo_server.card_url).headers["ETag"]


def test_other_paths_are_not_found(demo_server: ServerProcess) -> None:
    reply = http_get(demo_server.card_url.replace("agent-card.json", "agent.json"))
    assert reply.status == 404


def test_a_custom_card_gets_the_grpc_interface_from_listen_first_and_keeps_its_own_jsonrpc_one(tmp_path: Path) -> None:
    card = {**CARD, "supportedInterfaces": [JSONRPC_INTERFACE]}
    with serve_process(tmp_path, "--card", write_card(tmp_path, card)) as server:
        served = http_get(server.card_url).json()
    assert served["name"] == "card test agent"
    assert served["supportedInterfaces"] == [
        {"url": server.grpc_target, "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": server.grpc_target, "protocolBinding": "GRPC", "protocolVersion": "0.3"},
        JSONRPC_INTERFACE,
        {"url": f"http://{server.ports.http_target}", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
    ]
    assert "streaming" not in served["capabilities"] or served["capabilities"]["streaming"] is False


def test_a_grpc_interface_the_card_declares_is_kept_and_named_for_0_3_too(tmp_path: Path) -> None:
    declared = {"url": "agent.internal:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
    card_path = write_card(tmp_path, {**CARD, "supportedInterfaces": [declared]})
    with serve_process(tmp_path, "--card", card_path, "--v03-card") as server:
        served = http_get(server.card_url).json()
    http_json = {"url": f"http://{server.ports.http_target}", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    jsonrpc = {**http_json, "url": http_json["url"] + "/", "protocolBinding": "JSONRPC"}
    assert served["supportedInterfaces"] == [declared, {**declared, "protocolVersion": "0.3"}, jsonrpc, http_json]
    assert served["url"] == "agent.internal:443", "with --v03-card, what a 0.3 resolver reads"


def test_the_etag_survives_a_restart_and_follows_the_card(tmp_path: Path) -> None:
    ports = Ports.free()
    card_path = write_card(tmp_path, CARD)
    tags = []
    for run, card in enumerate([card_path, card_path, None]):
        card_args = ["--card", card] if card else []
        with serve_process(tmp_path / f"run-{run}", *card_args, ports=ports) as server:
            tags.append(http_get(server.card_url).headers["ETag"])
    assert tags[0] == tags[1], "a restart with the same card keeps caches valid"
    assert tags[2] != tags[0], "another card, another tag"


def test_an_empty_http_listen_serves_no_card_but_grpc(tmp_path: Path) -> None:
    ports = Ports.free()
    with serve_process(tmp_path, "--listen", ports.grpc_target, "--http-listen", "", ports=ports, ports_via="none"):
        assert health_status(ports.grpc_target) == SERVING
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", ports.http), timeout=5):
            pass


def test_listen_on_port_zero_advertises_the_bound_port(tmp_path: Path) -> None:
    server = launch(
        tmp_path, ["--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--store", "memory"], ports=Ports(0, 0)
    )
    try:
        grpc_target, http_target = wait_for_serving_line(server)
        assert grpc_target != "127.0.0.1:0" and not http_target.endswith(":0")
        assert health_status(grpc_target) == SERVING
        card = http_get(f"http://{http_target}/.well-known/agent-card.json").json()
        assert card["supportedInterfaces"][0]["url"] == grpc_target
    finally:
        server.kill()


def wait_for_serving_line(server: ServerProcess, timeout: float = 30.0) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = SERVING_LINE.search(server.stderr)
        if found:
            return found[1], found[2]
        assert server.process.poll() is None, server.stderr
        time.sleep(0.05)
    raise AssertionError(f"no serving line within {timeout}s:\n{server.stderr}")
