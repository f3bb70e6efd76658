"""Issue 29, finding 4: grpc core's lines (its `File descriptor limit reached` once a second, among others) are
lines of the server's log in `a2a-grpc serve` (a2a_grpc.grpc_core_logs, a2a_grpc.core_log_relay), a repeated one
counted rather than written again, still written when the server crashes right after; every other line written to
the server's file descriptor 2 passes through as it came."""

from __future__ import annotations

import io
import json
import re
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from process import SERVE, send_text, serve_process

from a2a_grpc.core_log_relay import REPEAT_SECONDS, CoreLogRelay
from a2a_grpc.log_formats import JsonFormatter, TextFormatter

OPEN_FILES = 256
SILENT_CONNECTIONS = 300  # past the open-file limit, with grpc's own cap on connections lifted
WAIT_SECONDS = 20.0  # a guard against a hang, never reached when the lines come
FD_MESSAGE = "File descriptor limit reached"
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"  # TEXT_FORMAT's asctime
CORE_LINE = "E1207 14:17:24.855668   29498 chttp2_server.cc:123] the last line before the crash\n"
CRASHING_AGENT = f"""
import os, signal, subprocess

class Agent:
    async def execute(self, context, events):
        subprocess.run(["sh", "-c", "echo 'a line from a child of the agent' >&2"], check=True)
        os.write(2, b"a line written to fd 2 with no logging\\n")
        for _ in range(3):
            os.write(2, {CORE_LINE.encode()!r})
        os.kill(os.getpid(), signal.SIGKILL)
"""


def stderr_with(server_stderr: Path, text: str) -> str:
    """The server's stderr once it holds `text`."""
    deadline = time.monotonic() + WAIT_SECONDS
    while text not in (written := server_stderr.read_text(errors="replace")):
        assert time.monotonic() < deadline, f"no {text!r} on stderr:\n{written[-3000:]}"
        time.sleep(0.05)
    return written


def test_finding_4_core_fd_limit_lines_are_lines_of_the_servers_log(tmp_path: Path) -> None:
    """A server limited to 256 files, grpc's cap on connections lifted, and 300 silent connections: core's
    `File descriptor limit reached` is an ERROR line of the `grpc.core` logger in the server's text format, written
    once (its repeats counted), never core's raw line."""
    limited = ("sh", "-c", f'ulimit -n {OPEN_FILES} && exec "$@"', "sh", *SERVE)
    args = ("--max-connections", "1000", "--handshake-seconds", "60")
    with serve_process(tmp_path, *args, command=limited) as server:
        host, _, port = server.grpc_target.rpartition(":")
        silent = [socket.create_connection((host, int(port))) for _ in range(SILENT_CONNECTIONS)]
        try:
            stderr = stderr_with(tmp_path / "stderr.log", f"{FD_MESSAGE}. Retrying. (")
        finally:
            for connection in silent:
                connection.close()
    ours = rf"{TIME} ERROR grpc\.core: "
    written = [line for line in stderr.splitlines() if FD_MESSAGE in line]
    assert len(written) == 1 and re.fullmatch(f"{ours}{FD_MESSAGE}. Retrying. \\(\\S+\\.cc:\\d+\\)", written[0]), stderr
    assert re.search(rf"{TIME} INFO a2a_grpc\.server: serving A2A on ", stderr), stderr


def test_finding_4_core_lines_before_a_crash_are_still_relayed(tmp_path: Path) -> None:
    """An agent whose child writes a line to stderr, that writes a line to file descriptor 2 itself, then a grpc
    core line three times, then kills its server (SIGKILL, as a failed CHECK aborts): after the server died, its
    stderr (JSON logs) holds the core line as a `grpc.core` JSON line and its repeats counted, and the other two
    lines as they were written."""
    (tmp_path / "crashing_agent.py").write_text(CRASHING_AGENT)
    agent = ("--agent", "crashing_agent:Agent", "--app-dir", str(tmp_path), "--log-format", "json")
    with serve_process(tmp_path, *agent) as server:
        with pytest.raises(grpc.RpcError):
            send_text(server.grpc_target, "crash")
        assert server.wait() == -9
        stderr = stderr_with(tmp_path / "stderr.log", '"repeated":2')
    lines = stderr.splitlines()
    assert "a line from a child of the agent" in lines and "a line written to fd 2 with no logging" in lines
    assert CORE_LINE.strip() not in stderr
    relayed = [json.loads(line) for line in lines if '"grpc.core"' in line]
    assert [{key: line.get(key) for key in ("level", "message", "source", "repeated")} for line in relayed] == [
        {"level": "ERROR", "message": "the last line before the crash", "source": "chttp2_server.cc:123"}
        | {"repeated": repeated}
        for repeated in (None, 2)
    ]


def test_a_repeated_core_line_is_counted_once_a_minute_and_forgotten_after_a_quiet_minute() -> None:
    """The relay, fed lines at chosen times: a message again within REPEAT_SECONDS is counted, the count written
    when they are over; after REPEAT_SECONDS without it, the message is written again; its text escaped; INFO
    below a WARNING level dropped."""
    out = io.BytesIO()
    relay = CoreLogRelay(out, "warning", TextFormatter())
    line = b"E1207 14:17:24.855668   29498 tcp_server_posix.cc:1] limit\treached\n"
    for second in range(5):
        relay.line(line, 1000.0 + second)
    relay.line(b"I1207 14:17:24.855668   29498 x.cc:1] chatter\n", 1001.0)
    relay.line(b"W1207 14:17:24.855668 ", 1001.0)  # not a whole core line: passed on as it came
    relay.expire(1000.0 + REPEAT_SECONDS)
    relay.expire(1000.0 + 2 * REPEAT_SECONDS)
    relay.line(line, 1000.0 + 2 * REPEAT_SECONDS + 1)
    relay.end(1000.0 + 2 * REPEAT_SECONDS + 1)
    written = out.getvalue().decode().splitlines()
    said = [line.partition(" ERROR grpc.core: ")[2] for line in written]
    assert said == [
        "limit\\treached (tcp_server_posix.cc:1)",
        "",
        "limit\\treached (tcp_server_posix.cc:1; repeated 4 times in the last 60s)",
        "limit\\treached (tcp_server_posix.cc:1)",
    ], written
    assert written[1] == "W1207 14:17:24.855668 "


def test_json_relay_lines_are_the_servers_json_lines_at_the_time_core_wrote_them() -> None:
    """A relay that reads core's lines late still gives them the time core wrote them (local time in core's
    usual lines; seconds since the epoch in the ones it writes before absl is set up)."""
    out = io.BytesIO()
    relay = CoreLogRelay(out, "info", JsonFormatter())
    written = datetime(2026, 12, 7, 14, 17, 24, 855668).timestamp()
    relay.line(b"F1207 14:17:24.855668   7 a.cc:9] Check failed: x\n", written + 5.0)
    relay.line(b"I0000 00:00:1733580000.500000   7 b.cc:1] early\n", written + 5.0)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {
        "time": datetime.fromtimestamp(written, UTC).isoformat(timespec="milliseconds"),
        "level": "CRITICAL",
        "logger": "grpc.core",
        "message": "Check failed: x",
        "source": "a.cc:9",
    }
    assert (second["time"], second["level"], second["message"]) == ("2024-12-07T14:00:00.500+00:00", "INFO", "early")
