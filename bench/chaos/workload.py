"""The chaos clients: one seeded round of calls over all 11 RPCs, many of them cut by the client.

Every call records its status code in the ledger. Whatever a client does, a server may refuse it, but never
with INTERNAL, UNKNOWN or DATA_LOSS (those are server faults), and never UNAUTHENTICATED for credentials it
accepts. A stream the client does not cut must end, with its events or a status, within STREAM_SECONDS. A
resumed stream delivers no event twice. A task whose SendMessage was answered is acknowledged, and the
invariants look for it later.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.protocol import A2A_SERVICE, RESUME_EXTENSION_URI, STREAM_AFTER_HEADER
from bench.chaos.agent import ASK, ECHO, SLOW
from bench.chaos.ledger import Caller, Ledger

SERVER_FAULTS = frozenset({grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS})
CALL_SECONDS = 20.0  # a call the client does not cut gives up after this (a server stopped by a fault)
STREAM_SECONDS = 30.0  # a stream the client does not cut must end within this
SLOW_READER_PAUSE = 0.05
MAX_CUT_SECONDS = 0.2  # a stream the client cuts is cut after a few events, or this soon at the latest
METHOD_PREFIX = "/lf.a2a.v1.A2AService/"
RESUME = (("a2a-extensions", RESUME_EXTENSION_URI),)
UNARY_METHODS = tuple(method.name for method in A2A_SERVICE.methods if not method.server_streaming)


_message_numbers = itertools.count(1)


def text_message(text: str, task_id: str = "") -> a2a_pb2.Message:
    message_id = f"chaos-{time.time_ns()}-{next(_message_numbers)}"
    message = a2a_pb2.Message(message_id=message_id, role=a2a_pb2.ROLE_USER, task_id=task_id)
    message.parts.add(text=text)
    return message


def stub_of(channel: grpc.aio.Channel) -> a2a_pb2_grpc.A2AServiceStub:
    return a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]


@dataclass
class Client:
    """One caller on one channel, with what the round may do: `webhook` the URL push configs point at ("" when
    the scenario has none), `http` the base URL of the same server's HTTP port (its faces)."""

    channel: grpc.aio.Channel
    caller: Caller
    ledger: Ledger
    rnd: random.Random
    webhook: str = ""
    http: str = ""

    @property
    def stub(self) -> a2a_pb2_grpc.A2AServiceStub:
        return stub_of(self.channel)

    def metadata(self, extra: Sequence[tuple[str, str]] = ()) -> tuple[tuple[str, str], ...]:
        return (*self.caller.metadata, *extra)

    def record(self, code: grpc.StatusCode, what: str) -> None:
        self.ledger.calls += 1
        self.ledger.codes[code.name] += 1
        if code in SERVER_FAULTS:
            self.ledger.violation(f"{what}: the server answered {code.name}")
        elif code == grpc.StatusCode.UNAUTHENTICATED and self.caller.accepted:
            self.ledger.violation(f"{what}: UNAUTHENTICATED for {self.caller.name}'s accepted credentials")

    async def unary(self, what: str, call: Awaitable[Any]) -> Any | None:
        """The call's answer, or None when it ended with a status (recorded either way)."""
        try:
            answer = await call
        except grpc.aio.AioRpcError as error:
            self.record(error.code(), what)
            return None
        self.record(grpc.StatusCode.OK, what)
        return answer

    def pick_open(self) -> str:
        mine = [task_id for task_id, caller in self.ledger.open_tasks if caller == self.caller]
        return self.rnd.choice(mine) if mine else ""

    def pick_known(self) -> str:
        mine = [task_id for task_id, caller in self.ledger.acknowledged.items() if caller == self.caller]
        return self.rnd.choice(mine[-50:]) if mine else f"no-such-task-{self.rnd.randrange(1000)}"

    # ---- unary calls ------------------------------------------------------------------------------

    def send_request(
        self, text: str, task_id: str = "", return_immediately: bool = False
    ) -> a2a_pb2.SendMessageRequest:
        request = a2a_pb2.SendMessageRequest(message=text_message(text, task_id))
        request.configuration.return_immediately = return_immediately
        if self.webhook and self.rnd.random() < 0.3:
            config = request.configuration.task_push_notification_config
            config.url, config.token = self.webhook, "chaos-token"
        return request

    async def send(self, text: str, return_immediately: bool = False, seconds: float = CALL_SECONDS) -> str:
        """SendMessage; the task id it was answered with ("" when refused). A task answered is acknowledged."""
        request = self.send_request(text, return_immediately=return_immediately)
        response = await self.unary(
            "SendMessage", self.stub.SendMessage(request, metadata=self.metadata(), timeout=seconds)
        )
        if response is None or not response.HasField("task"):
            return ""
        task = response.task
        self.ledger.acknowledge(task.id, self.caller)
        if task.status.state == a2a_pb2.TASK_STATE_INPUT_REQUIRED:
            self.ledger.open_tasks.append((task.id, self.caller))
        return str(task.id)

    async def go(self, task_id: str, delay: float = 0.0) -> bool:
        """The message (after `delay` seconds) that lets an INPUT_REQUIRED task of the chaos agent stream its
        chunks and complete; whether the server took it."""
        await asyncio.sleep(delay)
        request = self.send_request("go", task_id=task_id, return_immediately=True)
        answer = await self.unary(
            "SendMessage", self.stub.SendMessage(request, metadata=self.metadata(), timeout=CALL_SECONDS)
        )
        self.ledger.open_tasks = [(t, c) for t, c in self.ledger.open_tasks if t != task_id]
        return answer is not None

    async def get_task(self, seconds: float = CALL_SECONDS) -> None:
        request = a2a_pb2.GetTaskRequest(id=self.pick_known())
        await self.unary("GetTask", self.stub.GetTask(request, metadata=self.metadata(), timeout=seconds))

    async def list_tasks(self, seconds: float = CALL_SECONDS) -> None:
        """Up to three pages; no task may be listed twice."""
        seen: set[str] = set()
        token = ""
        for _ in range(3):
            request = a2a_pb2.ListTasksRequest(page_size=self.rnd.choice((1, 10, 100)), page_token=token)
            page = await self.unary(
                "ListTasks", self.stub.ListTasks(request, metadata=self.metadata(), timeout=seconds)
            )
            if page is None:
                return
            ids = [task.id for task in page.tasks]
            if seen.intersection(ids):
                self.ledger.violation(f"ListTasks listed a task twice: {sorted(seen.intersection(ids))[:3]}")
            seen.update(ids)
            token = page.next_page_token
            if not token:
                return

    async def cancel_task(self, seconds: float = CALL_SECONDS) -> None:
        task_id = self.pick_open() or self.pick_known()
        request = a2a_pb2.CancelTaskRequest(id=task_id)
        await self.unary("CancelTask", self.stub.CancelTask(request, metadata=self.metadata(), timeout=seconds))

    async def push_configs(self, seconds: float = CALL_SECONDS) -> None:
        """Create, get, list and delete a config (the server refuses them all without push)."""
        task_id = self.pick_open() or self.pick_known()
        url = self.webhook or "http://127.0.0.1:9/unused"
        config = a2a_pb2.TaskPushNotificationConfig(task_id=task_id, url=url, token="chaos-token")
        md = self.metadata()
        stub = self.stub
        made = await self.unary(
            "CreateTaskPushNotificationConfig",
            stub.CreateTaskPushNotificationConfig(config, metadata=md, timeout=seconds),
        )
        config_id = made.id if made is not None else "no-such-config"
        key = {"task_id": task_id, "id": config_id}
        await self.unary(
            "GetTaskPushNotificationConfig",
            stub.GetTaskPushNotificationConfig(
                a2a_pb2.GetTaskPushNotificationConfigRequest(**key), metadata=md, timeout=seconds
            ),
        )
        await self.unary(
            "ListTaskPushNotificationConfigs",
            stub.ListTaskPushNotificationConfigs(
                a2a_pb2.ListTaskPushNotificationConfigsRequest(task_id=task_id), metadata=md, timeout=seconds
            ),
        )
        if self.rnd.random() < 0.5:
            await self.unary(
                "DeleteTaskPushNotificationConfig",
                stub.DeleteTaskPushNotificationConfig(
                    a2a_pb2.DeleteTaskPushNotificationConfigRequest(**key), metadata=md, timeout=seconds
                ),
            )

    async def extended_card(self, seconds: float = CALL_SECONDS) -> None:
        request = a2a_pb2.GetExtendedAgentCardRequest()
        await self.unary(
            "GetExtendedAgentCard", self.stub.GetExtendedAgentCard(request, metadata=self.metadata(), timeout=seconds)
        )

    async def malformed(self) -> None:
        """Bytes that are not a valid request of the method they are sent to."""
        method = self.rnd.choice(UNARY_METHODS)
        body = malformed_body(self.rnd)
        call = self.channel.unary_unary(METHOD_PREFIX + method)(body, metadata=self.metadata(), timeout=CALL_SECONDS)
        await self.unary(f"{method} (malformed)", call)

    async def short_deadline(self) -> None:
        """A unary call with a deadline of 1-5 ms: cut by the client's deadline, wherever the server is."""
        seconds = self.rnd.uniform(0.001, 0.005)
        self.ledger.cuts += 1
        choice = self.rnd.randrange(5)
        if choice == 0:
            await self.send(self.rnd.choice((ECHO, ASK, SLOW)), seconds=seconds)
        elif choice == 1:
            await self.get_task(seconds)
        elif choice == 2:
            await self.list_tasks(seconds)
        elif choice == 3:
            await self.cancel_task(seconds)
        else:
            await self.push_configs(seconds)

    # ---- streams ----------------------------------------------------------------------------------

    async def stream_send(self, cut: bool | None = None) -> None:
        """SendStreamingMessage of a new task or a follow-up, cut or read to its end (maybe slowly)."""
        open_id = self.pick_open() if self.rnd.random() < 0.3 else ""
        if open_id:
            self.ledger.open_tasks = [(t, c) for t, c in self.ledger.open_tasks if t != open_id]
            request = self.send_request("go", task_id=open_id)
        else:
            request = self.send_request(self.rnd.choice((ECHO, ECHO, ASK)))
        call = self.stub.SendStreamingMessage(request, metadata=self.metadata(), timeout=STREAM_SECONDS * 2)
        await self.read_stream("SendStreamingMessage", call, cut)

    async def subscribe(self, cut: bool | None = None) -> None:
        """SubscribeToTask of an open task, cut or (once the task is told to go on) read to its end."""
        task_id = self.pick_open()
        if not task_id:
            task_id = await self.send(ASK)
        if not task_id:
            return
        call = self.stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=self.metadata(), timeout=STREAM_SECONDS * 2
        )
        if cut if cut is not None else self.rnd.random() < 0.6:
            await self.read_stream("SubscribeToTask", call, cut=True)
            return
        reader = asyncio.ensure_future(self.read_stream("SubscribeToTask", call, cut=False))
        try:
            if not await self.go(task_id, delay=0.05):
                call.cancel()  # the task waits for input for good: nothing else would end the stream
        finally:
            await reader

    async def read_stream(self, what: str, call: Any, cut: bool | None = None) -> None:
        """Cut the stream before its first event or after a few, or read it to its end within STREAM_SECONDS."""
        if cut is None:
            cut = self.rnd.random() < 0.6
        slow = not cut and self.rnd.random() < 0.3
        if cut:
            self.ledger.cuts += 1
            try:
                await asyncio.wait_for(
                    self._read_some(call, self.rnd.randint(0, 3)), self.rnd.uniform(0.001, MAX_CUT_SECONDS)
                )
            except grpc.aio.AioRpcError as error:
                self.record(error.code(), what)
                return
            except TimeoutError:
                pass
            call.cancel()
            self.ledger.calls += 1
            self.ledger.codes["CANCELLED by client"] += 1
            return
        try:
            await asyncio.wait_for(self._drain(what, call, slow), STREAM_SECONDS)
        except TimeoutError:
            call.cancel()
            self.ledger.violation(f"{what}: a stream the client did not cut had not ended after {STREAM_SECONDS:g} s")

    @staticmethod
    async def _read_some(call: Any, count: int) -> None:
        """Read up to `count` events (none: wait until cut)."""
        if count == 0:
            await asyncio.Event().wait()
        read = 0
        async for _ in call:
            read += 1
            if read >= count:
                return

    async def _drain(self, what: str, call: Any, slow: bool) -> None:
        try:
            async for _ in call:
                if slow:
                    await asyncio.sleep(SLOW_READER_PAUSE)
        except grpc.aio.AioRpcError as error:
            self.record(error.code(), what)
            return
        except asyncio.CancelledError:
            if not call.cancelled():
                raise
            self.ledger.codes["CANCELLED by client"] += 1
            return
        self.record(grpc.StatusCode.OK, what)

    async def resume(self) -> None:
        """Subscribe with the resume extension, read some events, drop the call, resubscribe after the last
        event seen: no event may come twice, and numbers only go up."""
        task_id = await self.send(ASK)
        if not task_id:
            return
        first = self.stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id), metadata=self.metadata(RESUME), timeout=STREAM_SECONDS
        )
        reading = asyncio.ensure_future(self._numbers(first, "SubscribeToTask (resume)", 1 + self.rnd.randrange(4)))
        went = await self.go(task_id, delay=0.02)
        if not went:
            first.cancel()  # the task waits for input for good: no stream of it would end
        seen = await reading
        first.cancel()
        self.ledger.cuts += 1
        if not went or seen is None:
            return
        after = max(seen, default=0)
        again = self.stub.SubscribeToTask(
            a2a_pb2.SubscribeToTaskRequest(id=task_id),
            metadata=self.metadata((*RESUME, (STREAM_AFTER_HEADER, str(after)))),
            timeout=STREAM_SECONDS,
        )
        numbers = await self._numbers(again, "SubscribeToTask (resumed)")  # a task ended meanwhile is refused
        events = (numbers or [])[1:]  # after the snapshot
        if any(number <= after for number in events) or events != sorted(set(events)):
            self.ledger.violation(f"resumed stream of {task_id} after {after} delivered events {events}")

    async def _numbers(self, call: Any, what: str, most: int | None = None) -> list[int] | None:
        """The event numbers of a resumable stream, up to `most` of them; None when it ended with a status
        or the client cancelled it."""
        numbers: list[int] = []
        try:
            async for event in call:
                numbers.append(seq_of(event))
                if most is not None and len(numbers) >= most:
                    return numbers
        except grpc.aio.AioRpcError as error:
            self.record(error.code(), what)
            return None
        except asyncio.CancelledError:
            if not call.cancelled():
                raise
            return None  # cancelled by this client
        if most is None:
            self.record(grpc.StatusCode.OK, what)
        return numbers


