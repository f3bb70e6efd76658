"""The access log: one line per A2A call, on the `a2a_grpc.access` logger.

A line holds the method, the status code and A2A reason, the duration, the peer, the principal, the
tenant (once the request named one the card names), the `a2a-version`, the requested and activated
extensions, the task and context ids when the response (or the error) names them, a stream's event count
and an error's ErrorInfo metadata. Never message
contents, never credentials: nothing of the request body or its other headers is read.

Every call is logged at INFO, refusals included; a call the server failed (INTERNAL, UNKNOWN,
DATA_LOSS) at ERROR, with the traceback. The record carries its fields as `record.fields`, which
`logs.JsonFormatter` writes as the keys of a JSON line; its message renders them as `key=value` text.
Values the client chose (ids, extension URIs, version) are cut to a bounded length.

A line costs a few microseconds. The logger's level is checked first, and nothing is built for a line it
drops. When every handler an INFO line reaches is a plain StreamHandler or FileHandler with a JsonFormatter,
or every one with a TextFormatter (what `a2a-grpc serve` sets up, with `--log-format json` or without), and
no filter is in the way, the line is written to their streams as their `emit` would, under their locks,
without a LogRecord, and not at once: while an event loop runs, a
call only keeps the values its line needs, and the lines of the calls that ended in the last FLUSH_SECONDS
are made together and written and flushed in one go (made in a batch, the code and data they need stay in
the CPU's caches, which a line made amid the rest of each call's work does not find there). They are
written sooner when MAX_PENDING wait, before a line that goes as a record, and at exit. Otherwise (a handler
or filter of the application's, pytest's caplog, another formatter, ERROR lines) the line is an ordinary LogRecord
handed to `Logger.handle`: made as `Logger.makeRecord` makes it, but copied from the thread's first one
rather than built afresh (no caller lookup), unless the application installed a LogRecord factory of its own.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

from a2a_grpc.arrival import Arrival
from a2a_grpc.call import CallContext
from a2a_grpc.escaping import json_escaped
from a2a_grpc.extensions import parse_extension_values
from a2a_grpc.protocol import EXTENSIONS_HEADER, V03_EXTENSIONS_HEADER, VERSION_HEADER
from a2a_grpc.telemetry.call_ids import response_ids
from a2a_grpc.telemetry.logs import JsonFormatter, TextFormatter
from a2a_grpc.telemetry.outcome import Outcome

ACCESS_LOGGER = "a2a_grpc.access"
MAX_VALUE_CHARS = 200  # a longer value the client chose is cut to this
REQUESTED_HEADERS = (EXTENSIONS_HEADER, V03_EXTENSIONS_HEADER)  # where 1.0 and 0.3 callers name their extensions
MAX_LISTED = 16  # extensions listed, of the ones requested
FLUSH_SECONDS = 0.05  # a line for the JSON handlers' streams is written this soon after its call ended
MAX_PENDING = 512  # or once this many lines wait
MAX_OPENINGS = 1024  # (method, code, reason) triples whose JSON an AccessLog keeps
_SOURCE = __file__  # the pathname of the records (their lineno is 0)
_NO_IDS = ("", "")
_new_record = object.__new__
_json = json_escaped  # a str as JSON, as json.dumps writes it
_UNFLUSHED: set[AccessLog] = set()  # the access logs with pending lines, flushed at exit if still there
# handlers whose `emit` is: format, write to the stream, flush (a FileHandler's stream is its open file)
_PLAIN_HANDLERS = (logging.StreamHandler, logging.FileHandler)
_PLAIN = re.compile(r"[!#-<>-\[\]-~]+")  # printable ASCII but for space, '"', '=' and '\': written unquoted


# An admitted call's line, made when the pending lines are written: (time, method, arrival, call, outcome,
# seconds, response, events).
_Admitted = tuple[float, str, Arrival, CallContext, Outcome, float, Any, int | None]
_Pending = _Admitted | str  # or a line made already
_LineFormatter = JsonFormatter | TextFormatter  # what the handlers of a batch have
_BATCH_FORMATTERS = (JsonFormatter, TextFormatter)


class AccessLog:
    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._log = logger if logger is not None else logging.getLogger(ACCESS_LOGGER)
        self._template: dict[str, Any] | None = None  # an INFO record's attributes, in _info_record
        self._template_key: tuple[int, int] | None = None  # the process and thread it was made in
        self._openings: dict[tuple[str, str, str], str] = {}  # see _opening
        self._text_openings: dict[tuple[str, str, str], str] = {}  # see _text_opening
        self._handlers: list[logging.StreamHandler[Any]] = []  # the JSON handlers the pending lines go to
        self._pending: list[_Pending] = []  # the lines to make and write at the next flush
        self._flush_by: float | None = None  # with pending lines: when the first of them is due

    def write(
        self,
        method: str,
        arrival: Arrival,
        call: CallContext | None,
        outcome: Outcome,
        seconds: float,
        response: Any,
        events: int | None,
    ) -> bool:
        """Log a finished call: `arrival` what it arrived with (its peer, and the headers of a call refused
        before it was admitted, when `call` is None), `response` the unary response or a stream's first
        event, `events` a stream's count. False when the logger drops the line (its level is above the line's)."""
        fault = outcome.fault
        if not self._log.isEnabledFor(logging.ERROR if fault else logging.INFO):
            return False
        handlers = None if fault else self._batch_handlers()
        if handlers is None:
            self.flush()  # the lines before this one first
            self._handle(method, arrival, call, outcome, seconds, response, events)
            return True
        if handlers != self._handlers:
            self.flush()
            self._handlers = handlers
        now = time.time()
        if call is None or outcome.details:  # a refusal: its line made now, from the request's headers
            formatter = cast(_LineFormatter, handlers[0].formatter)
            fields = _fields(method, arrival, call, outcome, seconds, response, events)
            self._pending.append(_made_line(formatter, now, self._log.name, fields))
        else:
            self._pending.append((now, method, arrival, call, outcome, seconds, response, events))
        self._flush_soon(now)
        return True

    def flush(self) -> None:
        """Make the pending lines and write them, each handler as its `emit` would: under its lock, then flushed."""
        if not self._pending:
            return
        self._flush_by = None
        pending, self._pending = self._pending, []
        _UNFLUSHED.discard(self)
        formatter = cast(_LineFormatter, self._handlers[0].formatter)  # the formatters of a batch write the same line
        if isinstance(formatter, JsonFormatter):
            lines = [entry if isinstance(entry, str) else self._json_line(formatter, entry) for entry in pending]
        else:
            lines = [entry if isinstance(entry, str) else self._text_line(formatter, entry) for entry in pending]
        for handler in self._handlers:
            text = handler.terminator.join(lines) + handler.terminator
            handler.acquire()
            try:
                handler.stream.write(text)
                handler.flush()
            except RecursionError:
                raise
            except Exception:
                handler.handleError(logging.makeLogRecord({"name": self._log.name, "msg": text}))
            finally:
                handler.release()

    def _flush_soon(self, now: float) -> None:
        """Flush within FLUSH_SECONDS (at once without a running event loop, or with MAX_PENDING lines)."""
        if self._flush_by is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._flush_by = now + FLUSH_SECONDS
            _UNFLUSHED.add(self)
            loop.call_later(FLUSH_SECONDS, self.flush)
        elif now > self._flush_by or len(self._pending) >= MAX_PENDING:  # late: the loop is busy, or gone
            self.flush()

    def _handle(
        self,
        method: str,
        arrival: Arrival,
        call: CallContext | None,
        outcome: Outcome,
        seconds: float,
        response: Any,
        events: int | None,
    ) -> None:
        """Log the line as a LogRecord: the logger's filters, then every handler it reaches, as `log.info`
        (or `log.error`, with the traceback) would."""
        log = self._log
        fields = _fields(method, arrival, call, outcome, seconds, response, events)
        line = AccessLine(fields)
        if outcome.fault or logging.getLogRecordFactory() is not logging.LogRecord:
            error = outcome.error if outcome.fault else None
            exc_info = (type(error), error, error.__traceback__) if error is not None else None
            level = logging.ERROR if outcome.fault else logging.INFO
            record = log.makeRecord(log.name, level, _SOURCE, 0, "%s", (line,), exc_info, None, {"fields": fields})
        else:
            record = self._info_record(line, fields)
        log.handle(record)

    def _json_line(self, formatter: JsonFormatter, entry: _Admitted) -> str:
        """The JSON line of an admitted call without ErrorInfo: `_fields`' keys, in their order, made straight
        from its values."""
        now, method, arrival, call, outcome, seconds, response, events = entry
        opening = self._openings.get((method, outcome.code_name, outcome.reason)) or self._opening(method, outcome)
        head = formatter.head(now, "INFO", self._log.name)
        text = f'{head},{opening},"duration_ms":{round(seconds * 1000.0, 3)!r},"peer":{_json(arrival.peer)}'
        principal, tenant = call.principal, call.tenant
        requested, activated = call.requested_extensions, call.activated_extensions
        if principal:
            text += ',"principal":' + _json(principal)
        if tenant:
            text += ',"tenant":' + _json(tenant)
        text += ',"version":' + _json(call.version)
        if requested:
            text += ',"requested_extensions":' + _json_list(_listed(requested))
        if activated:
            text += ',"activated_extensions":' + _json_list(activated)
        task_id, context_id = response_ids(response) if response is not None else _NO_IDS
        if task_id:
            text += ',"task_id":' + _json(_bounded(task_id))
        if context_id:
            text += ',"context_id":' + _json(_bounded(context_id))
        if events is not None:
            text += f',"events":{events}'
        return text + "}"

    def _text_line(self, formatter: TextFormatter, entry: _Admitted) -> str:
        """The text line of an admitted call without ErrorInfo: `_pairs` of `_fields`, made straight from its values."""
        now, method, arrival, call, outcome, seconds, response, events = entry
        key = (method, outcome.code_name, outcome.reason)
        opening = self._text_openings.get(key) or self._text_opening(key)
        text = f"{formatter.head(now, 'INFO', self._log.name)}{opening} duration_ms={round(seconds * 1000.0, 3)!r}"
        text += " peer=" + _text(arrival.peer)
        if call.principal:
            text += " principal=" + _text(call.principal)
        if call.tenant:
            text += " tenant=" + _text(call.tenant)
        text += " version=" + _text(call.version)
        if call.requested_extensions:
            text += " requested_extensions=" + _text(",".join(_listed(call.requested_extensions)))
        if call.activated_extensions:
            text += " activated_extensions=" + _text(",".join(call.activated_extensions))
        task_id, context_id = response_ids(response) if response is not None else _NO_IDS
        if task_id:
            text += " task_id=" + _text(_bounded(task_id))
        if context_id:
            text += " context_id=" + _text(_bounded(context_id))
        if events is not None:
            text += f" events={events}"
        return text

    def _text_opening(self, key: tuple[str, str, str]) -> str:
        """The text line's first pairs, `method`, `code` and `reason`: kept for the next call that ends alike."""
        method, code, reason = key
        opening = f"method={_text(method)} code={code}" + (f" reason={_text(reason)}" if reason else "")
        if len(self._text_openings) < MAX_OPENINGS:
            self._text_openings[key] = opening
        return opening

    def _opening(self, method: str, outcome: Outcome) -> str:
        """The line's first keys, `method`, `code` and `reason`, as JSON: kept for the next call that ends alike."""
        opening = f'"method":{_json(method)},"code":"{outcome.code_name}"'
        if outcome.reason:
            opening += ',"reason":' + _json(outcome.reason)
        if len(self._openings) < MAX_OPENINGS:
            self._openings[(method, outcome.code_name, outcome.reason)] = opening
        return opening

    def _batch_handlers(self) -> list[logging.StreamHandler[Any]] | None:
        """The handlers an INFO record of the logger would reach, when it has no filter and each of them is
        a StreamHandler or FileHandler (exactly) with no filter, all with a JsonFormatter or all with a
        TextFormatter: their line can then be written to their streams as their `emit` would, without a
        LogRecord. None otherwise (a handler of any other kind, another formatter, a filter, no handler at
        all, a record factory)."""
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
                    or type(handler.formatter) not in _BATCH_FORMATTERS
                    or (found and type(handler.formatter) is not type(found[0].formatter))
                    or getattr(handler, "stream", None) is None  # a FileHandler that opens its file on first use
                ):
                    return None
                found.append(cast("logging.StreamHandler[Any]", handler))
            logger = logger.parent if logger.propagate else None
        return found or None

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


