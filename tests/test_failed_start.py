"""Issue 29, finding 11: a start that fails undoes all it started. `A2AServer.start()` with its gRPC port taken once
raised after opening the store and starting the task manager, and `stop()` then returned at once, leaving the
SQLite store's writer and reader threads and the event-log pruner running."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from a2a_grpc.server import A2AServer, ServerSettings

STORE_THREADS = ("sqlite-store-writer", "sqlite-store-reader")
SERVER_TASKS = ("event-log-pruner", "a2a-grpc-store-readiness")
THREAD_END_SECONDS = 10.0


@contextmanager
def taken_port() -> Iterator[int]:
    """A loopback port another socket listens on meanwhile."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def store_threads(before: set[threading.Thread]) -> list[str]:
    """The store threads started since `before` that are still alive, once each had its time to end."""
    started = [
        thread for thread in threading.enumerate() if thread not in before and thread.name.startswith(STORE_THREADS)
    ]
    for thread in started:
        thread.join(THREAD_END_SECONDS)
    return [thread.name for thread in started if thread.is_alive()]


def server_tasks(before: set[asyncio.Task[object]]) -> list[str]:
    return [task.get_name() for task in asyncio.all_tasks() - before if task.get_name() in SERVER_TASKS]


async def failed_start(tmp_path: Path, listen: str, http_listen: str) -> tuple[A2AServer, OSError]:
    server = A2AServer(
        ServerSettings(listen=listen, http_listen=http_listen, store_url=f"sqlite:///{tmp_path / 'tasks.db'}")
    )
    with pytest.raises(OSError) as failed:
        await server.start()
    return server, failed.value


@pytest.mark.parametrize("taken", ["grpc", "http"])
async def test_failed_start_with_a_port_taken_leaves_no_thread_or_task(tmp_path: Path, taken: str) -> None:
    threads_before = set(threading.enumerate())
    tasks_before = asyncio.all_tasks()
    with taken_port() as port:
        ports = {"grpc": "127.0.0.1:0", "http": "127.0.0.1:0", taken: f"127.0.0.1:{port}"}
        server, error = await failed_start(tmp_path, ports["grpc"], ports["http"])
    assert f"127.0.0.1:{port}" in str(error)
    assert store_threads(threads_before) == []
    assert server_tasks(tasks_before) == []
    await server.stop()  # harmless: there is nothing to stop
    assert server_tasks(tasks_before) == []


async def test_failed_start_frees_the_store_and_the_port_for_the_next_start(tmp_path: Path) -> None:
    with taken_port() as port:
        await failed_start(tmp_path, f"127.0.0.1:{port}", "127.0.0.1:0")
    server = A2AServer(
        ServerSettings(listen="127.0.0.1:0", http_listen="127.0.0.1:0", store_url=f"sqlite:///{tmp_path / 'tasks.db'}")
    )
    await server.start()
    try:
        assert server.ready
    finally:
        await server.stop(0)


async def test_failed_start_closes_the_connection_front(tmp_path: Path) -> None:
    """With --max-connections-per-address the server's own front binds the gRPC port: a start that fails after
    (the HTTP port taken) leaves that port free."""
    with taken_port() as port:
        server = A2AServer(
            ServerSettings(
                listen="127.0.0.1:0",
                http_listen=f"127.0.0.1:{port}",
                store_url=f"sqlite:///{tmp_path / 'tasks.db'}",
                max_connections_per_address=4,
            )
        )
        with pytest.raises(OSError):
            await server.start()
    assert server.port != 0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", server.port))  # EADDRINUSE while the front still listens


async def test_failed_start_releases_the_grpc_port_it_had_bound(tmp_path: Path) -> None:
    """grpc core listens on a port from the moment it is added, and a server stopped without having been started
    keeps listening: a start that failed at the HTTP port once left the gRPC port accepting connections that
    nothing would ever serve, until the process ended."""
    with taken_port() as port:
        server, _ = await failed_start(tmp_path, "127.0.0.1:0", f"127.0.0.1:{port}")
    assert server.port != 0, "the gRPC port is bound before the HTTP port"
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port)).close()
