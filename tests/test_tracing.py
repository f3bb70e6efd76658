"""OpenTelemetry tracing (the otel extra): an agent chain is one trace, from our client's span through the
relay's server, agent and client spans to the downstream server's; tracing off costs nothing."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import BASE_CARD, LOOPBACK_PUSH, V1
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from process import REPO, child_env, run_serve, send_text, serve_process
from test_tenants import TENANT_CARD

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.agents.relay import RelayAgent
from a2a_grpc.client import A2AClient
from a2a_grpc.errors import TaskNotFoundError
from a2a_grpc.ext import timestamp, traceability
from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.interceptors.server import ServerChain
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.telemetry.tracing import AGENT_SPAN, STORE_WRITE_SPAN, Tracing

BOTH = (traceability.URI, timestamp.URI)
SERVICE = "lf.a2a.v1.A2AService"
SPAN_SECONDS = 10.0
POLL_SECONDS = 0.01
StartServer = Callable[..., Awaitable[A2AServer]]


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """A provider of the test's own, given to the servers and clients explicitly: the global one is never set."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
async def start(tmp_path: Path, provider: TracerProvider) -> AsyncIterator[StartServer]:
    """Start servers on free loopback ports, tracing into `provider` unless `tracing=False`."""
    servers: list[A2AServer] = []

    async def start(agent: AgentExecutor, *, tracing: bool = True, card_json: dict[str, Any] = BASE_CARD) -> A2AServer:
        card = tmp_path / f"card-{len(servers)}.json"
        card.write_text(json.dumps(card_json))
        settings = ServerSettings(
            listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url="memory", push=LOOPBACK_PUSH
        )
        settings.tracing = tracing
        server = A2AServer(settings, agent=agent, tracer_provider=provider)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop(0)


async def _chain(start: StartServer, *, tracing: bool = True) -> tuple[A2AServer, A2AServer]:
    """A relay agent on `a` that asks the relay agent on `b`."""
    b = await start(RelayAgent(), tracing=tracing)
    a = await start(RelayAgent(downstream=b.grpc_target, downstream_timeout=10), tracing=tracing)
    return a, b


async def _spans(
    exporter: InMemorySpanExporter, wanted: Callable[[Sequence[ReadableSpan]], bool]
) -> list[ReadableSpan]:
    """The finished spans once `wanted` holds of them: an agent's span and the last store writes may end
    just after the call's answer has left."""
    for _ in range(int(SPAN_SECONDS / POLL_SECONDS)):
        spans = list(exporter.get_finished_spans())
        if wanted(spans):
            return spans
        await asyncio.sleep(POLL_SECONDS)
    raise AssertionError(f"not all spans ended within {SPAN_SECONDS}s: {[(s.name, s.kind) for s in spans]}")


