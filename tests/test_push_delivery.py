"""Push notifications end to end: a real server on 127.0.0.1 runs the writer agent, and a real aiohttp webhook
on 127.0.0.1 receives what the push worker posts. Checked: one notification per status change and artifact
update, in the order of the task's event log, with the token, credentials and a signature that verifies
against the server's JWKS; retries and their backoff, final refusals, a webhook that never answers, status
only; the SSRF guard through the RPCs; redirects not followed; no secret in any log line.

Nothing leaves loopback and no DNS query is made: refused webhooks are literal addresses (host names are
the guard's own tests, with a table resolver), and delivered ones go to 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import socket
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import jwt
import pytest
from aiohttp import web
from conftest import LOOPBACK_PUSH, V1, StartServer, bad_request
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from google.protobuf import json_format
from process import free_port
from rpc_helpers import Metadata, Stub, make_stub, read_all, rpc_error
from test_agent_api import ReplyingAgent
from test_push_guard import LoopbackOnlyConnector
from test_readme import README, fenced_blocks
from test_store_push import OWNER, Tasks, config

import a2a_grpc.push
from a2a_grpc.agents.writer import CHUNKS, WriterAgent
from a2a_grpc.card import GRPC_BINDING
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import RESUME_EXTENSION_URI, STREAM_AFTER_HEADER
from a2a_grpc.push import CONTENT_TYPE, SIGNATURE_HEADER, TOKEN_HEADERS, NotificationVerifier
from a2a_grpc.push.guard import AddressPolicy
from a2a_grpc.push.service import JWKS_PATH, PushSettings
from a2a_grpc.push.worker import DeliverySettings, PushWorker
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store import MemoryStore
from a2a_grpc.store.base import EVENT_PAGE_BYTES, PushTarget, TaskEvent

WRITER_CARD = README.parent / "examples" / "writer-card.json"
WAIT_SECONDS = 15.0  # the bound on any one wait for notifications
SETTLE_SECONDS = 0.5  # how long to watch for notifications that should not come
RESUME = (*V1, ("a2a-extensions", RESUME_EXTENSION_URI))
TOKEN = "tok-6b1f0c2e-notification-token"
CREDENTIALS = "cred-9d4e7a51-webhook-credentials"
# The writer's events: INPUT_REQUIRED; then WORKING (the answer), WORKING (its message), each chunk and a
# WORKING after it, COMPLETED.
WRITER_EVENTS = 1 + 2 + 2 * CHUNKS + 1
WRITER_STATUS_EVENTS = WRITER_EVENTS - CHUNKS


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived

    def event(self) -> a2a_pb2.StreamResponse:
        return json_format.Parse(self.body.decode(), a2a_pb2.StreamResponse())


@dataclass
class Receiver:
    """A webhook on 127.0.0.1 that keeps every request. A path answers what `plans[path]` lists, one
    status per request, then `200`; "/hang" never answers (until the test ends), "/redirect" sends a 302
    to "/target". A status given as (status, retry_after) also sends Retry-After."""

    plans: dict[str, list[int | tuple[int, str]]] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    runner: web.AppRunner | None = None
    base: str = ""
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_post("/{name}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)  # an access log line would show the URL's query
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", port).start()
        self.base = f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def stop(self) -> None:
        self.release.set()
        if self.runner is not None:
            await self.runner.cleanup()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.hits.append(Hit(request.path, dict(request.headers), await request.read(), time.monotonic()))
        self.changed.set()
        if request.path == "/hang":
            await self.release.wait()
        if request.path == "/redirect":
            raise web.HTTPFound(f"{self.base}/target")
        plan = self.plans.get(request.path, [])
        step = plan.pop(0) if plan else 200
        status, retry_after = step if isinstance(step, tuple) else (step, None)
        return web.Response(status=status, headers={"Retry-After": retry_after} if retry_after else None)

    def url(self, path: str) -> str:
        return self.base + path

    def at(self, path: str) -> list[Hit]:
        return [hit for hit in self.hits if hit.path == path]

    async def wait_for(self, done: Callable[[], bool], what: str, seconds: float = WAIT_SECONDS) -> None:
        try:
            async with asyncio.timeout(seconds):
                while not done():
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            paths = [hit.path for hit in self.hits]
            raise AssertionError(f"no {what} within {seconds}s; requests so far: {paths}") from None

    async def wait_count(self, path: str, count: int) -> None:
        await self.wait_for(lambda: len(self.at(path)) >= count, f"{count} requests to {path}")


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    hook = Receiver()
    await hook.start()
    yield hook
    await hook.stop()


def writer_card() -> dict[str, Any]:
    card: dict[str, Any] = json_format.MessageToDict(json_format.Parse(WRITER_CARD.read_text(), a2a_pb2.AgentCard()))
    return card


async def start_writer(start_server: StartServer, push: PushSettings = LOOPBACK_PUSH) -> A2AServer:
    return await start_server(card=writer_card(), agent=WriterAgent(chunk_delay=0.01), push=push)


@asynccontextmanager
async def writer_on_fixed_port(push: PushSettings) -> AsyncIterator[A2AServer]:
    """The writer on a free port given as such (not port 0): its card's GRPC interface, the issuer of its
    signatures, is known before it starts, as in a deployment."""
    server = A2AServer(
        ServerSettings(
            listen=f"127.0.0.1:{free_port()}",
            http_listen="127.0.0.1:0",
            card_path=str(WRITER_CARD),
            store_url="memory",
            push=push,
        ),
        agent=WriterAgent(chunk_delay=0.01),
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop(0)


def push_config(url: str, task_id: str = "", **fields: Any) -> a2a_pb2.TaskPushNotificationConfig:
    fields.setdefault("token", TOKEN)
    fields.setdefault("authentication", a2a_pb2.AuthenticationInfo(scheme="Bearer", credentials=CREDENTIALS))
    return a2a_pb2.TaskPushNotificationConfig(url=url, task_id=task_id, **fields)


def message(text: str, task_id: str = "") -> a2a_pb2.Message:
    return a2a_pb2.Message(
        message_id=f"m-{time.monotonic_ns()}", task_id=task_id, role=a2a_pb2.ROLE_USER, parts=[a2a_pb2.Part(text=text)]
    )


async def send(
    stub: Stub,
    sent: a2a_pb2.Message,
    config: a2a_pb2.TaskPushNotificationConfig | None = None,
    metadata: Metadata = V1,
) -> a2a_pb2.SendMessageResponse:
    """SendMessage of `sent`, with `config` in the request."""
    configuration = a2a_pb2.SendMessageConfiguration()
    if config is not None:
        configuration.task_push_notification_config.CopyFrom(config)
    request = a2a_pb2.SendMessageRequest(message=sent, configuration=configuration)
    response: a2a_pb2.SendMessageResponse = await stub.SendMessage(request, metadata=metadata, timeout=WAIT_SECONDS)
    return response


async def ask(
    stub: Stub, config: a2a_pb2.TaskPushNotificationConfig | None = None, metadata: Metadata = V1
) -> a2a_pb2.Task:
    """The writer's first turn (the topic), with `config` in the request: the task, waiting for a tone."""
    response = await send(stub, message("the sea"), config, metadata)
    assert response.task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED
    return response.task


