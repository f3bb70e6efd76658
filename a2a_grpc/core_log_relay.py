"""The relay of grpc core's log lines into the server's log: `python -m a2a_grpc.core_log_relay --level L
--format F`, with what the server writes to its file descriptor 2 on stdin (a2a_grpc.grpc_core_logs starts it).

grpc core writes its lines (`E1207 14:17:24.855668   29498 tcp_server_posix.cc:123] message`) to file descriptor
2 itself; grpcio gives them no other way out. This process turns each into a line of the server's log on the
`grpc.core` logger (its levels I, W, E and F as INFO, WARNING, ERROR and CRITICAL; the time core wrote it; the
message escaped as the access log escapes what a caller chose; its source file and line kept), in the server's
format, and drops the ones below the server's level. A message that comes again within REPEAT_SECONDS of its first line is counted,
not written: one line then says how many times it came (core's `File descriptor limit reached` comes once a
second while the limit holds). Every other line (a C library's, a subprocess's) goes to stderr as it came.

Being a process of its own, it outlives the server: it reads until every writer is gone (the server, and any
child that inherited its stderr, exited or crashed) and so still writes the lines a crashing server wrote just
before it died (a failed CHECK prints its line and aborts). It ignores the signals a terminal or a process
manager sends its group: the end of its input ends it. It imports nothing but the standard library and
a2a_grpc's formatters: it starts in about 0.1 s.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import select
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

from a2a_grpc.escaping import escaped
from a2a_grpc.log_formats import JsonFormatter, TextFormatter

CORE_LOGGER = "grpc.core"
REPEAT_SECONDS = 60.0
MAX_MESSAGES = 256  # distinct messages whose repeats are counted at once; one more writes out the counts
PARTIAL_SECONDS = 0.1  # a line without its end yet (a prompt, a progress bar) is passed on after this
READ_BYTES = 65_536
DAY_SECONDS = 86_400.0
MAX_LINE_BYTES = 65_536  # a longer line without its end yet is passed on as it is
LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
# level, month and day, time (local), thread, source, message; core's lines before absl is set up have 0000 00:00:
# and a time since the epoch
_CORE_LINE = re.compile(r"([IWEF])(\d\d)(\d\d) ([\d:.]+) +\d+ ([^\s\]]+:\d+)\] ?(.*)")
_IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class _Repeats:
    since: float  # when the message was last written, itself or as a count
    count: int = 0  # times it came since, not written


class CoreLogRelay:
    """Lines in (`line`, `expire`, `end`), lines of the server's log (or the line as it came) out to `out`."""

    def __init__(self, out: BinaryIO, level: str, formatter: TextFormatter | JsonFormatter) -> None:
        self._out: BinaryIO | None = out
        self._level = logging.getLevelName(level.upper())
        self._formatter = formatter
        self._repeats: dict[tuple[str, str, str], _Repeats] = {}
        self._mid_line = False  # the last bytes passed on did not end their line

    def line(self, raw: bytes, now: float) -> None:
        """One line read (its newline included, unless it is the input's last and has none)."""
        core = _CORE_LINE.fullmatch(raw.rstrip(b"\r\n").decode(errors="backslashreplace"))
        if core is None:
            self._write(raw)
            self._mid_line = not raw.endswith(b"\n")
            return
        level = LEVELS[core[1]]
        if logging.getLevelName(level) < self._level:
            return
        key = (level, core[5], core[6])
        repeats = self._repeats.get(key)
        if repeats is not None:
            repeats.count += 1
            return
        if len(self._repeats) >= MAX_MESSAGES:
            self.end(now)
        self._repeats[key] = _Repeats(now)
        self._write(self._log_line(key, core_time(core, now)))

    def next_expiry(self) -> float | None:
        """When `expire` has a count to write, or a message to forget."""
        return min((repeats.since for repeats in self._repeats.values()), default=None)

    def expire(self, now: float) -> None:
        """Writes the count of each message whose REPEAT_SECONDS are over; forgets the ones that did not come."""
        for key, repeats in list(self._repeats.items()):
            if now - repeats.since >= REPEAT_SECONDS:
                if repeats.count:
                    self._write(self._log_line(key, now, repeats))
                    self._repeats[key] = _Repeats(now)
                else:
                    del self._repeats[key]

    def end(self, now: float) -> None:
        """Writes every count not yet written."""
        for key, repeats in self._repeats.items():
            if repeats.count:
                self._write(self._log_line(key, now, repeats))
        self._repeats.clear()

    def _log_line(self, key: tuple[str, str, str], now: float, repeats: _Repeats | None = None) -> bytes:
        level, source, message = key
        seconds = round(now - repeats.since) if repeats else 0
        if isinstance(self._formatter, JsonFormatter):
            fields: dict[str, object] = {"message": message, "source": source}
            if repeats:
                fields |= {"repeated": repeats.count, "seconds": seconds}
            line = self._formatter.line(now, level, CORE_LOGGER, fields)
        else:
            if repeats:
                source += f"; repeated {repeats.count} time{'s' * (repeats.count != 1)} in the last {seconds}s"
            line = f"{self._formatter.head(now, level, CORE_LOGGER)}{escaped(message)} ({source})"
        opening = "\n" if self._mid_line else ""
        self._mid_line = False
        return f"{opening}{line}\n".encode(errors="backslashreplace")

    def _write(self, data: bytes) -> None:
        if self._out is None:
            return
        try:
            self._out.write(data)
            self._out.flush()
        except OSError:  # stderr is gone: keep reading, so that no writer ever waits on a full pipe
            self._out = None


