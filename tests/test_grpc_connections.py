"""Issue 29, finding 4: the gRPC port bounds its connections (a2a_grpc.connections), tested with real sockets on
127.0.0.1: one past `max_connections` is closed as soon as it is accepted, a connection silent past
`handshake_seconds` is closed, and one that spoke HTTP/2 but makes no call is closed after `connection_idle_seconds`."""

from __future__ import annotations

import asyncio
import resource
import socket
from pathlib import Path

import grpc
from conftest import V1, StartServer
from process import SERVE, http_get, send_text, serve_process
from rpc_helpers import make_stub, rpc_error

from a2a_grpc.connections import connection_options, default_max_connections
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_FRAME = 0x04
GOAWAY_FRAME = 0x07
OPEN_FILES = 256
SILENT_CONNECTIONS = 300
WAIT_SECONDS = 20.0  # a guard against a hang, never reached when the server keeps its bounds

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connect(server: A2AServer) -> Connection:
    host, _, port = server.grpc_target.rpartition(":")
    return await asyncio.open_connection(host, int(port))


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
    options = dict(connection_options(0, 10.0, 0.0, others=512))
    assert options == {
        "grpc.max_allowed_incoming_connections": default_max_connections(512),
        "grpc.server_handshake_timeout_ms": 10_000,
    }


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