async def answer(stub: Stub, task_id: str, config: a2a_pb2.TaskPushNotificationConfig | None = None) -> a2a_pb2.Task:
    """The writer's second turn (the tone), with `config` in the request: the task, COMPLETED."""
    response = await send(stub, message("calm", task_id), config)
    assert response.task.status.state == a2a_pb2.TASK_STATE_COMPLETED
    return response.task


async def event_log(stub: Stub, task_id: str) -> list[a2a_pb2.StreamResponse]:
    """Every event of the task's log, as SubscribeToTask replays it after event 0 (without its numbers)."""
    call = stub.SubscribeToTask(
        a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=(*RESUME, (STREAM_AFTER_HEADER, "0")), timeout=WAIT_SECONDS
    )
    events = [event async for event in call]
    assert events[0].HasField("task")  # the task as it is now, then the log
    return [unnumbered(event) for event in events[1:]]


def unnumbered(event: a2a_pb2.StreamResponse) -> a2a_pb2.StreamResponse:
    payload = getattr(event, event.WhichOneof("payload") or "")
    del payload.metadata.fields[RESUME_EXTENSION_URI]
    if not payload.metadata.fields:
        payload.ClearField("metadata")
    return event


def kinds(events: list[a2a_pb2.StreamResponse]) -> list[str]:
    """Each event as "artifact" or its status's state name."""
    return [
        "artifact" if event.HasField("artifact_update") else a2a_pb2.TaskState.Name(event.status_update.status.state)
        for event in events
    ]


WRITER_KINDS = [
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_WORKING",
    "TASK_STATE_WORKING",
    *(["artifact", "TASK_STATE_WORKING"] * CHUNKS),
    "TASK_STATE_COMPLETED",
]


