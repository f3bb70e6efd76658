"""The A2A error table, shared by the server and the client.

Server side: an `A2AError` becomes a gRPC status with a `google.rpc.ErrorInfo` detail (and a
`google.rpc.BadRequest` for validation errors), packed into `grpc-status-details-bin`.
Client side: a status with those details becomes the same typed exception again. Clients decide on
`ErrorInfo.reason`, since several errors share FAILED_PRECONDITION and older peers still send
UNIMPLEMENTED for some of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

ERROR_DOMAIN = "a2a-protocol.org"
STATUS_DETAILS_KEY = "grpc-status-details-bin"

Metadata = Sequence[tuple[str, str | bytes]]


class A2AError(Exception):
    """Base of every error that travels as a gRPC status."""

    code: ClassVar[grpc.StatusCode] = grpc.StatusCode.INTERNAL
    reason: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        *,
        metadata: Mapping[str, str] | None = None,
        violations: Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})
        self.violations: list[tuple[str, str]] = list(violations)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class TaskNotFoundError(A2AError):
    code = grpc.StatusCode.NOT_FOUND
    reason = "TASK_NOT_FOUND"


class TaskNotCancelableError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "TASK_NOT_CANCELABLE"


class PushNotificationNotSupportedError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"


class UnsupportedOperationError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "UNSUPPORTED_OPERATION"


class ContentTypeNotSupportedError(A2AError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = "CONTENT_TYPE_NOT_SUPPORTED"


class InvalidAgentResponseError(A2AError):
    code = grpc.StatusCode.INTERNAL
    reason = "INVALID_AGENT_RESPONSE"


class ExtendedAgentCardNotConfiguredError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


class ExtensionSupportRequiredError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "EXTENSION_SUPPORT_REQUIRED"


class VersionNotSupportedError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "VERSION_NOT_SUPPORTED"


class PushNotificationConfigNotFoundError(A2AError):
    """Not an A2A error: the task exists but has no push config with that id."""

    code = grpc.StatusCode.NOT_FOUND
    reason = "PUSH_NOTIFICATION_CONFIG_NOT_FOUND"


class SubscriberTooSlowError(A2AError):
    """Not an A2A error: a stream fell too far behind its task's events and was closed."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    reason = "SUBSCRIBER_TOO_SLOW"


class InvalidRequestError(A2AError):
    """A request that fails validation; carries BadRequest field violations."""

    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = "INVALID_REQUEST"


class AuthenticationError(A2AError):
    code = grpc.StatusCode.UNAUTHENTICATED
    reason = "UNAUTHENTICATED"


class PermissionDeniedError(A2AError):
    code = grpc.StatusCode.PERMISSION_DENIED
    reason = "PERMISSION_DENIED"


class InternalError(A2AError):
    """An unexpected failure; its message is always generic."""

    code = grpc.StatusCode.INTERNAL
    reason = "INTERNAL"


class RemoteError(A2AError):
    """A status from a peer that matches no row of the table; `code` is the one received."""

    def __init__(self, code: grpc.StatusCode, message: str, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.received_code = code


ERROR_TABLE: tuple[type[A2AError], ...] = (
    TaskNotFoundError,
    TaskNotCancelableError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    VersionNotSupportedError,
    PushNotificationConfigNotFoundError,
    SubscriberTooSlowError,
    InvalidRequestError,
    AuthenticationError,
    PermissionDeniedError,
    InternalError,
)
ERROR_BY_REASON: dict[str, type[A2AError]] = {cls.reason: cls for cls in ERROR_TABLE}

# Without an ErrorInfo, a status code alone still names some errors (older peers, plain gRPC errors).
_ERROR_BY_CODE: dict[grpc.StatusCode, type[A2AError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.NOT_FOUND: TaskNotFoundError,
    grpc.StatusCode.UNIMPLEMENTED: UnsupportedOperationError,
}


def status_trailers(error: A2AError, extra: Metadata = ()) -> tuple[tuple[str, str | bytes], ...]:
    """The trailing metadata that carries `error` as a rich status, plus `extra` entries."""
    status = status_pb2.Status(code=error.code.value[0], message=error.message)
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata)
    status.details.append(_pack(info))
    if error.violations:
        bad_request = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=field, description=description)
                for field, description in error.violations
            ]
        )
        status.details.append(_pack(bad_request))
    return ((STATUS_DETAILS_KEY, status.SerializeToString()), *extra)


def _pack(message: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def error_from_status(code: grpc.StatusCode, message: str, trailing_metadata: Metadata | None) -> A2AError:
    """Turn a received status (code, message, trailers) into the typed error of the table."""
    info: error_details_pb2.ErrorInfo | None = None
    violations: list[tuple[str, str]] = []
    status = _status_from_trailers(trailing_metadata)
    if status is not None:
        message = status.message or message
        for detail in status.details:
            if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                detail.Unpack(info)
            elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad_request = error_details_pb2.BadRequest()
                detail.Unpack(bad_request)
                violations.extend((v.field, v.description) for v in bad_request.field_violations)
    metadata = dict(info.metadata) if info is not None else {}
    cls = ERROR_BY_REASON.get(info.reason) if info is not None else None
    if cls is None and (info is None or not info.reason):
        cls = _ERROR_BY_CODE.get(code)
    if cls is None:
        return RemoteError(code, message, metadata=metadata, violations=violations)
    return cls(message, metadata=metadata, violations=violations)


def error_from_rpc_error(error: grpc.RpcError) -> A2AError:
    """The typed error for an `grpc.RpcError` / `grpc.aio.AioRpcError` raised by a call."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else "") or ""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    return error_from_status(code, details, trailers)


def _status_from_trailers(trailing_metadata: Metadata | None) -> status_pb2.Status | None:
    for key, value in trailing_metadata or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except Exception:
                return None
            return status
    return None
