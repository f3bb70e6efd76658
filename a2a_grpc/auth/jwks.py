"""Public keys that verify JWTs: a JSON Web Key Set fetched over HTTPS and kept current, or a static key file.

Only asymmetric keys are kept (RSA, EC, OKP): a shared-secret (`oct`) key in a key set is ignored, so no
token can be verified with an HMAC algorithm, and each key admits only the algorithms of its type (the one
its `alg` names, when it names one), which is what refuses `alg: none` and the key-confusion trick of an
HS256 token "signed" with the public key. An RSA key under 2048 bits (the signers' floor) verifies nothing.

A fetched key set is fetched at start-up, again every `refresh_seconds` in the background (so a key its
issuer withdrew stops verifying), and again when a token names a kid it lacks: at most once per
`min_refetch_seconds`, behind one lock, so a flood of made-up kids costs one fetch per interval and the
per-call path stays a dictionary lookup. HTTPS only, with the system's trust store, which the environment's
SSL_CERT_FILE (and SSL_CERT_DIR) extends; no redirects; a timeout; at most MAX_JWKS_BYTES. A document that is not
a key set (not JSON, nested past the parser's stack, no `keys` list) is a failed fetch: the keys before are kept.

A key set may instead be discovered (DiscoveredJwks): the discovery document at a URL the card names (an OpenID
Connect discovery document, or RFC 8414 OAuth 2.0 authorization server metadata: the same two fields) is fetched
the same way at start-up, and names the key set's URL (https) and the issuer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from yarl import URL

from a2a_grpc.auth.principal import CredentialRejected, KeysUnknown
from a2a_grpc.signing_keys import MIN_RSA_BITS

log = logging.getLogger(__name__)

MAX_JWKS_BYTES = 64 * 1024
JWKS_TIMEOUT_SECONDS = 10.0
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHMS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}
EC_CURVES = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521", "secp256k1": "secp256k1"}
OKP_ALGORITHMS = frozenset({"EdDSA"})
PRIVATE_KEYS = (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)


class JwksError(ValueError):
    """A key set that could not be fetched or read; the message names no secret."""


class DiscoveryError(OSError):
    """A discovery document that could not be fetched or used: the server does not start."""


@dataclass(frozen=True, slots=True)
class VerificationKey:
    key: Any  # a cryptography public key
    algorithms: frozenset[str]  # the JWS algorithms it may verify


class KeySet(Protocol):
    """Where a JWT's key comes from. `generation` changes whenever a key is withdrawn or replaced, so what was
    verified with the keys of an older generation is verified again."""

    generation: int

    def key(self, kid: str | None) -> VerificationKey:
        """The key for `kid` (a token without a kid: the only key, if there is one); CredentialRejected when
        there is none, KeysUnknown when fetching the keys again might find it."""
        ...


def algorithms_of(public_key: Any) -> frozenset[str]:
    """The JWS algorithms a public key of this type may verify (empty: a key type signatures are not verified
    with, or a key too weak to trust: `weakness`)."""
    if isinstance(public_key, rsa.RSAPublicKey):
        return RSA_ALGORITHMS if public_key.key_size >= MIN_RSA_BITS else frozenset()
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        curve = EC_CURVES.get(public_key.curve.name)
        return frozenset({EC_ALGORITHMS[curve]}) if curve else frozenset()
    if isinstance(public_key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return OKP_ALGORITHMS
    return frozenset()


def weakness(public_key: Any) -> str | None:
    """Why a key of a usable type is too weak to verify anything (None: it is not)."""
    if isinstance(public_key, rsa.RSAPublicKey) and public_key.key_size < MIN_RSA_BITS:
        return f"an RSA key of {public_key.key_size} bits, under the {MIN_RSA_BITS} required"
    return None


def verification_key(jwk: Mapping[str, Any]) -> VerificationKey | None:
    """The key a JWK describes, None when it is not an asymmetric signature key this server uses. A key too weak
    to trust (`weakness`) is kept with no algorithm, so that what it signed is refused saying why."""
    if jwk.get("kty") not in ("RSA", "EC", "OKP") or jwk.get("use", "sig") != "sig":
        return None
    named = jwk.get("alg")
    if named is not None and not isinstance(named, str):
        return None
    try:
        public_key = jwt.PyJWK(dict(jwk)).key
    except (jwt.PyJWTError, ValueError, TypeError, KeyError):
        return None
    if isinstance(public_key, PRIVATE_KEYS):
        public_key = public_key.public_key()  # a JWK with private parts: only its public half is used
    allowed = algorithms_of(public_key)
    if named is not None:
        allowed = allowed & {named}
    return VerificationKey(public_key, allowed) if allowed or weakness(public_key) else None


def keys_by_kid(document: Any) -> dict[str, tuple[VerificationKey, str]]:
    """A JWKS document's usable keys by kid ("" for a key without one), each with its JWK as canonical JSON;
    JwksError when the document is not a key set (an object whose `keys` is a list)."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksError("not a key set (an object whose keys member is a list)")
    keys: dict[str, tuple[VerificationKey, str]] = {}
    for jwk in document["keys"]:
        if not isinstance(jwk, dict) or not isinstance(jwk.get("kid", ""), str):
            continue
        key = verification_key(jwk)
        if key is not None:
            keys[jwk.get("kid", "")] = (key, json.dumps(jwk, sort_keys=True))
    return keys


