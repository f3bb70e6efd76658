"""How the standard interceptors admit a call to an A2A service, by the rules our own server's chain applies.

A method path under `/lf.a2a.v1.A2AService/` or `/a2a.v1.A2AService/` is a call to a face (face_rules): its
`a2a-version` is checked and its extensions negotiated (version, then extensions, as the chain does), with the
chain's own checks (interceptors.server.version, interceptors.server.extensions). A refused call gets a handler
that ends it with the refusal, as the face's callers read it; an accepted call that activated extensions gets the
original handler wrapped so that it echoes them and lets the servicer read them (`activated_extensions`). Any
other method, and a call that activated nothing, keeps its handler as it is. What wraps a handler (asyncio or
sync) is the interceptor's; everything else is here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token

import grpc

from a2a_grpc.errors import A2AError, Metadata
from a2a_grpc.extensions import ExtensionRegistry
from a2a_grpc.interceptors.server.declared import CardSource, declared_extensions
from a2a_grpc.interceptors.server.extensions import MAX_EXTENSIONS_PER_CALL, ExtensionNegotiator, echo_metadata
from a2a_grpc.interceptors.server.face_rules import FACE_RULES, FaceRules
from a2a_grpc.settings.defaults import ECHO_UNARY_HEADERS, MISSING_VERSION_MEANS

Echo = tuple[tuple[str, str], ...]  # the response metadata that echoes the activated extensions
# (the handler, the extensions it activated, their echo, whether unary calls echo in the headers too) -> a handler
Accept = Callable[[grpc.RpcMethodHandler, tuple[str, ...], Echo, bool], grpc.RpcMethodHandler]
Refuse = Callable[[grpc.RpcMethodHandler, A2AError], grpc.RpcMethodHandler]  # a handler that ends the call so

MISSING_VERSION_MEANINGS = ("0.3", "1.0")
_MAX_WRAPPED = 1024  # accepted handlers kept per interceptor: (method, activated set) pairs, all but a few alike

_ACTIVATED: ContextVar[tuple[str, ...]] = ContextVar("a2a_grpc_activated_extensions", default=())


def activated_extensions() -> tuple[str, ...]:
    """The extensions the current call activated (those it requested that the card declares), in the order it
    asked for them; () when it activated none, or outside a call a standard interceptor admitted."""
    return _ACTIVATED.get()


def activate(extensions: tuple[str, ...]) -> Token[tuple[str, ...]]:
    """Make `extensions` the current call's activated set; returns the token that undoes it (`deactivate`)."""
    return _ACTIVATED.set(extensions)


def deactivate(token: Token[tuple[str, ...]]) -> None:
    _ACTIVATED.reset(token)


class FaceAdmission:
    """One face's admission: the version check, then the negotiation, as the chain makes them for that face."""

    def __init__(
        self, rules: FaceRules, registry: ExtensionRegistry, missing_version_means: str, max_extensions: int
    ) -> None:
        self.prefix = f"/{rules.service_name}/"
        self._rules = rules
        self._check_version = rules.version_check(missing_version_means)
        self._negotiate = ExtensionNegotiator(registry, max_extensions=max_extensions, headers=rules.extension_headers)
        self._not_required = rules.extensions_not_required
        self._negotiate_not_required = ExtensionNegotiator(
            registry, max_extensions=max_extensions, headers=rules.extension_headers, enforce_required=False
        )

    def negotiate(self, method: str, metadata: Metadata) -> tuple[tuple[str, ...], str]:
        """(the extensions the call to `method` activated, their comma-joined echo), or raises its refusal (an
        A2AError)."""
        self._check_version(metadata)
        learns = self._not_required and method[len(self.prefix) :] in self._not_required
        negotiation = self._negotiate_not_required(metadata) if learns else self._negotiate(metadata)
        return negotiation.activated, negotiation.echo

    def echo(self, echo: str) -> Echo:
        return echo_metadata(echo, self._rules.extension_headers)

    def refusal(self, method: str, error: A2AError) -> A2AError:
        """`error` as the callers of this face read it."""
        errors = self._rules.errors
        return errors(method[len(self.prefix) :])(error) if errors is not None else error


