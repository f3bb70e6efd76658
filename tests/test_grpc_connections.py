"""Issue 29, finding 4: the gRPC port bounds its connections (a2a_grpc.connections, a2a_grpc.connection_front),
tested with real sockets on loopback: one past `max_connections`, or past `max_connections_per_address` from one
address, is closed as soon as it is accepted, a connection silent past `handshake_seconds` is closed, and one
that spoke HTTP/2 but makes no call is closed after `connection_idle_seconds`."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import socket
from pathlib import Path

import grpc
import pytest
from conftest import V1, StartServer
from process import SERVE, http_get, send_text, serve_process
from rpc_helpers import make_stub, rpc_error

from a2a_grpc.connection_front import PEERS as FRONT_PEERS
from a2a_grpc.connections import connection_options, default_max_connections
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer
from a2a_grpc.telemetry.access_log import ACCESS_LOGGER
from a2a_grpc.telemetry.logs import JsonFormatter

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_FRAME = 0x04
GOAWAY_FRAME = 0x07
OTHER_ADDRESS = "127.0.0.2"  # loopback too, another address
OPEN_FILES = 256
SILENT_CONNECTIONS = 300
WAIT_SECONDS = 20.0  # a guard against a hang, never reached when the server keeps its bounds

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connect(server: A2AServer, source: str | None = None) -> Connection:
    host, _, port = server.grpc_target.rpartition(":")
    return await asyncio.open_connection(host, int(port), local_addr=(source, 0) if source else None)


async def frame_types_until_closed(reader: asyncio.StreamReader) -> list[int]:
    """The types of the HTTP/2 frames the server sends until it closes the connection."""
    received = b""
    async with asyncio.timeout(WAIT_SECONDS):
        while chunk := await reader.read(4096):
            received += chunk
    types = []
    while len(received) >= 9:
        length = int.from_bytes(received[:3], "big")
        types.append(received[3])
        received = received[9 + length :]
    return types


async def test_finding_4_a_connection_past_the_cap_is_closed_at_once(start_server: StartServer) -> None:
    server = await start_server(max_connections=5, handshake_seconds=WAIT_SECONDS * 2)
    silent = [await connect(server) for _ in range(5)]
    for reader, _ in silent:  # each of the five is served: the server's SETTINGS comes at once
        head = await asyncio.wait_for(reader.readexactly(9), WAIT_SECONDS)
        assert head[3] == SETTINGS_FRAME
    sixth, _ = await connect(server)
    assert await frame_types_until_closed(sixth) == []  # closed before a byte of HTTP/2
    for _, writer in silent:
        writer.close()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:  # the slots are free again
        request = a2a_pb2.GetTaskRequest(id="no-such-task")
        error = await rpc_error(make_stub(channel).GetTask(request, metadata=V1, wait_for_ready=True))
    assert error.code() == grpc.StatusCode.NOT_FOUND


async def test_finding_4_a_silent_connection_is_closed_after_the_handshake_deadline(start_server: StartServer) -> None:
    server = await start_server(handshake_seconds=0.2)
    reader, writer = await connect(server)
    assert (await frame_types_until_closed(reader))[0] == SETTINGS_FRAME
    half_preface_reader, half_preface = await connect(server)
    half_preface.write(PREFACE[:10])
    assert (await frame_types_until_closed(half_preface_reader))[0] == SETTINGS_FRAME
    writer.close()
    half_preface.close()


async def test_finding_4_a_connection_without_calls_is_closed_after_the_idle_seconds(start_server: StartServer) -> None:
    server = await start_server(connection_idle_seconds=0.2)
    reader, writer = await connect(server)
    writer.write(PREFACE + EMPTY_SETTINGS)
    types = await frame_types_until_closed(reader)
    assert types[0] == SETTINGS_FRAME and types[-1] == GOAWAY_FRAME, types
    writer.close()


def test_finding_4_the_connection_cap_leaves_the_http_port_its_files() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY:
        assert default_max_connections(512) == max(soft // 4, (soft - 512) // 2)
        assert default_max_connections(512, files_each=3) == max(soft // 4, (soft - 512) // 2) // 3
    options = dict(connection_options(100, 10.0, 0.0))
    assert options == {"grpc.max_allowed_incoming_connections": 100, "grpc.server_handshake_timeout_ms": 10_000}


async def test_finding_4_an_address_past_its_cap_is_closed_at_once_and_other_addresses_are_served(
    start_server: StartServer,
) -> None:
    server = await start_server(max_connections_per_address=5, handshake_seconds=WAIT_SECONDS * 2)
    silent = [await connect(server) for _ in range(5)]
    for reader, _ in silent:
        head = await asyncio.wait_for(reader.readexactly(9), WAIT_SECONDS)
        assert head[3] == SETTINGS_FRAME
    sixth, _ = await connect(server)
    assert await frame_types_until_closed(sixth) == []
    other_reader, other = await connect(server, source=OTHER_ADDRESS)  # another address has its own five
    head = await asyncio.wait_for(other_reader.readexactly(9), WAIT_SECONDS)
    assert head[3] == SETTINGS_FRAME
    for _, writer in [*silent, (other_reader, other)]:
        writer.close()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:  # the address's slots are free again
        request = a2a_pb2.GetTaskRequest(id="no-such-task")
        error = await rpc_error(make_stub(channel).GetTask(request, metadata=V1, wait_for_ready=True))
    assert error.code() == grpc.StatusCode.NOT_FOUND


async def test_finding_4_behind_the_per_address_cap_the_chain_sees_each_callers_own_peer(
    start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The server accepts for grpc and relays on loopback: the access log (and the limits, which read the same
    Arrival) still name the caller's own address and port, not the relay's connection to grpc."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    server = await start_server(max_connections_per_address=5)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        await rpc_error(make_stub(channel).GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), metadata=V1))
        [record] = [record for record in caplog.records if record.name == ACCESS_LOGGER]
        peer = json.loads(JsonFormatter().format(record))["peer"]
        assert peer in FRONT_PEERS.values() and peer not in FRONT_PEERS, (peer, FRONT_PEERS)
    assert peer.startswith("ipv4:127.0.0.1:")


def test_finding_4_silent_connections_past_the_open_file_limit_leave_both_ports_serving(tmp_path: Path) -> None:
    """A server limited to 256 files (grpc's cap then 64 connections) and 300 silent connections: the card is
    still served while they are open, each is closed within the handshake deadline, gRPC calls are served again
    after it, and grpc core never ran out of file descriptors."""
    limited = ("sh", "-c", f'ulimit -n {OPEN_FILES} && exec "$@"', "sh", *SERVE)
    with serve_process(tmp_path, "--handshake-seconds", "1", command=limited) as server:
        host, _, port = server.grpc_target.rpartition(":")
        silent = [socket.create_connection((host, int(port))) for _ in range(SILENT_CONNECTIONS)]
        assert http_get(server.card_url).status == 200
        for connection in silent:
            connection.settimeout(WAIT_SECONDS)
            while connection.recv(4096):  # the server's SETTINGS, for the 64 it kept; then the end
                pass
            connection.close()
        assert send_text(server.grpc_target, "hello").status.state == a2a_pb2.TASK_STATE_COMPLETED
        server.kill()
        assert "File descriptor limit" not in server.stderr, server.stderr[-2000:]


def test_finding_4_serve_caps_connections_per_address(tmp_path: Path) -> None:
    """`serve --max-connections-per-address 3` (on uvloop, as serve runs): calls are served through the cap, and
    the fourth connection of an address that holds three is closed at once."""
    with serve_process(tmp_path, "--max-connections-per-address", "3", "--handshake-seconds", "60") as server:
        assert send_text(server.grpc_target, "hello").status.state == a2a_pb2.TASK_STATE_COMPLETED
        host, _, port = server.grpc_target.rpartition(":")
        source = (OTHER_ADDRESS, 0)  # an address the call's connection (closing now) never counted against
        held = [socket.create_connection((host, int(port)), WAIT_SECONDS, source) for _ in range(3)]
        for connection in held:
            assert connection.recv(9)[3] == SETTINGS_FRAME
        with socket.create_connection((host, int(port)), WAIT_SECONDS, source) as fourth:
            assert fourth.recv(4096) == b""
        for connection in held:
            connection.close()
