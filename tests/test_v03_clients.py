"""The v0.3 face driven by the official a2a-sdk 0.3 Python client, in a venv of its own (tests/sdk03_env.py):
tests/sdk03_driver.py runs there, driven by a JSON plan, and prints one JSON line per step.

Covered: the 0.3 card resolver reads our card (`url`, `preferredTransport`, `protocolVersion`: served with
--v03-card, as docs/v03.md says for such clients) and its client
sends, streams (an INPUT_REQUIRED stream ends on a final status update), gets, continues a task, cancels,
resubscribes, and creates, gets, lists and deletes push configs, with bearer authentication on one run and TLS
on another; credentials missing or wrong are UNAUTHENTICATED; errors come as the 0.3 SDK server sends them
(`<ErrorName>: <message>`, the 0.3 codes) with the ErrorInfo of v1.0 in grpc-status-details-bin; a required
extension is refused on every 0.3 RPC without x-a2a-extensions and accepted with it; `a2a-version: 1.0` on the
0.3 service is refused; message parts (text, data, files by URI and by bytes) and metadata cross the face both
ways, a part's metadata and a file's name (which a2a-sdk 0.3.26 sends beyond the v0.3.0 proto) included; a task made by either version is read, subscribed to and cancelled by the other; and
with the face off (serve_v03=False) the card advertises no 0.3 interface (the 0.3 resolver refuses it) and a 0.3
client that knows the address gets UNIMPLEMENTED naming lf.a2a.v1.A2AService, in the access log.

The SDK's venv is installed the first time (a minute, from PyPI); a failed install fails the tests, never
skips them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import grpc
import pytest
from agents import CancelProbeAgent, OutcomeAgent
from certs import Pki
from conftest import BASE_CARD, DEAD_HOOK, V1, StartServer, send_request
from process import direct_env
from rpc_helpers import Clients, Metadata, bearer, domain_of, read_all, rpc_error
from sdk03_env import SdkUnavailableError, sdk03_python

from a2a_grpc.agent import EventPublisher, RequestContext
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.server import A2AServer
from a2a_grpc.telemetry import ACCESS_LOGGER, JsonFormatter

Json = dict[str, Any]

REPO = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "sdk03_driver.py"
DRIVER_SECONDS = 90.0  # a whole driver run (the SDK's imports take a second or two of it)
LINE_SECONDS = 30.0  # the next line of a driver that is still running
STEP_SECONDS = 20.0  # one step, inside the driver
TOKEN = "sdk03-token-5eaf00d"
OTHER_TOKEN = "sdk03-token-other-b0b"
HOLD = "hold"  # a message starting so works until it is canceled
REQUIRED = "https://example.com/ext/required/v1"
OPTIONAL = "https://example.com/ext/optional/v1"
V1_SERVICE = "lf.a2a.v1.A2AService"
V1_STATES = a2a_pb2.TaskState
REQUIRED_CARD: Json = {
    **BASE_CARD,
    "capabilities": {
        **BASE_CARD["capabilities"],
        "extensions": [
            {"uri": REQUIRED, "description": "Every call must activate it.", "required": True},
            {"uri": OPTIONAL, "description": "A call may activate it."},
        ],
    },
}
NO_PUSH_CARD: Json = {**BASE_CARD, "capabilities": {"streaming": True, "pushNotifications": False}}
# One request of each 0.3 RPC (ProtoJSON of a2a.v1), about a task that does not exist.
MISSING_NAME = "tasks/no-such-task"
RAW_REQUESTS: dict[str, Json] = {
    "SendMessage": {"request": {"messageId": "m-raw", "role": "ROLE_USER", "content": [{"text": "hi"}]}},
    "SendStreamingMessage": {"request": {"messageId": "m-raw-s", "role": "ROLE_USER", "content": [{"text": "hi"}]}},
    "GetTask": {"name": MISSING_NAME},
    "CancelTask": {"name": MISSING_NAME},
    "TaskSubscription": {"name": MISSING_NAME},
    "CreateTaskPushNotificationConfig": {
        "parent": MISSING_NAME,
        "configId": "c1",
        "config": {"name": f"{MISSING_NAME}/pushNotificationConfigs/c1", "pushNotificationConfig": {"url": DEAD_HOOK}},
    },
    "GetTaskPushNotificationConfig": {"name": f"{MISSING_NAME}/pushNotificationConfigs/c1"},
    "ListTaskPushNotificationConfig": {"parent": MISSING_NAME},
    "DeleteTaskPushNotificationConfig": {"name": f"{MISSING_NAME}/pushNotificationConfigs/c1"},
    "GetAgentCard": {},
}
# What each of them gets once the required extension is sent: its own answer, or the lookup it comes to
# (GetAgentCard: the card, or UnsupportedOperationError where the card declares no extended card).
ACCEPTED_CODES: dict[str, set[str]] = {
    "SendMessage": {"OK"},
    "SendStreamingMessage": {"OK"},
    "GetAgentCard": {"OK", "UNIMPLEMENTED"},
    **{method: {"NOT_FOUND"} for method in RAW_REQUESTS if "Task" in method},
}


class MixedAgent:
    """A message starting with HOLD works until canceled (CancelProbeAgent); any other ends as its first word
    says (OutcomeAgent: "complete", "input", ...), with an artifact "outcome <word>"."""

    def __init__(self) -> None:
        self.outcome = OutcomeAgent()
        self.hold = CancelProbeAgent()

    async def execute(self, context: RequestContext, events: EventPublisher) -> None:
        if context.text().startswith(HOLD):
            await self.hold.execute(context, events)
        else:
            await self.outcome.execute(context, events)

    async def cancel(self, context: RequestContext, events: EventPublisher) -> None:
        await self.hold.cancel(context, events)


# ---- the driver ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sdk03() -> Path:
    """The 0.3 SDK venv's python: installed once for every checkout's test runs; a failed install fails."""
    try:
        return sdk03_python(REPO)
    except SdkUnavailableError as error:
        pytest.fail(f"a2a-sdk 0.3 could not be installed: {error}", pytrace=False)


class DriverRun:
    """A running driver: its JSON lines as they come, a line written to its stdin for each `wait` step."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[Json] = []
        self._stderr = bytearray()
        self._stderr_reader = asyncio.create_task(self._read_stderr())

    async def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(65536):
            self._stderr += chunk

    def why(self) -> str:
        return f"driver lines {self.lines}, stderr: {self._stderr.decode(errors='replace')[-2000:]}"

    async def line(self) -> Json | None:
        """The next line, None once the driver's output ended."""
        assert self.process.stdout is not None
        try:
            raw = await asyncio.wait_for(self.process.stdout.readline(), LINE_SECONDS)
        except TimeoutError:
            raise AssertionError(f"no line from the driver in {LINE_SECONDS} s; {self.why()}") from None
        if not raw:
            return None
        line: Json = json.loads(raw)
        self.lines.append(line)
        return line

    async def until(self, wanted: Callable[[Json], bool]) -> Json:
        """Lines until one is `wanted` (the test fails if the output ends first)."""
        for seen in self.lines:
            if wanted(seen):
                return seen
        while (line := await self.line()) is not None:
            if wanted(line):
                return line
        raise AssertionError(f"the driver ended without the line awaited; {self.why()}")

    async def answer(self, values: Json | None = None) -> None:
        """Lets the driver's next `wait` step go on, with these variables."""
        assert self.process.stdin is not None
        self.process.stdin.write((json.dumps(values or {}) + "\n").encode())
        await self.process.stdin.drain()

    async def close(self) -> None:
        """Waits for the end of the driver's stderr (it has exited)."""
        with suppress(asyncio.CancelledError):
            await asyncio.wait_for(self._stderr_reader, LINE_SECONDS)

    async def finish(self) -> Lines:
        if self.process.stdin is not None:
            self.process.stdin.close()
        while await self.line() is not None:
            pass
        code = await asyncio.wait_for(self.process.wait(), LINE_SECONDS)
        await self.close()
        assert code in (0, 3), f"the driver exited {code}; {self.why()}"  # 3: the card did not resolve
        return Lines(self.lines, self.why())


