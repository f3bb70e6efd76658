"""Issue 33, item 3: the server as a library. `async with A2AServer(settings) as server:` starts it (its bound
ports readable on the value), stops it at the end, and a start that fails half way is undone before the error
reaches the caller."""

from __future__ import annotations

import asyncio
import signal
import socket

import pytest

from a2a_grpc.client import A2AClient
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer, ServerSettings, serve_until_signalled


def refused(port: int) -> bool:
    """Whether a connection to the loopback `port` is refused: nothing listens there."""
    try:
        socket.create_connection(("127.0.0.1", port)).close()
    except ConnectionRefusedError:
        return True
    return False


async def test_async_with_serves_on_the_bound_ports_and_closes_them_at_exit() -> None:
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="127.0.0.1:0", store_url="memory")
    async with A2AServer(settings) as server:
        assert server.port != 0 and server.http_port != 0
        assert server.grpc_target == f"127.0.0.1:{server.port}"
        async with await A2AClient.connect(f"http://{server.http_target}") as client:  # the card names the gRPC port
            assert client.target == server.grpc_target
            result = await client.send_message("hello")
        assert result.value.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert server.ready
    assert not server.ready
    assert refused(server.port) and refused(server.http_port)


async def test_async_with_a_start_failing_half_way_releases_the_grpc_port_and_raises() -> None:
    """The HTTP port, bound after the gRPC port, is taken: the error names it, and what had started is undone."""
    tasks_before = asyncio.all_tasks()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        server = A2AServer(ServerSettings(listen="127.0.0.1:0", http_listen=f"127.0.0.1:{taken}", store_url="memory"))
        with pytest.raises(OSError, match=f"cannot serve the agent card on 127.0.0.1:{taken}: "):
            async with server:
                pytest.fail("the body runs only once the server started")
    assert server.port != 0, "the gRPC port was bound before the HTTP port failed"
    assert refused(server.port)
    assert [task.get_name() for task in asyncio.all_tasks() - tasks_before] == []


async def test_serve_until_signalled_gives_the_signals_back_when_it_returns() -> None:
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", store_url="memory")
    stop = asyncio.Event()
    await serve_until_signalled(A2AServer(settings), stop, started=stop.set)
    loop = asyncio.get_running_loop()
    assert [loop.remove_signal_handler(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)] == [False] * 3
