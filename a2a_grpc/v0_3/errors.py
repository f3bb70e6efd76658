"""Errors as A2A 0.3 clients read them: 0.3's codes and `<ErrorName>: <message>` messages, with the same
ErrorInfo (and BadRequest, RetryInfo) details as on the 1.0 face.

0.3 clients decode the code and the message, not the details: the JS SDK's 0.3 client types a NOT_FOUND as
TaskNotFoundError, a FAILED_PRECONDITION on CancelTask as TaskNotCancelableError and an UNIMPLEMENTED on a
push config method as PushNotificationNotSupportedError; the Python one raises the grpc error as it comes.
The codes are the ones 0.3 servers send (where the SDKs disagree, the one a 0.3 client types); errors 0.3
does not know keep their 1.0 code. State names and field paths are 0.3's: TASK_STATE_CANCELLED, not
TASK_STATE_CANCELED; `request.content[0]`, not `message.parts[0]`.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable

import grpc

from a2a_grpc.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    InternalError,
    InvalidAgentResponseError,
    InvalidRequestError,
    PushNotificationConfigNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)

Code = grpc.StatusCode
# class -> (code on the 0.3 face, the name its message starts with)
V03_ERRORS: dict[type[A2AError], tuple[grpc.StatusCode, str]] = {
    TaskNotFoundError: (Code.NOT_FOUND, "TaskNotFoundError"),
    TaskNotCancelableError: (Code.FAILED_PRECONDITION, "TaskNotCancelableError"),
    PushNotificationNotSupportedError: (Code.UNIMPLEMENTED, "PushNotificationNotSupportedError"),
    UnsupportedOperationError: (Code.UNIMPLEMENTED, "UnsupportedOperationError"),
    ContentTypeNotSupportedError: (Code.INVALID_ARGUMENT, "ContentTypeNotSupportedError"),
    InvalidAgentResponseError: (Code.INTERNAL, "InvalidAgentResponseError"),
    ExtendedAgentCardNotConfiguredError: (Code.FAILED_PRECONDITION, "AuthenticatedExtendedCardNotConfiguredError"),
    InvalidRequestError: (Code.INVALID_ARGUMENT, "InvalidParamsError"),
    InternalError: (Code.INTERNAL, "InternalError"),
    PushNotificationConfigNotFoundError: (Code.NOT_FOUND, "PushNotificationConfigNotFoundError"),
    ExtensionSupportRequiredError: (Code.FAILED_PRECONDITION, "ExtensionSupportRequiredError"),
    VersionNotSupportedError: (Code.FAILED_PRECONDITION, "VersionNotSupportedError"),
}
STATE_NAMES = {"TASK_STATE_CANCELED": "TASK_STATE_CANCELLED"}  # the one state 0.3 spells otherwise

# 1.0 field paths -> 0.3's, per method: (pattern, replacement), every one applied in turn
_PART = r"message\.parts(\[\d+\])"
_SEND_PATHS = (
    (rf"^{_PART}\.raw\b", r"request.content\1.file.file_with_bytes"),
    (rf"^{_PART}\.url\b", r"request.content\1.file.file_with_uri"),
    (rf"^{_PART}\.media_type\b", r"request.content\1.file.mime_type"),
    (rf"^{_PART}\.filename\b", r"request.content\1.file.name"),
    (r"^message\.parts\b", "request.content"),
    (r"^message\.", "request."),
    (r"^configuration\.task_push_notification_config\.", "configuration.push_notification."),
    (
        r"^configuration\.push_notification\.authentication\.scheme$",
        "configuration.push_notification.authentication.schemes",
    ),
)
_TASK_PATHS = ((r"^id$", "name"),)
_CONFIG_PATHS = ((r"^(task_id|id)$", "name"),)
_IN_CONFIG = "config.push_notification_config."
FIELD_PATHS: dict[str, tuple[tuple[str, str], ...]] = {
    "SendMessage": _SEND_PATHS,
    "SendStreamingMessage": _SEND_PATHS,
    "GetTask": _TASK_PATHS,
    "CancelTask": _TASK_PATHS,
    "TaskSubscription": _TASK_PATHS,
    "CreateTaskPushNotificationConfig": (
        (r"^task_id$", "parent"),
        (r"^id$", "config_id"),
        (r"^authentication\.scheme$", _IN_CONFIG + "authentication.schemes"),
        (r"^(url|token|authentication\.credentials)$", _IN_CONFIG + r"\1"),
    ),
    "GetTaskPushNotificationConfig": _CONFIG_PATHS,
    "DeleteTaskPushNotificationConfig": _CONFIG_PATHS,
    "ListTaskPushNotificationConfig": ((r"^task_id$", "parent"),),
}

Translate = Callable[[A2AError], A2AError]


class InvalidV03RequestError(InvalidRequestError):
    """An invalid request, named in 0.3's field names already."""


def translator(method: str) -> Translate:
    """How the errors of `method` of the 0.3 service read to a 0.3 caller."""
    paths = FIELD_PATHS.get(method, ())

    def translate(error: A2AError) -> A2AError:
        code, name = _row(error)
        translated = copy.copy(error)
        translated.code = code
        if not isinstance(error, InvalidV03RequestError):
            translated.violations = [(_path(field, paths), description) for field, description in error.violations]
        translated.metadata = {key: STATE_NAMES.get(value, value) for key, value in error.metadata.items()}
        message = _message(error, translated.violations)
        translated.message = f"{name}: {message}" if name else message
        return translated

    return translate


def _row(error: A2AError) -> tuple[grpc.StatusCode, str]:
    for cls in type(error).__mro__:
        row = V03_ERRORS.get(cls)
        if row is not None:
            return row
    return error.code, ""


def _message(error: A2AError, violations: list[tuple[str, str]]) -> str:
    if isinstance(error, InvalidRequestError) and violations and error.violations != violations:
        field, description = violations[0]
        more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
        return f"invalid request: {field} {description}{more}"
    message = error.message
    for old, new in STATE_NAMES.items():
        message = message.replace(old, new)
    return message


def _path(field: str, paths: tuple[tuple[str, str], ...]) -> str:
    for pattern, replacement in paths:
        field = re.sub(pattern, replacement, field)
    return field
