"""Signing the agent cards the server serves (`--card-signing-key`).

Each card gets one signature (`AgentCard.signatures`): a JWS (RFC 7515) over the card's canonical bytes
(a2a_grpc.card.canonical), compact, with the payload left out. Its protected header names `alg`, `kid` (the
key's RFC 7638 thumbprint), `jku` (the JWKS the HTTP port serves, with the key in it) and `typ` `JOSE`. The
first key signs; every key is published, so the next key can sign after a restart while clients that cached
the JWKS still verify the cards the previous one signed.

Cards are signed once, at start-up, after the server has filled in its bound ports. A card file that is
signed already is served as it is: the server must not change it (`check_signed_as_served`), and it is not
signed again.
"""

from __future__ import annotations

from collections.abc import Sequence

from jwt import api_jws

from a2a_grpc.card.canonical import rfc8785_bytes
from a2a_grpc.card.model import CardError, load_card
from a2a_grpc.encoding import json_document
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.signing_keys import SigningKey, load_signing_keys

SIGNATURE_TYPE = "JOSE"


class CardSigner:
    """Signs cards with the first of `keys`; `keys` are what the JWKS publishes."""

    def __init__(self, keys: Sequence[SigningKey]) -> None:
        if not keys:
            raise ValueError("a card signer needs at least one key")
        self.keys = tuple(keys)

    @classmethod
    def from_pem_files(cls, paths: Sequence[str]) -> CardSigner:
        """PEM private keys: EC P-256, RSA of 2048 bits or more, or Ed25519 (ValueError naming the file)."""
        return cls(load_signing_keys(paths, "--card-signing-key"))

    def sign(self, card: a2a_pb2.AgentCard, jku: str | None) -> None:
        """Add this server's signature to `card`, unless it carries signatures already."""
        if card.signatures:
            return
        key = self.keys[0]
        header = {"alg": key.algorithm, "kid": key.kid, "typ": SIGNATURE_TYPE, **({"jku": jku} if jku else {})}
        token = api_jws.encode(rfc8785_bytes(card), key.private_key, algorithm=key.algorithm, headers=header)
        protected, _, signature = token.split(".")
        card.signatures.add(protected=protected, signature=signature)


def check_signed_as_served(path: str | None, served: a2a_pb2.AgentCard | None) -> None:
    """CardError when the card file at `path` is signed and the server changed it while completing it (the
    interfaces, extensions or security schemes it fills in): its signatures would no longer verify."""
    if path is None or served is None or not served.signatures:
        return
    as_signed = load_card(path)
    if as_signed == served:
        return
    signed, completed = json_document(as_signed), json_document(served)
    changed = sorted(key for key in signed.keys() | completed.keys() if signed.get(key) != completed.get(key))
    raise CardError(
        f"{path} is signed, but serving it would change {', '.join(changed)}: sign the card as the server "
        "completes it (`a2a-grpc card URL` prints it), or serve it unsigned with --card-signing-key"
    )