def usable(keys: Mapping[str, tuple[VerificationKey, str]]) -> bool:
    """Whether any of `keys` verifies anything (a key too weak to trust does not)."""
    return any(key.algorithms for key, _ in keys.values())


def parse_json(data: bytes | bytearray) -> Any:
    """The JSON document `data` holds; JwksError when it is not UTF-8 JSON, or nests past the interpreter's
    stack (which json reports as RecursionError)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # ValueError: JSONDecodeError and UnicodeDecodeError
        raise JwksError("not JSON") from None


def _pick(keys: Mapping[str, tuple[VerificationKey, str]], kid: str | None) -> VerificationKey | None:
    if kid is None:  # a token without a kid: only an unambiguous key set verifies it
        return next(iter(keys.values()))[0] if len(keys) == 1 else None
    found = keys.get(kid)
    return found[0] if found is not None else None


class KeyFileError(JwksError):
    """A key file that cannot be used: what its bytes are not (`read_keys`), and which file (`read_key_file`)."""


def read_keys(data: bytes) -> tuple[dict[str, tuple[VerificationKey, str]], bool]:
    """The keys of a key file's bytes, and whether they stand for any kid: a JWKS document's keys by kid (each
    with its JWK), or the one key of a PEM public key or certificate (under "", with no JWK)."""
    if data.lstrip().startswith(b"{"):
        try:
            keys = keys_by_kid(parse_json(data))
        except JwksError as error:
            raise KeyFileError(f"starts as a JWKS but is {error}") from None
        if not usable(keys):
            weak_keys = "; ".join(f"{kid or '(no kid)'}: {weakness(key.key)}" for kid, (key, _) in keys.items())
            raise KeyFileError("holds no RSA, EC or OKP signature key" + (f" ({weak_keys})" if weak_keys else ""))
        return keys, False
    try:
        if b"-----BEGIN CERTIFICATE-----" in data:
            public_key: Any = x509.load_pem_x509_certificate(data).public_key()
        else:
            public_key = load_pem_public_key(data)
    except ValueError:
        raise KeyFileError("is neither a JWKS nor a PEM public key or certificate") from None
    weak = weakness(public_key)
    if weak is not None:
        raise KeyFileError(f"holds {weak}")
    allowed = algorithms_of(public_key)
    if not allowed:
        raise KeyFileError("is not an RSA, EC or Ed25519/Ed448 public key")
    return {"": (VerificationKey(public_key, allowed), "")}, True


def read_key_file(path: str | Path, name: str) -> tuple[dict[str, tuple[VerificationKey, str]], bool]:
    """`read_keys` of the file at `path`: KeyFileError, naming the file as `name` calls it, when it cannot be read
    or holds no usable key. Every key file of the server and the client is read here."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise KeyFileError(f"cannot read {name} {path}: {error.strerror}") from None
    try:
        return read_keys(data)
    except KeyFileError as error:
        raise KeyFileError(f"{name} {path} {error}") from None


