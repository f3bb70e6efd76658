"""The `a2a-grpc` command line: `serve` (every flag also an environment variable, and a key of the config
file: a2a_grpc.config), `config check` and `config show`, and the client commands `send` and `card`
(a2a_grpc.cli_client)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Coroutine, Sequence
from typing import Any, NoReturn

import a2a_grpc.grpc_core_logs  # noqa: F401  (first: before anything imports grpc)
from a2a_grpc import setting_types
from a2a_grpc.auth import AuthSettings, JwtSettings
from a2a_grpc.card import CardError
from a2a_grpc.cli_client import add_client_parsers, run_client_command
from a2a_grpc.config import ConfigError, add_config_parser, resolve, run_config_command
from a2a_grpc.extensions import MAX_EXTENSION_PAYLOAD_BYTES
from a2a_grpc.interceptors.server.extensions import MAX_EXTENSIONS_PER_CALL
from a2a_grpc.interceptors.server.limits import MAX_AUTH_FAILURES_PER_SECOND
from a2a_grpc.push.service import PushSettings
from a2a_grpc.push.worker import DeliverySettings
from a2a_grpc.server import DEFAULT_STORE_URL, A2AServer, ServerSettings
from a2a_grpc.servicer import MAX_LIST_PAGE_BYTES
from a2a_grpc.store import StoreError
from a2a_grpc.tasks import (
    EVENT_RETENTION_SECONDS,
    LEASE_SECONDS,
    MAX_ARTIFACT_BYTES_PER_TASK,
    MAX_HISTORY_PER_TASK,
    MAX_PUSH_CONFIGS_PER_TASK,
    POLL_SECONDS,
    SUBSCRIBER_BUFFER_BYTES,
)
from a2a_grpc.telemetry import LOG_FORMATS, log_format, use_json_logs
from a2a_grpc.telemetry.tracing_setup import use_sdk_unless_configured
from a2a_grpc.telemetry.worker_metrics import WORKER_METRICS_DIR_ENV
from a2a_grpc.validation import MAX_PARTS
from a2a_grpc.workers import Supervisor, held_ports, stop_when_orphaned, unshared_store, worker_index

log = logging.getLogger("a2a_grpc.cli")  # not __name__: the workers run it as __main__


def _env(name: str, default: str | None) -> str | None:
    return os.environ.get(f"A2A_GRPC_{name}", default)


def _auth_token(text: str) -> str:
    """--auth-token's check, as the flag is parsed (and a config file read): TOKEN=PRINCIPAL items, comma-joined."""
    for item in text.split(","):
        token, sep, principal = item.strip().rpartition("=")
        if item.strip() and (not sep or not token or not principal):
            raise argparse.ArgumentTypeError("takes TOKEN=PRINCIPAL (the value given is not shown)")
    return text


def _parse_tokens(values: Sequence[str]) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            token, sep, principal = item.strip().rpartition("=")  # a token may end in base64 padding
            if item.strip():
                if not sep or not token or not principal:
                    raise SystemExit("--auth-token takes TOKEN=PRINCIPAL (the value given is not shown)")
                tokens[token] = principal
    return tokens


class _DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends each flag's default to its help, except for flags without one: their help says what none means."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default == []:
            return action.help
        return super()._get_help_string(action)


EPILOG = """examples:
  a2a-grpc serve --agent mypackage.shout:ShoutAgent   serve your agent, imported from this directory
  a2a-grpc send 127.0.0.1:50051 "hello"               send it a message (--stream for the events)
  a2a-grpc card http://127.0.0.1:8080                 print its agent card

`a2a-grpc COMMAND --help` lists a command's options."""