def seq_of(event: a2a_pb2.StreamResponse) -> int:
    """The event's number in its task's log, from the resume extension's metadata (0 when absent)."""
    kind = event.WhichOneof("payload")
    if kind is None:
        return 0
    metadata = getattr(event, kind).metadata
    if RESUME_EXTENSION_URI not in metadata.fields:
        return 0
    return int(metadata.fields[RESUME_EXTENSION_URI].struct_value.fields["seq"].number_value)


def malformed_body(rnd: random.Random) -> bytes:
    """Random bytes, a valid request cut short, unknown fields, or nesting past any sane depth."""
    kind = rnd.randrange(4)
    if kind == 0:
        return rnd.randbytes(rnd.randint(1, 256))
    if kind == 1:
        valid = a2a_pb2.SendMessageRequest(message=text_message("x" * rnd.randint(1, 64))).SerializeToString()
        return valid[: rnd.randint(1, len(valid) - 1)]
    if kind == 2:
        return bytes([0xF8, 0xFF, 0xFF, 0x0F]) + rnd.randbytes(16)  # field 2^25-ish, a varint then garbage
    request = a2a_pb2.SendMessageRequest(message=text_message("deep"))
    value = request.metadata.fields["deep"]
    for _ in range(rnd.randint(40, 200)):  # JSON arrays nested past what any request may hold
        value = value.list_value.values.add()
    value.string_value = "bottom"
    return request.SerializeToString()


