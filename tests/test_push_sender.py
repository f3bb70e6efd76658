"""One delivery attempt against a real aiohttp webhook on 127.0.0.1: what counts as delivered, retry
or give up, the headers sent, redirects never followed, timeouts, and the backoff's bounds."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from urllib.parse import quote

import pytest
from aiohttp import web
from google.protobuf import json_format
from test_push_guard import LoopbackOnlyConnector, TableResolver

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.push import AddressPolicy, Outcome, PushSender, backoff, safe_host
from a2a_grpc.push.slots import KeyedSlots, authority

LOOPBACK = AddressPolicy(allow=["127.0.0.1"], allow_http=True)


class Webhook:
    """A loopback webhook server; each path answers differently, and every request is kept."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.release = asyncio.Event()
        self.runner: web.AppRunner | None = None
        self.base = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.base = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.path, dict(request.headers), await request.read()))
        name = request.match_info["name"]
        if name == "hang":
            await self.release.wait()
        if name == "redirect":
            raise web.HTTPFound(f"{self.base}/target")
        statuses = {"ok": 200, "accepted": 202, "unavailable": 503, "busy": 429, "timeout": 408, "missing": 404}
        headers = {"Retry-After": request.query["retry_after"]} if "retry_after" in request.query else {}
        return web.Response(status=statuses.get(name, 400), headers=headers)

    def paths(self) -> list[str]:
        return [path for path, _, _ in self.requests]


@pytest.fixture
async def webhook() -> AsyncIterator[Webhook]:
    server = Webhook()
    await server.start()
    yield server
    server.release.set()
    assert server.runner is not None
    await server.runner.cleanup()


@pytest.fixture
async def sender() -> AsyncIterator[PushSender]:
    sender = PushSender(LOOPBACK, timeout_seconds=5)
    yield sender
    await sender.close()


def config(url: str, token: str = "tok-123") -> a2a_pb2.TaskPushNotificationConfig:
    return a2a_pb2.TaskPushNotificationConfig(
        id="cfg",
        task_id="task-1",
        url=url,
        token=token,
        authentication=a2a_pb2.AuthenticationInfo(scheme="Bearer", credentials="s3cr3t"),
    )


def event_body() -> bytes:
    event = a2a_pb2.StreamResponse(
        status_update=a2a_pb2.TaskStatusUpdateEvent(
            task_id="task-1", context_id="ctx", status=a2a_pb2.TaskStatus(state=a2a_pb2.TASK_STATE_COMPLETED)
        )
    )
    return json_format.MessageToJson(event, indent=None).encode()


async def test_2xx_is_delivered_with_the_headers_and_body(webhook: Webhook, sender: PushSender) -> None:
    for path in ("ok", "accepted"):
        attempt = await sender.post(config(f"{webhook.base}/{path}"), event_body(), "task-1")
        assert attempt.outcome is Outcome.DELIVERED
        assert attempt.delivered and not attempt.retry and not attempt.give_up
    _, headers, body = webhook.requests[0]
    assert headers["Content-Type"] == "application/a2a+json"
    assert headers["Authorization"] == "Bearer s3cr3t"
    assert headers["X-A2A-Notification-Token"] == "tok-123"
    assert headers["A2A-Notification-Token"] == "tok-123"
    event = json_format.Parse(body, a2a_pb2.StreamResponse())
    assert event.status_update.status.state == a2a_pb2.TASK_STATE_COMPLETED


async def test_no_token_or_authentication_sends_neither(webhook: Webhook, sender: PushSender) -> None:
    bare = a2a_pb2.TaskPushNotificationConfig(task_id="task-1", url=f"{webhook.base}/ok")
    assert (await sender.post(bare, event_body(), "task-1")).delivered
    _, headers, _ = webhook.requests[0]
    assert not {"Authorization", "X-A2A-Notification-Token", "A2A-Notification-Token"} & set(headers)


async def test_a_token_that_would_split_headers_gives_up(webhook: Webhook, sender: PushSender) -> None:
    attempt = await sender.post(config(f"{webhook.base}/ok", token="tok\r\nX-Evil: 1"), event_body(), "task-1")
    assert attempt.give_up
    assert webhook.requests == []


@pytest.mark.parametrize(("path", "status"), [("unavailable", 503), ("timeout", 408), ("busy", 429)])
async def test_retryable_statuses(webhook: Webhook, sender: PushSender, path: str, status: int) -> None:
    attempt = await sender.post(config(f"{webhook.base}/{path}"), event_body(), "task-1")
    assert attempt.retry
    assert attempt.status == status
    assert attempt.retry_after is None