def add_serve_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the A2A gRPC server",
        description="Serve one agent over gRPC, and its agent card over HTTP. Every flag can also be set "
        "by the environment variable in brackets, and in a --config file by its name with - as _ "
        "(defaults < config file < environment < flags).",
        formatter_class=_DefaultsHelpFormatter,
    )
    add_serve_arguments(serve)


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """serve's flags (`a2a-grpc config show` takes them too): each one's default reads its environment variable,
    named in brackets at the end of its help; a2a_grpc.config finds the variable there."""
    serve.add_argument(
        "--config",
        type=setting_types.plain_text,
        metavar="FILE",
        default=_env("CONFIG", None),
        help="TOML file of settings, its keys these flags' names with - as _ (listen, http_listen, store, ...); "
        "the environment and the flags override it [A2A_GRPC_CONFIG] (default: none)",
    )
    serve.add_argument(
        "--listen",
        type=setting_types.listen_address,
        default=_env("LISTEN", "127.0.0.1:50051"),
        help="gRPC HOST:PORT [A2A_GRPC_LISTEN]",
    )
    serve.add_argument(
        "--http-listen",
        type=setting_types.optional_listen_address,
        default=_env("HTTP_LISTEN", "127.0.0.1:8080"),
        help="HOST:PORT for the HTTP agent card, '' for none [A2A_GRPC_HTTP_LISTEN]",
    )
    serve.add_argument(
        "--card",
        type=setting_types.plain_text,
        default=_env("CARD", None),
        help="ProtoJSON AgentCard file [A2A_GRPC_CARD] (default: the demo card)",
    )
    serve.add_argument(
        "--extended-card",
        type=setting_types.plain_text,
        default=_env("EXTENDED_CARD", None),
        help="the AgentCard file GetExtendedAgentCard returns [A2A_GRPC_EXTENDED_CARD] (default: none)",
    )
    serve.add_argument(
        "--card-signing-key",
        type=setting_types.plain_text,
        action="append",
        metavar="FILE",
        default=_list_env("CARD_SIGNING_KEY"),
        help="PEM private key (EC P-256, RSA of 2048 bits or more, or Ed25519) that signs the agent card and the "
        "extended card; repeat to publish the next key in the JWKS too, the first signs [A2A_GRPC_CARD_SIGNING_KEY] "
        "(default: none: the cards are not signed)",
    )
    serve.add_argument(
        "--store",
        type=setting_types.plain_text,
        default=_env("STORE", DEFAULT_STORE_URL),
        help="memory, sqlite:///PATH or postgresql://USER@HOST:PORT/DB [A2A_GRPC_STORE]",
    )
    serve.add_argument(
        "--agent",
        type=setting_types.plain_text,
        default=_env("AGENT", None),
        help="MODULE:ATTR of the agent [A2A_GRPC_AGENT] (default: a2a_grpc.agents.echo:EchoAgent)",
    )
    serve.add_argument(
        "--app-dir",
        type=setting_types.plain_text,
        default=_env("APP_DIR", "."),
        help="the directory --agent's MODULE is imported from, ahead of installed packages [A2A_GRPC_APP_DIR]",
    )
    serve.add_argument(
        "--grace",
        type=setting_types.grace_seconds,
        default=_env("GRACE", "10"),
        help="shutdown grace seconds [A2A_GRPC_GRACE]",
    )
    serve.add_argument(
        "--missing-version-means",
        choices=("0.3", "1.0"),
        default=_env("MISSING_VERSION_MEANS", "0.3"),
        help="how to read a call without a2a-version [A2A_GRPC_MISSING_VERSION_MEANS]",
    )
    serve.add_argument(
        "--auth-token",
        action="append",
        type=_auth_token,
        default=[v for v in [_env("AUTH_TOKENS", None)] if v],
        help="TOKEN=PRINCIPAL; repeat or comma-join; static bearer tokens, the card's HTTP bearer scheme "
        "(declared when the card lacks one) [A2A_GRPC_AUTH_TOKENS] (default: none)",
    )
    add_auth_arguments(serve)
    add_tls_arguments(serve)
    serve.add_argument(
        "--unary-echo",
        choices=("trailers", "headers"),
        default=_env("UNARY_ECHO", "trailers"),
        help="unary calls echo a2a-extensions in the trailers, or in headers and trailers "
        "(streams always do both) [A2A_GRPC_UNARY_ECHO]",
    )
    byte_limits = (
        (
            "max-list-page-bytes",
            MAX_LIST_PAGE_BYTES,
            "a ListTasks page ends early, with a next page token, past this many bytes",
        ),
        (
            "max-subscriber-buffer-bytes",
            SUBSCRIBER_BUFFER_BYTES,
            "a stream this far behind its task reads the task's event log until it has caught up",
        ),
        ("max-extension-payload-bytes", MAX_EXTENSION_PAYLOAD_BYTES, "a larger extension payload is INVALID_ARGUMENT"),
        (
            "max-artifact-bytes-per-task",
            MAX_ARTIFACT_BYTES_PER_TASK,
            "bytes a task's artifacts may take; the agent's publish past them fails (and, unhandled, the task)",
        ),
    )
    for flag, default, meaning in byte_limits:
        env = flag.upper().replace("-", "_")
        serve.add_argument(
            f"--{flag}",
            type=setting_types.byte_count,
            default=_env(env, str(default)),
            help=f"{meaning} [A2A_GRPC_{env}]",
        )
    serve.add_argument(
        "--max-requests-per-second",
        type=setting_types.rate,
        default=_env("MAX_REQUESTS_PER_SECOND", "0"),
        help="A2A calls per second per caller (its principal, or its address when anonymous), bursts up to one "
        "second's worth; more are RESOURCE_EXHAUSTED with a RetryInfo; 0 for no limit [A2A_GRPC_MAX_REQUESTS_PER_SECOND]",
    )
    serve.add_argument(
        "--max-auth-failures-per-second",
        type=setting_types.rate,
        default=_env("MAX_AUTH_FAILURES_PER_SECOND", f"{MAX_AUTH_FAILURES_PER_SECOND:g}"),
        help="failed authentications per second from one address (bursts up to one second's worth) before its "
        "next calls are RESOURCE_EXHAUSTED with a RetryInfo, unread; 0 for no limit "
        "[A2A_GRPC_MAX_AUTH_FAILURES_PER_SECOND]",
    )
    count_limits = (
        ("max-streams-per-caller", 100, "open streams per caller; one more is RESOURCE_EXHAUSTED with a RetryInfo"),
        ("max-streams", 10_000, "open streams in all; one more is RESOURCE_EXHAUSTED with a RetryInfo"),
        ("max-parts", MAX_PARTS, "parts of one message; more are INVALID_ARGUMENT"),
        ("max-history-per-task", MAX_HISTORY_PER_TASK, "messages kept in a task's history; older ones are dropped"),
        (
            "max-push-configs-per-task",
            MAX_PUSH_CONFIGS_PER_TASK,
            "push notification configs one task keeps; one more is RESOURCE_EXHAUSTED",
        ),
        (
            "max-extensions-per-call",
            MAX_EXTENSIONS_PER_CALL,
            "distinct a2a-extensions of one call; more are INVALID_ARGUMENT",
        ),
    )
    for flag, count, meaning in count_limits:
        env = flag.upper().replace("-", "_")
        serve.add_argument(
            f"--{flag}",
            type=setting_types.positive_count,
            default=_env(env, str(count)),
            help=f"{meaning} [A2A_GRPC_{env}]",
        )
    serve.add_argument(
        "--store-pool-size",
        type=setting_types.positive_count,
        default=_env("STORE_POOL_SIZE", "10"),
        help="connections to a postgresql:// store, per process [A2A_GRPC_STORE_POOL_SIZE]",
    )
    serve.add_argument(
        "--lease-seconds",
        type=setting_types.seconds,
        default=_env("LEASE_SECONDS", str(LEASE_SECONDS)),
        help="with a shared store: a replica silent this long has died, and the tasks it ran are FAILED "
        "[A2A_GRPC_LEASE_SECONDS]",
    )
    serve.add_argument(
        "--poll-interval",
        type=setting_types.seconds,
        default=_env("POLL_INTERVAL", str(POLL_SECONDS)),
        help="with a shared store: how often to poll for other replicas' events while notifications are down "
        "[A2A_GRPC_POLL_INTERVAL]",
    )
    serve.add_argument(
        "--event-retention",
        type=setting_types.duration,
        default=_env("EVENT_RETENTION", str(int(EVENT_RETENTION_SECONDS))),
        help="seconds a final task's events are kept for resumed streams, replicas and push delivery; then "
        "only the task is [A2A_GRPC_EVENT_RETENTION]",
    )
    add_push_arguments(serve)
    serve.add_argument(
        "--workers",
        type=setting_types.positive_count,
        default=_env("WORKERS", "1"),
        help="server processes sharing the ports, restarted when they die; more than 1 needs a postgresql:// "
        "store [A2A_GRPC_WORKERS]",
    )
    serve.add_argument(
        "--log-level",
        type=setting_types.log_level,
        default=_env("LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING or ERROR [A2A_GRPC_LOG_LEVEL]",
    )
    serve.add_argument(
        "--log-format",
        type=log_format,
        choices=LOG_FORMATS,
        default=_env("LOG_FORMAT", "text"),
        help="text lines, or json: one JSON object per line, for the access log and every other line "
        "[A2A_GRPC_LOG_FORMAT]",
    )
    serve.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        default=_env("ACCESS_LOG", "1") not in ("0", "false", "no", "off"),
        help="one line per A2A call (method, peer, principal, status, duration...) on the a2a_grpc.access logger "
        "[A2A_GRPC_ACCESS_LOG]",
    )
    serve.add_argument(
        "--v03",
        action=argparse.BooleanOptionalAction,
        default=_env("V03", "1") not in ("0", "false", "no", "off"),
        help="serve A2A 0.3 clients too: the a2a.v1.A2AService beside lf.a2a.v1.A2AService on the same port, and "
        "a card both read; --no-v03 answers 0.3 calls UNIMPLEMENTED [A2A_GRPC_V03]",
    )
    serve.add_argument(
        "--tracing",
        action=argparse.BooleanOptionalAction,
        default=_env("TRACING", "0") in ("1", "true", "yes", "on"),
        help="OpenTelemetry spans of every A2A call, agent run and store write, continuing the callers' W3C "
        "traceparent; needs a2a-grpc[otel], and exports as the OTEL_* environment says (OTEL_TRACES_EXPORTER: "
        "otlp, console or none) unless opentelemetry-instrument set a tracer provider [A2A_GRPC_TRACING]",
    )


