"""Server-side negotiation as a person at a shell sees it: grpcurl with reflection, `-H` and `-v`.

The same server, card and recording agent as tests/test_negotiation.py; grpcurl's verbose output is
parsed for the response headers, the messages and the trailers, and `-format-error` gives the status
(code, message, ErrorInfo) as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import StartServer
from google.protobuf import json_format
from test_negotiation import (
    DEPENDENCY_CASES,
    HEADER_FORMS,
    NEGOTIATION_CARD,
    OPTIONAL,
    REFUSED_FORMS,
    REFUSED_VERSIONS,
    REQUESTS,
    REQUIRED,
    ROOMY_METADATA_BYTES,
    RecordingAgent,
)

from a2a_grpc.protocol import EXTENSIONS_HEADER
from a2a_grpc.server import A2AServer

GRPCURL = str(Path(sys.executable).with_name("grpcurl"))
GRPCURL_SECONDS = 60.0
FAILED_PRECONDITION = 9  # gRPC status codes as grpcurl reports them
RESOURCE_EXHAUSTED = 8
INTERNAL = 13
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"

SECTIONS = {
    "Response headers received:": "headers",
    "Response contents:": "contents",
    "Response trailers received:": "trailers",
}


@dataclass
class Outcome:
    """What one grpcurl run printed: `-v` sections from stdout, the `-format-error` status from stderr."""

    exit_code: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    trailers: list[tuple[str, str]] = field(default_factory=list)
    status: dict[str, Any] | None = None
    stdout: str = ""

    @property
    def code(self) -> int:
        return 0 if self.status is None else int(self.status.get("code", 0))

    def echoed(self, where: list[tuple[str, str]]) -> list[str]:
        return [value for key, value in where if key == EXTENSIONS_HEADER]

    def error_info(self) -> dict[str, Any]:
        assert self.status is not None, self.stdout
        infos = [d for d in self.status.get("details", []) if d.get("@type") == ERROR_INFO_TYPE]
        assert len(infos) == 1, self.status
        info: dict[str, Any] = infos[0]
        return info


def parse_verbose(exit_code: int, stdout: str, stderr: str) -> Outcome:
    outcome = Outcome(exit_code, stdout=stdout)
    section: str | None = None
    body: list[str] = []
    for line in stdout.splitlines():
        if line in SECTIONS:
            section, body = SECTIONS[line], []
        elif section == "contents":
            body.append(line)
            if line == "}":  # grpcurl closes each pretty-printed message at column 0
                outcome.messages.append(json.loads("\n".join(body)))
                section = None
        elif section in ("headers", "trailers"):
            if not line or line.startswith("Sent "):
                section = None
            elif line != "(empty)":
                key, _, value = line.partition(":")
                (outcome.headers if section == "headers" else outcome.trailers).append((key, value.strip()))
    if "{" in stderr:
        outcome.status = json.loads(stderr[stderr.index("{") :])
    return outcome


async def grpcurl(target: str, method: str, body: dict[str, Any], *headers: str) -> Outcome:
    """Run grpcurl against `target` (reflection, plaintext) without blocking the server's event loop."""
    args = ["-plaintext", "-v", "-format-error", "-max-time", "30"]
    for header in headers:
        args += ["-H", header]
    args += ["-d", json.dumps(body), target, f"lf.a2a.v1.A2AService/{method}"]
    process = await asyncio.create_subprocess_exec(
        GRPCURL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), GRPCURL_SECONDS)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return parse_verbose(process.returncode, stdout.decode(), stderr.decode())


def request_body(method: str) -> dict[str, Any]:
    return json_format.MessageToDict(REQUESTS[method]())


def message_body(text: str) -> dict[str, Any]:
    return {"message": {"messageId": f"m-{abs(hash(text))}", "role": "ROLE_USER", "parts": [{"text": text}]}}


def version_header(version: str = "1.0") -> str:
    return f"a2a-version: {version}"


def extension_headers(*values: str) -> list[str]:
    return [f"{EXTENSIONS_HEADER}: {value}" for value in values]


