"""The card's `securitySchemes` and `securityRequirements`, made to match what the server enforces.

At start-up, every scheme configured by a setting that the card does not declare is added to it, with a
requirement of its own (an alternative): `--auth-token` as an HTTP bearer scheme `bearer`, `--jwt-*` as an
HTTP bearer scheme with bearerFormat JWT `jwt`, `--api-keys` as an API key scheme `apiKey` in the header
`x-api-key`. A TLS client CA adds the mutual TLS scheme `mtls` to every requirement instead (or as the one
requirement of a card without any): the handshake demands the certificate on every connection anyway, and
an alternative would make the card's other requirements optional. Then each requirement must name declared
schemes the server can verify, scopes only for token schemes, and a card that declares an extended agent
card must require authentication. Whatever does not hold is a CardError naming the scheme and the setting
it needs, and the server does not start.

Which verifier checks a declared scheme:
  httpAuthSecurityScheme, scheme Bearer, bearerFormat JWT      JWT access tokens (--jwt-*)
  oauth2SecurityScheme, openIdConnectSecurityScheme            JWT access tokens (--jwt-*)
  httpAuthSecurityScheme, scheme Bearer, other bearerFormat    the static tokens (--auth-token)
  apiKeySecurityScheme, location header                        the API keys (--api-keys), in header `name`
  mtlsSecurityScheme                                           the TLS client certificate
Without --jwt-jwks-url and --jwt-key, the JWTs of an openIdConnectSecurityScheme (or of an oauth2SecurityScheme
with an oauth2MetadataUrl, RFC 8414) are verified with the keys and the issuer that its URL's document names (read
at start-up), and the audience of --jwt-audience.
"""

from __future__ import annotations

from a2a_grpc.auth.api_keys import ApiKeyScheme
from a2a_grpc.auth.bearer import StaticBearerScheme
from a2a_grpc.auth.jwks import JwksError, printable_url
from a2a_grpc.auth.mtls import MutualTlsScheme
from a2a_grpc.auth.principal import Scheme
from a2a_grpc.auth.requirements import CardAuthenticator, Needed, Requirement
from a2a_grpc.auth.settings import Verifiers
from a2a_grpc.auth.tokens import JwtScheme, JwtVerifier
from a2a_grpc.card.model import CardError
from a2a_grpc.generated import a2a_pb2

TOKEN, JWT, API_KEY, MTLS = "bearer token", "JWT", "API key", "mutual TLS"
# The setting each kind needs, as a refusal names it.
NEEDS = {
    TOKEN: "--auth-token",
    JWT: "--jwt-jwks-url or --jwt-key (with --jwt-issuer and --jwt-audience), or an OpenID Connect scheme's "
    "openIdConnectUrl or an OAuth 2.0 scheme's oauth2MetadataUrl, with --jwt-audience",
    API_KEY: "--api-keys",
    MTLS: "a TLS listener with a client CA (--tls-client-ca)",
}
# A requirement's principal is its first scheme's in this order: a token names a user, a certificate a workload.
IDENTITY_ORDER = {JWT: 0, API_KEY: 1, TOKEN: 2, MTLS: 3}
DEFAULT_API_KEY_HEADER = "x-api-key"


def kind_of(scheme: a2a_pb2.SecurityScheme) -> str | None:
    """The kind of credential a declared scheme takes; None when this server cannot verify that kind."""
    which = scheme.WhichOneof("scheme")
    if which == "http_auth_security_scheme":
        http = scheme.http_auth_security_scheme
        if http.scheme.lower() != "bearer":
            return None  # Basic, Digest...
        return JWT if http.bearer_format.lower() == "jwt" else TOKEN
    if which in ("oauth2_security_scheme", "open_id_connect_security_scheme"):
        return JWT
    if which == "api_key_security_scheme":
        return API_KEY if scheme.api_key_security_scheme.location.lower() == "header" else None
    if which == "mtls_security_scheme":
        return MTLS
    return None


def _configured_kinds(verifiers: Verifiers) -> list[str]:
    jwt = verifiers.jwt or verifiers.discovery
    present = {TOKEN: verifiers.tokens, JWT: jwt, API_KEY: verifiers.api_keys, MTLS: verifiers.mtls}
    return [kind for kind, verifier in present.items() if verifier]


def _new_scheme(kind: str) -> tuple[str, a2a_pb2.SecurityScheme]:
    if kind == TOKEN:
        http = a2a_pb2.HTTPAuthSecurityScheme(scheme="Bearer", description="A bearer token the operator issued")
        return "bearer", a2a_pb2.SecurityScheme(http_auth_security_scheme=http)
    if kind == JWT:
        http = a2a_pb2.HTTPAuthSecurityScheme(scheme="Bearer", bearer_format="JWT", description="A JWT access token")
        return "jwt", a2a_pb2.SecurityScheme(http_auth_security_scheme=http)
    if kind == API_KEY:
        key = a2a_pb2.APIKeySecurityScheme(location="header", name=DEFAULT_API_KEY_HEADER, description="An API key")
        return "apiKey", a2a_pb2.SecurityScheme(api_key_security_scheme=key)
    mtls = a2a_pb2.MutualTlsSecurityScheme(description="A client certificate from the server's client CA")
    return "mtls", a2a_pb2.SecurityScheme(mtls_security_scheme=mtls)


