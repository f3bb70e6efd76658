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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.escaping import escaped

# ErrorInfo domains: the spec's for the A2A-specific errors it defines (§3.3.2, §5.4, §10.6), ours for every
# other reason. The client decides by reason whatever the domain: earlier versions sent ours in the spec's.
ERROR_DOMAIN = "a2a-protocol.org"
OWN_ERROR_DOMAIN = "a2a-grpc"
STATUS_DETAILS_KEY = "grpc-status-details-bin"
# Error trailers count against the client's header limit (8 KiB by default): these bounds keep a status
# with the longest message, metadata and violations under 7 KiB even when every character takes 4 bytes.
MAX_MESSAGE_BYTES = 512
MAX_TEXT_BYTES = 128  # an ErrorInfo metadata key or value, a violation's field or description
# The longest RetryInfo delay sent: what every client's duration type holds (Go's, 64-bit nanoseconds: ~292 years).
MAX_RETRY_NANOSECONDS = 2**63 - 1
MAX_VIOLATIONS = 20
MAX_VIOLATION_BYTES = 2048  # the fields and descriptions of the violations listed, together
_ELLIPSIS = "\u2026"

Metadata = Sequence[tuple[str, str | bytes]]


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


def status_trailers(error: A2AError, extra: Metadata = ()) -> tuple[tuple[str, str | bytes], ...]:
    """The trailing metadata that carries `error` as a rich status, plus `extra` entries.

    Every detail is bounded, so no input can push the trailers past a client's header limit.
    """
    status = status_pb2.Status(code=error.code.value[0], message=status_message(error))
    if error.reason or error.metadata:
        metadata = {_shown(key, MAX_TEXT_BYTES): _shown(value, MAX_TEXT_BYTES) for key, value in error.metadata.items()}
        info = error_details_pb2.ErrorInfo(reason=error.reason, domain=error.domain, metadata=metadata)
        status.details.append(_pack(info))
    if error.violations:
        status.details.append(_pack(_bad_request(error.violations)))
    if error.retry_delay is not None:
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(retry_nanoseconds(error.retry_delay))
        status.details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    return ((STATUS_DETAILS_KEY, status.SerializeToString()), *extra)


def retry_nanoseconds(seconds: float) -> int:
    """A retry delay as a RetryInfo's Duration holds it: from 0 up to MAX_RETRY_NANOSECONDS, whatever `seconds`
    is (NaN and infinities included)."""
    if not seconds > 0:
        return 0
    return MAX_RETRY_NANOSECONDS if seconds >= MAX_RETRY_NANOSECONDS / 1e9 else round(seconds * 1e9)


def status_message(error: A2AError) -> str:
    """The status message that carries `error`: its message, escaped (a2a_grpc.escaping) and cut to
    MAX_MESSAGE_BYTES."""
    return _shown(error.message, MAX_MESSAGE_BYTES)


def _bad_request(violations: Sequence[tuple[str, str]]) -> error_details_pb2.BadRequest:
    """The first violations, as many as the bounds allow, then one that counts the rest."""
    listed: list[error_details_pb2.BadRequest.FieldViolation] = []
    size = 0
    for field, description in violations[:MAX_VIOLATIONS]:
        field, description = _shown(field, MAX_TEXT_BYTES), _shown(description, MAX_TEXT_BYTES)
        size += len(field.encode()) + len(description.encode())
        if size > MAX_VIOLATION_BYTES:
            break
        listed.append(error_details_pb2.BadRequest.FieldViolation(field=field, description=description))
    if len(listed) < len(violations):
        more = f"and {len(violations) - len(listed):,} more violations"
        listed.append(error_details_pb2.BadRequest.FieldViolation(description=more))
    return error_details_pb2.BadRequest(field_violations=listed)


def _shown(text: str, limit: int) -> str:
    """`text` as a caller is shown it: escaped, since much of what an error says the caller chose (a method
    path, a task id, a header), and cut to `limit` bytes."""
    return _clip(escaped(text), limit)


def _clip(text: str, limit: int) -> str:
    """`text`, or when its UTF-8 form is longer than `limit` bytes, its head and tail around an ellipsis."""
    data = text.encode()
    if len(data) <= limit:
        return text
    keep = limit - len(_ELLIPSIS.encode())
    tail = keep // 3
    return data[: keep - tail].decode(errors="ignore") + _ELLIPSIS + data[len(data) - tail :].decode(errors="ignore")


def _pack(
    message: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest | error_details_pb2.RetryInfo,
) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def error_from_status(code: grpc.StatusCode, message: str, trailing_metadata: Metadata | None) -> A2AError:
    """Turn a received status (code, message, trailers) into the typed error of the table."""
    status = _status_from_trailers(trailing_metadata)
    info, violations, retry_delay = _details(status)
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


def _details(
    status: status_pb2.Status,
) -> tuple[error_details_pb2.ErrorInfo, list[tuple[str, str]], float | None]:
    """The status's ErrorInfo (empty when it has none), its BadRequest field violations, and its
    RetryInfo delay in seconds (None without one)."""
    info = error_details_pb2.ErrorInfo()
    violations: list[tuple[str, str]] = []
    retry_delay: float | None = None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            detail.Unpack(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations.extend((v.field, v.description) for v in bad_request.field_violations)
        elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry_info = error_details_pb2.RetryInfo()
            detail.Unpack(retry_info)
            retry_delay = retry_info.retry_delay.ToNanoseconds() / 1e9
    return info, violations, retry_delay


def _status_from_trailers(trailing_metadata: Metadata | None) -> status_pb2.Status:
    """The rich status in the trailers; an empty one when they carry none, or one that does not parse."""
    for key, value in trailing_metadata or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            try:
                return status_pb2.Status.FromString(value)
            except Exception:
                return status_pb2.Status()
    return status_pb2.Status()
