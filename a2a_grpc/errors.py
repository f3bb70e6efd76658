"""The A2A error table, shared by the server and the client.

Server side: an `A2AError` becomes a gRPC status with a `google.rpc.ErrorInfo` detail (and a
`google.rpc.BadRequest` for validation errors), packed into `grpc-status-details-bin`.
Client side: a status becomes a typed exception again, decided in this order:

- an `ErrorInfo.reason` wins over the code, since several errors share FAILED_PRECONDITION and older
  peers still send UNIMPLEMENTED for some of them; a reason no row knows gives a `RemoteError`;
- without a reason, the code alone names one class per gRPC code (`ERROR_BY_CODE`), so a plain
  NOT_FOUND is a `NotFoundError`, never a `TaskNotFoundError`.

Validation errors send the reason INVALID_PARAMS (JSON-RPC's name for invalid method parameters, §9.5,
not one of the spec's ErrorInfo reasons, so in our domain); INVALID_REQUEST, which this package sent
before, is still read as an `InvalidRequestError`.
An error's `retry_delay` (seconds) travels as a `google.rpc.RetryInfo` detail, both ways: the limits
(a2a_grpc.interceptors.server.limits) send one with RATE_LIMITED and TOO_MANY_STREAMS.
A plain UNIMPLEMENTED (an RPC the peer lacks, or a spec v1.0.0 peer) is an `UnimplementedError`, a
subclass of `UnsupportedOperationError` whose code stays UNIMPLEMENTED.
The status itself, its details and their bounds, is made and read in a2a_grpc.status_details (its names are
importable from here too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import grpc

from a2a_grpc.status_details import (
    MAX_MESSAGE_BYTES,
    MAX_RETRY_NANOSECONDS,
    MAX_TEXT_BYTES,
    MAX_VIOLATION_BYTES,
    MAX_VIOLATIONS,
    STATUS_DETAILS_KEY,
    Metadata,
    retry_nanoseconds,
    status_details,
    status_from_trailers,
    status_message,
    status_trailers,
)

__all__ = [
    "CODE_ERRORS",
    "ERROR_BY_CODE",
    "ERROR_BY_REASON",
    "ERROR_DOMAIN",
    "ERROR_TABLE",
    "MAX_MESSAGE_BYTES",
    "MAX_RETRY_NANOSECONDS",
    "MAX_TEXT_BYTES",
    "MAX_VIOLATIONS",
    "MAX_VIOLATION_BYTES",
    "OWN_ERROR_DOMAIN",
    "STATUS_DETAILS_KEY",
    "A2AError",
    "AbortedError",
    "AlreadyExistsError",
    "AnswerTooLargeError",
    "AuthenticationError",
    "CallCancelledError",
    "ContentTypeNotSupportedError",
    "DataLossError",
    "DeadlineExceededError",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidAgentResponseError",
    "InvalidRequestError",
    "Metadata",
    "MethodNotFoundError",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "PushNotificationConfigNotFoundError",
    "PushNotificationNotSupportedError",
    "RateLimitedError",
    "RemoteError",
    "ResourceExhaustedError",
    "StorageUnavailableError",
    "TaskChangedError",
    "TaskHistoryFullError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "TooManyPushConfigsError",
    "TooManyStreamsError",
    "TooManyTasksError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "UnsupportedOperationError",
    "VersionNotSupportedError",
    "error_from_rpc_error",
    "error_from_status",
    "retry_nanoseconds",
    "status_message",
    "status_trailers",
]

# ErrorInfo domains: the spec's for the A2A-specific errors it defines (§3.3.2, §5.4, §10.6), ours for every
# other reason. The client decides by reason whatever the domain: earlier versions sent ours in the spec's.
ERROR_DOMAIN = "a2a-protocol.org"
OWN_ERROR_DOMAIN = "a2a-grpc"


class A2AError(Exception):
    """Base of every error that travels as a gRPC status."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    reason: str = ""
    domain: str = OWN_ERROR_DOMAIN  # the ErrorInfo domain of `reason`: ERROR_DOMAIN for the spec's errors

    def __init__(
        self,
        message: str,
        *,
        metadata: Mapping[str, str] | None = None,
        violations: Iterable[tuple[str, str]] = (),
        retry_delay: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})
        self.violations: list[tuple[str, str]] = list(violations)
        self.retry_delay = retry_delay  # seconds to wait before retrying, sent as google.rpc.RetryInfo

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class TaskNotFoundError(A2AError):
    code = grpc.StatusCode.NOT_FOUND
    reason = "TASK_NOT_FOUND"
    domain = ERROR_DOMAIN


