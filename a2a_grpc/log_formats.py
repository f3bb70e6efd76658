"""The server's log lines as text and as JSON lines: the formatters `a2a-grpc serve --log-format` sets up
(a2a_grpc.telemetry.logs), in a module that imports only the standard library, for the relay of grpc core's
lines (a2a_grpc.core_log_relay), which runs in a process of its own.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_HEADS = 1024  # (level, logger) pairs whose JSON a JsonFormatter keeps
_encode = json.JSONEncoder(default=str, separators=(",", ":")).encode
_MILLISECONDS = tuple(f".{millisecond:03d}+00:00" for millisecond in range(1000))  # a time's ending


class JsonFormatter(logging.Formatter):
    """Each line made by one C-encoder pass over the record's fields (or message), after a head of
    `time`, `level` and `logger` whose date and time to the second, and level and logger, are kept
    from the line before when they are the same."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._second: tuple[int, str] = (-1, "")  # a second since the epoch, and its ISO 8601 form
        self._heads: dict[tuple[str, str], str] = {}  # (level, logger) -> their keys, as JSON

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        rest: dict[str, Any] = fields if isinstance(fields, dict) else {"message": record.getMessage()}
        if record.exc_info or record.stack_info:
            rest = dict(rest)
            if record.exc_info:
                rest["exception"] = self.formatException(record.exc_info)
            if record.stack_info:
                rest["stack"] = self.formatStack(record.stack_info)
        return self.line(record.created, record.levelname, record.name, rest)

    def line(self, created: float, level: str, logger: str, rest: dict[str, Any]) -> str:
        """The JSON line of a record made at `created` (seconds since the epoch), of `level` and `logger`,
        whose other keys are `rest`'s."""
        body = _encode(rest)
        return f"{self.head(created, level, logger)}{'}' if body == '{}' else ',' + body[1:]}"

    def head(self, created: float, level: str, logger: str) -> str:
        """The line's opening, up to its `logger` key's value: `{"time":...,"level":...,"logger":...`."""
        return f'{{"time":"{self._time(created)}"{self._head(level, logger)}'

    def _time(self, created: float) -> str:
        """`created` in UTC, ISO 8601 to the millisecond: 2026-01-31T12:00:00.123+00:00."""
        second, text = self._second
        if int(created) != second:
            second = int(created)
            text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
            self._second = (second, text)  # one assignment: a formatter may be shared by threads
        return text + _MILLISECONDS[int((created - second) * 1000)]

    def _head(self, level: str, logger: str) -> str:
        key = (level, logger)
        head = self._heads.get(key)
        if head is None:
            if len(self._heads) > MAX_HEADS:
                self._heads.clear()
            head = self._heads[key] = f',"level":{_encode(level)},"logger":{_encode(logger)}'
        return head


class TextFormatter(logging.Formatter):
    """TEXT_FORMAT's lines (`2026-01-31 12:00:00,123 INFO a2a_grpc.access: method=SendMessage ...`), whose
    opening a caller can have without a LogRecord (`head`), its date and time to the second kept from the
    line before when they are the same."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")  # a second since the epoch, and its local time as asctime has it

    def head(self, created: float, level: str, logger: str) -> str:
        """The line's opening, up to its message: `asctime levelname name: `."""
        second, text = self._second
        if int(created) != second:
            second = int(created)
            text = self.formatTime(logging.makeLogRecord({"created": second, "msecs": 0}))[:-4]
            self._second = (second, text)  # one assignment: a formatter may be shared by threads
        return f"{text},{int((created - second) * 1000):03d} {level} {logger}: "
