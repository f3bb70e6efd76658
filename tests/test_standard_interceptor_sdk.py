"""The reference SDK's own gRPC server (a2a-sdk 1.x, which never enforces a required extension) with our
A2AServerInterceptor added, made from the SDK's own AgentCard message, in the SDK's venv (tests/sdk_signing_env.py)
next to its generated lf.a2a.v1 code (tests/sdk_intercepted.py): its agent now refuses a call without the
required extension, the SDK's client sees ExtensionSupportRequiredError, and an accepted call is served and echoed.
"""

from __future__ import annotations

import json
import subprocess
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from process import REPO, free_port
from sdk_signing_env import SdkUnavailableError, sdk_signing_python

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import SERVICE_NAME

REQUIRED = "https://example.com/ext/required/v1"
SCRIPT = Path(__file__).resolve().parent / "sdk_intercepted.py"
START_SECONDS = 60.0


def package_dir(root: Path) -> Path:
    """a2a_grpc as it installs (interceptors/ as a2a_grpc/interceptors), and bench, as links into the checkout."""
    package = root / "a2a_grpc"
    package.mkdir(parents=True)
    for entry in (REPO / "a2a_grpc").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    (package / "interceptors").symlink_to(REPO / "interceptors")
    (root / "bench").symlink_to(REPO / "bench")
    return root


@pytest.fixture(scope="module")
def sdk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int]]:
    """(the SDK venv's python, the port of the SDK's server with our interceptor)."""
    try:
        python = sdk_signing_python(REPO)
    except SdkUnavailableError as error:
        pytest.fail(f"a2a-sdk 1.x could not be installed: {error}", pytrace=False)
    site = package_dir(tmp_path_factory.mktemp("sdk-site"))
    port = free_port()
    ours = sysconfig.get_paths()["purelib"]
    command = [str(python), "-I", "-B", str(SCRIPT), "serve", str(port), REQUIRED, str(site), ours]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()  # the server's first line, or "" once it exited
        assert ready.strip() == "READY", process.stderr.read() if process.stderr else ""
        yield python, port
    finally:
        process.kill()
        process.wait(10)


def test_the_sdk_server_with_our_interceptor_refuses_a_call_without_the_required_extension(
    sdk_server: tuple[Path, int],
) -> None:
    python, port = sdk_server
    done = subprocess.run(
        [str(python), "-I", str(SCRIPT), "client", str(port), REQUIRED],
        capture_output=True,
        text=True,
        timeout=START_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["send_without"][0] == "ExtensionSupportRequiredError"
    assert REQUIRED in seen["send_without"][1]
    assert seen["stream_without"][0] == "ExtensionSupportRequiredError"
    assert seen["send_with"] == "TASK_STATE_COMPLETED"


def test_the_sdk_server_with_our_interceptor_echoes_and_refuses_as_our_server_does(
    sdk_server: tuple[Path, int],
) -> None:
    _, port = sdk_server
    send = f"/{SERVICE_NAME}/SendMessage"
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        with pytest.raises(grpc.RpcError) as refused:
            channel.unary_unary(send)(b"", metadata=(("a2a-version", "1.0"),), timeout=10)
        error: grpc.Call = refused.value
        assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
        info = error_details_pb2.ErrorInfo()
        details = dict(error.trailing_metadata())["grpc-status-details-bin"]
        assert status_pb2.Status.FromString(details).details[0].Unpack(info)
        assert info.reason == "EXTENSION_SUPPORT_REQUIRED"
        message = a2a_pb2.Message(message_id="m-1", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text="hello")])
        request = a2a_pb2.SendMessageRequest(message=message).SerializeToString()
        metadata = (("a2a-version", "1.0"), ("a2a-extensions", f"https://example.com/unknown,{REQUIRED}"))
        response, call = channel.unary_unary(send).with_call(request, metadata=metadata, timeout=10)
        task = a2a_pb2.SendMessageResponse.FromString(response).task
        assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        assert dict(call.trailing_metadata())["a2a-extensions"] == REQUIRED
