"""The venv of the a2a-sdk 0.3 client (.test-venv-sdk03/ in the checkout, ignored):
its generated a2a.v1 code cannot share a process with ours. tests/sdk03_driver.py runs in it."""

from __future__ import annotations

from pathlib import Path

from bench.sdk_env import SdkUnavailableError, SdkVenv

__all__ = ["SDK03", "SDK03_REQUIREMENT", "SdkUnavailableError", "sdk03_python"]

SDK03_REQUIREMENT = "a2a-sdk[grpc]==0.3.26"  # the newest 0.3

SDK03 = SdkVenv(
    name=".test-venv-sdk03",
    requirement=SDK03_REQUIREMENT,
    extras=(),
    check="import a2a.client.transports.grpc, a2a.client.card_resolver, a2a.grpc.a2a_pb2_grpc, grpc, httpx",
    label="tests",
)


def sdk03_python(root: Path) -> Path:
    """The 0.3 venv's python, installing a2a-sdk 0.3 the first time (raises SdkUnavailableError)."""
    return SDK03.python(root)
