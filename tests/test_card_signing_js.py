"""Signed cards between us and the official JS SDK (@a2a-js/sdk, pinned in tests/js_sdk/package.json), both ways:
its resolver and verifyAgentCardSignature accept the cards our server signs (EC, Ed25519; the 0.3 face on) and
refuse one changed on the way; our client accepts a card its generateAgentCardSignature signed, served by our
server as it is. node runs tests/js_sdk/card_signature.mjs; our server runs on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from card_keys import make_key_files, parse_served, signing_key, write_jwks
from conftest import BASE_CARD, StartServer
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from process import direct_env
from served_card import base_url, served_card
from test_js_sdk import JS_DIR, install_sdk

from a2a_grpc.card.verification import CardVerifier
from a2a_grpc.client import fetch_agent_card
from a2a_grpc.encoding import json_document

NODE_SECONDS = 60.0
CARD: dict[str, Any] = {**BASE_CARD, "name": "Agent Zoë — café"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    install_sdk()
    return make_key_files(tmp_path_factory.mktemp("js-keys"), "ec", "ed25519")


async def run_node(*args: str) -> dict[str, Any]:
    """card_signature.mjs's result: its last line (the SDK's verifier logs failed signatures on stdout too)."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH", pytrace=False)
    env = direct_env()
    process = await asyncio.create_subprocess_exec(
        node,
        "card_signature.mjs",
        *args,
        cwd=JS_DIR,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), NODE_SECONDS)
    assert process.returncode == 0, stderr.decode()[-2000:]
    result: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("kind", ["ec", "ed25519"])
async def test_the_js_sdk_verifies_the_card_our_server_signs(
    start_server: StartServer, keys: dict[str, str], kind: str
) -> None:
    server = await start_server(card=CARD, card_signing_keys=(keys[kind],))
    assert await run_node("verify", base_url(server)) == {"verified": True, "name": CARD["name"]}


async def test_the_js_sdk_refuses_our_card_changed_on_the_way(start_server: StartServer, keys: dict[str, str]) -> None:
    """The control: a copy of our signed card with its description changed, served elsewhere (its jku still
    names our server's JWKS)."""
    server = await start_server(card=CARD, card_signing_keys=(keys["ec"],))
    document = {**await served_card(server), "description": "Changed on the way."}

    async def tampered(request: web.Request) -> web.Response:
        return web.json_response(document)

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", tampered)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        result = await run_node("verify", f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()
    assert result == {"error": "No valid signatures found on agent card."}


async def test_our_client_verifies_a_card_the_js_sdk_signed(
    start_server: StartServer, keys: dict[str, str], tmp_path: Path
) -> None:
    unsigned = await start_server(card=CARD)
    completed = json_document(parse_served(await served_card(unsigned)))
    await unsigned.stop(0)
    card_file, jwk_file = tmp_path / "card.json", tmp_path / "key.jwk"
    card_file.write_text(json.dumps(completed))
    key = signing_key(keys["ec"])
    assert isinstance(key.private_key, ec.EllipticCurvePrivateKey)
    private_jwk = ECAlgorithm.to_jwk(key.private_key, as_dict=True)
    jwk_file.write_text(json.dumps({**private_jwk, "alg": "ES256", "kid": key.kid}))
    signed = (await run_node("sign", str(card_file), str(jwk_file)))["card"]
    server = await start_server(card=signed)
    verifier = CardVerifier(key_files=[write_jwks(tmp_path / "jwks.json", keys["ec"])])
    card = await fetch_agent_card(f"{base_url(server)}/.well-known/agent-card.json", verifier=verifier)
    verdict = await verifier.verify(card, base_url(server))
    assert verdict is not None and (verdict.kid, verdict.canonical_form) == (key.kid, "RFC 8785")
