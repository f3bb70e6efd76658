# mypy: disable-error-code="import-not-found"
"""Signs and verifies agent cards with a2a-sdk 1.x's own signing code (a2a.utils.signing); runs in the SDK's venv
(tests/sdk_signing_env.py), never in ours: `python -I tests/sdk_signing_driver.py PLAN_JSON`.

Plans, and the one JSON line printed for each:
- {"op": "verify", "base_url": URL, "jwks": JWKS document or null, "algorithms": [...]}: the SDK's card resolver
  reads BASE_URL/.well-known/agent-card.json and checks it with create_signature_verifier; the key provider takes
  the signature's kid from `jwks`, or (null) from the JWKS its jku names. Prints {"verified": true, "name": ...}
  or {"error": {"type": ..., "message": ...}}.
- {"op": "sign", "card": ProtoJSON card, "key_file": PEM private key, "header": protected header (alg, kid,
  jku?, typ?)}: create_agent_card_signer signs the card. Prints {"card": the signed card as ProtoJSON}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import httpx
from a2a.client.card_resolver import A2ACardResolver
from a2a.types import AgentCard
from a2a.utils.signing import create_agent_card_signer, create_signature_verifier
from google.protobuf.json_format import MessageToDict, ParseDict
from jwt import PyJWK
from jwt.exceptions import PyJWKError


def key_provider(jwks: dict[str, Any] | None) -> Any:
    def provide(kid: str | None, jku: str | None) -> PyJWK:
        document = jwks if jwks is not None else httpx.get(jku or "", timeout=10).json()
        for jwk in document.get("keys", []):
            if jwk.get("kid") == kid:
                return PyJWK(jwk)
        raise PyJWKError(f"no key {kid}")

    return provide


async def verify(plan: dict[str, Any]) -> dict[str, Any]:
    verifier = create_signature_verifier(key_provider(plan.get("jwks")), plan["algorithms"])
    async with httpx.AsyncClient(timeout=10) as http:
        resolver = A2ACardResolver(http, plan["base_url"])
        try:
            card = await resolver.get_agent_card(signature_verifier=verifier)
        except Exception as error:  # whatever the SDK raised is the answer
            return {"error": {"type": type(error).__name__, "message": str(error)}}
    return {"verified": True, "name": card.name}


def sign(plan: dict[str, Any]) -> dict[str, Any]:
    card = ParseDict(plan["card"], AgentCard())
    signer = create_agent_card_signer(Path(plan["key_file"]).read_bytes(), plan["header"])
    return {"card": MessageToDict(signer(card))}


def main() -> None:
    plan = json.loads(sys.argv[1])
    result = asyncio.run(verify(plan)) if plan["op"] == "verify" else sign(plan)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
