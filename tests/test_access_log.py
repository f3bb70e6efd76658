"""The access log: one structured line per A2A call, read back from real calls to a real server.

Each line is checked as the JSON line `--log-format json` writes (the record through JsonFormatter,
parsed); the text form is checked too. Covered: a sent message, refusals (a missing required extension,
an unsupported version, no credentials) at INFO with their reason, a failed call, streams (their event
count, and a stream the client cancels), an unexpected failure logged once at ERROR with its traceback,
that neither message text nor a bearer token ever appears, and the CLI switches (a child process). Lines
written straight to JSON handlers: the same as the records' in every shape, made in batches soon after
their calls (in order, before an ERROR line), and written at exit when still pending.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from conftest import BASE_CARD, V1, StartServer, send_request
from process import send_text, serve_process
from rpc_helpers import TEST_SECONDS, Clients, assert_error, bearer, make_stub, read_all, rpc_error
from test_tenants import TENANT_CARD

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.arrival import Arrival
from a2a_grpc.call import CallContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.interceptors.server import errors as errors_guard
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.store.memory import MemoryStore
from a2a_grpc.telemetry import ACCESS_LOGGER, AccessLog, JsonFormatter, TextFormatter, configure_logs, log_format
from a2a_grpc.telemetry.access_log import FLUSH_SECONDS
from a2a_grpc.telemetry.outcome import OK, Outcome

REQUIRED = "https://example.com/ext/required/v1"
OPTIONAL = "https://example.com/ext/optional/v1"
UNDECLARED = "https://example.com/ext/undeclared/v1"
EXTENSION_CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {
        **BASE_CARD["capabilities"],
        "extensions": [
            {"uri": REQUIRED, "description": "Every call must activate it.", "required": True},
            {"uri": OPTIONAL, "description": "A call may activate it."},
        ],
    },
}
TOKEN = "tok-3f9a1c77-never-logged"
PRINCIPAL = "alice"
MESSAGE_TEXT = "the confidential message text"
STORE_FAILURE = "the store failed: row 42 is on fire"  # stays on the server: only its log may show it
FAILED_PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION


@pytest.fixture
def access(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    yield caplog


def access_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == ACCESS_LOGGER]


def json_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The access lines as `--log-format json` writes them, parsed."""
    formatter = JsonFormatter()
    return [json.loads(formatter.format(record)) for record in access_records(caplog)]


def only_line(caplog: pytest.LogCaptureFixture, method: str) -> dict[str, Any]:
    lines = [line for line in json_lines(caplog) if line["method"] == method]
    assert len(lines) == 1, lines
    return lines[0]


async def wait_for_line(caplog: pytest.LogCaptureFixture, method: str) -> dict[str, Any]:
    """The line of a call that ends on the server after the client saw it end (a cancelled stream)."""
    async with asyncio.timeout(TEST_SECONDS):
        while True:
            if any(line["method"] == method for line in json_lines(caplog)):
                return only_line(caplog, method)
            await asyncio.sleep(0.01)


async def test_a_sent_message_is_one_line_with_its_call_and_no_text_or_token(
    start_server: StartServer, clients: Clients, access: pytest.LogCaptureFixture
) -> None:
    server = await start_server(bearer_tokens={TOKEN: PRINCIPAL})
    stub = clients.stub(server)
    async with asyncio.timeout(TEST_SECONDS):
        response = await stub.SendMessage(send_request(MESSAGE_TEXT), metadata=bearer(TOKEN))
    line = only_line(access, "SendMessage")
    assert line["level"] == "INFO" and line["logger"] == ACCESS_LOGGER
    assert line["code"] == "OK" and "reason" not in line
    assert line["principal"] == PRINCIPAL
    assert line["version"] == "1.0"
    assert line["peer"].startswith("ipv4:127.0.0.1:")
    assert line["task_id"] == response.task.id and line["context_id"] == response.task.context_id
    assert 0 < line["duration_ms"] < TEST_SECONDS * 1000
    assert "events" not in line and "requested_extensions" not in line and "message" not in line
    assert "exception" not in line
    text = access_records(access)[0].getMessage()
    assert text.startswith("method=SendMessage code=OK duration_ms=")
    assert f"principal={PRINCIPAL} version=1.0 task_id={response.task.id}" in text
    everything = access.text + "".join(JsonFormatter().format(record) for record in access.records)
    assert MESSAGE_TEXT not in everything and TOKEN not in everything


