"""`serve --interceptor MODULE:ATTR`: the user's own grpc.aio.ServerInterceptors on a real server process.

One server, with bearer-token authentication and two interceptors from the user's folder (`--app-dir`): one of
the user's that writes each call it sees to a file, and OpenTelemetry's gRPC instrumentation (its asyncio server
interceptor, exporting to a file). Both see every admitted A2A call, unary and streaming, with the parsed
request; neither sees a call authentication refused, nor health. A refusal by `context.abort()` is the call's
status, keeps the extension echo, and gives back a refused stream's slot. Bad values are one line, exit 2.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from process import CALL_SECONDS, ServerProcess, run_serve, serve_process, text_message

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03
from a2a_grpc.generated.v0_3 import a2a_pb2_grpc as v03_grpc
from a2a_grpc.interceptors.server.user import load_interceptor
from a2a_grpc.protocol import RESUME_EXTENSION_URI
from a2a_grpc.server import A2AServer, ServerSettings

TOKEN = "interceptor-test-token"
AUTHORIZED = (("a2a-version", "1.0"), ("authorization", f"Bearer {TOKEN}"))
REFUSE = ("x-refuse", "yes")  # the counting interceptor refuses a call that carries it
STREAMS_PER_CALLER = 2

USER_MODULE = textwrap.dedent(
    '''
    """A user's interceptors, as they would write them, with no part of a2a_grpc."""
    import os

    import grpc
    from opentelemetry.instrumentation.grpc import aio_server_interceptor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


    def note(name, line):
        with open(os.path.join(os.environ["NOTES_DIR"], name), "a") as notes:
            notes.write(line + "\\n")


    class Counting(grpc.aio.ServerInterceptor):
        async def intercept_service(self, continuation, details):
            handler = await continuation(details)
            refuse = ("x-refuse", "yes") in tuple(details.invocation_metadata)
            if handler.response_streaming:
                inner = handler.unary_stream

                async def stream(request, context):
                    note("calls", f"{details.method} {type(request).__name__}")
                    if refuse:
                        await context.abort(grpc.StatusCode.PERMISSION_DENIED, "refused by Counting")
                    events = 0
                    async for event in inner(request, context):
                        events += 1
                        yield event
                    note("calls", f"{details.method} events {events}")

                return grpc.unary_stream_rpc_method_handler(stream)
            inner = handler.unary_unary

            async def unary(request, context):
                note("calls", f"{details.method} {type(request).__name__}")
                if refuse:
                    await context.abort(grpc.StatusCode.PERMISSION_DENIED, "refused by Counting")
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(unary)


    class ToFile(SpanExporter):
        def export(self, spans):
            for span in spans:
                note("spans", f"{span.name} {span.attributes.get('rpc.grpc.status_code')}")
            return SpanExportResult.SUCCESS


    def telemetry():
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(ToFile()))
        return aio_server_interceptor(tracer_provider=provider)


    not_an_interceptor = object()
    '''
)


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("interceptors-app")
    (directory / "user_interceptors.py").write_text(USER_MODULE)
    return directory


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("interceptor-notes")


@pytest.fixture(scope="module")
def server(app_dir: Path, notes: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    args = [
        "--app-dir",
        str(app_dir),
        "--interceptor",
        "user_interceptors:Counting",
        "--interceptor",
        "user_interceptors:telemetry",
        "--auth-token",
        f"{TOKEN}=alice",
        "--max-streams-per-caller",
        str(STREAMS_PER_CALLER),
    ]
    with serve_process(tmp_path_factory.mktemp("interceptors-server"), *args, env={"NOTES_DIR": str(notes)}) as server:
        yield server


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def send(text: str) -> a2a_pb2.SendMessageRequest:
    return a2a_pb2.SendMessageRequest(message=text_message(text))


def test_the_users_interceptors_see_every_admitted_call_unary_and_streaming(server: ServerProcess, notes: Path) -> None:
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        health = health_pb2_grpc.HealthStub(channel)
        before_calls, before_spans = len(lines(notes / "calls")), len(lines(notes / "spans"))
        with pytest.raises(grpc.RpcError) as refused:  # no token: authentication refuses it before them
            stub.SendMessage(send("anonymous"), metadata=AUTHORIZED[:1], timeout=CALL_SECONDS)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        health.Check(health_pb2.HealthCheckRequest(), timeout=CALL_SECONDS)
        sent = [stub.SendMessage(send(f"hello {n}"), metadata=AUTHORIZED, timeout=CALL_SECONDS) for n in range(3)]
        stub.GetTask(a2a_pb2.GetTaskRequest(id=sent[0].task.id), metadata=AUTHORIZED, timeout=CALL_SECONDS)
        events = list(stub.SendStreamingMessage(send("streamed"), metadata=AUTHORIZED, timeout=CALL_SECONDS))
        with pytest.raises(grpc.RpcError) as missing:
            list(stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id="nope"), metadata=AUTHORIZED, timeout=30))
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    path = "/lf.a2a.v1.A2AService/"
    assert lines(notes / "calls")[before_calls:] == [
        *[f"{path}SendMessage SendMessageRequest"] * 3,
        f"{path}GetTask GetTaskRequest",
        f"{path}SendStreamingMessage SendMessageRequest",
        f"{path}SendStreamingMessage events {len(events)}",
        f"{path}SubscribeToTask SubscribeToTaskRequest",
    ]
    ok, not_found = grpc.StatusCode.OK.value[0], grpc.StatusCode.NOT_FOUND.value[0]
    assert sorted(lines(notes / "spans")[before_spans:]) == sorted(
        [
            *[f"{path}SendMessage {ok}"] * 3,
            f"{path}GetTask {ok}",
            f"{path}SendStreamingMessage {ok}",
            f"{path}SubscribeToTask {not_found}",
        ]
    )


def test_an_interceptors_abort_is_the_status_keeps_the_echo_and_frees_the_stream_slot(server: ServerProcess) -> None:
    refused = (*AUTHORIZED, ("a2a-extensions", RESUME_EXTENSION_URI), REFUSE)
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as unary:
            stub.SendMessage(send("refused"), metadata=refused, timeout=CALL_SECONDS)
        assert (unary.value.code(), unary.value.details()) == (grpc.StatusCode.PERMISSION_DENIED, "refused by Counting")
        assert ("a2a-extensions", RESUME_EXTENSION_URI) in unary.value.trailing_metadata()
        for _ in range(STREAMS_PER_CALLER + 1):  # a slot each refused stream kept would refuse the next ones
            with pytest.raises(grpc.RpcError) as stream:
                list(stub.SendStreamingMessage(send("refused"), metadata=refused, timeout=CALL_SECONDS))
            assert stream.value.code() == grpc.StatusCode.PERMISSION_DENIED
        events = list(stub.SendStreamingMessage(send("after"), metadata=AUTHORIZED, timeout=CALL_SECONDS))
    assert events[-1].status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (
            "nosuch:X",
            "a2a-grpc: cannot load interceptor nosuch:X: ModuleNotFoundError: No module named 'nosuch'; serve imports "
            "it from --app-dir (the working directory by default): run serve from the directory that holds nosuch, "
            "or give --app-dir DIR",
        ),
        (
            "user_interceptors:not_an_interceptor",
            "a2a-grpc: user_interceptors:not_an_interceptor is not a grpc.aio.ServerInterceptor (its type is object)",
        ),
    ],
)
def test_a_bad_interceptor_is_one_line_and_exit_2(app_dir: Path, tmp_path: Path, spec: str, says: str) -> None:
    done = run_serve(["--store", "memory", "--app-dir", str(app_dir), "--interceptor", spec], cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, says + "\n")


class SyncInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    def intercept_service(self, continuation: Any, details: Any) -> Any:
        return continuation(details)


SYNC_INTERCEPTOR = SyncInterceptor()


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("grpc_health.v1.health", "--interceptor takes MODULE:ATTR, got 'grpc_health.v1.health'"),
        ("test_user_interceptors:nothing_here", "AttributeError: module 'test_user_interceptors' has no attribute"),
        ("test_user_interceptors:SYNC_INTERCEPTOR", "is a sync grpc.ServerInterceptor: this server takes grpc.aio"),
    ],
)
def test_what_is_not_an_asyncio_interceptor_is_refused_by_name(spec: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        load_interceptor(spec)


def test_opentelemetrys_factory_loads_as_named() -> None:
    from opentelemetry.instrumentation.grpc._aio_server import OpenTelemetryAioServerInterceptor

    interceptor = load_interceptor("opentelemetry.instrumentation.grpc:aio_server_interceptor")
    assert isinstance(interceptor, OpenTelemetryAioServerInterceptor)


class Recorder(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Notes its name in `seen` as each call reaches it, and the request's type."""

    def __init__(self, name: str, seen: list[str]) -> None:
        self.name = name
        self.seen = seen

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        self.seen.append(f"{self.name} {details.method}")
        handler = await continuation(details)
        behavior = handler.unary_unary

        async def unary(request: Any, context: Any) -> Any:
            self.seen.append(f"{self.name} {type(request).__name__}")
            return await behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(unary)


SEEN: list[str] = []
SECOND = Recorder("second", SEEN)


async def test_an_embedders_interceptors_run_in_order_before_the_settings_ones_on_both_faces() -> None:
    settings = ServerSettings(
        listen="127.0.0.1:0", http_listen="", store_url="memory", interceptors=("test_user_interceptors:SECOND",)
    )
    server = A2AServer(settings, interceptors=[Recorder("first", SEEN)])
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await stub.GetTask(a2a_pb2.GetTaskRequest(id="t"), metadata=AUTHORIZED[:1], timeout=CALL_SECONDS)
            v03_stub = v03_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            v03_message = v03.Message(message_id="m03", role=v03.ROLE_USER, content=[v03.Part(text="hi")])
            await v03_stub.SendMessage(v03.SendMessageRequest(request=v03_message), timeout=CALL_SECONDS)
    finally:
        await server.stop(0)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    method, v03_method = "/lf.a2a.v1.A2AService/GetTask", "/a2a.v1.A2AService/SendMessage"
    assert [
        *(f"first {method}", f"second {method}", "first GetTaskRequest", "second GetTaskRequest"),
        *(f"first {v03_method}", f"second {v03_method}", "first SendMessageRequest", "second SendMessageRequest"),
    ] == SEEN


def test_an_embedders_interceptor_that_is_not_one_is_refused() -> None:
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", store_url="memory")
    with pytest.raises(ValueError, match=re.escape("is not a grpc.aio.ServerInterceptor")):
        A2AServer(settings, interceptors=[object()])


class PassingOn(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Hands every call on as it is."""

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        return await continuation(details)


async def _task_not_found(interceptors: list[grpc.aio.ServerInterceptor]) -> list[tuple[Any, str, bytes]]:
    """(code, message, status details) of a unary call and a stream for a task id with a tab and a backslash."""
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", store_url="memory")
    server = A2AServer(settings, interceptors=interceptors)
    await server.start()
    ended: list[tuple[Any, str, bytes]] = []
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            for call in (
                stub.GetTask(a2a_pb2.GetTaskRequest(id="a\tb\\c"), metadata=AUTHORIZED[:1], timeout=CALL_SECONDS),
                stub.SubscribeToTask(
                    a2a_pb2.SubscribeToTaskRequest(id="a\tb\\c"), metadata=AUTHORIZED[:1], timeout=CALL_SECONDS
                ),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    if isinstance(call, grpc.aio.UnaryStreamCall):
                        async for _ in call:
                            pass
                    else:
                        await call
                details = dict(refused.value.trailing_metadata() or ())["grpc-status-details-bin"]
                ended.append((refused.value.code(), refused.value.details() or "", details))
    finally:
        await server.stop(0)
    return ended


async def test_a_servicers_error_through_a_users_interceptor_is_escaped_once() -> None:
    """The status of an error the servicer raised is the same with a user's interceptor as without: its message and
    ErrorInfo, which escape what the caller sent, are not escaped a second time on the way out through it."""
    plain = await _task_not_found([])
    assert plain[0][:2] == (grpc.StatusCode.NOT_FOUND, "task a\\tb\\\\c not found")
    assert await _task_not_found([PassingOn()]) == plain
