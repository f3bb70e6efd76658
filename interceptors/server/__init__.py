"""Server interceptors for A2A.

For any gRPC server, the standard interceptors (docs/interceptors.md):
  A2AServerInterceptor       a grpc.aio.ServerInterceptor
  A2ASyncServerInterceptor   a grpc.ServerInterceptor
  activated_extensions()     what the current call activated, read in a servicer method
They check `a2a-version`, negotiate `a2a-extensions` (FAILED_PRECONDITION for a required one missing) and echo
the activated set on the A2A services' calls, by the rules of our own server's chain. They import no generated
code, so that they can serve next to another package's generated `lf.a2a.v1` stubs: keep it so.

Our own server's chain, `ServerChain` (a2a_grpc.interceptors.server.chain), imports what the whole server needs;
it and its parts are imported from here on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from a2a_grpc.interceptors.server.admission import activated_extensions
from a2a_grpc.interceptors.server.extensions import ExtensionNegotiator
from a2a_grpc.interceptors.server.limits import Limits
from a2a_grpc.interceptors.server.standard import A2AServerInterceptor
from a2a_grpc.interceptors.server.standard_sync import A2ASyncServerInterceptor
from a2a_grpc.interceptors.server.version import VersionCheck

if TYPE_CHECKING:
    from a2a_grpc.interceptors.server.auth import authentication
    from a2a_grpc.interceptors.server.chain import WORKER_TRAILER, ServerChain

__all__ = [
    "WORKER_TRAILER",
    "A2AServerInterceptor",
    "A2ASyncServerInterceptor",
    "ExtensionNegotiator",
    "Limits",
    "ServerChain",
    "VersionCheck",
    "activated_extensions",
    "authentication",
]

_ON_FIRST_USE = {
    "ServerChain": "a2a_grpc.interceptors.server.chain",
    "WORKER_TRAILER": "a2a_grpc.interceptors.server.chain",
    "authentication": "a2a_grpc.interceptors.server.auth",
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
