"""The settings of what `a2a-grpc serve` serves, and to whom: the ports, the card, the agent, authentication and
TLS."""

from __future__ import annotations

from a2a_grpc import setting_types
from a2a_grpc.settings import defaults
from a2a_grpc.settings.setting import Kind, Setting

SERVING = "Serving"
AUTHENTICATION = "Authentication"
TLS = "TLS"

SERVING_SETTINGS = (
    Setting(
        "config",
        help="TOML file of settings, its keys these flags' names with - as _ (listen, http_listen, store, ...); "
        "the environment and the flags override it",
        doc="a TOML file of settings: see [Config file](#config-file)",
        metavar="FILE",
        in_file=False,
    ),
    Setting(
        "listen",
        field="listen",
        default_value=defaults.LISTEN,
        convert=setting_types.listen_address,
        help="gRPC HOST:PORT",
        doc="gRPC address (`HOST:PORT`; port 0 picks a free one)",
    ),
    Setting(
        "http_listen",
        field="http_listen",
        default_value=defaults.HTTP_LISTEN,
        convert=setting_types.optional_listen_address,
        help="HOST:PORT for the HTTP agent card, '' for none",
        doc="agent card over HTTP; empty for none",
    ),
    Setting(
        "bindings",
        field="bindings",
        default_value=defaults.BINDINGS,
        convert=setting_types.bindings,
        help="comma list of the A2A bindings served: grpc (always), jsonrpc and http+json (on the HTTP port)",
        doc="the A2A bindings served and listed in the card: `grpc` (always), `jsonrpc` and `http+json` on the "
        "`--http-listen` port: see [Bindings](bindings.md)",
    ),
    Setting(
        "card",
        field="card_path",
        help="ProtoJSON AgentCard file",
        doc="a ProtoJSON `lf.a2a.v1.AgentCard`; a missing gRPC interface is filled from `--listen`",
        unset="the card built from the agent's attributes (the demo card for the bundled agents)",
    ),
    Setting(
        "extended_card",
        field="extended_card_path",
        help="the AgentCard file GetExtendedAgentCard returns",
        doc="the card `GetExtendedAgentCard` returns to authenticated callers",
    ),
    Setting(
        "card_signing_key",
        kind=Kind.LIST,
        metavar="FILE",
        help="PEM private key (EC P-256, RSA of 2048 bits or more, or Ed25519) that signs the agent card and the "
        "extended card; repeat to publish the next key in the JWKS too, the first signs",
        doc="PEM private key (EC P-256, RSA of 2048 bits or more, or Ed25519) that signs the card and the extended "
        "card; repeat to publish the next key in `/.well-known/jwks.json` too (the first signs): see "
        "[Signed agent cards](security.md#signed-agent-cards)",
        unset="none: the cards are not signed",
    ),
    Setting(
        "agent",
        field="agent",
        help="MODULE:ATTR of the agent",
        doc="`MODULE:ATTR`",
        unset="the echo agent, a2a_grpc.agents.echo:EchoAgent",
    ),
    Setting(
        "interceptor",
        kind=Kind.LIST,
        metavar="MODULE:ATTR",
        help="a grpc.aio.ServerInterceptor of yours (a class or factory called with no arguments, or an instance), "
        "run on every admitted A2A call around the servicer; repeat or comma-join, the first outermost",
        doc="`MODULE:ATTR` of a `grpc.aio.ServerInterceptor` (a class or factory called with no arguments, or an "
        "instance); repeat or comma-join, the first outermost. It runs on every A2A call that authentication, the "
        "limits and the version and extension checks admitted, around the servicer: see "
        "[Your own interceptors](operations.md#your-own-interceptors)",
        unset="none",
    ),
    Setting(
        "app_dir",
        default_value=defaults.APP_DIR,
        help="the directory --agent's and --interceptor's MODULEs are imported from, ahead of installed packages",
        doc="the directory the modules of `--agent` and `--interceptor` are imported from, ahead of installed packages",
    ),
    Setting(
        "grace",
        field="grace_seconds",
        default_value=defaults.GRACE_SECONDS,
        convert=setting_types.grace_seconds,
        help="shutdown grace seconds",
        doc="seconds in-flight calls get to finish on SIGTERM/SIGINT",
    ),
    Setting(
        "enforce_input_modes",
        field="enforce_input_modes",
        default_value=defaults.ENFORCE_INPUT_MODES,
        kind=Kind.ON_OFF,
        help="refuse a message part whose media_type no input mode of the card (its defaultInputModes or a "
        "skill's inputModes; */* and image/* honoured) accepts, INVALID_ARGUMENT CONTENT_TYPE_NOT_SUPPORTED",
        doc="refuse a message part whose `media_type` no input mode of the card accepts (`defaultInputModes` or "
        "any skill's `inputModes`; `*/*`, `image/*` and parameters honoured) with `ContentTypeNotSupportedError`; "
        "off by default: see [Input modes](#input-modes)",
    ),
    Setting(
        "missing_version_means",
        field="missing_version_means",
        default_value=defaults.MISSING_VERSION_MEANS,
        convert=None,
        choices=("0.3", "1.0"),
        help="how to read a call without a2a-version",
        doc="a call without `a2a-version` is 0.3 (refused) per the spec; `1.0` accepts it",
    ),
    Setting(
        "unary_echo",
        default_value=defaults.UNARY_ECHO,
        convert=None,
        choices=("trailers", "headers"),
        help="unary calls echo a2a-extensions in the trailers, or in headers and trailers (streams always do both)",
        doc="where unary calls echo `a2a-extensions`: `trailers`, or `headers` for headers and trailers (streams "
        "always do both)",
    ),
    Setting(
        "v03",
        field="serve_v03",
        default_value=defaults.SERVE_V03,
        kind=Kind.ON_OFF,
        help="serve A2A 0.3 clients too: the a2a.v1.A2AService beside lf.a2a.v1.A2AService on the same port, and "
        "a 0.3 interface in the card; --no-v03 answers 0.3 calls UNIMPLEMENTED",
        doc="serve [A2A 0.3 clients](v03.md) too: `a2a.v1.A2AService` beside `lf.a2a.v1.A2AService`, and a 0.3 "
        "GRPC interface in the card; off, 0.3 calls get UNIMPLEMENTED naming the 1.0 service",
    ),
    Setting(
        "v03_card",
        field="v03_card",
        default_value=defaults.V03_CARD,
        kind=Kind.FLAG,
        help="merge 0.3's card fields (url, preferredTransport, protocolVersion, additionalInterfaces, ...) into "
        "the card served over HTTP, for 0.3 clients that resolve it; the card is then no longer a pure 1.0 one",
        doc="merge 0.3's card fields (`url`, `preferredTransport`, `protocolVersion`, `additionalInterfaces`, ...) "
        "into the card served over HTTP, for [0.3 clients that resolve the card](v03.md); off, the "
        "card is the pure 1.0 `AgentCard` the spec's schema allows",
    ),
)

