"""Checking an agent card's signatures, as the client resolves the card (`CardVerifier`).

A policy says what a card must show: `require` (an unsigned card, or one no signature of which verifies, is a
CardSignatureError naming why), `if-signed` (only a signed card is checked) or `off` (nothing is checked). One
valid signature is enough, as in the A2A SDKs.

A signature's key is looked for, by its `kid`, among the keys the caller trusts: key files (a JWKS document, or
a PEM public key or certificate, which stands for any kid), the key sets at the JWKS URLs the caller lists, and
the key set at the signature's `jku` when the caller lists that URL or, by default only when the caller gives no
keys at all, when it is the card's own origin (`same_origin_jku`); a `jku` anywhere else is not followed. Keys the
caller gives pin the signer: a card that the keys of its own origin verify proves no more than that origin does. Refused whatever the key: `alg` none, HMAC algorithms (a shared secret shows
nothing of who issued a card), an algorithm its key's type cannot use, an RSA key under 2048 bits, and any `crit`
header (this verifier knows no JWS extension). The signed bytes may be either canonical form of
a2a_grpc.card.canonical. A card of more than MAX_CARD_SIGNATURES signatures is refused unread, and one
verification, all its key fetches together, has one time budget (CardTimeoutError past it).
"""

from __future__ import annotations

import asyncio
import binascii
import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt import api_jws
from jwt.utils import base64url_decode
from yarl import URL

from a2a_grpc.auth import jwks
from a2a_grpc.auth.jwks import (
    EC_ALGORITHMS,
    EC_CURVES,
    JWKS_TIMEOUT_SECONDS,
    OKP_ALGORITHMS,
    RSA_ALGORITHMS,
    JwksError,
    KeyFileError,
    VerificationKey,
    fetch_jwks,
    keys_by_kid,
    printable_url,
    trust_store,
    weakness,
)
from a2a_grpc.card.canonical import CANONICAL_FORMS, RFC_8785, CanonicalizationError
from a2a_grpc.card.errors import AgentCardError, CardTimeoutError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.signing_keys import b64url
from a2a_grpc.tls import ClientTLS

__all__ = [
    "MAX_CARD_SIGNATURES",
    "SIGNATURE_ALGORITHMS",
    "CardPolicy",
    "CardSignatureError",
    "CardVerdict",
    "CardVerifier",
    "InvalidCardSignatureError",
    "UnsignedCardError",
    "UntrustedCardKeyError",
    "read_key_file",
]

SIGNATURE_ALGORITHMS = RSA_ALGORITHMS | frozenset(EC_ALGORITHMS.values()) | OKP_ALGORITHMS
Keys = Mapping[str, VerificationKey]  # by kid; "" for a PEM key, which stands for any kid
# A card is signed once, or a few times while its keys rotate: more signatures are refused unread, so a card cannot
# make its reader fetch keys for each of hundreds of them (at most one fetch per signature's jku, besides the
# listed URLs), nor grow the refusal past a few kilobytes.
MAX_CARD_SIGNATURES = 8
MAX_REASON_CHARS = 300  # of one signature's refusal: a kid or a jku comes from the card


class CardPolicy(StrEnum):
    OFF = "off"
    IF_SIGNED = "if-signed"
    REQUIRE = "require"


class CardSignatureError(AgentCardError):
    """A card the verification policy refuses; the message says why, signature by signature."""


class UnsignedCardError(CardSignatureError):
    """The policy requires a signature and the card has none."""


class UntrustedCardKeyError(CardSignatureError):
    """No signature's key is among the keys the caller trusts (or could be fetched from where it trusts)."""


class InvalidCardSignatureError(CardSignatureError):
    """A signature does not match the card, or is refused (its algorithm, its key's type, a `crit` header)."""


@dataclass(frozen=True)
class CardVerdict:
    """The signature that verified: its algorithm, its key's kid and where the key came from."""

    algorithm: str
    kid: str | None
    key_source: str
    canonical_form: str

    def describe(self) -> str:
        form = "" if self.canonical_form == RFC_8785 else f", over the {self.canonical_form} form"
        return (
            f"signature verified: {self.algorithm}, key {_bounded(self.kid or '(no kid)')} from {self.key_source}{form}"
        )


class _Refused(Exception):
    def __init__(self, reason: str, *, untrusted: bool = False) -> None:
        super().__init__(reason)
        self.untrusted = untrusted


