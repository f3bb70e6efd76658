"""One table of header forms and versions, run against three packagings of the same rules: our A2AServer, and a
bare servicer behind the standard interceptors on a grpc.aio server (A2AServerInterceptor) and on a sync
grpc.server (A2ASyncServerInterceptor), all on 127.0.0.1 with the same card. Every case must end the same way on
all three: the same code, status message and status details (bytes), and the same echo in the trailers and the
response headers; the bare servicers saw the activated set through `activated_extensions()`.

Then: the interceptors import no generated code (a fresh interpreter), and a card is read from a file, a dict or a
message of any generated module."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from bare_a2a import SEEN_TRAILER, bare_servicer
from conftest import BASE_CARD, LOOPBACK_PUSH
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.generated import a2a_pb2, a2a_pb2_grpc
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03
from a2a_grpc.generated.v0_3 import a2a_pb2_grpc as v03_grpc
from a2a_grpc.interceptors.server import A2AServerInterceptor, A2ASyncServerInterceptor
from a2a_grpc.interceptors.server.declared import card_extensions
from a2a_grpc.protocol import A2A_SERVICE, SERVICE_NAME
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.wire import V03_SERVICE_NAME

REQUIRED = "https://example.com/ext/required/v1"
OPTIONAL = "https://example.com/ext/optional/v1"
CARD: dict[str, Any] = {
    **BASE_CARD,
    "capabilities": {
        **BASE_CARD["capabilities"],
        "extensions": [{"uri": REQUIRED, "required": True}, {"uri": OPTIONAL, "description": "optional"}],
    },
}
ECHO_KEYS = ("a2a-extensions", "x-a2a-extensions")
V03_SERVICE = v03.DESCRIPTOR.services_by_name["A2AService"]
OK = grpc.StatusCode.OK
REFUSED = grpc.StatusCode.FAILED_PRECONDITION
Metadata = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Case:
    name: str
    metadata: Metadata
    code: grpc.StatusCode
    reason: str = ""  # the ErrorInfo reason of a refusal
    echo: str = ""  # the activated set echoed by an accepted call
    face: str = "1.0"  # or "0.3"
    streaming: bool = False


def v1(*entries: str, version: str = "1.0") -> Metadata:
    return (("a2a-version", version), *(("a2a-extensions", entry) for entry in entries))


BOTH = f"{REQUIRED},{OPTIONAL}"
CASES = [
    Case("no extensions header", v1(), REFUSED, "EXTENSION_SUPPORT_REQUIRED"),
    Case("one joined entry", v1(f"{REQUIRED},{OPTIONAL}"), OK, echo=BOTH),
    Case("one entry per URI", v1(REQUIRED, OPTIONAL), OK, echo=BOTH),
    Case("spaces", v1(f"  {REQUIRED} ,   {OPTIONAL}  "), OK, echo=BOTH),
    Case("duplicates", v1(f"{REQUIRED},{REQUIRED}", f"{OPTIONAL}, {REQUIRED}"), OK, echo=BOTH),
    Case("unknown URIs ignored", v1(f"https://example.com/unknown, {REQUIRED}"), OK, echo=REQUIRED),
    Case(
        "the other version of a declared URI", v1(REQUIRED.replace("/v1", "/v2")), REFUSED, "EXTENSION_SUPPORT_REQUIRED"
    ),
    Case("a missing required beside an optional", v1(OPTIONAL), REFUSED, "EXTENSION_SUPPORT_REQUIRED"),
    Case("empty entries only", v1(" , ,"), REFUSED, "EXTENSION_SUPPORT_REQUIRED"),
    Case("a2a-version missing", (("a2a-extensions", REQUIRED),), REFUSED, "VERSION_NOT_SUPPORTED"),
    Case("a2a-version 1.0.1", v1(REQUIRED, version="1.0.1"), OK, echo=REQUIRED),
    Case("a2a-version 0.3", v1(REQUIRED, version="0.3"), REFUSED, "VERSION_NOT_SUPPORTED"),
    Case("a2a-version 2.0", v1(REQUIRED, version="2.0"), REFUSED, "VERSION_NOT_SUPPORTED"),
    Case("the version is checked before the extensions", v1(version="2.0"), REFUSED, "VERSION_NOT_SUPPORTED"),
    Case(
        "too many extensions",
        v1(",".join(f"https://example.com/e{i}" for i in range(33)), REQUIRED),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PARAMS",
    ),
    Case("stream accepted", v1(REQUIRED), OK, echo=REQUIRED, streaming=True),
    Case("stream: one entry per URI", v1(OPTIONAL, REQUIRED), OK, echo=f"{OPTIONAL},{REQUIRED}", streaming=True),
    Case("stream refused", v1(OPTIONAL), REFUSED, "EXTENSION_SUPPORT_REQUIRED", streaming=True),
    Case("stream version refused", v1(REQUIRED, version="0.3"), REFUSED, "VERSION_NOT_SUPPORTED", streaming=True),
    Case("0.3: x-a2a-extensions", (("x-a2a-extensions", REQUIRED),), OK, echo=REQUIRED, face="0.3"),
    Case(
        "0.3: a2a-extensions",
        (("a2a-extensions", f"{OPTIONAL}, {REQUIRED}"),),
        OK,
        echo=f"{OPTIONAL},{REQUIRED}",
        face="0.3",
    ),
    Case("0.3: none", (), REFUSED, "EXTENSION_SUPPORT_REQUIRED", face="0.3"),
    Case(
        "0.3: a2a-version 1.0",
        (("a2a-version", "1.0"), ("x-a2a-extensions", REQUIRED)),
        REFUSED,
        "VERSION_NOT_SUPPORTED",
        face="0.3",
    ),
    Case("0.3 stream", (("x-a2a-extensions", REQUIRED),), OK, echo=REQUIRED, face="0.3", streaming=True),
    Case("0.3 stream refused", (), REFUSED, "EXTENSION_SUPPORT_REQUIRED", face="0.3", streaming=True),
]


@dataclass(frozen=True)
class Outcome:
    code: grpc.StatusCode
    message: str
    details: bytes  # grpc-status-details-bin
    trailer_echo: tuple[tuple[str, str], ...]
    header_echo: tuple[tuple[str, str], ...]
    seen: str  # what a bare servicer's activated_extensions() said (SEEN_TRAILER), "" from our server


@pytest.fixture(scope="module")
async def targets(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, str]]:
    """packaging -> its address: our server, and the bare servicers behind the asyncio and the sync interceptor."""
    card_path = tmp_path_factory.mktemp("card") / "card.json"
    card_path.write_text(json.dumps(CARD))
    ours = A2AServer(
        ServerSettings(
            listen="127.0.0.1:0",
            http_listen="127.0.0.1:0",
            card_path=str(card_path),
            store_url="memory",
            push=LOOPBACK_PUSH,
        )
    )
    await ours.start()
    aio = grpc.aio.server(interceptors=[A2AServerInterceptor(card=str(card_path))])
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(
        bare_servicer(a2a_pb2_grpc.A2AServiceServicer, A2A_SERVICE, asynchronous=True), aio
    )  # type: ignore[no-untyped-call]
    v03_grpc.add_A2AServiceServicer_to_server(
        bare_servicer(v03_grpc.A2AServiceServicer, V03_SERVICE, asynchronous=True), aio
    )  # type: ignore[no-untyped-call]
    aio_port = aio.add_insecure_port("127.0.0.1:0")
    await aio.start()
    sync = grpc.server(futures.ThreadPoolExecutor(max_workers=4), interceptors=[A2ASyncServerInterceptor(card=CARD)])
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(
        bare_servicer(a2a_pb2_grpc.A2AServiceServicer, A2A_SERVICE, asynchronous=False), sync
    )  # type: ignore[no-untyped-call]
    v03_grpc.add_A2AServiceServicer_to_server(
        bare_servicer(v03_grpc.A2AServiceServicer, V03_SERVICE, asynchronous=False), sync
    )  # type: ignore[no-untyped-call]
    sync_port = sync.add_insecure_port("127.0.0.1:0")
    sync.start()
    yield {
        "A2AServer": ours.grpc_target,
        "asyncio interceptor": f"127.0.0.1:{aio_port}",
        "sync interceptor": f"127.0.0.1:{sync_port}",
    }
    sync.stop(0)
    await aio.stop(0)
    await ours.stop(0)


def _request(case: Case) -> tuple[str, Any, Any]:
    """(the method path, the request, its response parser)"""
    method = "SendStreamingMessage" if case.streaming else "SendMessage"
    if case.face == "0.3":
        content = [v03.Part(text="hello")]
        request: Any = v03.SendMessageRequest(
            request=v03.Message(message_id="m-1", role=v03.ROLE_USER, content=content)
        )
        parse: Any = v03.StreamResponse.FromString if case.streaming else v03.SendMessageResponse.FromString
        return f"/{V03_SERVICE_NAME}/{method}", request, parse
    parts = [a2a_pb2.Part(text="hello")]
    request = a2a_pb2.SendMessageRequest(message=a2a_pb2.Message(message_id="m-1", role=a2a_pb2.ROLE_USER, parts=parts))
    parse = a2a_pb2.StreamResponse.FromString if case.streaming else a2a_pb2.SendMessageResponse.FromString
    return f"/{SERVICE_NAME}/{method}", request, parse


async def outcome(channel: grpc.aio.Channel, case: Case) -> Outcome:
    path, request, parse = _request(case)
    serialize = type(request).SerializeToString
    if case.streaming:
        call: Any = channel.unary_stream(path, request_serializer=serialize, response_deserializer=parse)(
            request, metadata=case.metadata, timeout=10
        )
    else:
        call = channel.unary_unary(path, request_serializer=serialize, response_deserializer=parse)(
            request, metadata=case.metadata, timeout=10
        )
    try:
        if case.streaming:
            async for _ in call:
                pass
        else:
            await call
    except grpc.aio.AioRpcError:
        pass
    trailers = tuple(await call.trailing_metadata() or ())
    headers = tuple(await call.initial_metadata() or ())
    return Outcome(
        await call.code(),
        await call.details() if await call.code() != OK else "",
        next((value for key, value in trailers if key == "grpc-status-details-bin"), b""),
        tuple((key, value) for key, value in trailers if key in ECHO_KEYS),
        tuple((key, value) for key, value in headers if key in ECHO_KEYS),
        next((value for key, value in trailers if key == SEEN_TRAILER), ""),
    )


def _expected_echo(case: Case) -> tuple[tuple[str, str], ...]:
    if not case.echo:
        return ()
    return tuple((key, case.echo) for key in (ECHO_KEYS[::-1] if case.face == "0.3" else ECHO_KEYS[:1]))


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_the_standard_interceptors_enforce_and_echo_as_our_server_does(
    targets: dict[str, str], case: Case
) -> None:
    outcomes: dict[str, Outcome] = {}
    for packaging, target in targets.items():
        async with grpc.aio.insecure_channel(target) as channel:
            outcomes[packaging] = await outcome(channel, case)
    ours = outcomes["A2AServer"]
    assert ours.code == case.code, ours
    if case.code != OK:
        status = status_pb2.Status.FromString(ours.details)
        info = error_details_pb2.ErrorInfo()
        assert status.details[0].Unpack(info)
        assert info.reason == case.reason
    assert ours.trailer_echo == _expected_echo(case)
    assert ours.header_echo == (_expected_echo(case) if case.streaming else ())
    for packaging in ("asyncio interceptor", "sync interceptor"):
        theirs = outcomes[packaging]
        assert (theirs.code, theirs.message, theirs.details) == (ours.code, ours.message, ours.details), packaging
        assert (theirs.trailer_echo, theirs.header_echo) == (ours.trailer_echo, ours.header_echo), packaging
        assert theirs.seen == ("" if case.code != OK else case.echo or "-"), packaging


def test_the_standard_interceptors_import_no_generated_code() -> None:
    """A fresh interpreter imports the interceptors and builds both: neither our generated modules nor any lf.a2a.v1
    or a2a.v1 symbol is in protobuf's default pool, so another package's stubs of the same protos can share it."""
    script = """
