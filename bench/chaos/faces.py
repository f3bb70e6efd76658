"""The chaos clients' calls on the HTTP port's faces (JSON-RPC 2.0 at `/`, HTTP+JSON's routes), with aiohttp: sends,
SSE streams (SendStreamingMessage, SubscribeToTask) cut by closing the connection or read to their end, a reader
that stops reading an SSE stream, requests given up by the client after a few ms, and garbage (JSON cut short,
a body not sent as JSON, one larger than any request may be, an unknown JSON-RPC method).

A server may refuse any of them, but never with a 5xx but 503 (UNAVAILABLE) nor a JSON-RPC -32603 (INTERNAL):
those are server faults. Never 401 for credentials it accepts, and never anything but a refusal for garbage. A
task a send was answered with is acknowledged, and the invariants look for it through gRPC.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp

from bench.chaos.agent import ASK, ECHO
from bench.chaos.ledger import Caller
from bench.chaos.workload import CALL_SECONDS, MAX_CUT_SECONDS, STREAM_SECONDS, Client, Operation, Operations

INTERNAL_ERROR = -32603
UNAVAILABLE_STATUS = 503
OVERSIZED_BYTES = 4 * 1024 * 1024 + 1024  # past the largest request (ServerSettings.max_message_bytes)
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
JSONRPC, HTTP_JSON = "jsonrpc", "http+json"


def _message(text: str, task_id: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": f"chaos-http-{time.time_ns()}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    return message


def _headers(client: Client) -> dict[str, str]:
    return dict(client.caller.metadata)


def _session(seconds: float = CALL_SECONDS) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=seconds))


def _jsonrpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def record(client: Client, what: str, status: int, document: Any = None) -> bool:
    """Record an HTTP answer (and a JSON-RPC error in its body); whether it was a success."""
    client.ledger.calls += 1
    error = document.get("error") if isinstance(document, dict) and "jsonrpc" in document else None
    code = f"HTTP {status}" + (f" JSON-RPC {error.get('code')}" if isinstance(error, dict) else "")
    client.ledger.codes[code] += 1
    if status >= 500 and status != UNAVAILABLE_STATUS:
        client.ledger.violation(f"{what}: the server answered HTTP {status}")
    elif isinstance(error, dict) and error.get("code") == INTERNAL_ERROR:
        client.ledger.violation(f"{what}: the server answered JSON-RPC {INTERNAL_ERROR} {error.get('message')}")
    elif status == 401 and client.caller.accepted:
        client.ledger.violation(f"{what}: HTTP 401 for {client.caller.name}'s accepted credentials")
    return status < 400 and error is None


async def _document(response: aiohttp.ClientResponse) -> Any:
    try:
        return json.loads(await response.read())
    except ValueError:
        return None


def _acknowledge(client: Client, task: Any) -> None:
    if isinstance(task, dict) and task.get("id"):
        client.ledger.acknowledge(task["id"], client.caller)
        if task.get("status", {}).get("state") == INPUT_REQUIRED:
            client.ledger.open_tasks.append((task["id"], client.caller))


# ---- unary ---------------------------------------------------------------------------------------


async def send(client: Client, seconds: float = CALL_SECONDS) -> None:
    """SendMessage on either face, blocking; its task acknowledged. Given a few ms, a call the client gives up."""
    binding = client.rnd.choice((JSONRPC, HTTP_JSON))
    params = {"message": _message(client.rnd.choice((ECHO, ASK)))}
    url, body = (
        (client.http + "/", _jsonrpc("SendMessage", params))
        if binding == JSONRPC
        else (client.http + "/message:send", params)
    )
    what = f"{binding} SendMessage"
    async with _session(seconds) as session, session.post(url, json=body, headers=_headers(client)) as response:
        document = await _document(response)
    if record(client, what, response.status, document) and isinstance(document, dict):
        _acknowledge(client, (document.get("result", document) or {}).get("task"))


async def given_up(client: Client) -> None:
    """A SendMessage the client gives up after 1-5 ms, wherever the server is with it."""
    client.ledger.cuts += 1
    try:
        await send(client, seconds=client.rnd.uniform(0.001, 0.005))
    except (TimeoutError, aiohttp.ClientError):
        client.ledger.codes["HTTP timed out by client"] += 1


# ---- streams -------------------------------------------------------------------------------------


def _stream_request(client: Client, method: str, params: dict[str, Any], task_id: str = "") -> tuple[str, Any]:
    """The URL and body of a streaming call on a face the client picks."""
    if client.rnd.random() < 0.5:
        return client.http + "/", _jsonrpc(method, params)
    path = f"/tasks/{task_id}:subscribe" if method == "SubscribeToTask" else "/message:stream"
    return client.http + path, params


async def _events(response: aiohttp.ClientResponse) -> AsyncIterator[Any]:
    """The JSON of each `data:` line of an SSE response."""
    async for line in response.content:
        if line.startswith(b"data:"):
            yield json.loads(line[5:])


async def _read_some(response: aiohttp.ClientResponse, count: int) -> None:
    """Read up to `count` events (none: wait until cut)."""
    if count == 0:
        await asyncio.Event().wait()
    read = 0
    async for _ in _events(response):
        read += 1
        if read >= count:
            return


async def _read(client: Client, what: str, url: str, body: Any, cut: bool) -> None:
    """Cut the stream (the connection closed) after a few events or MAX_CUT_SECONDS at most, or read it to its end
    within STREAM_SECONDS: an error it ends with is recorded like an unary call's."""
    async with _session(STREAM_SECONDS) as session, session.post(url, json=body, headers=_headers(client)) as response:
        if response.content_type != "text/event-stream":
            record(client, what, response.status, await _document(response))
            return
        if cut:
            client.ledger.cuts += 1
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(client.rnd.uniform(0.001, MAX_CUT_SECONDS)):
                    await _read_some(response, client.rnd.randint(0, 3))
            response.close()
            client.ledger.calls += 1
            client.ledger.codes["HTTP stream cut by client"] += 1
            return
        last: Any = None
        try:
            async with asyncio.timeout(STREAM_SECONDS):
                async for event in _events(response):
                    last = event
        except TimeoutError:
            client.ledger.violation(f"{what}: a stream the client did not cut had not ended after {STREAM_SECONDS:g} s")
            return
        error = last.get("error") if isinstance(last, dict) and "result" not in last else None
        if isinstance(error, dict) and "jsonrpc" not in last:  # HTTP+JSON's closing `event: error`: its status
            record(client, what, int(error.get("code", 500)))
        else:
            record(client, what, response.status, last if error is not None else None)


