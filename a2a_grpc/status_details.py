"""An error as a rich gRPC status, both ways: the trailers that carry it (`grpc-status-details-bin` holding a
`google.rpc.Status` with its ErrorInfo, BadRequest and RetryInfo details, every part bounded), and the parts read
back from a received status. Which error class a status stands for is the error table's to say (a2a_grpc.errors).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2

from a2a_grpc.escaping import escaped

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


class StatusError(Protocol):
    """What a status is made of: an `A2AError` (a2a_grpc.errors) as the wire carries it."""

    @property
    def code(self) -> grpc.StatusCode: ...
    @property
    def message(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def domain(self) -> str: ...
    @property
    def metadata(self) -> Mapping[str, str]: ...
    @property
    def violations(self) -> Sequence[tuple[str, str]]: ...
    @property
    def retry_delay(self) -> float | None: ...


def status_trailers(error: StatusError, extra: Metadata = ()) -> tuple[tuple[str, str | bytes], ...]:
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


def status_message(error: StatusError) -> str:
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


def status_details(
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


def status_from_trailers(trailing_metadata: Metadata | None) -> status_pb2.Status:
    """The rich status in the trailers; an empty one when they carry none, or one that does not parse."""
    for key, value in trailing_metadata or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            try:
                return status_pb2.Status.FromString(value)
            except Exception:
                return status_pb2.Status()
    return status_pb2.Status()