class Lines:
    """A finished driver's lines, read by step."""

    def __init__(self, lines: list[Json], why: str) -> None:
        self.lines = lines
        self.why = why

    def card(self) -> Json:
        found = [line for line in self.lines if line.get("op") == "card" and "step" not in line]
        assert found and "card" in found[0], f"the card did not resolve; {self.why}"
        card: Json = found[0]["card"]
        return card

    def card_error(self) -> Json:
        found = [line for line in self.lines if line.get("op") == "card" and "step" not in line]
        assert found and "error" in found[0], f"the card resolved; {self.why}"
        error: Json = found[0]["error"]
        return error

    def _end(self, step: int) -> Json:
        ends = [line for line in self.lines if line.get("step") == step and "event" not in line]
        assert len(ends) == 1, f"step {step} did not end once; {self.why}"
        return ends[0]

    def result(self, step: int) -> Json:
        end = self._end(step)
        assert "result" in end, f"step {step} failed: {end}; {self.why}"
        result: Json = end["result"]
        return result

    def error(self, step: int) -> Json:
        end = self._end(step)
        assert "error" in end, f"step {step} did not fail: {end}; {self.why}"
        error: Json = end["error"]
        return error

    def events(self, step: int) -> list[Json]:
        return [line["event"] for line in self.lines if line.get("step") == step and "event" in line]

    def task(self, step: int) -> Json:
        task: Json = self.result(step)["task"]
        return task