def _leeway(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"expected a number of seconds from 0 to 3600, got {text!r}")
    return seconds


def add_auth_arguments(serve: argparse.ArgumentParser) -> None:
    """JWT access tokens and API keys (a2a_grpc.auth): each adds its scheme to the card when the card lacks one."""
    serve.add_argument(
        "--jwt-jwks-url",
        type=setting_types.plain_text,
        metavar="URL",
        default=_env("JWT_JWKS_URL", None),
        help="https URL of the JWKS that verifies JWT access tokens (the card's bearer JWT, OAuth 2.0 and OpenID "
        "Connect schemes); fetched with the system trust store plus SSL_CERT_FILE, again on an unknown kid "
        "[A2A_GRPC_JWT_JWKS_URL] (default: none)",
    )
    serve.add_argument(
        "--jwt-key",
        type=setting_types.plain_text,
        metavar="FILE",
        default=_env("JWT_KEY", None),
        help="instead of --jwt-jwks-url: a PEM public key (or certificate) or a JWKS file that verifies JWT access "
        "tokens [A2A_GRPC_JWT_KEY] (default: none)",
    )
    serve.add_argument(
        "--jwt-issuer",
        type=setting_types.plain_text,
        default=_env("JWT_ISSUER", None),
        help="the iss a JWT must carry; comma-join several [A2A_GRPC_JWT_ISSUER] (default: none; required with JWTs, "
        "except for a card's OpenID Connect or OAuth 2.0 scheme whose discovery document names it)",
    )
    serve.add_argument(
        "--jwt-audience",
        type=setting_types.plain_text,
        default=_env("JWT_AUDIENCE", None),
        help="an aud a JWT must carry; comma-join several [A2A_GRPC_JWT_AUDIENCE] (default: none; required with JWTs)",
    )
    serve.add_argument(
        "--jwt-leeway",
        type=_leeway,
        default=_env("JWT_LEEWAY", "60"),
        help="seconds of clock skew allowed on a JWT's exp and nbf [A2A_GRPC_JWT_LEEWAY]",
    )
    serve.add_argument(
        "--api-keys",
        type=setting_types.plain_text,
        metavar="FILE",
        default=_env("API_KEYS", None),
        help="API keys, one KEY=PRINCIPAL (or sha256:HEX=PRINCIPAL) a line; env:NAME reads them from the "
        "environment variable NAME; the card's API key scheme, header x-api-key unless the card names one "
        "[A2A_GRPC_API_KEYS] (default: none)",
    )


