"""The HTTP agent card's Last-Modified (the server's start) and If-Modified-Since, through aiohttp's client.

If-None-Match, when present, decides alone; an If-Modified-Since that is not an HTTP date is ignored.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime

import aiohttp
import pytest
from conftest import StartServer
from multidict import CIMultiDict
from rpc_helpers import TEST_SECONDS

from a2a_grpc.protocol import AGENT_CARD_PATH
from a2a_grpc.server import A2AServer

Reply = tuple[int, CIMultiDict[str], bytes]


async def get_card(server: A2AServer, headers: dict[str, str] | None = None, method: str = "GET") -> Reply:
    url = f"http://{server.http_target}{AGENT_CARD_PATH}"
    async with aiohttp.ClientSession() as session, session.request(method, url, headers=headers) as response:
        return response.status, response.headers.copy(), await response.read()


def http_date(moment: datetime) -> str:
    return format_datetime(moment, usegmt=True)


async def test_the_card_carries_the_start_of_the_server_as_last_modified(start_server: StartServer) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        status, headers, _ = await get_card(server)
        await asyncio.sleep(1.1)
        _, later, _ = await get_card(server)
    assert status == 200
    last_modified = parsedate_to_datetime(headers["Last-Modified"])
    assert headers["Last-Modified"] == http_date(last_modified), "an HTTP date (IMF-fixdate, GMT)"
    assert before <= last_modified <= datetime.now(UTC)
    assert later["Last-Modified"] == headers["Last-Modified"], "the card was loaded once, at start-up"
    assert "ETag" in headers


@pytest.mark.parametrize("offset", [timedelta(0), timedelta(days=1)], ids=["the-same-date", "a-later-date"])
async def test_if_modified_since_the_last_modification_is_not_modified(
    start_server: StartServer, offset: timedelta
) -> None:
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        _, served, _ = await get_card(server)
        since = http_date(parsedate_to_datetime(served["Last-Modified"]) + offset)
        replies = [await get_card(server, {"If-Modified-Since": since}, method) for method in ("GET", "HEAD")]
    for status, headers, body in replies:
        assert (status, body) == (304, b"")
        assert (headers["Last-Modified"], headers["ETag"]) == (served["Last-Modified"], served["ETag"])
        assert headers["Cache-Control"]


async def test_if_modified_since_an_earlier_date_gets_the_card(start_server: StartServer) -> None:
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        _, served, card = await get_card(server)
        earlier = http_date(parsedate_to_datetime(served["Last-Modified"]) - timedelta(seconds=1))
        status, headers, body = await get_card(server, {"If-Modified-Since": earlier})
    assert (status, body) == (200, card)
    assert headers["Last-Modified"] == served["Last-Modified"]


@pytest.mark.parametrize("since", ["yesterday", "", "Mon, 32 Foo 2026 25:61:00 GMT"], ids=["word", "empty", "bad-date"])
async def test_an_if_modified_since_that_is_not_a_date_is_ignored(start_server: StartServer, since: str) -> None:
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        _, served, card = await get_card(server)
        status, headers, body = await get_card(server, {"If-Modified-Since": since})
    assert (status, body) == (200, card)
    assert headers["Last-Modified"] == served["Last-Modified"]


async def test_if_none_match_takes_precedence_over_if_modified_since(start_server: StartServer) -> None:
    server = await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        _, served, card = await get_card(server)
        modified = parsedate_to_datetime(served["Last-Modified"])
        stale_tag_fresh_date = {"If-None-Match": '"another-tag"', "If-Modified-Since": http_date(modified)}
        status, headers, body = await get_card(server, stale_tag_fresh_date)
        assert (status, body, headers["Last-Modified"]) == (200, card, served["Last-Modified"])
        fresh_tag_old_date = {"If-None-Match": served["ETag"], "If-Modified-Since": http_date(modified - timedelta(1))}
        status, headers, body = await get_card(server, fresh_tag_old_date)
        assert (status, body, headers["Last-Modified"]) == (304, b"", served["Last-Modified"])
