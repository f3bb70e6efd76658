"""The official A2A JS SDK dials the gRPC address our TLS server's card gives, as served.

The card, fetched over https, names the gRPC port `HOST:PORT` (no scheme: the spec's `AgentInterface.url` for
gRPC); @a2a-js/sdk (the version pinned in tests/js_sdk/package.json), with its gRPC transport given the test
CA, dials that url over TLS, sends a message the echo agent answers, and gets the task back.

Real parts only: our server on 127.0.0.1, node, the SDK from the npm registry, installed once into
tests/js_sdk/node_modules by `npm ci` under a file lock; a failed install fails the test.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from certs import Pki
from conftest import StartServer
from process import direct_env

from a2a_grpc.client import fetch_agent_card, grpc_interface
from a2a_grpc.tls import ClientTLS

JS_DIR = Path(__file__).parent / "js_sdk"
STAMP = JS_DIR / "node_modules" / ".a2a-grpc-installed"  # the hash of the package-lock.json installed
INSTALL_SECONDS = 300.0
NODE_SECONDS = 60.0
CALL_SECONDS = 20.0
COMPLETED = 3  # TaskState.TASK_STATE_COMPLETED, as the SDK's generated enum numbers it


def install_sdk() -> None:
    """`npm ci` in tests/js_sdk, unless its node_modules holds the lock file's packages already."""
    wanted = hashlib.sha256((JS_DIR / "package-lock.json").read_bytes()).hexdigest()
    name = hashlib.sha256(str(JS_DIR).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"a2a-grpc-js-sdk-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run installing waits at most its npm ci's timeout
        if STAMP.exists() and STAMP.read_text() == wanted:
            return
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm is not on PATH: the JS SDK cannot be installed", pytrace=False)
        argv = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
        try:
            done = subprocess.run(argv, cwd=JS_DIR, capture_output=True, text=True, timeout=INSTALL_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"npm ci took more than {INSTALL_SECONDS:.0f}s", pytrace=False)
        if done.returncode != 0:
            pytest.fail(f"npm ci failed ({done.returncode}): {(done.stderr or done.stdout)[-1500:]}", pytrace=False)
        STAMP.write_text(wanted)


def run_js_client(card_base_url: str, ca_file: Path, text: str) -> dict[str, Any]:
    """tests/js_sdk/dial_card.mjs against the card at `card_base_url`: its one JSON line."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH", pytrace=False)
    env = direct_env()
    env["NODE_EXTRA_CA_CERTS"] = str(ca_file)  # the card's https fetch trusts the test CA
    argv = [node, "dial_card.mjs", card_base_url, str(ca_file), text]
    done = subprocess.run(argv, cwd=JS_DIR, env=env, capture_output=True, text=True, timeout=NODE_SECONDS)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def echoed(task: dict[str, Any]) -> list[str]:
    """The texts of the task's artifact parts (the SDK's parts are `{content: {$case, value}}`)."""
    return [part["content"]["value"] for artifact in task["artifacts"] for part in artifact["parts"]]


async def test_the_js_sdk_dials_the_cards_grpc_address_over_tls(start_server: StartServer, tmp_path: Path) -> None:
    await asyncio.to_thread(install_sdk)
    pki = Pki(tmp_path / "pki")
    issued = pki.server("server-a")
    server = await start_server(tls_cert=str(issued.cert), tls_key=str(issued.key))
    card_url = f"https://{server.http_target}"

    card = await fetch_agent_card(card_url, tls=ClientTLS(pki.ca_file), timeout_seconds=CALL_SECONDS)
    result = await asyncio.to_thread(run_js_client, card_url, pki.ca_file, "hello from js")
    served = grpc_interface(card).url
    assert served == server.grpc_target, f"the card's gRPC address is HOST:PORT, TLS or not (JS SDK: {result})"
    assert result["grpcUrls"] == [served, served], result  # the SDK read the same address (as 1.0, and as 0.3)
    assert "error" not in result, result["error"]
    sent, got = result["send"], result["get"]
    assert sent["status"]["state"] == COMPLETED
    assert echoed(sent) == ["hello from js"]
    assert got["id"] == sent["id"]
    assert got["status"]["state"] == COMPLETED
    assert echoed(got) == ["hello from js"]