@asynccontextmanager
async def driver(sdk03: Path, plan: Json) -> AsyncIterator[DriverRun]:
    """A driver running `plan`; killed if still running when the block ends."""
    plan.setdefault("timeout", STEP_SECONDS)
    process = await asyncio.create_subprocess_exec(
        str(sdk03),
        "-I",
        str(DRIVER),
        json.dumps(plan),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=direct_env(),
    )
    run = DriverRun(process)
    try:
        yield run
    finally:
        if process.returncode is None:
            with suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        await run.close()


async def drive(sdk03: Path, plan: Json) -> Lines:
    """Runs a plan that waits for nothing from the test, to its end."""
    async with asyncio.timeout(DRIVER_SECONDS), driver(sdk03, plan) as run:
        return await run.finish()


def assert_a2a_error(error: Json, code: str, name: str, reason: str | None) -> None:
    """A gRPC error as the 0.3 client sees it: a raw AioRpcError, its message `<name>: ...`, with our ErrorInfo."""
    assert error.get("type") == "AioRpcError", error
    assert error["code"] == code, error
    assert error["details"].startswith(f"{name}: "), error
    assert error["status_details"], f"no grpc-status-details-bin: {error}"
    if reason is not None:
        assert (error.get("reason"), error.get("domain")) == (reason, domain_of(reason)), error


def state(task: Json) -> str:
    return str(task["status"]["state"])


def texts(task: Json) -> list[str]:
    return [part["text"] for artifact in task.get("artifacts", []) for part in artifact["parts"] if "text" in part]


# ---- servers -----------------------------------------------------------------------------------------------


async def secured_server(
    start_server: StartServer, tmp_path: Path, security: str, **settings: Any
) -> tuple[A2AServer, Json]:
    """A server with bearer tokens or TLS, and the driver plan's fields that reach it."""
    settings.setdefault("agent", MixedAgent())
    settings.setdefault("v03_card", True)  # the 0.3 resolver reads the card over HTTP
    if security == "bearer":
        server = await start_server(bearer_tokens={TOKEN: "alice", OTHER_TOKEN: "bob"}, **settings)
        return server, {"card_url": f"http://{server.http_target}", "token": TOKEN}
    pki = Pki(tmp_path / "pki")
    issued = pki.server("server")
    server = await start_server(tls_cert=str(issued.cert), tls_key=str(issued.key), **settings)
    return server, {"card_url": f"https://{server.http_target}", "ca_file": str(pki.ca_file)}


async def plain_server(start_server: StartServer, **settings: Any) -> tuple[A2AServer, Json]:
    settings.setdefault("agent", MixedAgent())
    settings.setdefault("v03_card", True)  # the 0.3 resolver reads the card over HTTP
    server = await start_server(**settings)
    return server, {"card_url": f"http://{server.http_target}"}


# ---- card resolution ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("security", ["bearer", "tls"])
async def test_the_03_resolver_reads_our_card(
    sdk03: Path, start_server: StartServer, tmp_path: Path, security: str
) -> None:
    server, plan = await secured_server(start_server, tmp_path, security)
    lines = await drive(sdk03, {**plan, "steps": []})
    card = lines.card()
    assert card["name"] == BASE_CARD["name"]
    assert card["url"] == server.grpc_target, "HOST:PORT, no scheme, TLS or not"
    assert card["preferredTransport"] == "GRPC"
    assert card["protocolVersion"] == "0.3.0"
    assert {"transport": "GRPC", "url": server.grpc_target} in card.get("additionalInterfaces", [])
    assert card["capabilities"]["streaming"] is True and card["capabilities"]["pushNotifications"] is True
    if security == "bearer":  # in 0.3's form: an http scheme, and a requirement naming it
        schemes = {name: scheme for name, scheme in card["securitySchemes"].items() if scheme["type"] == "http"}
        assert [scheme["scheme"].lower() for scheme in schemes.values()] == ["bearer"], card["securitySchemes"]
        assert card["security"] == [{name: []} for name in schemes], card["security"]
    served = await asyncio.to_thread(fetch_card, plan["card_url"], plan.get("ca_file"))
    versions = [
        entry["protocolVersion"]
        for entry in served["supportedInterfaces"]
        if entry["protocolBinding"] == "GRPC" and entry["url"].endswith(server.grpc_target)
    ]
    assert "1.0" in versions and any(version.startswith("0.3") for version in versions), served["supportedInterfaces"]


