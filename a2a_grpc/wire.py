"""The A2A names on the wire that need no generated code: the services' full names and the headers.

Importable without registering any proto in protobuf's default pool, so that the standard server interceptors
(a2a_grpc.interceptors.server) and the client interceptors (a2a_grpc.interceptors.client) can share a process with
another package's generated `lf.a2a.v1` code;
a2a_grpc.protocol re-exports them beside the constants read from the generated descriptors.
"""

from __future__ import annotations

SERVICE_NAME = "lf.a2a.v1.A2AService"  # A2A 1.0
V03_SERVICE_NAME = "a2a.v1.A2AService"  # A2A 0.3
A2A_METHOD_PREFIX = f"/{SERVICE_NAME}/"

VERSION_HEADER = "a2a-version"
EXTENSIONS_HEADER = "a2a-extensions"
V03_EXTENSIONS_HEADER = "x-a2a-extensions"  # what the 0.3 SDKs send (the 0.3 face reads both)


def is_a2a_method(method: str) -> bool:
    """Whether a full method path (`/package.Service/Method`) names an A2AService RPC."""
    return method.startswith(A2A_METHOD_PREFIX)