def auth_settings(args: argparse.Namespace) -> AuthSettings:
    jwt = None
    if args.jwt_jwks_url or args.jwt_key or args.jwt_issuer or args.jwt_audience:
        jwt = JwtSettings(
            jwks_url=args.jwt_jwks_url or None,
            key_path=args.jwt_key or None,
            issuers=_split([args.jwt_issuer or ""]),
            audiences=_split([args.jwt_audience or ""]),
            leeway_seconds=args.jwt_leeway,
        )
    return AuthSettings(jwt=jwt, api_keys=args.api_keys or None)


def add_tls_arguments(serve: argparse.ArgumentParser) -> None:
    """TLS on both ports (a2a_grpc.tls): the files are read again on SIGHUP."""
    serve.add_argument(
        "--tls-cert",
        type=setting_types.plain_text,
        metavar="FILE",
        default=_env("TLS_CERT", None),
        help="PEM certificate chain (leaf first) for TLS on the gRPC and HTTP ports, with --tls-key; read again "
        "on SIGHUP [A2A_GRPC_TLS_CERT] (default: none: plaintext, for loopback and service meshes)",
    )
    serve.add_argument(
        "--tls-key",
        type=setting_types.plain_text,
        metavar="FILE",
        default=_env("TLS_KEY", None),
        help="the unencrypted PEM private key of --tls-cert [A2A_GRPC_TLS_KEY] (default: none)",
    )
    serve.add_argument(
        "--tls-client-ca",
        type=setting_types.plain_text,
        metavar="FILE",
        default=_env("TLS_CLIENT_CA", None),
        help="PEM CA certificates: clients must present a certificate one of them signed, on both ports "
        "(mutual TLS) [A2A_GRPC_TLS_CLIENT_CA] (default: none: no client certificate asked for)",
    )