def fetch_card(base_url: str, ca_file: str | None) -> Json:
    """The card document as served (blocking)."""
    context = ssl.create_default_context(cafile=ca_file) if ca_file else None
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    with direct.open(f"{base_url}/.well-known/agent-card.json", timeout=STEP_SECONDS) as answer:
        card: Json = json.load(answer)
        return card


# ---- the 0.3 client's whole surface, with bearer authentication and with TLS --------------------------------


LIFECYCLE = [
    {"op": "send", "text": "complete now", "save_as": "first"},  # 0
    {"op": "get", "task_id": "$task"},  # 1
    {"op": "stream", "text": "complete streamed"},  # 2
    {"op": "stream", "text": "input please", "save_as": "waiting"},  # 3
    {"op": "send", "text": "complete it", "task_id": "$waiting", "context_id": "$context"},  # 4
    {"op": "send", "text": f"{HOLD} on", "blocking": False, "save_as": "held"},  # 5
    {"op": "push_create", "task_id": "$held", "id": "hook-1", "url": DEAD_HOOK, "token": "push-token-1"},  # 6
    {"op": "push_get", "task_id": "$held", "id": "hook-1"},  # 7
    {"op": "push_list", "task_id": "$held"},  # 8
    {"op": "push_delete", "task_id": "$held", "id": "hook-1"},  # 9
    {"op": "push_list", "task_id": "$held"},  # 10
    {"op": "resubscribe", "task_id": "$held", "background": True},  # 11
    {"op": "wait"},  # 12: until the resubscription's first event came
    {"op": "cancel", "task_id": "$held"},  # 13
    {"op": "get", "task_id": "$held"},  # 14
    {"op": "cancel", "task_id": "$held"},  # 15
    {"op": "get", "task_id": "no-such-task"},  # 16
    {"op": "resubscribe", "task_id": "$held"},  # 17
    {"op": "get", "task_id": "$first", "history_length": 1},  # 18
]


@pytest.mark.parametrize("security", ["bearer", "tls"])
async def test_the_03_client_sends_streams_gets_cancels_resubscribes_and_keeps_push_configs(
    sdk03: Path, start_server: StartServer, tmp_path: Path, security: str
) -> None:
    server, plan = await secured_server(start_server, tmp_path, security)
    async with asyncio.timeout(DRIVER_SECONDS), driver(sdk03, {**plan, "steps": LIFECYCLE}) as run:
        await run.until(lambda line: line.get("step") == 11 and "event" in line)
        await run.answer()
        lines = await run.finish()
    assert lines.card()["url"] == server.grpc_target

    sent = lines.task(0)
    assert state(sent) == "completed" and texts(sent) == ["outcome complete"]
    got = lines.task(1)
    assert (got["id"], got["contextId"], state(got)) == (sent["id"], sent["contextId"], "completed")
    assert ["complete now"] in [[p["text"] for p in m["parts"]] for m in got.get("history", []) if m["role"] == "user"]

    streamed = lines.events(2)
    assert "task" in streamed[0], "a stream begins with the task"
    assert any("artifact-update" in event for event in streamed)
    last = streamed[-1]["status-update"]
    assert (last["status"]["state"], last["final"]) == ("completed", True)
    assert lines.result(2)["events"] == len(streamed) and state(lines.task(2)) == "completed"

    waiting = lines.events(3)[-1]["status-update"]
    assert (waiting["status"]["state"], waiting["final"]) == ("input-required", True), (
        "a stream ending on INPUT_REQUIRED"
    )
    continued = lines.task(4)
    assert continued["id"] == lines.task(3)["id"] and state(continued) == "completed"
    assert texts(continued)[-1] == "outcome complete"

    held = lines.task(5)
    assert state(held) in ("submitted", "working")
    config = {"id": "hook-1", "url": DEAD_HOOK, "token": "push-token-1"}
    created = lines.result(6)["config"]
    assert created["taskId"] == held["id"] and created["pushNotificationConfig"] == config
    assert lines.result(7)["config"] == created
    assert lines.result(8)["configs"] == [created]
    assert lines.result(9) == {}
    assert lines.result(10)["configs"] == []

    resubscribed = lines.events(11)
    assert "task" in resubscribed[0] and resubscribed[0]["task"]["id"] == held["id"]
    final = resubscribed[-1]["status-update"]
    assert (final["status"]["state"], final["final"]) == ("canceled", True)
    assert state(lines.task(13)) == "canceled" and state(lines.task(14)) == "canceled"
    assert_a2a_error(lines.error(15), "FAILED_PRECONDITION", "TaskNotCancelableError", "TASK_NOT_CANCELABLE")
    assert_a2a_error(lines.error(16), "NOT_FOUND", "TaskNotFoundError", "TASK_NOT_FOUND")
    assert_a2a_error(lines.error(17), "UNIMPLEMENTED", "UnsupportedOperationError", "UNSUPPORTED_OPERATION")
    recent = lines.task(18)
    assert recent["id"] == sent["id"] and [m["role"] for m in recent["history"]] == ["agent"], "the latest message"