Operation = Callable[[Client], Awaitable[object]]
Operations = tuple[tuple[Operation, int], ...]  # (operation, weight): what one call of a round may do
OPERATIONS: Operations = (
    (lambda client: client.send(client.rnd.choice((ECHO, ASK))), 6),
    (lambda client: client.send(client.rnd.choice((ECHO, SLOW)), return_immediately=True), 3),
    (Client.stream_send, 8),
    (Client.subscribe, 5),
    (Client.resume, 2),
    (Client.get_task, 3),
    (Client.list_tasks, 2),
    (Client.cancel_task, 2),
    (Client.push_configs, 2),
    (Client.extended_card, 1),
    (Client.malformed, 2),
    (Client.short_deadline, 6),
)


# Only calls the client cuts: the storm that used to crash a server with its access log on.
CUT_OPERATIONS: Operations = (
    (lambda client: client.stream_send(cut=True), 35),
    (lambda client: client.subscribe(cut=True), 25),
    (Client.short_deadline, 40),
)


async def one_call(client: Client, table: Operations = OPERATIONS) -> None:
    operations, weights = zip(*table, strict=True)
    operation = client.rnd.choices(operations, weights)[0]
    try:
        await operation(client)
    except grpc.aio.AioRpcError as error:  # a call the operation did not expect to fail
        client.record(error.code(), "call")
    except (asyncio.CancelledError, grpc.aio.UsageError):  # its channel was closed under it
        client.ledger.codes["CANCELLED by closed channel"] += 1