async def stream_send(client: Client, cut: bool | None = None) -> None:
    """SendStreamingMessage of a new task, cut or read to its end."""
    url, body = _stream_request(client, "SendStreamingMessage", {"message": _message(client.rnd.choice((ECHO, ASK)))})
    binding = JSONRPC if url.endswith("/") else HTTP_JSON
    await _read(client, f"{binding} SendStreamingMessage", url, body, client.rnd.random() < 0.6 if cut is None else cut)


async def subscribe(client: Client) -> None:
    """SubscribeToTask of an open task, cut or (once the task is told to go on, over gRPC) read to its end."""
    task_id = client.pick_open() or await client.send(ASK)
    if not task_id:
        return
    url, body = _stream_request(client, "SubscribeToTask", {"id": task_id}, task_id)
    binding = JSONRPC if url.endswith("/") else HTTP_JSON
    what = f"{binding} SubscribeToTask"
    if client.rnd.random() < 0.6:
        await _read(client, what, url, body, cut=True)
        return
    reader = asyncio.ensure_future(_read(client, what, url, body, cut=False))
    went = False
    try:
        went = await client.go(task_id, delay=0.05)
    finally:
        if not went:  # refused, or its channel closed under it: the task waits for input, the stream for ever
            reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def stalled_reader(client: Client) -> None:
    """SendStreamingMessage whose client reads the answer's head, then nothing, and goes away a while later."""
    url, body = _stream_request(client, "SendStreamingMessage", {"message": _message(ASK)})
    client.ledger.cuts += 1
    async with _session(STREAM_SECONDS) as session, session.post(url, json=body, headers=_headers(client)) as response:
        await asyncio.sleep(client.rnd.uniform(0.01, MAX_CUT_SECONDS))
        response.close()
    client.ledger.calls += 1
    client.ledger.codes["HTTP stream left unread"] += 1


# ---- garbage -------------------------------------------------------------------------------------

GARBAGE = ("truncated JSON", "not sent as JSON", "oversized body", "unknown JSON-RPC method", "a JSON-RPC array")