async def test_a_tenants_calls_name_the_tenant_and_a_refused_tenant_is_not_echoed(
    start_server: StartServer, clients: Clients, access: pytest.LogCaptureFixture
) -> None:
    server = await start_server(card=TENANT_CARD)
    stub = clients.stub(server)
    async with asyncio.timeout(TEST_SECONDS):
        task = (await stub.SendMessage(send_request(MESSAGE_TEXT, tenant="acme"), metadata=V1)).task
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetTask(a2a_pb2.GetTaskRequest(tenant="globex", id=task.id), metadata=V1)  # not globex's
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetTask(a2a_pb2.GetTaskRequest(tenant="initech", id=task.id), metadata=V1)
    lines = json_lines(access)
    assert [(line["method"], line["code"], line.get("tenant")) for line in lines] == [
        ("SendMessage", "OK", "acme"),
        ("GetTask", "NOT_FOUND", "globex"),
        ("GetTask", "INVALID_ARGUMENT", None),  # a tenant the card does not name is not written
    ]
    assert "initech" not in access.text


async def test_a_call_without_a_required_extension_is_logged_at_info_with_the_uri_and_reason(
    start_server: StartServer, clients: Clients, access: pytest.LogCaptureFixture
) -> None:
    server = await start_server(card=EXTENSION_CARD)
    stub = clients.stub(server)
    requested = (*V1, ("a2a-extensions", f"{OPTIONAL}, {UNDECLARED}"))
    async with asyncio.timeout(TEST_SECONDS):
        error = await rpc_error(stub.SendMessage(send_request(MESSAGE_TEXT), metadata=requested))
    assert_error(error, FAILED_PRECONDITION, "EXTENSION_SUPPORT_REQUIRED", missingExtensions=REQUIRED)
    line = only_line(access, "SendMessage")
    assert line["level"] == "INFO"
    assert (line["code"], line["reason"]) == ("FAILED_PRECONDITION", "EXTENSION_SUPPORT_REQUIRED")
    assert line["error_info"] == {"missingExtensions": REQUIRED}
    assert line["requested_extensions"] == [OPTIONAL, UNDECLARED]
    assert "activated_extensions" not in line and "exception" not in line
    assert line["version"] == "1.0"
    text = access_records(access)[0].getMessage()
    assert "reason=EXTENSION_SUPPORT_REQUIRED duration_ms=" in text and f"missingExtensions={REQUIRED}" in text


async def test_an_admitted_call_lists_its_requested_and_activated_extensions(
    start_server: StartServer, clients: Clients, access: pytest.LogCaptureFixture
) -> None:
    server = await start_server(card=EXTENSION_CARD)
    stub = clients.stub(server)
    requested = (*V1, ("a2a-extensions", f"{REQUIRED},{UNDECLARED}"), ("a2a-extensions", OPTIONAL))
    async with asyncio.timeout(TEST_SECONDS):
        await stub.SendMessage(send_request(), metadata=requested)
    line = only_line(access, "SendMessage")
    assert line["code"] == "OK"
    assert line["requested_extensions"] == [REQUIRED, UNDECLARED, OPTIONAL]
    assert line["activated_extensions"] == [REQUIRED, OPTIONAL]


@pytest.mark.parametrize(
    ("metadata", "code", "reason", "version"),
    [
        (
            (("a2a-version", "0.3"), ("authorization", f"Bearer {TOKEN}")),
            FAILED_PRECONDITION,
            "VERSION_NOT_SUPPORTED",
            "0.3",
        ),
        (V1, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", "1.0"),
    ],
    ids=["version", "credentials"],
)
async def test_refusals_are_logged_at_info_with_their_reason(
    start_server: StartServer,
    clients: Clients,
    access: pytest.LogCaptureFixture,
    metadata: tuple[tuple[str, str], ...],
    code: grpc.StatusCode,
    reason: str,
    version: str,
) -> None:
    server = await start_server(bearer_tokens={TOKEN: PRINCIPAL})
    stub = clients.stub(server)
    async with asyncio.timeout(TEST_SECONDS):
        error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id="t-1"), metadata=metadata))
    assert_error(error, code, reason)
    line = only_line(access, "GetTask")
    assert (line["level"], line["code"], line["reason"], line["version"]) == ("INFO", code.name, reason, version)
    assert "principal" not in line
    assert TOKEN not in access.text


