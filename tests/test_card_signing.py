"""Signed agent cards end to end on loopback: the server signs its card and its extended card (EC P-256, RSA,
Ed25519) once, with the A2A 0.3 face on (the served document has 0.3's keys merged in); our client verifies
them through its card resolution; keys rotate across a restart; a card file signed already is served as it is."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from card_keys import (
    ALGORITHMS,
    make_key_files,
    parse_served,
    protected_header,
    signed_by_hand,
    signing_key,
    write_jwks,
)
from conftest import BASE_CARD, StartServer
from google.protobuf import json_format
from served_card import card_url, served_card

from a2a_grpc.card import CardError
from a2a_grpc.card.verification import CardVerifier, UnsignedCardError
from a2a_grpc.client import A2AClient, fetch_agent_card
from a2a_grpc.encoding import json_document
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push.service import JWKS_PATH, PushSettings
from a2a_grpc.server import A2AServer, ServerSettings

TOKEN = "card-signing-token"
EXTENDED: dict[str, Any] = {**BASE_CARD, "capabilities": {**BASE_CARD["capabilities"], "extendedAgentCard": True}}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_key_files(tmp_path_factory.mktemp("card-keys"), "ec", "rsa", "ed25519", "ec-next", "ec-stranger")


async def http_get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Mapping[str, str], bytes]:
    """Status, headers and body (the servers run in this test's event loop: no blocking client)."""
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        return response.status, response.headers.copy(), await response.read()


async def get_json(url: str) -> Any:
    return json.loads((await http_get(url))[2])


@pytest.mark.parametrize("kind", ["ec", "rsa", "ed25519"])
async def test_our_client_verifies_our_signed_card(start_server: StartServer, keys: dict[str, str], kind: str) -> None:
    server = await start_server(card_signing_keys=(keys[kind],), v03_card=True)
    document = await served_card(server)
    assert document["protocolVersion"] == "0.3.0" and "url" in document, "--v03-card: 0.3's keys are merged in"
    [signature] = parse_served(document).signatures
    kid = signing_key(keys[kind]).kid
    jwks_url = f"http://{server.http_target}{JWKS_PATH}"
    assert protected_header(signature) == {"alg": ALGORITHMS[kind], "kid": kid, "jku": jwks_url, "typ": "JOSE"}
    verifier = CardVerifier("require")  # no keys given: the jku of the card's own origin is followed
    card = await fetch_agent_card(card_url(server), verifier=verifier)
    verdict = await verifier.verify(card, card_url(server))
    assert verdict is not None and (verdict.algorithm, verdict.kid) == (ALGORITHMS[kind], kid)
    assert verdict.key_source == f"jku {jwks_url}" and verdict.canonical_form == "RFC 8785"
    assert [key["kid"] for key in (await get_json(jwks_url))["keys"]] == [kid]


async def test_the_extended_card_is_signed_and_checked_by_the_client(
    start_server: StartServer, keys: dict[str, str], tmp_path: Path
) -> None:
    extended = tmp_path / "extended.json"
    extended.write_text(json.dumps({**EXTENDED, "name": "extended agent"}))
    server = await start_server(
        card=EXTENDED, extended_card_path=str(extended), bearer_tokens={TOKEN: "alice"}, card_signing_keys=(keys["ec"],)
    )
    verifier = CardVerifier(key_files=[write_jwks(tmp_path / "jwks.json", keys["ec"])])
    headers = [("authorization", f"Bearer {TOKEN}")]
    async with await A2AClient.connect(card_url(server), headers=headers, card_verifier=verifier) as client:
        result = await client.get_extended_card()
    assert result.value.name == "extended agent"
    assert protected_header(result.value.signatures[0])["kid"] == signing_key(keys["ec"]).kid


async def test_the_policy_says_what_an_unsigned_card_gets(start_server: StartServer) -> None:
    server = await start_server()
    with pytest.raises(UnsignedCardError, match=r"the agent card at http://127\.0\.0\.1:\d+/.* is not signed"):
        await A2AClient.connect(card_url(server), card_verifier=CardVerifier("require"))
    for policy in ("if-signed", "off"):
        async with await A2AClient.connect(card_url(server), card_verifier=CardVerifier(policy)) as client:
            assert not (await client.get_card()).signatures


async def test_signed_once_and_the_validators_cover_the_signed_document(
    start_server: StartServer, keys: dict[str, str]
) -> None:
    server = await start_server(card_signing_keys=(keys["ec"],))
    (_, headers, first), (_, _, second) = await http_get(card_url(server)), await http_get(card_url(server))
    assert first == second, "ES256 signatures differ each time: the same one means it was signed once"
    assert b'"signatures"' in first
    etag = headers["ETag"]
    assert etag == '"' + hashlib.sha256(first).hexdigest()[:32] + '"'
    assert (await http_get(card_url(server), {"If-None-Match": etag}))[0] == 304


async def test_one_jwks_publishes_the_push_and_the_card_keys(start_server: StartServer, keys: dict[str, str]) -> None:
    push = PushSettings(allow=("127.0.0.1",), allow_http=True, signing_keys=(keys["rsa"], keys["ec"]))
    server = await start_server(push=push, card_signing_keys=(keys["ec"], keys["ed25519"]))
    published = (await get_json(f"http://{server.http_target}{JWKS_PATH}"))["keys"]
    kids = [signing_key(keys[name]).kid for name in ("rsa", "ec", "ed25519")]
    assert [key["kid"] for key in published] == kids, "a key signing both is published once"
    assert all("d" not in key for key in published), "public halves only"


async def test_rotation_clients_holding_either_jwks_verify_cards_of_both_keys(
    start_server: StartServer, keys: dict[str, str], tmp_path: Path
) -> None:
    """The next key is published beside the current one; after a restart it signs and the previous one stays
    published: a JWKS fetched before the restart verifies the new card, one fetched after it the old card."""
    old, new = keys["ec"], keys["ec-next"]
    before = await start_server(card_signing_keys=(old, new))
    old_card = parse_served(await served_card(before))
    old_jwks = tmp_path / "before.json"
    old_jwks.write_text(json.dumps(await get_json(f"http://{before.http_target}{JWKS_PATH}")))
    await before.stop(0)
    after = await start_server(card_signing_keys=(new, old))
    new_card = parse_served(await served_card(after))
    new_jwks = tmp_path / "after.json"
    new_jwks.write_text(json.dumps(await get_json(f"http://{after.http_target}{JWKS_PATH}")))
    for jwks in (old_jwks, new_jwks):
        verifier = CardVerifier(key_files=[jwks])
        for card, key in ((old_card, old), (new_card, new)):
            verdict = await verifier.verify(card, card_url(after))
            assert verdict is not None and verdict.kid == signing_key(key).kid


async def test_a_card_file_signed_already_is_served_as_it_is(
    start_server: StartServer, keys: dict[str, str], tmp_path: Path
) -> None:
    """The operator signs the card as the server completes it (what `a2a-grpc card` prints), with a key of their
    own; the server, though it has a signing key, serves that card and its one signature unchanged."""
    unsigned = await start_server(card=BASE_CARD)
    completed = parse_served(await served_card(unsigned))
    operator = signing_key(keys["ec-stranger"])
    signed = signed_by_hand(completed, operator.private_key, {"alg": "ES256", "kid": operator.kid})
    grpc_url = completed.supported_interfaces[0].url
    await unsigned.stop(0)
    server = await start_server(card=json_document(signed), card_signing_keys=(keys["ec"],))
    as_served = parse_served(await served_card(server))
    assert as_served == signed and as_served.supported_interfaces[0].url == grpc_url
    verifier = CardVerifier(key_files=[write_jwks(tmp_path / "operator.json", keys["ec-stranger"])])
    verdict = await verifier.verify(as_served, card_url(server))
    assert verdict is not None and verdict.kid == operator.kid


def test_a_signed_card_file_the_server_would_change_is_refused(keys: dict[str, str], tmp_path: Path) -> None:
    operator = signing_key(keys["ec"])
    raw = json_format.ParseDict(BASE_CARD, a2a_pb2.AgentCard())
    card_file = tmp_path / "signed.json"
    signed = signed_by_hand(raw, operator.private_key, {"alg": "ES256", "kid": operator.kid})
    card_file.write_text(json.dumps(json_document(signed)))
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="127.0.0.1:0", card_path=str(card_file))
    with pytest.raises(CardError, match=rf"{card_file} is signed, but serving it would change capabilities, "):
        A2AServer(settings)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda folder: str(folder / "missing.pem"), "cannot read it: No such file or directory"),
        (lambda folder: str(folder / "card.json"), "not a PEM private key"),
        (lambda folder: make_key_files(folder, "rsa")["rsa"], None),  # the control: it loads
    ],
    ids=["missing", "not-pem", "rsa"],
)
def test_a_key_file_that_cannot_sign_stops_the_start_naming_it(tmp_path: Path, make: Any, problem: str | None) -> None:
    (tmp_path / "card.json").write_text(json.dumps(BASE_CARD))
    path = make(tmp_path)
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", card_signing_keys=(path,))
    if problem is None:
        assert A2AServer(settings).card_signer is not None
        return
    with pytest.raises(ValueError) as refused:
        A2AServer(settings)
    assert str(refused.value) == f"--card-signing-key {path}: {problem}"