def events_of(hits: list[Hit]) -> list[a2a_pb2.StreamResponse]:
    return [hit.event() for hit in hits]


def issuer_of(server: A2AServer) -> str:
    return next(i.url for i in server.card.supported_interfaces if i.protocol_binding == GRPC_BINDING)


def private_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def write_pem(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> str:
    path.write_bytes(private_pem(key))
    return str(path)


async def fetch_jwks(server: A2AServer) -> tuple[dict[str, Any], str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{server.http_target}{JWKS_PATH}") as response,
    ):
        assert response.status == 200
        document: dict[str, Any] = await response.json()
        return document, response.headers.get("Cache-Control", "")


async def no_more_requests(receiver: Receiver, count: int) -> None:
    """Nothing arrives for a while after the `count` requests the test expects."""
    await asyncio.sleep(SETTLE_SECONDS)
    assert len(receiver.hits) == count, [hit.path for hit in receiver.hits]


# ---- what is delivered ------------------------------------------------------------------------------


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
async def test_each_event_is_notified_once_in_order_signed_with_the_token_and_credentials(
    receiver: Receiver, tmp_path: Path, key_type: str
) -> None:
    key = ec.generate_private_key(ec.SECP256R1()) if key_type == "ec" else rsa.generate_private_key(65537, 2048)
    push = PushSettings(allow=("127.0.0.1",), allow_http=True, signing_keys=(write_pem(tmp_path / "push.pem", key),))
    url = receiver.url("/hook")
    async with writer_on_fixed_port(push) as server, grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = await ask(stub, push_config(url))
        await answer(stub, task.id)
        await receiver.wait_count("/hook", WRITER_EVENTS)
        logged = await event_log(stub, task.id)
        await no_more_requests(receiver, WRITER_EVENTS)
        issuer = issuer_of(server)
        jwks, cache_control = await fetch_jwks(server)
        # the verifier fetching the JWKS itself (over http: its switch for tests), for the first notification
        fetching = NotificationVerifier(
            jwks_url=f"http://{server.http_target}{JWKS_PATH}",
            audience=url,
            issuer=issuer,
            expected_token=TOKEN,
            allow_http_jwks=True,
        )
        first = receiver.hits[0]
        fetched_first = await fetching.verify(first.headers, first.body)

    received = events_of(receiver.hits)
    assert received == logged  # the log itself: same events, same order, nothing added or missing
    assert kinds(received) == WRITER_KINDS
    for event in received:
        payload = getattr(event, event.WhichOneof("payload") or "")
        assert payload.task_id == task.id
    for hit in receiver.hits:
        assert hit.headers["Content-Type"] == CONTENT_TYPE
        assert hit.headers["Authorization"] == f"Bearer {CREDENTIALS}"
        assert [hit.headers[name] for name in TOKEN_HEADERS] == [TOKEN, TOKEN]

    assert "max-age" in cache_control
    [published] = jwks["keys"]
    assert published["alg"] == ("ES256" if key_type == "ec" else "RS256")
    assert "d" not in published and "p" not in published  # public parts only
    assert fetched_first == received[0]
    verifier = NotificationVerifier(jwks=jwks, audience=url, issuer=issuer, expected_token=TOKEN)
    for hit, event in zip(receiver.hits, received, strict=True):
        assert await verifier.verify(hit.headers, hit.body) == event
        claims = jwt.decode(hit.headers[SIGNATURE_HEADER], options={"verify_signature": False})
        assert (claims["taskId"], claims["aud"], claims["iss"]) == (task.id, url, issuer)
        assert jwt.get_unverified_header(hit.headers[SIGNATURE_HEADER])["kid"] == published["kid"]


async def test_on_port_0_the_issuer_is_the_bound_grpc_interface(
    start_server: StartServer, receiver: Receiver, tmp_path: Path
) -> None:
    pem = write_pem(tmp_path / "push.pem", ec.generate_private_key(ec.SECP256R1()))
    server = await start_writer(start_server, PushSettings(allow=("127.0.0.1",), allow_http=True, signing_keys=(pem,)))
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        await ask(make_stub(channel), push_config(receiver.url("/hook")))
        await receiver.wait_count("/hook", 1)
    claims = jwt.decode(receiver.hits[0].headers[SIGNATURE_HEADER], options={"verify_signature": False})
    assert claims["iss"] == issuer_of(server)  # it is "127.0.0.1:0"


async def test_a_config_created_later_is_notified_from_the_next_event_on(
    start_server: StartServer, receiver: Receiver
) -> None:
    server = await start_writer(start_server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = await ask(stub)
        await stub.CreateTaskPushNotificationConfig(push_config(receiver.url("/hook"), task.id), metadata=V1)
        await answer(stub, task.id)
        await receiver.wait_count("/hook", WRITER_EVENTS - 1)
        logged = await event_log(stub, task.id)
    await no_more_requests(receiver, WRITER_EVENTS - 1)
    assert events_of(receiver.hits) == logged[1:]  # all but INPUT_REQUIRED, which came before the config


async def test_a_config_sent_with_a_later_message_is_notified_from_the_first_event(
    start_server: StartServer, receiver: Receiver
) -> None:
    server = await start_writer(start_server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = await ask(stub)
        await answer(stub, task.id, push_config(receiver.url("/hook")))
        await receiver.wait_count("/hook", WRITER_EVENTS)
        logged = await event_log(stub, task.id)
    await no_more_requests(receiver, WRITER_EVENTS)
    assert events_of(receiver.hits) == logged


@pytest.mark.parametrize("first_turn", ["streamed", "returned at once"])
async def test_a_config_sent_with_a_streamed_or_at_once_first_message_gets_every_event(
    start_server: StartServer, receiver: Receiver, first_turn: str
) -> None:
    server = await start_writer(start_server)
    configuration = a2a_pb2.SendMessageConfiguration(task_push_notification_config=push_config(receiver.url("/hook")))
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        if first_turn == "streamed":
            request = a2a_pb2.SendMessageRequest(message=message("the sea"), configuration=configuration)
            task_id = (await read_all(stub.SendStreamingMessage(request, metadata=V1, timeout=WAIT_SECONDS)))[0].task.id
        else:
            configuration.return_immediately = True
            request = a2a_pb2.SendMessageRequest(message=message("the sea"), configuration=configuration)
            task_id = (await stub.SendMessage(request, metadata=V1, timeout=WAIT_SECONDS)).task.id
        await receiver.wait_count("/hook", 1)  # INPUT_REQUIRED: the writer waits for its tone
        await answer(stub, task_id)
        await receiver.wait_count("/hook", WRITER_EVENTS)
        logged = await event_log(stub, task_id)
    await no_more_requests(receiver, WRITER_EVENTS)
    assert events_of(receiver.hits) == logged


async def test_a_message_answered_with_a_message_stores_no_config_and_notifies_nothing(
    start_server: StartServer, receiver: Receiver
) -> None:
    server = await start_server(agent=ReplyingAgent(), push=LOOPBACK_PUSH)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        response = await send(make_stub(channel), message("hello"), push_config(receiver.url("/hook")))
    assert response.WhichOneof("payload") == "message"
    assert isinstance(server.store, MemoryStore)
    assert server.store._configs == {}
    await no_more_requests(receiver, 0)


async def test_status_only_sends_no_artifact_updates(start_server: StartServer, receiver: Receiver) -> None:
    push = PushSettings(allow=("127.0.0.1",), allow_http=True, delivery=DeliverySettings(status_only=True))
    server = await start_writer(start_server, push)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = await ask(stub, push_config(receiver.url("/hook")))
        await answer(stub, task.id)
        await receiver.wait_count("/hook", WRITER_STATUS_EVENTS)
        logged = await event_log(stub, task.id)
    await no_more_requests(receiver, WRITER_STATUS_EVENTS)
    assert events_of(receiver.hits) == [event for event in logged if event.HasField("status_update")]
    assert "artifact" not in kinds(events_of(receiver.hits))


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_woken_tasks_are_delivered_without_waiting_for_a_sweep(
    start_server: StartServer, receiver: Receiver, tmp_path: Path, store: str
) -> None:
    """Every config is claimed by its task, as its events are stored (the one sweep is at the start): the
    events stored while a courier delivers follow on, and several tasks at once each get all of theirs."""
    delivery = DeliverySettings(sweep_seconds=3600.0)
    push = PushSettings(allow=("127.0.0.1",), allow_http=True, delivery=delivery)
    store_url = "memory" if store == "memory" else f"sqlite:///{tmp_path / 'tasks.db'}"
    server = await start_server(card=writer_card(), agent=WriterAgent(chunk_delay=0.01), push=push, store_url=store_url)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        tasks = await asyncio.gather(*(ask(stub, push_config(receiver.url(f"/hook{n}"))) for n in range(3)))
        await asyncio.gather(*(answer(stub, task.id) for task in tasks))
        for n in range(3):
            await receiver.wait_count(f"/hook{n}", WRITER_EVENTS)
        logged = [await event_log(stub, task.id) for task in tasks]
    await no_more_requests(receiver, 3 * WRITER_EVENTS)
    assert [events_of(receiver.at(f"/hook{n}")) for n in range(3)] == logged


class ReleaseGatedStore(MemoryStore):
    """A memory store whose first release of a config, once applied, holds the releasing courier until
    `gate` opens (as a slow store's answer would), and that tells when a claim takes a config meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.released = asyncio.Event()
        self.claimed_meanwhile = asyncio.Event()
        self.gate = asyncio.Event()

    async def release_push(self, task_id: str, config_id: str, claimer: str, delivered: int | None = None) -> None:
        await super().release_push(task_id, config_id, claimer, delivered)
        if not self.released.is_set():
            self.released.set()
            await self.gate.wait()

    async def claim_push_targets(
        self,
        claimer: str,
        lease_seconds: float,
        limit: int,
        task_ids: Sequence[str] | None = None,
        events: int = 0,
    ) -> list[PushTarget]:
        targets = await super().claim_push_targets(claimer, lease_seconds, limit, task_ids, events)
        if targets and self.released.is_set():
            self.claimed_meanwhile.set()
        return targets


async def test_a_webhook_claimed_again_while_its_courier_ends_gets_the_new_events(receiver: Receiver) -> None:
    store = ReleaseGatedStore()
    tasks = Tasks(store)
    await tasks.create("t1", events=1)
    await store.put_push_config(OWNER, config("t1", url=receiver.url("/hook")), delivered=0)
    sender = a2a_grpc.push.PushSender(AddressPolicy(allow=("127.0.0.1",), allow_http=True))
    worker = PushWorker(store, sender, "this replica", DeliverySettings(sweep_seconds=3600.0))
    worker.start()
    try:
        async with asyncio.timeout(WAIT_SECONDS):
            await store.released.wait()  # event 1 delivered; its courier released the webhook and still runs
            await tasks.append("t1")
            worker.wake("t1")
            await store.claimed_meanwhile.wait()
        store.gate.set()
        await receiver.wait_count("/hook", 2)
    finally:
        store.gate.set()
        await worker.stop()
    texts = [hit.event().artifact_update.artifact.parts[0].text for hit in receiver.at("/hook")]
    assert texts == ["chunk 1", "chunk 2"]


class OneEventPagesStore(MemoryStore):
    """A memory store whose log pages hold one event each (as pages of events past the byte bound do), read by
    the couriers: a claim reads no events."""

    async def read_events(
        self, task_id: str, after: int, limit: int, max_bytes: int = EVENT_PAGE_BYTES
    ) -> list[TaskEvent]:
        return await super().read_events(task_id, after, limit, max_bytes=1)

    async def claim_push_targets(
        self,
        claimer: str,
        lease_seconds: float,
        limit: int,
        task_ids: Sequence[str] | None = None,
        events: int = 0,
    ) -> list[PushTarget]:
        return await super().claim_push_targets(claimer, lease_seconds, limit, task_ids)


async def test_a_courier_reads_on_after_a_page_cut_short_by_its_bytes(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(a2a_grpc.push.worker, "EVENT_PAGE_BYTES", 1)
    store = OneEventPagesStore()
    await Tasks(store).create("t1", events=3)
    await store.put_push_config(OWNER, config("t1", url=receiver.url("/hook")), delivered=0)
    sender = a2a_grpc.push.PushSender(AddressPolicy(allow=("127.0.0.1",), allow_http=True))
    worker = PushWorker(store, sender, "this replica", DeliverySettings(sweep_seconds=3600.0))
    worker.start()
    try:
        await receiver.wait_count("/hook", 3)
    finally:
        await worker.stop()


# ---- retries, refusals, a webhook that never answers -------------------------------------------------


async def test_a_503_is_retried_after_backoff_and_the_order_holds(
    start_server: StartServer, receiver: Receiver
) -> None:
    receiver.plans["/flaky"] = [(503, "1"), 503]  # then 200s
    server = await start_writer(start_server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = await ask(stub, push_config(receiver.url("/flaky")))
        await answer(stub, task.id)
        await receiver.wait_count("/flaky", WRITER_EVENTS + 2)
        logged = await event_log(stub, task.id)
    await no_more_requests(receiver, WRITER_EVENTS + 2)

    received = events_of(receiver.hits)
    assert received[:3] == [logged[0]] * 3  # the first notification: 503, 503, then 200
    assert received[2:] == logged  # the rest once each, in order, after it
    first, second, third = (hit.at for hit in receiver.hits[:3])
    assert second - first >= 0.9  # Retry-After: 1 is a floor on the wait
    assert third >= second


async def test_a_404_is_tried_once_per_notification_and_later_ones_still_come(
    start_server: StartServer, receiver: Receiver
) -> None:
    receiver.plans["/missing"] = [404] * WRITER_EVENTS
    server = await start_writer(start_server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = await ask(stub, push_config(receiver.url("/missing")))
        await answer(stub, task.id)
        await receiver.wait_count("/missing", WRITER_EVENTS)
        logged = await event_log(stub, task.id)
    await no_more_requests(receiver, WRITER_EVENTS)
    assert events_of(receiver.hits) == logged


async def test_a_webhook_that_never_answers_delays_neither_the_caller_nor_the_other_webhook(
    start_server: StartServer, receiver: Receiver
) -> None:
    push = PushSettings(allow=("127.0.0.1",), allow_http=True, timeout_seconds=0.5)
    server = await start_writer(start_server, push)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        started = time.monotonic()
        task = await ask(stub, push_config(receiver.url("/hang")))
        await receiver.wait_count("/hang", 1)
        asked = time.monotonic() - started
        await stub.CreateTaskPushNotificationConfig(push_config(receiver.url("/ok"), task.id), metadata=V1)
        started = time.monotonic()
        await answer(stub, task.id)
        answered = time.monotonic() - started
        await receiver.wait_count("/ok", WRITER_EVENTS - 1)
        delivered = time.monotonic() - started
        logged = await event_log(stub, task.id)
    assert asked < 2.0
    assert answered < 2.0
    assert delivered < 5.0  # the hanging webhook has not got past its first notification meanwhile
    assert events_of(receiver.at("/ok")) == logged[1:]
    assert {hit.event().SerializeToString() for hit in receiver.at("/hang")} == {logged[0].SerializeToString()}


async def test_a_host_that_never_answers_holds_only_its_own_share_of_the_requests(
    start_server: StartServer, receiver: Receiver
) -> None:
    delivery = DeliverySettings(concurrency=4, per_host=2)
    push = PushSettings(allow=("127.0.0.1",), allow_http=True, timeout_seconds=5.0, delivery=delivery)
    server = await start_writer(start_server, push)
    healthy = Receiver()
    await healthy.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            for _ in range(6):  # six webhooks on one host, each with a notification hanging
                await ask(stub, push_config(receiver.url("/hang")))
            await receiver.wait_count("/hang", delivery.per_host)
            await ask(stub, push_config(healthy.url("/ok")))
            await healthy.wait_count("/ok", 1)
        # still the first attempts only (a second would come after --push-timeout): the other host's
        # notification did not wait for the hanging ones, and no more went to the host than its share
        assert len(receiver.at("/hang")) == delivery.per_host
    finally:
        await healthy.stop()


async def test_a_caller_whose_webhooks_hang_on_many_hosts_holds_only_its_own_share(
    start_server: StartServer, receiver: Receiver
) -> None:
    """Alice's webhooks hang on three hosts, more than the requests in flight in all: Bob's notification
    still goes out while hers hang, and she holds no more of them than her share."""
    delivery = DeliverySettings(concurrency=2, per_host=2, per_owner=1)
    push = PushSettings(allow=("127.0.0.1",), allow_http=True, timeout_seconds=30.0, delivery=delivery)
    tokens = {"alice-token": "alice", "bob-token": "bob"}
    server = await start_server(
        card=writer_card(), agent=WriterAgent(chunk_delay=0.01), push=push, bearer_tokens=tokens
    )
    alice, bob = ((*V1, ("authorization", f"Bearer {name}-token")) for name in ("alice", "bob"))
    hosts = [Receiver() for _ in range(3)]
    healthy = Receiver()
    for hook in (*hosts, healthy):
        await hook.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel:
            stub = make_stub(channel)
            for hook in hosts:
                await ask(stub, push_config(hook.url("/hang")), metadata=alice)
            await hosts[0].wait_for(lambda: sum(len(hook.at("/hang")) for hook in hosts) >= 1, "alice's first")
            await ask(stub, push_config(healthy.url("/ok")), metadata=bob)
            await healthy.wait_count("/ok", 1)
        assert sum(len(hook.at("/hang")) for hook in hosts) == delivery.per_owner
    finally:
        for hook in (*hosts, healthy):
            await hook.stop()


async def test_a_redirect_is_not_followed(start_server: StartServer, receiver: Receiver) -> None:
    server = await start_writer(start_server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = await ask(stub, push_config(receiver.url("/redirect")))
        await answer(stub, task.id)
        await receiver.wait_count("/redirect", WRITER_EVENTS)  # one attempt each: a 3xx is final
        logged = await event_log(stub, task.id)
    await no_more_requests(receiver, WRITER_EVENTS)
    assert receiver.at("/target") == []
    assert events_of(receiver.hits) == logged


async def test_stopping_the_server_ends_every_courier_and_releases_its_webhook(
    start_server: StartServer, receiver: Receiver
) -> None:
    server = await start_writer(start_server)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        await ask(make_stub(channel), push_config(receiver.url("/hang")))
        await receiver.wait_count("/hang", 1)  # a courier is in the middle of an attempt
    started = time.monotonic()
    await server.stop(0)
    assert time.monotonic() - started < 5.0
    left = [task for task in asyncio.all_tasks() if "PushWorker" in task.get_coro().__qualname__]  # type: ignore[union-attr]
    assert left == []
    [target] = await server.store.claim_push_targets("another process", 5.0, 10)  # released, still due
    assert target.delivered == 0


# ---- the SSRF guard, through the RPCs ------------------------------------------------------------------

REFUSED_HOSTS = [
    "127.0.0.1",
    "localhost",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "[::1]",
    "[fc00::1]",
    "[fe80::1]",
    "[::ffff:127.0.0.1]",
]
REFUSED_URLS = [
    *(f"https://{host}/hook" for host in REFUSED_HOSTS),
    *(f"https://{host}:8443/hook?x=1" for host in ("127.0.0.1", "[::1]")),
    "http://127.0.0.1:9/hook",  # refused for its scheme first: --push-allow-http is not set
]


@pytest.fixture
async def guarded_stub(start_server: StartServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stub]:
    """A writer server with the default push settings: no allow-list, https only. Its sender dials through
    a connector that refuses every address but loopback, so a broken guard fails the test (a config stored
    and delivered) instead of sending anything off this machine."""
    dialled: list[str] = []

    def loopback_only_sender(*args: Any, **kwargs: Any) -> a2a_grpc.push.PushSender:
        kwargs["connector_factory"] = lambda resolver: LoopbackOnlyConnector(resolver, dialled)
        return a2a_grpc.push.PushSender(*args, **kwargs)

    monkeypatch.setattr("a2a_grpc.push.service.PushSender", loopback_only_sender)
    server = await start_writer(start_server, PushSettings())
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        yield make_stub(channel)
    assert dialled == []


@pytest.mark.parametrize("url", REFUSED_URLS)
async def test_a_local_or_private_webhook_is_refused_by_create(guarded_stub: Stub, url: str) -> None:
    task = await ask(guarded_stub)
    error = await rpc_error(guarded_stub.CreateTaskPushNotificationConfig(push_config(url, task.id), metadata=V1))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    [violation] = bad_request(error).field_violations
    assert violation.field == "url"
    assert ("scheme must be https" in violation.description) == url.startswith("http:")
    listed = await guarded_stub.ListTaskPushNotificationConfigs(
        a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task.id), metadata=V1
    )
    assert list(listed.configs) == []


@pytest.mark.parametrize("url", REFUSED_URLS)
async def test_a_local_or_private_webhook_is_refused_by_send_message(guarded_stub: Stub, url: str) -> None:
    error = await rpc_error(ask(guarded_stub, push_config(url)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    [violation] = bad_request(error).field_violations
    assert violation.field == "configuration.task_push_notification_config.url"


# ---- no secret in the logs -----------------------------------------------------------------------------


async def test_no_token_credential_or_key_reaches_a_log_line(
    start_server: StartServer, receiver: Receiver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="a2a_grpc")
    key = ec.generate_private_key(ec.SECP256R1())
    pem = write_pem(tmp_path / "push.pem", key)
    push = PushSettings(
        allow=("127.0.0.1",),
        allow_http=True,
        signing_keys=(pem,),
        delivery=DeliverySettings(max_attempts=2),
    )
    receiver.plans["/fail"] = [500] * (2 * WRITER_EVENTS)
    receiver.plans["/missing"] = [404] * WRITER_EVENTS
    secrets = {
        "token": "tok-a81c-never-logged",
        "credentials": "cred-5e02-never-logged",
        "query": "q-77d3-never-logged",
        "other token": "tok-3f9b-never-logged",
        "other credentials": "cred-0c4a-never-logged",
    }
    failing = push_config(
        receiver.url("/fail") + f"?key={secrets['query']}",
        token=secrets["token"],
        authentication=a2a_pb2.AuthenticationInfo(scheme="Bearer", credentials=secrets["credentials"]),
    )
    missing = push_config(
        receiver.url("/missing"),
        token=secrets["other token"],
        authentication=a2a_pb2.AuthenticationInfo(scheme="Basic", credentials=secrets["other credentials"]),
    )
    server = await start_writer(start_server, push)
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        stub = make_stub(channel)
        task = await ask(stub, failing)
        missing.task_id = task.id
        await stub.CreateTaskPushNotificationConfig(missing, metadata=V1)
        await answer(stub, task.id)
        await receiver.wait_count("/fail", 2 * WRITER_EVENTS)
        await receiver.wait_count("/missing", WRITER_EVENTS - 1)
    await asyncio.sleep(SETTLE_SECONDS)  # the last give-up is logged after its last attempt

    gave_up = [r for r in caplog.records if r.levelno == logging.WARNING and "gave up delivering" in r.getMessage()]
    assert len(gave_up) == 2 * WRITER_EVENTS - 1  # every notification to either webhook was given up on
    assert any(r.levelno == logging.DEBUG and r.name.startswith("a2a_grpc.push") for r in caplog.records)
    private_lines = private_pem(key).decode().splitlines()[1:-1]
    signatures = {hit.headers[SIGNATURE_HEADER] for hit in receiver.hits}
    forbidden = [*secrets.values(), *private_lines, *signatures]
    logged = caplog.text + "\n".join(f"{record.getMessage()} {record.args!r}" for record in caplog.records)
    for secret in forbidden:
        assert secret not in logged


# ---- the receiver example of docs/push.md --------------------------------------------------------------


async def test_the_docs_receiver_example_verifies_notifications(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The python block of docs/push.md, run as written but for its addresses: the JWKS is
    fetched over loopback http (the verifier's switch for tests), and the webhook listens on a free port."""
    [example] = fenced_blocks("Push notifications", "python")
    source = "\n".join(example)
    key = ec.generate_private_key(ec.SECP256R1())
    push = PushSettings(allow=("127.0.0.1",), allow_http=True, signing_keys=(write_pem(tmp_path / "k.pem", key),))
    monkeypatch.setattr(
        a2a_grpc.push, "NotificationVerifier", functools.partial(NotificationVerifier, allow_http_jwks=True)
    )
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listening:
        listening.bind(("127.0.0.1", 0))
        webhook = f"http://127.0.0.1:{listening.getsockname()[1]}/a2a/webhook"
        async with writer_on_fixed_port(push) as server:
            replaced = {
                '"https://agent.example.com"': f'"http://{server.http_target}"',
                '"agent.example.com:443"': f'"{issuer_of(server)}"',
                '"https://me.example.com/a2a/webhook"': f'"{webhook}"',
            }
            for written, local in replaced.items():
                assert written in source
                source = source.replace(written, local)
            hosts = re.findall(r"https?://([^/\"':]+)", source)
            assert hosts and set(hosts) == {"127.0.0.1"}, f"the example must dial loopback only: {hosts}"
            namespace: dict[str, Any] = {"__name__": "docs_receiver"}
            exec(compile(source, "docs/push.md", "exec"), namespace)  # the documented example
            runner = web.AppRunner(namespace["app"], access_log=None)
            await runner.setup()
            try:
                await web.SockSite(runner, listening).start()
                async with grpc.aio.insecure_channel(server.grpc_target) as channel:
                    stub = make_stub(channel)
                    task = await ask(stub, push_config(webhook, token=namespace["TOKEN"]))
                    await answer(stub, task.id)
                    printed: list[str] = []
                    async with asyncio.timeout(WAIT_SECONDS):
                        while len(printed) < WRITER_EVENTS:
                            await asyncio.sleep(0.05)
                            printed += capsys.readouterr().out.splitlines()
            finally:
                await runner.cleanup()
    assert printed == ["artifact_update" if kind == "artifact" else "status_update" for kind in WRITER_KINDS]