async def test_retry_after_in_seconds_and_as_a_date(webhook: Webhook, sender: PushSender) -> None:
    attempt = await sender.post(config(f"{webhook.base}/busy?retry_after=2"), event_body(), "task-1")
    assert attempt.retry and attempt.retry_after == 2
    later = quote(format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True))  # a URL holds no space
    attempt = await sender.post(config(f"{webhook.base}/unavailable?retry_after={later}"), event_body(), "task-1")
    assert attempt.retry_after is not None and 25 <= attempt.retry_after <= 30
    attempt = await sender.post(config(f"{webhook.base}/busy?retry_after=99999999"), event_body(), "task-1")
    assert attempt.retry_after == 3600
    attempt = await sender.post(config(f"{webhook.base}/busy?retry_after=soon"), event_body(), "task-1")
    assert attempt.retry and attempt.retry_after is None


async def test_other_4xx_gives_up(webhook: Webhook, sender: PushSender) -> None:
    attempt = await sender.post(config(f"{webhook.base}/missing"), event_body(), "task-1")
    assert attempt.give_up
    assert attempt.status == 404


async def test_a_redirect_is_not_followed(webhook: Webhook, sender: PushSender) -> None:
    attempt = await sender.post(config(f"{webhook.base}/redirect"), event_body(), "task-1")
    assert attempt.give_up
    assert attempt.status == 302
    assert webhook.paths() == ["/redirect"]


async def test_a_receiver_that_never_answers_is_retried_after_the_timeout(webhook: Webhook) -> None:
    sender = PushSender(LOOPBACK, timeout_seconds=0.2)
    try:
        attempt = await asyncio.wait_for(sender.post(config(f"{webhook.base}/hang"), event_body(), "task-1"), 5)
    finally:
        await sender.close()
    assert attempt.retry
    assert attempt.reason == "timeout"


async def test_a_refused_connection_is_retried(sender: PushSender) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    attempt = await sender.post(config(f"http://127.0.0.1:{port}/ok"), event_body(), "task-1")
    assert attempt.retry
    assert "s3cr3t" not in attempt.reason and str(port) not in attempt.reason


async def test_a_refused_destination_gives_up_without_dialling() -> None:
    attempts: list[str] = []
    sender = PushSender(
        AddressPolicy(allow_http=True),
        resolver=TableResolver({"metadata.test": ["169.254.169.254"]}),
        connector_factory=lambda resolver: LoopbackOnlyConnector(resolver, attempts),
    )
    try:
        for url in ("http://10.0.0.1/hook", "https://169.254.169.254/latest", "http://metadata.test/latest"):
            attempt = await sender.post(config(url), event_body(), "task-1")
            assert attempt.give_up
            assert attempt.reason.startswith("refused")
    finally:
        await sender.close()
    assert attempts == []


def test_backoff_bounds() -> None:
    for attempt in range(12):
        for _ in range(50):
            assert 0 <= backoff(attempt) <= min(60.0, 0.5 * 2**attempt)
    assert backoff(10_000) <= 60.0
    assert backoff(-1) <= 0.5
    assert all(5 <= backoff(0, retry_after=5) <= 60 for _ in range(50))
    assert backoff(0, retry_after=1_000) == 60.0
    assert backoff(3, base=1, cap=4) <= 4


def test_safe_host_drops_everything_but_the_host() -> None:
    assert safe_host("https://user:pw@hooks.example.com:8443/path?token=s3cr3t") == "hooks.example.com"
    assert safe_host("https://[::1]/x") == "::1"
    assert safe_host("https://a\\@b/") == "<invalid url>"


async def test_host_slots_bound_each_host_alone_and_forget_idle_hosts() -> None:
    slots = KeyedSlots(1)
    entered: list[str] = []

    async def request(host: str, release: asyncio.Event) -> None:
        async with slots.slot(host):
            entered.append(host)
            await release.wait()

    first, second, other = asyncio.Event(), asyncio.Event(), asyncio.Event()
    running = [asyncio.ensure_future(request(host, gate)) for host, gate in (("a:1", first), ("a:1", second))]
    running.append(asyncio.ensure_future(request("b:2", other)))
    for _ in range(3):
        await asyncio.sleep(0)
    assert entered == ["a:1", "b:2"], "a:1's second request waits; b:2 does not wait for a:1"
    first.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert entered == ["a:1", "b:2", "a:1"]
    second.set()
    other.set()
    await asyncio.gather(*running)
    assert len(slots) == 0, "hosts nobody is sending to are forgotten"


def test_authority_is_the_host_and_port_of_a_url() -> None:
    assert authority("https://hooks.example:8443/a/b?c") == "hooks.example:8443"
    assert authority("http://127.0.0.1") == "127.0.0.1"
    assert authority("not a url") == "not a url"
