"""Negotiates the `a2a-extensions` of every A2A call, and echoes the activated set.

Every header entry is read and split on commas, so each real client form works. A call that lacks a
declared required extension is refused with ExtensionSupportRequiredError (but for the methods a caller
learns the required extensions from, whose negotiator is made with `enforce_required=False`). An accepted
call that activated any extension gets `a2a-extensions: <activated, comma-joined>` in its trailers, and in its
response headers too on streams (before the first event) or when unary headers are asked for.
A call that names more than `max_extensions` distinct extensions is INVALID_ARGUMENT, with a
BadRequest naming the header, before the required ones are checked.
"""

from __future__ import annotations

from typing import Any

from a2a_grpc.errors import ExtensionSupportRequiredError, InvalidRequestError, Metadata
from a2a_grpc.extensions import ExtensionRegistry, Negotiation
from a2a_grpc.interceptors.server.metadata import all_values
from a2a_grpc.settings.defaults import MAX_EXTENSIONS_PER_CALL as MAX_EXTENSIONS_PER_CALL
from a2a_grpc.wire import EXTENSIONS_HEADER

NO_NEGOTIATION = Negotiation((), (), (), "")


class ExtensionNegotiator:
    """Reads the extensions a call requests from `headers` (every one of them: the 0.3 face reads two names);
    `enforce_required=False` activates what the call requests without refusing it for a required one it lacks."""

    def __init__(
        self,
        registry: ExtensionRegistry,
        *,
        max_extensions: int = MAX_EXTENSIONS_PER_CALL,
        headers: tuple[str, ...] = (EXTENSIONS_HEADER,),
        enforce_required: bool = True,
    ) -> None:
        self._registry = registry
        self._max_extensions = max_extensions
        self._headers = headers
        self._enforce_required = enforce_required

    def _requested(self, metadata: Metadata) -> tuple[str, ...]:
        if len(self._headers) == 1:
            return all_values(metadata, self._headers[0])
        return tuple(value for header in self._headers for value in all_values(metadata, header))

    def __call__(self, metadata: Metadata) -> Negotiation:
        negotiation = self._registry.negotiate(self._requested(metadata))
        count = len(negotiation.requested)
        header = self._headers[0]
        if count > self._max_extensions:
            raise InvalidRequestError(
                f"the call names {count} extensions; at most {self._max_extensions} are allowed",
                violations=[(header, f"names {count} distinct extensions; at most {self._max_extensions}")],
            )
        if negotiation.missing_required and self._enforce_required:
            missing = ",".join(negotiation.missing_required)
            raise ExtensionSupportRequiredError(
                f"this agent requires extensions the call did not activate: {missing}; "
                f"send them in the '{header}' header",
                metadata={"missingExtensions": missing},
            )
        return negotiation


async def send_echo(context: Any, echo: str, *, headers: bool, names: tuple[str, ...] = (EXTENSIONS_HEADER,)) -> None:
    """Echo the activated extensions under each of `names` in the trailers and, with `headers`, in the response
    headers.

    The trailers are set before the servicer runs, so an error status raised later keeps them.
    """
    entry = echo_metadata(echo, names)
    context.set_trailing_metadata(entry)
    if headers:
        await context.send_initial_metadata(entry)


def echo_metadata(echo: str, names: tuple[str, ...] = (EXTENSIONS_HEADER,)) -> tuple[tuple[str, str], ...]:
    """The echo of the activated extensions `echo` (comma-joined) under each of `names`, as response metadata."""
    return ((names[0], echo),) if len(names) == 1 else tuple([(name, echo) for name in names])