async def test_a_task_that_does_not_exist_is_logged_with_not_found_and_its_id(
    start_server: StartServer, clients: Clients, access: pytest.LogCaptureFixture
) -> None:
    server = await start_server()
    stub = clients.stub(server)
    async with asyncio.timeout(TEST_SECONDS):
        error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id="no-such-task"), metadata=V1))
    assert_error(error, grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")
    line = only_line(access, "GetTask")
    assert (line["level"], line["code"], line["reason"]) == ("INFO", "NOT_FOUND", "TASK_NOT_FOUND")
    assert line["task_id"] == "no-such-task"
    assert line["error_info"] == {"taskId": "no-such-task"}


async def test_a_client_chosen_id_is_cut_short_in_the_log(
    start_server: StartServer, clients: Clients, access: pytest.LogCaptureFixture
) -> None:
    server = await start_server()
    stub = clients.stub(server)
    long_id = "x" * 10_000 + "\nforged line"
    async with asyncio.timeout(TEST_SECONDS):
        await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id=long_id), metadata=V1))
    line = only_line(access, "GetTask")
    assert len(line["task_id"]) < 300 and line["task_id"].endswith("\u2026")
    assert "\n" not in access_records(access)[0].getMessage()


async def test_a_stream_is_logged_once_it_ends_with_its_event_count(
    start_server: StartServer, clients: Clients, access: pytest.LogCaptureFixture
) -> None:
    server = await start_server()
    stub = clients.stub(server)
    async with asyncio.timeout(TEST_SECONDS):
        events = await read_all(stub.SendStreamingMessage(send_request(MESSAGE_TEXT), metadata=V1))
    line = only_line(access, "SendStreamingMessage")
    assert line["code"] == "OK" and line["events"] == len(events) >= 2
    first = events[0]
    task_id = first.task.id if first.HasField("task") else first.status_update.task_id
    assert task_id and line["task_id"] == task_id
    assert line["context_id"] == (first.task.context_id or first.status_update.context_id)
    assert MESSAGE_TEXT not in access.text


