"""The server's log lines as text or as JSON lines (`a2a-grpc serve --log-format`).

A JSON line holds `time` (UTC, ISO 8601), `level` and `logger`, then either `message` or, for a record
carrying structured fields (`extra={"fields": {...}}`, as the access log's do), those fields as keys;
`exception` holds a traceback when there is one.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

LOG_FORMATS = ("text", "json")


def log_format(text: str) -> str:
    """`--log-format`'s value, checked (argparse reports the ValueError as an invalid value)."""
    value = text.strip().lower()
    if value not in LOG_FORMATS:
        raise ValueError(text)
    return value


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        else:
            entry["message"] = record.getMessage()
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, separators=(",", ":"))


def use_json_logs() -> None:
    """Every handler of the root logger writes JSON lines from now on (after `logging.basicConfig`)."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(JsonFormatter())