def add_push_arguments(serve: argparse.ArgumentParser) -> None:
    """How push notifications are delivered, for a card that declares pushNotifications."""
    serve.add_argument(
        "--push-allow",
        action="append",
        type=setting_types.host_or_network,
        default=_list_env("PUSH_ALLOW"),
        help="HOST or CIDR webhooks may reach although it is private, loopback or link-local; repeat or "
        "comma-join [A2A_GRPC_PUSH_ALLOW] (default: none: only public addresses)",
    )
    serve.add_argument(
        "--push-allow-http",
        action="store_true",
        default=_env("PUSH_ALLOW_HTTP", "") in ("1", "true", "yes"),
        help="webhooks may be plain http:// URLs [A2A_GRPC_PUSH_ALLOW_HTTP]",
    )
    serve.add_argument(
        "--push-signing-key",
        type=setting_types.plain_text,
        action="append",
        default=_list_env("PUSH_SIGNING_KEY"),
        help="PEM private key (RSA or EC P-256) that signs notifications; repeat to publish the next key too, "
        "the first signs [A2A_GRPC_PUSH_SIGNING_KEY] (default: none: notifications are not signed)",
    )
    serve.add_argument(
        "--push-status-only",
        action="store_true",
        default=_env("PUSH_STATUS_ONLY", "") in ("1", "true", "yes"),
        help="notify status changes only, not artifact updates [A2A_GRPC_PUSH_STATUS_ONLY]",
    )
    serve.add_argument(
        "--push-max-attempts",
        type=setting_types.positive_count,
        default=_env("PUSH_MAX_ATTEMPTS", str(DeliverySettings().max_attempts)),
        help="attempts at one notification before it is given up on [A2A_GRPC_PUSH_MAX_ATTEMPTS]",
    )
    serve.add_argument(
        "--push-max-age",
        type=setting_types.seconds,
        default=_env("PUSH_MAX_AGE", str(DeliverySettings().max_age_seconds)),
        help="seconds after its first attempt that a notification is given up on [A2A_GRPC_PUSH_MAX_AGE]",
    )
    serve.add_argument(
        "--push-timeout",
        type=setting_types.seconds,
        default=_env("PUSH_TIMEOUT", "10"),
        help="seconds one delivery attempt may take [A2A_GRPC_PUSH_TIMEOUT]",
    )


