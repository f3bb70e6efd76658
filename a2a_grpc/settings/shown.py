"""A setting's value as `a2a-grpc config show` prints it: in TOML, its secrets redacted."""

from __future__ import annotations

import math
import re
from typing import Any

from a2a_grpc.settings.setting import Setting

REDACTED = "***"
# a URL's password (scheme://user:PASSWORD@host: up to the last @, so a password with a / in it is covered too)
URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:@/]*:)(.*)@")
URL_SECRET_PARAMETER = re.compile(r"([?&](?:password|passwd|sslpassword|token|secret)=)[^&#]*", re.IGNORECASE)


def redact(setting: Setting, value: Any) -> Any:
    """`value` of `setting` fit to show: the token of each TOKEN=PRINCIPAL of a secret setting, and the password
    in any URL, replaced by ***."""
    if isinstance(value, list | tuple):
        return [redact(setting, item) for item in value]
    if not isinstance(value, str):
        return value
    if setting.secret:
        return ",".join(_redact_token(item) for item in value.split(","))
    return URL_SECRET_PARAMETER.sub(rf"\g<1>{REDACTED}", URL_PASSWORD.sub(rf"\g<1>{REDACTED}@", value))


def _redact_token(item: str) -> str:
    token, sep, principal = item.strip().rpartition("=")
    if not item.strip():
        return item
    return f"{REDACTED}={principal}" if sep and token else REDACTED


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return number_text(value) if not math.isfinite(value) else repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return _toml_string(str(value))


def _toml_string(text: str) -> str:
    escaped: list[str] = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif char < " " or char == "\x7f":
            escaped.append(f"\\u{ord(char):04x}")
        elif "\ud800" <= char <= "\udfff":  # an undecodable byte of the environment: TOML has no such character
            escaped.append("\ufffd")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def number_text(number: int | float) -> str:
    if isinstance(number, float) and not math.isfinite(number):
        return "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")
    return str(number)
