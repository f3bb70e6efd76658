"""The statuses the chain ends a request with, as the HTTP bindings carry them (spec §5.4, §9.5, §11.6).

Both bindings read the one status the chain built from the error table (a2a_grpc.errors): its code, its
message and its details (ErrorInfo, BadRequest, RetryInfo) from `grpc-status-details-bin`. HTTP+JSON answers
the HTTP status of the gRPC code with a `google.rpc.Status`-shaped body, `{"error": {"code", "status",
"message", "details"}}`; JSON-RPC an error object whose code the ErrorInfo reason names (-32001 ... -32009 for
the spec's errors, -32602 for invalid parameters), its details in `data`. An error that is neither the spec's
nor JSON-RPC's (authentication, the limits) is -32000, the first of JSON-RPC's server errors, and the
client decides by its ErrorInfo reason as it does on gRPC.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.errors import STATUS_DETAILS_KEY, A2AError, status_message, status_trailers
from a2a_grpc.faces.call import HttpAbort

# gRPC code -> HTTP status (google.rpc.Code's documented mapping; the spec's table agrees on its rows)
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNAUTHENTICATED: 401,
}

# ErrorInfo reason -> JSON-RPC error code (spec §5.4, §9.5)
JSONRPC_CODE: dict[str, int] = {
    "TASK_NOT_FOUND": -32001,
    "TASK_NOT_CANCELABLE": -32002,
    "PUSH_NOTIFICATION_NOT_SUPPORTED": -32003,
    "UNSUPPORTED_OPERATION": -32004,
    "CONTENT_TYPE_NOT_SUPPORTED": -32005,
    "INVALID_AGENT_RESPONSE": -32006,
    "EXTENDED_AGENT_CARD_NOT_CONFIGURED": -32007,
    "EXTENSION_SUPPORT_REQUIRED": -32008,
    "VERSION_NOT_SUPPORTED": -32009,
    "INVALID_PARAMS": -32602,
    "METHOD_NOT_FOUND": -32601,
    "INTERNAL": -32603,
}
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
SERVER_ERROR = -32000  # JSON-RPC's implementation-defined server errors: the ones no A2A code names
# HTTP statuses a JSON-RPC error answers with (every other one is 200): what HTTP tooling reads as such
JSONRPC_HTTP_STATUS = {grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.PERMISSION_DENIED: 403}


class Refusal:
    """One status the chain (or a face, for input it cannot hand on) ended a request with."""

    __slots__ = ("_http_status", "code", "details", "headers", "message")

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        details: list[dict[str, Any]],
        headers: dict[str, str],
        http_status: int | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers  # what the response carries besides the body (Retry-After)
        self._http_status = http_status  # one the transport decided (413, 415), not the code's

    @classmethod
    def of_abort(cls, abort: HttpAbort) -> Refusal:
        status = _status_of(abort.trailers)
        details = [json_format.MessageToDict(detail) for detail in status.details]
        headers: dict[str, str] = {}
        for detail in status.details:
            if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                info = error_details_pb2.RetryInfo()
                detail.Unpack(info)
                headers["Retry-After"] = str(max(1, -(-info.retry_delay.ToNanoseconds() // 1_000_000_000)))
        return cls(abort.code, status.message or abort.details, details, headers)

    @classmethod
    def of_error(cls, error: A2AError, http_status: int | None = None) -> Refusal:
        """A refusal the face makes itself, from the error table, as the chain would."""
        refusal = cls.of_abort(HttpAbort(error.code, status_message(error), status_trailers(error)))
        refusal._http_status = http_status
        return refusal

    @property
    def reason(self) -> str:
        return next((str(d.get("reason", "")) for d in self.details if d.get("@type", "").endswith("ErrorInfo")), "")

    @property
    def http_status(self) -> int:
        return self._http_status or HTTP_STATUS.get(self.code, 500)

    def rest_body(self) -> dict[str, Any]:
        """The HTTP+JSON error body (§11.6): google.rpc.Status in JSON, under `error`."""
        return {
            "error": {
                "code": self.http_status,
                "status": self.code.name,
                "message": self.message,
                "details": self.details,
            }
        }

    @property
    def jsonrpc_code(self) -> int:
        return JSONRPC_CODE.get(self.reason, SERVER_ERROR if self.code is not grpc.StatusCode.INTERNAL else -32603)

    def jsonrpc_error(self) -> dict[str, Any]:
        """The JSON-RPC error object (§9.5)."""
        error: dict[str, Any] = {"code": self.jsonrpc_code, "message": self.message}
        if self.details:
            error["data"] = self.details
        return error


def _status_of(trailers: Any) -> status_pb2.Status:
    for key, value in trailers or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            try:
                return status_pb2.Status.FromString(value)
            except Exception:
                break
    return status_pb2.Status()
