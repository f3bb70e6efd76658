"""serve's flags, one argument group per section of the table, and the ServerSettings its parsed flags make."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Any

from a2a_grpc.auth import AuthSettings, JwtSettings
from a2a_grpc.push.service import PushSettings
from a2a_grpc.push.worker import DeliverySettings
from a2a_grpc.server import ServerSettings
from a2a_grpc.settings import SECTIONS, SETTINGS, Kind, Setting

_ACTIONS: dict[Kind, str | type[argparse.Action]] = {
    Kind.VALUE: "store",
    Kind.LIST: "append",
    Kind.FLAG: "store_true",
    Kind.ON_OFF: argparse.BooleanOptionalAction,
}


def add_serve_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str] = os.environ) -> None:
    """Every setting's flag, in its section's group; its default is its environment variable's value in
    `environ` when set."""
    for section, settings in SECTIONS.items():
        group = parser.add_argument_group(section)
        for setting in settings:
            _add_flag(group, setting, environ)


def _add_flag(group: argparse._ArgumentGroup, setting: Setting, environ: Mapping[str, str]) -> None:
    options: dict[str, Any] = {"action": _ACTIONS[setting.kind], "default": setting.from_environment(environ)}
    if not setting.switch:
        options.update(type=setting.convert, choices=setting.choices, metavar=setting.metavar)
    group.add_argument(setting.flag, help=flag_help(setting), **options)


def flag_help(setting: Setting) -> str:
    default = setting.default_text() or setting.unset
    return f"{setting.help} [{setting.env}] (default: {default})"


def server_settings(args: argparse.Namespace, **given: Any) -> ServerSettings:
    """The ServerSettings of serve's parsed `args`, and of the fields `given` that no flag sets."""
    direct = {setting.field: getattr(args, setting.key) for setting in SETTINGS if setting.field}
    return ServerSettings(
        **direct,
        card_signing_keys=split(args.card_signing_key),
        interceptors=split(args.interceptor),
        bearer_tokens=parse_tokens(args.auth_token),
        auth=auth_settings(args),
        echo_unary_headers=args.unary_echo == "headers",
        push=push_settings(args),
        **given,
    )


def parse_tokens(values: Sequence[str]) -> dict[str, str]:
    """--auth-token's TOKEN=PRINCIPAL items, by token; SystemExit for a bad one (A2A_GRPC_AUTH_TOKENS is not
    checked as it is read)."""
    tokens: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            token, sep, principal = item.strip().rpartition("=")  # a token may end in base64 padding
            if item.strip():
                if not sep or not token or not principal:
                    raise SystemExit("--auth-token takes TOKEN=PRINCIPAL (the value given is not shown)")
                tokens[token] = principal
    return tokens


def auth_settings(args: argparse.Namespace) -> AuthSettings:
    jwt = None
    if args.jwt_jwks_url or args.jwt_key or args.jwt_issuer or args.jwt_audience:
        jwt = JwtSettings(
            jwks_url=args.jwt_jwks_url or None,
            key_path=args.jwt_key or None,
            issuers=split([args.jwt_issuer or ""]),
            audiences=split([args.jwt_audience or ""]),
            leeway_seconds=args.jwt_leeway,
        )
    return AuthSettings(jwt=jwt, api_keys=args.api_keys or None)


def push_settings(args: argparse.Namespace) -> PushSettings:
    delivery = DeliverySettings(
        status_only=args.push_status_only,
        max_attempts=args.push_max_attempts,
        max_age_seconds=args.push_max_age,
    )
    return PushSettings(
        allow=split(args.push_allow),
        allow_http=args.push_allow_http,
        signing_keys=split(args.push_signing_key),
        timeout_seconds=args.push_timeout,
        delivery=delivery,
    )


def split(values: Sequence[str]) -> tuple[str, ...]:
    """Repeated and comma-joined values, one item each."""
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())
