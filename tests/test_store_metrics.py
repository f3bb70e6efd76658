"""The durable stores report each group commit to `/metrics`: how long it took and how many task writes it
carried (`a2a_store_commit_seconds`, `a2a_store_commit_writes`). The memory store commits nothing and shows
neither."""

from __future__ import annotations

import asyncio
from pathlib import Path

from conftest import StartServer
from test_metrics import scrape, value

from a2a_grpc.client import A2AClient

SENDS = 20


async def send_concurrently(target: str) -> None:
    async with A2AClient(target) as client:
        await asyncio.gather(*(client.send_message(f"hello {n}") for n in range(SENDS)))


async def assert_commits_reported(start_server: StartServer, store_url: str) -> None:
    server = await start_server(store_url=store_url)
    await send_concurrently(server.grpc_target)
    samples = await scrape(server)
    commits = value(samples, "a2a_store_commit_seconds_count")
    writes = value(samples, "a2a_store_commit_writes_sum")
    assert 1 <= commits <= writes, (commits, writes)
    assert writes >= SENDS, "every task was written at least once"
    assert value(samples, "a2a_store_commit_seconds_sum") > 0
    assert value(samples, "a2a_store_commit_writes_count") == commits


async def test_sqlite_commits_are_measured(start_server: StartServer, tmp_path: Path) -> None:
    await assert_commits_reported(start_server, f"sqlite:///{tmp_path / 'tasks.db'}")


async def test_postgresql_commits_are_measured(start_server: StartServer, postgres_url: str) -> None:
    await assert_commits_reported(start_server, postgres_url)


async def test_the_memory_store_shows_no_commit_metrics(start_server: StartServer) -> None:
    server = await start_server()
    await send_concurrently(server.grpc_target)
    samples = await scrape(server)
    assert not [name for name, _ in samples if name.startswith("a2a_store_commit")]
