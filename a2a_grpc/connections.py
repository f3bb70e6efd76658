"""The gRPC port's bounds on connections, which grpc core keeps once its channel arguments name them.

- At most `max_connections` open at once (`grpc.max_allowed_incoming_connections`): one more is closed as soon
  as it is accepted. By default half of what the process's open-file limit leaves once the HTTP port has its
  connections (at least a quarter of the limit), so that a flood of connections cannot take the file
  descriptors the HTTP port, the store and push delivery need.
- A connection finishes its handshake (TLS, then the client's HTTP/2 preface and SETTINGS) within
  `handshake_seconds` of opening, or is closed (`grpc.server_handshake_timeout_ms`; grpc's own default is
  120 s): a client that opens connections and says nothing holds each only that long.
- A connection with no call for `idle_seconds` is sent a GOAWAY and closed (`grpc.max_connection_idle_ms`);
  clients open a new one for their next call. 0: never.

grpc core counts connections in all, not per address, so one address can fill the cap with connections that
complete their handshake and then wait out `idle_seconds`; a cap per address is a2a_grpc.connection_front's.
"""

from __future__ import annotations

import resource

FALLBACK_OPEN_FILES = 65_536  # the open-file limit assumed when the process has none
GRPC_INT_MAX = 2**31 - 1  # grpc core reads integer channel arguments as C ints


def default_max_connections(others: int, files_each: int = 1) -> int:
    """Half of what the process's open-file limit (its soft limit, as `ulimit -n` shows it) leaves after `others`
    connections elsewhere (the HTTP port's), and at least a quarter of the limit; divided by `files_each`, the
    files one connection takes (three behind a2a_grpc.connection_front)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = min(GRPC_INT_MAX, FALLBACK_OPEN_FILES if soft == resource.RLIM_INFINITY else soft)
    return max(1, max(limit // 4, (limit - others) // 2) // files_each)


def connection_options(max_connections: int, handshake_seconds: float, idle_seconds: float) -> list[tuple[str, int]]:
    """The grpc server's channel arguments for these bounds."""
    options = [
        ("grpc.max_allowed_incoming_connections", max_connections),
        ("grpc.server_handshake_timeout_ms", _milliseconds(handshake_seconds)),
    ]
    if idle_seconds > 0:
        options.append(("grpc.max_connection_idle_ms", _milliseconds(idle_seconds)))
    return options


def _milliseconds(seconds: float) -> int:
    return max(1, min(GRPC_INT_MAX, round(seconds * 1000)))