AUTHENTICATION_SETTINGS = (
    Setting(
        "auth_token",
        kind=Kind.LIST,
        convert=setting_types.token_principals,
        env_name="A2A_GRPC_AUTH_TOKENS",
        secret=True,
        help="TOKEN=PRINCIPAL; repeat or comma-join; static bearer tokens, the card's HTTP bearer scheme "
        "(declared when the card lacks one)",
        doc="`TOKEN=PRINCIPAL` (repeat or comma-join): static bearer tokens, `authorization: Bearer TOKEN`; the "
        "card's `bearer` scheme: see [Authentication](security.md#authentication)",
    ),
    Setting(
        "jwt_jwks_url",
        metavar="URL",
        help="https URL of the JWKS that verifies JWT access tokens (the card's bearer JWT, OAuth 2.0 and OpenID "
        "Connect schemes); fetched with the system trust store plus SSL_CERT_FILE, again on an unknown kid",
        doc="`https://` URL of the JWKS that verifies JWT access tokens (`authorization: Bearer <JWT>`; the "
        "card's `jwt` scheme, and its OAuth 2.0 and OpenID Connect schemes)",
    ),
    Setting(
        "jwt_key",
        metavar="FILE",
        help="instead of --jwt-jwks-url: a PEM public key (or certificate) or a JWKS file that verifies JWT access "
        "tokens",
        doc="instead of `--jwt-jwks-url`: a PEM public key (or certificate), or a JWKS file",
    ),
    Setting(
        "jwt_issuer",
        help="the iss a JWT must carry; comma-join several; required with JWTs, except for a card's OpenID Connect "
        "or OAuth 2.0 scheme whose discovery document names it",
        doc="the `iss` a JWT must carry (comma-join several); required with JWTs, unless the card's OpenID Connect "
        "(or OAuth 2.0 metadata) scheme discovers it: see [Authentication](security.md#authentication)",
    ),
    Setting(
        "jwt_audience",
        help="an aud a JWT must carry; comma-join several; required with JWTs",
        doc="an `aud` a JWT must carry (comma-join several); required with JWTs",
    ),
    Setting(
        "jwt_leeway",
        default_value=defaults.JWT_LEEWAY_SECONDS,
        convert=setting_types.leeway_seconds,
        help="seconds of clock skew allowed on a JWT's exp and nbf",
        doc="seconds of clock skew allowed on a JWT's `exp` and `nbf`",
    ),
    Setting(
        "api_keys",
        metavar="FILE",
        help="API keys, one KEY=PRINCIPAL (or sha256:HEX=PRINCIPAL) a line; env:NAME reads them from the "
        "environment variable NAME; the card's API key scheme, header x-api-key unless the card names one",
        doc="a file of API keys, one `KEY=PRINCIPAL` or `sha256:HEX=PRINCIPAL` a line, or `env:NAME` for the same "
        "lines in the environment variable `NAME`; the card's `apiKey` scheme (header `x-api-key`)",
    ),
)

TLS_SETTINGS = (
    Setting(
        "tls_cert",
        field="tls_cert",
        metavar="FILE",
        help="PEM certificate chain (leaf first) for TLS on the gRPC and HTTP ports, with --tls-key; read again "
        "on SIGHUP",
        doc="PEM certificate chain, leaf first: TLS on the gRPC and the HTTP port, with `--tls-key`; read again on "
        "SIGHUP: see [TLS](security.md#tls)",
        unset="none: plaintext, for loopback and service meshes",
    ),
    Setting(
        "tls_key",
        field="tls_key",
        metavar="FILE",
        help="the unencrypted PEM private key of --tls-cert",
        doc="the unencrypted PEM private key of `--tls-cert`",
    ),
    Setting(
        "tls_client_ca",
        field="tls_client_ca",
        metavar="FILE",
        help="PEM CA certificates: clients must present a certificate one of them signed, on both ports (mutual TLS)",
        doc="PEM CA certificates: mutual TLS, a client must present a certificate one of them signed, on both ports",
        unset="none: no client certificate asked for",
    ),
)

SERVING_SECTIONS = {SERVING: SERVING_SETTINGS, AUTHENTICATION: AUTHENTICATION_SETTINGS, TLS: TLS_SETTINGS}
