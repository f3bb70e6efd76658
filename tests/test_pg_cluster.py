"""The PostgreSQL fixtures: a real server on 127.0.0.1, and an empty database of its own for each use."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg  # type: ignore[import-untyped,unused-ignore]
import pytest

from bench.pg_cluster import fresh_database


@pytest.fixture
async def other_postgres_url(postgres_server: str) -> AsyncIterator[str]:
    async with fresh_database(postgres_server) as url:
        yield url


async def test_select_one_in_an_empty_database(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await conn.fetchval("SELECT 1") == 1
        assert await conn.fetchval("SELECT current_database()") == urlsplit(postgres_url).path.lstrip("/")
        tables = await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        assert tables == 0
    finally:
        await conn.close()


@pytest.mark.skipif(bool(os.environ.get("A2A_GRPC_TEST_POSTGRES_URL")), reason="an external server is configured")
async def test_throwaway_server_listens_on_loopback_only(postgres_url: str) -> None:
    assert urlsplit(postgres_url).hostname == "127.0.0.1"
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await conn.fetchval("SHOW listen_addresses") == "127.0.0.1"
    finally:
        await conn.close()


async def test_each_url_is_a_database_of_its_own(postgres_url: str, other_postgres_url: str) -> None:
    assert postgres_url != other_postgres_url
    first = await asyncpg.connect(postgres_url)
    second = await asyncpg.connect(other_postgres_url)
    try:
        await first.execute("CREATE TABLE only_here (id int)")
        assert await first.fetchval("SELECT to_regclass('only_here') IS NOT NULL") is True
        assert await second.fetchval("SELECT to_regclass('only_here') IS NOT NULL") is False
    finally:
        await first.close()
        await second.close()


async def test_fresh_database_is_dropped_afterwards(postgres_server: str) -> None:
    async with fresh_database(postgres_server) as url:
        name = urlsplit(url).path.lstrip("/")
        held = await asyncpg.connect(url)  # left open: the drop ends it (WITH (FORCE))
    admin = await asyncpg.connect(postgres_server)
    try:
        assert await admin.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1", name) == 0
    finally:
        await admin.close()
        await held.close()
