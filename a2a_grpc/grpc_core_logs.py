"""grpc core's own log lines below ERROR, off unless GRPC_VERBOSITY asks for them.

grpc core writes its log lines to stderr itself, outside Python's logging: a client that does not speak TLS
to a TLS port is an `I... ssl_transport_security.cc] Handshake failed ...` line per connection, which says
nothing a server's operator can act on. Core reads GRPC_VERBOSITY once, when grpc is first imported, so the
command line (a2a_grpc.cli) imports this module before anything that imports grpc. Core has no WARNING level:
ERROR is the next one above INFO. An application that embeds the server keeps grpc's own default.
"""

from __future__ import annotations

import os

GRPC_VERBOSITY = "GRPC_VERBOSITY"

os.environ.setdefault(GRPC_VERBOSITY, "ERROR")