class HeldAgent:
    """WORKING, then waits until told to finish."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        await events.working("held")
        await self.release.wait()
        await events.complete()

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await events.canceled()


async def test_a_stream_the_client_cancels_is_logged_as_cancelled_with_the_events_it_got(
    start_server: StartServer, clients: Clients, access: pytest.LogCaptureFixture
) -> None:
    agent = HeldAgent()
    server = await start_server(agent=agent)
    stub = clients.stub(server)
    try:
        async with asyncio.timeout(TEST_SECONDS):
            configuration = a2a_pb2.SendMessageConfiguration(return_immediately=True)
            task = (await stub.SendMessage(send_request(configuration=configuration), metadata=V1)).task
            call = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=task.id), metadata=V1)
            first = await call.read()
            assert first.task.id == task.id
            call.cancel()
            line = await wait_for_line(access, "SubscribeToTask")
    finally:
        agent.release.set()
    assert (line["code"], line["events"], line["task_id"]) == ("CANCELLED", 1, task.id)


class FailingStore(MemoryStore):
    async def get_task(self, task_id: str, owner: str) -> a2a_pb2.Task | None:
        raise RuntimeError(STORE_FAILURE)


async def test_an_unexpected_failure_is_logged_once_at_error_with_its_traceback(
    tmp_path: Path, access: pytest.LogCaptureFixture
) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    settings = ServerSettings(listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url="memory")
    server = A2AServer(settings, store=FailingStore())
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(TEST_SECONDS):
            error = await rpc_error(make_stub(channel).GetTask(a2a_pb2.GetTaskRequest(id="t-1"), metadata=V1))
    finally:
        await server.stop(0)
    assert error.code() == grpc.StatusCode.INTERNAL and STORE_FAILURE not in (error.details() or "")
    line = only_line(access, "GetTask")
    assert (line["level"], line["code"], line["reason"]) == ("ERROR", "INTERNAL", "INTERNAL")
    assert "RuntimeError" in line["exception"] and STORE_FAILURE in line["exception"]
    tracebacks = [record for record in access.records if record.exc_info]
    assert len(tracebacks) == 1, [record.name for record in tracebacks]  # not again by the errors guard
    assert not [record for record in access.records if record.name == errors_guard.log.name]


async def test_without_the_access_log_nothing_is_logged_and_the_guard_logs_failures(
    tmp_path: Path, access: pytest.LogCaptureFixture
) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps(BASE_CARD))
    settings = ServerSettings(
        listen="127.0.0.1:0", http_listen="", card_path=str(card), store_url="memory", access_log=False
    )
    server = A2AServer(settings, store=FailingStore())
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.grpc_target) as channel, asyncio.timeout(TEST_SECONDS):
            stub = make_stub(channel)
            await stub.SendMessage(send_request(), metadata=V1)
            error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id="t-1"), metadata=V1))
    finally:
        await server.stop(0)
    assert error.code() == grpc.StatusCode.INTERNAL
    assert access_records(access) == []
    guarded = [record for record in access.records if record.name == errors_guard.log.name]
    assert len(guarded) == 1 and guarded[0].levelno == logging.ERROR and guarded[0].exc_info


def test_json_lines_carry_plain_records_as_a_message() -> None:
    record = logging.LogRecord("a2a_grpc.server", logging.WARNING, __file__, 1, "stopped: %d failed", (2,), None)
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["logger"] == "a2a_grpc.server"
    assert line["message"] == "stopped: 2 failed" and line["time"].endswith("+00:00")
    assert log_format(" JSON ") == "json"
    with pytest.raises(ValueError):
        log_format("xml")


def test_serve_writes_json_lines_and_the_access_log_can_be_turned_off(tmp_path: Path) -> None:
    with serve_process(tmp_path / "json", env={"A2A_GRPC_LOG_FORMAT": "json"}) as server:
        task = send_text(server.grpc_target, MESSAGE_TEXT)
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0
    lines = [json.loads(line) for line in server.stderr.splitlines() if line.strip()]
    access_lines = [line for line in lines if line["logger"] == ACCESS_LOGGER]
    assert [(line["method"], line["code"], line["task_id"]) for line in access_lines] == [
        ("SendMessage", "OK", task.id)
    ]
    assert any(line["message"].startswith("serving A2A on ") for line in lines if "message" in line)
    assert MESSAGE_TEXT not in server.stderr

    with serve_process(tmp_path / "off", "--no-access-log") as server:
        send_text(server.grpc_target, MESSAGE_TEXT)
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0
    assert "serving A2A on " in server.stderr and ACCESS_LOGGER not in server.stderr


def test_serve_writes_text_lines_by_default(tmp_path: Path) -> None:
    with serve_process(tmp_path / "text") as server:
        task = send_text(server.grpc_target, MESSAGE_TEXT)
        server.send_signal(signal.SIGTERM)
        assert server.wait() == 0
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"
    access = re.compile(rf"{stamp} INFO {re.escape(ACCESS_LOGGER)}: method=(\S+) code=(\S+) .* task_id=(\S+) ")
    found = [match.groups() for match in map(access.match, server.stderr.splitlines()) if match]
    assert found == [("SendMessage", "OK", task.id)]
    assert re.search(rf"^{stamp} INFO a2a_grpc\.server: serving A2A on ", server.stderr, re.MULTILINE)
    assert MESSAGE_TEXT not in server.stderr


def _arrival(metadata: tuple[tuple[str, str], ...] = ()) -> Arrival:
    return Arrival(peer="ipv4:127.0.0.1:50000", metadata=metadata)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _answered(task_id: str = "task-1") -> a2a_pb2.SendMessageResponse:
    response = a2a_pb2.SendMessageResponse()
    response.task.id, response.task.context_id = task_id, "context-1"
    return response


def _isolated_logger(name: str, *handlers: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"{ACCESS_LOGGER}.test.{name}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.handlers = list(handlers)
    logger.filters = []
    return logger


def _json_logger(name: str) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)  # what `--log-format json` sets up: written without a LogRecord
    handler.setFormatter(JsonFormatter())
    return _isolated_logger(name, handler), stream


def _write(access_log: AccessLog, task_id: str = "task-1") -> bool:
    call = CallContext(method="SendMessage", principal=PRINCIPAL)
    return access_log.write("SendMessage", _arrival(), call, OK, 0.0012, _answered(task_id), None)


def test_a_json_handler_writes_the_line_its_formatter_makes_of_the_record() -> None:
    direct, stream = _json_logger("direct")
    records = _Records()  # a handler of another kind: gets the LogRecord
    recorded = _isolated_logger("recorded", records)
    before = time.time()
    assert _write(AccessLog(direct)) and _write(AccessLog(recorded))
    after = time.time()
    line = json.loads(stream.getvalue())
    expected = json.loads(JsonFormatter().format(records.records[0]))
    assert stream.getvalue().endswith("}\n") and stream.getvalue().count("\n") == 1
    assert line.pop("logger") == direct.name and expected.pop("logger") == recorded.name
    stamped = datetime.fromisoformat(line.pop("time")).timestamp()
    assert before - 0.001 <= stamped <= after
    expected.pop("time")
    assert line == expected
    assert line["level"] == "INFO" and line["task_id"] == "task-1" and line["principal"] == PRINCIPAL


def _stream_event() -> bytes:
    event = a2a_pb2.StreamResponse()
    event.status_update.task_id, event.status_update.context_id = 'task-\u00e9"1', "context-1"
    return event.SerializeToString()


# (call, outcome, response, events) of calls logged in other shapes than _write's
LINES: dict[str, tuple[CallContext | None, Outcome, Any, int | None]] = {
    "stream": (
        CallContext(requested_extensions=(REQUIRED, UNDECLARED), activated_extensions=(REQUIRED,)),
        OK,
        _stream_event(),
        3,
    ),
    "refused": (
        None,
        Outcome(FAILED_PRECONDITION, "EXTENSION_SUPPORT_REQUIRED", {"missingExtensions": REQUIRED}),
        None,
        None,
    ),
    "not found": (
        CallContext(principal="bob"),
        Outcome(grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND", {"taskId": "t-9"}),
        None,
        None,
    ),
    "cancelled": (CallContext(), Outcome(grpc.StatusCode.CANCELLED), _answered("x" * 300), 0),
    "tenant": (CallContext(principal="bob", tenant="acme"), OK, _answered(), None),
}


def _written_straight_and_as_a_record(
    formatter: logging.Formatter, shape: str, call: CallContext | None, *line: Any
) -> tuple[str, logging.LogRecord, str]:
    """The line `formatter`'s handler got written straight, the record another handler got, and the name of
    the logger the straight line was written by."""
    arrival = _arrival((("a2a-version", "0.3"), ("a2a-extensions", f"{OPTIONAL}, {UNDECLARED}")))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    direct = _isolated_logger(f"direct.{type(formatter).__name__}.{shape}", handler)
    records = _Records()
    for logger in (direct, _isolated_logger(f"recorded.{shape}", records)):
        assert AccessLog(logger).write("GetTask", arrival, call, *line)
    assert stream.getvalue().count("\n") == 1
    return stream.getvalue(), records.records[0], direct.name


@pytest.mark.parametrize("shape", sorted(LINES))
def test_every_kind_of_line_is_the_same_written_straight_or_as_a_record(shape: str) -> None:
    call, outcome, response, events = LINES[shape]
    written, record, _ = _written_straight_and_as_a_record(
        JsonFormatter(), shape, call, outcome, 0.0012, response, events
    )
    line = json.loads(written)
    expected = json.loads(JsonFormatter().format(record))
    assert list(line)[3:] == list(expected)[3:]  # after time, level and logger: the same keys, in order
    assert {key: line[key] for key in list(line)[3:]} == {key: expected[key] for key in list(expected)[3:]}


@pytest.mark.parametrize("shape", sorted(LINES))
def test_every_kind_of_text_line_is_the_one_serves_formatter_makes_of_the_record(shape: str) -> None:
    call, outcome, response, events = LINES[shape]
    formatter = TextFormatter()
    before = time.time()
    written, record, name = _written_straight_and_as_a_record(formatter, shape, call, outcome, 0.0012, response, events)
    after = time.time()
    record.name = name
    stamp, rest = written[:23], written[24:].rstrip("\n")
    assert rest == formatter.format(record)[24:]  # level, logger and message, as the formatter writes the record
    assert rest.startswith(f"INFO {name}: method=GetTask code=")
    stamped = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time, as asctime is
    assert before - 0.001 <= stamped <= after


async def test_json_lines_written_while_the_loop_runs_are_written_together_soon_after_and_in_order() -> None:
    logger, stream = _json_logger("batched")
    access_log = AccessLog(logger)
    for task_id in ("task-1", "task-2"):
        assert _write(access_log, task_id)
    assert access_log.write("GetTask", _arrival(), None, Outcome(grpc.StatusCode.UNAUTHENTICATED), 0.001, None, None)
    assert stream.getvalue() == ""  # made and written at the next flush
    await asyncio.sleep(FLUSH_SECONDS * 4)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(line.get("task_id"), line["code"]) for line in lines] == [
        ("task-1", "OK"),
        ("task-2", "OK"),
        (None, "UNAUTHENTICATED"),
    ]
    assert _write(access_log, "task-3")
    failed = Outcome(grpc.StatusCode.INTERNAL, "INTERNAL", error=RuntimeError(STORE_FAILURE), unexpected=True)
    assert access_log.write("GetTask", _arrival(), CallContext(), failed, 0.001, None, None)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]  # at once: the ERROR line and those before
    assert [(line["level"], line.get("task_id")) for line in lines[3:]] == [("INFO", "task-3"), ("ERROR", None)]
    assert STORE_FAILURE in lines[-1]["exception"]


EXITING = """
import asyncio, logging, sys
from test_access_log import _json_logger, _write
from a2a_grpc.telemetry import AccessLog
logger, _ = _json_logger("exit")
logger.handlers[0].setStream(sys.stdout)
async def main() -> None:
    assert _write(AccessLog(logger), "task-at-exit")
