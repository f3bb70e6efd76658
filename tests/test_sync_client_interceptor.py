"""`sync_client_interceptors()` on a plain sync channel, with generated sync stubs, against a real server process.

One `a2a-grpc serve` whose card requires an extension; through `grpc.intercept_channel`: the echo read from
`.with_call`'s call, from `observe_extensions()` and from a stream; the typed errors of `a2a_grpc.errors`
(ExtensionSupportRequiredError, TaskNotFoundError) from unary calls, futures and streams; the records of calls
made from many threads at once, each its own thread's; other services untouched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import BASE_CARD
from grpc_health.v1 import health_pb2, health_pb2_grpc
from process import CALL_SECONDS, ServerProcess, serve_process, text_message

from a2a_grpc.errors import ExtensionSupportRequiredError, TaskNotFoundError
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.interceptors.client import (
    ResponseExtensions,
    observe_extensions,
    response_extensions,
    sync_client_interceptors,
    use_extensions,
)
from a2a_grpc.protocol import RESUME_EXTENSION_URI

REQUIRED = "https://example.com/ext/required/v1"
CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {**BASE_CARD["capabilities"], "extensions": [{"uri": REQUIRED, "required": True}]},
}
THREADS = 8
CALLS_PER_THREAD = 6


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    directory = tmp_path_factory.mktemp("sync-client")
    card = directory / "card.json"
    card.write_text(json.dumps(CARD))
    with serve_process(directory, "--card", str(card)) as server:
        yield server


def stub_for(server: ServerProcess, channel: grpc.Channel, **options: Any) -> Any:
    intercepted = grpc.intercept_channel(channel, *sync_client_interceptors(**options))
    return a2a_pb2_grpc.A2AServiceStub(intercepted)  # type: ignore[no-untyped-call]


def send(text: str = "hello") -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(message=text_message(text))


def test_the_sync_interceptor_sends_version_and_extensions_and_reads_the_echo(server: ServerProcess) -> None:
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = stub_for(server, channel, extensions=[REQUIRED])
        response, call = stub.SendMessage.with_call(send(), timeout=CALL_SECONDS)
        assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
        echoed = response_extensions(call)
        assert (echoed.activated, echoed.source, echoed.method) == (
            (REQUIRED,),
            "trailers",
            "/lf.a2a.v1.A2AService/SendMessage",
        )
        with observe_extensions() as seen:
            task = stub.GetTask(a2a_pb2.GetTaskRequest(id=response.task.id), timeout=CALL_SECONDS)
            with use_extensions([REQUIRED, RESUME_EXTENSION_URI]):
                stub.GetTask(a2a_pb2.GetTaskRequest(id=task.id), timeout=CALL_SECONDS)
        assert [record.activated for record in seen] == [(REQUIRED,), (REQUIRED, RESUME_EXTENSION_URI)]


def test_a_stream_through_the_sync_interceptor_echoes_in_its_headers(server: ServerProcess) -> None:
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = stub_for(server, channel, extensions=[REQUIRED])
        with observe_extensions() as seen:
            stream = stub.SendStreamingMessage(send("streamed"), timeout=CALL_SECONDS)
            events = list(stream)
    assert events[0].WhichOneof("payload") == "task"
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert seen == [response_extensions(stream)]
    assert (seen[0].activated, seen[0].source) == ((REQUIRED,), "headers")


def test_the_sync_interceptor_raises_typed_errors_from_calls_futures_and_streams(server: ServerProcess) -> None:
    missing = a2a_pb2.GetTaskRequest(id="no-such-task")
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = stub_for(server, channel, extensions=[REQUIRED])
        with pytest.raises(TaskNotFoundError) as raised:
            stub.GetTask(missing, timeout=CALL_SECONDS)
        assert raised.value.metadata == {"taskId": "no-such-task"}
        with pytest.raises(TaskNotFoundError):
            stub.GetTask.with_call(missing, timeout=CALL_SECONDS)
        with pytest.raises(TaskNotFoundError):
            stub.GetTask.future(missing, timeout=CALL_SECONDS).result()
        with pytest.raises(TaskNotFoundError):
            list(stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="no-such-task"), timeout=CALL_SECONDS))

        without = stub_for(server, channel)
        with observe_extensions() as seen, pytest.raises(ExtensionSupportRequiredError) as refused:
            without.SendMessage(send(), timeout=CALL_SECONDS)
        assert refused.value.metadata == {"missingExtensions": REQUIRED}
        assert seen == [ResponseExtensions("/lf.a2a.v1.A2AService/SendMessage")]  # a refusal echoes nothing
        with pytest.raises(ExtensionSupportRequiredError):
            list(without.SendStreamingMessage(send(), timeout=CALL_SECONDS))

        untyped = stub_for(server, channel, typed_errors=False)
        with pytest.raises(grpc.RpcError) as plain:
            untyped.GetTask(missing, timeout=CALL_SECONDS)
        assert not isinstance(plain.value, TaskNotFoundError)
        assert plain.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # the required extension, not asked for


def test_calls_from_many_threads_each_see_their_own_echo(server: ServerProcess) -> None:
    """One intercepted channel shared by threads that each request their own set: every thread's
    `observe_extensions()` holds its own calls' records, and each record its own call's echo."""

    def calls(index: int) -> list[tuple[str, ...]]:
        wanted = [REQUIRED, RESUME_EXTENSION_URI] if index % 2 else [REQUIRED]
        with use_extensions(wanted), observe_extensions() as seen:
            for _ in range(CALLS_PER_THREAD):
                stub.SendMessage(send(f"thread {index}"), timeout=CALL_SECONDS)
        assert all(record.activated == tuple(wanted) for record in seen)
        return [record.activated for record in seen]

    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = stub_for(server, channel)
        with ThreadPoolExecutor(THREADS) as pool:
            results = list(pool.map(calls, range(THREADS)))
    assert [len(result) for result in results] == [CALLS_PER_THREAD] * THREADS


def test_other_services_pass_the_sync_interceptor_untouched(server: ServerProcess, tmp_path: Path) -> None:
    with grpc.insecure_channel(server.grpc_target) as channel:
        intercepted = grpc.intercept_channel(channel, *sync_client_interceptors(extensions=[REQUIRED]))
        health = health_pb2_grpc.HealthStub(intercepted)
        with observe_extensions() as seen:
            response, call = health.Check.with_call(health_pb2.HealthCheckRequest(), timeout=CALL_SECONDS)
    assert response.status == health_pb2.HealthCheckResponse.SERVING
    assert seen == []
    assert not hasattr(call, "extensions")


def test_the_client_interceptors_leave_the_protobuf_pool_to_the_users_stubs() -> None:
    """A fresh interpreter imports the client interceptors and builds them, then registers an `a2a.proto` of package
    `lf.a2a.v1` of another content, as another package's stubs (the reference SDK's) do: it loads, since the
    interceptors loaded none of our generated code."""
    script = """
import sys
from google.protobuf import descriptor_pb2, descriptor_pool
from a2a_grpc.interceptors.client import client_interceptors, sync_client_interceptors
client_interceptors(extensions=["u"])
sync_client_interceptors(extensions=["u"])
theirs = descriptor_pb2.FileDescriptorProto(name="a2a.proto", package="lf.a2a.v1", syntax="proto3")
theirs.message_type.add(name="AgentCard").field.add(name="theirs", number=1, type=9, label=1)
descriptor_pool.Default().Add(theirs)
print(sorted(name for name in sys.modules if name.startswith("a2a_grpc.generated")))
"""
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