import sys
from google.protobuf import descriptor_pool
from a2a_grpc.interceptors.server import A2AServerInterceptor, A2ASyncServerInterceptor, activated_extensions
A2AServerInterceptor(card={"capabilities": {"extensions": [{"uri": "u", "required": True}]}})
A2ASyncServerInterceptor(extensions=[("u", True)])
generated = sorted(name for name in sys.modules if name.startswith("a2a_grpc.generated"))
pool = descriptor_pool.Default()
registered = []
for name in ("lf.a2a.v1.A2AService", "a2a.v1.A2AService", "lf.a2a.v1.AgentCard"):
    try:
        pool.FindFileContainingSymbol(name)
        registered.append(name)
    except KeyError:
        pass
print(generated, registered, "a2a_grpc.protocol" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] [] False"


def test_the_wire_names_are_the_generated_services_names() -> None:
    assert A2A_SERVICE.full_name == SERVICE_NAME
    assert V03_SERVICE.full_name == V03_SERVICE_NAME


def test_a_card_is_read_from_a_file_a_dict_or_any_generated_message(tmp_path: Path) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(CARD))
    message = a2a_pb2.AgentCard()
    message.capabilities.extensions.add(uri=REQUIRED, required=True)
    message.capabilities.extensions.add(uri=OPTIONAL)
    expected = [(REQUIRED, True), (OPTIONAL, False)]
    assert (
        card_extensions(str(path))
        == card_extensions(path)
        == card_extensions(CARD)
        == card_extensions(message)
        == expected
    )
    assert A2AServerInterceptor(card=message).declared == tuple(expected)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({}, TypeError),
        ({"card": CARD, "extensions": []}, TypeError),
        ({"card": "/nonexistent/card.json"}, ValueError),
        ({"card": {"capabilities": {"extensions": [{"uri": ""}]}}}, ValueError),
        ({"card": {"capabilities": {"extensions": [{"uri": "u", "required": "yes"}]}}}, ValueError),
        ({"card": {"capabilities": {"extensions": {"uri": "u"}}}}, ValueError),
        ({"extensions": [(None, True)]}, ValueError),
        ({"extensions": [("u", True), ("u", False)]}, ValueError),  # which one would it enforce?
        ({"extensions": [], "missing_version_means": "2.0"}, ValueError),
    ],
)
def test_a_bad_declaration_is_refused_when_the_interceptor_is_made(
    kwargs: dict[str, Any], error: type[Exception]
) -> None:
    for interceptor in (A2AServerInterceptor, A2ASyncServerInterceptor):
        with pytest.raises(error):
            interceptor(**kwargs)


