"""Request validation: every field the proto marks REQUIRED, plus the rules the spec states in prose.

The REQUIRED checks are compiled once per message type from the `google.api.field_behavior`
annotations, so a request costs a few attribute reads, never a reflective walk.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from google.api import field_behavior_pb2
from google.protobuf import timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message as ProtoMessage

from a2a_grpc.errors import InvalidRequestError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.input_modes import AcceptedInputModes
from a2a_grpc.nesting import MAX_JSON_NESTING, JsonValue, nests_deeper_than
from a2a_grpc.settings.defaults import MAX_PARTS as MAX_PARTS

Violations = list[tuple[str, str]]
Check = Callable[[ProtoMessage, str, Violations], None]

MAX_PAGE_SIZE = 100
# A push notification config's fields: bounded, so a page of configs stays small, and a notification's
# headers stay within what any HTTP server reads.
MAX_PUSH_ID_CHARS = 256
MAX_PUSH_URL_CHARS = 2048
MAX_PUSH_TOKEN_CHARS = 1024
MAX_PUSH_CREDENTIALS_CHARS = 4096
MAX_SCHEME_CHARS = 64
_HEADER_VALUE = re.compile(r"[\x20-\x7e]*")
# What a URL holds as sent: visible ASCII. A space, a control character (CR, LF, NUL, DEL, C1) or any other
# character beyond ASCII must be percent-encoded, and a host name beyond ASCII given in its IDNA (xn--) form.
URL_TEXT = re.compile(r"[\x21-\x7e]*")
URL_TEXT_RULE = "must be visible ASCII: percent-encode spaces, control and non-ASCII characters"
_HTTP_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token: an authentication scheme's name
DEFAULT_PAGE_SIZE = 50
# google.protobuf.Timestamp's valid range: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z
MIN_TIMESTAMP_SECONDS = -62_135_596_800
MAX_TIMESTAMP_SECONDS = 253_402_300_799
_PACKAGE = "lf.a2a.v1."
_REQUIRED = field_behavior_pb2.REQUIRED


def _is_required(field: FieldDescriptor) -> bool:
    return _REQUIRED in field.GetOptions().Extensions[field_behavior_pb2.field_behavior]


def _is_repeated(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)


@cache
def compile_checks(descriptor: Descriptor) -> tuple[Check, ...]:
    """The checks of one message type: its REQUIRED fields, then those of the messages it holds."""
    checks: list[Check] = []
    for field in descriptor.fields:
        if _is_required(field):
            checks.append(_required_check(field))
        sub = field.message_type
        if sub is not None and sub.full_name.startswith(_PACKAGE) and not sub.GetOptions().map_entry:
            sub_checks = compile_checks(sub)
            if sub_checks:
                checks.append(_nested_check(field, sub_checks))
    return tuple(checks)


def _required_check(field: FieldDescriptor) -> Check:
    name = field.name
    if _is_repeated(field):

        def check_repeated(message: ProtoMessage, path: str, out: Violations) -> None:
            if not len(getattr(message, name)):
                out.append((path + name, "is required and must not be empty"))

        return check_repeated
    if field.type == FieldDescriptor.TYPE_MESSAGE:

        def check_message(message: ProtoMessage, path: str, out: Violations) -> None:
            if not message.HasField(name):
                out.append((path + name, "is required"))

        return check_message
    if field.type == FieldDescriptor.TYPE_ENUM:
        enum = field.enum_type
        assert enum is not None

        def check_enum(message: ProtoMessage, path: str, out: Violations) -> None:
            value = getattr(message, name)
            if value == 0:
                out.append((path + name, f"is required: {enum.values[0].name} is not allowed"))
            elif value not in enum.values_by_number:
                out.append((path + name, f"{value} is not a value of {enum.name}"))

        return check_enum

    def check_scalar(message: ProtoMessage, path: str, out: Violations) -> None:
        if not getattr(message, name):
            out.append((path + name, "is required and must not be empty"))

    return check_scalar


def _nested_check(field: FieldDescriptor, sub_checks: tuple[Check, ...]) -> Check:
    name = field.name
    if _is_repeated(field):

        def check_each(message: ProtoMessage, path: str, out: Violations) -> None:
            for index, item in enumerate(getattr(message, name)):
                item_path = f"{path}{name}[{index}]."
                for check in sub_checks:
                    check(item, item_path, out)

        return check_each

    def check_present(message: ProtoMessage, path: str, out: Violations) -> None:
        if message.HasField(name):
            item = getattr(message, name)
            for check in sub_checks:
                check(item, path + name + ".", out)

    return check_present


def required_violations(message: ProtoMessage) -> Violations:
    out: Violations = []
    for check in compile_checks(message.DESCRIPTOR):
        check(message, "", out)
    return out


def _raise_if(violations: Violations) -> None:
    if violations:
        field, description = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        raise InvalidRequestError(f"invalid request: {field} {description}{more}", violations=violations)


def _check_history_length(request: ProtoMessage, path: str, out: Violations) -> None:
    if request.HasField("history_length") and request.history_length < 0:  # type: ignore[attr-defined]
        out.append((path + "history_length", "must not be negative"))


def validate_send(
    request: a2a_pb2.SendMessageRequest, max_parts: int = MAX_PARTS, input_modes: AcceptedInputModes | None = None
) -> None:
    """Besides the fields: with `input_modes`, a part of a media type the card does not accept is
    ContentTypeNotSupportedError, once the request is otherwise valid."""
    message = request.message
    count = len(message.parts)
    if count > max_parts:  # refused before any part is looked at
        _raise_if([("message.parts", f"has {count} parts; at most {max_parts} are allowed")])
    out = required_violations(request)
    refused = None
    for index, part in enumerate(message.parts):
        if input_modes is not None and refused is None:
            refused = input_modes.refusal(part, index)
        content = part.WhichOneof("content")
        if content is None:
            out.append((f"message.parts[{index}]", "has no content: set one of text, raw, url or data"))
        elif content == "data" and part.data.WhichOneof("kind") is None:
            out.append((f"message.parts[{index}].data", "must hold a JSON value"))
        elif content != "data" and not getattr(part, content):
            out.append((f"message.parts[{index}].{content}", "must not be empty"))
        if content == "data":
            _check_nesting(part.data, f"message.parts[{index}].data", out)
        if part.HasField("metadata"):
            _check_nesting(part.metadata, f"message.parts[{index}].metadata", out)
    _check_no_nul(message.context_id, "message.context_id", out)
    _check_no_nul(message.task_id, "message.task_id", out)
    if message.HasField("metadata"):
        _check_nesting(message.metadata, "message.metadata", out)
    if request.HasField("metadata"):
        _check_nesting(request.metadata, "metadata", out)
    if request.HasField("configuration"):
        _check_history_length(request.configuration, "configuration.", out)
    _raise_if(out)
    if refused is not None:
        raise refused


def _check_no_nul(identifier: str, path: str, out: Violations) -> None:
    """Ids are kept as text, and text in PostgreSQL cannot hold a NUL character."""
    if "\x00" in identifier:
        out.append((path, "must not contain a NUL character"))


def _check_nesting(value: JsonValue, path: str, out: Violations) -> None:
    if nests_deeper_than(value):
        out.append((path, f"nests objects or arrays deeper than {MAX_JSON_NESTING} levels"))


def validate_get(request: a2a_pb2.GetTaskRequest) -> None:
    out = required_violations(request)
    _check_history_length(request, "", out)
    _raise_if(out)


def validate_list(request: a2a_pb2.ListTasksRequest) -> int:
    """Validate a ListTasks request and return its page size."""
    out = required_violations(request)
    _check_history_length(request, "", out)
    page_size = DEFAULT_PAGE_SIZE
    if request.HasField("page_size"):
        page_size = request.page_size
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            out.append(("page_size", f"must be between 1 and {MAX_PAGE_SIZE}"))
    if request.status and request.status not in a2a_pb2.TaskState.values():
        out.append(("status", f"{request.status} is not a TaskState"))
    if request.HasField("status_timestamp_after") and not _valid_timestamp(request.status_timestamp_after):
        out.append(("status_timestamp_after", "must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"))
    _raise_if(out)
    return page_size


def _valid_timestamp(stamp: timestamp_pb2.Timestamp) -> bool:
    return MIN_TIMESTAMP_SECONDS <= stamp.seconds <= MAX_TIMESTAMP_SECONDS and 0 <= stamp.nanos <= 999_999_999


def validate_push_config_page_size(request: a2a_pb2.ListTaskPushNotificationConfigsRequest) -> int:
    out = required_violations(request)
    if not 0 <= request.page_size <= MAX_PAGE_SIZE:
        out.append(("page_size", f"must be between 0 (the default, {DEFAULT_PAGE_SIZE}) and {MAX_PAGE_SIZE}"))
    _raise_if(out)
    return request.page_size or DEFAULT_PAGE_SIZE


def validate_push_config(
    config: a2a_pb2.TaskPushNotificationConfig, path: str = "", *, needs_task_id: bool = True
) -> None:
    """Besides the REQUIRED fields: every field bounded in size, and what travels in a notification's HTTP
    headers (the token, the authentication scheme and credentials) fit to be sent there as it is."""
    out = required_violations(config) if not path else []
    if needs_task_id and not config.task_id:
        out.append((path + "task_id", "is required"))
    if config.url and not config.url.startswith(("https://", "http://")):
        out.append((path + "url", "must be an absolute http(s) URL"))
    _check_no_nul(config.id, path + "id", out)
    _check_length(config.id, MAX_PUSH_ID_CHARS, path + "id", out)
    _check_length(config.url, MAX_PUSH_URL_CHARS, path + "url", out)
    if not URL_TEXT.fullmatch(config.url):
        out.append((path + "url", URL_TEXT_RULE))
    _check_header_value(config.token, MAX_PUSH_TOKEN_CHARS, path + "token", out)
    if config.HasField("authentication"):
        authentication, where = config.authentication, path + "authentication."
        scheme = authentication.scheme  # REQUIRED: its absence is reported with the other required fields
        if scheme and (not _HTTP_TOKEN.fullmatch(scheme) or len(scheme) > MAX_SCHEME_CHARS):
            out.append((where + "scheme", f"must be an HTTP authentication scheme name (at most {MAX_SCHEME_CHARS})"))
        _check_header_value(authentication.credentials, MAX_PUSH_CREDENTIALS_CHARS, where + "credentials", out)
    _raise_if(out)


def _check_length(text: str, limit: int, path: str, out: Violations) -> None:
    if len(text) > limit:
        out.append((path, f"is {len(text)} characters; at most {limit} are allowed"))


def _check_header_value(text: str, limit: int, path: str, out: Violations) -> None:
    """A value sent as an HTTP header: visible ASCII and spaces only (no CR, LF, NUL or other controls)."""
    _check_length(text, limit, path, out)
    if not _HEADER_VALUE.fullmatch(text):
        out.append((path, "must be printable ASCII: it is sent as an HTTP header"))


def validate(request: ProtoMessage) -> None:
    """The REQUIRED checks alone, for requests with no further rules."""
    _raise_if(required_violations(request))
