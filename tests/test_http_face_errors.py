"""The one error table (a2a_grpc.errors) as the HTTP bindings carry it: every A2A error of the spec gets the JSON-RPC
code and the HTTP status of the spec's table (§5.4), with its ErrorInfo in the details; the other rows keep the
gRPC code's HTTP status and JSON-RPC's server-error code, and a client tells them apart by their reason."""

from __future__ import annotations

import grpc
import pytest

from a2a_grpc import errors
from a2a_grpc.faces.errors import Refusal

# spec §5.4: the A2A error -> (JSON-RPC code, HTTP status)
SPEC_TABLE = {
    errors.TaskNotFoundError: (-32001, 404),
    errors.TaskNotCancelableError: (-32002, 400),
    errors.PushNotificationNotSupportedError: (-32003, 400),
    errors.UnsupportedOperationError: (-32004, 400),
    errors.ContentTypeNotSupportedError: (-32005, 400),
    errors.InvalidAgentResponseError: (-32006, 500),
    errors.ExtendedAgentCardNotConfiguredError: (-32007, 400),
    errors.ExtensionSupportRequiredError: (-32008, 400),
    errors.VersionNotSupportedError: (-32009, 400),
}


@pytest.mark.parametrize("error", list(SPEC_TABLE), ids=lambda error: error.__name__)
def test_each_spec_error_has_the_spec_tables_jsonrpc_code_and_http_status(error: type[errors.A2AError]) -> None:
    refusal = Refusal.of_error(error("what happened", metadata={"taskId": "t-1"}))
    assert (refusal.jsonrpc_code, refusal.http_status) == SPEC_TABLE[error]
    body = refusal.rest_body()["error"]
    assert (body["code"], body["status"], body["message"]) == (SPEC_TABLE[error][1], error.code.name, "what happened")
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": error.reason, "domain": "a2a-protocol.org"}
    assert body["details"] == [{**info, "metadata": {"taskId": "t-1"}}]
    assert refusal.jsonrpc_error() == {
        "code": SPEC_TABLE[error][0],
        "message": "what happened",
        "data": body["details"],
    }


@pytest.mark.parametrize(
    ("error", "jsonrpc_code", "http_status"),
    [
        (errors.InvalidRequestError("bad", violations=[("message.parts", "is required")]), -32602, 400),
        (errors.InternalError("internal error"), -32603, 500),
        (errors.AuthenticationError("who are you"), -32000, 401),
        (errors.PermissionDeniedError("not you"), -32000, 403),
        (errors.RateLimitedError("slow down", retry_delay=1.5), -32000, 429),
        (errors.TaskChangedError("again"), -32000, 409),
        (errors.StorageUnavailableError("later"), -32000, 503),
        (errors.MethodNotFoundError("no such method"), -32601, 501),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, errors.A2AError) else str(value),
)
def test_the_other_rows_keep_their_codes_meaning(error: errors.A2AError, jsonrpc_code: int, http_status: int) -> None:
    refusal = Refusal.of_error(error)
    assert (refusal.jsonrpc_code, refusal.http_status, refusal.reason) == (jsonrpc_code, http_status, error.reason)
    if error.violations:
        assert {"field": "message.parts", "description": "is required"} in refusal.details[1]["fieldViolations"]
    if error.retry_delay is not None:
        assert refusal.headers == {"Retry-After": "2"}, "whole seconds, rounded up"


def test_every_row_of_the_table_maps_to_an_http_status() -> None:
    for row in errors.ERROR_TABLE:
        refusal = Refusal.of_error(row("x"))
        assert 400 <= refusal.http_status < 600 and refusal.code is row.code is not grpc.StatusCode.OK, row
