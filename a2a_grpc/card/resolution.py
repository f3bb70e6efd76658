"""The client's card resolution: fetching the public agent card over HTTP, checking its signature when asked to
(a2a_grpc.card.verification), and finding its gRPC interface."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import aiohttp
from google.protobuf import json_format

from a2a_grpc.card.errors import AgentCardError as AgentCardError
from a2a_grpc.card.errors import CardFetchError as CardFetchError
from a2a_grpc.card.errors import CardFormatError as CardFormatError
from a2a_grpc.card.errors import CardTimeoutError as CardTimeoutError
from a2a_grpc.card.errors import CardTooLargeError as CardTooLargeError
from a2a_grpc.card.model import GRPC_BINDING
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import AGENT_CARD_PATH
from a2a_grpc.tls import ClientTLS

if TYPE_CHECKING:
    from a2a_grpc.card.verification import CardVerdict, CardVerifier

CARD_FETCH_TIMEOUT_SECONDS = 10.0
MAX_CARD_BYTES = 1024 * 1024  # a card is a few kilobytes; a bigger body is refused as it arrives


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
    max_bytes: int = MAX_CARD_BYTES,
) -> a2a_pb2.AgentCard:
    """GET the ProtoJSON agent card at `url` (a base URL gets the well-known path); an https:// URL trusts
    the system's CAs plus `tls.ca`, and presents `tls.cert` when given. With a `verifier`, a card its policy
    refuses raises its CardSignatureError. Every failure is an AgentCardError (see `fetch_verified_card`)."""
    card, _ = await fetch_verified_card(url, verifier, timeout_seconds, tls=tls, max_bytes=max_bytes)
    return card


async def fetch_verified_card(
    url: str,
    verifier: CardVerifier | None,
    timeout_seconds: float = CARD_FETCH_TIMEOUT_SECONDS,
    *,
    tls: ClientTLS | None = None,
    max_bytes: int = MAX_CARD_BYTES,
) -> tuple[a2a_pb2.AgentCard, CardVerdict | None]:
    """`fetch_agent_card`, and the verifier's verdict (None: no verifier, or its policy asked for none). The
    fetch and the verification, key fetches included, share one deadline, `timeout_seconds` from now
    (CardTimeoutError); a body over `max_bytes` is refused as it arrives (CardTooLargeError)."""
    url = card_url(url)
    try:
        async with asyncio.timeout(timeout_seconds):
            card = parse_card(await _get(url, tls, max_bytes), url)
            verdict = await verifier.verify(card, url) if verifier is not None else None
    except CardTimeoutError:
        raise
    except TimeoutError:
        checked = "fetched and verified" if verifier is not None else "fetched"
        raise CardTimeoutError(f"the agent card at {url} was not {checked} within {timeout_seconds:g} s") from None
    return card, verdict


async def _get(url: str, tls: ClientTLS | None, max_bytes: int) -> bytes:
    ssl_context = tls.ssl_context() if tls is not None and url.startswith("https://") else True
    try:
        async with aiohttp.ClientSession() as session, session.get(url, ssl=ssl_context) as response:
            if response.status != 200:
                raise CardFetchError(f"GET {url} answered HTTP {response.status}")
            body = bytearray()
            async for chunk in response.content.iter_chunked(64 * 1024):
                body += chunk
                if len(body) > max_bytes:
                    raise CardTooLargeError(f"the agent card at {url} is larger than {max_bytes} bytes")
    except aiohttp.ClientError as error:
        raise CardFetchError(f"cannot fetch {url}: {error or type(error).__name__}") from None
    return bytes(body)


def parse_card(body: bytes, url: str) -> a2a_pb2.AgentCard:
    """The card a body holds (CardFormatError when it is not UTF-8 ProtoJSON of an AgentCard)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CardFormatError(f"{url} is not UTF-8: a byte {body[error.start]:#04x} at {error.start}") from None
    try:
        return json_format.Parse(text, a2a_pb2.AgentCard(), ignore_unknown_fields=True)
    except json_format.ParseError as error:
        raise CardFormatError(f"{url} is not an lf.a2a.v1.AgentCard: {str(error)[:200]}") from None


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