class CardVerifier:
    """Checks cards by `policy` against the keys in `key_files` and at `jwks_urls` (see the module); one
    verification, its key fetches included, takes at most `timeout_seconds`."""

    def __init__(
        self,
        policy: CardPolicy | str = CardPolicy.REQUIRE,
        *,
        key_files: Sequence[str | Path] = (),
        jwks_urls: Sequence[str] = (),
        same_origin_jku: bool | None = None,  # None: only when neither key_files nor jwks_urls are given
        tls: ClientTLS | None = None,
        timeout_seconds: float = JWKS_TIMEOUT_SECONDS,
    ) -> None:
        self.policy = CardPolicy(policy)
        self._file_keys = [(f"file {path}", read_key_file(path)) for path in key_files]
        self._jwks_urls = tuple(jwks_urls)
        self._same_origin_jku = not key_files and not jwks_urls if same_origin_jku is None else same_origin_jku
        self._tls = tls
        self._timeout = timeout_seconds

    @classmethod
    def trusting(cls, sources: Sequence[str], tls: ClientTLS | None = None) -> CardVerifier:
        """A `require` verifier trusting each source: an http(s) URL of a JWKS, or a key file."""
        urls = [source for source in sources if source.startswith(("http://", "https://"))]
        files = [source for source in sources if source not in urls]
        return cls(CardPolicy.REQUIRE, key_files=files, jwks_urls=urls, tls=tls)

    async def verify(self, card: a2a_pb2.AgentCard, card_url: str) -> CardVerdict | None:
        """The signature that verifies (None: the policy did not ask for one); CardSignatureError otherwise, and
        CardTimeoutError when its keys were not fetched within the verifier's time (a caller's deadline, such as
        `fetch_agent_card`'s, bounds it too)."""
        if self.policy is CardPolicy.OFF or (self.policy is CardPolicy.IF_SIGNED and not card.signatures):
            return None
        where = f"the agent card at {_bounded(printable_url(card_url))}" if card_url else "the agent card"
        if not card.signatures:
            raise UnsignedCardError(f"{where} is not signed")
        if len(card.signatures) > MAX_CARD_SIGNATURES:
            raise InvalidCardSignatureError(
                f"{where} carries {len(card.signatures)} signatures: at most {MAX_CARD_SIGNATURES} are checked"
            )
        try:
            async with asyncio.timeout(self._timeout):
                return await self._verify(card, card_url, where)
        except TimeoutError:
            raise CardTimeoutError(f"{where} was not verified in time: its keys were still being fetched") from None

    async def _verify(self, card: a2a_pb2.AgentCard, card_url: str, where: str) -> CardVerdict:
        try:
            payloads = {name: form(card) for name, form in CANONICAL_FORMS.items()}
        except CanonicalizationError as error:
            raise InvalidCardSignatureError(f"{where} cannot be verified: {error}") from None
        fetched: dict[str, Keys | str] = {}
        refusals: list[_Refused] = []
        for signature in card.signatures:
            try:
                return await self._check(signature, payloads, card_url, fetched)
            except _Refused as refused:
                refusals.append(refused)
        shown = [_bounded(str(r)) for r in refusals]
        reasons = [shown[0]] if len(shown) == 1 else [f"signature {i}: {r}" for i, r in enumerate(shown, 1)]
        kind = UntrustedCardKeyError if all(r.untrusted for r in refusals) else InvalidCardSignatureError
        raise kind(f"no signature of {where} verifies: {'; '.join(reasons)}")

    async def _check(
        self,
        signature: a2a_pb2.AgentCardSignature,
        payloads: Mapping[str, bytes],
        card_url: str,
        fetched: dict[str, Keys | str],
    ) -> CardVerdict:
        header = protected_header(signature.protected)
        algorithm, kid = header.get("alg"), header.get("kid")
        key, source = await self._key(kid, header.get("jku"), card_url, fetched)
        weak = weakness(key.key)
        if weak is not None:
            raise _Refused(f"key {kid} is {weak}")
        if algorithm not in key.algorithms:
            raise _Refused(f"alg {algorithm} cannot be used with key {kid}, a {_key_type(key)} key")
        for form, payload in payloads.items():
            token = f"{signature.protected}.{b64url(payload)}.{signature.signature}"
            try:
                api_jws.decode_complete(token, key.key, algorithms=[algorithm])
            except jwt.InvalidSignatureError:
                continue
            except jwt.PyJWTError as error:
                raise _Refused(f"malformed signature: {error}") from None
            return CardVerdict(algorithm, kid, source, form)
        raise _Refused(f"the signature by key {kid} does not match the card: the card changed after it was signed")

    async def _key(
        self, kid: str | None, jku: str | None, card_url: str, fetched: dict[str, Keys | str]
    ) -> tuple[VerificationKey, str]:
        """The trusted key named `kid`, and where it was found."""
        sources: list[tuple[str, Keys | str]] = list(self._file_keys)
        jku_note = ""
        if jku is not None:
            if jku in self._jwks_urls or (self._same_origin_jku and _same_origin(jku, card_url)):
                sources.append((f"jku {printable_url(jku)}", await self._fetch(jku, fetched)))
            else:
                jku_note = f" (its jku {printable_url(jku)} is not followed: {self._jku_rule})"
        for url in self._jwks_urls:
            sources.append((f"JWKS {printable_url(url)}", await self._fetch(url, fetched)))
        problems = []
        for label, keys in sources:
            if isinstance(keys, str):
                problems.append(f"{label}: {keys}")
                continue
            found = keys.get("") or (keys.get(kid) if kid is not None else _only(keys))
            if found is not None:
                return found, label
        detail = "; ".join(problems) if problems else "" if sources else "no keys are trusted: give key files or URLs"
        raise _Refused(f"key {kid} is not a trusted key{jku_note}" + (f" ({detail})" if detail else ""), untrusted=True)

    @property
    def _jku_rule(self) -> str:
        return "neither listed nor the card's origin" if self._same_origin_jku else "not a listed JWKS URL"

    async def _fetch(self, url: str, fetched: dict[str, Keys | str]) -> Keys | str:
        """The keys at `url`, or why there are none; fetched once per verification, whose deadline bounds it."""
        if url not in fetched:
            try:
                document = await fetch_jwks(url, self._ssl_context(url), None)
                fetched[url] = {kid: key for kid, (key, _) in keys_by_kid(document).items() if kid}
            except JwksError as error:
                fetched[url] = f"cannot fetch the JWKS: {error}"
        return fetched[url]

    def _ssl_context(self, url: str) -> ssl.SSLContext | None:
        if not url.startswith("https://"):
            return None
        return self._tls.ssl_context() if self._tls is not None else trust_store()


