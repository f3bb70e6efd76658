"""Prometheus metrics, scraped over HTTP from `/metrics` of real servers after real traffic.

Covered: calls by method and code, the latency histogram, extension activations and refusals by URI
(declared URIs only), streams open and the events they sent, tasks by state (read from the task
manager at each scrape), push deliveries (delivered, retried, failed), the store-commit hook, that
every server keeps a registry of its own, and that `metrics=False` serves no `/metrics`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import aiohttp
import pytest
from aiohttp import web
from conftest import V1, StartServer, send_request
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from rpc_helpers import TEST_SECONDS, Clients, read_all, rpc_error
from test_access_log import EXTENSION_CARD, OPTIONAL, REQUIRED, UNDECLARED, HeldAgent

from a2a_grpc.call import CallContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer
from a2a_grpc.telemetry import METRICS_PATH, Metrics
from a2a_grpc.telemetry.outcome import OK

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(server: A2AServer) -> Samples:
    """Every sample `/metrics` serves, by (name, labels)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{server.http_target}{METRICS_PATH}") as response,
    ):
        assert response.status == 200, response.status
        assert response.content_type == "text/plain"
        text = await response.text()
    return parse(text)


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def labelled(samples: Samples, name: str, label: str) -> set[str]:
    return {dict(labels)[label] for sample_name, labels in samples if sample_name == name}


async def until(server: A2AServer, holds: Callable[[Samples], bool], what: str) -> Samples:
    """Scrape until `holds` does (bounded): for what ends on the server after the client saw it end."""
    try:
        async with asyncio.timeout(TEST_SECONDS):
            while True:
                samples = await scrape(server)
                if holds(samples):
                    return samples
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"metrics never showed {what}") from None


async def test_calls_latency_and_extensions_are_counted_by_method_code_and_uri(
    start_server: StartServer, clients: Clients
) -> None:
    server = await start_server(card=EXTENSION_CARD)
    stub = clients.stub(server)
    both = (*V1, ("a2a-extensions", f"{REQUIRED}, {OPTIONAL}, {UNDECLARED}"))
    optional_only = (*V1, ("a2a-extensions", f"{OPTIONAL},{UNDECLARED}"))
    async with asyncio.timeout(TEST_SECONDS):
        for _ in range(2):
            await stub.SendMessage(send_request(), metadata=both)
        await rpc_error(stub.SendMessage(send_request(), metadata=optional_only))
        await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), metadata=both))
        samples = await scrape(server)
    assert value(samples, "a2a_calls_total", method="SendMessage", code="OK") == 2
    assert value(samples, "a2a_calls_total", method="SendMessage", code="FAILED_PRECONDITION") == 1
    assert value(samples, "a2a_calls_total", method="GetTask", code="NOT_FOUND") == 1
    assert labelled(samples, "a2a_calls_total", "code") == {"OK", "FAILED_PRECONDITION", "NOT_FOUND"}
    assert value(samples, "a2a_call_duration_seconds_count", method="SendMessage") == 3
    assert value(samples, "a2a_call_duration_seconds_count", method="GetTask") == 1
    assert value(samples, "a2a_call_duration_seconds_count", method="ListTasks") == 0  # there from the start
    assert 0 < value(samples, "a2a_call_duration_seconds_sum", method="SendMessage") < TEST_SECONDS
    assert value(samples, "a2a_call_duration_seconds_bucket", method="SendMessage", le="+Inf") == 3
    # the GetTask activated both too: activation is the call's, whatever its answer
    assert value(samples, "a2a_extension_activations_total", uri=REQUIRED) == 3
    assert value(samples, "a2a_extension_activations_total", uri=OPTIONAL) == 3
    assert value(samples, "a2a_extension_refusals_total", uri=REQUIRED) == 1
    assert labelled(samples, "a2a_extension_activations_total", "uri") == {REQUIRED, OPTIONAL}  # never UNDECLARED
    assert labelled(samples, "a2a_extension_refusals_total", "uri") == {REQUIRED}