async def garbage(client: Client) -> None:
    """A request no face may take: it must be refused (a 4xx, or a JSON-RPC error), the server unharmed."""
    kind = client.rnd.choice(GARBAGE)
    url = client.http + client.rnd.choice(("/", "/message:send", "/message:stream"))
    headers = {**_headers(client), "Content-Type": "application/json"}
    valid = json.dumps(_jsonrpc("SendMessage", {"message": _message(ECHO)})).encode()
    data = valid
    if kind == "truncated JSON":
        data = valid[: client.rnd.randrange(1, len(valid))]
    elif kind == "not sent as JSON":
        headers["Content-Type"] = client.rnd.choice(("text/plain", "application/x-www-form-urlencoded"))
    elif kind == "oversized body":
        data = b'{"message": "' + b"x" * OVERSIZED_BYTES + b'"}'
    elif kind == "unknown JSON-RPC method":
        url, data = client.http + "/", json.dumps(_jsonrpc("DropAllTasks", {})).encode()
    else:
        url, data = client.http + "/", b"[" + b",".join([b"1", b"{}", b"[]"] * client.rnd.randint(1, 10)) + b"]"
    what = f"garbage ({kind}) to {url.removeprefix(client.http)}"
    try:
        async with _session() as session, session.post(url, data=data, headers=headers) as response:
            document = await _document(response)
    except aiohttp.ClientOSError:  # refused (413) as it arrived: the connection closed under the upload
        if kind != "oversized body":
            raise
        client.ledger.codes["HTTP closed under an oversized body"] += 1
        return
    if record(client, what, response.status, document) and not _all_errors(document):
        client.ledger.violation(f"{what}: answered {response.status} as a success")


def _all_errors(document: Any) -> bool:
    """Whether a JSON-RPC answer (or batch of answers) is made of errors only."""
    answers = document if isinstance(document, list) else [document]
    return all(isinstance(answer, dict) and "error" in answer for answer in answers)


def _connection_kept(operation: Operation) -> Operation:
    """`operation`, with a connection that failed under it (the server closed it, or it gave no answer within
    CALL_SECONDS) counted: whether the server is still up and SERVING is for the invariants to say."""

    async def kept(client: Client) -> None:
        try:
            await operation(client)
        except (aiohttp.ClientError, TimeoutError) as error:
            client.ledger.codes[f"HTTP {type(error).__name__}"] += 1

    return kept


HTTP_OPERATIONS: Operations = tuple(
    (_connection_kept(operation), weight)
    for operation, weight in (
        (send, 3),
        (given_up, 2),
        (stream_send, 4),
        (subscribe, 3),
        (stalled_reader, 1),
        (garbage, 2),
    )
)


# ---- the stream-slot invariant -------------------------------------------------------------------

SLOT_TRIES, SLOT_PAUSE = 100, 0.1  # a stream refused while the server still gives back cut streams' slots


async def streams_admitted(http: str, caller: Caller, count: int) -> str | None:
    """Whether `count` SSE streams of `caller` (its whole stream limit) are admitted at once after a round: every
    stream the round cut, left unread or read to its end gave its slot back. What went wrong, or None."""
    headers = dict(caller.metadata)
    opened: list[aiohttp.ClientResponse] = []
    async with _session(STREAM_SECONDS) as session:
        answer = await _patiently(
            lambda: session.post(f"{http}/message:send", json={"message": _message(ASK)}, headers=headers)
        )
        task_id = (await answer.json()).get("task", {}).get("id", "") if answer.status == 200 else ""
        if not task_id:
            return f"SendMessage over HTTP+JSON answered {answer.status}"
        try:
            for number in range(1, count + 1):
                stream = await _patiently(lambda: session.post(f"{http}/tasks/{task_id}:subscribe", headers=headers))
                opened.append(stream)
                if stream.content_type != "text/event-stream":
                    return f"stream {number} of {count} answered {stream.status} {await stream.text()}"
                async with asyncio.timeout(CALL_SECONDS):
                    async for _ in _events(stream):
                        break
        finally:
            for stream in opened:
                stream.close()
    return None


async def _patiently(post: Callable[[], Awaitable[aiohttp.ClientResponse]]) -> aiohttp.ClientResponse:
    """`post`'s answer, tried again while it is 429 (the request rate, or slots not given back yet), SLOT_TRIES
    times at most."""
    for _ in range(SLOT_TRIES - 1):
        response = await post()
        if response.status != 429:
            return response
        response.release()
        await asyncio.sleep(SLOT_PAUSE)
    return await post()
