"""The card's security requirements, evaluated for each call: the caller is admitted when any one requirement
is met (OR), and a requirement is met when every scheme it names authenticates the caller with every scope
it lists (AND).

Missing or refused credentials answer UNAUTHENTICATED with one message naming what the server accepts,
whatever failed (a token's expiry, an unknown key, a wrong audience all read the same to the caller); an
authenticated caller that a requirement lacks scopes for answers PERMISSION_DENIED naming them. An empty
requirement (`{}`) admits an anonymous caller, unless the call presents a credential that is refused.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from a2a_grpc.auth.principal import (
    ANONYMOUS,
    CredentialRejected,
    KeysUnknown,
    PeerAuthContext,
    Principal,
    Scheme,
)
from a2a_grpc.errors import AuthenticationError, Metadata, PermissionDeniedError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Needed:
    """One scheme of a requirement, with the scopes the requirement lists for it."""

    name: str
    scheme: Scheme
    scopes: frozenset[str]


Requirement = tuple[Needed, ...]


class _Refused:
    __slots__ = ()


REFUSED = _Refused()  # a scheme's outcome: a credential was presented and refused
_UNTRIED: Any = object()


class CardAuthenticator:
    """`requirements` in the card's order, each listing its schemes with the one whose principal the call
    takes first; `anonymous` when the card has an empty requirement."""

    def __init__(self, requirements: Sequence[Requirement], *, anonymous: bool = False) -> None:
        self._requirements = tuple(requirements)
        self._anonymous = anonymous
        self._schemes = {needed.name: needed.scheme for requirement in requirements for needed in requirement}
        only = self._requirements[0] if len(self._requirements) == 1 and not anonymous else ()
        self._only = only[0].scheme if len(only) == 1 and not only[0].scopes else None  # the common case
        alternatives = [" and ".join(f"{n.scheme.kind} (scheme {n.name})" for n in r) for r in self._requirements]
        if anonymous:
            alternatives.append("no credential")
        self._expected = "this agent requires authentication: " + ", or ".join(alternatives)
        self._expected_schemes = ",".join(self._schemes)

    async def authenticate(self, metadata: Metadata, peer: PeerAuthContext) -> Principal:
        """The caller's principal; AuthenticationError or PermissionDeniedError when it is not admitted."""
        try:
            return self._evaluate(metadata, peer)
        except KeysUnknown as unknown:  # a token names a key not fetched yet: fetch (rate-limited), then once more
            await unknown.refresh()
        try:
            return self._evaluate(metadata, peer)
        except KeysUnknown:
            raise self.unauthenticated() from None

    def unauthenticated(self) -> AuthenticationError:
        return AuthenticationError(self._expected, metadata={"schemes": self._expected_schemes})

    def _evaluate(self, metadata: Metadata, peer: PeerAuthContext) -> Principal:
        only = self._only
        if only is not None:
            principal = _attempt(only, "", metadata, peer)
            if isinstance(principal, Principal):
                return principal
            raise self.unauthenticated()
        outcomes: dict[str, Principal | _Refused | None] = {}
        pending: KeysUnknown | None = None
        lacking: Needed | None = None
        for requirement in self._requirements:
            chosen: Principal | None = None
            for needed in requirement:
                outcome = outcomes.get(needed.name, _UNTRIED)
                if outcome is _UNTRIED:
                    try:
                        outcome = _attempt(needed.scheme, needed.name, metadata, peer)
                    except KeysUnknown as unknown:
                        pending, outcome = unknown, None
                    outcomes[needed.name] = outcome
                if not isinstance(outcome, Principal):
                    break
                if needed.scopes and not needed.scopes <= outcome.scopes:
                    lacking = lacking or needed
                    break
                chosen = chosen or outcome
            else:
                if chosen is not None:
                    return chosen
        if lacking is not None:
            scopes = " ".join(sorted(lacking.scopes))
            raise PermissionDeniedError(
                f"the caller lacks a scope this agent requires: {scopes} (scheme {lacking.name})",
                metadata={"scheme": lacking.name, "scopes": scopes},
            )
        if pending is not None:
            raise pending
        if self._anonymous and self._nothing_refused(outcomes, metadata, peer):
            return ANONYMOUS
        raise self.unauthenticated()

    def _nothing_refused(
        self, outcomes: dict[str, Principal | _Refused | None], metadata: Metadata, peer: PeerAuthContext
    ) -> bool:
        """Whether no scheme refuses a credential the call presents (each tried once, if not tried yet)."""
        for name, scheme in self._schemes.items():
            outcome = outcomes[name] if name in outcomes else _attempt(scheme, name, metadata, peer)
            if outcome is REFUSED:
                return False
        return True


def _attempt(scheme: Scheme, name: str, metadata: Metadata, peer: PeerAuthContext) -> Principal | _Refused | None:
    try:
        return scheme.authenticate(metadata, peer)
    except CredentialRejected as refused:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("scheme %s refused the credential presented: %s", name or getattr(scheme, "name", ""), refused)
        return REFUSED