def declare_configured(card: a2a_pb2.AgentCard, verifiers: Verifiers) -> None:
    """Add to `card` each configured kind it does not declare, and a requirement for each configured kind that
    no requirement names."""
    for kind in _configured_kinds(verifiers):
        declared = [name for name, scheme in card.security_schemes.items() if kind_of(scheme) == kind]
        if not declared:
            name, scheme = _new_scheme(kind)
            while name in card.security_schemes:
                name += "_"
            card.security_schemes[name].CopyFrom(scheme)
            declared = [name]
        named = {name for requirement in card.security_requirements for name in requirement.schemes}
        if named.intersection(declared):
            continue
        if kind == MTLS and card.security_requirements:
            # The handshake already demands the certificate on every connection: it joins every requirement
            # rather than becoming an alternative to them (which would make the others optional).
            for requirement in card.security_requirements:
                requirement.schemes[declared[0]].SetInParent()
        else:
            card.security_requirements.add().schemes[declared[0]].SetInParent()


def _scheme(name: str, declared: a2a_pb2.SecurityScheme, verifiers: Verifiers) -> Scheme:
    kind = kind_of(declared)
    if kind is None:
        raise CardError(f"security scheme {name!r} is of a kind this server cannot verify")
    jwt = _jwt_verifier(name, declared, verifiers) if kind == JWT else None
    if jwt is not None:
        return JwtScheme(name, jwt)
    if kind == TOKEN and verifiers.tokens:
        return StaticBearerScheme(name, verifiers.tokens)
    if kind == API_KEY and verifiers.api_keys is not None:
        header = declared.api_key_security_scheme.name
        return ApiKeyScheme(name, header, verifiers.api_keys)
    if kind == MTLS and verifiers.mtls:
        return MutualTlsScheme(name)
    raise CardError(
        f"security scheme {name!r} ({kind}) is required by the card but not configured: it needs {NEEDS[kind]}"
    )


def _discovery(declared: a2a_pb2.SecurityScheme) -> tuple[str, str]:
    """The kind of provider a token scheme names and the URL of its discovery document ("" when none)."""
    which = declared.WhichOneof("scheme")
    if which == "oauth2_security_scheme":
        return "OAuth 2.0", declared.oauth2_security_scheme.oauth2_metadata_url
    if which == "open_id_connect_security_scheme":
        return "OpenID Connect", declared.open_id_connect_security_scheme.open_id_connect_url
    return "", ""


def _jwt_verifier(name: str, declared: a2a_pb2.SecurityScheme, verifiers: Verifiers) -> JwtVerifier | None:
    """The --jwt-* verifier, else that of the provider the scheme's discovery URL names (None: neither)."""
    provider, discovery_url = _discovery(declared)
    if verifiers.jwt is not None or not discovery_url:
        return verifiers.jwt
    if verifiers.discovery is None or not verifiers.discovery.audiences:
        raise CardError(
            f"security scheme {name!r} ({provider}, {printable_url(discovery_url)}) needs --jwt-audience: "
            "the discovery document names the keys and the issuer, not the audience a token must name"
        )
    try:
        return verifiers.discovered_verifier(discovery_url)
    except JwksError as error:
        raise CardError(f"security scheme {name!r}: {error}") from None


def card_authenticator(card: a2a_pb2.AgentCard, verifiers: Verifiers) -> CardAuthenticator | None:
    """What enforces `card`'s requirements (after `declare_configured`); None for an open card (no requirement).
    CardError when the card requires what the server cannot verify."""
    schemes: dict[str, Scheme] = {}
    requirements: list[Requirement] = []
    anonymous = False
    for index, requirement in enumerate(card.security_requirements):
        needs: list[tuple[int, Needed]] = []
        for name, scopes in requirement.schemes.items():
            if name not in card.security_schemes:
                raise CardError(f"securityRequirements[{index}] names {name!r}, which securitySchemes does not declare")
            if name not in schemes:
                schemes[name] = _scheme(name, card.security_schemes[name], verifiers)
            scheme = schemes[name]
            if scopes.list and not scheme.carries_scopes:
                raise CardError(
                    f"securityRequirements[{index}] lists scopes for {name!r}, whose credential carries none"
                )
            kind = kind_of(card.security_schemes[name])
            needs.append((IDENTITY_ORDER.get(kind or "", 9), Needed(name, scheme, frozenset(scopes.list))))
        if needs:
            requirements.append(tuple(needed for _, needed in sorted(needs, key=lambda item: (item[0], item[1].name))))
        else:
            anonymous = True
    if not requirements:
        return None
    return CardAuthenticator(requirements, anonymous=anonymous)


def secure_cards(
    card: a2a_pb2.AgentCard, extended_card: a2a_pb2.AgentCard | None, verifiers: Verifiers
) -> CardAuthenticator | None:
    """Declare the configured schemes in both cards, check them, and return what enforces the public card's
    requirements (None: an open server). The extended card declares the same security as the public one (the
    server enforces one policy): a file that declares other schemes or requirements is refused."""
    declare_configured(card, verifiers)
    if extended_card is not None:
        if not extended_card.security_schemes and not extended_card.security_requirements:
            extended_card.security_schemes.MergeFrom(card.security_schemes)
            extended_card.security_requirements.extend(card.security_requirements)
        else:
            declare_configured(extended_card, verifiers)
            if dict(extended_card.security_schemes) != dict(card.security_schemes) or list(
                extended_card.security_requirements
            ) != list(card.security_requirements):
                raise CardError(
                    "the extended card declares other security than the public card; the server enforces one"
                )
    authenticator = card_authenticator(card, verifiers)
    if card.capabilities.extended_agent_card and authenticator is None:
        raise CardError(
            "capabilities.extendedAgentCard needs a security requirement (the extended card is only for "
            "authenticated callers): configure a scheme (--auth-token, --api-keys, --jwt-...) or declare one"
        )
    return authenticator
