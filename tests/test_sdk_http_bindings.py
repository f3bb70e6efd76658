"""The reference SDK's client (a2a-sdk 1.x, in a venv of its own: tests/sdk_signing_env.py), made from the card our
server serves with only JSONRPC or only HTTP+JSON allowed, calls every A2A method over that binding
(tests/sdk_http_driver.py): the card's required extension refused without it (as ExtensionSupportRequiredError)
and echoed with it, bearer authentication, over http and over https (the card's interfaces then https URLs), the
errors typed as the SDK types them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agents import PacedAgent
from certs import Pki
from conftest import BASE_CARD, StartServer
from sdk_signing_env import SdkUnavailableError, run_sdk_driver, sdk_signing_python

REPO = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "sdk_http_driver.py"
DRIVER_SECONDS = 90.0
REQUIRED = "https://example.com/ext/required/v1"
CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {
        **BASE_CARD["capabilities"],
        "extendedAgentCard": True,
        "extensions": [{"uri": REQUIRED, "required": True}],
    },
    "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
    "securityRequirements": [{"schemes": {"bearer": {}}}],
}


@pytest.fixture(scope="module")
def sdk_python() -> Path:
    try:
        return sdk_signing_python(REPO)
    except SdkUnavailableError as error:
        pytest.fail(f"a2a-sdk 1.x could not be installed: {error}", pytrace=False)


async def run_driver(python: Path, plan: dict[str, Any]) -> dict[str, Any]:
    return await run_sdk_driver(python, DRIVER, plan, DRIVER_SECONDS)


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_the_sdk_client_calls_every_method_over_the_binding(
    start_server: StartServer, sdk_python: Path, tmp_path: Path, binding: str, tls: bool
) -> None:
    extended = tmp_path / "extended.json"
    extended.write_text(json.dumps({**BASE_CARD, "name": "extended agent"}))
    pki = Pki(tmp_path / "pki")
    issued = pki.server("server")
    on_tls = {"tls_cert": str(issued.cert), "tls_key": str(issued.key)} if tls else {}
    server = await start_server(
        card=CARD, agent=PacedAgent(), bearer_tokens={"t": "alice"}, extended_card_path=str(extended), **on_tls
    )
    base_url = f"{'https' if tls else 'http'}://{server.http_target}"
    ca = str(pki.ca_file) if tls else None
    plan = {"base_url": base_url, "binding": binding, "token": "t", "extension": REQUIRED, "ca": ca}
    seen = await run_driver(sdk_python, plan)
    steps = seen["steps"]
    assert steps["without_extension"] == "ExtensionSupportRequiredError"
    task_id = steps["send"]["task"]["id"]
    assert steps["push_configs"] == [True, 1]
    assert steps["subscribe"][0]["task"]["id"] == task_id
    assert steps["subscribe"][-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert steps["stream"][-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert steps["get"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert len(steps["list"]) == 2 and task_id in steps["list"]
    assert steps["extended_card"] == "extended agent"
    assert steps["cancel_again"] == "TaskNotCancelableError"
    assert steps["missing_task"] == "TaskNotFoundError"
    assert seen["echoes"] and set(seen["echoes"]) == {REQUIRED}, "every accepted call echoes the extension"
