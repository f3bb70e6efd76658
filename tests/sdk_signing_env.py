"""The venv of a2a-sdk 1.x with its signing extra (.test-venv-sdk-signing/ in the checkout, ignored): its generated
lf.a2a.v1 code cannot share a process with ours. tests/sdk_signing_driver.py runs in it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from process import direct_env

from bench.sdk_env import SdkUnavailableError, SdkVenv

__all__ = ["SDK_SIGNING", "SdkUnavailableError", "run_sdk_driver", "sdk_signing_python"]

SDK_SIGNING = SdkVenv(
    name=".test-venv-sdk-signing",
    requirement="a2a-sdk[grpc,signing]==1.3.0",
    extras=(),
    check="import a2a.utils.signing, a2a.client.card_resolver, jwt, httpx",
    label="tests",
)


def sdk_signing_python(root: Path) -> Path:
    """The venv's python, installing a2a-sdk 1.x the first time (raises SdkUnavailableError)."""
    return SDK_SIGNING.python(root)


async def run_sdk_driver(python: Path, driver: Path, plan: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The one JSON line `driver`, run by the venv's `python` on `plan`, prints (asynchronously: our server answers it
    from this event loop)."""
    process = await asyncio.create_subprocess_exec(
        str(python),
        "-I",
        str(driver),
        json.dumps(plan),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=direct_env(),
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), seconds)
    assert process.returncode == 0, stderr.decode()[-3000:]
    result: dict[str, Any] = json.loads(stdout)
    return result
