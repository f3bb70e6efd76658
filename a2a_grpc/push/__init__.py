"""Push notifications: the SSRF guard, one delivery attempt, signing, and verification for receivers."""

from a2a_grpc.push.guard import AddressPolicy, GuardedResolver, PushTargetRefused
from a2a_grpc.push.receiver import NotificationRejected, NotificationVerifier
from a2a_grpc.push.sender import (
    CONTENT_TYPE,
    SIGNATURE_HEADER,
    TOKEN_HEADERS,
    Attempt,
    Outcome,
    PushSender,
    backoff,
    safe_host,
)
from a2a_grpc.push.signing import PushSigner
from a2a_grpc.signing_keys import jwk_thumbprint

__all__ = [
    "CONTENT_TYPE",
    "SIGNATURE_HEADER",
    "TOKEN_HEADERS",
    "AddressPolicy",
    "Attempt",
    "GuardedResolver",
    "NotificationRejected",
    "NotificationVerifier",
    "Outcome",
    "PushSender",
    "PushSigner",
    "PushTargetRefused",
    "backoff",
    "jwk_thumbprint",
    "safe_host",
]