def assert_refused(outcome: Outcome, code: int, reason: str) -> dict[str, Any]:
    assert (outcome.exit_code, outcome.code) == (64 + code, code), (outcome.status, outcome.stdout)
    info = outcome.error_info()
    assert (info["reason"], info["domain"]) == (reason, "a2a-protocol.org"), info
    assert outcome.messages == []
    assert outcome.echoed(outcome.headers) == [] and outcome.echoed(outcome.trailers) == []
    return dict(info.get("metadata", {}))


def assert_extension_refusal(outcome: Outcome) -> None:
    assert assert_refused(outcome, FAILED_PRECONDITION, "EXTENSION_SUPPORT_REQUIRED") == {"missingExtensions": REQUIRED}


async def assert_still_serving(target: str, agent: RecordingAgent) -> None:
    before = len(agent.seen)
    outcome = await grpcurl(
        target, "SendMessage", message_body("still serving"), version_header(), f"{EXTENSIONS_HEADER}: {REQUIRED}"
    )
    assert outcome.exit_code == 0, (outcome.status, outcome.stdout)
    assert outcome.messages[0]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [seen.activated for seen in agent.seen[before:]] == [(REQUIRED,)]


@pytest.fixture
def agent() -> RecordingAgent:
    return RecordingAgent()


@pytest.fixture
async def target(start_server: StartServer, agent: RecordingAgent) -> str:
    server: A2AServer = await start_server(card=NEGOTIATION_CARD, agent=agent, echo_unary_headers=True)
    return server.grpc_target


@pytest.fixture
async def roomy_target(start_server: StartServer, agent: RecordingAgent) -> AsyncIterator[str]:
    server = await start_server(
        card=NEGOTIATION_CARD,
        agent=agent,
        max_metadata_bytes=ROOMY_METADATA_BYTES,
        max_extensions_per_call=10_000,  # past --max-extensions-per-call: the transport is the bound here
        echo_unary_headers=True,
    )
    yield server.grpc_target


# ---- refusal -------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", sorted(REQUESTS))
async def test_a_call_missing_the_required_extension_is_refused(
    method: str, target: str, agent: RecordingAgent
) -> None:
    outcome = await grpcurl(target, method, request_body(method), version_header(), *extension_headers(OPTIONAL))
    assert_extension_refusal(outcome)
    assert outcome.status is not None and REQUIRED in outcome.status["message"]
    assert agent.seen == []


# ---- header forms, echo --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage"])
@pytest.mark.parametrize("form", sorted(HEADER_FORMS))
async def test_every_header_form_negotiates(form: str, method: str, target: str, agent: RecordingAgent) -> None:
    sent, requested, activated = HEADER_FORMS[form]
    outcome = await grpcurl(target, method, message_body(form), version_header(), *extension_headers(*sent))
    assert outcome.exit_code == 0, (outcome.status, outcome.stdout)
    seen = agent.seen_once()
    assert (seen.requested, seen.activated) == (requested, activated)
    assert outcome.echoed(outcome.headers) == [",".join(activated)]
    assert outcome.echoed(outcome.trailers) == [",".join(activated)]
    assert outcome.messages, outcome.stdout


