"""What a hostile origin does to our client's card resolution and verifier (issue 29, findings 6 and 15): cards and
key sets served by a real HTTP server on 127.0.0.1 that are not UTF-8, nest past the interpreter's stack, are not
key sets, drip a byte at a time, never end, are signed with a weak key, or carry hundreds of signatures. Each is a
typed AgentCardError (the CLI: one line, exit 1), within the caller's time, after a bounded read."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from card_keys import signed_by_hand
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import RSAAlgorithm
from test_cli_client import a2a_grpc

from a2a_grpc.card.resolution import (
    AgentCardError,
    CardFetchError,
    CardFormatError,
    CardTimeoutError,
    CardTooLargeError,
    fetch_agent_card,
)
from a2a_grpc.card.verification import (
    MAX_CARD_SIGNATURES,
    MAX_REASON_CHARS,
    CardVerifier,
    InvalidCardSignatureError,
    UntrustedCardKeyError,
)
from a2a_grpc.client import A2AClient
from a2a_grpc.encoding import json_document
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import AGENT_CARD_PATH

DRIP_BYTES = 40  # one every DRIP_SECONDS: far longer than any test waits
DRIP_SECONDS = 0.5
ENDLESS_BYTES = 64 * 1024 * 1024  # what the never-ending card would send, were it read to its end
CHUNK = b" " * 65536
DEEP = 50_000


@dataclass
class HostileOrigin:
    """An HTTP origin on 127.0.0.1 serving `bodies` by path, a byte-a-second drip at /drip/*, a card that does
    not end at /endless.json; it records the paths asked for."""

    base: str = ""
    bodies: dict[str, bytes] = field(default_factory=dict)
    requested: list[str] = field(default_factory=list)
    endless_sent: asyncio.Future[int] | None = None

    @property
    def card_url(self) -> str:
        return self.base + AGENT_CARD_PATH

    def serve_card(self, card: a2a_pb2.AgentCard | bytes) -> None:
        body = card if isinstance(card, bytes) else json.dumps(json_document(card)).encode()
        self.bodies[AGENT_CARD_PATH] = body


@pytest.fixture
async def origin() -> AsyncIterator[HostileOrigin]:
    served = HostileOrigin(endless_sent=asyncio.get_running_loop().create_future())

    async def answer(request: web.Request) -> web.StreamResponse:
        served.requested.append(request.path)
        if request.path in served.bodies:
            return web.Response(body=served.bodies[request.path], content_type="application/json")
        if request.path.startswith("/drip/"):
            return await stream(request, [b" "] * DRIP_BYTES, DRIP_SECONDS)
        if request.path == "/endless.json":
            return await stream(request, [CHUNK] * (ENDLESS_BYTES // len(CHUNK)), 0)
        return web.Response(status=404)

    async def stream(request: web.Request, chunks: list[bytes], pause: float) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "application/json"})
        await response.prepare(request)
        sent = 0
        try:
            for chunk in chunks:
                await response.write(chunk)
                sent += len(chunk)
                await asyncio.sleep(pause)
        except (ConnectionError, asyncio.CancelledError):
            pass
        if request.path == "/endless.json" and served.endless_sent is not None and not served.endless_sent.done():
            served.endless_sent.set_result(sent)
        return response

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    served.base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield served
    finally:
        await runner.cleanup()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def card() -> a2a_pb2.AgentCard:
    return a2a_pb2.AgentCard(name="hostile agent", version="1", description="served by a hostile origin")


def with_headers(headers: list[dict[str, Any]]) -> a2a_pb2.AgentCard:
    """A card whose signatures carry `headers` (and no real signature: their keys are looked for first)."""
    signed = card()
    for header in headers:
        signed.signatures.add(protected=b64url(json.dumps(header).encode()), signature="AAAA")
    return signed


def ec_signed(origin: HostileOrigin, jku_path: str) -> a2a_pb2.AgentCard:
    key = ec.generate_private_key(ec.SECP256R1())
    return signed_by_hand(card(), key, {"alg": "ES256", "kid": "k1", "jku": origin.base + jku_path})


async def refusal(origin: HostileOrigin, **options: Any) -> AgentCardError:
    with pytest.raises(AgentCardError) as refused:
        await fetch_agent_card(origin.card_url, verifier=CardVerifier("require"), **options)
    return refused.value


DEEP_HEADER = b64url(b"[" * DEEP + b"]" * DEEP)


@pytest.mark.parametrize(
    ("case", "kind", "says"),
    [
        ("not-utf8", CardFormatError, "is not UTF-8"),
        ("deep-card", CardFormatError, "is not an lf.a2a.v1.AgentCard: Failed to load JSON"),
        ("deep-protected-header", InvalidCardSignatureError, "its protected header is not base64url JSON"),
        ("jwks-keys-not-a-list", UntrustedCardKeyError, "cannot fetch the JWKS: not a key set"),
        ("jwks-nested-deep", UntrustedCardKeyError, "cannot fetch the JWKS: not JSON"),
        ("http-404", CardFetchError, "answered HTTP 404"),
    ],
)
async def test_finding_6_a_hostile_card_is_a_typed_card_error(
    origin: HostileOrigin, case: str, kind: type[AgentCardError], says: str
) -> None:
    origin.bodies["/keys-5.json"] = b'{"keys": 5}'
    origin.bodies["/deep.json"] = b'{"keys": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"
    if case == "not-utf8":
        origin.serve_card(b'{"name": "caf\xe9", "version": "1"}')
    elif case == "deep-card":
        origin.serve_card(b'{"name": ' + b"[" * DEEP + b"]" * DEEP + b"}")
    elif case == "deep-protected-header":
        hostile = card()
        hostile.signatures.add(protected=DEEP_HEADER, signature="AAAA")
        origin.serve_card(hostile)
    elif case == "jwks-keys-not-a-list":
        origin.serve_card(ec_signed(origin, "/keys-5.json"))
    elif case == "jwks-nested-deep":
        origin.serve_card(ec_signed(origin, "/deep.json"))
    async with asyncio.timeout(10):
        refused = await refusal(origin)
    assert type(refused) is kind, f"{type(refused).__name__}: {refused}"
    assert says in str(refused)


async def test_finding_6_dripping_key_sets_end_at_the_callers_deadline(origin: HostileOrigin) -> None:
    """Six signatures whose jku each drip a byte every half second: one verification has one deadline, the
    caller's, which the first fetch meets; no other fetch starts."""
    key = ec.generate_private_key(ec.SECP256R1())
    signed = card()
    for n in range(6):
        header = {"alg": "ES256", "kid": f"k{n}", "jku": f"{origin.base}/drip/{n}"}
        signed.signatures.append(signed_by_hand(card(), key, header).signatures[0])
    origin.serve_card(signed)
    with pytest.raises(CardTimeoutError) as refused:
        await fetch_agent_card(origin.card_url, timeout_seconds=1.0, verifier=CardVerifier())
    assert isinstance(refused.value, TimeoutError) and isinstance(refused.value, AgentCardError)
    assert [path for path in origin.requested if path.startswith("/drip/")] == ["/drip/0"]
    with pytest.raises(CardTimeoutError, match="was not verified in time"):  # a verifier's own budget
        await CardVerifier(timeout_seconds=0.5).verify(signed, origin.card_url)
    with pytest.raises(CardTimeoutError, match=r"within 0\.5 s"):  # a client's timeout bounds the card it connects by
        await A2AClient.connect(origin.card_url, timeout=0.5, card_verifier=CardVerifier())


async def test_finding_6_a_card_larger_than_the_cap_is_refused_as_it_arrives(origin: HostileOrigin) -> None:
    with pytest.raises(CardTooLargeError, match="larger than 1048576 bytes"):
        await fetch_agent_card(origin.base + "/endless.json", verifier=CardVerifier("require"))
    assert origin.endless_sent is not None
    sent = await asyncio.wait_for(origin.endless_sent, 10)
    assert sent < ENDLESS_BYTES, "the client stopped reading at the cap and hung up"


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")
async def test_finding_15_a_card_signed_with_an_rsa_key_under_2048_bits_is_refused(origin: HostileOrigin) -> None:
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    jwk = {**RSAAlgorithm.to_jwk(weak.public_key(), as_dict=True), "kid": "weak", "use": "sig"}
    origin.bodies["/jwks.json"] = json.dumps({"keys": [jwk]}).encode()
    origin.serve_card(signed_by_hand(card(), weak, {"alg": "RS256", "kid": "weak", "jku": origin.base + "/jwks.json"}))
    refused = await refusal(origin)
    assert type(refused) is InvalidCardSignatureError
    assert "key weak is an RSA key of 1024 bits, under the 2048 required" in str(refused)


async def test_finding_15_signatures_per_card_are_capped_and_the_refusal_bounded(origin: HostileOrigin) -> None:
    many = [{"alg": "ES256", "kid": f"k{n}", "jku": f"{origin.base}/jwks/{n}.json"} for n in range(300)]
    origin.serve_card(with_headers(many))
    refused = await refusal(origin)
    assert type(refused) is InvalidCardSignatureError
    assert f"carries 300 signatures: at most {MAX_CARD_SIGNATURES} are checked" in str(refused)
    assert len(str(refused)) < 300
    assert origin.requested == [AGENT_CARD_PATH], "no key set fetched"

    elsewhere = "https://elsewhere.example/jwks.json"  # not followed: nothing is fetched
    long_kids = [{"alg": "ES256", "kid": "k" * 20_000, "jku": elsewhere}] * MAX_CARD_SIGNATURES
    origin.serve_card(with_headers(long_kids))
    refused = await refusal(origin)
    assert type(refused) is UntrustedCardKeyError
    assert len(str(refused)) < MAX_CARD_SIGNATURES * (MAX_REASON_CHARS + 20) + 200


async def test_finding_6_card_verify_cli_says_one_line_and_exits_1(origin: HostileOrigin, tmp_path: Path) -> None:
    origin.serve_card(b'{"name": "caf\xe9"}')
    run = await a2a_grpc("card", "--verify", origin.base)
    assert (run.code, run.stdout) == (1, "")
    assert run.stderr.splitlines() == [f"a2a-grpc: {origin.card_url} is not UTF-8: a byte 0xe9 at 13"]

    origin.serve_card(ec_signed(origin, "/drip/cli"))
    run = await a2a_grpc("card", "--verify", "--timeout", "1", origin.base)
    assert (run.code, run.stdout) == (1, "")
    assert run.stderr.splitlines() == [
        f"a2a-grpc: the agent card at {origin.card_url} was not fetched and verified within 1 s"
    ]
