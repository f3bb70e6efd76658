"""A2A 0.3 requests (package a2a.v1) as the 1.0 requests (lf.a2a.v1) the 1.0 servicer takes.

Field by field; what 1.0 reads differently is decided here:
- `configuration.blocking`: proto3 cannot tell false from unset, so a request without a configuration
  waits for the task (0.3's default), and one with a configuration returns at once unless `blocking` is set,
  as the 0.3 SDK's own server reads it.
- `history_length` 0 is unset (0.3 has no presence for it): the whole history.
- resource names must be exactly `tasks/{id}` or `tasks/{id}/pushNotificationConfigs/{config_id}`.
- a push config's `authentication.schemes` may name one scheme: 1.0 carries one. Its `config.name` is not
  read (the 0.3 SDK sends `.../pushNotificationConfigs/None` for a config without an id): `parent` and
  `config_id` (or the config's own `id`) name it, as the 0.3 SDK's own server reads them.
- a message with more parts than the server takes is refused before any part is read.
Checks that only make sense in 0.3's terms (a part with nothing in it, a malformed name) are made here, so
the caller reads its own field names; the 1.0 servicer validates the rest.
"""

from __future__ import annotations

from a2a_grpc.generated import a2a_pb2 as v10
from a2a_grpc.generated.v0_3 import a2a_pb2 as v03
from a2a_grpc.v0_3.errors import InvalidV03RequestError

TASKS = "tasks"
CONFIGS = "pushNotificationConfigs"
MAX_NAME_SHOWN = 64


def send_request(request: v03.SendMessageRequest, max_parts: int) -> v10.SendMessageRequest:
    count = len(request.request.content)
    if count > max_parts:
        raise _invalid("request.content", f"has {count} parts; at most {max_parts} are allowed")
    converted = v10.SendMessageRequest(message=message(request.request, "request."))
    if request.HasField("metadata"):
        converted.metadata.CopyFrom(request.metadata)
    if request.HasField("configuration"):
        given, configuration = request.configuration, converted.configuration
        configuration.accepted_output_modes.extend(given.accepted_output_modes)
        if given.history_length:
            configuration.history_length = given.history_length
        configuration.return_immediately = not given.blocking
        if given.HasField("push_notification"):
            path = "configuration.push_notification."
            configuration.task_push_notification_config.CopyFrom(push_config(given.push_notification, "", "", path))
    return converted


def message(given: v03.Message, path: str) -> v10.Message:
    converted = v10.Message(
        message_id=given.message_id,
        context_id=given.context_id,
        task_id=given.task_id,
        role=given.role,  # type: ignore[arg-type]  # the same numbers in both versions
        extensions=given.extensions,
        parts=[_part(part, f"{path}content[{index}]") for index, part in enumerate(given.content)],
    )
    if given.HasField("metadata"):
        converted.metadata.CopyFrom(given.metadata)
    return converted


def _part(given: v03.Part, path: str) -> v10.Part:
    converted = _content(given, path)
    if given.HasField("metadata"):
        converted.metadata.CopyFrom(given.metadata)
    return converted


def _content(given: v03.Part, path: str) -> v10.Part:
    kind = given.WhichOneof("part")
    if kind == "text":
        return v10.Part(text=given.text)
    if kind == "data":
        converted = v10.Part()
        converted.data.struct_value.CopyFrom(given.data.data)
        return converted
    if kind == "file":
        file = given.file
        source = file.WhichOneof("file")
        if source == "file_with_uri":
            return v10.Part(url=file.file_with_uri, media_type=file.mime_type, filename=file.name)
        if source == "file_with_bytes":
            return v10.Part(raw=file.file_with_bytes, media_type=file.mime_type, filename=file.name)
        raise _invalid(f"{path}.file", "has no content: set file_with_uri or file_with_bytes")
    raise _invalid(path, "has no content: set one of text, file or data")


def push_config(
    given: v03.PushNotificationConfig, task_id: str, config_id: str, path: str
) -> v10.TaskPushNotificationConfig:
    converted = v10.TaskPushNotificationConfig(
        task_id=task_id, id=config_id or given.id, url=given.url, token=given.token
    )
    if given.HasField("authentication"):
        schemes = given.authentication.schemes
        if len(schemes) > 1:
            raise _invalid(f"{path}authentication.schemes", f"names {len(schemes)} schemes; at most one is supported")
        converted.authentication.scheme = schemes[0] if schemes else ""
        converted.authentication.credentials = given.authentication.credentials
    return converted


def create_push_config(request: v03.CreateTaskPushNotificationConfigRequest) -> v10.TaskPushNotificationConfig:
    task_id = task_name(request.parent, "parent")
    given = request.config.push_notification_config
    if request.config_id and given.id and request.config_id != given.id:
        raise _invalid("config_id", "differs from config.push_notification_config.id")
    return push_config(given, task_id, request.config_id, "config.push_notification_config.")


def task_name(name: str, field: str = "name") -> str:
    """The task id of `tasks/{id}`; InvalidRequestError for any other name."""
    segments = name.split("/")
    if len(segments) != 2 or segments[0] != TASKS or not segments[1]:
        raise _invalid(field, f"must be {TASKS}/{{task_id}}, not {_shown(name)}")
    return segments[1]


def config_name(name: str, field: str = "name") -> tuple[str, str]:
    """The (task id, config id) of `tasks/{id}/pushNotificationConfigs/{config_id}`."""
    segments = name.split("/")
    if len(segments) != 4 or segments[0] != TASKS or segments[2] != CONFIGS or not segments[1] or not segments[3]:
        raise _invalid(field, f"must be {TASKS}/{{task_id}}/{CONFIGS}/{{config_id}}, not {_shown(name)}")
    return segments[1], segments[3]


def _shown(name: str) -> str:
    return repr(name if len(name) <= MAX_NAME_SHOWN else name[:MAX_NAME_SHOWN] + "...")


def _invalid(field: str, problem: str) -> InvalidV03RequestError:
    return InvalidV03RequestError(f"invalid request: {field} {problem}", violations=[(field, problem)])
