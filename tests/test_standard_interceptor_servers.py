"""The standard interceptors in servers nobody here wrote: a bare servicer on A2A stubs generated at test time
(grpc_tools.protoc into a temporary directory), in its own process on 127.0.0.1, on a grpc.aio server with
A2AServerInterceptor and on a sync grpc.server with A2ASyncServerInterceptor (tests/bare_a2a_server.py). On every
one of the 11 RPCs a call without the card's required extension is refused (FAILED_PRECONDITION,
EXTENSION_SUPPORT_REQUIRED) and one with it is served, the echo in its trailers (and headers: streams, and the
aio server's unary calls) and in what the servicer read; grpc's health service answers without any A2A header."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from bare_a2a import SEEN_TRAILER
from conftest import BASE_CARD
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from process import REPO, free_port

from a2a_grpc.protocol import A2A_SERVICE, SERVICE_NAME

REQUIRED = "https://example.com/ext/required/v1"
CARD = {**BASE_CARD, "capabilities": {"extensions": [{"uri": REQUIRED, "required": True}]}}
SERVER = Path(__file__).resolve().parent / "bare_a2a_server.py"
START_SECONDS = 30.0
CALL_SECONDS = 10.0


def generate_stubs(out: Path) -> None:
    """A2A stubs from protos/a2a.proto, generated now, as a user generates them (README "Generate the stubs")."""
    out.mkdir()
    googleapis = sysconfig.get_paths()["purelib"]  # googleapis-common-protos installs google/api/*.proto there
    command = [sys.executable, "-m", "grpc_tools.protoc", "-I", str(REPO / "protos"), "-I", googleapis]
    command += [f"--python_out={out}", f"--grpc_python_out={out}", "a2a.proto"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def health_serving(target: str) -> bool:
    try:
        with grpc.insecure_channel(target) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            return bool(
                check(health_pb2.HealthCheckRequest(), timeout=0.5).status == health_pb2.HealthCheckResponse.SERVING
            )
    except grpc.RpcError:
        return False


@pytest.fixture(scope="module", params=["aio", "sync"])
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(the server's address, its kind): one server process per packaging, every case against it."""
    scratch = tmp_path_factory.mktemp(f"bare-{request.param}")
    generate_stubs(scratch / "stubs")
    card = scratch / "card.json"
    card.write_text(json.dumps(CARD))
    port = free_port()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    stderr = (scratch / "stderr.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(scratch / "stubs"), str(port), str(card), request.param],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while not health_serving(address):
            assert process.poll() is None, (scratch / "stderr.log").read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield address, request.param
    finally:
        process.kill()
        process.wait(10)
        stderr.close()


def call(channel: grpc.Channel, method: Any, metadata: tuple[tuple[str, str], ...]) -> tuple[Any, Any, Any]:
    """(the code, the response headers, the trailers) of `method` called with an empty request."""
    path = f"/{SERVICE_NAME}/{method.name}"
    if method.server_streaming:
        stream = channel.unary_stream(path)(b"", metadata=metadata, timeout=CALL_SECONDS)
        try:
            for _ in stream:
                pass
        except grpc.RpcError:
            pass
        return stream.code(), stream.initial_metadata(), stream
    try:
        _, unary = channel.unary_unary(path).with_call(b"", metadata=metadata, timeout=CALL_SECONDS)
    except grpc.RpcError as error:
        unary = error
    return unary.code(), unary.initial_metadata(), unary


@pytest.mark.parametrize("method", list(A2A_SERVICE.methods), ids=[method.name for method in A2A_SERVICE.methods])
def test_a_bare_servicer_behind_the_standard_interceptor_refuses_and_accepts(
    target: tuple[str, str], method: Any
) -> None:
    address, kind = target
    assert len(A2A_SERVICE.methods) == 11
    with grpc.insecure_channel(address) as channel:
        code, headers, refused = call(channel, method, (("a2a-version", "1.0"),))
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        details = dict(refused.trailing_metadata())["grpc-status-details-bin"]
        info = error_details_pb2.ErrorInfo()
        assert status_pb2.Status.FromString(details).details[0].Unpack(info)
        assert (info.reason, info.domain, info.metadata["missingExtensions"]) == (
            "EXTENSION_SUPPORT_REQUIRED",
            "a2a-protocol.org",
            REQUIRED,
        )
        assert "a2a-extensions" not in dict(refused.trailing_metadata())  # nothing echoed on a refusal

        code, headers, accepted = call(channel, method, (("a2a-version", "1.0"), ("a2a-extensions", REQUIRED)))
        assert code == grpc.StatusCode.OK
        trailers = dict(accepted.trailing_metadata())
        assert trailers["a2a-extensions"] == REQUIRED
        assert (
            trailers[SEEN_TRAILER] == REQUIRED
        )  # activated_extensions() in the servicer; its own trailer kept the echo
        headers_echo = method.server_streaming or kind == "aio"
        assert dict(headers).get("a2a-extensions") == (REQUIRED if headers_echo else None)


def test_health_is_untouched_by_the_standard_interceptor(target: tuple[str, str]) -> None:
    assert health_serving(target[0])  # no a2a-version, no a2a-extensions: not an A2A service
