"""The venv of a2a-sdk 1.x with its signing extra (.test-venv-sdk-signing/ in the checkout, ignored): its generated
lf.a2a.v1 code cannot share a process with ours. tests/sdk_signing_driver.py runs in it."""

from __future__ import annotations

from pathlib import Path

from bench.sdk_env import SdkUnavailableError, SdkVenv

__all__ = ["SDK_SIGNING", "SdkUnavailableError", "sdk_signing_python"]

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
