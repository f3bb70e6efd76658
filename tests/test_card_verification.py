"""What our verifier says of a served card that was changed, reordered, extended or signed by another key, and of
signatures a careful verifier refuses whatever the key (alg none, HMAC, a key of the wrong type, crit); where it
looks for keys (the jku of the card's origin, listed URLs, key files); and the a2a-sdk 1.0 form it accepts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from card_keys import make_key_files, parse_served, signed_by_hand, signing_key, write_jwks
from conftest import StartServer
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt import api_jws
from served_card import card_url, served_card

from a2a_grpc.card.canonical import sdk_1_0_bytes
from a2a_grpc.card.verification import (
    CardSignatureError,
    CardVerifier,
    InvalidCardSignatureError,
    UntrustedCardKeyError,
)
from a2a_grpc.client import AgentCardError, fetch_agent_card
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push.service import JWKS_PATH
from a2a_grpc.server import A2AServer
from a2a_grpc.signing_keys import SigningKey

CHANGED = "the card changed after it was signed"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_key_files(tmp_path_factory.mktemp("verify-keys"), "ec", "rsa", "ec-stranger")


@pytest.fixture
async def signed(start_server: StartServer, keys: dict[str, str]) -> A2AServer:
    return await start_server(card_signing_keys=(keys["ec"],))


async def refusal(verifier: CardVerifier, card: a2a_pb2.AgentCard, url: str) -> CardSignatureError:
    with pytest.raises(CardSignatureError) as refused:
        await verifier.verify(card, url)
    assert isinstance(refused.value, AgentCardError), "a card error of our client"
    return refused.value


def reordered(value: Any) -> Any:
    """The same JSON with every object's members in reverse order (lists keep theirs: their order is content)."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


async def test_a_reordered_but_equal_card_verifies(signed: A2AServer) -> None:
    document = await served_card(signed)
    text = json.dumps(reordered(document))
    assert text != json.dumps(document)
    card = parse_served(json.loads(text))
    assert await CardVerifier().verify(card, card_url(signed)) is not None


@pytest.mark.parametrize(
    "tamper",
    [
        lambda card: card.update(description="Wires money on request."),
        lambda card: card["supportedInterfaces"][0].update(url="evil.example:443"),
        lambda card: card["skills"].reverse() if len(card["skills"]) > 1 else card["skills"].append(card["skills"][0]),
        lambda card: card.update(documentationUrl="https://evil.example/docs"),
        lambda card: card["capabilities"].update(extendedAgentCard=True),
    ],
    ids=["changed-field", "changed-grpc-address", "changed-list", "added-field", "added-capability"],
)
async def test_a_card_changed_after_signing_is_refused_saying_so(signed: A2AServer, tamper: Any) -> None:
    document = await served_card(signed)
    tamper(document)
    refused = await refusal(CardVerifier(), parse_served(document), card_url(signed))
    assert isinstance(refused, InvalidCardSignatureError)
    assert CHANGED in str(refused) and card_url(signed) in str(refused)


async def test_keys_a_10_card_does_not_have_are_outside_the_signature(signed: A2AServer) -> None:
    """The 0.3 keys merged into the served document are not signed (the 1.0 card is): changing them, or adding a
    key no 1.0 reader parses, leaves the signature valid, as it does for the SDKs' verifiers."""
    document = await served_card(signed)
    document["url"] = "evil.example:443"
    document["xNote"] = "added after signing"
    assert await CardVerifier().verify(parse_served(document), card_url(signed)) is not None


async def test_a_card_signed_by_an_untrusted_key_is_refused(
    start_server: StartServer, signed: A2AServer, keys: dict[str, str], tmp_path: Path
) -> None:
    """An impostor's card, signed with its own key and naming its own JWKS, read where the real card should be."""
    impostor = await start_server(card_signing_keys=(keys["ec-stranger"],))
    card = parse_served(await served_card(impostor))
    trusted = write_jwks(tmp_path / "trusted.json", keys["ec"])
    for verifier in (CardVerifier(), CardVerifier(key_files=[trusted])):
        refused = await refusal(verifier, card, card_url(signed))
        assert isinstance(refused, UntrustedCardKeyError)
        assert f"key {signing_key(keys['ec-stranger']).kid} is not a trusted key" in str(refused)
        assert f"its jku http://{impostor.http_target}{JWKS_PATH} is not followed" in str(refused)
    pinned = await refusal(CardVerifier(key_files=[trusted]), card, card_url(impostor))
    assert "not a listed JWKS URL" in str(pinned), "keys given pin the signer: the card's own origin is not enough"


