"""Health that means ready: grpc.health.v1 says SERVING ("" and the A2A service) only once the store is open
and migrated, not while the store cannot be reached (checked every readiness interval) or is full, and not
while draining; the `liveness` service stays SERVING while the process answers, whatever the store does."""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from agents import PacedAgent
from conftest import V1, StartServer, send_request, started_cluster
from grpc_health.v1 import health_pb2, health_pb2_grpc
from process import free_port
from rpc_helpers import TEST_SECONDS, make_stub

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import SERVICE_NAME
from a2a_grpc.server import LIVENESS_SERVICE, A2AServer, ServerSettings
from a2a_grpc.store import MemoryStore, SqliteStore, StoreError
from a2a_grpc.testing import AgentTestServer
from bench.pg_cluster import PgCluster

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
READY = [SERVING, SERVING]
NOT_READY = [NOT_SERVING, NOT_SERVING]
FAST_PROBES: dict[str, Any] = {"readiness_interval_seconds": 0.05, "readiness_timeout_seconds": 0.5}
FLIP_SECONDS = 10.0  # the bound on health following the store (the probes run every 0.05 s)
BIG = "x" * 20_000  # needs pages of its own: more than a store capped at the pages in use has


class FlakyStore(MemoryStore):
    """A memory store whose readiness check fails (`down`) or hangs (`hang`) on demand; counts the checks.
    `opened` gates `open()`, as a long migration would."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.hang = False
        self.pings = 0
        self.opened = asyncio.Event()
        self.opened.set()

    async def open(self) -> None:
        await self.opened.wait()
        await super().open()

    async def ping(self) -> None:
        self.pings += 1
        if self.hang:
            await asyncio.Event().wait()  # never answers: the readiness timeout ends it
        if self.down:
            raise StoreError("the task store is unreachable: connection refused")


async def health(channel: grpc.aio.Channel, services: tuple[str, ...] = ("", SERVICE_NAME)) -> list[int]:
    check = health_pb2_grpc.HealthStub(channel).Check
    return [(await check(health_pb2.HealthCheckRequest(service=s), timeout=5)).status for s in services]


async def wait_for_health(channel: grpc.aio.Channel, wanted: list[int], seconds: float = FLIP_SECONDS) -> None:
    async with asyncio.timeout(seconds):
        while True:  # polled: Check is what a probe asks
            if await health(channel) == wanted:
                return
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def serving(store: MemoryStore, **settings: Any) -> AsyncIterator[A2AServer]:
    chosen = ServerSettings(http_listen="", **settings)
    async with AgentTestServer(None, settings=chosen, store=store, grace_seconds=0) as served:
        yield served.server


async def test_nothing_answers_serving_before_the_store_is_open_and_migrated() -> None:
    async with asyncio.timeout(TEST_SECONDS):
        store = FlakyStore()
        store.opened.clear()
        target = f"127.0.0.1:{free_port()}"
        server = A2AServer(ServerSettings(listen=target, http_listen="", **FAST_PROBES), store=store)
        starting = asyncio.create_task(server.start())
        try:
            for _ in range(5):  # the port is not even bound while the store opens: every probe fails
                async with grpc.aio.insecure_channel(target) as channel:
                    with pytest.raises(grpc.aio.AioRpcError) as refused:
                        await health(channel)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
                assert not server.ready
                await asyncio.sleep(0.05)
            store.opened.set()
            await starting
            assert server.ready
            # a channel of its own subchannels: the shared ones wait out a reconnect backoff after the refusals
            async with grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
                assert await health(channel, ("", SERVICE_NAME, LIVENESS_SERVICE)) == [SERVING] * 3
        finally:
            store.opened.set()
            await starting
            await server.stop(0)


async def test_readiness_is_not_serving_while_the_store_fails_or_hangs_and_recovers_by_itself() -> None:
    async with asyncio.timeout(TEST_SECONDS):
        store = FlakyStore()
        async with serving(store, **FAST_PROBES) as server, grpc.aio.insecure_channel(server.grpc_target) as channel:
            assert await health(channel) == READY

            store.down = True
            await wait_for_health(channel, NOT_READY)
            assert await health(channel, (LIVENESS_SERVICE,)) == [SERVING]  # no restart for a store outage
            store.down = False
            await wait_for_health(channel, READY)

            store.hang = True  # a store that never answers is bounded by the readiness timeout
            await wait_for_health(channel, NOT_READY)
            store.hang = False
            await wait_for_health(channel, READY)
            assert store.pings >= 4  # down, up, hung, up


async def test_a_full_store_stays_not_serving_although_it_answers_the_readiness_check(
    start_server: StartServer, tmp_path: Path
) -> None:
    async with asyncio.timeout(TEST_SECONDS):
        server = await start_server(store_url=f"sqlite:///{tmp_path / 'tasks.db'}", **FAST_PROBES)
        store = server.store
        assert isinstance(store, SqliteStore)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            await store.set_max_pages(1)  # below the pages in use: no room for a write
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.SendMessage(send_request(BIG), metadata=V1)
            await wait_for_health(channel, NOT_READY)
            await asyncio.sleep(0.5)  # ten readiness checks, each answered
            assert await health(channel) == NOT_READY

            await store.set_max_pages(1_000_000)
            await stub.SendMessage(send_request(BIG), metadata=V1)  # the first write that succeeds again
            await wait_for_health(channel, READY)


async def test_draining_stays_not_serving_and_stops_the_readiness_checks() -> None:
    async with asyncio.timeout(TEST_SECONDS):
        store, agent = FlakyStore(), PacedAgent(chunks=0)
        settings = ServerSettings(listen="127.0.0.1:0", http_listen="", **FAST_PROBES)
        server = A2AServer(settings, agent=agent, store=store)
        await server.start()
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))
            assert (await watch.read()).status == SERVING
            in_flight = asyncio.ensure_future(make_stub(channel).SendMessage(send_request("slow"), metadata=V1))
            await agent.started.wait()
            stopping = asyncio.create_task(server.stop(5))
            assert (await watch.read()).status == NOT_SERVING
            pings = store.pings
            await asyncio.sleep(0.3)  # six readiness intervals: no check runs, nothing turns SERVING
            assert store.pings == pings
            assert not server.ready
            agent.finish()
            assert (await in_flight).task.status.state == a2a_pb2.TASK_STATE_COMPLETED
            watch.cancel()  # a call in flight too: the drain would wait for it
            await stopping


async def test_the_stores_answer_the_readiness_check_while_open(tmp_path: Path) -> None:
    memory = MemoryStore()
    await memory.ping()
    sqlite = SqliteStore(tmp_path / "tasks.db")
    with pytest.raises(StoreError):
        await sqlite.ping()
    await sqlite.open()
    await sqlite.ping()
    await sqlite.close()
    with pytest.raises(StoreError):
        await sqlite.ping()


# -- PostgreSQL going away and coming back -----------------------------------------------------------


@pytest.fixture
def own_cluster() -> Iterator[PgCluster]:
    """A throwaway cluster of this test's own (the shared `postgres_server` must never be stopped); failed
    without PostgreSQL like the other PostgreSQL tests."""
    cluster = started_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


def stop_postgres(cluster: PgCluster) -> None:
    pg_ctl = [str(cluster.bindir / "pg_ctl"), "stop", "-D", str(cluster.data), "-m", "fast", "-w", "-t", "30"]
    cluster._run(pg_ctl, "pg_ctl stop")


def start_postgres_again(cluster: PgCluster) -> None:
    """Start the stopped server on the port it had, with the settings PgCluster.start gave it."""
    settings = {
        "listen_addresses": "127.0.0.1",
        "port": str(cluster.port),
        "unix_socket_directories": str(cluster.root),
        **cluster.settings,
    }
    options = " ".join(f"-c {shlex.quote(f'{key}={value}')}" for key, value in settings.items())
    pg_ctl = [str(cluster.bindir / "pg_ctl"), "start", "-D", str(cluster.data), "-l", str(cluster.log)]
    cluster._run([*pg_ctl, "-w", "-t", "30", "-o", options], "pg_ctl start")


async def test_readiness_follows_postgresql_going_away_and_coming_back(
    own_cluster: PgCluster, start_server: StartServer
) -> None:  # in this order: the server stops before its cluster does
    async with asyncio.timeout(90):
        server = await start_server(store_url=own_cluster.url, **FAST_PROBES)
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            assert await health(channel) == READY
            await stub.SendMessage(send_request("before"), metadata=V1)

            await asyncio.to_thread(stop_postgres, own_cluster)  # the server's loop runs on meanwhile
            await wait_for_health(channel, NOT_READY)
            assert await health(channel, (LIVENESS_SERVICE,)) == [SERVING]

            await asyncio.to_thread(start_postgres_again, own_cluster)
            await wait_for_health(channel, READY, seconds=30)
            task = (await stub.SendMessage(send_request("after"), metadata=V1)).task
            assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