async def test_a_sync_servicer_on_a_grpc_aio_server_is_echoed_and_sees_its_extensions() -> None:
    """grpc.aio runs a servicer's sync methods in its thread pool: the asyncio interceptor wraps them the sync way."""
    server = grpc.aio.server(
        migration_thread_pool=futures.ThreadPoolExecutor(max_workers=2),
        interceptors=[A2AServerInterceptor(card=CARD)],
    )
    servicer = bare_servicer(a2a_pb2_grpc.A2AServiceServicer, A2A_SERVICE, asynchronous=False)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            for streaming in (False, True):
                case = Case("sync servicer", v1(REQUIRED), OK, echo=REQUIRED, streaming=streaming)
                seen = await outcome(channel, case)
                assert (seen.code, seen.trailer_echo, seen.seen) == (OK, _expected_echo(case), REQUIRED)
                assert seen.header_echo == (_expected_echo(case) if streaming else ())
    finally:
        await server.stop(0)


@pytest.mark.parametrize("packaging", ["asyncio interceptor", "sync interceptor"])
async def test_the_0_3_agent_card_is_served_without_the_required_extensions(
    targets: dict[str, str], packaging: str
) -> None:
    """A gRPC-only 0.3 client learns the required extensions from GetAgentCard: it is admitted without them (and
    echoes what it asks for), as on our server's 0.3 face; the 1.0 extended card is not."""
    async with grpc.aio.insecure_channel(targets[packaging]) as channel:
        card = channel.unary_unary(f"/{V03_SERVICE_NAME}/GetAgentCard")(b"", metadata=(("x-a2a-extensions", OPTIONAL),))
        await card
        assert (await card.code(), dict(await card.trailing_metadata() or ()).get("x-a2a-extensions")) == (OK, OPTIONAL)
        extended = channel.unary_unary(f"/{SERVICE_NAME}/GetExtendedAgentCard")(b"", metadata=v1())
        with pytest.raises(grpc.aio.AioRpcError):
            await extended
        assert await extended.code() == REFUSED