def protected_header(protected: str) -> dict[str, Any]:
    """A signature's protected header, refused when the algorithm, the kid, the jku or a `crit` cannot be used."""
    try:
        header = json.loads(base64url_decode(protected.encode("ascii")))
    except (binascii.Error, UnicodeError, ValueError, RecursionError):  # RecursionError: JSON nested too deep
        raise _Refused("its protected header is not base64url JSON") from None
    if not isinstance(header, dict):
        raise _Refused("its protected header is not a JSON object")
    algorithm = header.get("alg")
    if not isinstance(algorithm, str) or algorithm.lower() == "none":
        raise _Refused("alg none: an unsigned JWS is refused")
    if algorithm.upper().startswith("HS"):
        raise _Refused(f"alg {algorithm} is refused: an HMAC's shared secret shows nothing of who issued the card")
    if algorithm not in SIGNATURE_ALGORITHMS:
        raise _Refused(f"alg {algorithm} is not a signature algorithm this verifier knows")
    if "crit" in header:
        raise _Refused(f"crit {header['crit']!r} names JWS extensions this verifier does not know")
    for name in ("kid", "jku"):
        if not isinstance(header.get(name, ""), str):
            raise _Refused(f"its {name} is not a string")
    return header


def read_key_file(path: str | Path) -> Keys:
    """The keys in a JWKS file, or the one key of a PEM public key or certificate (standing for any kid);
    KeyFileError, a ValueError naming the file, when it cannot be used."""
    found, any_kid = jwks.read_key_file(path, "the key file")
    keys = {kid: key for kid, (key, _) in found.items() if kid or any_kid}
    if not keys:
        raise KeyFileError(f"the key file {path} holds no RSA, EC or OKP signature key with a kid")
    return keys


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 3] + "..."


def _only(keys: Keys) -> VerificationKey | None:
    """A signature without a kid is checked against a key set of one key only."""
    return next(iter(keys.values())) if len(keys) == 1 else None


def _same_origin(url: str, card_url: str) -> bool:
    origin = _origin(url)
    return origin is not None and origin == _origin(card_url)


def _origin(url: str) -> tuple[str, str, int | None] | None:
    try:
        parsed = URL(url)
    except ValueError:
        return None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return None
    return parsed.scheme, parsed.host.lower(), parsed.port


def _key_type(key: VerificationKey) -> str:
    public = key.key
    if isinstance(public, rsa.RSAPublicKey):
        return "RSA"
    if isinstance(public, ec.EllipticCurvePublicKey):
        return f"EC {EC_CURVES.get(public.curve.name, public.curve.name)}"
    return "Edwards-curve"