def _made_line(formatter: _LineFormatter, created: float, logger: str, fields: dict[str, Any]) -> str:
    """An INFO line of `fields`, as `formatter` writes the record `_handle` would make of them."""
    if type(formatter) is JsonFormatter:
        return formatter.line(created, "INFO", logger, fields)
    return formatter.head(created, "INFO", logger) + " ".join(_pairs(fields))


def _fields(
    method: str,
    arrival: Arrival,
    call: CallContext | None,
    outcome: Outcome,
    seconds: float,
    response: Any,
    events: int | None,
) -> dict[str, Any]:
    """The line's fields, as a record carries them."""
    fields: dict[str, Any] = {"method": method, "code": outcome.code_name}
    if outcome.reason:
        fields["reason"] = outcome.reason
    fields["duration_ms"] = round(seconds * 1000.0, 3)
    fields["peer"] = arrival.peer
    if call is not None:
        if call.principal:
            fields["principal"] = call.principal
        if call.tenant:
            fields["tenant"] = call.tenant
        fields["version"] = call.version
        requested, activated = call.requested_extensions, call.activated_extensions
    else:  # refused while being admitted: what its headers asked for
        metadata = arrival.metadata
        version = next((str(value) for key, value in metadata if key == VERSION_HEADER), "")
        if version:
            fields["version"] = _bounded(version)
        requested = parse_extension_values([str(value) for key, value in metadata if key in REQUESTED_HEADERS])
        activated = ()
    if requested:
        fields["requested_extensions"] = _listed(requested)
    if activated:
        fields["activated_extensions"] = list(activated)
    task_id, context_id = response_ids(response) if response is not None else _NO_IDS
    task_id = task_id or outcome.details.get("taskId", "")
    if task_id:
        fields["task_id"] = _bounded(task_id)
    if context_id:
        fields["context_id"] = _bounded(context_id)
    if events is not None:
        fields["events"] = events
    if outcome.details:
        fields["error_info"] = {_bounded(key): _bounded(value) for key, value in outcome.details.items()}
    return fields


def _json_list(values: Sequence[str]) -> str:
    return "[" + ",".join(map(_json, values)) + "]"


@atexit.register
def _flush_at_exit() -> None:
    """Registered after `logging.shutdown` (imported first), so called before it."""
    for access_log in list(_UNFLUSHED):
        access_log.flush()


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


def _text(value: str) -> str:
    """A value as a text line writes it: as it is when plain, else quoted as JSON."""
    return value if _PLAIN.fullmatch(value) else _json(value)


def _pairs(fields: Mapping[str, Any]) -> list[str]:
    pairs = []
    for key, value in fields.items():
        kind = type(value)
        if kind is str or kind is list:
            pairs.append(f"{key}={_text(value if kind is str else ','.join(value))}")
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
