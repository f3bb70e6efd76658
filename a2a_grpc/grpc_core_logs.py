"""grpc core's own log lines: below ERROR, off unless GRPC_VERBOSITY asks for them; in `a2a-grpc serve`, through the
server's log (`relay_core_logs`).

grpc core writes its log lines to stderr itself, outside Python's logging: a client that does not speak TLS
to a TLS port is an `I... ssl_transport_security.cc] Handshake failed ...` line per connection, which says
nothing a server's operator can act on. Core reads GRPC_VERBOSITY once, when grpc is first imported, so the
command line (a2a_grpc.cli) imports this module before anything that imports grpc. Core has no WARNING level:
ERROR is the next one above INFO. An application that embeds the server keeps grpc's own default.
"""

from __future__ import annotations

import faulthandler
import io
import logging
import os
import subprocess
import sys
from contextlib import suppress
from dataclasses import dataclass

GRPC_VERBOSITY = "GRPC_VERBOSITY"
RELAY_MODULE = "a2a_grpc.core_log_relay"
END_SECONDS = 2.0  # how long a server that ends waits for the relay to write what it has

os.environ.setdefault(GRPC_VERBOSITY, "ERROR")


@dataclass
class CoreLogRelayProcess:
    """The relay `relay_core_logs` started, and the server's stderr as it was (`stderr`, a file descriptor)."""

    process: subprocess.Popen[bytes]
    stderr: int

    def end(self) -> None:
        """At the server's end: file descriptor 2 back on the server's stderr, and the relay given END_SECONDS
        to write the lines it has (it goes on past them while a child of the server still holds the pipe)."""
        sys.stderr.flush()
        os.dup2(self.stderr, 2)
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(END_SECONDS)


def relay_core_logs(level: str, log_format: str) -> CoreLogRelayProcess | None:
    """grpc core's log lines made lines of the server's log (`level`, `log_format`), for `a2a-grpc serve`.

    Core writes to file descriptor 2, and grpcio offers no other way: file descriptor 2 becomes a pipe to a
    process of its own (a2a_grpc.core_log_relay), which outlives a crash of this one, so that a failed CHECK's
    last line is still written; its children inherit the pipe, and their lines, like every line that is not
    core's, pass through it unchanged. What Python writes (sys.stderr, the log's handlers, faulthandler) keeps
    going to the server's stderr itself. None, with file descriptor 2 left as it is, when the relay cannot start.
    """
    try:
        stderr = os.dup(2)
    except OSError:
        return None
    read_end, write_end = os.pipe()
    command = [sys.executable, "-P", "-m", RELAY_MODULE, "--level", level, "--format", log_format]
    try:
        process = subprocess.Popen(
            command, stdin=read_end, stdout=subprocess.DEVNULL, stderr=stderr, env=_relay_env(), cwd="/"
        )
    except OSError as error:
        os.close(write_end)
        os.close(stderr)
        logging.getLogger(__name__).warning("grpc core's lines stay on stderr as core writes them: %s", error)
        return None
    finally:
        os.close(read_end)
    _write_python_to(stderr)
    os.dup2(write_end, 2)
    os.close(write_end)
    return CoreLogRelayProcess(process, stderr)


def _relay_env() -> dict[str, str]:
    """This environment, with this a2a_grpc package's directory first on the relay's path (`-P` keeps the working
    directory off it: a file there must not stand in for a module the relay imports)."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([package_parent, path] if path else [package_parent])}


def _write_python_to(fd: int) -> None:
    """sys.stderr, the root logger's handlers on it and faulthandler made to write to `fd`."""
    old = sys.stderr
    old.flush()
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(fd, "w", closefd=False)),
        encoding=old.encoding,
        errors=old.errors,
        line_buffering=getattr(old, "line_buffering", True),
        write_through=getattr(old, "write_through", True),
    )
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is old:
            handler.setStream(sys.stderr)
    if faulthandler.is_enabled():
        faulthandler.enable(sys.stderr)
