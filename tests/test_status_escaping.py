"""Issue 29, finding 17: what a caller sent is escaped wherever the server writes it back to it (status messages,
ErrorInfo metadata, BadRequest violations), as the access log escapes it: a tab, a NUL or a U+202E
(right-to-left override) comes back as `\\t`, `\\u0000`, `\\u202e`, never as the character itself."""

from __future__ import annotations

import grpc
from conftest import V1, StartServer, error_info
from rpc_helpers import Clients, rpc_error

from a2a_grpc.errors import InvalidRequestError, error_from_status, status_message, status_trailers
from a2a_grpc.escaping import escaped
from a2a_grpc.generated import a2a_pb2

HOSTILE = "a\tb\u202ec\x00d\ne\\u0041"
SHOWN = "a\\tb\\u202ec\\u0000d\\ne\\\\u0041"
UNPRINTABLE = [chr(n) for n in range(0x20)] + ["\x7f", "\x85", "\u200b", "\u2028", "\u2029", "\u2066", "\ufeff"]


def test_finding_17_escaped_writes_unprintable_characters_and_the_backslash_as_json_escapes() -> None:
    assert escaped(HOSTILE) == SHOWN
    assert escaped("plain text, naïve café: ✓") == "plain text, naïve café: ✓"
    for char in UNPRINTABLE:
        assert escaped(char).startswith("\\"), repr(char)


async def test_finding_17_a_task_id_with_nul_and_bidi_is_escaped_in_the_status_and_its_error_info(
    start_server: StartServer, clients: Clients
) -> None:
    stub = clients.stub(await start_server())
    error = await rpc_error(stub.GetTask(a2a_pb2.GetTaskRequest(id=HOSTILE), metadata=V1))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert SHOWN in error.details(), error.details()
    assert error.details().isprintable()
    assert all(value.isprintable() for value in error_info(error).metadata.values())
    assert SHOWN in error_info(error).metadata.values()


async def test_finding_17_a_method_path_with_a_tab_and_bidi_is_escaped_in_the_refusal(
    start_server: StartServer,
) -> None:
    server = await start_server()
    async with grpc.aio.insecure_channel(server.grpc_target) as channel:
        error = await rpc_error(channel.unary_unary("/evil.Svc/X\t\u202eexe.txt")(b"", metadata=V1))
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "/evil.Svc/X\\t\\u202eexe.txt" in error.details(), error.details()
    assert all(value.isprintable() for value in error_info(error).metadata.values())


def test_finding_17_bad_request_violations_are_escaped() -> None:
    refusal = InvalidRequestError(f"bad {HOSTILE}", violations=[(f"field{HOSTILE}", f"is {HOSTILE}")])
    assert status_message(refusal) == f"bad {SHOWN}"
    received = error_from_status(refusal.code, "", status_trailers(refusal))
    assert received.violations == [(f"field{SHOWN}", f"is {SHOWN}")]