def core_time(core: re.Match[str], now: float) -> float:
    """When core wrote the line `core`, read at `now`, in seconds since the epoch, as the line says (a relay that
    reads it late still gives its time); `now` when the line's time cannot be read."""
    month, day, clock = int(core[2]), int(core[3]), core[4]
    try:
        if not month:  # 0000 00:00:1733580000.123456
            return float(clock.rpartition(":")[2])
        written = datetime.strptime(clock[:15], "%H:%M:%S.%f")  # to the microsecond
        year = time.localtime(now).tm_year
        when = written.replace(year=year, month=month, day=day).timestamp()
        if when > now + DAY_SECONDS:  # written in December, read in January
            when = written.replace(year=year - 1, month=month, day=day).timestamp()
    except ValueError:
        return now
    return when


def relay_lines(fd: int, relay: CoreLogRelay) -> None:
    """Relays the lines read from `fd` until its end."""
    pending = b""
    while True:
        now = time.time()
        relay.expire(now)
        expiry = relay.next_expiry()
        waits = [expiry + REPEAT_SECONDS - now] if expiry is not None else []
        if pending:
            waits.append(PARTIAL_SECONDS)
        readable, _, _ = select.select([fd], [], [], max(0.0, min(waits)) if waits else None)
        if not readable:
            if pending:
                relay.line(pending, time.time())
                pending = b""
            continue
        chunk = os.read(fd, READ_BYTES)
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        now = time.time()
        for line in lines:
            relay.line(line + b"\n", now)
        if len(pending) > MAX_LINE_BYTES:
            relay.line(pending, now)
            pending = b""
    if pending:
        relay.line(pending, time.time())
    relay.end(time.time())


def main(argv: Sequence[str] | None = None) -> int:
    for signum in _IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    parser = argparse.ArgumentParser(prog="python -m a2a_grpc.core_log_relay")
    parser.add_argument("--level", default="INFO")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args(argv)
    formatter = JsonFormatter() if args.format == "json" else TextFormatter()
    relay_lines(sys.stdin.fileno(), CoreLogRelay(sys.stderr.buffer, args.level, formatter))
    return 0


if __name__ == "__main__":
    sys.exit(main())
