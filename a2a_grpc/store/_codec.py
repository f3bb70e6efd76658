"""Helpers shared by the stores: status timestamps and opaque, url-safe page tokens."""

from __future__ import annotations

import base64
import json
import time

from a2a_grpc.generated import a2a_pb2
from a2a_grpc.store.base import InvalidPageTokenError

_TASK_CURSOR = "t1"
_CONFIG_CURSOR = "c1"
# Far above any token this server issues for its own ids; a longer one is refused before it is decoded.
MAX_PAGE_TOKEN_CHARS = 4096


def now_us() -> int:
    return time.time_ns() // 1000


def status_ts_us(status: a2a_pb2.TaskStatus) -> int:
    """The status timestamp in microseconds since the epoch; now when the status has none."""
    if not status.HasField("timestamp"):
        return now_us()
    seconds: int = status.timestamp.seconds
    nanos: int = status.timestamp.nanos
    return seconds * 1_000_000 + nanos // 1000


def encode_task_cursor(ts_us: int, task_id: str) -> str:
    """A token naming the last task of a page: the next page starts strictly after it."""
    return _encode([_TASK_CURSOR, ts_us, task_id])


def page_token_after(task: a2a_pb2.Task) -> str:
    """The ListTasks page token whose page starts right after `task`."""
    return encode_task_cursor(status_ts_us(task.status), task.id)


def decode_task_cursor(token: str) -> tuple[int, str]:
    fields = _decode(token)
    if len(fields) != 3 or fields[0] != _TASK_CURSOR:
        raise InvalidPageTokenError("invalid page token")
    ts_us, task_id = fields[1], fields[2]
    if type(ts_us) is not int or not -(2**63) <= ts_us < 2**63 or not isinstance(task_id, str):
        raise InvalidPageTokenError("invalid page token")  # SQLite integers are 64-bit
    return ts_us, task_id


def encode_config_cursor(config_id: str) -> str:
    return _encode([_CONFIG_CURSOR, config_id])


def config_page_token_after(config: a2a_pb2.TaskPushNotificationConfig) -> str:
    """The page token of the configs after `config` (configs are listed by id)."""
    return encode_config_cursor(config.id)


def decode_config_cursor(token: str) -> str:
    fields = _decode(token)
    if len(fields) != 2 or fields[0] != _CONFIG_CURSOR or not isinstance(fields[1], str):
        raise InvalidPageTokenError("invalid page token")
    return fields[1]


def _encode(fields: list[object]) -> str:
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode(token: str) -> list[object]:
    if len(token) > MAX_PAGE_TOKEN_CHARS:
        raise InvalidPageTokenError("invalid page token")
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
        fields = json.loads(raw)
    # ValueError includes binascii.Error, UnicodeDecodeError and JSONDecodeError; RecursionError is deep nesting
    except (ValueError, RecursionError) as exc:
        raise InvalidPageTokenError("invalid page token") from exc
    if not isinstance(fields, list):
        raise InvalidPageTokenError("invalid page token")
    return fields