@pytest.mark.parametrize("token", [None, "not-" + TOKEN], ids=["missing", "wrong"])
async def test_the_03_client_without_good_credentials_is_unauthenticated(
    sdk03: Path, start_server: StartServer, tmp_path: Path, token: str | None
) -> None:
    _, plan = await secured_server(start_server, tmp_path, "bearer")
    plan = {**plan, "token": token} if token else {key: value for key, value in plan.items() if key != "token"}
    steps = [{"op": "send", "text": "complete"}, {"op": "stream", "text": "complete"}, {"op": "get", "task_id": "x"}]
    lines = await drive(sdk03, {**plan, "steps": steps})
    for step in range(len(steps)):
        error = lines.error(step)
        assert error["code"] == "UNAUTHENTICATED", error
        assert lines.events(step) == []


# ---- errors as the 0.3 SDK server sends them -----------------------------------------------------------------


async def test_errors_carry_the_03_names_and_codes_and_our_error_info(sdk03: Path, start_server: StartServer) -> None:
    _, plan = await plain_server(start_server)
    steps = [
        {"op": "get", "task_id": "no-such-task"},  # 0
        {"op": "cancel", "task_id": "no-such-task"},  # 1
        {"op": "resubscribe", "task_id": "no-such-task"},  # 2
        {"op": "send", "text": "complete", "task_id": "no-such-task"},  # 3
        {"op": "raw", "method": "GetTask", "request": {"name": "no-slash-here"}},  # 4
        {"op": "send", "text": "complete"},  # 5
        {"op": "raw", "method": "GetTask", "request": {"name": "tasks/$task"}, "metadata": [["a2a-version", "1.0"]]},
        {"op": "raw", "method": "GetTask", "request": {"name": "tasks/$task"}, "metadata": [["a2a-version", "0.3"]]},
    ]
    lines = await drive(sdk03, {**plan, "steps": steps})
    for step in range(4):
        assert_a2a_error(lines.error(step), "NOT_FOUND", "TaskNotFoundError", "TASK_NOT_FOUND")
    invalid = lines.error(4)
    assert_a2a_error(invalid, "INVALID_ARGUMENT", "InvalidParamsError", None)
    assert "no-slash-here" in invalid["details"], invalid
    version = lines.error(6)
    assert_a2a_error(version, "FAILED_PRECONDITION", "VersionNotSupportedError", "VERSION_NOT_SUPPORTED")
    assert V1_SERVICE in version["details"], version
    raw = lines.result(7)["response"]
    assert raw["id"] == lines.task(5)["id"], "a2a-version 0.3 is this service's own; ids are bare, names tasks/{id}"
    assert raw["status"]["state"] == "TASK_STATE_COMPLETED" and raw["status"]["timestamp"], raw


async def test_a_card_without_push_refuses_push_configs_as_03_does(sdk03: Path, start_server: StartServer) -> None:
    _, plan = await plain_server(start_server, card=NO_PUSH_CARD)
    steps = [
        {"op": "send", "text": "complete"},
        {"op": "push_create", "task_id": "$task", "id": "h", "url": DEAD_HOOK},
        {"op": "push_get", "task_id": "$task", "id": "h"},
        {"op": "push_list", "task_id": "$task"},
        {"op": "push_delete", "task_id": "$task", "id": "h"},
    ]
    lines = await drive(sdk03, {**plan, "steps": steps})
    assert state(lines.task(0)) == "completed"
    for step in range(1, 5):
        assert_a2a_error(
            lines.error(step), "UNIMPLEMENTED", "PushNotificationNotSupportedError", "PUSH_NOTIFICATION_NOT_SUPPORTED"
        )