class Aborting(a2a_pb2_grpc.A2AServiceServicer):
    """GetTask aborts with trailers of its own, the asyncio way."""

    async def GetTask(self, request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such task", (("x-mine", "kept"),))


class SyncAborting(a2a_pb2_grpc.A2AServiceServicer):
    """GetTask aborts with trailers of its own from a sync method, which grpc.aio runs in its thread pool."""

    def GetTask(self, request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.NOT_FOUND, "no such task", (("x-mine", "kept"),))


@pytest.mark.parametrize("servicer", [Aborting, SyncAborting], ids=["async method", "sync method"])
async def test_a_servicers_abort_with_its_own_trailers_keeps_the_echo_on_a_grpc_aio_server(servicer: type) -> None:
    server = grpc.aio.server(
        migration_thread_pool=futures.ThreadPoolExecutor(max_workers=2),
        interceptors=[A2AServerInterceptor(card=CARD)],
    )
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
            call = stub.GetTask(a2a_pb2.GetTaskRequest(id="t"), metadata=v1(REQUIRED), timeout=10)
            with pytest.raises(grpc.aio.AioRpcError):
                await call
            assert await call.code() == grpc.StatusCode.NOT_FOUND
            assert tuple(await call.trailing_metadata() or ()) == (("a2a-extensions", REQUIRED), ("x-mine", "kept"))
    finally:
        await server.stop(0)
