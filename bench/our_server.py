"""Runs our A2AServer for the bench: `python -m bench.our_server --store memory --agent echo [--no-extensions]`.

Listens on a free loopback port, prints READY_PREFIX + port, serves until SIGTERM. Runs on uvloop when
it is installed, like `a2a-grpc serve`. With `--workers N` (a postgresql:// store) it is the parent of N
worker processes sharing one port, supervised by the same code as `a2a-grpc serve --workers N`
(a2a_grpc.workers); each worker prints the ready line once it serves. Its card (the demo card for echo, else
the one built from the bench agent) declares pushNotifications; `--push-allow 127.0.0.1 --push-allow-http` lets it notify the bench's loopback receiver.

`--telemetry` (the telemetry.* cases): `off` turns the access log, the metrics and tracing off; `on` writes the
access log as production does (INFO, JSON lines through a real handler: a FileHandler on --access-log-file)
and counts the metrics; `tracing` adds a span per call, exported nowhere (OTEL_TRACES_EXPORTER=none). Without
it (`serve`) the server runs as `a2a-grpc serve` runs by default: its logging set up as serve sets it up (INFO,
text lines, on stderr, which the bench sends to a file) and ServerSettings' defaults (the access log on).

`--http` (the send.http.* cases): the HTTP port (JSON-RPC and HTTP+JSON) on a free loopback port too; the ready
line names it instead of the gRPC port.

`--jwt-key FILE --jwt-issuer ISS --jwt-audience AUD` (auth.send.jwt): every call needs a JWT that key verifies,
as `a2a-grpc serve` with the same flags; `--tls-cert FILE --tls-key FILE` (auth.send.tls): the port speaks TLS.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable

from a2a_grpc.agent import AgentExecutor
from a2a_grpc.agents.echo import EchoAgent
from a2a_grpc.auth import AuthSettings, JwtSettings
from a2a_grpc.cli import run_async
from a2a_grpc.push.service import PushSettings
from a2a_grpc.server import A2AServer, ServerSettings
from a2a_grpc.settings.flags import add_serve_arguments
from a2a_grpc.telemetry import ACCESS_LOGGER, JsonFormatter, configure_logs
from a2a_grpc.telemetry.tracing_setup import use_sdk_unless_configured
from a2a_grpc.workers import Supervisor, held_ports, stop_when_orphaned, worker_index
from bench.agents import ChunkAgent, RequiredExtensionEchoAgent, TickAgent
from bench.protocol import serve_until_signalled

AGENTS: dict[str, Callable[[], AgentExecutor]] = {
    "echo": EchoAgent,
    "echo-ext": RequiredExtensionEchoAgent,
    "chunks": ChunkAgent,
    "ticks": TickAgent,
}
GRACE_SECONDS = 1.0
TELEMETRY = ("serve", "off", "on", "tracing")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--store", default="memory", help="store URL: memory, sqlite:///PATH or postgresql://...")
    parser.add_argument("--listen", default="127.0.0.1:0", help="gRPC HOST:PORT (default: a free loopback port)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes sharing the port (postgresql://)")
    parser.add_argument("--agent", choices=sorted(AGENTS), default="echo")
    parser.add_argument(
        "--no-extensions", action="store_true", help="negotiate_extensions=False: no extension interceptor"
    )
    parser.add_argument(
        "--unary-echo",
        choices=("headers", "trailers"),
        default="trailers",
        help="echo_unary_headers: where unary calls echo a2a-extensions (trailers always)",
    )
    parser.add_argument(
        "--push-allow",
        action="append",
        default=[],
        help="PushSettings.allow: a host or CIDR webhooks may reach although local (the bench's receiver: 127.0.0.1)",
    )
    parser.add_argument("--push-allow-http", action="store_true", help="PushSettings.allow_http: plain http webhooks")
    parser.add_argument(
        "--enforce-input-modes", action="store_true", help="enforce_input_modes: parts checked against the card's modes"
    )
    parser.add_argument(
        "--http", action="store_true", help="serve the HTTP faces on a free loopback port too, and announce that port"
    )
    parser.add_argument(
        "--telemetry",
        choices=TELEMETRY,
        default="serve",
        help="off: no access log, metrics or tracing; on: the access log (JSON, INFO, to --access-log-file) and "
        "the metrics; tracing: those and tracing (OTEL_TRACES_EXPORTER=none); serve: as `a2a-grpc serve` by default",
    )
    parser.add_argument("--access-log-file", default=os.devnull, help="where --telemetry on|tracing writes the log")
    parser.add_argument("--jwt-key", help="PEM public key: every call needs a JWT it verifies (with the next two)")
    parser.add_argument("--jwt-issuer", help="the iss a JWT must carry")
    parser.add_argument("--jwt-audience", help="the aud a JWT must carry")
    parser.add_argument("--tls-cert", help="PEM certificate chain: the port speaks TLS (with --tls-key)")
    parser.add_argument("--tls-key", help="the PEM private key of --tls-cert")
    return parser.parse_args(argv)


def auth_settings(args: argparse.Namespace) -> AuthSettings:
    """JWT verification with `--jwt-key` when given, else none."""
    if args.jwt_key is None:
        return AuthSettings()
    jwt = JwtSettings(key_path=args.jwt_key, issuers=(args.jwt_issuer,), audiences=(args.jwt_audience,))
    return AuthSettings(jwt=jwt)


def configure_telemetry(args: argparse.Namespace) -> tuple[bool, bool, bool]:
    """ServerSettings' access_log, metrics and tracing as `--telemetry` sets them, once what they need is set
    up: the access logger's JSON handler, the tracer provider."""
    if args.telemetry == "serve":
        defaults = ServerSettings()
        return defaults.access_log, defaults.metrics, defaults.tracing
    on = args.telemetry != "off"
    if on:
        handler = logging.FileHandler(args.access_log_file)
        handler.setFormatter(JsonFormatter())
        access = logging.getLogger(ACCESS_LOGGER)
        access.setLevel(logging.INFO)
        access.addHandler(handler)
        access.propagate = False
    tracing = args.telemetry == "tracing"
    if tracing:
        os.environ.setdefault("OTEL_TRACES_EXPORTER", "none")
        use_sdk_unless_configured()
    return on, on, tracing


