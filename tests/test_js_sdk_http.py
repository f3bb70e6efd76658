"""The official A2A JS SDK (@a2a-js/sdk, pinned in tests/js_sdk/package.json) over our JSON-RPC and HTTP+JSON
faces: it resolves the card our server serves, picks the binding's interface from it, and sends, streams and gets
a task (tests/js_sdk/http_bindings.mjs). Real parts only: our server on 127.0.0.1, node, the SDK installed by
`npm ci` (tests/test_js_sdk.py's install_sdk)."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any

import pytest
from conftest import StartServer
from process import direct_env
from test_js_sdk import JS_DIR, NODE_SECONDS, install_sdk

COMPLETED = 3  # TaskState.TASK_STATE_COMPLETED, as the SDK's generated enum numbers it


async def run_js_client(base_url: str, binding: str, text: str) -> dict[str, Any]:
    """tests/js_sdk/http_bindings.mjs against the card at `base_url`: its one JSON line."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH", pytrace=False)
    process = await asyncio.create_subprocess_exec(
        node,
        "http_bindings.mjs",
        base_url,
        binding,
        text,
        cwd=JS_DIR,
        env=direct_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), NODE_SECONDS)
    assert process.returncode == 0, stderr.decode()[-2000:]
    result: dict[str, Any] = json.loads(stdout)
    return result


def texts(task: dict[str, Any]) -> list[str]:
    """The texts of a task's artifact parts (the SDK's parts are `{content: {$case, value}}`)."""
    return [part["content"]["value"] for artifact in task["artifacts"] for part in artifact["parts"]]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_the_js_sdk_sends_streams_and_gets_over_the_binding(start_server: StartServer, binding: str) -> None:
    await asyncio.to_thread(install_sdk)
    server = await start_server()
    result = await run_js_client(f"http://{server.http_target}", binding, "hello from js")
    assert "error" not in result, result
    assert binding in [interface[0] for interface in result["interfaces"]]
    assert result["send"]["status"]["state"] == COMPLETED and texts(result["send"]) == ["hello from js"]
    stream = [event["payload"] for event in result["stream"]]
    assert stream[0]["$case"] == "task", "a stream begins with the task"
    assert stream[-1]["$case"] == "statusUpdate" and stream[-1]["value"]["status"]["state"] == COMPLETED
    assert result["get"]["id"] == result["send"]["id"] and texts(result["get"]) == ["hello from js"]