asyncio.run(main())  # returns before the line's flush is due
"""


def test_lines_still_pending_when_the_process_exits_are_written() -> None:
    tests = str(Path(__file__).parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", EXITING], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["task_id"] == "task-at-exit"


def test_a_filter_or_a_text_handler_gets_every_line_as_a_record() -> None:
    stream = io.StringIO()
    json_handler = logging.StreamHandler(stream)
    json_handler.setFormatter(JsonFormatter())
    logger = _isolated_logger("filtered", json_handler)
    logger.addFilter(lambda record: getattr(record, "fields", {}).get("task_id") != "task-dropped")
    access_log = AccessLog(logger)
    assert _write(access_log, "task-dropped") and _write(access_log, "task-kept")
    assert [json.loads(line)["task_id"] for line in stream.getvalue().splitlines()] == ["task-kept"]
    text = io.StringIO()
    text_handler = logging.StreamHandler(text)
    text_handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger = _isolated_logger("text", text_handler)
    assert _write(AccessLog(logger))
    assert text.getvalue().startswith(f"INFO {logger.name}: method=SendMessage code=OK duration_ms=1.2 ")


def test_each_record_carries_what_a_log_call_would_record() -> None:
    records = _Records()
    access_log = AccessLog(_isolated_logger("records", records))
    before = time.time()
    for task_id in ("task-1", "task-2", "task-3"):
        assert _write(access_log, task_id)
    after = time.time()
    first, *copied = records.records
    made = logging.getLogger("any").makeRecord("any", logging.INFO, __file__, 1, "%s", ("x",), None)
    for record in records.records:
        assert record.__dict__.keys() >= made.__dict__.keys()
        assert (record.levelno, record.levelname, record.name) == (
            logging.INFO,
            "INFO",
            f"{ACCESS_LOGGER}.test.records",
        )
        assert (record.process, record.thread) == (os.getpid(), threading.get_ident())
        assert record.exc_info is None and record.stack_info is None
        assert before <= record.created <= after and 0 <= record.msecs < 1000
    assert [record.__dict__["fields"]["task_id"] for record in records.records] == ["task-1", "task-2", "task-3"]
    assert all(record.getMessage().endswith("context_id=context-1") for record in records.records)
    assert all(record.relativeCreated >= first.relativeCreated for record in copied)
    assert "task_id=task-2" in copied[0].getMessage()


def test_a_record_factory_of_the_application_makes_every_record() -> None:
    records = _Records()
    access_log = AccessLog(_isolated_logger("factory", records))
    default = logging.getLogRecordFactory()

    def tagged(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = default(*args, **kwargs)
        record.tag = "ours"
        return record

    assert _write(access_log)  # the first, before the factory
    logging.setLogRecordFactory(tagged)
    try:
        assert _write(access_log) and _write(access_log)
    finally:
        logging.setLogRecordFactory(default)
    assert [getattr(record, "tag", None) for record in records.records] == [None, "ours", "ours"]


def test_serves_logging_setup_leaves_an_applications_text_handlers_alone() -> None:
    """configure_logs, as `a2a-grpc serve` sets logging up, in a process whose root logger has a handler already:
    text leaves its formatter alone (logging.basicConfig adds nothing then), json gives it the JSON one."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    own_formatter = logging.Formatter("%(message)s")
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(own_formatter)
    root.handlers = [handler]
    try:
        configure_logs("INFO", "text")
        assert root.handlers == [handler] and handler.formatter is own_formatter
        configure_logs("INFO", "json")
        assert root.handlers == [handler] and type(handler.formatter) is JsonFormatter
    finally:
        root.handlers, level = saved
        root.setLevel(level)