def _one(spans: Sequence[ReadableSpan], name: str, kind: SpanKind, parent: ReadableSpan | None) -> ReadableSpan:
    """The one span named `name`, of `kind`, whose parent is `parent` (None: a root span)."""
    found = [
        span
        for span in spans
        if span.name == name
        and span.kind == kind
        and (
            span.parent.span_id == parent.context.span_id
            if span.parent is not None and parent is not None
            else span.parent is None and parent is None
        )
    ]
    assert len(found) == 1, [(s.name, s.kind, s.parent) for s in spans]
    return found[0]


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return {
        key: tuple(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
        for key, value in (span.attributes or {}).items()
    }


def _complete_chain(spans: Sequence[ReadableSpan]) -> bool:
    """Both servers' spans, both agents' and both client spans (ours, the relay's) are in."""
    kinds = [span.kind for span in spans]
    agents = [span for span in spans if span.name == AGENT_SPAN]
    return kinds.count(SpanKind.SERVER) == 2 and kinds.count(SpanKind.CLIENT) == 2 and len(agents) == 2


def _check_chain(spans: Sequence[ReadableSpan], method: str, task: a2a_pb2.Task) -> ReadableSpan:
    """The spans of a call of `method` into the relay `a` (answering `task`) form one trace:
    client -> a's server span -> a's agent -> a's client span -> b's server span -> b's agent; returns a's
    server span."""
    client = _one(spans, f"{SERVICE}/{method}", SpanKind.CLIENT, None)
    a_server = _one(spans, f"{SERVICE}/{method}", SpanKind.SERVER, client)
    a_agent = _one(spans, AGENT_SPAN, SpanKind.INTERNAL, a_server)
    relay_client = _one(spans, f"{SERVICE}/SendMessage", SpanKind.CLIENT, a_agent)
    b_server = _one(spans, f"{SERVICE}/SendMessage", SpanKind.SERVER, relay_client)
    b_agent = _one(spans, AGENT_SPAN, SpanKind.INTERNAL, b_server)
    assert {span.context.trace_id for span in spans} == {client.context.trace_id}, "one trace"

    for span in (client, a_server):
        attributes = _attributes(span)
        assert attributes["rpc.system"] == "grpc"
        assert attributes["rpc.service"] == SERVICE
        assert attributes["rpc.method"] == method
        assert attributes["rpc.grpc.status_code"] == 0
        assert attributes["a2a.task_id"] == task.id
        assert attributes["a2a.context_id"] == task.context_id
        assert attributes["a2a.extensions.activated"] == BOTH
        assert span.status.status_code == StatusCode.UNSET
    assert _attributes(a_server)["a2a.version"] == "1.0"
    assert _attributes(a_agent)["a2a.task_id"] == task.id
    assert _attributes(a_agent)["a2a.task.state"] == "TASK_STATE_COMPLETED"

    # the relay forwarded both extensions downstream, and b's task is the one b's spans name
    b_attributes = _attributes(b_server)
    b_task_id = b_attributes["a2a.task_id"]
    assert b_task_id and b_task_id != task.id
    assert b_attributes["a2a.extensions.activated"] == BOTH
    assert _attributes(relay_client)["a2a.task_id"] == b_task_id
    assert _attributes(relay_client)["a2a.extensions.activated"] == BOTH
    assert _attributes(b_agent)["a2a.task_id"] == b_task_id

    # every store write is a span under the run it belongs to; the last ones store the final state
    writes = [span for span in spans if span.name == STORE_WRITE_SPAN]
    by_task: dict[str, set[int]] = {}
    for write in writes:
        assert write.parent is not None
        assert write.parent.span_id in {
            a_server.context.span_id,
            a_agent.context.span_id,
            b_server.context.span_id,
            b_agent.context.span_id,
        }
        by_task.setdefault(str(_attributes(write)["a2a.task_id"]), set()).add(
            int(_attributes(write)["a2a.store.version"])
        )
    assert set(by_task) == {task.id, b_task_id}
    return a_server


async def test_a_unary_call_through_a_relay_is_one_trace(
    start: StartServer, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    a, _ = await _chain(start)
    async with A2AClient(a.grpc_target, extensions=BOTH, tracer_provider=provider) as client:
        result = await client.send_message("three little words")
    task = result.value.task
    assert task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "3 words\ndownstream: 3 words"
    spans = await _spans(exporter, _complete_chain)
    _check_chain(spans, "SendMessage", task)


async def test_a_streaming_call_through_a_relay_is_one_trace(
    start: StartServer, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    a, _ = await _chain(start)
    async with A2AClient(a.grpc_target, extensions=BOTH, tracer_provider=provider) as client:
        events = await client.send_streaming_message("three little words").collect()
    assert events[0].HasField("task")
    final = events[-1].status_update
    assert final.status.state == a2a_pb2.TASK_STATE_COMPLETED
    spans = await _spans(exporter, _complete_chain)
    a_server = _check_chain(spans, "SendStreamingMessage", events[0].task)
    client_span = _one(spans, f"{SERVICE}/SendStreamingMessage", SpanKind.CLIENT, None)
    assert _attributes(a_server)["a2a.stream.events"] == len(events)
    assert _attributes(client_span)["a2a.stream.events"] == len(events)


async def test_a_server_continues_the_traceparent_a_caller_sends(
    start: StartServer, exporter: InMemorySpanExporter
) -> None:
    b = await start(RelayAgent())
    trace_id, parent_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    headers = (*V1, ("traceparent", f"00-{trace_id}-{parent_id}-01"))
    async with grpc.aio.insecure_channel(b.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        response = await stub.SendMessage(a2a_pb2.SendMessageRequest(message=_message("hi")), metadata=headers)
    spans = await _spans(exporter, lambda spans: any(s.name == AGENT_SPAN for s in spans))
    [server] = [s for s in spans if s.kind == SpanKind.SERVER]
    assert server.context.trace_id == int(trace_id, 16)
    assert server.parent is not None and server.parent.span_id == int(parent_id, 16) and server.parent.is_remote
    assert _attributes(server)["a2a.task_id"] == response.task.id
    assert {s.context.trace_id for s in spans} == {int(trace_id, 16)}


async def test_a_tenants_call_span_names_its_tenant(start: StartServer, exporter: InMemorySpanExporter) -> None:
    b = await start(RelayAgent(), card_json=TENANT_CARD)
    async with grpc.aio.insecure_channel(b.grpc_target) as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        await stub.SendMessage(a2a_pb2.SendMessageRequest(tenant="acme", message=_message("hi")), metadata=V1)
    spans = await _spans(exporter, lambda spans: any(s.name == AGENT_SPAN for s in spans))
    [server] = [s for s in spans if s.kind == SpanKind.SERVER]
    assert _attributes(server)["a2a.tenant"] == "acme"


async def test_a_refused_call_is_the_callers_error_not_the_servers(
    start: StartServer, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    b = await start(RelayAgent())
    async with A2AClient(b.grpc_target, tracer_provider=provider) as client:
        with pytest.raises(TaskNotFoundError):
            await client.get_task("no-such-task")
    spans = await _spans(exporter, lambda spans: len(spans) == 2)
    client_span = _one(spans, f"{SERVICE}/GetTask", SpanKind.CLIENT, None)
    server_span = _one(spans, f"{SERVICE}/GetTask", SpanKind.SERVER, client_span)
    for span in (client_span, server_span):
        assert _attributes(span)["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
        assert _attributes(span)["a2a.error.reason"] == "TASK_NOT_FOUND"
    assert client_span.status.status_code == StatusCode.ERROR  # the call failed, for the caller
    assert server_span.status.status_code == StatusCode.UNSET  # the server did its job


async def test_without_tracing_nothing_is_traced_and_the_chain_has_no_tracing_layer(
    start: StartServer, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    a, b = await _chain(start, tracing=False)
    assert a.tracing is None and b.tracing is None
    async with A2AClient(a.grpc_target, extensions=BOTH) as client:
        assert client.tracer is None
        result = await client.send_message("three little words")
    assert result.value.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    await asyncio.sleep(0.1)
    assert exporter.get_finished_spans() == ()
    registry = ExtensionRegistry([])
    assert ServerChain(registry)._observer is None, "nothing observes calls: no telemetry layer at all"
    assert ServerChain(registry, tracing=Tracing(provider))._observer is not None


def test_a_server_without_tracing_never_imports_opentelemetry() -> None:
    script = textwrap.dedent(
        """
        import asyncio, sys
        from a2a_grpc.client import A2AClient
        from a2a_grpc.server import A2AServer, ServerSettings

        async def main():
            server = A2AServer(ServerSettings(listen="127.0.0.1:0", http_listen="", store_url="memory"))
            await server.start()
            try:
                async with A2AClient(server.grpc_target, timeout=30) as client:
                    await client.send_message("hello")
                    await client.send_streaming_message("hello").collect()
            finally:
                await server.stop(0)
            print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_with_tracing_but_without_the_otel_extra_exits_2_with_one_line(tmp_path: Path) -> None:
    script = "import sys; sys.modules['opentelemetry'] = None\nfrom a2a_grpc.cli import main\nsys.exit(main())"
    args = ["serve", "--tracing", "--store", "memory", "--listen", "127.0.0.1:0", "--http-listen", ""]
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=tmp_path,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "a2a-grpc: tracing needs OpenTelemetry: pip install 'a2a-grpc[otel]' (no module named opentelemetry)"
    ]


def test_serve_with_tracing_and_an_unknown_exporter_exits_2_with_one_line(tmp_path: Path) -> None:
    done = run_serve(
        ["--store", "memory", "--listen", "127.0.0.1:0", "--http-listen", ""],
        cwd=tmp_path,
        env={"A2A_GRPC_TRACING": "1", "OTEL_TRACES_EXPORTER": "nosuch"},
    )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith("a2a-grpc: tracing: OTEL_TRACES_EXPORTER=nosuch: no such span exporter is installed"), line


def test_serve_with_tracing_exports_the_spans_the_environment_asks_for(tmp_path: Path) -> None:
    with serve_process(
        tmp_path, "--tracing", env={"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "traced"}
    ) as server:
        task = send_text(server.grpc_target, "hello")
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0, server.stderr
    exported = server.stdout
    assert f'"name": "{SERVICE}/SendMessage"' in exported and '"kind": "SpanKind.SERVER"' in exported, exported
    assert f'"a2a.task_id": "{task.id}"' in exported
    assert f'"name": "{AGENT_SPAN}"' in exported and f'"name": "{STORE_WRITE_SPAN}"' in exported
    assert '"service.name": "traced"' in exported


def _message(text: str) -> a2a_pb2.Message:
    return a2a_pb2.Message(message_id=f"m-{text}", role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)])