async def test_the_stream_echo_is_printed_before_the_first_event(target: str) -> None:
    outcome = await grpcurl(
        target, "SendStreamingMessage", message_body("stream"), version_header(), *extension_headers(OPTIONAL, REQUIRED)
    )
    assert outcome.exit_code == 0, outcome.status
    assert outcome.echoed(outcome.headers) == [f"{OPTIONAL},{REQUIRED}"]
    first_event = outcome.stdout.index("Response contents:")
    assert outcome.stdout.index("Response headers received:") < first_event
    assert outcome.stdout.index(f"{EXTENSIONS_HEADER}: {OPTIONAL},{REQUIRED}") < first_event
    assert outcome.messages[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert outcome.messages[-1]["status_update"]["status"]["state"] == "TASK_STATE_COMPLETED"  # grpcurl: proto names


@pytest.mark.parametrize("form", sorted(REFUSED_FORMS))
async def test_forms_that_do_not_name_the_required_v1_are_refused(
    form: str, target: str, agent: RecordingAgent
) -> None:
    outcome = await grpcurl(
        target, "SendMessage", message_body(form), version_header(), *extension_headers(*REFUSED_FORMS[form])
    )
    assert_extension_refusal(outcome)
    assert agent.seen == []


@pytest.mark.parametrize("case", sorted(DEPENDENCY_CASES))
async def test_an_extension_is_active_only_with_its_dependencies(case: str, target: str, agent: RecordingAgent) -> None:
    sent, activated = DEPENDENCY_CASES[case]
    outcome = await grpcurl(target, "SendMessage", message_body(case), version_header(), *extension_headers(sent))
    assert outcome.exit_code == 0, outcome.status
    assert agent.seen_once().activated == activated
    assert outcome.echoed(outcome.headers) == outcome.echoed(outcome.trailers) == [",".join(activated)]


# ---- a2a-version ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", REFUSED_VERSIONS)
async def test_an_unsupported_version_is_refused(case: str, target: str, agent: RecordingAgent) -> None:
    version = REFUSED_VERSIONS[case]
    headers = [*extension_headers(REQUIRED), *([] if version is None else [version_header(version)])]
    outcome = await grpcurl(target, "SendMessage", message_body(case), *headers)
    metadata = assert_refused(outcome, FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
    assert metadata == {"requestedVersion": version or "", "supportedVersions": "1.0"}
    assert outcome.status is not None and "a2a-version: 1.0" in outcome.status["message"]
    assert agent.seen == []


@pytest.mark.parametrize("version", ["1.0", "1.0.1"])
async def test_version_1_0_with_any_patch_is_accepted(version: str, target: str, agent: RecordingAgent) -> None:
    outcome = await grpcurl(
        target, "SendMessage", message_body(version), version_header(version), *extension_headers(REQUIRED)
    )
    assert outcome.exit_code == 0, outcome.status
    assert agent.seen_once().version == "1.0"


# ---- hostile metadata ----------------------------------------------------------------------------

HUGE_VALUE = "x" * (64 * 1024)
MANY_URNS = ",".join(f"urn:x:{i}" for i in range(5000))  # one argument under the kernel's 128 KiB limit


async def test_a_64kib_header_is_not_even_sent_to_the_server(target: str, agent: RecordingAgent) -> None:
    """The server advertises gRPC's 16 KiB header limit (HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE); grpc-go,
    and so grpcurl, checks it before sending and fails the call itself (INTERNAL, its own choice)."""
    outcome = await grpcurl(
        target, "SendMessage", message_body("huge"), version_header(), *extension_headers(f"{REQUIRED},{HUGE_VALUE}")
    )
    assert (outcome.exit_code, outcome.code) == (64 + INTERNAL, INTERNAL), outcome.status
    assert outcome.status is not None
    assert "header list size to send violates the maximum size (16384 bytes) set by server" in outcome.status["message"]
    assert agent.seen == []
    await assert_still_serving(target, agent)


# name: (the a2a-extensions entries as sent, whether the call is accepted)
HOSTILE_HEADERS: dict[str, tuple[tuple[str, ...], bool]] = {
    "64KiB value": ((f"{REQUIRED},{HUGE_VALUE}",), True),
    "64KiB value without the required": ((HUGE_VALUE,), False),
    "5000 uris": ((f"{REQUIRED},{MANY_URNS}",), True),
    "100 repeated entries": ((REQUIRED,) * 100, True),
    "an empty value": (("",), False),
    "only commas": ((",,,,,,",), False),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_HEADERS))
async def test_hostile_extension_headers_get_a_sensible_answer(
    case: str, roomy_target: str, agent: RecordingAgent
) -> None:
    sent, accepted = HOSTILE_HEADERS[case]
    outcome = await grpcurl(
        roomy_target, "SendMessage", message_body(case), version_header(), *extension_headers(*sent)
    )
    if accepted:
        assert outcome.exit_code == 0, outcome.status
        assert outcome.echoed(outcome.headers) == outcome.echoed(outcome.trailers) == [REQUIRED]
        assert agent.seen_once().activated == (REQUIRED,)
    else:
        assert_extension_refusal(outcome)
        assert agent.seen == []
    await assert_still_serving(roomy_target, agent)