# ---- a required extension ------------------------------------------------------------------------------------


def raw_steps() -> list[Json]:
    return [{"op": "raw", "method": method, "request": request} for method, request in RAW_REQUESTS.items()]


async def test_a_required_extension_is_refused_on_every_03_rpc_without_it_but_get_agent_card(
    sdk03: Path, start_server: StartServer
) -> None:
    """GetAgentCard is how a gRPC-only 0.3 client learns the required extension: it answers the card, echoing the
    extension the client asked for."""
    _, plan = await plain_server(start_server, card=REQUIRED_CARD)
    client_steps = [{"op": "send", "text": "complete"}, {"op": "stream", "text": "complete"}]
    lines = await drive(sdk03, {**plan, "extensions": [OPTIONAL], "steps": [*client_steps, *raw_steps()]})
    declared = {ext["uri"]: ext.get("required", False) for ext in lines.card()["capabilities"]["extensions"]}
    assert (declared[REQUIRED], declared[OPTIONAL]) == (True, False)
    methods = ["send", "stream", *RAW_REQUESTS]
    learned = lines.result(methods.index("GetAgentCard"))
    assert REQUIRED in [ext["uri"] for ext in learned["response"]["capabilities"]["extensions"]], learned
    assert learned["trailers"]["x-a2a-extensions"] == OPTIONAL
    for step, method in enumerate(methods):
        if method == "GetAgentCard":
            continue
        error = lines.error(step)
        assert_a2a_error(error, "FAILED_PRECONDITION", "ExtensionSupportRequiredError", "EXTENSION_SUPPORT_REQUIRED")
        assert REQUIRED in error["details"] and error["metadata"] == {"missingExtensions": REQUIRED}, (method, error)


async def test_a_required_extension_sent_by_the_03_client_is_accepted(sdk03: Path, start_server: StartServer) -> None:
    _, plan = await plain_server(start_server, card=REQUIRED_CARD)
    client_steps = [
        {"op": "send", "text": "complete"},
        {"op": "stream", "text": "complete"},
        {"op": "get", "task_id": "$task"},
    ]
    steps = [*client_steps, *raw_steps()]
    lines = await drive(sdk03, {**plan, "extensions": [REQUIRED, OPTIONAL], "steps": steps})
    assert state(lines.task(0)) == "completed"
    assert state(lines.task(1)) == "completed"
    assert lines.task(2)["id"] == lines.task(1)["id"]
    for step, method in enumerate(RAW_REQUESTS, start=len(client_steps)):
        end = [line for line in lines.lines if line.get("step") == step][-1]
        code = end["error"]["code"] if "error" in end else "OK"
        assert code in ACCEPTED_CODES[method], (method, end)
        if code == "NOT_FOUND":
            assert_a2a_error(end["error"], code, "TaskNotFoundError", "TASK_NOT_FOUND")
        if "result" in end:
            trailers = end["result"]["trailers"]
            echoed = trailers.get("a2a-extensions") or trailers.get("x-a2a-extensions") or ""
            assert {uri.strip() for uri in echoed.split(",")} == {REQUIRED, OPTIONAL}, (method, trailers)


# ---- message contents across the face ----------------------------------------------------------------------

# What the v0.3.0 proto carries: text, data (a JSON object), a file by URI or by bytes with its MIME type, and
# the message's metadata. (The a2a-sdk 0.3 Python client puts a file's bytes on the wire as their base64 text.)
PARTS_03: list[Json] = [
    {"kind": "text", "text": "complete with parts"},
    {"kind": "data", "data": {"a": 1, "nested": {"b": [1, 2], "c": "d"}}},
    {"kind": "file", "file": {"bytes": "aGVsbG8=", "mimeType": "text/plain"}},
    {"kind": "file", "file": {"uri": "https://example.com/x.png", "mimeType": "image/png"}},
]


def v1_parts_of_03() -> list[a2a_pb2.Part]:
    """PARTS_03 as a 1.0 client reads them."""
    data = a2a_pb2.Part()
    data.data.struct_value.update(PARTS_03[1]["data"])
    return [
        a2a_pb2.Part(text="complete with parts"),
        data,
        a2a_pb2.Part(raw=b"aGVsbG8=", media_type="text/plain"),
        a2a_pb2.Part(url="https://example.com/x.png", media_type="image/png"),
    ]


