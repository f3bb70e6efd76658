"""The `a2a-grpc` command line: `serve` (every flag also an environment variable, and a key of the config
file: a2a_grpc.config), `config check` and `config show`, and the client commands `send` and `card`
(a2a_grpc.client.cli)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Coroutine, Sequence
from typing import Any, NoReturn

import a2a_grpc.grpc_core_logs  # first: before anything imports grpc
from a2a_grpc.client.cli import add_client_parsers, run_client_command
from a2a_grpc.config import ConfigError, add_config_parser, resolve, run_config_command
from a2a_grpc.server import A2AServer, serve_until_signalled
from a2a_grpc.settings.flags import add_serve_arguments, server_settings
from a2a_grpc.startup import SettingRefused, built_server, check_processes
from a2a_grpc.store import StoreError, StoreInUseError
from a2a_grpc.telemetry import configure_logs
from a2a_grpc.telemetry.tracing_setup import TracingUnavailable, use_sdk_unless_configured
from a2a_grpc.telemetry.worker_metrics import WORKER_METRICS_DIR_ENV
from a2a_grpc.workers import Supervisor, held_ports, stop_when_orphaned, worker_index

log = logging.getLogger("a2a_grpc.cli")  # not __name__: the workers run it as __main__


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
    )
    add_serve_arguments(serve)


def serve(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """`a2a-grpc serve`, from its parsed `args` and the command line `argv` they were parsed from."""
    configure_logs(args.log_level, args.log_format)
    worker = worker_index() if args.workers > 1 else None
    try:
        check_processes(args)
        if args.workers > 1 and worker is None:
            return supervise(args, argv)
        if args.agent or args.interceptor:
            sys.path.insert(0, os.path.abspath(args.app_dir))  # as `python -m` puts the working directory
        settings = server_settings(args, worker_mode=worker is not None, worker_metrics=_worker_metrics(worker))
        if settings.tracing:
            use_sdk_unless_configured()
        server = built_server(settings)
    except (SettingRefused, TracingUnavailable) as error:
        print(f"a2a-grpc: {error}", file=sys.stderr)
        return 2
    core_logs = a2a_grpc.grpc_core_logs.relay_core_logs(args.log_level, args.log_format)
    try:
        return run_async(_serve(server, f"{worker}/{args.workers}" if worker is not None else None))
    finally:
        if core_logs is not None:
            core_logs.end()


def _worker_metrics(worker: int | None) -> tuple[int, str] | None:
    """In a worker: its index and the directory its parent made for the workers' metrics."""
    directory = os.environ.get(WORKER_METRICS_DIR_ENV)
    return (worker, directory) if worker is not None and directory else None


def supervise(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """The parent of `--workers N`: runs `argv` again N times, on the same concrete ports."""
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
    if worker is not None:
        stop_when_orphaned(stop)
    try:
        await serve_until_signalled(server, stop, started=lambda: _serving_as_worker(worker))
    except StoreInUseError as error:  # met before any task is touched or any port bound: a setting to change
        print(f"a2a-grpc: {error}", file=sys.stderr)
        return 2
    except (OSError, StoreError) as error:
        print(f"a2a-grpc: {error}", file=sys.stderr)
        return 1
    return 0


def _serving_as_worker(worker: str | None) -> None:
    if worker is not None:
        log.info("worker %s (pid %d) serving", worker, os.getpid())


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
    show_parser = add_config_parser(commands)
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
