"""What a call to an A2A service is checked against, per face, without generated code: how its version is decided,
which headers carry its extensions (and their echo), and how a refusal reads to the face's callers.

Our server's faces (a2a_grpc.interceptors.server.faces) and the standard interceptors
(a2a_grpc.interceptors.server.standard) both take them from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from a2a_grpc.errors import A2AError, Metadata
from a2a_grpc.interceptors.server.version import V03Version, VersionCheck
from a2a_grpc.v0_3.errors import translator
from a2a_grpc.wire import EXTENSIONS_HEADER, SERVICE_NAME, V03_EXTENSIONS_HEADER, V03_SERVICE_NAME

VersionOf = Callable[[Metadata], str]  # the version a call speaks, or raises VersionNotSupportedError
Translate = Callable[[A2AError], A2AError]


@dataclass(frozen=True)
class FaceRules:
    """`version_check(missing_means)` makes the face's version check; `errors(method)`, when set, how the errors
    of a method read to its callers; `extensions_not_required` the methods a caller may call without the card's
    required extensions: the ones it learns them from."""

    service_name: str
    version_check: Callable[[str], VersionOf]
    extension_headers: tuple[str, ...]  # the first is the one a refusal names
    errors: Callable[[str], Translate] | None = None
    extensions_not_required: frozenset[str] = frozenset()


def _v10_version(missing_means: str) -> VersionOf:
    return VersionCheck(missing_means=missing_means)


def _v03_version(missing_means: str) -> VersionOf:
    return V03Version()


V10_RULES = FaceRules(SERVICE_NAME, _v10_version, (EXTENSIONS_HEADER,))
V03_RULES = FaceRules(
    V03_SERVICE_NAME,
    _v03_version,
    (V03_EXTENSIONS_HEADER, EXTENSIONS_HEADER),
    translator,
    # a gRPC-only 0.3 client learns the card, and so the required extensions, from this call alone (as a 1.0
    # client does from the card over HTTP, which nothing negotiates)
    extensions_not_required=frozenset({"GetAgentCard"}),
)
FACE_RULES = (V10_RULES, V03_RULES)
