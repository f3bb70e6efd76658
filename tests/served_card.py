"""The agent card as our server serves it over HTTP, for the card tests (the servers run in the test's event
loop: no blocking client)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from a2a_grpc.protocol import AGENT_CARD_PATH
from a2a_grpc.server import A2AServer


def base_url(server: A2AServer) -> str:
    return f"http://{server.http_target}"


def card_url(server: A2AServer) -> str:
    return base_url(server) + AGENT_CARD_PATH


async def served_card(server: A2AServer) -> dict[str, Any]:
    """The card document the server's HTTP port serves."""
    async with aiohttp.ClientSession() as session, session.get(card_url(server)) as response:
        document: dict[str, Any] = json.loads(await response.read())
        return document
