"""The access log: one line per A2A call, on the `a2a_grpc.access` logger.

A line holds the method, the status code and A2A reason, the duration, the peer, the principal, the
`a2a-version`, the requested and activated extensions, the task and context ids when the response (or
the error) names them, a stream's event count and an error's ErrorInfo metadata. Never message
contents, never credentials: nothing of the request body or its other headers is read.

Every call is logged at INFO, refusals included; a call the server failed (INTERNAL, UNKNOWN,
DATA_LOSS) at ERROR, with the traceback. The record carries its fields as `record.fields`, which
`logs.JsonFormatter` writes as the keys of a JSON line; its message renders them as `key=value` text.
Values the client chose (ids, extension URIs, version) are cut to a bounded length.

A line costs a few microseconds. The logger's level is checked first, and nothing is built for a line it
drops. When every handler an INFO line reaches is a plain StreamHandler or FileHandler with a JsonFormatter
(what `--log-format json` sets up) and no filter is in the way, the JSON line is made once and written to
their streams as their `emit` would, under their locks, without a LogRecord. Otherwise (a handler or filter
of the application's, pytest's caplog, text lines, ERROR lines) the line is an ordinary LogRecord handed to
`Logger.handle`: made as `Logger.makeRecord` makes it, but copied from the thread's first one rather than
built afresh (no caller lookup), unless the application installed a LogRecord factory of its own.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from a2a_grpc.call import CallContext
from a2a_grpc.extensions import parse_extension_values
from a2a_grpc.protocol import EXTENSIONS_HEADER, VERSION_HEADER
from a2a_grpc.telemetry.call_ids import response_ids
from a2a_grpc.telemetry.logs import JsonFormatter
from a2a_grpc.telemetry.outcome import Outcome

ACCESS_LOGGER = "a2a_grpc.access"
MAX_VALUE_CHARS = 200  # a longer value the client chose is cut to this
MAX_LISTED = 16  # extensions listed, of the ones requested
_SOURCE = __file__  # the pathname of the records (their lineno is 0)
_new_record = object.__new__
# handlers whose `emit` is: format, write to the stream, flush (a FileHandler's stream is its open file)
_PLAIN_HANDLERS = (logging.StreamHandler, logging.FileHandler)
_PLAIN = re.compile(r"[!#-<>-\[\]-~]+")  # printable ASCII but for space, '"', '=' and '\': written unquoted


class AccessLog:
    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger if logger is not None else logging.getLogger(ACCESS_LOGGER)
        self._template: dict[str, Any] | None = None  # an INFO record's attributes, in _info_record
        self._template_key: tuple[int, int] | None = None  # the process and thread it was made in

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
        if not fault:
            handlers = self._json_handlers()
            if handlers is not None:
                self._write_json(handlers, fields)
                return True
        line = AccessLine(fields)
        if fault or logging.getLogRecordFactory() is not logging.LogRecord:
            error = outcome.error if fault else None
            exc_info = (type(error), error, error.__traceback__) if error is not None else None
            record = log.makeRecord(log.name, level, _SOURCE, 0, "%s", (line,), exc_info, None, {"fields": fields})
        else:
            record = self._info_record(line, fields)
        log.handle(record)  # the logger's filters, then every handler it reaches, as `log.info` would
        return True

    def _json_handlers(self) -> list[logging.StreamHandler[Any]] | None:
        """The handlers an INFO record of the logger would reach, when it has no filter and each of them is
        a StreamHandler or FileHandler (exactly) with a JsonFormatter and no filter: their line can then be
        written to their streams straight away, as their `emit` would, without a LogRecord. None otherwise
        (a handler of any other kind, a text formatter, a filter, no handler at all, a record factory)."""
        log = self._log
        if log.disabled or log.filters or logging.getLogRecordFactory() is not logging.LogRecord:
            return None
        found: list[logging.StreamHandler[Any]] = []
        logger: logging.Logger | None = log
        while logger is not None:
            for handler in logger.handlers:
                if handler.level > logging.INFO:
                    continue
                if (
                    type(handler) not in _PLAIN_HANDLERS
                    or handler.filters
                    or type(handler.formatter) is not JsonFormatter
                    or getattr(handler, "stream", None) is None  # a FileHandler that opens its file on first use
                ):
                    return None
                found.append(cast("logging.StreamHandler[Any]", handler))
            logger = logger.parent if logger.propagate else None
        return found or None

    def _write_json(self, handlers: list[logging.StreamHandler[Any]], fields: dict[str, Any]) -> None:
        """The line, made once, written by each handler as its `emit` would: under its lock, then flushed."""
        formatter = cast(JsonFormatter, handlers[0].formatter)  # every JsonFormatter writes the same line
        line = formatter.line(time.time(), logging.getLevelName(logging.INFO), self._log.name, fields)
        for handler in handlers:
            handler.acquire()
            try:
                handler.stream.write(line + handler.terminator)
                handler.flush()
            except RecursionError:
                raise
            except Exception:
                handler.handleError(self._info_record(AccessLine(fields), fields))
            finally:
                handler.release()

    def _info_record(self, line: AccessLine, fields: dict[str, Any]) -> logging.LogRecord:
        """An INFO LogRecord of the line, as `Logger.makeRecord` makes it, but for a fraction of the cost: a
        copy of this thread's first record (its logger, level, source, process and thread), with the time,
        the line (and on Python 3.12+, the asyncio task name) of this one."""
        key = (os.getpid(), threading.get_ident())
        template = self._template
        if template is None or self._template_key != key:
            log = self._log
            record = log.makeRecord(log.name, logging.INFO, _SOURCE, 0, "%s", (line,), None, None, {"fields": fields})
            self._template, self._template_key = dict(record.__dict__), key
            return record
        record = _new_record(logging.LogRecord)
        attributes = record.__dict__
        attributes.update(template)
        now = time.time_ns()
        created = now / 1e9
        attributes["created"] = created
        attributes["msecs"] = (now % 1_000_000_000) // 1_000_000 + 0.0
        attributes["relativeCreated"] = template["relativeCreated"] + (created - template["created"]) * 1000.0
        attributes["args"] = (line,)
        attributes["fields"] = fields
        if "taskName" in template and getattr(logging, "logAsyncioTasks", False):
            attributes["taskName"] = _task_name()
        return record


class AccessLine:
    """An access line's fields as `key=value` text, rendered only if a handler formats the record."""

    __slots__ = ("_text", "fields")

    def __init__(self, fields: Mapping[str, Any]) -> None:
        self.fields = fields
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:  # once, however many handlers format it
            self._text = " ".join(_pairs(self.fields))
        return self._text


def _task_name() -> str | None:
    """The current asyncio task's name, as LogRecord records it (Python 3.12+, logging.logAsyncioTasks)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        task = asyncio.current_task()
    except Exception:
        return None
    return task.get_name() if task is not None else None


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
