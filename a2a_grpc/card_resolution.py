"""The client's card resolution: fetching the public agent card over HTTP, checking its signature when asked to
(a2a_grpc.card_verification), and finding its gRPC interface."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp
from google.protobuf import json_format

from a2a_grpc.card import GRPC_BINDING
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import AGENT_CARD_PATH
from a2a_grpc.tls import ClientTLS

if TYPE_CHECKING:
    from a2a_grpc.card_verification import CardVerifier

CARD_FETCH_TIMEOUT_SECONDS = 10.0


class AgentCardError(Exception):
    """The agent card could not be fetched, parsed, or has no gRPC interface (or, when checked, its signature
    does not verify: a2a_grpc.card_verification.CardSignatureError)."""


def card_url(url: str) -> str:
    """The agent card URL for a base URL (a URL already naming a .json file is kept)."""
    if url.rstrip("/").endswith(".json"):
        return url
    return url.rstrip("/") + AGENT_CARD_PATH


def is_card_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


async def fetch_agent_card(
    url: str,
    timeout_seconds: float = CARD_FETCH_TIMEOUT_SECONDS,
    *,
    tls: ClientTLS | None = None,
    verifier: CardVerifier | None = None,
) -> a2a_pb2.AgentCard:
    """GET the ProtoJSON agent card at `url` (a base URL gets the well-known path); an https:// URL trusts
    the system's CAs plus `tls.ca`, and presents `tls.cert` when given. With a `verifier`, a card its policy
    refuses raises its CardSignatureError."""
    url = card_url(url)
    ssl_context = tls.ssl_context() if tls is not None and url.startswith("https://") else True
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_seconds)) as session,
            session.get(url, ssl=ssl_context) as response,
        ):
            if response.status != 200:
                raise AgentCardError(f"GET {url} answered HTTP {response.status}")
            text = await response.text()
    except (aiohttp.ClientError, TimeoutError) as error:
        raise AgentCardError(f"cannot fetch {url}: {error or type(error).__name__}") from None
    try:
        card = json_format.Parse(text, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
    except json_format.ParseError as error:
        raise AgentCardError(f"{url} is not an lf.a2a.v1.AgentCard: {error}") from None
    if verifier is not None:
        await verifier.verify(card, url)
    return card


def grpc_interface(card: a2a_pb2.AgentCard) -> a2a_pb2.AgentInterface:
    """The card's GRPC interface for A2A 1.0 (one that names no version is taken when none names 1.0)."""
    grpc_interfaces = [i for i in card.supported_interfaces if i.protocol_binding.upper() == GRPC_BINDING]
    for interface in grpc_interfaces:
        if interface.protocol_version.split(".")[0] == "1":
            return interface
    for interface in grpc_interfaces:
        if not interface.protocol_version:
            return interface
    raise AgentCardError(f"agent card {card.name!r} declares no GRPC interface for A2A 1.0")