class StaticKeys:
    """Keys read once from a file: a PEM public key (or certificate), or a JWKS document."""

    generation = 0

    def __init__(self, keys: Mapping[str, tuple[VerificationKey, str]], *, any_kid: bool) -> None:
        self._keys = dict(keys)
        self._any_kid = any_kid  # a PEM key has no kid: it verifies whatever kid a token names

    @classmethod
    def from_file(cls, path: str) -> StaticKeys:
        """The keys of the file at `path` (KeyFileError, a ValueError naming --jwt-key and the file)."""
        keys, any_kid = read_key_file(path, "--jwt-key")
        return cls(keys, any_kid=any_kid)

    def key(self, kid: str | None) -> VerificationKey:
        found = _pick(self._keys, None if self._any_kid else kid)
        if found is None:
            raise CredentialRejected("unknown signing key")
        return found


def trust_store() -> ssl.SSLContext:
    """The system's trust store, extended by the CA file SSL_CERT_FILE names (and the directory SSL_CERT_DIR
    names), the variables OpenSSL reads. OpenSSL reads SSL_CERT_FILE instead of the system's bundle: that
    bundle is loaded too, so the variable adds CAs rather than replacing them."""
    context = ssl.create_default_context()
    if os.environ.get("SSL_CERT_FILE"):
        system_bundle = ssl.get_default_verify_paths().openssl_cafile
        if system_bundle and os.path.isfile(system_bundle):
            context.load_verify_locations(cafile=system_bundle)
    return context


def is_https(url: str) -> bool:
    try:
        return URL(url).scheme == "https"
    except ValueError:  # yarl's refusal of a malformed host or port
        return False


def printable_url(url: str) -> str:
    """`url` fit for a log line: no user, password, query or fragment."""
    try:
        parsed = URL(url)
    except ValueError:  # yarl's refusal of a malformed host or port
        return "(a malformed URL)"
    return str(parsed.with_user(None).with_query(None).with_fragment(None))


async def fetch_jwks(url: str, context: ssl.SSLContext | None, timeout_seconds: float | None) -> Any:
    """The JSON document at `url` (JwksError when it cannot be had); `timeout_seconds` None: the caller's own
    deadline (asyncio.timeout) bounds the fetch."""
    timeout = aiohttp.ClientTimeout(total=timeout_seconds)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(ssl=context or False)) as session,
            session.get(url, allow_redirects=False) as response,
        ):
            if response.status != 200:
                raise JwksError(f"HTTP {response.status}")
            content = bytearray()
            async for chunk in response.content.iter_chunked(16384):
                content += chunk
                if len(content) > MAX_JWKS_BYTES:
                    raise JwksError(f"larger than {MAX_JWKS_BYTES} bytes")
    except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as error:
        raise JwksError(str(error) or type(error).__name__) from None
    return parse_json(content)