class StandardAdmission:
    """The A2A faces' admissions, and the handler each call gets: `accept` wraps an accepted call's handler, `refuse`
    makes a refused call's (the interceptor's asyncio or sync ones)."""

    def __init__(
        self,
        accept: Accept,
        refuse: Refuse,
        *,
        card: CardSource | None,
        extensions: Iterable[tuple[str, bool]] | None,
        missing_version_means: str,
        echo_unary_headers: bool,
        max_extensions_per_call: int,
    ) -> None:
        if missing_version_means not in MISSING_VERSION_MEANINGS:
            raise ValueError(
                f"missing_version_means must be one of {MISSING_VERSION_MEANINGS}, not {missing_version_means!r}"
            )
        registry = declared_extensions(card, extensions)
        self.declared = tuple((extension.uri, extension.required) for extension in registry.extensions)
        self._faces = tuple(
            FaceAdmission(rules, registry, missing_version_means, max_extensions_per_call) for rules in FACE_RULES
        )
        self._accept = accept
        self._refuse = refuse
        self._echo_unary_headers = echo_unary_headers
        self._wrapped: dict[tuple[str, str], tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    def handler(self, method: str, metadata: Metadata, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """The handler the call to `method` with request headers `metadata` gets in place of `handler`."""
        face = self._face(method)
        if face is None or handler.request_streaming:  # not an A2A service (no A2A method streams requests)
            return handler
        try:
            activated, echo = face.negotiate(method, metadata)
        except A2AError as error:
            return self._refuse(handler, face.refusal(method, error))
        if not activated:
            return handler
        key = (method, echo)
        wrapped = self._wrapped.get(key)
        if wrapped is not None and wrapped[0] is handler:
            return wrapped[1]
        accepted = self._accept(handler, activated, face.echo(echo), self._echo_unary_headers)
        if len(self._wrapped) >= _MAX_WRAPPED:
            self._wrapped.clear()
        self._wrapped[key] = (handler, accepted)
        return accepted

    def _face(self, method: str) -> FaceAdmission | None:
        for face in self._faces:
            if method.startswith(face.prefix):
                return face
        return None


def with_echo(metadata: Metadata, echo: Echo) -> Metadata:
    """`metadata` a servicer sets as trailers, with the echo added unless it names the echo's header itself."""
    name = echo[0][0]
    if any(key == name for key, _ in metadata):
        return metadata
    return (*echo, *metadata)


class StandardChecks:
    """What both standard interceptors (asyncio and sync) are made of: the settings they take, and the admission
    those make, whose handlers are of the kind `_handlers` gives."""

    def __init__(
        self,
        *,
        card: CardSource | None = None,
        extensions: Iterable[tuple[str, bool]] | None = None,
        missing_version_means: str = MISSING_VERSION_MEANS,
        echo_unary_headers: bool = ECHO_UNARY_HEADERS,
        max_extensions_per_call: int = MAX_EXTENSIONS_PER_CALL,
    ) -> None:
        accept, refuse = self._handlers()
        self._admission = StandardAdmission(
            accept,
            refuse,
            card=card,
            extensions=extensions,
            missing_version_means=missing_version_means,
            echo_unary_headers=echo_unary_headers,
            max_extensions_per_call=max_extensions_per_call,
        )

    @staticmethod
    def _handlers() -> tuple[Accept, Refuse]:
        """How an accepted call's handler is wrapped, and how a refused call's is made."""
        raise NotImplementedError

    @property
    def declared(self) -> tuple[tuple[str, bool], ...]:
        """The (uri, required) pairs enforced."""
        return self._admission.declared
