"""The server's authentication settings, and the verifiers they configure (loaded once, at start-up)."""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a_grpc.auth.api_keys import HashedSecrets, load_api_keys
from a2a_grpc.auth.jwks import JWKS_TIMEOUT_SECONDS, DiscoveredJwks, JwksCache, JwksError, KeySet, StaticKeys
from a2a_grpc.auth.tokens import DEFAULT_LEEWAY_SECONDS, JwtVerifier


@dataclass(frozen=True)
class JwtSettings:
    """JWT access tokens: the keys from `jwks_url` (HTTPS) or `key_path` (a PEM public key or a JWKS file),
    and the `iss` and `aud` a token must carry (one of each list). Without `jwks_url` and `key_path`, the
    card's OpenID Connect and OAuth 2.0 schemes' discovery documents name the keys and the issuer (`issuers`,
    when set, replaces the latter)."""

    jwks_url: str | None = None
    key_path: str | None = None
    issuers: tuple[str, ...] = ()
    audiences: tuple[str, ...] = ()
    leeway_seconds: float = DEFAULT_LEEWAY_SECONDS  # clock skew allowed on exp and nbf
    jwks_timeout_seconds: float = JWKS_TIMEOUT_SECONDS
    jwks_refresh_seconds: float = 300.0  # the key set is fetched again this often
    jwks_min_refetch_seconds: float = 5.0  # an unknown kid fetches it again at most this often


@dataclass(frozen=True)
class AuthSettings:
    """What a card's schemes are verified with, besides the static bearer tokens (ServerSettings.bearer_tokens)
    and the client certificates of a TLS listener with a client CA (ServerSettings.tls_client_ca).

    `api_keys` is a file of `KEY=PRINCIPAL` lines or `env:NAME` (a2a_grpc.auth.api_keys)."""

    jwt: JwtSettings | None = None
    api_keys: str | None = None


@dataclass(frozen=True)
class Verifiers:
    """The credentials the server can check, one entry per kind (None: not configured)."""

    tokens: dict[str, str] | None = None  # static bearer token -> principal
    api_keys: HashedSecrets | None = None
    jwt: JwtVerifier | None = None
    mtls: bool = False
    discovery: JwtSettings | None = None  # JWT settings without keys: a scheme's discovery document names them
    # the verifier of each discovery URL a scheme of the card names, with its key set
    discovered: dict[str, tuple[JwtVerifier, DiscoveredJwks]] = field(default_factory=dict)

    @classmethod
    def configure(
        cls, settings: AuthSettings, bearer_tokens: dict[str, str] | None = None, *, mtls: bool = False
    ) -> Verifiers:
        """Load what `settings` names (`mtls`: the TLS listener verifies client certificates); ValueError
        (naming no secret) when something cannot be used."""
        jwt = settings.jwt
        keyless = jwt is not None and jwt.jwks_url is None and jwt.key_path is None
        return cls(
            tokens=dict(bearer_tokens) if bearer_tokens else None,
            api_keys=load_api_keys(settings.api_keys) if settings.api_keys else None,
            jwt=_jwt_verifier(jwt) if jwt is not None and not keyless else None,
            mtls=mtls,
            discovery=jwt if keyless else None,
        )

    def discovered_verifier(self, discovery_url: str) -> JwtVerifier:
        """The verifier of the tokens of the provider whose discovery document is at `discovery_url`
        (`start` reads it); JwksError when the URL is not https. Needs `discovery` settings with audiences."""
        if discovery_url not in self.discovered:
            assert self.discovery is not None
            settings = self.discovery
            keys = DiscoveredJwks(
                discovery_url,
                timeout_seconds=settings.jwks_timeout_seconds,
                refresh_seconds=settings.jwks_refresh_seconds,
                min_refetch_seconds=settings.jwks_min_refetch_seconds,
            )
            verifier = JwtVerifier(
                keys, issuers=settings.issuers, audiences=settings.audiences, leeway_seconds=settings.leeway_seconds
            )
            self.discovered[discovery_url] = (verifier, keys)
        return self.discovered[discovery_url][0]

    async def start(self) -> None:
        """Read the discovery documents (DiscoveryError, an OSError naming the URL, when one
        cannot be used: nothing is left running), then fetch the key sets and keep them current."""
        for verifier, discovered in self.discovered.values():
            provider = await discovered.discover()
            verifier.issuers = verifier.issuers or (provider.issuer,)
        for keys in self._key_sets():
            await keys.start()

    async def close(self) -> None:
        for keys in self._key_sets():
            await keys.close()

    def _key_sets(self) -> list[JwksCache]:
        fetched: list[JwksCache] = [keys for _, keys in self.discovered.values()]
        if self.jwt is not None and isinstance(self.jwt.keys, JwksCache):
            fetched.append(self.jwt.keys)
        return fetched


def _jwt_verifier(settings: JwtSettings) -> JwtVerifier:
    if settings.jwks_url is not None and settings.key_path is not None:
        raise ValueError("JWT verification takes one of --jwt-jwks-url and --jwt-key")
    if not settings.issuers or not settings.audiences:
        raise ValueError("JWT verification needs an issuer (--jwt-issuer) and an audience (--jwt-audience)")
    keys: KeySet
    if settings.jwks_url is not None:
        try:
            keys = JwksCache(
                settings.jwks_url,
                timeout_seconds=settings.jwks_timeout_seconds,
                refresh_seconds=settings.jwks_refresh_seconds,
                min_refetch_seconds=settings.jwks_min_refetch_seconds,
            )
        except JwksError as error:
            raise ValueError(f"--jwt-jwks-url: {error}") from None
    else:
        assert settings.key_path is not None
        keys = StaticKeys.from_file(settings.key_path)
    return JwtVerifier(
        keys, issuers=settings.issuers, audiences=settings.audiences, leeway_seconds=settings.leeway_seconds
    )