class JwksCache:
    """A key set fetched from `url` and kept current (see the module). `start` fetches it and begins the
    background refresh, `close` ends it; without `start` it is fetched when first needed."""

    def __init__(
        self,
        url: str,
        *,
        timeout_seconds: float = JWKS_TIMEOUT_SECONDS,
        refresh_seconds: float = 300.0,
        min_refetch_seconds: float = 5.0,
        allow_http: bool = False,  # for tests of the push receiver only
    ) -> None:
        scheme = URL(url).scheme
        if scheme != "https" and not (allow_http and scheme == "http"):
            raise JwksError("a JWKS URL must be https")
        self.url = url
        self.generation = 0
        self._context = trust_store() if scheme == "https" else None
        self._timeout = timeout_seconds
        self._refresh_seconds = refresh_seconds
        self._min_refetch = min_refetch_seconds
        self._keys: dict[str, tuple[VerificationKey, str]] = {}
        self._attempted_at = -float("inf")
        self._lock = asyncio.Lock()
        self._refresher: asyncio.Task[None] | None = None

    def key(self, kid: str | None) -> VerificationKey:
        found = _pick(self._keys, kid)
        if found is not None:
            return found
        if kid is not None and (self._lock.locked() or self.may_refetch()):  # a fetch under way: wait for it
            raise KeysUnknown(self.refresh)
        raise CredentialRejected("unknown signing key")

    def may_refetch(self) -> bool:
        return time.monotonic() - self._attempted_at >= self._min_refetch

    async def refresh(self) -> bool:
        """Fetch the key set again, unless it was fetched (or tried) within `min_refetch_seconds`: another
        call waiting for the same kid then finds the keys that fetch brought. False when this fetch failed."""
        async with self._lock:
            if not self.may_refetch():
                return True
            return await self._fetch()

    async def _fetch(self) -> bool:
        self._attempted_at = time.monotonic()
        try:
            document = await fetch_jwks(self.url, self._context, self._timeout)
            keys = keys_by_kid(document)
        except JwksError as error:  # the keys fetched before are kept
            log.warning("could not fetch the JWKS from %s: %s", printable_url(self.url), error)
            return False
        if any(keys.get(kid, (None, ""))[1] != jwk for kid, (_, jwk) in self._keys.items()):
            self.generation += 1  # a key was withdrawn or replaced
        self._keys = keys
        if not usable(keys):
            log.warning("the JWKS at %s holds no usable signature key", printable_url(self.url))
        return True

    async def start(self) -> None:
        """Fetch the keys (a failure is logged: tokens are refused until a fetch succeeds) and keep them current."""
        async with self._lock:
            await self._fetch()
        if self._refresher is None:
            self._refresher = asyncio.create_task(self._keep_current(), name="a2a-grpc-jwks-refresh")

    async def _keep_current(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_seconds)
            async with self._lock:
                await self._fetch()

    async def close(self) -> None:
        refresher, self._refresher = self._refresher, None
        if refresher is not None:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher


@dataclass(frozen=True)
class OpenIdProvider:
    issuer: str
    jwks_uri: str


async def discover(url: str, context: ssl.SSLContext, timeout_seconds: float) -> OpenIdProvider:
    """The issuer and the key set's URL (`issuer`, `jwks_uri`) that the discovery document at `url` names;
    DiscoveryError, naming `url`, when it cannot be had or does not name both (the key set's over https)."""
    where = f"discovery document {printable_url(url)}"
    try:
        document = await fetch_jwks(url, context, timeout_seconds)
    except JwksError as error:
        raise DiscoveryError(f"cannot fetch the {where}: {error}") from None
    if not isinstance(document, dict):
        raise DiscoveryError(f"the {where} is not a JSON object")
    issuer, jwks_uri = document.get("issuer"), document.get("jwks_uri")
    if not isinstance(issuer, str) or not issuer:
        raise DiscoveryError(f"the {where} names no issuer")
    if not isinstance(jwks_uri, str) or not is_https(jwks_uri):
        raise DiscoveryError(f"the {where} names no https jwks_uri")
    return OpenIdProvider(issuer, jwks_uri)


class DiscoveredJwks(JwksCache):
    """The key set of the provider whose discovery document is at `discovery_url`: `discover` reads the document,
    which names the key set's `url`; then it is a JwksCache like any other (`start` after `discover`)."""

    def __init__(
        self, discovery_url: str, *, timeout_seconds: float, refresh_seconds: float, min_refetch_seconds: float
    ) -> None:
        if not is_https(discovery_url):
            raise JwksError(f"the discovery URL {printable_url(discovery_url)} is not https")
        super().__init__(
            discovery_url,  # until `discover` has read the key set's
            timeout_seconds=timeout_seconds,
            refresh_seconds=refresh_seconds,
            min_refetch_seconds=min_refetch_seconds,
        )
        self.discovery_url = discovery_url

    async def discover(self) -> OpenIdProvider:
        """Read the discovery document (DiscoveryError when it cannot be used) and take its key set's URL."""
        assert self._context is not None  # an https URL has one
        provider = await discover(self.discovery_url, self._context, self._timeout)
        self.url = provider.jwks_uri
        jwks = printable_url(provider.jwks_uri)
        log.info("discovery document %s: issuer %s, JWKS %s", printable_url(self.discovery_url), provider.issuer, jwks)
        return provider