async def test_a_jku_is_followed_when_listed_and_keys_come_from_files_and_urls(
    start_server: StartServer, signed: A2AServer, keys: dict[str, str], tmp_path: Path
) -> None:
    card = parse_served(await served_card(signed))
    jwks_url = f"http://{signed.http_target}{JWKS_PATH}"
    elsewhere = "https://elsewhere.example/.well-known/agent-card.json"
    verdict = await CardVerifier(jwks_urls=[jwks_url]).verify(card, elsewhere)
    assert verdict is not None and verdict.key_source == f"jku {jwks_url}"
    public_pem = tmp_path / "public.pem"
    public_key = signing_key(keys["ec"]).private_key.public_key()
    public_pem.write_bytes(public_key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    for key_file in (write_jwks(tmp_path / "jwks.json", keys["rsa"], keys["ec"]), str(public_pem)):
        verdict = await CardVerifier(key_files=[key_file]).verify(card, elsewhere)
        assert verdict is not None and verdict.key_source == f"file {key_file}"


async def test_a_jwks_that_cannot_be_fetched_is_named(signed: A2AServer) -> None:
    card = parse_served(await served_card(signed))
    missing = f"http://{signed.http_target}/no-such-jwks.json"
    refused = await refusal(CardVerifier(jwks_urls=[missing]), card, card_url(signed))
    assert isinstance(refused, UntrustedCardKeyError)
    assert f"(JWKS {missing}: cannot fetch the JWKS: HTTP 404)" in str(refused)


def sign_as(card: a2a_pb2.AgentCard, key: Any, header: Mapping[str, Any]) -> a2a_pb2.AgentCard:
    return signed_by_hand(card, key, dict(header))


@pytest.mark.parametrize(
    ("header", "key", "reason"),
    [
        ({"alg": "none"}, "", "alg none: an unsigned JWS is refused"),
        ({"alg": "HS256"}, b"a shared secret of thirty-two bytes", "alg HS256 is refused: an HMAC's shared secret"),
        ({"alg": "RS256"}, "rsa", "alg RS256 cannot be used with key {kid}, a EC P-256 key"),
        ({"alg": "ES256", "crit": ["exp"], "exp": 1}, "ec", "crit ['exp'] names JWS extensions this verifier does"),
    ],
    ids=["alg-none", "hmac", "wrong-key-type", "crit"],
)
async def test_signatures_refused_whatever_the_key(
    signed: A2AServer, keys: dict[str, str], header: dict[str, Any], key: Any, reason: str
) -> None:
    card = parse_served(await served_card(signed))
    kid = signing_key(keys["ec"]).kid
    private = signing_key(keys[key]).private_key if key in keys else key
    forged = sign_as(card, private, {"kid": kid, "jku": f"http://{signed.http_target}{JWKS_PATH}", **header})
    refused = await refusal(CardVerifier(), forged, card_url(signed))
    assert isinstance(refused, InvalidCardSignatureError)
    assert reason.format(kid=kid) in str(refused)


async def test_a_signature_over_the_sdk_1_0_form_verifies(keys: dict[str, str], tmp_path: Path) -> None:
    card = a2a_pb2.AgentCard(name="Zoë's agent", version="1", description="café")
    card.capabilities.extensions.add(uri="urn:x").params.update({"depth": 5})
    key = signing_key(keys["ec"])
    token = api_jws.encode(sdk_1_0_bytes(card), key.private_key, algorithm="ES256", headers={"kid": key.kid})
    protected, _, signature = token.split(".")
    card.signatures.add(protected=protected, signature=signature)
    verdict = await CardVerifier(key_files=[write_jwks(tmp_path / "jwks.json", keys["ec"])]).verify(card, "")
    assert verdict is not None and verdict.canonical_form == "a2a-sdk 1.0 JSON"
    assert "over the a2a-sdk 1.0 JSON form" in verdict.describe()


async def test_one_valid_signature_of_several_is_enough_and_each_failure_is_named(
    signed: A2AServer, keys: dict[str, str]
) -> None:
    card = parse_served(await served_card(signed))
    stranger = signing_key(keys["ec-stranger"])
    extra = sign_as(card, stranger.private_key, {"alg": "ES256", "kid": stranger.kid}).signatures[0]
    card.signatures.insert(0, extra)
    assert await CardVerifier().verify(card, card_url(signed)) is not None
    card.description = "changed"
    refused = await refusal(CardVerifier(), card, card_url(signed))
    assert f"signature 1: key {stranger.kid} is not a trusted key" in str(refused)
    assert f"signature 2: the signature by key {signing_key(keys['ec']).kid} does not match" in str(refused)


async def test_fetch_agent_card_with_a_verifier_checks_the_card_it_parses(signed: A2AServer, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"keys": [ec_jwk()]}))
    card = await fetch_agent_card(card_url(signed), verifier=CardVerifier("if-signed"))
    assert card.signatures
    with pytest.raises(UntrustedCardKeyError):
        await fetch_agent_card(card_url(signed), verifier=CardVerifier(key_files=[other]))


def ec_jwk() -> dict[str, Any]:
    return dict(SigningKey.of(ec.generate_private_key(ec.SECP256R1())).public_jwk)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"{not json", "starts as a JWKS but is not JSON"),
        (b'{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}]}', "holds no RSA, EC or OKP signature key"),
        (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "neither a JWKS nor a PEM public key"),
    ],
    ids=["not-json", "only-hmac", "bad-pem"],
)
def test_a_key_file_that_cannot_be_used_is_a_clear_error(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "keys"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=problem):
        CardVerifier(key_files=[path])