async def test_streams_events_and_task_states_move_as_a_task_runs(start_server: StartServer, clients: Clients) -> None:
    agent = HeldAgent()
    server = await start_server(agent=agent)
    stub = clients.stub(server)
    try:
        async with asyncio.timeout(TEST_SECONDS):
            samples = await scrape(server)
            assert labelled(samples, "a2a_live_tasks", "state") >= {
                "submitted",
                "working",
                "completed",
                "input_required",
            }
            assert value(samples, "a2a_live_tasks", state="working") == 0
            configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
            task = (await stub.SendMessage(send_request(configuration=configuration), metadata=V1)).task
            call = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=V1)
            first = await call.read()
            assert first.task.id == task.id
            samples = await until(
                server, lambda s: value(s, "a2a_live_tasks", state="working") == 1, "the task working"
            )
            assert value(samples, "a2a_streams_active", method="SubscribeToTask") == 1
            assert value(samples, "a2a_stream_events_sent_total", method="SubscribeToTask") == 1
            agent.release.set()
            events = [first, *await read_all(call)]
            samples = await until(
                server, lambda s: value(s, "a2a_live_tasks", state="working") == 0, "the task no longer held"
            )
    finally:
        agent.release.set()
    assert value(samples, "a2a_streams_active", method="SubscribeToTask") == 0
    assert value(samples, "a2a_stream_events_sent_total", method="SubscribeToTask") == len(events) >= 2
    assert value(samples, "a2a_calls_total", method="SubscribeToTask", code="OK") == 1
    assert value(samples, "a2a_call_duration_seconds_count", method="SubscribeToTask") == 1


class Webhook:
    """Answers "/ok" 200, "/flaky" 503 (Retry-After: 0) to its first request then 200, "/gone" 404."""

    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.runner: web.AppRunner | None = None
        self.base = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.base = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def handle(self, request: web.Request) -> web.Response:
        self.hits[request.path] = self.hits.get(request.path, 0) + 1
        if request.path == "/gone":
            return web.Response(status=404)
        if request.path == "/flaky" and self.hits[request.path] == 1:
            return web.Response(status=503, headers={"Retry-After": "0"})
        return web.Response()


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    hook = Webhook()
    await hook.start()
    yield hook
    if hook.runner is not None:
        await hook.runner.cleanup()


async def test_push_deliveries_are_counted_delivered_retried_and_failed(
    start_server: StartServer, clients: Clients, webhook: Webhook
) -> None:
    server = await start_server()
    stub = clients.stub(server)
    for path in ("/ok", "/flaky", "/gone"):
        configuration = a2a_pb2.SendMessageConfiguration()
        configuration.task_push_notification_config.url = webhook.base + path
        await stub.SendMessage(send_request(configuration=configuration), metadata=V1, timeout=TEST_SECONDS)

    def settled(samples: Samples) -> bool:
        hits = webhook.hits
        ok, flaky, gone = (hits.get(path, 0) for path in ("/ok", "/flaky", "/gone"))
        return (
            ok > 0
            and flaky > 1
            and gone > 0
            and value(samples, "a2a_push_deliveries_total", outcome="delivered") == ok + flaky - 1
            and value(samples, "a2a_push_deliveries_total", outcome="retried") == 1
            and value(samples, "a2a_push_deliveries_total", outcome="failed") == gone
        )

    await until(server, settled, f"the deliveries the webhook saw ({webhook.hits})")


async def test_every_server_has_its_own_registry(start_server: StartServer, clients: Clients) -> None:
    busy, idle = await start_server(), await start_server()
    async with asyncio.timeout(TEST_SECONDS):
        await clients.stub(busy).SendMessage(send_request(), metadata=V1)
        assert value(await scrape(busy), "a2a_calls_total", method="SendMessage", code="OK") == 1
        assert value(await scrape(idle), "a2a_calls_total", method="SendMessage", code="OK") == 0


async def test_without_metrics_there_is_no_metrics_page(start_server: StartServer) -> None:
    server = await start_server(metrics=False)
    async with (
        asyncio.timeout(TEST_SECONDS),
        aiohttp.ClientSession() as session,
        session.get(f"http://{server.http_target}{METRICS_PATH}") as response,
    ):
        assert response.status == 404


def test_the_store_commit_hook_fills_its_histograms_from_its_first_call() -> None:
    metrics = Metrics()
    assert not any(name.startswith("a2a_store_") for name, _ in registry_samples(metrics))
    metrics.store_commit(0.002, 3)
    metrics.store_commit(0.0001, 1)
    samples = registry_samples(metrics)
    assert value(samples, "a2a_store_commit_seconds_count") == 2
    assert value(samples, "a2a_store_commit_writes_sum") == 4
    assert value(samples, "a2a_store_commit_writes_bucket", le="2.0") == 1


def registry_samples(metrics: Metrics) -> Samples:
    return parse(generate_latest(metrics.registry).decode())


def test_a_call_costs_the_metrics_a_few_microseconds() -> None:
    """The per-call work (a counter, a histogram, an activation) stays far below a call's own cost."""
    method = Metrics().method("SendMessage")
    call = CallContext(activated_extensions=(REQUIRED,))
    rounds = 20_000
    started = time.perf_counter()
    for _ in range(rounds):
        method.finished(OK, 0.001, call)
    per_call = (time.perf_counter() - started) / rounds
    assert per_call < 50e-6, f"{per_call * 1e6:.1f} µs per call"