class TaskNotCancelableError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "TASK_NOT_CANCELABLE"
    domain = ERROR_DOMAIN


class PushNotificationNotSupportedError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    domain = ERROR_DOMAIN


class UnsupportedOperationError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "UNSUPPORTED_OPERATION"
    domain = ERROR_DOMAIN


class ContentTypeNotSupportedError(A2AError):
    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    domain = ERROR_DOMAIN


class InvalidAgentResponseError(A2AError):
    code = grpc.StatusCode.INTERNAL
    reason = "INVALID_AGENT_RESPONSE"
    domain = ERROR_DOMAIN


class ExtendedAgentCardNotConfiguredError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    domain = ERROR_DOMAIN


class ExtensionSupportRequiredError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "EXTENSION_SUPPORT_REQUIRED"
    domain = ERROR_DOMAIN


class VersionNotSupportedError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "VERSION_NOT_SUPPORTED"
    domain = ERROR_DOMAIN


class PushNotificationConfigNotFoundError(A2AError):
    """Not an A2A error: the task exists but has no push config with that id."""

    code = grpc.StatusCode.NOT_FOUND
    reason = "PUSH_NOTIFICATION_CONFIG_NOT_FOUND"


class InvalidRequestError(A2AError):
    """A request that fails validation; carries BadRequest field violations."""

    code = grpc.StatusCode.INVALID_ARGUMENT
    reason = "INVALID_PARAMS"


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


class CallCancelledError(A2AError):
    """The call was cancelled (named apart from `asyncio.CancelledError`)."""

    code = grpc.StatusCode.CANCELLED


class UnknownError(A2AError):
    code = grpc.StatusCode.UNKNOWN