async def test_message_parts_and_metadata_cross_the_face_both_ways(
    sdk03: Path, start_server: StartServer, clients: Clients
) -> None:
    server, plan = await plain_server(start_server)
    stub = clients.stub(server)
    v1_message = a2a_pb2.Message(
        message_id="m-from-1.0", role=a2a_pb2.ROLE_USER, parts=v1_parts_of_03(), metadata={"trace": "from 1.0"}
    )
    from_v1 = (await stub.SendMessage(a2a_pb2.SendMessageRequest(message=v1_message), metadata=V1)).task
    steps = [
        {"op": "send", "parts": PARTS_03, "metadata": {"trace": "from 0.3"}},  # 0
        {"op": "get", "task_id": "$task"},  # 1
        {"op": "get", "task_id": from_v1.id},  # 2
    ]
    lines = await drive(sdk03, {**plan, "steps": steps})
    for step in (1, 2):
        sent = lines.task(step)["history"][0]
        assert sent["parts"] == PARTS_03, f"step {step}: {sent['parts']}"
        assert sent["metadata"] == {"trace": "from 0.3" if step == 1 else "from 1.0"}
    from_03: a2a_pb2.Task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=lines.task(0)["id"]), metadata=V1)
    assert list(from_03.history[0].parts) == v1_parts_of_03()
    assert dict(from_03.history[0].metadata) == {"trace": "from 0.3"}


# Fields the a2a-sdk 0.3.26 wire has beyond the v0.3.0 proto: Part.metadata (4) and FilePart.name (4).
NAMED_PARTS_03: list[Json] = [
    {"kind": "text", "text": "complete named", "metadata": {"k": "v"}},
    {"kind": "file", "file": {"uri": "https://example.com/x.png", "mimeType": "image/png", "name": "x.png"}},
]


async def test_part_metadata_and_file_names_the_03_sdk_sends_are_kept(
    sdk03: Path, start_server: StartServer, clients: Clients
) -> None:
    server, plan = await plain_server(start_server)
    stub = clients.stub(server)
    lines = await drive(sdk03, {**plan, "steps": [{"op": "send", "parts": NAMED_PARTS_03}]})
    task: a2a_pb2.Task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=lines.task(0)["id"]), metadata=V1)
    parts = task.history[0].parts
    assert (dict(parts[0].metadata), parts[1].filename) == ({"k": "v"}, "x.png"), "as a 1.0 client reads them"
    assert lines.task(0)["history"][0]["parts"] == NAMED_PARTS_03, "as the 0.3 client reads them back"


# ---- one task, both versions -------------------------------------------------------------------------------


async def test_a_task_the_03_client_made_is_read_subscribed_to_and_cancelled_by_a_10_client(
    sdk03: Path, start_server: StartServer, clients: Clients, tmp_path: Path
) -> None:
    server, plan = await secured_server(start_server, tmp_path, "bearer")
    stub = clients.stub(server)
    steps = [
        {"op": "send", "text": f"{HOLD} for 1.0", "blocking": False},  # 0
        {"op": "wait"},  # 1: the 1.0 client reads, subscribes to and cancels the task
        {"op": "get", "task_id": "$task"},  # 2
    ]
    async with asyncio.timeout(DRIVER_SECONDS), driver(sdk03, {**plan, "steps": steps}) as run:
        made = (await run.until(lambda line: line.get("step") == 0))["result"]["task"]
        task: a2a_pb2.Task = await stub.GetTask(a2a_pb2.GetTaskRequest(id=made["id"]), metadata=bearer(TOKEN))
        assert (task.id, task.context_id) == (made["id"], made["contextId"])
        assert task.status.state in (V1_STATES.TASK_STATE_SUBMITTED, V1_STATES.TASK_STATE_WORKING)
        assert [part.text for part in task.history[0].parts] == [f"{HOLD} for 1.0"]
        hidden = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id=made["id"]), metadata=bearer(OTHER_TOKEN)))
        assert hidden.code() == grpc.StatusCode.NOT_FOUND, "another principal does not see it"

        subscription = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=made["id"]), metadata=bearer(TOKEN))
        first = await subscription.read()
        assert first.task.id == made["id"]
        canceled = await stub.CancelTask(a2a_pb2.CancelTaskRequest(id=made["id"]), metadata=bearer(TOKEN))
        assert canceled.status.state == V1_STATES.TASK_STATE_CANCELED
        rest = await read_all(subscription)
        assert rest[-1].status_update.status.state == V1_STATES.TASK_STATE_CANCELED

        await run.answer()
        lines = await run.finish()
    assert state(lines.task(2)) == "canceled", "the 0.3 client sees the 1.0 client's cancel"


