"""Signed cards between us and the official Python SDK (a2a-sdk 1.x, its a2a.utils.signing), both ways: its card
resolver and verifier accept the cards our server signs (EC, RSA, Ed25519; non-ASCII text and Struct numbers; the
0.3 face on, a security scheme in both forms), and our client accepts a card its signer signed, served by our
server as it is. The SDK runs in a venv of its own (tests/sdk_signing_env.py), driven by
tests/sdk_signing_driver.py; our server runs on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from card_keys import ALGORITHMS, make_key_files, parse_served, signing_key, write_jwks
from conftest import BASE_CARD, StartServer
from sdk_signing_env import SdkUnavailableError, run_sdk_driver, sdk_signing_python
from served_card import base_url, served_card

from a2a_grpc.card.verification import CardVerifier
from a2a_grpc.client import fetch_agent_card
from a2a_grpc.encoding import json_document

REPO = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "sdk_signing_driver.py"
DRIVER_SECONDS = 90.0
# non-ASCII text and a Struct's integral number: where RFC 8785 and a2a-sdk 1.0's json.dumps differ
CARD: dict[str, Any] = {
    **BASE_CARD,
    "name": "Agent Zoë — café",
    "capabilities": {
        **BASE_CARD["capabilities"],
        "extensions": [{"uri": "https://example.com/ext/limits/v1", "params": {"maxItems": 5, "ratio": 0.25}}],
    },
}


@pytest.fixture(scope="module")
def sdk_python() -> Path:
    try:
        return sdk_signing_python(REPO)
    except SdkUnavailableError as error:
        pytest.fail(f"a2a-sdk 1.x could not be installed: {error}", pytrace=False)


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_key_files(tmp_path_factory.mktemp("sdk-keys"), "ec", "rsa", "ed25519")


async def run_driver(python: Path, plan: dict[str, Any]) -> dict[str, Any]:
    return await run_sdk_driver(python, DRIVER, plan, DRIVER_SECONDS)


@pytest.mark.parametrize(
    ("kind", "v03_card"),
    [("ec", False), ("rsa", False), ("ed25519", False), ("ec", True)],
    ids=["ec", "rsa", "ed25519", "ec-v03-card"],
)
async def test_the_sdk_verifies_the_card_our_server_signs(
    start_server: StartServer, sdk_python: Path, keys: dict[str, str], kind: str, v03_card: bool
) -> None:
    server = await start_server(
        card=CARD, card_signing_keys=(keys[kind],), bearer_tokens={"t": "alice"}, v03_card=v03_card
    )
    document = await served_card(server)
    assert ("type" in document["securitySchemes"]["bearer"]) is v03_card, "the scheme's 0.3 form with --v03-card"
    plan = {"op": "verify", "base_url": base_url(server), "jwks": None, "algorithms": [ALGORITHMS[kind]]}
    assert await run_driver(sdk_python, plan) == {"verified": True, "name": CARD["name"]}, "its key found by jku"


async def test_the_sdk_refuses_our_card_changed_or_checked_with_other_keys(
    start_server: StartServer, sdk_python: Path, keys: dict[str, str]
) -> None:
    """The control: the SDK's verifier does refuse, so its acceptance above means something."""
    server = await start_server(card=CARD, card_signing_keys=(keys["ec"],))
    other_keys = {"keys": [dict(signing_key(keys["rsa"]).public_jwk)]}
    plan = {"op": "verify", "base_url": base_url(server), "jwks": other_keys, "algorithms": ["ES256", "RS256"]}
    assert (await run_driver(sdk_python, plan))["error"]["type"] == "InvalidSignaturesError"


async def test_our_client_verifies_a_card_the_sdk_signed(
    start_server: StartServer, sdk_python: Path, keys: dict[str, str], tmp_path: Path
) -> None:
    """The operator's recipe: read the card as our server completes it, sign it with the SDK, serve the file."""
    unsigned = await start_server(card=CARD)
    completed = json_document(parse_served(await served_card(unsigned)))
    await unsigned.stop(0)
    key = signing_key(keys["ed25519"])
    header = {"alg": "EdDSA", "kid": key.kid, "typ": "JOSE"}
    signed = await run_driver(
        sdk_python, {"op": "sign", "card": completed, "key_file": keys["ed25519"], "header": header}
    )
    server = await start_server(card=signed["card"], card_signing_keys=(keys["ec"],))
    verifier = CardVerifier(key_files=[write_jwks(tmp_path / "operator.json", keys["ed25519"])])
    card = await fetch_agent_card(f"{base_url(server)}/.well-known/agent-card.json", verifier=verifier)
    verdict = await verifier.verify(card, base_url(server))
    assert verdict is not None and (verdict.kid, verdict.canonical_form) == (key.kid, "RFC 8785")
    assert card.name == CARD["name"] and len(card.signatures) == 1, "served as signed, not signed again"
