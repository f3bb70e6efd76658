"""The access log: one line per A2A call, on the `a2a_grpc.access` logger.

A line holds the method, the status code and A2A reason, the duration, the peer, the principal, the
`a2a-version`, the requested and activated extensions, the task and context ids when the response (or
the error) names them, a stream's event count and an error's ErrorInfo metadata. Never message
contents, never credentials: nothing of the request body or its other headers is read.

Every call is logged at INFO, refusals included; a call the server failed (INTERNAL, UNKNOWN,
DATA_LOSS) at ERROR, with the traceback. The record carries its fields as `record.fields`, which
`logs.JsonFormatter` writes as the keys of a JSON line; its message renders them as `key=value` text.
Values the client chose (ids, extension URIs, version) are cut to a bounded length.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from a2a_grpc.call import CallContext
from a2a_grpc.extensions import parse_extension_values
from a2a_grpc.protocol import EXTENSIONS_HEADER, VERSION_HEADER
from a2a_grpc.telemetry.call_ids import response_ids
from a2a_grpc.telemetry.outcome import Outcome

ACCESS_LOGGER = "a2a_grpc.access"
MAX_VALUE_CHARS = 200  # a longer value the client chose is cut to this
MAX_LISTED = 16  # extensions listed, of the ones requested
_PLAIN = re.compile(r"[!#-<>-\[\]-~]+")  # printable ASCII but for space, '"', '=' and '\': written unquoted


class AccessLog:
    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger if logger is not None else logging.getLogger(ACCESS_LOGGER)

    def write(
        self,
        method: str,
        context: Any,
        call: CallContext | None,
        outcome: Outcome,
        seconds: float,
        response: Any,
        events: int | None,
    ) -> bool:
        """Log a finished call: `call` is None when the call was refused before it was admitted, `response`
        the unary response or a stream's first event, `events` a stream's count. False when the logger
        drops the line (its level is above the line's)."""
        fault = outcome.fault
        level = logging.ERROR if fault else logging.INFO
        log = self._log
        if not log.isEnabledFor(level):
            return False
        fields: dict[str, Any] = {"method": method, "code": outcome.code.name}
        if outcome.reason:
            fields["reason"] = outcome.reason
        fields["duration_ms"] = round(seconds * 1000.0, 3)
        fields["peer"] = context.peer()
        if call is not None:
            if call.principal:
                fields["principal"] = call.principal
            fields["version"] = call.version
            requested, activated = call.requested_extensions, call.activated_extensions
        else:  # refused while being admitted: what its headers asked for
            metadata = context.invocation_metadata() or ()
            version = next((str(value) for key, value in metadata if key == VERSION_HEADER), "")
            if version:
                fields["version"] = _bounded(version)
            requested = parse_extension_values([str(value) for key, value in metadata if key == EXTENSIONS_HEADER])
            activated = ()
        if requested:
            fields["requested_extensions"] = _listed(requested)
        if activated:
            fields["activated_extensions"] = list(activated)
        task_id, context_id = response_ids(response) if response is not None else ("", "")
        task_id = task_id or outcome.details.get("taskId", "")
        if task_id:
            fields["task_id"] = _bounded(task_id)
        if context_id:
            fields["context_id"] = _bounded(context_id)
        if events is not None:
            fields["events"] = events
        if outcome.details:
            fields["error_info"] = {_bounded(key): _bounded(value) for key, value in outcome.details.items()}
        exc_info = outcome.error if fault else None
        log.log(level, "%s", AccessLine(fields), exc_info=exc_info, extra={"fields": fields})
        return True


class AccessLine:
    """An access line's fields as `key=value` text, rendered only if a handler formats the record."""

    __slots__ = ("fields",)

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.fields = fields

    def __str__(self) -> str:
        return " ".join(_pairs(self.fields))


def _pairs(fields: Mapping[str, Any]) -> list[str]:
    pairs = []
    for key, value in fields.items():
        kind = type(value)
        if kind is str or kind is list:
            text = value if kind is str else ",".join(value)
            pairs.append(f"{key}={text}" if _PLAIN.fullmatch(text) else f"{key}={json.dumps(text)}")
        elif kind is dict:
            pairs.extend(_pairs(value))
        else:  # a number
            pairs.append(f"{key}={value}")
    return pairs


def _bounded(value: str) -> str:
    return value if len(value) <= MAX_VALUE_CHARS else value[:MAX_VALUE_CHARS] + "\u2026"


def _listed(values: Sequence[str]) -> list[str]:
    listed = [_bounded(value) for value in values[:MAX_LISTED]]
    if len(values) > MAX_LISTED:
        listed.append(f"\u2026{len(values) - MAX_LISTED} more")
    return listed