class DeadlineExceededError(A2AError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFoundError(A2AError):
    """NOT_FOUND without a reason: something other than a task, such as a method the peer lacks."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(A2AError):
    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhaustedError(A2AError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class RateLimitedError(ResourceExhaustedError):
    """Not an A2A error: the caller sent more requests per second than the server allows; retry after
    `retry_delay` seconds."""

    reason = "RATE_LIMITED"


class TooManyStreamsError(ResourceExhaustedError):
    """Not an A2A error: the caller (or the server as a whole) has as many streams open as the server
    allows; retry after `retry_delay` seconds, or once a stream ends."""

    reason = "TOO_MANY_STREAMS"


class TooManyPushConfigsError(ResourceExhaustedError):
    """Not an A2A error: the task already has as many push notification configs as the server keeps for one
    task; delete one first."""

    reason = "TOO_MANY_PUSH_CONFIGS"


class TaskHistoryFullError(ResourceExhaustedError):
    """Not an A2A error: the message would take the task's history past the bytes it may hold; use a new task."""

    reason = "TASK_HISTORY_FULL"


class AnswerTooLargeError(ResourceExhaustedError):
    """Not an A2A error: the task the caller asked for would make an answer larger than the server sends;
    ask for less of its history (`history_length`)."""

    reason = "ANSWER_TOO_LARGE"


class TooManyTasksError(ResourceExhaustedError):
    """Not an A2A error: the server holds as many tasks as it may, none of them finished; retry later."""

    reason = "TOO_MANY_TASKS"


class FailedPreconditionError(A2AError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class AbortedError(A2AError):
    code = grpc.StatusCode.ABORTED


class TaskChangedError(AbortedError):
    """Not an A2A error: another request (on another replica) changed the task first; read it and retry."""

    reason = "TASK_CHANGED"


class OutOfRangeError(A2AError):
    code = grpc.StatusCode.OUT_OF_RANGE


class UnimplementedError(UnsupportedOperationError):
    """UNIMPLEMENTED without a reason: an RPC the peer lacks, still an unsupported operation to a caller."""

    code = grpc.StatusCode.UNIMPLEMENTED
    reason = ""
    domain = OWN_ERROR_DOMAIN


class MethodNotFoundError(UnimplementedError):
    """UNIMPLEMENTED from this server: a service or method it does not serve (the message names the ones it does)."""

    reason = "METHOD_NOT_FOUND"


class UnavailableError(A2AError):
    code = grpc.StatusCode.UNAVAILABLE


class StorageUnavailableError(UnavailableError):
    """Not an A2A error: the server cannot store or read tasks right now (its storage is full, or cannot be
    reached); retry later."""

    reason = "STORAGE_UNAVAILABLE"


class DataLossError(A2AError):
    code = grpc.StatusCode.DATA_LOSS


class RemoteError(A2AError):
    """A status whose ErrorInfo reason matches no row; `code`, `reason` and `domain` are the ones received."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: str = "",
        domain: str = "",
        metadata: Mapping[str, str] | None = None,
        violations: Iterable[tuple[str, str]] = (),
        retry_delay: float | None = None,
    ) -> None:
        super().__init__(message, metadata=metadata, violations=violations, retry_delay=retry_delay)
        self.code = code
        self.reason = reason
        self.domain = domain


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
    InvalidRequestError,
    AuthenticationError,
    PermissionDeniedError,
    InternalError,
    StorageUnavailableError,
    TaskChangedError,
    RateLimitedError,
    TooManyStreamsError,
    TooManyPushConfigsError,
    TaskHistoryFullError,
    AnswerTooLargeError,
    TooManyTasksError,
    MethodNotFoundError,
)
ERROR_BY_REASON: dict[str, type[A2AError]] = {
    **{cls.reason: cls for cls in ERROR_TABLE},
    "INVALID_REQUEST": InvalidRequestError,
}

CODE_ERRORS: tuple[type[A2AError], ...] = (
    CallCancelledError,
    UnknownError,
    InvalidRequestError,
    DeadlineExceededError,
    NotFoundError,
    AlreadyExistsError,
    PermissionDeniedError,
    ResourceExhaustedError,
    FailedPreconditionError,
    AbortedError,
    OutOfRangeError,
    UnimplementedError,
    InternalError,
    UnavailableError,
    DataLossError,
    AuthenticationError,
)
ERROR_BY_CODE: dict[grpc.StatusCode, type[A2AError]] = {cls.code: cls for cls in CODE_ERRORS}


def error_from_status(code: grpc.StatusCode, message: str, trailing_metadata: Metadata | None) -> A2AError:
    """Turn a received status (code, message, trailers) into the typed error of the table."""
    status = status_from_trailers(trailing_metadata)
    info, violations, retry_delay = status_details(status)
    message = status.message or message
    metadata = dict(info.metadata)
    cls = ERROR_BY_REASON.get(info.reason) if info.reason else ERROR_BY_CODE.get(code)
    if cls is None:
        return RemoteError(
            code,
            message,
            reason=info.reason,
            domain=info.domain,
            metadata=metadata,
            violations=violations,
            retry_delay=retry_delay,
        )
    return cls(message, metadata=metadata, violations=violations, retry_delay=retry_delay)


def error_from_rpc_error(error: grpc.RpcError) -> A2AError:
    """The typed error for an `grpc.RpcError` / `grpc.aio.AioRpcError` raised by a call."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else "") or ""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    return error_from_status(code, details, trailers)