async def serve(args: argparse.Namespace, worker: bool) -> int:
    access_log, metrics, tracing = configure_telemetry(args)
    settings = ServerSettings(
        listen=args.listen,
        http_listen="127.0.0.1:0" if args.http else "",
        store_url=args.store,
        grace_seconds=GRACE_SECONDS,
        missing_version_means="0.3",
        negotiate_extensions=not args.no_extensions,
        echo_unary_headers=args.unary_echo == "headers",
        worker_mode=worker,
        push=PushSettings(allow=tuple(args.push_allow), allow_http=args.push_allow_http),
        access_log=access_log,
        metrics=metrics,
        tracing=tracing,
        auth=auth_settings(args),
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        enforce_input_modes=args.enforce_input_modes,
    )
    agent: AgentExecutor = AGENTS[args.agent]()
    server = A2AServer(settings, agent=agent)
    await server.start()
    watch = _terminate_when_orphaned() if worker else None
    try:
        port = server.http_port if args.http else server.port
        return await serve_until_signalled(port, lambda: server.stop(GRACE_SECONDS))
    finally:
        if watch is not None:
            watch.cancel()


def _terminate_when_orphaned() -> asyncio.Task[bool]:
    """In a worker: SIGTERM itself (so it stops as told to) once its supervisor is gone, however it ended."""
    orphaned = asyncio.Event()
    stop_when_orphaned(orphaned)
    watch = asyncio.ensure_future(orphaned.wait())
    watch.add_done_callback(_terminate_unless_cancelled)
    return watch


def _terminate_unless_cancelled(watch: asyncio.Task[bool]) -> None:
    if not watch.cancelled():
        os.kill(os.getpid(), signal.SIGTERM)


def supervise(args: argparse.Namespace, argv: list[str]) -> int:
    """The parent of `--workers N`: runs this command line again N times as workers, on one held port."""
    with held_ports(args.listen, "") as port_flags:
        command = [sys.executable, "-m", "bench.our_server", *argv, *port_flags]
        return run_async(Supervisor(command, args.workers, GRACE_SECONDS).run())


def configure_logging(telemetry: str) -> None:
    """The root logger as `a2a-grpc serve` sets it up by default (`serve`), or quiet but for warnings."""
    if telemetry == "serve":
        serve_parser = argparse.ArgumentParser()
        add_serve_arguments(serve_parser, environ={})
        defaults = serve_parser.parse_args([])
        configure_logs(defaults.log_level, defaults.log_format)
    else:
        logging.basicConfig(level=logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    configure_logging(args.telemetry)
    if args.workers > 1 and worker_index() is None:
        return supervise(args, argv)
    return run_async(serve(args, worker=args.workers > 1))


if __name__ == "__main__":
    sys.exit(main())
