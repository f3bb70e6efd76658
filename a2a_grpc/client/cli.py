"""The client commands of `a2a-grpc`: `send` and `card`.

Output is made for scripts: stdout carries only ProtoJSON (`send`: one compact document per line,
the SendMessageResponse or each StreamResponse event; `card`: the card, indented), and stderr carries
`a2a-extensions: <activated, comma-joined>` after a response that activated any, and any error
(`card --verify`: the verdict, naming the key that signed). Exit status: 0 on success, 1 when the agent or the transport answered with an error (or
the card's signature does not verify), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from google.protobuf.message import Message as ProtoMessage

from a2a_grpc import setting_types
from a2a_grpc.card.errors import AgentCardError
from a2a_grpc.card.resolution import CARD_FETCH_TIMEOUT_SECONDS, fetch_verified_card, is_card_url
from a2a_grpc.card.verification import CardVerifier
from a2a_grpc.client.agent_client import A2AClient, text_message
from a2a_grpc.client.hints import ClientSide, card_hint, extension_refusal, grpc_hint
from a2a_grpc.encoding import json_document
from a2a_grpc.errors import A2AError
from a2a_grpc.generated import a2a_pb2
from a2a_grpc.protocol import EXTENSIONS_HEADER
from a2a_grpc.tls import ClientTLS, TLSError

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def add_client_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    send = commands.add_parser(
        "send",
        help="send a text message to an agent",
        description="Send TEXT to the agent at TARGET (host:port, or an agent card URL). stdout: the "
        "response as ProtoJSON, one document per line (each stream event on its own line); stderr: "
        f"'{EXTENSIONS_HEADER}: <activated extensions>' when the agent activated any.",
    )
    send.add_argument(
        "target", metavar="TARGET", help="HOST:PORT (grpcs://HOST:PORT for TLS), or http(s) URL of the agent card"
    )
    send.add_argument("text", metavar="TEXT")
    send.add_argument("--stream", action="store_true", help="use SendStreamingMessage")
    send.add_argument(
        "--metadata",
        "-m",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an entry of SendMessageRequest.metadata (the request message's field, not a gRPC header); VALUE is "
        "JSON when it parses, else a string (repeat)",
    )
    send.add_argument("--task-id", default="", help="continue this task")
    send.add_argument("--context-id", default="", help="send in this context")
    send.add_argument("--return-immediately", action="store_true", help="do not wait for the task to settle")
    _add_call_options(send)

    card = commands.add_parser(
        "card",
        help="print an agent card",
        description="Print the agent card as ProtoJSON. The public card is served over HTTP: give an "
        "http(s) URL, or HOST:PORT with --card-url; --extended asks HOST:PORT for the extended card over gRPC. "
        "--verify checks the public card's signature (RFC 7515 over its RFC 8785 form) before printing it.",
    )
    card.add_argument("target", metavar="TARGET", help="http(s) URL of the agent (card), or HOST:PORT")
    card.add_argument("--card-url", default=None, help="where the public card of HOST:PORT is served")
    card.add_argument("--extended", action="store_true", help="GetExtendedAgentCard over gRPC (authenticated)")
    card.add_argument(
        "--verify",
        action="store_true",
        help="check the card's signature first: exit status 1, and no card, unless one verifies; stderr names "
        "the key that signed",
    )
    card.add_argument(
        "--jwks",
        action="append",
        default=[],
        metavar="URL|FILE",
        help="with --verify: trust the keys of this JWKS (an http(s) URL or a file) or PEM public key (repeat); "
        "a signature's jku is followed only to the card's own origin or to a URL given here",
    )
    _add_call_options(card)


def _add_call_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--extension", "-e", action="append", default=[], metavar="URI", help="request an extension (repeat)"
    )
    parser.add_argument(
        "--header",
        "-H",
        action="append",
        default=[],
        metavar="'KEY: VALUE'",
        help="gRPC metadata to send, e.g. 'authorization: Bearer TOKEN' (repeat)",
    )
    parser.add_argument("--timeout", type=setting_types.seconds, default=None, help="deadline in seconds")
    parser.add_argument("--a2a-version", default="1.0", help="the a2a-version to send (default 1.0)")
    parser.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="PEM CA certificates to trust: the call is made over TLS (so is a grpcs:// address); an https:// "
        "card URL trusts them besides the system's",
    )
    parser.add_argument(
        "--tls-cert",
        type=setting_types.plain_text,
        metavar="FILE",
        help="PEM client certificate, for mutual TLS (with --tls-key)",
    )
    parser.add_argument(
        "--tls-key", type=setting_types.plain_text, metavar="FILE", help="the unencrypted PEM private key of --tls-cert"
    )


async def run_client_command(args: argparse.Namespace) -> int:
    try:
        if args.command == "send":
            return await _send(args)
        return await _card(args)
    except (_UsageError, TLSError) as error:
        print(f"a2a-grpc {args.command}: {error}", file=sys.stderr)
        return EXIT_USAGE
    except A2AError as error:
        print(describe_error(error, grpc_hint(error, _client_side(args))), file=sys.stderr)
        return EXIT_ERROR
    except AgentCardError as error:
        url = args.target if is_card_url(args.target) else getattr(args, "card_url", None) or ""
        print(_with_hint(f"a2a-grpc: {error}", card_hint(str(error), url, _client_side(args))), file=sys.stderr)
        return EXIT_ERROR


class _UsageError(Exception):
    pass


def _client_side(args: argparse.Namespace) -> ClientSide:
    tls = bool(args.tls_ca or args.tls_cert) or args.target.startswith(("grpcs://", "https://"))
    return ClientSide(tls=tls, client_certificate=bool(args.tls_cert))


def _with_hint(line: str, hint: str | None) -> str:
    return f"{line} ({hint})" if hint else line


def describe_error(error: A2AError, hint: str | None = None) -> str:
    """`CODE REASON: message` (`CODE: message` without a reason), with `hint` and a refusal's `--extension` flags;
    then its ErrorInfo metadata and BadRequest violations, one per line."""
    status = f"{error.code.name} {error.reason}" if error.reason else error.code.name
    lines = [_with_hint(f"a2a-grpc: {status}: {extension_refusal(error)}", hint)]
    lines.extend(f"  {key}: {value}" for key, value in sorted(error.metadata.items()))
    lines.extend(f"  {field}: {description}" for field, description in error.violations)
    return "\n".join(lines)


def parse_headers(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    headers: list[tuple[str, str]] = []
    for value in values:
        key, sep, item = value.partition(":")
        if not sep or not key.strip():
            raise _UsageError(f"--header takes 'KEY: VALUE', got {value!r}")
        headers.append((key.strip().lower(), item.strip()))
    return tuple(headers)


def parse_metadata(values: Sequence[str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise _UsageError(f"--metadata takes KEY=VALUE, got {value!r}")
        try:
            metadata[key] = json.loads(item)
        except json.JSONDecodeError:
            metadata[key] = item
    return metadata


def proto_json(message: ProtoMessage, indent: int | None = None) -> str:
    data = json_document(message)
    return json.dumps(data, indent=indent, ensure_ascii=False, separators=None if indent else (",", ":"))


async def _connect(args: argparse.Namespace, extensions: Sequence[str] = ()) -> A2AClient:
    return await A2AClient.connect(
        args.target,
        extensions=extensions,
        version=args.a2a_version,
        headers=parse_headers(args.header),
        timeout=args.timeout,
        tls_ca=args.tls_ca,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )


async def _send(args: argparse.Namespace) -> int:
    metadata = parse_metadata(args.metadata)
    configuration = a2a_pb2.SendMessageConfiguration(return_immediately=args.return_immediately)
    message = text_message(args.text, task_id=args.task_id, context_id=args.context_id)
    async with await _connect(args, args.extension) as client:
        if args.stream:
            stream = client.send_streaming_message(message, metadata=metadata, configuration=configuration)
            async with stream:
                async for event in stream:
                    print(proto_json(event), flush=True)
            activated = stream.activated_extensions
        else:
            result = await client.send_message(message, metadata=metadata, configuration=configuration)
            print(proto_json(result.value), flush=True)
            activated = result.activated_extensions
    _print_activated(activated)
    return EXIT_OK


def _print_activated(extensions: Sequence[str]) -> None:
    """The extensions the agent activated, as the header it echoed them in; nothing when it activated none."""
    if extensions:
        print(f"{EXTENSIONS_HEADER}: {','.join(extensions)}", file=sys.stderr)


async def _card(args: argparse.Namespace) -> int:
    if args.jwks and not args.verify:
        raise _UsageError("--jwks goes with --verify")
    if args.extended:
        if args.verify:
            raise _UsageError("--verify checks the public card, served over HTTP: leave out --extended")
        if is_card_url(args.target):
            raise _UsageError("--extended takes the agent's gRPC HOST:PORT")
        async with await _connect(args, args.extension) as client:
            result = await client.get_extended_card()
        print(proto_json(result.value, indent=2))
        _print_activated(result.activated_extensions)
        return EXIT_OK
    url = args.target if is_card_url(args.target) else args.card_url
    if url is None:
        raise _UsageError(
            f"{args.target} is a gRPC address, and A2A 1.0 serves the public agent card over HTTP at "
            "/.well-known/agent-card.json: give the agent's http(s) URL, or --card-url URL "
            "(--extended fetches the extended card over gRPC)"
        )
    tls = ClientTLS(args.tls_ca, args.tls_cert, args.tls_key)
    try:
        verifier = CardVerifier.trusting(args.jwks, tls) if args.verify else None
    except ValueError as error:
        raise _UsageError(str(error)) from None
    timeout = CARD_FETCH_TIMEOUT_SECONDS if args.timeout is None else args.timeout
    card, verdict = await fetch_verified_card(url, verifier, timeout, tls=tls)
    if verdict is not None:
        print(verdict.describe(), file=sys.stderr)
    print(proto_json(card, indent=2))
    return EXIT_OK
