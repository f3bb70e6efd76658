"""The HTTP port holds no connection for ever: one that sends its request head too slowly is closed, and past
the cap of open connections a new one is closed at once, while requests that come whole are served."""

from __future__ import annotations

import asyncio

from conftest import StartServer

from a2a_grpc.protocol import AGENT_CARD_PATH
from a2a_grpc.server import A2AServer

WAIT_SECONDS = 30.0  # an upper bound for what the server does by itself, never a measure of its speed
PARTIAL_HEAD = b"GET " + AGENT_CARD_PATH.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"


async def connect(server: A2AServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.http_port)


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True once the server ends the connection (EOF or a reset), within WAIT_SECONDS."""
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            return await reader.read(1) == b""
    except ConnectionResetError:
        return True


async def card_status(server: A2AServer) -> int:
    reader, writer = await connect(server)
    writer.write(PARTIAL_HEAD + b"Connection: close\r\n\r\n")
    status_line = await asyncio.wait_for(reader.readline(), WAIT_SECONDS)
    writer.close()
    return int(status_line.split()[1])


async def test_a_request_head_that_never_ends_is_closed(start_server: StartServer) -> None:
    server = await start_server(http_head_seconds=0.3)
    reader, writer = await connect(server)
    writer.write(PARTIAL_HEAD)  # and never the blank line that ends it
    await writer.drain()
    assert await closed_by_server(reader)
    writer.close()
    assert await card_status(server) == 200


async def test_an_idle_connection_is_closed(start_server: StartServer) -> None:
    server = await start_server(http_head_seconds=0.3)
    reader, writer = await connect(server)
    assert await closed_by_server(reader)
    writer.close()


async def test_past_the_cap_a_new_connection_is_closed_at_once_and_the_port_recovers(start_server: StartServer) -> None:
    # a head deadline past the test's wait: only the cap can close the fourth connection in time
    server = await start_server(http_max_connections=3, http_head_seconds=WAIT_SECONDS * 4)
    held = [await connect(server) for _ in range(3)]
    for _, writer in held:
        writer.write(PARTIAL_HEAD)
        await writer.drain()
    reader, writer = await connect(server)
    assert await closed_by_server(reader), "a fourth connection is refused while three are open"
    writer.close()
    for _, held_writer in held:
        held_writer.close()
        await held_writer.wait_closed()
    assert await card_status(server) == 200
