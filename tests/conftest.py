"""Shared fixtures: a real server on 127.0.0.1 (port 0), real channels and generated stubs."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.push.service import PushSettings
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import MemoryStore, PostgresStore, SqliteStore, TaskStore
from a2a_grpc.testing import AgentTestServer
from bench.pg_cluster import PgCluster, PostgresUnavailable, fresh_database, start_cluster

if TYPE_CHECKING:
    from rpc_helpers import Clients

V1: tuple[tuple[str, str], ...] = (("a2a-version", "1.0"),)

BASE_CARD: dict[str, Any] = {
    "name": "test agent",
    "description": "An agent for tests.",
    "version": "1.0.0",
    "capabilities": {"streaming": True, "pushNotifications": True},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [{"id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["echo"]}],
}

StartServer = Callable[..., Awaitable[A2AServer]]

# Test servers may push to webhooks on this machine only, and tests that never read their notifications
# point configs at DEAD_HOOK: a loopback port nothing listens on, so no test sends anything elsewhere.
LOOPBACK_PUSH = PushSettings(allow=("127.0.0.1",), allow_http=True)
DEAD_HOOK = "http://127.0.0.1:9/hook"


@pytest.fixture
async def start_server() -> AsyncIterator[StartServer]:
    """Start servers on free loopback ports (a2a_grpc.testing.AgentTestServer); all are stopped after the test.

    `card` is a dict (ProtoJSON), `agent` an executor instance, `store_url` a store URL (memory by default);
    any other keyword is a ServerSettings field.
    """
    async with contextlib.AsyncExitStack() as servers:

        async def start(
            *,
            card: dict[str, Any] | None = None,
            agent: AgentExecutor | None = None,
            store_url: str = "memory",
            **settings: Any,
        ) -> A2AServer:
            settings.setdefault("push", LOOPBACK_PUSH)
            # tests of refusals send many bad credentials in a row: the throttle on failed authentication is
            # tested on its own (test_limits.py)
            settings.setdefault("max_auth_failures_per_second", 0)
            settings.setdefault("http_listen", "127.0.0.1:0")
            served = AgentTestServer(
                agent,
                card=card if card is not None else BASE_CARD,
                settings=ServerSettings(**settings),
                store=store_url,
                grace_seconds=0,
            )
            return (await servers.enter_async_context(served)).server

        yield start


@pytest.fixture
async def server(start_server: StartServer) -> A2AServer:
    return await start_server()


@pytest.fixture
async def channel(server: A2AServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield channel


@pytest.fixture
def stub(channel: grpc.aio.Channel) -> a2a_pb2_grpc.A2AServiceStub:
    return a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


@pytest.fixture
async def clients(start_server: StartServer) -> AsyncIterator[Clients]:
    """Channels a test opens to its servers (`clients.stub(server)`), closed before the servers stop."""
    from rpc_helpers import Clients  # rpc_helpers imports this module

    opened = Clients()
    yield opened
    await opened.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """Base URL of a real PostgreSQL: $A2A_GRPC_TEST_POSTGRES_URL, else a throwaway cluster (bench/pg_cluster.py).

    Without the server binaries the tests that use it fail, naming what is missing (scripts/test installs it).
    """
    if url := os.environ.get("A2A_GRPC_TEST_POSTGRES_URL"):
        yield url
        return
    cluster = started_cluster()
    try:
        yield cluster.url
    finally:
        cluster.stop()


def started_cluster() -> PgCluster:
    """A throwaway PostgreSQL cluster; without the server binaries the test fails (postgres_missing)."""
    try:
        return start_cluster()
    except PostgresUnavailable as unavailable:
        postgres_missing(str(unavailable))
        raise


def postgres_missing(why: str) -> NoReturn:
    """Fail the test for want of PostgreSQL: a skipped test proves nothing."""
    pytest.fail(f"{why} (scripts/test installs Debian's postgresql)", pytrace=False)


@pytest.fixture
async def postgres_url(postgres_server: str) -> AsyncIterator[str]:
    """URL of a fresh empty database on `postgres_server`, dropped after the test (best effort)."""
    async with fresh_database(postgres_server) as url:
        yield url


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def unopened_store(request: pytest.FixtureRequest, tmp_path: Path) -> TaskStore:
    """Each store, not opened yet (the shared store suites run on all three). Synchronous, so that it can ask for the (async) `postgres_url` fixture only when needed."""
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SqliteStore(tmp_path / "d" / "t.db")
    return PostgresStore(request.getfixturevalue("postgres_url"))


@pytest.fixture
async def store(unopened_store: TaskStore) -> AsyncIterator[TaskStore]:
    opened = unopened_store
    await opened.open()
    yield opened
    await opened.close()


def user_message(text: str = "hello", **fields: Any) -> a2a_pb2.Message:
    fields.setdefault("message_id", f"m-{abs(hash(text)) % 10**8}")
    return a2a_pb2.Message(role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)], **fields)


def send_request(text: str = "hello", **fields: Any) -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(message=user_message(text), **fields)


def rich_status(error: grpc.aio.AioRpcError) -> status_pb2.Status:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status()
            status.ParseFromString(value)
            return status
    raise AssertionError(f"no rich status in {error!r}")


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    for detail in rich_status(error).details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    raise AssertionError(f"no ErrorInfo in {error!r}")


def bad_request(error: grpc.aio.AioRpcError) -> error_details_pb2.BadRequest:
    for detail in rich_status(error).details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            found = error_details_pb2.BadRequest()
            detail.Unpack(found)
            return found
    raise AssertionError(f"no BadRequest in {error!r}")