async def test_a_task_a_10_client_made_is_read_subscribed_to_and_cancelled_by_the_03_client(
    sdk03: Path, start_server: StartServer, clients: Clients, tmp_path: Path
) -> None:
    server, plan = await secured_server(start_server, tmp_path, "bearer")
    stub = clients.stub(server)
    made = (
        await stub.SendMessage(send_request(f"{HOLD} for 0.3", configuration=nonblocking()), metadata=bearer(TOKEN))
    ).task
    mine: Metadata = bearer(TOKEN)
    subscription = stub.SubscribeToTask(a2a_pb2.SubscribeToTaskRequest(id=made.id), metadata=mine)
    assert (await subscription.read()).task.id == made.id
    steps = [
        {"op": "get", "task_id": made.id},  # 0
        {"op": "resubscribe", "task_id": made.id, "background": True},  # 1
        {"op": "wait"},  # 2: until the resubscription's first event came
        {"op": "cancel", "task_id": made.id},  # 3
    ]
    async with asyncio.timeout(DRIVER_SECONDS), driver(sdk03, {**plan, "steps": steps}) as run:
        await run.until(lambda line: line.get("step") == 1 and "event" in line)
        await run.answer()
        lines = await run.finish()
        rest = await read_all(subscription)
    got = lines.task(0)
    assert (got["id"], got["contextId"]) == (made.id, made.context_id)
    assert state(got) in ("submitted", "working")
    assert [part["text"] for part in got["history"][0]["parts"]] == [f"{HOLD} for 0.3"]
    resubscribed = lines.events(1)
    assert resubscribed[0]["task"]["id"] == made.id
    final = resubscribed[-1]["status-update"]
    assert (final["status"]["state"], final["final"]) == ("canceled", True)
    assert state(lines.task(3)) == "canceled"
    assert rest[-1].status_update.status.state == V1_STATES.TASK_STATE_CANCELED, "the 1.0 subscriber sees it too"
    after = await stub.GetTask(a2a_pb2.GetTaskRequest(id=made.id), metadata=mine)
    assert after.status.state == V1_STATES.TASK_STATE_CANCELED


def nonblocking() -> a2a_pb2.SendMessageConfiguration:
    return a2a_pb2.SendMessageConfiguration(return_immediately=True)


# ---- the face off ------------------------------------------------------------------------------------------


async def test_with_the_03_face_off_the_03_client_gets_unimplemented_naming_the_10_service(
    sdk03: Path, start_server: StartServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    server = await start_server(serve_v03=False, agent=MixedAgent())
    served = await asyncio.to_thread(fetch_card, f"http://{server.http_target}", None)
    assert {entry["protocolVersion"] for entry in served["supportedInterfaces"]} == {"1.0"}
    assert "url" not in served and "preferredTransport" not in served, "no 0.3 interface is advertised"
    refused = (await drive(sdk03, {"card_url": f"http://{server.http_target}", "steps": []})).card_error()
    assert refused["type"] == "A2AClientJSONError" and '"url"' in refused["message"], refused

    # a 0.3 user who knows the address
    steps = [{"op": "send", "text": "complete"}, {"op": "stream", "text": "complete"}]
    lines = await drive(sdk03, {"target": server.grpc_target, "steps": steps})
    for step in range(len(steps)):
        error = lines.error(step)
        assert error["code"] == "UNIMPLEMENTED" and V1_SERVICE in error["details"], error
    async with asyncio.timeout(STEP_SECONDS):
        while True:
            methods = {line["method"].lstrip("/") for line in access_lines(caplog, "UNIMPLEMENTED")}
            if {"a2a.v1.A2AService/SendMessage", "a2a.v1.A2AService/SendStreamingMessage"} <= methods:
                break
            await asyncio.sleep(0.01)


def access_lines(caplog: pytest.LogCaptureFixture, code: str) -> list[Json]:
    formatter = JsonFormatter()
    lines = [json.loads(formatter.format(record)) for record in caplog.records if record.name == ACCESS_LOGGER]
    return [line for line in lines if line.get("code") == code]