def _list_env(name: str) -> list[str]:
    value = _env(name, None)
    return [value] if value else []


def _split(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def push_settings(args: argparse.Namespace) -> PushSettings:
    delivery = DeliverySettings(
        status_only=args.push_status_only,
        max_attempts=args.push_max_attempts,
        max_age_seconds=args.push_max_age,
    )
    return PushSettings(
        allow=_split(args.push_allow),
        allow_http=args.push_allow_http,
        signing_keys=_split(args.push_signing_key),
        timeout_seconds=args.push_timeout,
        delivery=delivery,
    )


def serve(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """`a2a-grpc serve`, from its parsed `args` and the command line `argv` they were parsed from."""
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.log_format == "json":
        use_json_logs()
    worker = worker_index() if args.workers > 1 else None
    if args.workers > 1 and worker is None:
        return supervise(args, argv)
    if args.agent:
        if not os.path.isdir(args.app_dir):
            print(f"a2a-grpc: --app-dir {args.app_dir} is not a directory", file=sys.stderr)
            return 2
        sys.path.insert(0, os.path.abspath(args.app_dir))  # as `python -m` puts the working directory
    settings = ServerSettings(
        listen=args.listen,
        http_listen=args.http_listen,
        card_path=args.card,
        extended_card_path=args.extended_card,
        card_signing_keys=_split(args.card_signing_key),
        store_url=args.store,
        agent=args.agent,
        grace_seconds=args.grace,
        missing_version_means=args.missing_version_means,
        bearer_tokens=_parse_tokens(args.auth_token),
        auth=auth_settings(args),
        echo_unary_headers=args.unary_echo == "headers",
        max_list_page_bytes=args.max_list_page_bytes,
        max_subscriber_buffer_bytes=args.max_subscriber_buffer_bytes,
        max_extension_payload_bytes=args.max_extension_payload_bytes,
        max_requests_per_second=args.max_requests_per_second,
        max_auth_failures_per_second=args.max_auth_failures_per_second,
        max_streams_per_caller=args.max_streams_per_caller,
        max_streams=args.max_streams,
        max_parts=args.max_parts,
        max_extensions_per_call=args.max_extensions_per_call,
        max_history_per_task=args.max_history_per_task,
        max_artifact_bytes_per_task=args.max_artifact_bytes_per_task,
        max_push_configs_per_task=args.max_push_configs_per_task,
        store_pool_size=args.store_pool_size,
        lease_seconds=args.lease_seconds,
        poll_seconds=args.poll_interval,
        event_retention_seconds=args.event_retention,
        push=push_settings(args),
        worker_mode=worker is not None,
        worker_metrics=_worker_metrics(worker),
        access_log=args.access_log,
        serve_v03=args.v03,
        tracing=args.tracing,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_client_ca=args.tls_client_ca,
    )
    try:
        if settings.tracing:
            use_sdk_unless_configured()
        server = A2AServer(settings)
    except (CardError, ValueError, ImportError, AttributeError, OSError) as error:
        print(f"a2a-grpc: {error}", file=sys.stderr)
        return 2
    return run_async(_serve(server, f"{worker}/{args.workers}" if worker is not None else None))


def _worker_metrics(worker: int | None) -> tuple[int, str] | None:
    """In a worker: its index and the directory its parent made for the workers' metrics."""
    directory = os.environ.get(WORKER_METRICS_DIR_ENV)
    return (worker, directory) if worker is not None and directory else None


def supervise(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """The parent of `--workers N`: runs `argv` again N times, on the same concrete ports."""
    store = unshared_store(args.store)
    if store is not None:
        print(
            f"a2a-grpc: --workers {args.workers} needs a store all processes share (postgresql://...), not {store}",
            file=sys.stderr,
        )
        return 2
    try:
        with held_ports(args.listen, args.http_listen) as port_flags:
            command = [sys.executable, "-m", "a2a_grpc.cli", *argv, *port_flags]
            return run_async(Supervisor(command, args.workers, args.grace).run())
    except OSError as error:
        print(f"a2a-grpc: {error}", file=sys.stderr)
        return 1


async def _serve(server: A2AServer, worker: str | None) -> int:
    """Serve until SIGTERM or SIGINT, reading the TLS files again on SIGHUP; `worker` ("INDEX/N") is set in a
    worker of `--workers N`."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, server.reload_certificates)
    if worker is not None:
        stop_when_orphaned(stop)
    try:
        await server.start()
        if worker is not None:
            log.info("worker %s (pid %d) serving", worker, os.getpid())
        try:
            await stop.wait()
        finally:
            await server.stop()
    except (OSError, StoreError) as error:
        print(f"a2a-grpc: {error}", file=sys.stderr)
        return 1
    return 0


def run_async(main: Coroutine[Any, Any, int]) -> int:
    """Run a coroutine on uvloop when it is installed, else on the default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return int(uvloop.run(main))


class _OneLineErrors(argparse.ArgumentParser):
    """Says what is wrong with the command line in one `a2a-grpc:` line (exit status 2), not with its usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"a2a-grpc: {message} (`{self.prog} --help` lists the options)\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser: argparse.ArgumentParser = _OneLineErrors(
        prog="a2a-grpc",
        description="A gRPC-first A2A v1.0 agent server and client.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    add_serve_parser(commands)
    add_client_parsers(commands)
    show_parser = add_config_parser(commands, add_serve_arguments, _DefaultsHelpFormatter)
    argv = sys.argv[1:] if argv is None else list(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # told with the command's usage, not the top-level one
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "serve":
        try:  # the config file under the environment and the flags
            args = resolve(parser, commands.choices["serve"], argv).args
        except ConfigError as error:
            print(f"a2a-grpc: {error}", file=sys.stderr)
            return 2
        return serve(args, argv)
    if args.command == "config":
        return run_config_command(args, parser, argv, commands.choices["serve"], show_parser)
    if args.command in ("send", "card"):
        try:
            return run_async(run_client_command(args))
        except BrokenPipeError:  # the reader went away (`| head`): what it wanted was printed
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            return 0
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
