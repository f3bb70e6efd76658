"""The server's log lines as text or as JSON lines (`a2a-grpc serve --log-format`).

A JSON line holds `time` (UTC, ISO 8601), `level` and `logger`, then either `message` or, for a record
carrying structured fields (`extra={"fields": {...}}`, as the access log's do), those fields as keys;
`exception` holds a traceback when there is one.
"""

from __future__ import annotations

import logging

from a2a_grpc.log_formats import MAX_HEADS as MAX_HEADS
from a2a_grpc.log_formats import TEXT_FORMAT as TEXT_FORMAT
from a2a_grpc.log_formats import JsonFormatter as JsonFormatter
from a2a_grpc.log_formats import TextFormatter as TextFormatter
from a2a_grpc.setting_types import LOG_FORMATS as LOG_FORMATS
from a2a_grpc.setting_types import log_format as log_format


def configure_logs(level: str, log_format: str) -> None:
    """The root logger as `a2a-grpc serve` sets it up: `level`, a handler on stderr writing `log_format`'s
    lines (`text` or `json`). When the root logger has handlers already, `logging.basicConfig` leaves it as it
    is: `json` then gives its handlers the JSON formatter, and `text` leaves them alone."""
    root = logging.getLogger()
    before = list(root.handlers)
    logging.basicConfig(level=level.upper())
    for handler in root.handlers:
        if log_format == "json":
            handler.setFormatter(JsonFormatter())
        elif handler not in before:
            handler.setFormatter(TextFormatter())
