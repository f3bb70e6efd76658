"""What the client's card resolution (a2a_grpc.card.resolution) and verification (a2a_grpc.card.verification)
raise: an AgentCardError, of a kind that says which step failed."""

from __future__ import annotations


class AgentCardError(Exception):
    """The agent card could not be fetched, parsed, or has no gRPC interface (or, when checked, its signature
    does not verify: a2a_grpc.card.verification.CardSignatureError)."""


class CardFetchError(AgentCardError):
    """The card could not be had: the connection failed, or the server answered with an error status."""


class CardTooLargeError(CardFetchError):
    """The card's body is larger than the client reads (`max_bytes`)."""


class CardFormatError(AgentCardError):
    """The body is not an lf.a2a.v1.AgentCard in UTF-8 ProtoJSON."""


class CardTimeoutError(AgentCardError, TimeoutError):
    """The card was not fetched (and, when asked, verified, its keys fetched) within the caller's time."""
